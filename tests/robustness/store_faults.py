"""Shared by the store fault tests (full disk, descriptor exhaustion, start-up at scale): a real
broker process -- ``python -m pyrmq standalone``, NameServer and broker in one -- with its own
broker.conf, log and store directory, and a small tmpfs mounted for one test.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.remoting.client import RemotingClient
from tests.broker.conftest import free_port
from tests.broker.rmq import pull

# Small files so that a few megabytes hold several of each (defaults: 1 GiB, 6 MB, 420 MB).
SMALL_FILES = {"mappedFileSizeCommitLog": 1024 * 1024, "mappedFileSizeConsumeQueue": 20 * 1000,
               "maxHashSlotNum": 1000, "maxIndexNum": 4000}


class BrokerProcess:
    """One standalone process; ``start`` again after ``stop`` restarts it on the same store."""

    def __init__(self, workdir: Path, store: Path, **conf: object) -> None:
        self.workdir = workdir
        self.store = store
        self.namesrv_port = free_port()
        self.listen_port = free_port()
        self.conf = workdir / "broker.conf"
        lines = {"brokerName": "broker-a", "listenPort": self.listen_port, "brokerIP1": "127.0.0.1",
                 "bindAddress": "127.0.0.1", "storePathRootDir": store, **conf}
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        self.log = workdir / "pyrmq.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pyrmq", "standalone", "-c", str(self.conf),
                 "--namesrv-port", str(self.namesrv_port)],
                stdout=log, stderr=subprocess.STDOUT)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_ready(self, client: RemotingClient, timeout: float = 30) -> None:
        with trio.fail_after(timeout):
            while True:
                try:
                    route = await client.invoke(self.namesrv_addr, make_request(
                        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), timeout=1)
                    if route.code == ResponseCode.SUCCESS:
                        return
                except OSError:
                    pass
                assert self.alive(), self.log_text()[-3000:]
                await trio.sleep(0.1)


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[type[BrokerProcess]]:
    """``broker_process(workdir, store, **conf)``; every process made is killed at the end."""
    made: list[BrokerProcess] = []

    def make(workdir: Path, store: Path, **conf: object) -> BrokerProcess:
        broker = BrokerProcess(workdir, store, **conf)
        made.append(broker)
        return broker

    yield make  # type: ignore[misc]
    for broker in made:
        broker.kill()


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path``, unmounted at the end.  Skipped where mounting is not
    allowed, except under CI=true, where the test must run."""
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        why = f"cannot mount a tmpfs at {path}: {result.stderr.strip() or result.returncode}"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def scratch_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs at ``path`` where mounting is allowed -- quick to fill with thousands of files --
    else the plain directory (the test is the same, only slower)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True).returncode == 0
    try:
        yield path
    finally:
        if mounted and subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill_file(path: Path, nbytes: int | None = None) -> None:
    """Write ``nbytes`` of real blocks (a filler taking space on a small filesystem); None: until
    the filesystem is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if nbytes is not None:
            os.write(fd, b"\xa5" * nbytes)
            return
        for chunk in (b"\xa5" * 65536, b"\xa5" * 4096, b"\xa5"):
            try:
                while True:
                    os.write(fd, chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)


async def pull_all(client: RemotingClient, addr: str, topic: str, queue_id: int) -> list[tuple[int, bytes]]:
    """Every message of a queue as (queue offset, body), read from offset 0."""
    found: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        resp, messages = await pull(client, addr, topic, queue_id, offset)
        if resp.code != ResponseCode.SUCCESS:
            return found
        found.extend((m.queue_offset, m.body) for m in messages)
        offset = int((resp.ext_fields or {})["nextBeginOffset"])


def is_store_refusal(resp: RemotingCommand) -> bool:
    """Apache's answers to a put the store cannot place: the disk is full, or a file could not
    be created (SendMessageProcessor.handlePutMessageResult)."""
    remark = resp.remark or ""
    return ((resp.code == ResponseCode.SERVICE_NOT_AVAILABLE and "disk is full" in remark)
            or (resp.code == ResponseCode.SYSTEM_ERROR and remark == "create mapped file failed, server is busy or broken."))

"""Shared by the store fault tests (full disk, descriptor exhaustion, start-up at scale): a real
broker process (broker_process.py) with its store where the test wants it, a small tmpfs mounted
for one test, filler files, and Apache's refusals of a put the store cannot place.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.store import index_service
from tests.robustness.broker_process import BrokerProcess, pull_queue

__all__ = ["BrokerProcess", "broker_process", "fill_file", "index_batch_of_one", "is_store_refusal", "pull_queue",
           "scratch_tmpfs", "tmpfs"]

# Small files so that a few megabytes hold several of each (defaults: 1 GiB, 6 MB, 420 MB).
SMALL_FILES = {"mappedFileSizeCommitLog": 1024 * 1024, "mappedFileSizeConsumeQueue": 20 * 1000,
               "maxHashSlotNum": 1000, "maxIndexNum": 4000}


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """``broker_process(workdir, store, **conf)``: a standalone process (broker_process.py) with
    its store at ``store`` and ASYNC_FLUSH unless ``conf`` says otherwise; killed at the end."""
    made: list[BrokerProcess] = []

    def make(workdir: Path, store: Path, **conf: object) -> BrokerProcess:
        broker = BrokerProcess(workdir, **{"storePathRootDir": store, "flushDiskType": "ASYNC_FLUSH", **conf})
        made.append(broker)
        return broker

    yield make
    for broker in made:
        broker.kill()


@pytest.fixture
def index_batch_of_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each record's keys are indexed at its put (a batch of one): the put whose index file cannot
    be created is then the one refused, so a test can stall the pipeline on an index file."""
    monkeypatch.setattr(index_service, "INDEX_BATCH", 1)


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


def is_store_refusal(resp: RemotingCommand) -> bool:
    """Apache's answers to a put the store cannot place: the disk is full, or a file could not
    be created (SendMessageProcessor.handlePutMessageResult)."""
    remark = resp.remark or ""
    return ((resp.code == ResponseCode.SERVICE_NOT_AVAILABLE and "disk is full" in remark)
            or (resp.code == ResponseCode.SYSTEM_ERROR and remark == "create mapped file failed, server is busy or broken."))

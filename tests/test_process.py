"""The real process: `python -m pyrmq standalone` started, signalled and killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import trio

from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from tests.broker.conftest import free_port
from tests.broker.rmq import pull, send


class Standalone:
    def __init__(self, tmp_path, **conf):
        self.namesrv_port = free_port()
        self.listen_port = free_port()
        self.conf = tmp_path / "broker.conf"
        lines = {"brokerName": "broker-a", "listenPort": self.listen_port, "brokerIP1": "127.0.0.1",
                 "bindAddress": "127.0.0.1", "storePathRootDir": tmp_path / "store",
                 "mappedFileSizeCommitLog": 1024 * 1024, **conf}
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        self.store = tmp_path / "store"
        self.log = tmp_path / "pyrmq.log"
        self.proc: subprocess.Popen | None = None

    @property
    def broker_addr(self):
        return f"127.0.0.1:{self.listen_port}"

    @property
    def namesrv_addr(self):
        return f"127.0.0.1:{self.namesrv_port}"

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pyrmq", "standalone", "-c", str(self.conf), "--namesrv-port", str(self.namesrv_port)],
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)

    def stop(self, sig=signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=20)

    async def wait_ready(self, client: RemotingClient):
        with trio.fail_after(20):
            while True:
                try:
                    route = await client.invoke(self.namesrv_addr, make_request(
                        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), timeout=1)
                    if route.code == 0:
                        return
                except OSError:
                    pass
                assert self.proc.poll() is None, self.log.read_text()
                await trio.sleep(0.1)


@pytest.fixture
def standalone(tmp_path):
    servers = []

    def make(**conf):
        server = Standalone(tmp_path, **conf)
        servers.append(server)
        return server

    yield make
    for server in servers:
        if server.proc and server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


async def test_sigterm_is_a_clean_stop(standalone):
    server = standalone()
    server.start()
    async with RemotingClient() as client:
        await server.wait_ready(client)
        assert (server.store / "abort").exists()
        assert (await send(client, server.broker_addr, "TopicP", b"x")).code == 0
    assert server.stop() == 0
    assert not (server.store / "abort").exists()
    assert "broker stopped" in server.log.read_text()
    topics = fastjson.loads((server.store / "config" / "topics.json").read_text())
    assert "TopicP" in topics["topicConfigTable"]


@pytest.mark.slow
async def test_kill_9_under_sync_flush_loses_no_acknowledged_message(standalone):
    server = standalone(flushDiskType="SYNC_FLUSH")
    server.start()
    acked: list[bytes] = []
    async with RemotingClient() as client:
        await server.wait_ready(client)

        async def producer(worker: int):
            i = 0
            while True:
                body = f"w{worker}-{i}".encode()
                try:
                    resp = await send(client, server.broker_addr, "TopicK", body, queue_id=worker % 4)
                except Exception:
                    return
                if resp.code == 0:
                    acked.append(body)
                i += 1

        async with trio.open_nursery() as nursery:
            for w in range(8):
                nursery.start_soon(producer, w)
            while len(acked) < 300:
                await trio.sleep(0.01)
            server.proc.send_signal(signal.SIGKILL)   # mid-stream, sends in flight
            server.proc.wait()
            await trio.sleep(0.2)
            nursery.cancel_scope.cancel()
    assert (server.store / "abort").exists()        # the next start recovers abnormally
    server.start()
    async with RemotingClient() as client:
        await server.wait_ready(client)
        stored = []
        for queue_id in range(4):
            offset = 0
            while True:
                resp, messages = await pull(client, server.broker_addr, "TopicK", queue_id, offset)
                if resp.code != 0:
                    break
                stored.extend(m.body for m in messages)
                offset = int(resp.ext_fields["nextBeginOffset"])
    missing = set(acked) - set(stored)
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
    assert len(stored) == len(set(stored))
    assert server.stop() == 0


def _pyrmq(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyrmq", *args], capture_output=True, text=True, timeout=60)


async def test_health_answers_for_a_running_server_and_o_overrides_the_conf(tmp_path):
    """`pyrmq health` (the image's HEALTHCHECK) over the remoting protocol, against a standalone whose
    listenPort comes from `-o` (the conf file names another port)."""
    server = Standalone(tmp_path)
    port = free_port()
    server.proc = subprocess.Popen(
        [sys.executable, "-m", "pyrmq", "standalone", "-c", str(server.conf), "--namesrv-port", str(server.namesrv_port),
         "-o", f"listenPort={port}"], stdout=open(server.log, "ab"), stderr=subprocess.STDOUT)
    try:
        async with RemotingClient() as client:
            await server.wait_ready(client)
        ok = await trio.to_thread.run_sync(_pyrmq, "health", "-b", f"127.0.0.1:{port}", "-n", server.namesrv_addr)
        assert (ok.returncode, ok.stderr) == (0, "")
        # the conf file's port is not the one listening
        bad = await trio.to_thread.run_sync(_pyrmq, "health", "-b", server.broker_addr, "--timeout", "1")
        assert bad.returncode == 1 and f"broker {server.broker_addr}:" in bad.stderr
    finally:
        assert server.stop() == 0
    down = await trio.to_thread.run_sync(_pyrmq, "health", "-b", f"127.0.0.1:{port}", "-n", server.namesrv_addr,
                                         "--timeout", "1")
    assert down.returncode == 1 and len(down.stderr.strip().splitlines()) == 2, down.stderr


def test_o_wants_key_equals_value(tmp_path):
    result = _pyrmq("broker", "-o", "listenPort")
    assert result.returncode == 2 and "-o wants KEY=VALUE, got 'listenPort'" in result.stderr


def test_version():
    from importlib.metadata import version

    result = _pyrmq("--version")
    assert result.returncode == 0 and result.stdout.startswith(f"pyrmq {version('pyrmq')} "), result


def test_log_level_is_checked_whether_flag_or_environment():
    flag = _pyrmq("--log-level", "verbose", "broker")
    assert flag.returncode == 2 and "invalid choice: 'VERBOSE'" in flag.stderr
    env = subprocess.run([sys.executable, "-m", "pyrmq", "broker"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYRMQ_LOG_LEVEL": "loud"})
    assert env.returncode == 2 and "'LOUD' is not one of DEBUG, INFO, WARNING, ERROR" in env.stderr


async def test_a_second_server_on_taken_ports_or_a_locked_store_is_one_clear_line(standalone, tmp_path):
    """What a newcomer meets first: the error names the role and the port, or the store and its lock;
    no traceback."""
    first = standalone()
    first.start()
    async with RemotingClient() as client:
        await first.wait_ready(client)
    # the same broker.conf again: its NameServer port is the first thing taken
    same = await trio.to_thread.run_sync(_pyrmq, "standalone", "-c", str(first.conf),
                                         "--namesrv-port", str(first.namesrv_port))
    assert same.returncode == 1 and "Traceback" not in same.stderr, same.stderr
    assert (f"cannot run: namesrv: port {first.namesrv_port} on 127.0.0.1 is already in use "
            "(another NameServer or broker? change its port or stop it)") in same.stderr
    # a free NameServer port and another store, the broker's port taken
    broker = await trio.to_thread.run_sync(_pyrmq, "standalone", "-c", str(first.conf),
                                           "--namesrv-port", str(free_port()),
                                           "-o", f"storePathRootDir={tmp_path / 'other-store'}")
    assert broker.returncode == 1 and "Traceback" not in broker.stderr, broker.stderr
    taken = {f"HA service (haListenPort): port {first.listen_port + 1}", f"broker: port {first.listen_port}",
             f"broker-fast: port {first.listen_port - 2}"}
    [line] = [ln for ln in broker.stderr.splitlines() if "ERROR" in ln]
    assert any(f"cannot run: {role} on 127.0.0.1 is already in use" in line for role in taken), line
    # free ports, the same store: the lock refuses it, in one line
    locked = await trio.to_thread.run_sync(_pyrmq, "standalone", "-c", str(first.conf), "--namesrv-port",
                                           str(free_port()), "-o", f"listenPort={free_port()}")
    assert locked.returncode == 1 and "Traceback" not in locked.stderr, locked.stderr
    [line] = [ln for ln in locked.stderr.splitlines() if "ERROR" in ln]
    assert line.endswith(f"cannot run: Lock failed, MQ already started: another broker holds the store "
                         f"{first.store} (its lock file {first.store / 'lock'})"), line
    assert first.stop() == 0


async def test_log_file_takes_the_log(tmp_path):
    server = Standalone(tmp_path)
    log_file = tmp_path / "logs" / "pyrmq.log"
    log_file.parent.mkdir()
    server.proc = subprocess.Popen(
        [sys.executable, "-m", "pyrmq", "--log-file", str(log_file), "--log-level", "info", "standalone",
         "-c", str(server.conf), "--namesrv-port", str(server.namesrv_port)],
        stdout=open(server.log, "ab"), stderr=subprocess.STDOUT)
    try:
        async with RemotingClient() as client:
            await server.wait_ready(client)
    finally:
        assert server.stop() == 0
    text = log_file.read_text()
    assert f"broker listening on 127.0.0.1:{server.listen_port}" in text and "broker stopped" in text
    assert server.log.read_text() == ""   # nothing on stderr
    missing = _pyrmq("--log-file", str(tmp_path / "no" / "such" / "dir.log"), "broker")
    assert missing.returncode == 2 and "pyrmq: cannot open the log file" in missing.stderr

"""A real ``python -m pyrmq standalone`` process for the crash tests, the traffic that runs into a
crash, and the checks made after the restart.

- :class:`BrokerProcess` starts the server on free loopback ports (optionally with
  ``PYRMQ_CRASH_POINT`` set), waits until it serves, waits for it to die, restarts it on the same
  store and ports.
- :func:`send_until_dead` runs concurrent senders (the small client of ``tests/broker/rmq.py``
  over ``pyrmq.remoting.client``) until the process is gone, and records every SEND_OK.
- :func:`check_store` then proves, over the network, that every acknowledged message is pullable
  at the queue offset its acknowledgement gave, with its exact body, that every queue is
  contiguous, that QUERY_MESSAGE finds each one by key, and that every config file reads back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import trio

from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import decode_messages
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.channel import ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.client import RemotingClient
from tests.broker.conftest import free_port
from tests.broker.rmq import pull, send

LONG_MAX = 2**63 - 1
START_TIMEOUT_S = 30
QUEUES = 4


@dataclass(frozen=True)
class Ack:
    """One SEND_OK: what was sent and where the broker said it went."""

    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    key: str


class BrokerProcess:
    """``python -m pyrmq standalone`` in ``workdir`` (store under ``workdir/store``)."""

    def __init__(self, workdir: Path, **conf: object) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.namesrv_port = free_port()
        self.listen_port = free_port()
        self.store = workdir / "store"
        self.conf = workdir / "broker.conf"
        lines = {"brokerName": "broker-a", "listenPort": self.listen_port, "brokerIP1": "127.0.0.1",
                 "bindAddress": "127.0.0.1", "storePathRootDir": self.store, "flushDiskType": "SYNC_FLUSH",
                 **conf}
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        self.log = workdir / "pyrmq.log"
        self.proc: subprocess.Popen | None = None

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def start(self, crash_point: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYRMQ_CRASH_POINT"}
        if crash_point:
            env["PYRMQ_CRASH_POINT"] = crash_point
        with open(self.log, "ab") as out:
            out.write(f"=== start, crash point {crash_point}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pyrmq", "standalone", "-c", str(self.conf),
                 "--namesrv-port", str(self.namesrv_port)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def wait_ready(self, client: RemotingClient) -> None:
        with trio.fail_after(START_TIMEOUT_S):
            while True:
                assert self.alive(), f"the broker exited while starting:\n{self.log_tail()}"
                try:
                    route = await client.invoke(self.namesrv_addr, make_request(
                        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), timeout=1)
                    if route.code == 0:
                        return
                except (OSError, ChannelClosedError, RemotingTimeoutError, trio.BrokenResourceError):
                    pass   # not listening yet
                await trio.sleep(0.05)

    async def wait_exit(self, timeout: float = 30) -> int:
        assert self.proc is not None
        with trio.fail_after(timeout):
            while self.proc.poll() is None:
                await trio.sleep(0.02)
        return self.proc.returncode

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def crashed_at(self, point: str) -> bool:
        return f"crash point {point} reached" in self.log.read_text(errors="replace")


@dataclass
class Traffic:
    """Acknowledged sends, and every body ever attempted (acknowledged or not)."""

    acks: list[Ack] = field(default_factory=list)
    attempted: set[bytes] = field(default_factory=set)
    failures: int = 0


def topic_of(worker: int, i: int) -> str:
    """Two long-lived topics, and now and then a new one, so topics.json changes under traffic."""
    if worker == 0 and i % 25 == 24:
        return f"CrashNew{i // 25}"
    return f"Crash{worker % 2}"


async def send_until_dead(server: BrokerProcess, client: RemotingClient, traffic: Traffic, *,
                          workers: int = 6, max_per_worker: int = 100_000, timeout: float = 60,
                          prefix: str = "m", pause: float = 0) -> None:
    """Send from ``workers`` tasks until the process dies (or each sent ``max_per_worker``)."""

    async def worker(w: int) -> None:
        for i in range(max_per_worker):
            topic = topic_of(w, i)
            body = f"{prefix}-{w}-{i}-".encode() + bytes([65 + (i + w) % 26]) * (i % 300)
            key = f"{prefix}k{w}x{i}"
            traffic.attempted.add(body)
            try:
                resp = await send(client, server.broker_addr, topic, body, keys=key, queue_id=i % QUEUES)
            except (OSError, ChannelClosedError, RemotingTimeoutError, trio.BrokenResourceError):
                # connection closed or refused: the process is (going) away
                traffic.failures += 1
                if not server.alive():
                    return
                await trio.sleep(0.01)
                continue
            if resp.code == 0:
                traffic.acks.append(Ack(topic, i % QUEUES, int(resp.ext_fields["queueOffset"]), body, key))
            else:
                traffic.failures += 1
            if pause:
                await trio.sleep(pause)

    with trio.fail_after(timeout):
        async with trio.open_nursery() as nursery:
            for w in range(workers):
                nursery.start_soon(worker, w)


async def pull_queue(client: RemotingClient, addr: str, topic: str, queue_id: int) -> list[tuple[int, bytes]]:
    """(queue offset, body) of every message of a queue, from offset 0 to the end."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        resp, messages = await pull(client, addr, topic, queue_id, offset, max_nums=32)
        if resp.code != 0 or not messages:
            return out
        out.extend((m.queue_offset, m.body) for m in messages)
        offset = int(resp.ext_fields["nextBeginOffset"])


async def query_key(client: RemotingClient, addr: str, topic: str, key: str) -> list[bytes]:
    header = {"topic": topic, "key": key, "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(LONG_MAX)}
    resp = await client.invoke(addr, make_request(RequestCode.QUERY_MESSAGE, header), timeout=10)
    return [m.body for m in decode_messages(resp.body)] if resp.code == 0 and resp.body else []


def config_files(store: Path) -> list[Path]:
    """Every JSON config file of the broker and the embedded NameServer, with their backups."""
    found = []
    for directory in (store / "config", store / "namesrv"):
        if directory.is_dir():
            found += sorted(p for p in directory.iterdir() if p.name.endswith((".json", ".json.bak")))
    return found


def check_config_files(store: Path) -> list[str]:
    """The config files that do not parse (must be none); a leftover .tmp is allowed."""
    bad = []
    for path in config_files(store):
        try:
            fastjson.loads(path.read_text("utf-8"))
        except Exception as exc:
            bad.append(f"{path.name}: {exc!r}")
    return bad


async def check_store(client: RemotingClient, addr: str, traffic: Traffic, *, query: bool = True) -> dict[str, int]:
    """Everything acknowledged is there, in contiguous queues, findable by key; returns counts."""
    topics = sorted({a.topic for a in traffic.acks} | {"Crash0", "Crash1"})
    stored: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    for topic in topics:
        for queue_id in range(QUEUES):
            stored[(topic, queue_id)] = await pull_queue(client, addr, topic, queue_id)
    for (topic, queue_id), units in stored.items():
        offsets = [o for o, _ in units]
        assert offsets == list(range(len(offsets))), f"{topic}/{queue_id}: offsets not contiguous: {offsets[:20]}"
    by_place = {(t, q, o): body for (t, q), units in stored.items() for o, body in units}
    lost = [a for a in traffic.acks if by_place.get((a.topic, a.queue_id, a.queue_offset)) != a.body]
    assert not lost, (f"{len(lost)} of {len(traffic.acks)} acknowledged messages lost or moved, e.g. "
                      f"{[(a.topic, a.queue_id, a.queue_offset, a.body[:20]) for a in lost[:5]]}")
    bodies = [body for body in by_place.values()]
    unknown = [b for b in bodies if b not in traffic.attempted]
    assert not unknown, f"{len(unknown)} stored messages were never sent: {unknown[:3]}"
    counts: defaultdict[bytes, int] = defaultdict(int)
    for b in bodies:
        counts[b] += 1
    duplicates = {b: n for b, n in counts.items() if n > 1}
    assert not duplicates, f"stored twice: {list(duplicates.items())[:5]}"
    if query:
        missing = []
        for a in traffic.acks:
            if a.body not in await query_key(client, addr, a.topic, a.key):
                missing.append(a.key)
        assert not missing, f"QUERY_MESSAGE misses {len(missing)} acknowledged keys, e.g. {missing[:5]}"
    return {"acked": len(traffic.acks), "stored": len(bodies), "attempted": len(traffic.attempted)}


async def check_writes_continue(client: RemotingClient, addr: str, traffic: Traffic) -> None:
    """A send to every queue after the restart lands right after the last stored message."""
    for topic in sorted({a.topic for a in traffic.acks}):
        for queue_id in range(QUEUES):
            expected = len(await pull_queue(client, addr, topic, queue_id))
            resp = await send(client, addr, topic, b"after-restart", keys="after", queue_id=queue_id)
            assert resp.code == 0, resp.remark
            assert int(resp.ext_fields["queueOffset"]) == expected, (topic, queue_id)

"""The idle-consumers row of side_by_side.py: --idle-consumers long-polling pull requests held by
one broker, and what holding them costs it.

A push consumer's steady state on an empty queue is one PULL_MESSAGE with the suspend flag and a
suspendTimeoutMillis that the broker holds until a message arrives or the timeout passes; then
the client asks again at once. Thousands of Java push consumers do not fit one JVM, so this
client speaks that request directly: --idle-connections sockets (one consumer group each, as one
client instance per group) carry the requests, each answered request is sent again. After all
are placed and a settle, the broker process(es)' CPU is measured over --idle-seconds."""

from __future__ import annotations

import collections
import socket
import threading
import time

from compat_tests.servers import LOOPBACK

from .harness import (
    Env,
    Measure,
    RowOutput,
    cpu_seconds,
    create_topic,
    discard_into,
    fmt,
    kinds_in_order,
    make_server,
    quiet_wait,
    server_pids,
)
from .wire import FrameReader, pull_frame

TOPIC = "BenchIdle"
# PullSysFlag: suspend (long polling) + the subscription carried in the request, as the push
# consumer sends on its first pull (no heartbeat needed for the broker to filter).
SYS_FLAG_SUSPEND_SUBSCRIPTION = 0x2 | 0x4
# The push consumer's BROKER_SUSPEND_MAX_TIME_MILLIS.
SUSPEND_TIMEOUT_MS = 15_000
SETTLE_S = 3.0


class Poller(threading.Thread):
    """One connection holding ``count`` suspended pulls of one consumer group."""

    def __init__(self, addr: tuple[str, int], group: str, first_queue: int, count: int, queues: int,
                 answers: collections.Counter, lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(addr, timeout=10)
        self.sock.settimeout(None)
        self.group, self.first_queue, self.count, self.queues = group, first_queue, count, queues
        self.answers, self.lock = answers, lock
        self.opaque = 0
        self.error: str | None = None

    def pull(self, queue_id: int) -> bytes:
        self.opaque += 1
        return pull_frame(self.group, TOPIC, queue_id, 0, self.opaque * self.queues + queue_id,
                          sys_flag=SYS_FLAG_SUSPEND_SUBSCRIPTION, suspend_ms=SUSPEND_TIMEOUT_MS, sub_version=1)

    def run(self) -> None:
        try:
            self.sock.sendall(b"".join(self.pull((self.first_queue + i) % self.queues) for i in range(self.count)))
            reader = FrameReader(self.sock)
            while True:
                header, _ = reader.next_frame()
                with self.lock:
                    self.answers[header.get("code")] += 1
                self.sock.sendall(self.pull(int(header.get("opaque", 0)) % self.queues))
        except OSError as exc:
            self.error = repr(exc)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def run(env: Env, kinds: list[str], rep: int) -> RowOutput:
    args = env.args
    out = RowOutput()
    n, conns = args.idle_consumers, max(1, min(args.idle_connections, args.idle_consumers))
    table = []
    for kind in kinds_in_order(kinds, rep):
        label = f"[{kind:>6}]"
        print(f"== idle: {n:,} long-polling pulls on {conns} connections: {kind}", flush=True)
        workdir = env.workdir(f"{kind}-idle")
        server, logs = make_server(env, kind, workdir)
        pollers: list[Poller] = []
        pct, cpu_s, answered, during = None, None, collections.Counter(), collections.Counter()
        try:
            quiet_wait(env, label)
            server.start()
            create_topic(server, TOPIC, args.queues)
            lock = threading.Lock()
            addr = (LOOPBACK, server.config.ports.listen)
            for c in range(conns):
                count = n // conns + (1 if c < n % conns else 0)
                pollers.append(Poller(addr, f"bench_idle_cg_{c}", c, count, args.queues, answered, lock))
            for p in pollers:
                p.start()
            time.sleep(SETTLE_S)
            pids = server_pids(server)
            before = dict(answered)
            c0, t0 = cpu_seconds(pids), time.monotonic()
            time.sleep(args.idle_seconds)
            cpu_s = cpu_seconds(pids) - c0
            pct = 100 * cpu_s / (time.monotonic() - t0)
            during = collections.Counter(answered)
            during.subtract(before)
            broken = [p.error for p in pollers if p.error]
            if broken:
                raise RuntimeError(f"{len(broken)} connections failed, e.g. {broken[0]}")
            unexpected = {code: k for code, k in answered.items() if code not in (19, 20)}
            if unexpected:
                # 19 PULL_NOT_FOUND, 20 PULL_RETRY_IMMEDIATELY: what an empty queue answers
                raise RuntimeError(f"unexpected pull answers (code: count) {unexpected}")
            print(f"   -> server CPU {pct:.1f} % of a core, {sum(during.values()):,} pulls answered in the window",
                  flush=True)
        except Exception as exc:  # noqa: BLE001 - recorded, the other rows still run
            out.problems.append(f"- idle consumers, {kind} (work dir `{workdir}`): {type(exc).__name__}: {exc}")
        finally:
            for p in pollers:
                p.close()
            discard_into(out, "idle consumers", kind, server, logs)
        table.append((kind, pct, sum(during.values()), cpu_s))
        out.measures.append(Measure(f"idle: {n:,} long-polling consumers", "server CPU % of a core (< 5)", kind,
                                    pct, "%", "lower"))
    out.details = [f"Idle consumers ({n:,} suspended PULL_MESSAGE requests, suspendTimeoutMillis "
                   f"{SUSPEND_TIMEOUT_MS}, on {conns} connections, re-sent when answered; {args.idle_seconds} s "
                   "measured; a pull is answered when its suspension times out, so the count depends on where the "
                   "window falls; the last column divides the server's CPU time by it):", "",
                   "| server | server CPU % of a core | pulls answered in the window | server CPU µs per answered pull |",
                   "|---|---:|---:|---:|"]
    out.details += [f"| {kind} | {fmt(pct, '.1f')} | {fmt(k, ',d')} | "
                    f"{fmt(1e6 * cpu / k if cpu is not None and k else None, ',.0f')} |" for kind, pct, k, cpu in table]
    return out

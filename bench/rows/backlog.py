"""The backlog and cold-start rows of side_by_side.py, on one store per server kind:

1. fill: the load generator sends --backlog messages (batches of --backlog-batch x --size bytes,
   no consumer running);
2. backlog (row ``backlog``): first the pull round trip: one connection pulls 32 messages at a time
   (the push consumer's pullBatchSize) from the queues in turn, one pull in flight, each answer
   read whole before the next pull -- the time from a pull's send to its answer's last byte; then
   a fresh consumer group (push consumer, from the first offset) reads them all: consume TPS from
   its first message to the last;
3. cold start (row ``coldstart``): the server is stopped cleanly (SIGTERM) and started again on
   that store, timed from spawn until the NameServer routes the topic and the broker accepts a send;
   then killed (SIGKILL, every process of the kind) and started again: the same time, now with
   the recovery of an unclean store."""

from __future__ import annotations

import shlex
import socket
import statistics
import time

from compat_tests.servers import GET_ROUTEINFO_BY_TOPIC, LOOPBACK, ProbeError, remoting_call

from .harness import (
    Env,
    Measure,
    RowOutput,
    create_topic,
    discard_into,
    fmt,
    kinds_in_order,
    loadgen_java,
    make_server,
    quiet_wait,
    run_loadgen,
    server_pids,
)
from .wire import FrameReader, pull_frame

SEND_MESSAGE = 10
TOPIC = "BenchBacklog"
# The push consumer's pullBatchSize, and how many pulls the round-trip probe times.
PULL_BATCH = 32
ROUND_TRIP_PULLS = 3000
# Give up on a restart after this long (Apache replays a torn 1 GiB store in well under this).
RESTART_TIMEOUT_S = 600.0


def send_one(server, topic: str, body: bytes = b"cold start probe") -> dict:
    """SEND_MESSAGE to queue 0 of ``topic``, as the Java client's JSON header spells it."""
    header, _ = remoting_call((LOOPBACK, server.config.ports.listen), SEND_MESSAGE, {
        "producerGroup": "bench_cold_pg", "topic": topic, "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)), "flag": "0", "properties": "",
        "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}, timeout=10, body=body)
    return header


def timed_start(server, topic: str) -> float:
    """Spawn the server's processes; seconds until the topic is routed and a send is accepted."""
    t0 = time.monotonic()
    server.start(timeout=RESTART_TIMEOUT_S)
    last = ""
    while time.monotonic() - t0 < RESTART_TIMEOUT_S:
        try:
            header, _ = remoting_call((LOOPBACK, server.config.ports.namesrv), GET_ROUTEINFO_BY_TOPIC,
                                      {"topic": topic})
            if header.get("code") == 0:
                header = send_one(server, topic)
                if header.get("code") == 0:
                    return time.monotonic() - t0
            last = str(header)
        except (OSError, ProbeError, ValueError) as exc:
            last = repr(exc)
        time.sleep(0.05)
    raise RuntimeError(f"{server.kind}: no route or send within {RESTART_TIMEOUT_S:.0f} s after start: {last}")


def pull_round_trips(server, queues: int, pulls: int = ROUND_TRIP_PULLS) -> tuple[float, float, int]:
    """Time ``pulls`` pulls of PULL_BATCH messages, one in flight, over one connection, the queues
    in turn from offset 0: (median ms, mean ms, messages received). Both servers get the same
    client, so a difference is the server's turnaround of a full pull."""
    offsets = [0] * queues
    times, received = [], 0
    with socket.create_connection((LOOPBACK, server.config.ports.listen), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = FrameReader(sock)
        for i in range(pulls):
            queue_id = i % queues
            frame = pull_frame("bench_rtt_cg", TOPIC, queue_id, offsets[queue_id], i + 1, sys_flag=4,
                               max_nums=PULL_BATCH)
            t0 = time.perf_counter()
            sock.sendall(frame)
            header, body = reader.next_frame()
            times.append(time.perf_counter() - t0)
            if header.get("code") != 0:
                raise RuntimeError(f"pull {i} of queue {queue_id} at {offsets[queue_id]}: {header}")
            next_offset = int(header["extFields"]["nextBeginOffset"])
            received += next_offset - offsets[queue_id]
            offsets[queue_id] = next_offset
    return 1e3 * statistics.median(times), 1e3 * statistics.fmean(times), received


def commit_log_bytes(server) -> int:
    files = list((server.config.store_dir / "commitlog").glob("*"))
    return sum(f.stat().st_size for f in files if f.is_file())


def run(env: Env, kinds: list[str], rep: int) -> RowOutput:
    args = env.args
    out = RowOutput()
    rows = []
    for kind in kinds_in_order(kinds, rep):
        label = f"[{kind:>6}]"
        print(f"== backlog of {args.backlog:,} messages / cold start: {kind}", flush=True)
        workdir = env.workdir(f"{kind}-backlog")
        server, logs = make_server(env, kind, workdir)
        got: dict[str, float | None] = {}
        try:
            quiet_wait(env, label)
            server.start()
            create_topic(server, TOPIC, args.queues)
            java = loadgen_java(env, workdir)
            common = ["--namesrv", server.namesrv_addr, "--topic", TOPIC, "--messages", str(args.backlog),
                      "--size", str(args.size), "--send-timeout", str(args.send_timeout)]
            fill = [*java, *common, "--mode", "fill", "--threads", "16", "--batch", str(args.backlog_batch)]
            (workdir / "fill.cmd").write_text(shlex.join(fill) + "\n")
            # Generous: a 2-core machine fills a 1 GiB store in a few minutes.
            budget = 120 + args.backlog / 1000
            summary, error, _ = run_loadgen(fill, workdir, budget, label + " fill", server_pids(server))
            if error or not summary:
                raise RuntimeError(f"fill: {error}")
            got["fill_tps"] = summary["send_tps"]
            got["commit_log_mib"] = commit_log_bytes(server) / 2**20
            if "backlog" in args.rows:
                got["rtt_p50_ms"], got["rtt_avg_ms"], rtt_msgs = pull_round_trips(server, args.queues)
                print(f"   -> pull round trip ({PULL_BATCH} msgs): p50 {got['rtt_p50_ms']:.3f} ms, "
                      f"avg {got['rtt_avg_ms']:.3f} ms ({rtt_msgs:,} messages)", flush=True)
                drain = [*java, *common, "--mode", "drain", "--group", "bench_backlog_cg",
                         "--drain-timeout", str(int(budget))]
                (workdir / "drain.cmd").write_text(shlex.join(drain) + "\n")
                summary, error, window = run_loadgen(drain, workdir, budget + 60, label + " drain",
                                                     server_pids(server))
                if error or not summary:
                    raise RuntimeError(f"drain: {error}")
                reading = summary["consume_s"] - (summary.get("first_message_s") or 0)
                got["consume_tps"] = summary["consumed_total"] / reading if reading > 0 else None
                got["consume_cpu_us"] = (None if window.server_cpu_s is None or not summary["consumed_total"]
                                         else 1e6 * window.server_cpu_s / summary["consumed_total"])
                print(f"   -> backlog read: {fmt(got['consume_tps'])} msg/s", flush=True)
            if "coldstart" in args.rows:
                server.stop(timeout=60)
                got["clean_start_s"] = timed_start(server, TOPIC)
                server.close()  # SIGKILL every process of the kind
                got["crash_start_s"] = timed_start(server, TOPIC)
                print(f"   -> cold start {got['clean_start_s']:.1f} s clean, {got['crash_start_s']:.1f} s "
                      f"after kill -9 ({got['commit_log_mib']:,.0f} MiB of commit log)", flush=True)
        except Exception as exc:  # noqa: BLE001 - recorded, the other rows still run
            out.problems.append(f"- backlog / cold start, {kind} (work dir `{workdir}`): {type(exc).__name__}: {exc}")
        finally:
            discard_into(out, "backlog / cold start", kind, server, logs)
        rows.append((kind, got))
        n = f"{args.backlog:,}"
        if "backlog" in args.rows:
            out.measures.append(Measure(f"backlog: {n} x {args.size} B", "consume TPS", kind,
                                        got.get("consume_tps"), "msg/s"))
            out.measures.append(Measure(f"backlog: {n} x {args.size} B", "server CPU per message read", kind,
                                        got.get("consume_cpu_us"), "µs", "lower"))
            out.measures.append(Measure(f"backlog: {n} x {args.size} B",
                                        f"pull round trip, {PULL_BATCH} messages, median", kind,
                                        got.get("rtt_p50_ms"), "ms", "lower"))
        if "coldstart" in args.rows:
            out.measures.append(Measure(f"cold start: {n} messages in the store", "clean", kind,
                                        got.get("clean_start_s"), "s", "lower"))
            out.measures.append(Measure(f"cold start: {n} messages in the store", "after kill -9", kind,
                                        got.get("crash_start_s"), "s", "lower"))
    out.details = [f"Backlog / cold start ({args.backlog:,} messages of {args.size} B sent in batches of "
                   f"{args.backlog_batch} by 16 threads, no consumer; then a fresh consumer group reads them all; "
                   "then stop + start, kill -9 + start on the same store; the pull round trip is one connection pulling "
                   f"{PULL_BATCH} messages at a time, one pull in flight, {ROUND_TRIP_PULLS:,} pulls, before the "
                   "consumer starts):", "",
                   "| server | fill msg/s | commit log MiB | pull round trip p50 / avg ms | backlog consume msg/s | "
                   "server CPU µs / msg read | start clean s | start after kill -9 s |",
                   "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, got in rows:
        out.details.append(f"| {kind} | {fmt(got.get('fill_tps'))} | {fmt(got.get('commit_log_mib'))} | "
                           f"{fmt(got.get('rtt_p50_ms'), '.3f')} / {fmt(got.get('rtt_avg_ms'), '.3f')} | "
                           f"{fmt(got.get('consume_tps'))} | {fmt(got.get('consume_cpu_us'), '.1f')} | "
                           f"{fmt(got.get('clean_start_s'), '.2f')} | {fmt(got.get('crash_start_s'), '.2f')} |")
    return out

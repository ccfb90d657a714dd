"""Side-by-side benchmark: pyrmq and Apache RocketMQ 4.9.7 in one run, every row of issue 14's table.

    .venv/bin/python bench/side_by_side.py [--rows send,gate,latency,memory,topics,backlog,coldstart,idle,namesrv]
        [--duration 15] [--threads 1,16,64] [--sync-threads 64] [--batch 16,64] [--batch-threads 16]
        [--tx-threads 16] [--gate-minutes 15] [--latency-threads 16] [--topics 1000] [--backlog 1000000]
        [--idle-consumers 10000] [--ns-brokers 100] [--ns-topics 10000]
        [--servers pyrmq,apache] [--repeat 1] [--pyrmq-rev HEAD] [--markdown FILE]

Row families (--rows, default all; bench/README.md says what each measures and how):

- send: 1 KiB sends with each --threads count, SYNC_FLUSH with each --sync-threads count, batches
  of each --batch size with each --batch-threads count, transactional sends (--tx-threads); send
  TPS, RT, consume TPS and the server's CPU time per message (bench/rows/send.py);
- gate: Apache's CI gate shape, 64 threads, 128 B bodies, --gate-minutes measured (0: skip);
- latency: store->consume and born->consume p50 / p99 with a live push consumer;
- memory: the server's peak resident memory under the 64-thread load (sampled in every run);
- topics: send TPS with --topics topics x --queues queues against one topic (no consumer), both
  after --topics-warmup s, in which each server creates the queues' files on their first messages;
- backlog, coldstart: --backlog messages sent, read back by a fresh consumer group (consume TPS);
  then the server stopped and started on that store, cleanly and after kill -9: time until it
  routes the topic and accepts a send (bench/rows/backlog.py);
- idle: --idle-consumers long-polling pull requests held by the broker, its CPU over --idle-seconds
  (bench/rows/idle.py);
- namesrv: --ns-brokers brokers x --ns-topics topics registered on a bare NameServer, then route
  queries per second and their p50 / p99 from several connections (bench/rows/namesrv.py).

Every scenario runs once per server kind per --repeat pass, which kind goes first alternating,
each on a fresh server and store (pyrmq as committed at --pyrmq-rev, exported with git archive;
Apache 4.9.7 NameServer + Broker from Maven Central); before each run it waits (at most
--quiet-wait s) until the machine is quiet. The load generator is pyrmq.bench.LoadGen (bench/java,
official rocketmq-client 4.9.8). The report: machine, command, every run, ratios pyrmq / Apache,
and a summary with one line per measure of the issue's table. It is a benchmark, not a test: run
it by hand. Work files stay in a temp directory whose path is printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compat_tests import build as compat_build
from rows import backlog, idle, namesrv, send
from rows.harness import Env, RowOutput, build_loadgen, export_pyrmq, machine_info, measures_table

ROWS = ("send", "gate", "latency", "memory", "topics", "backlog", "coldstart", "idle", "namesrv")


# ------------------------------------------------------------------------------------- report

def report(args, results: list[send.RunResult], others: list[RowOutput], started: dt.datetime, elapsed_s: float,
           pyrmq_commit: str) -> str:
    m = machine_info()
    command = " ".join([".venv/bin/python", "bench/side_by_side.py", *sys.argv[1:]])
    heap = args.loadgen_heap
    lines = [
        f"## Side-by-side run, {started:%Y-%m-%d %H:%M} ({started.astimezone():%Z})",
        "",
        f"- machine: {m['cores']} cores, {m['ram']} RAM, CPU `{m['cpu']}`, {m['os']}",
        f"- Java: `{m['java']}` / `{m['jvm']}`; Python {m['python']}; pyrmq `{pyrmq_commit}`",
        f"- command: `{command}` (total {elapsed_s / 60:.1f} min)",
        (f"- load generator: `pyrmq.bench.LoadGen` (bench/java) on rocketmq-client 4.9.8, "
         f"`-Drocketmq.serialize.type=ROCKETMQ`, JVM `-Xms{heap} -Xmx{heap} -XX:+UseG1GC`; "
         f"{args.size} B bodies, {args.queues} queues, sync send (timeout {args.send_timeout} ms), "
         f"{args.warmup} s warm-up ({args.topics_warmup} s in the topics row) + {args.duration} s measured "
         f"(the CI gate row: {send.GATE_SIZE} B bodies, {send.GATE_THREADS} threads, its own minutes), "
         f"push consumer running throughout in the same JVM, then up to {args.drain_timeout} s drain"),
        (f"- servers: fresh server and store per run, ASYNC_FLUSH (SYNC_FLUSH where the scenario says so), "
         f"mappedFileSizeCommitLog={args.commitlog_mib} MiB; "
         f"pyrmq `python -m pyrmq standalone` (one process); Apache RocketMQ 4.9.7 NameServer + Broker, "
         f"broker JVM `{args.apache_jvm}`"),
        "",
        ("Send TPS = messages acknowledged SEND_OK per second in the measured window (a batch counts its "
         "messages); RT = one send call; consume TPS = messages the consumer received in the same window; "
         "lag = acknowledged but not consumed after the drain; CPU = CPU time / wall time in the measured window "
         "of the server process(es), of the load generator JVM, and of everything else on the machine "
         "(/proc/stat busy time minus those two; 200 % = both cores busy); log err / warn = lines in the "
         "server logs from start-up to the end of the run (not the shutdown) matching "
         "ERROR/Exception/Traceback and WARN(ING). s2c = store->consume latency (consumer's clock minus the "
         "message's storeTimestamp) of the messages consumed in the window; server CPU µs / msg = the server "
         "process(es)' CPU time in the window over the messages acknowledged in it; RSS peak = the highest sum "
         "of the server process(es)' VmRSS sampled every 0.5 s in the window."),
        "",
    ]
    lines += send.run_table(args, results)
    lines += [""] + send.ratio_table(args, results)
    # Apache logs a handful of WARN lines at every start; pyrmq is expected to log none.
    several = args.repeat > 1
    problems = [r for r in results if r.error or r.log_errors or (r.kind == "pyrmq" and r.log_warnings)
                or (r.summary and r.summary.get("errors"))]
    if problems:
        lines += ["", "Problems seen:", ""]
        for r in problems:
            lines.append(f"- {r.scenario.name}, {r.kind}" + (f", pass {r.rep}" if several else "")
                         + f" (work dir `{r.workdir}`):")
            if r.error:
                lines.append("  - run error: " + r.error.strip().replace("\n", "\n    "))
            for text, n in ((r.summary or {}).get("errors") or {}).items():
                lines.append(f"  - client: {n} x `{text}`")
            if r.log_errors or r.log_warnings:
                lines.append(f"  - {r.log_errors} error and {r.log_warnings} warning lines in the server logs, e.g.:")
                lines += [f"    - `{line}`" for line in r.log_problem_lines[:6]]
    for out in others:
        if out.details:
            lines += [""] + out.details
    measures = send.measures(results) + [m for out in others for m in out.measures]
    if measures:
        lines += ["", "Summary, one line per measure of issue 14's table (pyrmq / Apache: ratio of the two "
                  "figures; `better` says which way is good for pyrmq):", ""] + measures_table(measures)
    other_problems = [p for out in others for p in out.problems]
    if other_problems:
        lines += ["", "Problems seen in the other rows:", ""] + other_problems
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------- main

def csv_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"row families, comma-separated (default all: {','.join(ROWS)})")
    parser.add_argument("--duration", type=int, default=15, help="measured seconds per run (default 15)")
    parser.add_argument("--warmup", type=int, default=10,
                        help="uncounted seconds of sending first, also JIT warm-up for Apache (default 10)")
    parser.add_argument("--threads", type=csv_ints, default=[1, 16, 64], help="producer threads, 1 KiB messages")
    parser.add_argument("--sync-threads", type=csv_ints, default=[64],
                        help="producer threads, 1 KiB messages, flushDiskType=SYNC_FLUSH (default 64)")
    parser.add_argument("--batch", type=csv_ints, default=[16, 64],
                        help="messages per batch in the batch scenarios, comma-separated (default 16,64; 0: none)")
    parser.add_argument("--batch-threads", type=csv_ints, default=[16], help="producer threads, batch scenarios")
    parser.add_argument("--tx-threads", type=csv_ints, default=[],
                        help="producer threads, transactional 1 KiB messages committed at once (default: none)")
    parser.add_argument("--gate-minutes", type=float, default=15,
                        help=f"measured minutes of the CI gate shape ({send.GATE_THREADS} threads, {send.GATE_SIZE} B; "
                             "default 15; 0: skip)")
    parser.add_argument("--latency-threads", type=int, default=16, help="producer threads of the latency row")
    parser.add_argument("--topics", type=int, default=1000, help="topics of the many-topics row (default 1000)")
    parser.add_argument("--topics-threads", type=int, default=64, help="producer threads of the topics row")
    parser.add_argument("--topics-warmup", type=int, default=30,
                        help="uncounted seconds of the topics row's two scenarios (default 30): long enough for "
                             "both servers to create the consume queue files (--topics x --queues), each on its first message, "
                             "before the measured window")
    parser.add_argument("--backlog", type=int, default=1_000_000, help="messages of the backlog row (default 1,000,000)")
    parser.add_argument("--backlog-batch", type=int, default=64, help="batch size used to fill the backlog")
    parser.add_argument("--idle-consumers", type=int, default=10_000, help="held pull requests of the idle row")
    parser.add_argument("--idle-connections", type=int, default=100, help="connections carrying them")
    parser.add_argument("--idle-seconds", type=int, default=30, help="measured seconds of the idle row")
    parser.add_argument("--ns-brokers", type=int, default=100, help="brokers registered in the namesrv row")
    parser.add_argument("--ns-topics", type=int, default=10_000, help="topics of each registered broker")
    parser.add_argument("--ns-clients", type=int, default=4, help="route-querying client processes")
    parser.add_argument("--ns-seconds", type=int, default=15, help="seconds of route queries")
    parser.add_argument("--size", type=int, default=1024, help="message body bytes (default 1024)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic (default 8)")
    parser.add_argument("--servers", default="pyrmq,apache", help="which servers, comma-separated")
    parser.add_argument("--drain-timeout", type=int, default=30, help="seconds the consumer may catch up")
    parser.add_argument("--send-timeout", type=int, default=3000, help="client send timeout ms (default 3000)")
    parser.add_argument("--commitlog-mib", type=int, default=256, help="mappedFileSizeCommitLog for both, MiB")
    parser.add_argument("--apache-jvm", default="-Xms1g -Xmx1g -XX:MaxDirectMemorySize=1g -XX:+UseG1GC",
                        help="Apache broker JVM sizing flags")
    parser.add_argument("--loadgen-heap", default="1g", help="load generator JVM heap")
    parser.add_argument("--pyrmq-rev", default="HEAD",
                        help="the pyrmq commit to run (git archive of pyrmq/; default HEAD), or 'worktree'")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every scenario pair this many times (ratios from the medians)")
    parser.add_argument("--quiet-threshold", type=float, default=30.0,
                        help="before each run, wait for the machine to be busy below this %% (100 = one core)")
    parser.add_argument("--quiet-wait", type=float, default=60.0,
                        help="wait at most this many seconds for that (0: do not wait; default 60)")
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs) even when no run had problems")
    args = parser.parse_args()
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    if not args.servers or any(s not in ("pyrmq", "apache") for s in args.servers):
        parser.error("--servers takes pyrmq and/or apache")
    args.rows = {r.strip() for r in args.rows.split(",") if r.strip()}
    if not args.rows or args.rows - set(ROWS):
        parser.error(f"--rows takes some of {','.join(ROWS)}")
    return args


def main() -> int:
    args = parse_args()
    servers = args.servers
    scenarios = send.scenarios(args, args.rows)
    print("building the load generator (bench/java) ...", flush=True)
    loadgen_cp = build_loadgen()
    reference_cp = None
    if "apache" in servers:
        print("resolving the Apache RocketMQ 4.9.7 classpath (compat_tests/reference) ...", flush=True)
        reference_cp = compat_build.build_reference().classpath

    started = dt.datetime.now()
    t0 = time.monotonic()
    run_root = Path(tempfile.mkdtemp(prefix="pyrmq-bench-"))
    print(f"work directory: {run_root}", flush=True)
    pyrmq_commit = export_pyrmq(args.pyrmq_rev, run_root / "pyrmq-src") if "pyrmq" in servers else "not run"
    print(f"pyrmq: {pyrmq_commit}", flush=True)
    env = Env(args, loadgen_cp, reference_cp, run_root)
    results: list[send.RunResult] = []
    others: list[RowOutput] = []
    try:
        for rep in range(1, args.repeat + 1):
            for i, sc in enumerate(scenarios):
                order = servers if (i + rep) % 2 == 1 else list(reversed(servers))
                for kind in order:
                    print(f"== {sc.name}: {kind}" + (f" (pass {rep})" if args.repeat > 1 else ""), flush=True)
                    r = send.run_one(env, sc, kind, rep)
                    print(send.one_line(r), flush=True)
                    results.append(r)
            if args.rows & {"backlog", "coldstart"}:
                others.append(backlog.run(env, servers, rep))
            if "idle" in args.rows:
                others.append(idle.run(env, servers, rep))
            if "namesrv" in args.rows:
                others.append(namesrv.run(env, servers, rep))
    except KeyboardInterrupt:
        print("interrupted; reporting what ran", flush=True)
    text = report(args, results, others, started, time.monotonic() - t0, pyrmq_commit)
    print()
    print(text)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text)
        print(f"written to {args.markdown}")
    troubled = any(r.error or r.log_errors or not r.summary for r in results) or any(o.problems for o in others)
    if args.keep or troubled:
        print(f"logs kept in {run_root}")
    else:
        shutil.rmtree(run_root, ignore_errors=True)
    return 0 if all(r.summary for r in results) and not any(o.problems for o in others) else 1


if __name__ == "__main__":
    sys.exit(main())

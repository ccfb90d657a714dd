"""Consume TPS with an SQL92 filter: pyrmq and Apache RocketMQ 4.9.7 side by side, alternating.

    .venv/bin/python bench/sql92_filter.py [--messages 100000] [--body-size 1024] [--selector "a = 3"]
                                           [--servers pyrmq,apache] [--repeat 1]
                                           [--broker-extra KEY=VALUE ...] [--register-first] [--markdown FILE]

For each repetition and each server (the order alternates between repetitions):
1. start a fresh server (compat_tests.servers; Apache's broker JVM sized as in side_by_side.py)
   with ``enablePropertyFilter=true`` plus every ``--broker-extra`` key (broker.conf names, e.g.
   ``--broker-extra enableCalcFilterBitMap=true --broker-extra enableConsumeQueueExt=true``);
2. send --messages messages of --body-size bytes with the official Java client 4.9.8 in batches
   of 32 (compat_tests' ScenarioRunner ``produce --sql-props 1``: message i carries ``a = i % 10``,
   absent when that is 9, and ``s``), so ``a = 3`` selects exactly 10 %;
3. start a push consumer of a new group from the first offset with ``MessageSelector.bySql``
   and time it from its start until the last matching message arrived: consume TPS = matching
   messages / time, scan rate = all messages / time (the broker reads every one);
4. stop the server and delete its store.

A benchmark, not a test: run it by hand on a quiet machine (under the heavy-work lock when
other work shares it).  The work directory (server and client output) is printed.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from compat_tests import build as compat_build
from compat_tests.javaclient import JavaClient
from compat_tests.servers import LOOPBACK, Server, ServerConfig, allocate_ports
from side_by_side import BenchApacheServer, BenchPyrmqServer

MIB = 1024 * 1024
APACHE_JVM = "-Xms1g -Xmx1g -XX:MaxDirectMemorySize=1g -XX:+UseG1GC"
BATCH = 32


def parse_extra(items: list[str]) -> dict[str, str]:
    extra = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--broker-extra wants KEY=VALUE, got {item!r}")
        extra[key] = value
    return extra


def run_one(kind: str, index: int, args, root: Path, client: JavaClient, reference_cp: str | None) -> dict:
    workdir = root / f"{index:02d}-{kind}"
    extra = {"enablePropertyFilter": "true", **parse_extra(args.broker_extra)}
    config = ServerConfig(workdir, allocate_ports(), broker_extra=extra, mapped_file_size_commit_log=256 * MIB)
    server: Server
    if kind == "pyrmq":
        server = BenchPyrmqServer(config, {"bindAddress": LOOPBACK})
    else:
        assert reference_cp is not None
        server = BenchApacheServer(config, reference_cp, APACHE_JVM.split())
    topic, group = f"Sql92Bench_{index}", f"Sql92BenchGroup_{index}"
    try:
        server.start()
        if args.register_first:
            # the group subscribes (and leaves) before the sends: its filter exists when they are
            # dispatched, so with enableCalcFilterBitMap their bitmaps carry its bits
            client.run("consume", namesrv=server.namesrv_addr, topic=topic, group=group, sql_expr=args.selector,
                       count=0, idle_ms=200, create_topic=4)
        t0 = time.monotonic()
        produced = client.run("produce", namesrv=server.namesrv_addr, topic=topic, mode="batch", batch_size=BATCH,
                              count=args.messages, body_size=args.body_size, sql_props=1, tags="",
                              deadline_ms=1_800_000)
        send_s = time.monotonic() - t0
        sent_ok = sum(1 for e in produced.sent if e.get("status") == "SEND_OK")
        wanted = sum(1 for i in range(args.messages) if i % 10 == 3) if args.selector == "a = 3" else args.expect
        consumed = client.run("consume", namesrv=server.namesrv_addr, topic=topic, group=group,
                              sql_expr=args.selector, count=wanted, idle_ms=2000, timeout_ms=1_200_000,
                              deadline_ms=1_500_000)
        started = [e["t"] for e in consumed.of("consumer_started")][0]
        last = max(e["t"] for e in consumed.received) if consumed.received else started
        seconds = max(1e-3, (last - started) / 1000)
        distinct = consumed.summary["distinct"]
        return {"kind": kind, "sent": sent_ok, "send_s": send_s, "matched": distinct, "wanted": wanted,
                "seconds": seconds, "tps": distinct / seconds, "scan": args.messages / seconds,
                "complete": consumed.summary["complete"]}
    finally:
        server.close()
        shutil.rmtree(config.store_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--body-size", type=int, default=1024)
    parser.add_argument("--selector", default="a = 3")
    parser.add_argument("--expect", type=int, default=0, help="matching messages for a selector other than a = 3")
    parser.add_argument("--servers", default="pyrmq,apache")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--broker-extra", action="append", default=[], metavar="KEY=VALUE",
                        help="more broker.conf keys for both servers (repeatable)")
    parser.add_argument("--register-first", action="store_true",
                        help="subscribe the group before sending (so SQL92 bitmaps can carry its bits)")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    kinds = [k.strip() for k in args.servers.split(",") if k.strip()]
    client = JavaClient(compat_build.build_client("client4"), Path(tempfile.mkdtemp(prefix="sql92-bench-client-")))
    reference_cp = compat_build.build_reference().classpath if "apache" in kinds else None
    root = Path(tempfile.mkdtemp(prefix="sql92-bench-"))
    print(f"work directory: {root}", flush=True)
    results: list[dict] = []
    index = 0
    for rep in range(args.repeat):
        order = kinds if rep % 2 == 0 else list(reversed(kinds))
        for kind in order:
            index += 1
            r = run_one(kind, index, args, root, client, reference_cp)
            results.append(r)
            print(f"[{kind:>6}] sent {r['sent']} in {r['send_s']:.1f} s; matched {r['matched']}/{r['wanted']} in "
                  f"{r['seconds']:.2f} s: {r['tps']:.0f} msg/s consumed, {r['scan']:.0f} msg/s scanned"
                  + ("" if r["complete"] else " (INCOMPLETE)"), flush=True)
    lines = [f"SQL92 consume, `{args.selector}`, {args.messages} x {args.body_size} B, "
             f"extra broker config {parse_extra(args.broker_extra) or '-'}; {platform.node()}, "
             f"{platform.processor() or platform.machine()}, python {platform.python_version()}", "",
             "| server | runs | consumed msg/s (median) | scanned msg/s (median) | seconds (median) |",
             "|---|---|---|---|---|"]
    for kind in kinds:
        mine = [r for r in results if r["kind"] == kind]
        lines.append(f"| {kind} | {len(mine)} | {statistics.median(r['tps'] for r in mine):.0f} | "
                     f"{statistics.median(r['scan'] for r in mine):.0f} | "
                     f"{statistics.median(r['seconds'] for r in mine):.2f} |")
    report = "\n".join(lines)
    print(report)
    if args.markdown:
        args.markdown.write_text(report + "\n")


if __name__ == "__main__":
    main()

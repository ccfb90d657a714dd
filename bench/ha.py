"""HA benchmark: replication master -> slave on loopback and the cost of SYNC_MASTER, side by side
pyrmq and Apache RocketMQ 4.9.7.

    .venv/bin/python bench/ha.py [--pairs apache-apache,pyrmq-pyrmq,apache-pyrmq,pyrmq-apache]
                                 [--burst-mib 128] [--tps-pairs apache-apache,pyrmq-pyrmq]
                                 [--threads 16] [--warmup 5] [--duration 15] [--repeat 1]
                                 [--markdown FILE]

Every run starts a fresh NameServer (of the master's kind), master and slave through
compat_tests/ha.py (the harness of compat_tests/test_ha.py: same brokerName, brokerId 0 / 1,
ASYNC_FLUSH, 64 MiB commit log files here) and stops them at its end.

1. Replication, per ``--pairs`` (master kind - slave kind), ASYNC_MASTER:
   - live burst: the slave connected and caught up, the official Java client sends
     ``--burst-mib`` MiB (batches of 32 x 4 KiB bodies, one thread) as fast as the master takes
     them; figures: the master's write rate, and how long after the last send returned the slave's
     max offset equals the master's (``lag after burst``);
   - catch-up: the slave stopped (SIGTERM), another ``--burst-mib`` MiB sent, the slave started
     again on its store: from the first byte it receives (its max offset polled every 20 ms) to
     its max offset reaching the master's; figure: MB/s of commit log copied (the slave resumes
     from its own end, spec/ha.md §5).
2. Send TPS, per ``--tps-pairs``, ASYNC_MASTER then SYNC_MASTER with a connected slave:
   pyrmq.bench.LoadGen (bench/java, as side_by_side.py) with ``--threads`` threads of 1 KiB sync
   sends, ``--warmup`` s not counted, ``--duration`` s measured, no consumer; figure: SEND_OK/s
   and the ratio SYNC_MASTER / ASYNC_MASTER.

A benchmark, not a test: run it by hand on a quiet machine and record the report in
bench/RESULTS.md. Work files (node logs, client output) stay in the temp directory it prints.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import statistics
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH_DIR))

from side_by_side import Scenario, build_loadgen, loadgen_argv, machine_info, run_loadgen, wait_until_quiet  # noqa: E402

from compat_tests import build as compat_build  # noqa: E402
from compat_tests.cluster import Cluster  # noqa: E402
from compat_tests.ha import BROKER_NAME, HaPair, create_topic, max_offset, start_pair, wait_caught_up  # noqa: E402
from compat_tests.javaclient import JavaClient  # noqa: E402
from compat_tests.servers import ProbeError  # noqa: E402

MIB = 1024 * 1024
FILE_SIZE = 64 * MIB
BODY = 4096
BATCH = 32


@dataclass
class Replication:
    pair: str
    burst_bytes: int = 0
    write_s: float = 0.0
    lag_after_burst_s: float = 0.0
    catchup_bytes: int = 0
    catchup_s: float = 0.0
    error: str | None = None

    @property
    def write_mbps(self) -> float:
        return self.burst_bytes / MIB / self.write_s if self.write_s else 0.0

    @property
    def catchup_mbps(self) -> float:
        return self.catchup_bytes / MIB / self.catchup_s if self.catchup_s else 0.0


@dataclass
class Tps:
    pair: str
    role: str
    summary: dict | None = None
    error: str | None = None


@dataclass
class Report:
    replication: list[Replication] = field(default_factory=list)
    tps: list[Tps] = field(default_factory=list)


def close(cluster: Cluster) -> None:
    """Kill the nodes, delete the stores (hundreds of MiB each), keep the logs."""
    cluster.close()
    for store in cluster.root.glob("store-*"):
        shutil.rmtree(store, ignore_errors=True)


def slave_offset(pair: HaPair, default: int) -> int:
    """The slave's max offset; ``default`` while it cannot tell (Apache answers runtime info with
    an error in its first second, before its stats have a sample)."""
    try:
        return max_offset(pair.slave)
    except ProbeError:
        return default


def node_pids(pair: HaPair) -> list[int]:
    return [n.proc.pid for n in (pair.master, pair.slave) if n.proc is not None]


def burst(client: JavaClient, pair: HaPair, topic: str, mib: int, label: str) -> tuple[int, float]:
    """Send ``mib`` MiB to the master; (bytes the master's commit log grew, seconds of sending)."""
    before = max_offset(pair.master)
    t0 = time.monotonic()
    client.run("produce", namesrv=pair.namesrv.addr, topic=topic, mode="batch", count=mib * MIB // BODY,
               batch_size=BATCH, body_size=BODY, body_prefix=label, deadline_ms=600_000)
    # The JVM's start is in this time as well; it is the same for both kinds.
    return max_offset(pair.master) - before, time.monotonic() - t0


def run_replication(args, cluster: Cluster, client: JavaClient, master_kind: str, slave_kind: str) -> Replication:
    result = Replication(f"{master_kind} -> {slave_kind}")
    try:
        pair = start_pair(cluster, master_kind, slave_kind, "ASYNC_MASTER", file_size=FILE_SIZE)
        topic = "HaBench"
        create_topic(pair.master, topic, 8)
        client.run("produce", namesrv=pair.namesrv.addr, topic=topic, count=1)
        wait_caught_up(pair)

        # Live: the slave follows while the burst is written.
        result.burst_bytes, result.write_s = burst(client, pair, topic, args.burst_mib, "live")
        result.lag_after_burst_s = wait_caught_up(pair, timeout=600)

        # Catch-up: the slave was away while the master took another burst.
        away_from = max_offset(pair.slave)
        pair.slave.stop()
        burst(client, pair, topic, args.burst_mib, "away")
        target = max_offset(pair.master)
        pair.slave.start()
        start = slave_offset(pair, away_from)
        deadline = time.monotonic() + 600
        first = None
        now = start
        while now < target and time.monotonic() < deadline:
            if first is None and now > start:
                first = (time.monotonic(), now)
            time.sleep(0.02)
            now = slave_offset(pair, now)
        done = time.monotonic()
        assert now == target, f"slave at {now}, master at {target}"
        t_first, at_first = first if first is not None else (done, start)
        # From the first byte seen: what arrived before that poll is not counted either.
        result.catchup_bytes, result.catchup_s = target - at_first, done - t_first
    except Exception as exc:  # noqa: BLE001 - recorded; the other runs go on
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        close(cluster)
    return result


def run_tps(args, cluster: Cluster, client: JavaClient, loadgen_cp: str, master_kind: str, slave_kind: str,
            role: str) -> Tps:
    result = Tps(f"{master_kind} -> {slave_kind}", role)
    try:
        pair = start_pair(cluster, master_kind, slave_kind, role, file_size=FILE_SIZE)
        topic = f"HaTps_{role}"
        create_topic(pair.master, topic, 8)
        pair.namesrv.wait_route(topic, {BROKER_NAME})
        workdir = cluster.root / "loadgen"
        workdir.mkdir()
        argv = loadgen_argv(args, loadgen_cp, workdir, pair.namesrv.addr, topic,
                            Scenario(f"t{args.threads}", args.threads, 1))
        argv[argv.index("--consume") + 1] = "false"
        (workdir / "loadgen.cmd").write_text(shlex.join(argv) + "\n")
        # Replication is up before the load (a SYNC_MASTER would answer SLAVE_NOT_AVAILABLE).
        client.run("produce", namesrv=pair.namesrv.addr, topic=topic, count=1)
        wait_caught_up(pair)
        timeout = args.warmup + args.duration + args.drain_timeout + 120
        label = f"[{result.pair} {role}]"
        result.summary, result.error, _ = run_loadgen(argv, workdir, timeout, label, node_pids(pair))
    except Exception as exc:  # noqa: BLE001
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        close(cluster)
    return result


# ------------------------------------------------------------------------------------- report

def markdown(args, report: Report, started: dt.datetime, elapsed: float) -> str:
    info = machine_info()
    lines = [f"### HA: replication and SYNC_MASTER / ASYNC_MASTER ({started:%Y-%m-%d %H:%M} UTC)", "",
             "- machine: " + ", ".join(f"{k} {v}" for k, v in info.items()),
             f"- command: `.venv/bin/python bench/ha.py {shlex.join(sys.argv[1:])}` ({elapsed / 60:.1f} min)",
             f"- commit log files {FILE_SIZE // MIB} MiB, ASYNC_FLUSH, Apache JVMs of the compat harness "
             "(-Xmx256m, SerialGC)", ""]
    if report.replication:
        lines += ["| master -> slave | burst MiB | master write MB/s | slave caught up after the burst | "
                  "catch-up MiB | catch-up MB/s | error |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for r in report.replication:
            lines.append(f"| {r.pair} | {r.burst_bytes / MIB:.0f} | {r.write_mbps:.1f} | "
                         f"{r.lag_after_burst_s * 1000:.0f} ms | {r.catchup_bytes / MIB:.0f} | {r.catchup_mbps:.1f} | "
                         f"{r.error or ''} |")
        lines.append("")
    if report.tps:
        lines += ["| master -> slave | role | send TPS | avg RT ms | max RT ms | failed / not OK | error |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for t in report.tps:
            s = t.summary or {}
            lines.append(f"| {t.pair} | {t.role} | {s.get('send_tps', 0):,.0f} | {s.get('avg_rt_ms', 0):.2f} | "
                         f"{s.get('max_rt_ms', 0):.1f} | {s.get('send_failed', 0)} / {s.get('send_not_ok', 0)} | "
                         f"{(t.error or '').splitlines()[0] if t.error else ''} |")
        lines += ["", "| master -> slave | SYNC_MASTER / ASYNC_MASTER send TPS (median of passes) |", "|---|---:|"]
        for pair in dict.fromkeys(t.pair for t in report.tps):
            def med(role: str, pair: str = pair) -> float:
                vals = [t.summary["send_tps"] for t in report.tps
                        if t.pair == pair and t.role == role and t.summary]
                return statistics.median(vals) if vals else 0.0
            a, s = med("ASYNC_MASTER"), med("SYNC_MASTER")
            lines.append(f"| {pair} | {s / a:.2f} |" if a else f"| {pair} | - |")
    return "\n".join(lines) + "\n"


def pairs(text: str) -> list[tuple[str, str]]:
    out = []
    for item in filter(None, text.split(",")):
        m, s = item.split("-")
        assert {m, s} <= {"pyrmq", "apache"}, item
        out.append((m, s))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=pairs, default=pairs("apache-apache,pyrmq-pyrmq,apache-pyrmq,pyrmq-apache"),
                        help="master-slave kinds of the replication runs ('' for none)")
    parser.add_argument("--burst-mib", type=int, default=128, help="MiB per burst (default 128)")
    parser.add_argument("--tps-pairs", type=pairs, default=pairs("apache-apache,pyrmq-pyrmq"),
                        help="master-slave kinds of the send TPS runs ('' for none)")
    parser.add_argument("--threads", type=int, default=16, help="LoadGen producer threads (default 16)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=1, help="passes over every run")
    parser.add_argument("--quiet-wait", type=float, default=30.0, help="max s to wait for a quiet machine per run")
    parser.add_argument("--markdown", type=Path, help="also write the report here")
    args = parser.parse_args()
    # What side_by_side.loadgen_argv reads.
    args.size, args.loadgen_heap, args.drain_timeout, args.send_timeout = 1024, "512m", 0, 3000

    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="pyrmq-bench-ha-"))
    print(f"work directory {root}", flush=True)
    reference_cp = compat_build.build_reference().classpath
    client = JavaClient(compat_build.build_client("client4"), root / "client")
    loadgen_cp = build_loadgen() if args.tps_pairs else ""
    report = Report()
    seq = 0
    for rep in range(args.repeat):
        for master_kind, slave_kind in args.pairs:
            seq += 1
            wait_until_quiet(30.0, args.quiet_wait)
            r = run_replication(args, Cluster(root / f"{seq:02d}-repl-{master_kind}-{slave_kind}", reference_cp),
                                client, master_kind, slave_kind)
            print(f"pass {rep + 1} replication {r}", flush=True)
            report.replication.append(r)
        for master_kind, slave_kind in args.tps_pairs:
            for role in ("ASYNC_MASTER", "SYNC_MASTER"):
                seq += 1
                wait_until_quiet(30.0, args.quiet_wait)
                cluster = Cluster(root / f"{seq:02d}-tps-{master_kind}-{slave_kind}-{role}", reference_cp)
                t = run_tps(args, cluster, client, loadgen_cp, master_kind, slave_kind, role)
                print(f"pass {rep + 1} tps {t.pair} {role}: {t.summary} {t.error or ''}", flush=True)
                report.tps.append(t)
    text = markdown(args, report, started, time.monotonic() - t0)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0 if all(r.error is None for r in report.replication) and all(t.error is None for t in report.tps) else 1


if __name__ == "__main__":
    sys.exit(main())

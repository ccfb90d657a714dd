"""The load-generator rows of side_by_side.py: sends with 1..64 threads (ASYNC and SYNC_FLUSH),
batches, transactional sends, Apache's CI gate shape, end-to-end latency with a live consumer,
resident memory under load and 1,000 topics against 1 topic. Each scenario is one fresh server
per kind and one run of pyrmq.bench.LoadGen in load mode (warm-up, measured window, drain)."""

from __future__ import annotations

import shlex
import statistics
import time
from dataclasses import dataclass, field

from compat_tests.servers import LOOPBACK, remoting_call

from .harness import (
    UPDATE_AND_CREATE_TOPIC,
    Env,
    Measure,
    create_topic,
    discard_server,
    fmt,
    loadgen_java,
    make_server,
    quiet_wait,
    ratio,
    run_loadgen,
    server_pids,
)


# Apache's CI gate shape (the gate row): its body size and producer threads
GATE_SIZE = 128
GATE_THREADS = 64


@dataclass(frozen=True)
class Scenario:
    name: str
    row: str                    # the --rows name that selects it
    threads: int
    batch: int = 1
    transaction: bool = False   # TransactionMQProducer, local transaction commits at once
    flush: str = "ASYNC_FLUSH"
    size: int | None = None     # None: --size
    duration: int | None = None  # measured seconds; None: --duration
    consume: bool = True        # a push consumer runs in the load generator all along
    topics: int = 1             # > 1: topics Bench_..._0 .. _{n-1}, sends round robin
    warmup: int | None = None   # uncounted seconds first; None: --warmup


@dataclass
class RunResult:
    scenario: Scenario
    kind: str
    rep: int = 1
    summary: dict | None = None
    startup_s: float = 0.0
    cpu_pct: dict[str, float] | None = None
    server_cpu_s: float | None = None
    rss_peak_kib: int = 0
    hwm_kib: int = 0
    stop_codes: list[int] = field(default_factory=list)
    log_errors: int = 0
    log_warnings: int = 0
    log_problem_lines: list[str] = field(default_factory=list)
    error: str | None = None
    workdir: object = None

    @property
    def cpu_us_per_msg(self) -> float | None:
        """Server CPU time in the measured window divided by the messages acknowledged in it."""
        s = self.summary or {}
        sent = (s.get("send_tps") or 0) * (s.get("window_s") or 0)
        return None if self.server_cpu_s is None or not sent else 1e6 * self.server_cpu_s / sent


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def scenarios(args, rows: set[str]) -> list[Scenario]:
    out: list[Scenario] = []
    if "send" in rows:
        out += [Scenario(f"1 KiB, {plural(t, 'thread')}", "send", t) for t in args.threads]
        out += [Scenario(f"1 KiB, SYNC_FLUSH, {plural(t, 'thread')}", "send", t, flush="SYNC_FLUSH")
                for t in args.sync_threads]
        out += [Scenario(f"batch {b} x 1 KiB, {plural(t, 'thread')}", "send", t, batch=b)
                for b in args.batch if b > 1 for t in args.batch_threads]
        out += [Scenario(f"transactional 1 KiB, {plural(t, 'thread')}", "send", t, transaction=True)
                for t in args.tx_threads]
    if "gate" in rows and args.gate_minutes > 0:
        out.append(Scenario(f"CI gate: {GATE_SIZE} B, {GATE_THREADS} threads, {args.gate_minutes:g} min", "gate",
                            GATE_THREADS, size=GATE_SIZE,
                            duration=round(args.gate_minutes * 60)))
    if "latency" in rows:
        out.append(Scenario(f"latency: 1 KiB, {plural(args.latency_threads, 'thread')}, live consumer",
                            "latency", args.latency_threads))
    if "memory" in rows and not any(sc.row == "send" and sc.threads == 64 and sc.batch == 1
                                    and sc.flush == "ASYNC_FLUSH" for sc in out):
        out.append(Scenario("memory: 1 KiB, 64 threads", "memory", 64))
    if "topics" in rows:
        t = args.topics_threads
        # both with --topics-warmup: the queues' files are created in it, on both servers alike
        w = args.topics_warmup
        out.append(Scenario(f"topics: 1 topic x {args.queues} queues, {plural(t, 'thread')}, no consumer",
                            "topics", t, consume=False, warmup=w))
        out.append(Scenario(f"topics: {args.topics:,} topics x {args.queues} queues, {plural(t, 'thread')}, "
                            "no consumer", "topics", t, consume=False, topics=args.topics, warmup=w))
    return out


def create_topics(server, base: str, n: int, queues: int) -> None:
    """n topics base_0 .. base_{n-1} (or just base), routed by the NameServer when this returns."""
    if n <= 1:
        create_topic(server, base, queues)
        return
    broker = (LOOPBACK, server.config.ports.listen)
    for i in range(n - 1):
        header, _ = remoting_call(broker, UPDATE_AND_CREATE_TOPIC, {
            "topic": f"{base}_{i}", "defaultTopic": "TBW102", "readQueueNums": str(queues),
            "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0", "order": "false"}, timeout=30)
        if header.get("code") != 0:
            raise RuntimeError(f"{server.kind}: UPDATE_AND_CREATE_TOPIC {base}_{i}: {header}")
    # The last one waits for its route; the broker registers its whole topic table at once.
    create_topic(server, f"{base}_{n - 1}", queues, timeout=120)


def run_one(env: Env, sc: Scenario, kind: str, rep: int) -> RunResult:
    args = env.args
    workdir = env.workdir(f"{kind}-{sc.row}-t{sc.threads}-b{sc.batch}")
    result = RunResult(sc, kind, rep, workdir=workdir)
    server, logs = make_server(env, kind, workdir, flush=sc.flush)
    topic = f"Bench_{sc.row}_t{sc.threads}_b{sc.batch}"
    label = f"[{kind:>6}]"
    duration = sc.duration or args.duration
    warmup = args.warmup if sc.warmup is None else sc.warmup
    try:
        quiet_wait(env, label)
        t0 = time.monotonic()
        server.start()
        result.startup_s = time.monotonic() - t0
        create_topics(server, topic, sc.topics, args.queues)
        argv = [*loadgen_java(env, workdir),
                "--namesrv", server.namesrv_addr, "--topic", topic, "--topics", str(sc.topics),
                "--threads", str(sc.threads), "--size", str(sc.size or args.size), "--batch", str(sc.batch),
                "--warmup", str(warmup), "--duration", str(duration),
                "--consume", str(sc.consume).lower(), "--drain-timeout", str(args.drain_timeout),
                "--send-timeout", str(args.send_timeout), "--transaction", str(sc.transaction).lower()]
        (workdir / "loadgen.cmd").write_text(shlex.join(argv) + "\n")
        timeout = warmup + duration + args.drain_timeout + 3 * args.send_timeout / 1000 + 60
        result.summary, result.error, window = run_loadgen(argv, workdir, timeout, label, server_pids(server))
        result.cpu_pct, result.server_cpu_s = window.pct, window.server_cpu_s
        result.rss_peak_kib, result.hwm_kib = window.rss_peak_kib, window.hwm_kib
        for proc in server._processes():
            if proc.poll() is not None:
                result.error = (result.error or "") + f"\nserver process {proc.pid} exited {proc.returncode} during the run"
    except Exception as exc:  # noqa: BLE001 - a failed run is recorded, the others still run
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        result.stop_codes, (result.log_errors, result.log_warnings, result.log_problem_lines) = \
            discard_server(server, logs)
    return result


def one_line(r: RunResult) -> str:
    s = r.summary or {}
    cpu = r.cpu_pct and {k: round(v) for k, v in r.cpu_pct.items()}
    return (f"   -> send {fmt(s.get('send_tps'))}/s, avg RT {fmt(s.get('avg_rt_ms'), '.2f')} ms, "
            f"max RT {fmt(s.get('max_rt_ms'), '.1f')} ms, consume {fmt(s.get('consume_tps'))}/s, "
            f"s2c p50/p99 {fmt(s.get('s2c_p50_ms'), 'd')}/{fmt(s.get('s2c_p99_ms'), 'd')} ms, "
            f"lag {fmt(s.get('lag'), ',d')}, CPU % {cpu}, CPU/msg {fmt(r.cpu_us_per_msg, '.1f')} us, "
            f"RSS peak {r.rss_peak_kib / 1024:.0f} MiB, startup {r.startup_s:.1f} s, stop codes {r.stop_codes}"
            + (f"\n   !! {r.error}" if r.error else ""))


def run_table(args, results: list[RunResult]) -> list[str]:
    """Every run: both servers' figures."""
    lines = [
        ("| scenario | server | send TPS | calls/s | avg RT ms | max RT ms | send failed | consume TPS | "
         "s2c p50 / p99 / avg ms | lag after drain | CPU server | CPU loadgen | CPU other | "
         "server CPU µs / msg | server RSS peak MiB | log err / warn |"),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s = r.summary or {}

        def cpu(key: str, r: RunResult = r) -> str:
            return "—" if not r.cpu_pct else f"{r.cpu_pct[key]:.0f} %"

        failed = None if not s else s["send_failed"] + s["send_not_ok"]
        send = fmt(s.get("send_tps")) if s else "**run failed**"
        name = r.scenario.name + (f" (pass {r.rep})" if args.repeat > 1 else "")
        lat = (f"{fmt(s.get('s2c_p50_ms'), 'd')} / {fmt(s.get('s2c_p99_ms'), 'd')} / "
               f"{fmt(s.get('s2c_avg_ms'), '.1f')}") if r.scenario.consume else "—"
        lines.append(
            f"| {name} | {r.kind} | {send} | {fmt(s.get('send_calls_tps'))} | "
            f"{fmt(s.get('avg_rt_ms'), '.2f')} | {fmt(s.get('max_rt_ms'), '.1f')} | {fmt(failed, 'd')} | "
            f"{fmt(s.get('consume_tps'))} | {lat} | {fmt(s.get('lag'), ',d')} | "
            f"{cpu('server')} | {cpu('loadgen')} | {cpu('other')} | {fmt(r.cpu_us_per_msg, '.1f')} | "
            f"{fmt(r.rss_peak_kib / 1024 if r.rss_peak_kib else None)} | {r.log_errors} / {r.log_warnings} |")
    return lines


def ratio_table(args, results: list[RunResult]) -> list[str]:
    several = args.repeat > 1
    lines = ["Ratios pyrmq / Apache (send and consume TPS: higher is better for pyrmq; RT, latency, CPU per "
             "message, memory: lower is better)" + (", of the medians over the passes; send TPS ratio of each "
                                                      "pass in the last column" if several else "") + ":", "",
             "| scenario | send TPS | avg RT | max RT | consume TPS | s2c p99 | CPU / msg | RSS peak |"
             + (" send TPS per pass |" if several else ""),
             "|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if several else "")]
    for sc in dict.fromkeys(r.scenario for r in results):
        cells = [ratio(median(results, sc, k, key), median(results, sc, "apache", key))
                 for k, key in [("pyrmq", key) for key in ("send_tps", "avg_rt_ms", "max_rt_ms", "consume_tps",
                                                           "s2c_p99_ms", "cpu_us_per_msg", "rss_peak_kib")]]
        row = f"| {sc.name} | " + " | ".join(cells) + " |"
        if several:
            per_pass = []
            for rep in range(1, args.repeat + 1):
                tps = {r.kind: (r.summary or {}).get("send_tps") for r in results if r.scenario == sc and r.rep == rep}
                per_pass.append(ratio(tps.get("pyrmq"), tps.get("apache")))
            row += " " + ", ".join(per_pass) + " |"
        lines.append(row)
    return lines


def value(r: RunResult, key: str) -> float | None:
    if key == "cpu_us_per_msg":
        return r.cpu_us_per_msg
    if key == "rss_peak_kib":
        return r.rss_peak_kib or None
    return (r.summary or {}).get(key)


def median(results: list[RunResult], sc: Scenario, kind: str, key: str) -> float | None:
    values = [v for r in results if r.scenario == sc and r.kind == kind and r.summary
              for v in [value(r, key)] if v is not None]
    return statistics.median(values) if values else None


def measures(results: list[RunResult]) -> list[Measure]:
    """The issue-14 table's figures from the load-generator runs (medians over the passes)."""
    out: list[Measure] = []
    scs = list(dict.fromkeys(r.scenario for r in results))
    for kind in ("pyrmq", "apache"):
        def add(row: str, measure: str, v: float | None, unit: str = "", better: str = "higher",
                kind: str = kind) -> None:
            out.append(Measure(row, measure, kind, v, unit, better))

        for sc in scs:
            def m(key: str, sc: Scenario = sc, kind: str = kind) -> float | None:
                return median(results, sc, kind, key)

            if sc.row == "send":
                add(f"send: {sc.name}", "send TPS", m("send_tps"), "msg/s")
                if sc.batch == 1 and not sc.transaction and sc.flush == "ASYNC_FLUSH":
                    add(f"send: {sc.name}", "server CPU per message", m("cpu_us_per_msg"), "µs", "lower")
            elif sc.row == "gate":
                add(sc.name, "send TPS", m("send_tps"), "msg/s")
                add(sc.name, "avg send RT (<= 10)", m("avg_rt_ms"), "ms", "lower")
                add(sc.name, "max send RT (<= 500)", m("max_rt_ms"), "ms", "lower")
                add(sc.name, "store->consume avg (<= 10)", m("s2c_avg_ms"), "ms", "lower")
            elif sc.row == "latency":
                add(sc.name, "store->consume p50", m("s2c_p50_ms"), "ms", "lower")
                add(sc.name, "store->consume p99", m("s2c_p99_ms"), "ms", "lower")
                add(sc.name, "born->consume p99", m("b2c_p99_ms"), "ms", "lower")
            if sc.threads == 64 and sc.batch == 1 and sc.flush == "ASYNC_FLUSH" and sc.row in ("send", "memory") \
                    and sc.size is None and not sc.transaction:
                rss = m("rss_peak_kib")
                add("memory: 1 KiB, 64 threads", "server RSS peak (target <= 0.25 x)",
                    None if rss is None else rss / 1024, "MiB", "lower")
        one = next((sc for sc in scs if sc.row == "topics" and sc.topics == 1), None)
        many = next((sc for sc in scs if sc.row == "topics" and sc.topics > 1), None)
        if one and many:
            a, b = median(results, one, kind, "send_tps"), median(results, many, kind, "send_tps")
            add(f"topics: {many.topics:,} x 8 vs 1", "send TPS drop (<= 10 %)",
                None if not a or b is None else 100 * (a - b) / a, "%", "lower")
    return out

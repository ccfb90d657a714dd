"""Side-by-side benchmark: the same Java load generator against pyrmq and Apache RocketMQ 4.9.7.

    .venv/bin/python bench/side_by_side.py [--duration 15] [--threads 1,16,64] [--batch 16]
                                           [--batch-threads 16] [--tx-threads 16] [--servers pyrmq,apache]
                                           [--repeat 1] [--pyrmq-rev HEAD] [--markdown FILE]

For every scenario (1 KiB messages with each --threads count, then batches of --batch x 1 KiB
with each --batch-threads count, then transactional 1 KiB messages committed at once with each
--tx-threads count), --repeat times, and for each server, alternating which server
goes first (pyrmq runs as committed at --pyrmq-rev, exported with git archive):

0. wait (at most --quiet-wait s) until the machine is quiet, others' work would skew one side;

1. start a fresh server on free loopback ports with its own temp store (compat_tests.servers:
   pyrmq as ``python -m pyrmq standalone``, Apache as NamesrvStartup + BrokerStartup from the
   Maven Central jars), ASYNC_FLUSH, the same commit log file size for both;
2. create the topic with --queues queues (UPDATE_AND_CREATE_TOPIC to the broker) and wait for the
   NameServer to route it;
3. run pyrmq.bench.LoadGen (bench/java, official rocketmq-client 4.9.8, ROCKETMQ binary headers):
   --warmup seconds of sending that are not counted, --duration seconds measured, with a push
   consumer running in the same JVM all along; then the producers stop and the consumer gets up
   to --drain-timeout seconds to receive everything that was acknowledged;
4. stop the server (SIGTERM; SIGKILL after 30 s), scan its log for errors, delete the store.

It prints each run's per-second lines, then a Markdown report (machine, command, one table with
both servers and one with the ratios pyrmq/Apache); --markdown also writes it to a file. It is a
benchmark, not a test: run it by hand. Work files (server logs, load generator output) stay in
a temp directory whose path is printed; the stores are deleted after each run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from compat_tests import build as compat_build
from compat_tests.servers import (
    GET_ROUTEINFO_BY_TOPIC,
    LOOPBACK,
    ApacheServer,
    ProbeError,
    PyrmqServer,
    Server,
    ServerConfig,
    allocate_ports,
    die_with_parent,
    remoting_call,
)

BENCH_DIR = Path(__file__).resolve().parent
JAVA_DIR = BENCH_DIR / "java"
# Gitignored (compat_tests/.cache/ is); the pom's <build><directory> points here too.
BUILD_DIR = REPO / "compat_tests" / ".cache" / "bench-java"
MAIN_CLASS = "pyrmq.bench.LoadGen"

UPDATE_AND_CREATE_TOPIC = 17
MIB = 1024 * 1024


# ------------------------------------------------------------------------------------- build

def build_loadgen() -> str:
    """Compile bench/java (cached while pom and sources are unchanged); return its classpath."""
    compat_build.require_tools()
    inputs = sorted([JAVA_DIR / "pom.xml", *(JAVA_DIR / "src").rglob("*.java")])
    h = hashlib.sha256()
    for path in inputs:
        h.update(str(path.relative_to(JAVA_DIR)).encode())
        h.update(path.read_bytes())
    digest = h.hexdigest()
    classes = BUILD_DIR / "classes"
    classpath_file = BUILD_DIR / "classpath.txt"
    stamp = BUILD_DIR / "inputs.sha256"
    fresh = (stamp.exists() and stamp.read_text() == digest and classpath_file.exists()
             and all(Path(p).exists() for p in classpath_file.read_text().strip().split(os.pathsep))
             and (classes / "pyrmq" / "bench" / "LoadGen.class").exists())
    if not fresh:
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        log_path = BUILD_DIR / "mvn.log"
        args = ["clean", "compile", "dependency:build-classpath", f"-Dmdep.outputFile={classpath_file}"]
        for extra in (["-o"], []):  # offline first, online if ~/.m2 lacks something
            with open(log_path, "ab") as log:
                proc = subprocess.run(["mvn", "-B", "-q", *extra, *args], cwd=JAVA_DIR, stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=900,
                                      check=False)
            if proc.returncode == 0:
                break
        else:
            raise SystemExit(f"building bench/java failed; see {log_path}")
        stamp.write_text(digest)
    return os.pathsep.join([str(classes), classpath_file.read_text().strip()])


# ------------------------------------------------------------------------------------- servers

def export_pyrmq(rev: str, dest: Path) -> str:
    """Put pyrmq as committed at ``rev`` into dest/pyrmq (git archive) and make every pyrmq
    server started from here on import it from there (PYTHONPATH comes before the editable
    install): others may be editing the working tree while a run goes on. Returns a label for the
    report: the short commit hash (and ``+ working tree`` when rev is ``worktree``)."""
    if rev == "worktree":
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "pyrmq"], cwd=REPO, capture_output=True,
                               text=True, check=False).stdout.strip()
        return f"{commit} (working tree{', with uncommitted changes in pyrmq/' if dirty else ''})"
    commit = subprocess.run(["git", "rev-parse", "--short", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.strip()
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", commit, "pyrmq"], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(dest), *filter(None, [os.environ.get("PYTHONPATH")])])
    return commit


class BenchPyrmqServer(PyrmqServer):
    """pyrmq standalone, listening on loopback only."""

    def __init__(self, config: ServerConfig, extra_conf: dict[str, str]) -> None:
        super().__init__(config)
        self.conf_path.write_text(config.broker_conf(extra_conf))


class BenchApacheServer(ApacheServer):
    """The compat harness's Apache server with a benchmark-sized broker JVM (the harness runs it
    with 256 MiB and SerialGC to stay small in the test suite)."""

    def __init__(self, config: ServerConfig, classpath: str, broker_jvm: list[str]) -> None:
        super().__init__(config, classpath)
        self.broker_jvm = broker_jvm

    def _spawn(self, argv: list[str], out_path: Path) -> subprocess.Popen:
        if "org.apache.rocketmq.broker.BrokerStartup" in argv:
            sized = ("-Xms", "-Xmx", "-Xmn", "-XX:MaxDirectMemorySize=", "-XX:+UseSerialGC", "-XX:+UseG1GC",
                     "-XX:+UseParallelGC")
            argv = [argv[0], *self.broker_jvm, *(a for a in argv[1:] if not a.startswith(sized))]
        self.last_broker_argv = argv if "org.apache.rocketmq.broker.BrokerStartup" in argv else None
        return super()._spawn(argv, out_path)


def server_pids(server: Server) -> list[int]:
    return [p.pid for p in server._processes() if p.poll() is None]


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of the processes (all threads), from /proc."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def create_topic(server: Server, topic: str, queues: int, timeout: float = 30.0) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker, then wait until the NameServer routes it."""
    broker = (LOOPBACK, server.config.ports.listen)
    header, _ = remoting_call(broker, UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false"}, timeout=10)
    if header.get("code") != 0:
        raise RuntimeError(f"{server.kind}: UPDATE_AND_CREATE_TOPIC {topic}: {header}")
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            header, body = remoting_call((LOOPBACK, server.config.ports.namesrv), GET_ROUTEINFO_BY_TOPIC,
                                         {"topic": topic})
            # Not json.loads: Apache's route JSON has integer map keys ({0:"addr"}).
            text = body.decode("utf-8", "replace")
            if header.get("code") == 0 and f'"writeQueueNums":{queues}' in text:
                return
            last = f"code {header.get('code')} {text[:200]}"
        except (OSError, ProbeError, ValueError) as exc:
            last = repr(exc)
        time.sleep(0.2)
    raise RuntimeError(f"{server.kind}: NameServer does not route {topic} with {queues} queues: {last}")


LOG_ERROR = re.compile(r"\b(ERROR|CRITICAL|FATAL|Traceback|Exception)\b")
LOG_WARN = re.compile(r"\b(WARN|WARNING)\b")


def log_sizes(paths: list[Path]) -> dict[Path, int]:
    return {p: p.stat().st_size for p in paths if p.exists()}


def log_problems(sizes: dict[Path, int], limit: int = 12) -> tuple[int, int, list[str]]:
    """(error lines, warning lines, the first few distinct ones, errors first) in the first
    ``sizes[path]`` bytes of each log: start-up and run, not the shutdown after SIGTERM."""
    errors, warnings, error_lines, warn_lines = 0, 0, [], []
    for path, size in sizes.items():
        try:
            with open(path, "rb") as f:
                lines = f.read(size).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if LOG_ERROR.search(line):
                errors += 1
                bucket = error_lines
            elif LOG_WARN.search(line):
                warnings += 1
                bucket = warn_lines
            else:
                continue
            key = re.sub(r"^[\d\-: ,.]+", "", line)[:400]  # without the timestamp, so repeats collapse
            if key not in bucket and len(bucket) < limit:
                bucket.append(key)
    return errors, warnings, (error_lines + warn_lines)[:limit]


# ------------------------------------------------------------------------------------- runs

@dataclass(frozen=True)
class Scenario:
    name: str
    threads: int
    batch: int
    transaction: bool = False   # TransactionMQProducer, local transaction commits at once


@dataclass
class RunResult:
    scenario: Scenario
    kind: str
    rep: int = 1
    summary: dict | None = None
    startup_s: float = 0.0
    cpu_pct: dict[str, float] | None = None
    quiet_wait_s: float = 0.0
    busy_before_pct: float | None = None
    stop_codes: list[int] = field(default_factory=list)
    log_errors: int = 0
    log_warnings: int = 0
    log_problem_lines: list[str] = field(default_factory=list)
    error: str | None = None
    workdir: Path | None = None


def loadgen_argv(args, classpath: str, workdir: Path, namesrv: str, topic: str, sc: Scenario) -> list[str]:
    return ["java", f"-Xms{args.loadgen_heap}", f"-Xmx{args.loadgen_heap}", "-XX:+UseG1GC",
            "-Drocketmq.serialize.type=ROCKETMQ",
            f"-Duser.home={workdir / 'home'}",
            "-Drocketmq.client.logUseSlf4j=false", f"-Drocketmq.client.logRoot={workdir / 'client-logs'}",
            "-cp", classpath, MAIN_CLASS,
            "--namesrv", namesrv, "--topic", topic, "--threads", str(sc.threads), "--size", str(args.size),
            "--batch", str(sc.batch), "--warmup", str(args.warmup), "--duration", str(args.duration),
            "--consume", "true", "--drain-timeout", str(args.drain_timeout),
            "--send-timeout", str(args.send_timeout), "--transaction", str(sc.transaction).lower()]


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle (user, nice, system, irq, softirq, steal), /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def wait_until_quiet(threshold_pct: float, max_wait_s: float) -> tuple[float, float]:
    """Wait (up to max_wait_s) for 3 s in a row in which the machine is busy below threshold_pct
    (100 % = one core) — others' work on a shared machine skews both servers' numbers. Returns
    (seconds waited, busy % of the last 3 s)."""
    start = time.monotonic()
    while True:
        b0, t0 = machine_busy_seconds(), time.monotonic()
        time.sleep(3)
        busy = 100 * (machine_busy_seconds() - b0) / (time.monotonic() - t0)
        waited = time.monotonic() - start
        if busy < threshold_pct or waited >= max_wait_s:
            return waited, busy


@dataclass
class CpuWindow:
    """CPU use during the measured window: server process(es), load generator, everything else."""

    server_pids: list[int]
    loadgen_pid: int
    start: tuple[float, float, float, float] | None = None
    pct: dict[str, float] | None = None

    def sample(self) -> tuple[float, float, float, float]:
        return (time.monotonic(), cpu_seconds(self.server_pids), cpu_seconds([self.loadgen_pid]),
                machine_busy_seconds())

    def open(self) -> None:
        self.start = self.sample()

    def close(self) -> None:
        if self.start is None:
            return
        end = self.sample()
        wall = end[0] - self.start[0]
        server, loadgen, busy = (100 * (e - s) / wall for s, e in zip(self.start[1:], end[1:]))
        self.pct = {"server": server, "loadgen": loadgen, "other": max(0.0, busy - server - loadgen)}


def run_loadgen(argv: list[str], workdir: Path, timeout: float, label: str,
                server_pids: list[int]) -> tuple[dict | None, str | None, dict[str, float] | None]:
    """Run the load generator, echo its ticks; return (its summary, an error, CPU % in the window)."""
    out_path, err_path = workdir / "loadgen.jsonl", workdir / "loadgen.err"
    summary, error = None, None
    with open(out_path, "w") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                text=True, preexec_fn=die_with_parent)  # noqa: PLW1509 - prctl only
        cpu = CpuWindow(server_pids, proc.pid)
        deadline = time.monotonic() + timeout

        def watchdog() -> None:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    proc.kill()
                    return
                time.sleep(0.5)

        threading.Thread(target=watchdog, daemon=True).start()
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("type")
            if kind == "tick":
                print(f"    {label} {event['phase']:<7} t={event['t']:5.1f}s send {event['send_tps']:>9,.0f}/s "
                      f"rt avg {event['avg_rt_ms']:7.2f} max {event['max_rt_ms']:8.1f} ms  "
                      f"failed {event['send_failed']:>3}  consume {event['consume_tps']:>9,.0f}/s", flush=True)
            elif kind == "phase":
                if event["phase"] == "measure":
                    cpu.open()
                else:
                    cpu.close()
            elif kind == "summary":
                summary = event
            elif kind == "start":
                print(f"    {label} load generator: client {event['client_version']}, "
                      f"{event['serialize']} headers", flush=True)
        rc = proc.wait()
    if rc != 0 and summary is None:
        tail = err_path.read_text(errors="replace").splitlines()[-15:]
        error = f"load generator exited {rc}" + (" (killed after timeout)" if time.monotonic() > deadline else "")
        error += "\n" + "\n".join(tail)
    elif summary is None:
        error = "load generator printed no summary"
    return summary, error, cpu.pct


def run_one(args, sc: Scenario, kind: str, rep: int, index: int, run_root: Path, loadgen_cp: str,
            reference_cp: str | None) -> RunResult:
    workdir = run_root / f"{index:02d}-{kind}-t{sc.threads}-b{sc.batch}"
    result = RunResult(sc, kind, rep, workdir=workdir)
    config = ServerConfig(workdir, allocate_ports(), flush_disk_type="ASYNC_FLUSH",
                          mapped_file_size_commit_log=args.commitlog_mib * MIB)
    if kind == "pyrmq":
        server: Server = BenchPyrmqServer(config, {"bindAddress": LOOPBACK})
        logs = [workdir / "pyrmq.out"]
    else:
        assert reference_cp is not None
        server = BenchApacheServer(config, reference_cp, args.apache_jvm.split())
        logs = [workdir / "namesrv.out", workdir / "broker.out", workdir / "logs" / "broker.log",
                workdir / "logs" / "namesrv.log"]
    topic = f"Bench_t{sc.threads}_b{sc.batch}"
    label = f"[{kind:>6}]"
    try:
        if args.quiet_wait > 0:
            waited, busy = wait_until_quiet(args.quiet_threshold, args.quiet_wait)
            result.quiet_wait_s, result.busy_before_pct = waited, busy
            print(f"    {label} machine busy {busy:.0f} % before the start (waited {waited:.0f} s)", flush=True)
        t0 = time.monotonic()
        server.start()
        result.startup_s = time.monotonic() - t0
        create_topic(server, topic, args.queues)
        argv = loadgen_argv(args, loadgen_cp, workdir, server.namesrv_addr, topic, sc)
        (workdir / "loadgen.cmd").write_text(shlex.join(argv) + "\n")
        timeout = args.warmup + args.duration + args.drain_timeout + 3 * args.send_timeout / 1000 + 60
        result.summary, result.error, result.cpu_pct = run_loadgen(argv, workdir, timeout, label,
                                                                   server_pids(server))
        for proc in server._processes():
            if proc.poll() is not None:
                result.error = (result.error or "") + f"\nserver process {proc.pid} exited {proc.returncode} during the run"
    except Exception as exc:  # noqa: BLE001 - a failed run is recorded, the others still run
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        sizes = log_sizes(logs)
        try:
            result.stop_codes = server.stop(timeout=30)
        finally:
            server.close()
        result.log_errors, result.log_warnings, result.log_problem_lines = log_problems(sizes)
        shutil.rmtree(config.store_dir, ignore_errors=True)
        shutil.rmtree(workdir / "home" / "store", ignore_errors=True)
    return result


# ------------------------------------------------------------------------------------- report

def machine_info() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, AttributeError):
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    return {"cores": str(os.cpu_count()), "ram": mem, "cpu": cpu,
            "java": java[0] if java else "unknown", "jvm": java[1] if len(java) > 1 else "",
            "python": platform.python_version() + f" ({platform.python_implementation()})",
            "os": platform.platform()}


def fmt(value, spec: str = ",.0f") -> str:
    return "—" if value is None else format(value, spec)


def ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}"


def report(args, results: list[RunResult], started: dt.datetime, elapsed_s: float, pyrmq_commit: str) -> str:
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
         f"{args.warmup} s warm-up + {args.duration} s measured, push consumer running throughout in the same "
         f"JVM, then up to {args.drain_timeout} s drain"),
        (f"- servers: fresh server and store per run, ASYNC_FLUSH, mappedFileSizeCommitLog={args.commitlog_mib} MiB; "
         f"pyrmq `python -m pyrmq standalone` (one process); Apache RocketMQ 4.9.7 NameServer + Broker, "
         f"broker JVM `{args.apache_jvm}`"),
        "",
        ("Send TPS = messages acknowledged SEND_OK per second in the measured window (a batch counts its "
         "messages); RT = one send call; consume TPS = messages the consumer received in the same window; "
         "lag = acknowledged but not consumed after the drain; CPU = CPU time / wall time in the measured window "
         "of the server process(es), of the load generator JVM, and of everything else on the machine "
         "(/proc/stat busy time minus those two; 200 % = both cores busy); log err / warn = lines in the "
         "server logs from start-up to the end of the run (not the shutdown) matching "
         "ERROR/Exception/Traceback and WARN(ING)."),
        "",
        ("| scenario | server | send TPS | calls/s | avg RT ms | max RT ms | send failed | consume TPS | "
         "lag after drain | drain s | CPU server | CPU loadgen | CPU other | log err / warn |"),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s = r.summary or {}

        def cpu(key: str, r: RunResult = r) -> str:
            return "—" if not r.cpu_pct else f"{r.cpu_pct[key]:.0f} %"

        failed = None if not s else s["send_failed"] + s["send_not_ok"]
        send = fmt(s.get("send_tps")) if s else "**run failed**"
        name = r.scenario.name + (f" (pass {r.rep})" if args.repeat > 1 else "")
        lines.append(
            f"| {name} | {r.kind} | {send} | {fmt(s.get('send_calls_tps'))} | "
            f"{fmt(s.get('avg_rt_ms'), '.2f')} | {fmt(s.get('max_rt_ms'), '.1f')} | {fmt(failed, 'd')} | "
            f"{fmt(s.get('consume_tps'))} | {fmt(s.get('lag'), ',d')} | {fmt(s.get('drain_s'), '.1f')} | "
            f"{cpu('server')} | {cpu('loadgen')} | {cpu('other')} | {r.log_errors} / {r.log_warnings} |")
    several = args.repeat > 1
    lines += ["", "Ratios pyrmq / Apache (send and consume TPS: higher is better for pyrmq; RT: lower is better)"
              + (", of the medians over the passes; send TPS ratio of each pass in the last column" if several
                 else "") + ":", "",
              "| scenario | send TPS | avg RT | max RT | consume TPS |" + (" send TPS per pass |" if several else ""),
              "|---|---:|---:|---:|---:|" + ("---:|" if several else "")]
    for sc in dict.fromkeys(r.scenario for r in results):
        def med(kind: str, key: str, sc: Scenario = sc) -> float | None:
            values = [r.summary[key] for r in results if r.scenario == sc and r.kind == kind and r.summary
                      and r.summary.get(key) is not None]
            return statistics.median(values) if values else None

        row = f"| {sc.name} | " + " | ".join(ratio(med("pyrmq", k), med("apache", k))
                                             for k in ("send_tps", "avg_rt_ms", "max_rt_ms", "consume_tps")) + " |"
        if several:
            per_pass = []
            for rep in range(1, args.repeat + 1):
                tps = {r.kind: (r.summary or {}).get("send_tps") for r in results if r.scenario == sc and r.rep == rep}
                per_pass.append(ratio(tps.get("pyrmq"), tps.get("apache")))
            row += " " + ", ".join(per_pass) + " |"
        lines.append(row)
    # Apache logs a handful of WARN lines at every start; pyrmq is expected to log none.
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
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------- main

def csv_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--duration", type=int, default=15, help="measured seconds per run (default 15)")
    parser.add_argument("--warmup", type=int, default=10,
                        help="uncounted seconds of sending first, also JIT warm-up for Apache (default 10)")
    parser.add_argument("--threads", type=csv_ints, default=[1, 16, 64], help="producer threads, 1 KiB messages")
    parser.add_argument("--batch", type=int, default=16, help="messages per batch in the batch scenarios (0: none)")
    parser.add_argument("--batch-threads", type=csv_ints, default=[16], help="producer threads, batch scenarios")
    parser.add_argument("--tx-threads", type=csv_ints, default=[],
                        help="producer threads, transactional 1 KiB messages committed at once (default: none)")
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

    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    if not servers or any(s not in ("pyrmq", "apache") for s in servers):
        parser.error("--servers takes pyrmq and/or apache")
    scenarios = [Scenario(f"1 KiB, {t} thread{'s' if t > 1 else ''}", t, 1) for t in args.threads]
    if args.batch > 1:
        scenarios += [Scenario(f"batch {args.batch} x 1 KiB, {t} thread{'s' if t > 1 else ''}", t, args.batch)
                      for t in args.batch_threads]
    scenarios += [Scenario(f"transactional 1 KiB, {t} thread{'s' if t > 1 else ''}", t, 1, True)
                  for t in args.tx_threads]

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
    results: list[RunResult] = []
    index = 0
    try:
        for rep in range(1, args.repeat + 1):
            for i, sc in enumerate(scenarios):
                order = servers if (i + rep) % 2 == 1 else list(reversed(servers))
                for kind in order:
                    index += 1
                    print(f"== {sc.name}: {kind}" + (f" (pass {rep})" if args.repeat > 1 else ""), flush=True)
                    r = run_one(args, sc, kind, rep, index, run_root, loadgen_cp, reference_cp)
                    s = r.summary or {}
                    cpu = r.cpu_pct and {k: round(v) for k, v in r.cpu_pct.items()}
                    print(f"   -> send {fmt(s.get('send_tps'))}/s, avg RT {fmt(s.get('avg_rt_ms'), '.2f')} ms, "
                          f"max RT {fmt(s.get('max_rt_ms'), '.1f')} ms, consume {fmt(s.get('consume_tps'))}/s, "
                          f"lag {fmt(s.get('lag'), ',d')}, CPU % {cpu}, "
                          f"startup {r.startup_s:.1f} s, stop codes {r.stop_codes}"
                          + (f"\n   !! {r.error}" if r.error else ""), flush=True)
                    results.append(r)
    except KeyboardInterrupt:
        print("interrupted; reporting what ran", flush=True)
    text = report(args, results, started, time.monotonic() - t0, pyrmq_commit)
    print()
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
        print(f"written to {args.markdown}")
    troubled = any(r.error or r.log_errors or not r.summary for r in results)
    if args.keep or troubled:
        print(f"logs kept in {run_root}")
    else:
        shutil.rmtree(run_root, ignore_errors=True)
    return 0 if all(r.summary for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

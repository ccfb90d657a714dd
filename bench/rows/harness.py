"""Shared machinery of bench/side_by_side.py and its row families (bench/rows/*): building the
Java load generator, starting either server kind with benchmark settings, creating topics,
measuring the server processes (CPU time, resident memory), running the load generator and
scanning server logs. Callers put the repository root on sys.path first (compat_tests)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

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
    apache_broker_extras,
    die_with_parent,
    remoting_call,
)

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO = BENCH_DIR.parent
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
    _build_native(commit, dest)
    return commit


# setuptools' build_ext over the revision's own ext-modules (pyproject.toml), as its install runs it
_BUILD_EXT = """
import sys, tomllib
from setuptools import Distribution, Extension
from setuptools.command.build_ext import build_ext
modules = tomllib.loads(sys.stdin.read()).get("tool", {}).get("setuptools", {}).get("ext-modules", [])
cmd = build_ext(Distribution({"ext_modules": [Extension(m["name"], m["sources"]) for m in modules]}))
cmd.inplace = True
cmd.ensure_finalized()
cmd.run()
"""


def _build_native(commit: str, dest: Path) -> None:
    """Compile the exported revision's C extensions next to its sources, as the editable install
    does for the working tree (a revision from before them has none)."""
    pyproject = subprocess.run(["git", "show", f"{commit}:pyproject.toml"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout
    done = subprocess.run([sys.executable, "-c", _BUILD_EXT], cwd=dest, input=pyproject, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"cannot build the C extensions of the exported revision: {done.stderr[-2000:]}")


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


def proc_status_kib(pids: list[int], key: str) -> int:
    """Sum over the processes of one /proc/PID/status field in KiB (VmRSS: resident now, VmHWM:
    the resident peak since the process started)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    total += int(line.split()[1])
                    break
        except (OSError, ValueError, IndexError):
            pass
    return total


# How often resident memory is sampled in a measured window.
RSS_SAMPLE_S = 0.5


@dataclass
class CpuWindow:
    """CPU use during the measured window: server process(es), load generator, everything else;
    plus the server processes' CPU seconds and their peak resident memory (sum of VmRSS sampled
    every RSS_SAMPLE_S, and the sum of VmHWM at the end)."""

    server_pids: list[int]
    loadgen_pid: int
    start: tuple[float, float, float, float] | None = None
    pct: dict[str, float] | None = None
    server_cpu_s: float | None = None
    rss_peak_kib: int = 0
    hwm_kib: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _sample_rss(self) -> None:
        while not self._stop.wait(RSS_SAMPLE_S):
            self.rss_peak_kib = max(self.rss_peak_kib, proc_status_kib(self.server_pids, "VmRSS"))

    def sample(self) -> tuple[float, float, float, float]:
        return (time.monotonic(), cpu_seconds(self.server_pids), cpu_seconds([self.loadgen_pid]),
                machine_busy_seconds())

    def open(self) -> None:
        self.start = self.sample()
        self.rss_peak_kib = proc_status_kib(self.server_pids, "VmRSS")
        threading.Thread(target=self._sample_rss, daemon=True).start()

    def close(self) -> None:
        if self.start is None:
            return
        end = self.sample()
        self._stop.set()
        self.rss_peak_kib = max(self.rss_peak_kib, proc_status_kib(self.server_pids, "VmRSS"))
        self.hwm_kib = proc_status_kib(self.server_pids, "VmHWM")
        self.server_cpu_s = end[1] - self.start[1]
        wall = end[0] - self.start[0]
        server, loadgen, busy = (100 * (e - s) / wall for s, e in zip(self.start[1:], end[1:]))
        self.pct = {"server": server, "loadgen": loadgen, "other": max(0.0, busy - server - loadgen)}


def run_loadgen(argv: list[str], workdir: Path, timeout: float, label: str,
                server_pids: list[int]) -> tuple[dict | None, str | None, CpuWindow]:
    """Run the load generator, echo its ticks; return (its summary, an error, the measured
    window's CPU and memory figures)."""
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
    return summary, error, cpu

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



# ------------------------------------------------------------------------------------- row plumbing

@dataclass
class Env:
    """What every row family needs: the parsed arguments, the two classpaths, the run's work
    directory (one numbered sub-directory per server run)."""

    args: object
    loadgen_cp: str
    reference_cp: str | None
    run_root: Path
    runs: int = 0

    def workdir(self, name: str) -> Path:
        self.runs += 1
        return self.run_root / f"{self.runs:02d}-{name}"


def make_server(env: Env, kind: str, workdir: Path, flush: str = "ASYNC_FLUSH",
                extra: dict[str, str] | None = None) -> tuple[Server, list[Path]]:
    """A (not yet started) server of ``kind`` with the benchmark settings and its log files."""
    config = ServerConfig(workdir, allocate_ports(), flush_disk_type=flush,
                          mapped_file_size_commit_log=env.args.commitlog_mib * MIB)
    if kind == "pyrmq":
        return (BenchPyrmqServer(config, {"bindAddress": LOOPBACK, **(extra or {})}), [workdir / "pyrmq.out"])
    assert env.reference_cp is not None
    server = BenchApacheServer(config, env.reference_cp, env.args.apache_jvm.split())
    if extra:
        server.broker_conf.write_text(config.broker_conf({**apache_broker_extras(config.store_dir), **extra}))
    return server, [workdir / "namesrv.out", workdir / "broker.out", workdir / "logs" / "broker.log",
                    workdir / "logs" / "namesrv.log"]


def discard_server(server: Server, logs: list[Path]) -> tuple[list[int], tuple[int, int, list[str]]]:
    """Stop the server (SIGTERM, SIGKILL after 30 s), delete its store; (exit codes, log problems
    from start-up to now, not the shutdown)."""
    sizes = log_sizes(logs)
    try:
        codes = server.stop(timeout=30)
    finally:
        server.close()
    shutil.rmtree(server.config.store_dir, ignore_errors=True)
    shutil.rmtree(server.config.home / "store", ignore_errors=True)
    return codes, log_problems(sizes)


def loadgen_java(env: Env, workdir: Path) -> list[str]:
    """The load generator's JVM command line up to its main class."""
    heap = env.args.loadgen_heap
    return ["java", f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-Drocketmq.serialize.type=ROCKETMQ",
            f"-Duser.home={workdir / 'home'}",
            "-Drocketmq.client.logUseSlf4j=false", f"-Drocketmq.client.logRoot={workdir / 'client-logs'}",
            "-cp", env.loadgen_cp, MAIN_CLASS]


def quiet_wait(env: Env, label: str) -> None:
    if env.args.quiet_wait > 0:
        waited, busy = wait_until_quiet(env.args.quiet_threshold, env.args.quiet_wait)
        print(f"    {label} machine busy {busy:.0f} % before the start (waited {waited:.0f} s)", flush=True)


@dataclass(frozen=True)
class Measure:
    """One figure of one server kind for the summary table (one row per row/measure pair)."""

    row: str
    measure: str
    kind: str
    value: float | None
    unit: str = ""
    better: str = "higher"   # or "lower": which way the ratio pyrmq / Apache should go
    note: str = ""


def measures_table(measures: list[Measure]) -> list[str]:
    """Markdown: one line per (row, measure), pyrmq and Apache side by side and their ratio."""
    keys = list(dict.fromkeys((m.row, m.measure) for m in measures))
    lines = ["| row | measure | pyrmq | Apache | pyrmq / Apache | better |", "|---|---|---:|---:|---:|---|"]
    for row, name in keys:
        got = {m.kind: m for m in measures if (m.row, m.measure) == (row, name)}
        first = next(iter(got.values()))
        py, ap = got.get("pyrmq"), got.get("apache")
        spec = ",.0f" if first.value is not None and abs(first.value) >= 100 else ",.2f"
        cell = [("—" if m is None else fmt(m.value, spec) + (f" {m.unit}" if m.value is not None and m.unit else ""))
                for m in (py, ap)]
        lines.append(f"| {row} | {name} | {cell[0]} | {cell[1]} | "
                     f"{ratio(py and py.value, ap and ap.value)} | {first.better} |")
    return lines


@dataclass
class RowOutput:
    """What a row family hands to the report: summary figures, its own Markdown lines (a table of
    its runs), and problems seen (one Markdown line each)."""

    measures: list[Measure] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def kinds_in_order(kinds: list[str], turn: int) -> list[str]:
    """The server kinds, which one goes first alternating with ``turn``."""
    return list(kinds) if turn % 2 == 0 else list(reversed(kinds))


def discard_into(out: RowOutput, what: str, kind: str, server: Server, logs: list[Path]) -> None:
    """discard_server, with error lines of the server's logs noted among the row's problems."""
    _codes, (errors, _warnings, lines) = discard_server(server, logs)
    if errors:
        out.problems.append(f"- {what}, {kind}: {errors} error lines in the server logs, e.g. "
                            + "; ".join(f"`{x}`" for x in lines[:3]))

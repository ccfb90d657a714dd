"""Runs pyrmq.compat.ScenarioRunner (compat_tests/java) and reads the JSON lines it prints.

Every line the runner prints is one event: ``sent`` / ``send_failed`` per message sent, ``recv``
per message received, ``pull`` per pull result, ``latency`` per long-polling attempt, then
``summary`` and ``exit``. Tests assert on those events; the client's own log goes to the test's
temp directory.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from compat_tests import docker_engine
from compat_tests.build import JavaBuild
from compat_tests.servers import die_with_parent

RUNNER_CLASS = "pyrmq.compat.ScenarioRunner"
DEFAULT_DEADLINE_MS = 90_000
# Beyond the runner's own deadline (it halts itself then): JVM start and stop.
SUBPROCESS_GRACE_S = 30


@dataclass
class ScenarioResult:
    argv: list[str]
    returncode: int
    events: list[dict]
    stdout_path: Path
    stderr_path: Path

    def of(self, ev: str) -> list[dict]:
        return [e for e in self.events if e["ev"] == ev]

    @property
    def sent(self) -> list[dict]:
        return self.of("sent")

    @property
    def received(self) -> list[dict]:
        return self.of("recv")

    @property
    def summary(self) -> dict:
        found = self.of("summary")
        assert found, f"no summary from {self.describe()}"
        return found[-1]

    def bodies(self, ev: str = "recv") -> list[str]:
        return [e["body"] for e in self.of(ev)]

    def duplicates(self, ev: str = "recv") -> dict[str, int]:
        return {b: n for b, n in Counter(self.bodies(ev)).items() if n > 1}

    def describe(self) -> str:
        try:
            err = "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            err = ""
        errors = [e.get("error", "") + "\n" + e.get("stack", "") for e in self.of("error")]
        return (f"{' '.join(self.argv[-12:])}\nrc={self.returncode}\nerrors: {errors}\n"
                f"stdout: {self.stdout_path}\nstderr tail:\n{err}")

    def check(self) -> "ScenarioResult":
        assert self.returncode == 0 and not self.of("error"), f"scenario failed: {self.describe()}"
        return self


@dataclass
class JavaClient:
    """One client version (client4 = rocketmq-client 4.9.8, client5 = 5.3.3)."""

    build: JavaBuild
    workdir: Path
    java: str = "java"
    runs: int = field(default=0)

    @property
    def flavor(self) -> str:
        return self.build.name

    def argv(self, scenario: str, options: dict[str, object],
             system_properties: dict[str, str] | None = None) -> list[str]:
        """``system_properties``: more -D flags (the client's TLS settings: tls.enable, tls.client.*);
        a key given here wins over the defaults above (the JVM keeps the last -D of a name)."""
        logs = self.workdir / "client-logs"
        jvm = [self.java, "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Duser.home={self.workdir}",
               "-Drocketmq.client.logUseSlf4j=false", f"-Drocketmq.client.logRoot={logs}",
               "-Drocketmq.client.logFileMaxIndex=2",
               *(f"-D{k}={v}" for k, v in (system_properties or {}).items()),
               "-cp", self.build.classpath, RUNNER_CLASS, scenario]
        opts = {"deadline-ms": DEFAULT_DEADLINE_MS}
        opts.update({k.replace("_", "-"): v for k, v in options.items() if v is not None})
        for key, value in opts.items():
            jvm += [f"--{key}", str(value)]
        return jvm

    def _paths(self, scenario: str) -> tuple[Path, Path]:
        self.runs += 1
        self.workdir.mkdir(parents=True, exist_ok=True)
        stem = f"{self.runs:02d}-{scenario}-{self.flavor}"
        return self.workdir / f"{stem}.jsonl", self.workdir / f"{stem}.err"

    def start(self, scenario: str, *, system_properties: dict[str, str] | None = None,
              **options: object) -> "RunningScenario":
        argv = self.argv(scenario, options, system_properties)
        out_path, err_path = self._paths(scenario)
        if docker_engine.enabled():
            # Container mode: the runner runs in a JDK container (same command line), beside the
            # pods on their network, or on the host's when its NameServer is a local process.
            out_path.write_bytes(b"")
            err_path.write_bytes(b"")
            namesrv = str(options.get("namesrv") or "")
            network_mode = "host" if not namesrv or namesrv.startswith(("127.", "localhost")) else docker_engine.NETWORK
            proc = docker_engine.ContainerProcess(argv, out_path, err_path, self.workdir, network_mode=network_mode)
        else:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                        cwd=self.workdir, preexec_fn=die_with_parent)
        deadline_s = int(options.get("deadline_ms", DEFAULT_DEADLINE_MS)) / 1000 + SUBPROCESS_GRACE_S
        return RunningScenario(argv, proc, out_path, err_path, deadline_s)

    def run(self, scenario: str, *, system_properties: dict[str, str] | None = None,
            **options: object) -> ScenarioResult:
        """Run a scenario to its end; the result is checked (exit 0, no error event)."""
        return self.start(scenario, system_properties=system_properties, **options).wait().check()


@dataclass
class RunningScenario:
    argv: list[str]
    proc: subprocess.Popen
    stdout_path: Path
    stderr_path: Path
    timeout_s: float

    def events(self) -> list[dict]:
        """What the runner has printed so far (complete lines only)."""
        out = []
        try:
            text = self.stdout_path.read_text(errors="replace")
        except OSError:
            return out
        for line in text.splitlines(keepends=True):
            if line.endswith("\n") and line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def wait_for(self, predicate, timeout: float, poll: float = 0.02) -> list[dict]:
        """Poll the events until predicate(events) holds; fail if the runner exits or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            events = self.events()
            if predicate(events):
                return events
            if self.proc.poll() is not None:
                raise AssertionError(f"runner exited (rc={self.proc.returncode}) before the condition held: "
                                     f"{self.result().describe()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not reached in {timeout}s: {self.result().describe()}")
            time.sleep(poll)

    def wait(self) -> ScenarioResult:
        try:
            self.proc.wait(self.timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.result()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def result(self) -> ScenarioResult:
        rc = self.proc.returncode if self.proc.returncode is not None else -1
        return ScenarioResult(self.argv, rc, self.events(), self.stdout_path, self.stderr_path)

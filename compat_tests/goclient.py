"""Builds and runs compat_tests/go: scenarios with the official Go client
(github.com/apache/rocketmq-client-go/v2, pinned in go/go.mod and go/go.sum).

The program is built once per session into ``compat_tests/.cache/go-scenarios`` and reused while
its inputs (go.mod, go.sum, the Go sources, the Go version) are unchanged. It prints the same kind
of JSON lines as the Java scenario runner (``sent``, ``recv``, ``pull``, ``summary``, ...; see the
comment at the top of go/main.go), so results are read with javaclient's ``ScenarioResult``.

Needs Go (``go`` on PATH, or /usr/local/go/bin/go); the first build downloads the pinned modules
through the module proxy into the user's module cache. With ``CI=true`` a missing Go toolchain
fails the suite; elsewhere the Go scenarios skip with the reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from compat_tests.build import CACHE_DIR, COMPAT_DIR, in_ci
from compat_tests.javaclient import RunningScenario, ScenarioResult
from compat_tests.servers import die_with_parent

GO_DIR = COMPAT_DIR / "go"
BINARY = CACHE_DIR / "go-scenarios"
STAMP = CACHE_DIR / "go-scenarios.inputs"
FALLBACK_GO = "/usr/local/go/bin/go"
BUILD_TIMEOUT_S = 900  # a cold module cache downloads the client's dependencies
DEFAULT_DEADLINE_MS = 90_000
SUBPROCESS_GRACE_S = 20  # beyond the program's own deadline (it exits itself 5 s after it)


class GoMissing(Exception):
    pass


class GoBuildFailed(Exception):
    pass


def find_go() -> str:
    go = shutil.which("go") or (FALLBACK_GO if os.access(FALLBACK_GO, os.X_OK) else None)
    if go is None:
        raise GoMissing(f"the Go scenarios need a Go toolchain: no `go` on PATH and no {FALLBACK_GO}")
    return go


def _build_env() -> dict[str, str]:
    # go.sum is committed: -mod=readonly (the default) builds exactly the pinned versions and never
    # rewrites go.mod. GOTOOLCHAIN=local: use the installed toolchain, never download another.
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0")
    env["GOFLAGS"] = " ".join(f for f in (env.get("GOFLAGS", ""), "-buildvcs=false") if f)
    return env


def _inputs_hash(go: str) -> str:
    h = hashlib.sha256()
    version = subprocess.run([go, "version"], check=False, capture_output=True, text=True, timeout=60).stdout
    h.update(version.encode())
    for path in sorted([GO_DIR / "go.mod", GO_DIR / "go.sum", *GO_DIR.glob("*.go")]):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def build(go: str) -> Path:
    """Build go-scenarios unless the cached binary matches the current inputs."""
    digest = _inputs_hash(go)
    if BINARY.exists() and STAMP.exists() and STAMP.read_text().strip() == digest:
        return BINARY
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    log_path = CACHE_DIR / "go-build.log"
    tmp = BINARY.with_suffix(".tmp")
    with open(log_path, "wb") as log:
        proc = subprocess.run([go, "build", "-o", str(tmp), "."], check=False, cwd=GO_DIR, env=_build_env(),
                              stdout=log, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S)
    if proc.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
        raise GoBuildFailed(f"`go build` in {GO_DIR} exited {proc.returncode} (log {log_path}):\n{tail}")
    tmp.replace(BINARY)
    STAMP.write_text(digest + "\n")
    return BINARY


@dataclass
class GoClient:
    binary: Path
    workdir: Path
    runs: int = field(default=0)

    def argv(self, scenario: str, options: dict[str, object]) -> list[str]:
        argv = [str(self.binary), scenario]
        opts = {"deadline-ms": DEFAULT_DEADLINE_MS}
        opts.update({k.replace("_", "-"): v for k, v in options.items() if v is not None})
        for key, value in opts.items():
            argv += [f"--{key}", str(value)]
        return argv

    def start(self, scenario: str, **options: object) -> RunningScenario:
        argv = self.argv(scenario, options)
        self.runs += 1
        self.workdir.mkdir(parents=True, exist_ok=True)
        stem = f"{self.runs:02d}-{scenario}-go"
        out_path, err_path = self.workdir / f"{stem}.jsonl", self.workdir / f"{stem}.err"
        # The Go client logs through logrus to stderr; errors only. HOME: it may write ~/logs.
        env = dict(os.environ, HOME=str(self.workdir), ROCKETMQ_GO_LOG_LEVEL="error")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=self.workdir,
                                    env=env, preexec_fn=die_with_parent)
        deadline_s = int(options.get("deadline_ms", DEFAULT_DEADLINE_MS)) / 1000 + SUBPROCESS_GRACE_S
        return RunningScenario(argv, proc, out_path, err_path, deadline_s)

    def run(self, scenario: str, **options: object) -> ScenarioResult:
        """Run a scenario to its end; the result is checked (exit 0, no error event)."""
        return self.start(scenario, **options).wait().check()


_built: dict[str, GoClient] = {}  # one build and one run directory per session


def session_client(tmp_path_factory: pytest.TempPathFactory) -> GoClient:
    """The Go scenario program, built once per session (test modules wrap this in a session fixture
    named ``go_client``). Go missing: a failure under CI=true, a skip elsewhere."""
    if "client" not in _built:
        try:
            go = find_go()
        except GoMissing as exc:
            if in_ci():
                pytest.fail(f"{exc} (CI=true: the Go compat scenarios must run in CI)", pytrace=False)
            pytest.skip(str(exc))
        try:
            binary = build(go)
        except (GoBuildFailed, OSError, subprocess.TimeoutExpired) as exc:
            pytest.fail(f"building the Go compat scenarios failed: {exc}", pytrace=False)
        _built["client"] = GoClient(binary, tmp_path_factory.mktemp("go-runs"))
    return _built["client"]

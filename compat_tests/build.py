"""Maven builds the compat suite needs, run once and cached under compat_tests/.cache/.

- ``client4`` / ``client5``: compat_tests/java (the scenario runner) compiled against
  rocketmq-client 4.9.8 / 5.3.3, plus the dependency classpath of each.
- ``reference``: the classpath of Apache RocketMQ's NameServer and Broker (compat_tests/reference),
  4.9.7 by default; ``build_reference("5.3.3")`` resolves the 5.x server from the same pom with
  ``-Drocketmq.version=5.3.3`` into its own cache directory.

A build is reused while the hash of its inputs (pom and sources) is unchanged and every jar on
its classpath still exists. Maven runs offline first (fast, no network) and online if the local
repository lacks something.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

COMPAT_DIR = Path(__file__).resolve().parent
CACHE_DIR = COMPAT_DIR / ".cache"
JAVA_DIR = COMPAT_DIR / "java"
REFERENCE_DIR = COMPAT_DIR / "reference"

CLIENT_FLAVORS = ("client4", "client5")
# The Apache servers on Maven Central the suite runs as references. 5.3.3: the newest 5.3.x with
# both rocketmq-namesrv and rocketmq-broker on Central that matches the client5 version.
REFERENCE_VERSIONS = ("4.9.7", "5.3.3")
MAVEN_TIMEOUT_S = 900  # a cold ~/.m2 downloads a few hundred jars


class ToolMissing(Exception):
    """A required tool (java, mvn) is not on PATH."""


class BuildFailed(Exception):
    pass


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_tools() -> None:
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    if missing:
        raise ToolMissing(
            f"compat tests need a JDK 11+ (java, javac) and Maven (mvn) on PATH; missing: {', '.join(missing)}")


@dataclass(frozen=True)
class JavaBuild:
    name: str
    classes: Path | None
    dependency_classpath: str

    @property
    def classpath(self) -> str:
        parts = ([str(self.classes)] if self.classes else []) + [self.dependency_classpath]
        return os.pathsep.join(p for p in parts if p)


def _inputs_hash(paths: list[Path], extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for path in sorted(paths):
        h.update(str(path.relative_to(COMPAT_DIR)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _classpath_intact(classpath_file: Path) -> bool:
    if not classpath_file.exists():
        return False
    entries = [e for e in classpath_file.read_text().strip().split(os.pathsep) if e]
    return bool(entries) and all(Path(e).exists() for e in entries)


def _mvn(args: list[str], cwd: Path, log_path: Path) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    attempts = (["-o"], [])  # offline when everything is in ~/.m2, else fetch what is missing
    for extra in attempts:
        cmd = ["mvn", "-B", "-q", *extra, *args]
        with open(log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            proc = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=MAVEN_TIMEOUT_S)
        if proc.returncode == 0:
            return
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
    raise BuildFailed(f"mvn {' '.join(args)} failed in {cwd} (log: {log_path}):\n{tail}")


def build_client(flavor: str) -> JavaBuild:
    """Compile the scenario runner against one client version; return its classpath."""
    if flavor not in CLIENT_FLAVORS:
        raise ValueError(f"unknown client flavor {flavor!r}; expected one of {CLIENT_FLAVORS}")
    out_dir = CACHE_DIR / "java" / flavor  # the pom's <build><directory> for this profile
    classpath_file = out_dir / "classpath.txt"
    stamp = out_dir / "inputs.sha256"
    inputs = [JAVA_DIR / "pom.xml", *(JAVA_DIR / "src").rglob("*.java")]
    digest = _inputs_hash(inputs, flavor)
    fresh = (stamp.exists() and stamp.read_text() == digest and _classpath_intact(classpath_file)
             and (out_dir / "classes" / "pyrmq" / "compat" / "ScenarioRunner.class").exists())
    if not fresh:
        _mvn(["-P", flavor, "clean", "compile", "dependency:build-classpath",
              f"-Dmdep.outputFile={classpath_file}"], JAVA_DIR, CACHE_DIR / "logs" / f"mvn-{flavor}.log")
        stamp.write_text(digest)
    return JavaBuild(flavor, out_dir / "classes", classpath_file.read_text().strip())


def build_reference(version: str = REFERENCE_VERSIONS[0]) -> JavaBuild:
    """Resolve Apache RocketMQ's NameServer and Broker jars of ``version``; return their classpath."""
    if version not in REFERENCE_VERSIONS:
        raise ValueError(f"unknown reference version {version!r}; expected one of {REFERENCE_VERSIONS}")
    # 4.9.7 keeps its historical cache directory; other versions get one of their own.
    out_dir = CACHE_DIR / ("reference" if version == REFERENCE_VERSIONS[0] else f"reference-{version}")
    classpath_file = out_dir / "classpath.txt"
    stamp = out_dir / "inputs.sha256"
    digest = _inputs_hash([REFERENCE_DIR / "pom.xml"], version)
    if not (stamp.exists() and stamp.read_text() == digest and _classpath_intact(classpath_file)):
        out_dir.mkdir(parents=True, exist_ok=True)
        _mvn(["dependency:build-classpath", f"-Drocketmq.version={version}", f"-Dmdep.outputFile={classpath_file}"],
             REFERENCE_DIR, CACHE_DIR / "logs" / f"mvn-reference-{version}.log")
        stamp.write_text(digest)
    return JavaBuild(f"reference-{version}", None, classpath_file.read_text().strip())

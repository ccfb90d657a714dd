"""The JDK a FilterServer uses for Java filter classes, found once at start-up.

``javac`` and ``java`` come from ``$JAVA_HOME/bin`` or ``PATH`` as the FilterServer process
starts -- never from a request or from runtime configuration. The jars filter classes compile
against (rocketmq-common: ``MessageFilter``, ``MessageExt``, ``FilterContext``) are the start-up
setting ``filterJavaClasspath``; they are copied into the FilterServer's own work directory, so
the jailed compiler and workers (user nobody when started as root) can read them. The worker
program (java/FilterWorker.java, ours) is compiled at the first Java registration, outside the
jail since it is not filter code; uploaded sources are compiled inside it, with annotation
processing off (``-proc:none``: no code of the upload runs at compile time).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import trio

from pyrmq.filtersrv.workers import WorkerLimits, jail_argv, worker_env

log = logging.getLogger(__name__)

JAVA_CLASS_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*")
COMPILE_TIMEOUT_S = 60.0
COMPILE_CPU_SECONDS = 60
COMPILE_OUTPUT_MB = 16   # room for the .class files of one upload, and nothing more
# The JVM flags that keep a JVM inside the jail's address space and away from files.
JVM_FLAGS = ["-XX:-UsePerfData", "-XX:+UseSerialGC", "-XX:ReservedCodeCacheSize=32m",
             "-XX:CompressedClassSpaceSize=64m", "-XX:MaxMetaspaceSize=96m", "-Xss1m", "-XX:ErrorFile=/dev/null"]


class JavaUnavailable(Exception):
    """No JDK, or no rocketmq-common jar to compile against: Java filter classes are refused."""


def find_jdk() -> tuple[str, str] | None:
    """``(javac, java)`` from JAVA_HOME or PATH, resolved now; None without a JDK."""
    home = os.environ.get("JAVA_HOME")
    candidates = [(str(Path(home) / "bin" / "javac"), str(Path(home) / "bin" / "java"))] if home else []
    candidates.append((shutil.which("javac") or "", shutil.which("java") or ""))
    for javac, java in candidates:
        if javac and java and os.access(javac, os.X_OK) and os.access(java, os.X_OK):
            return os.path.realpath(javac), os.path.realpath(java)
    return None


@dataclass
class JavaToolchain:
    javac: str
    java: str
    work_dir: Path          # the FilterServer's own directory (lib/, worker/, classes/, cwd/)
    classpath: list[Path]   # the copied jars
    limits: WorkerLimits
    _worker_built: bool = False
    _compiles: int = 0

    @classmethod
    def create(cls, work_dir: Path, jars: list[str], limits: WorkerLimits) -> JavaToolchain:
        """Find the JDK and copy the jars (a worker thread: file copies)."""
        jdk = find_jdk()
        if jdk is None:
            raise JavaUnavailable("no JDK on this FilterServer (javac and java from JAVA_HOME or PATH at start-up): "
                                  "Java filter classes cannot be compiled")
        if not jars:
            raise JavaUnavailable("filterJavaClasspath is not set: no rocketmq-common jar to compile filter classes "
                                  "against")
        lib = work_dir / "lib"
        lib.mkdir(mode=0o755, exist_ok=True)
        copied = []
        for jar in jars:
            source = Path(jar)
            if not source.is_file():
                raise JavaUnavailable(f"filterJavaClasspath: {jar} is not a file")
            target = lib / source.name
            shutil.copyfile(source, target)
            target.chmod(0o644)
            copied.append(target)
        return cls(jdk[0], jdk[1], work_dir, copied, limits)

    def _classpath(self, *extra: Path) -> str:
        return os.pathsep.join(str(p) for p in (*extra, *self.classpath))

    def _build_worker(self) -> None:
        worker_dir = self.work_dir / "worker"
        worker_dir.mkdir(mode=0o755, exist_ok=True)
        source = worker_dir / "FilterWorker.java"
        source.write_bytes(resources.files("pyrmq.filtersrv").joinpath("java/FilterWorker.java").read_bytes())
        result = subprocess.run([self.javac, "-nowarn", "-proc:none", "-encoding", "UTF-8", "-cp", self._classpath(),
                                 "-d", str(worker_dir), str(source)],
                                capture_output=True, timeout=COMPILE_TIMEOUT_S, env=worker_env())
        if result.returncode != 0:
            raise JavaUnavailable("cannot build the Java filter worker: " + result.stderr.decode(errors="replace")[-2000:])
        for path in worker_dir.iterdir():
            path.chmod(0o644)
        self._worker_built = True

    def _jail(self, cpu_seconds: int, address_space_mb: int, file_size_mb: int, writable: str = "") -> list[str]:
        extra = ["--writable", writable] if writable else []
        return jail_argv(["--cpu-seconds", str(cpu_seconds), "--address-space-mb", str(address_space_mb),
                          "--file-size-mb", str(file_size_mb), "--open-files", "512", *extra], str(self.work_dir / "cwd"))

    async def compile(self, class_name: str, source: bytes) -> Path:
        """Compile an uploaded source in the jail; returns the directory of its classes."""
        if not JAVA_CLASS_NAME.fullmatch(class_name):
            raise ValueError(f"{class_name!r} is not a Java class name")
        if not self._worker_built:
            await trio.to_thread.run_sync(self._build_worker)
        self._compiles += 1
        unit = self.work_dir / "classes" / str(self._compiles)
        src_dir = unit / "src" / Path(*class_name.split(".")[:-1])
        out_dir = unit / "out"

        def prepare() -> Path:
            src_dir.mkdir(parents=True, mode=0o755)
            out_dir.mkdir(mode=0o755)
            if os.geteuid() == 0:   # the jailed compiler runs as nobody and writes only here
                os.chown(out_dir, 65534, 65534)
            path = src_dir / (class_name.rsplit(".", 1)[-1] + ".java")
            path.write_bytes(source)
            path.chmod(0o644)
            return path

        source_path = await trio.to_thread.run_sync(prepare)
        argv = [*self._jail(COMPILE_CPU_SECONDS, self.limits.jvm_address_space_mb, COMPILE_OUTPUT_MB, str(out_dir)),
                "exec",
                self.javac, "-J-Xmx256m", *("-J" + flag for flag in JVM_FLAGS), "-nowarn", "-proc:none",
                "-encoding", "UTF-8", "-cp", self._classpath(), "-d", str(out_dir), str(source_path)]
        with trio.move_on_after(COMPILE_TIMEOUT_S) as scope:
            result = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False,
                                            env=worker_env())
        if scope.cancelled_caught:
            raise ValueError(f"compiling {class_name} took longer than {COMPILE_TIMEOUT_S:.0f} s")
        if result.returncode != 0:
            text = (result.stdout + result.stderr).decode("utf-8", "replace").strip()
            raise ValueError(f"compiling {class_name} failed: {text[-1500:]}")
        return out_dir

    def worker_argv(self) -> list[str]:
        return [*self._jail(self.limits.cpu_seconds, self.limits.jvm_address_space_mb, 0), "exec", self.java,
                f"-Xmx{self.limits.memory_mb}m", *JVM_FLAGS, "-cp", self._classpath(self.work_dir / "worker"),
                "FilterWorker"]

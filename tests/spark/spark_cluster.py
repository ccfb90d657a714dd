"""Spark processes for the job tests, from the pyspark installation: ``spark-submit`` as a user
runs it, and a standalone master with one worker (``spark-class``) on loopback ports.

Every process runs this interpreter's Python (the venv with pyrmq_spark) for its Python workers,
and dies with the test session.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from compat_tests.servers import LOOPBACK, spawn_logged, tail_of, wait_listening
from tests.broker.conftest import free_port

SUBMIT_TIMEOUT_S = 300
START_TIMEOUT_S = 90


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def spark_env() -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


def spark_submit(script: Path, *spark_args: str, args: list[str]) -> subprocess.CompletedProcess:
    """``spark-submit [spark_args] script [args]``; fails the test with Spark's output if it fails."""
    argv = [str(spark_home() / "bin" / "spark-submit"), *spark_args, "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.pyspark.python={sys.executable}", "--driver-memory", "1g", str(script), *args]
    proc = subprocess.run(argv, env=spark_env(), capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S)
    assert proc.returncode == 0, f"spark-submit exited {proc.returncode}:\n{proc.stderr[-6000:]}"
    return proc



class StandaloneCluster:
    """A Spark standalone master and one worker (1 core, 1 GiB) under ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.master_log = workdir / "master.log"
        self.worker_log = workdir / "worker.log"
        self.procs: list[subprocess.Popen] = []

    def _spawn(self, role: str, args: list[str], log: Path) -> subprocess.Popen:
        argv = [str(spark_home() / "bin" / "spark-class"), f"org.apache.spark.deploy.{role}", *args]
        proc = spawn_logged(argv, log, cwd=self.workdir, env=spark_env(), banner=role)
        self.procs.append(proc)
        return proc

    def __enter__(self) -> StandaloneCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            master = self._spawn("master.Master", ["--host", "127.0.0.1", "--port", str(self.port),
                                                   "--webui-port", str(free_port())], self.master_log)
            wait_listening(LOOPBACK, self.port, master, START_TIMEOUT_S)
            self._spawn("worker.Worker", ["--host", "127.0.0.1", "--webui-port", str(free_port()),
                                          "--cores", "1", "--memory", "1g",
                                          "--work-dir", str(self.workdir / "work"), self.master_url], self.worker_log)
            self._wait_for(self.master_log, r"Registering worker 127\.0\.0\.1:")
        except BaseException:
            self.close()
            raise
        return self

    def _wait_for(self, log: Path, pattern: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not re.search(pattern, log.read_text(errors="replace")):
            dead = [p.args[1] for p in self.procs if p.poll() is not None]
            assert not dead, f"{dead} exited\n{self.log_tail()}"
            assert time.monotonic() < deadline, f"no {pattern!r} in {log}\n{self.log_tail()}"
            time.sleep(0.2)

    def ran_an_executor(self) -> bool:
        """Did the worker launch an executor (so the job ran on the cluster, not in the driver)?"""
        return "Asked to launch executor" in self.worker_log.read_text(errors="replace")

    def log_tail(self) -> str:
        return "\n".join(tail_of(p, 30) for p in (self.master_log, self.worker_log))

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()

    def __exit__(self, *exc: object) -> None:
        self.close()

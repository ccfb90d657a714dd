"""Running the compat suite's client programs in containers when a Docker engine is reachable.

With an engine (the Docker SDK finds one through DOCKER_HOST or the default socket), the Java
scenario runner runs inside ``eclipse-temurin`` with the host network, the repository and the
Maven repository bind-mounted at the same paths, so the command line and the class path are the
ones the local run would use.  Without an engine everything runs on the local JDK / Go toolchain.
``PYRMQ_COMPAT_DOCKER=0`` forces the local path, ``=1`` requires the engine.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

JAVA_IMAGE = os.environ.get("PYRMQ_COMPAT_JAVA_IMAGE", "eclipse-temurin:17-jdk")
REPO = Path(__file__).resolve().parents[1]


@functools.cache
def engine():
    """A connected ``docker.DockerClient``, or None when no engine is reachable (or it is turned off)."""
    choice = os.environ.get("PYRMQ_COMPAT_DOCKER", "auto")
    if choice == "0":
        return None
    try:
        import docker
        client = docker.from_env(timeout=5)
        client.ping()
        return client
    except Exception as exc:   # no SDK, no socket, no permission: all mean "run locally"
        if choice == "1":
            raise RuntimeError(f"PYRMQ_COMPAT_DOCKER=1 but no Docker engine is reachable: {exc}") from exc
        return None


class ContainerProcess:
    """The part of ``subprocess.Popen`` the scenario runner uses, for a container.

    stdout/stderr are streamed into the given files as the container writes them, so callers can
    watch events appear exactly as with a local process.
    """

    def __init__(self, argv: list[str], stdout_path: Path, stderr_path: Path, cwd: Path,
                 env: dict[str, str] | None = None) -> None:
        client = engine()
        if client is None:
            raise RuntimeError("no Docker engine")
        # Same paths inside as outside: the class path and the work files need no rewriting.
        mounts = {REPO: "rw", Path(cwd): "rw"}
        home_m2 = Path.home() / ".m2"
        if home_m2.exists():
            mounts[home_m2] = "ro"
        volumes = {str(path): {"bind": str(path), "mode": mode} for path, mode in mounts.items()}
        self.container = client.containers.run(
            JAVA_IMAGE, command=argv, detach=True, network_mode="host", volumes=volumes,
            working_dir=str(cwd), environment=env or {}, user=f"{os.getuid()}:{os.getgid()}")
        self.returncode: int | None = None
        self._pumps = [threading.Thread(target=self._pump, args=(stdout_path, True, False), daemon=True),
                       threading.Thread(target=self._pump, args=(stderr_path, False, True), daemon=True)]
        for pump in self._pumps:
            pump.start()

    def _pump(self, path: Path, want_stdout: bool, want_stderr: bool) -> None:
        with open(path, "ab") as sink:
            for chunk in self.container.logs(stream=True, follow=True, stdout=want_stdout, stderr=want_stderr):
                sink.write(chunk)
                sink.flush()

    def poll(self) -> int | None:
        if self.returncode is None:
            self.container.reload()
            if self.container.status == "exited":
                self.returncode = self.container.attrs["State"]["ExitCode"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        try:
            result = self.container.wait(timeout=timeout)
        except Exception as exc:   # the SDK raises requests' ReadTimeout
            raise subprocess.TimeoutExpired(self.container.name, timeout) from exc
        self.returncode = result["StatusCode"]
        for pump in self._pumps:
            pump.join(timeout=5)
        self.container.remove(force=True)
        return self.returncode

    def kill(self) -> None:
        try:
            self.container.kill()
        except Exception:   # already gone
            pass

    def send_signal(self, signum: int) -> None:
        self.container.kill(signal=signum)

    terminate = kill

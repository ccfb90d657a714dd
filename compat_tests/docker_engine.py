"""The Docker engine of the test run, and the compat suite's client programs in containers.

The engine is DOCKER_HOST's, else the private one ``scripts/dockerd-private`` starts (CI's:
``make test`` starts it as root), else the machine's default socket. :func:`docker_host` says
which; :func:`require_engine` is what the container tests use (a failure under CI=true when
there is none, a skip elsewhere).

With ``PYRMQ_COMPAT_DOCKER=1`` the Java scenario runner runs inside the ``pyrmq-jdk`` image
(``make docker-images``: Debian's JDK, no image registry) with the host network, the repository
and the Maven repository bind-mounted at the same paths, so the command line and the class path
are the ones the local run would use. By default it runs on the local JDK.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

JAVA_IMAGE = os.environ.get("PYRMQ_COMPAT_JAVA_IMAGE", "pyrmq-jdk:latest")
REPO = Path(__file__).resolve().parents[1]
PRIVATE_SOCKET = "/run/pyrmq-docker/docker.sock"   # scripts/dockerd-private
DEFAULT_SOCKET = "/var/run/docker.sock"


def docker_host() -> str | None:
    """DOCKER_HOST, else the private engine's socket, else the default one; None when none exists."""
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    for socket_path in (PRIVATE_SOCKET, DEFAULT_SOCKET):
        if os.path.exists(socket_path):
            return f"unix://{socket_path}"
    return None


@functools.cache
def connect():
    """A connected ``docker.DockerClient`` and the host it reached, or (None, why not)."""
    host = docker_host()
    if host is None:
        return None, f"no Docker engine: DOCKER_HOST is unset and neither {PRIVATE_SOCKET} nor {DEFAULT_SOCKET} exists"
    try:
        import docker

        client = docker.DockerClient(base_url=host, version="auto", timeout=60)
        client.ping()
        return client, host
    except Exception as exc:   # no SDK, a dead socket, no permission
        return None, f"the Docker engine at {host} does not answer: {exc}"


def require_engine():
    """The engine for a container test: fails under CI=true (the Docker path must run in CI), skips elsewhere."""
    import pytest

    client, why = connect()
    if client is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{why} (CI=true: the container tests must run; scripts/dockerd-private start)", pytrace=False)
        pytest.skip(why)
    return client


def engine():
    """The engine the Java scenario runner uses: only with PYRMQ_COMPAT_DOCKER=1, which requires it."""
    if os.environ.get("PYRMQ_COMPAT_DOCKER", "0") != "1":
        return None
    client, why = connect()
    if client is None:
        raise RuntimeError(f"PYRMQ_COMPAT_DOCKER=1 but {why}")
    return client


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

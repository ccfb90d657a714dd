"""The Docker engine of the test run, and the compat suite's servers and clients in containers.

The engine is DOCKER_HOST's, else the private one ``scripts/dockerd-private`` starts (CI's:
``make test`` starts it as root), else the machine's default socket. :func:`docker_host` says
which; :func:`require_engine` is what the container tests use (a failure under CI=true when
there is none, a skip elsewhere).

The container mode (:func:`enabled`: ``PYRMQ_COMPAT_DOCKER=1``, and by default under CI=true)
runs the compat suite's programs in containers of the images ``make docker-images`` builds with
no image registry:

- a server's processes (``pyrmq standalone``, ``pyrmq namesrv`` / ``broker``, Apache's
  NamesrvStartup / BrokerStartup) in one :class:`Pod`: a holder container with its own address
  on the user-defined bridge network ``pyrmq-compat``, whose network namespace each process
  container joins, as the containers of a Kubernetes pod do. pyrmq runs in ``pyrmq:latest``,
  Apache in ``pyrmq-jdk:latest``. Brokers register the pod's address, which the host reaches
  through the bridge, so probes, the Go client and the Python checks need no port publishing;
- the Java scenario runner in ``pyrmq-jdk:latest``: on the ``pyrmq-compat`` network when its
  NameServer is a pod, on the host network when it is a local process (the mixed-cluster and HA
  scenarios, the compose file's published ports).

Every container runs as the test run's user with the repository, ``~/.m2`` and the test run's
temporary directory bind-mounted at the same paths, so command lines, class paths and the files
tests read are those of the local run. Containers carry the label ``pyrmq-compat`` = the pytest
process id; :func:`remove_orphans` removes those of a session that died.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

JAVA_IMAGE = os.environ.get("PYRMQ_COMPAT_JAVA_IMAGE", "pyrmq-jdk:latest")
SERVER_IMAGE = os.environ.get("PYRMQ_COMPAT_SERVER_IMAGE", "pyrmq:latest")
NETWORK = "pyrmq-compat"
LABEL = "pyrmq-compat"
# A container's state is asked at most this often by poll() (wait loops poll every 20-100 ms).
POLL_INTERVAL_S = 0.1
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


def enabled() -> bool:
    """Container mode: PYRMQ_COMPAT_DOCKER=1/0 when set, else on under CI=true."""
    flag = os.environ.get("PYRMQ_COMPAT_DOCKER")
    if flag is not None:
        return flag == "1"
    return os.environ.get("CI", "").lower() == "true"


def engine():
    """The engine of the container mode; None when it is off. On, it requires an engine."""
    if not enabled():
        return None
    client, why = connect()
    if client is None:
        raise RuntimeError(f"container mode (PYRMQ_COMPAT_DOCKER=1 or CI=true) but {why}")
    return client


# Directories every container mounts read-write at the same path (the test run's temp root).
_shared: set[Path] = set()


def share(path: Path) -> None:
    _shared.add(Path(path).resolve())


def _volumes(*extra_rw: Path) -> dict[str, dict[str, str]]:
    mounts: dict[Path, str] = {REPO: "rw"}
    home_m2 = Path.home() / ".m2"
    if home_m2.exists():
        mounts[home_m2] = "ro"
    mounts.update(dict.fromkeys(_shared, "rw"))
    for path in (Path(p).resolve() for p in extra_rw):
        if not any(path.is_relative_to(mounted) for mounted in mounts):
            mounts[path] = "rw"
    return {str(path): {"bind": str(path), "mode": mode} for path, mode in mounts.items()}


def _labels() -> dict[str, str]:
    return {LABEL: str(os.getpid())}


def remove_orphans(client) -> int:
    """Remove the containers of compat sessions whose pytest process is gone; how many."""
    removed = 0
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        pid = container.labels.get(LABEL, "")
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            container.remove(force=True)
            removed += 1
    return removed


def network(client):
    """The user-defined bridge network the pods and the containerised clients share."""
    import docker.errors

    try:
        return client.networks.get(NETWORK)
    except docker.errors.NotFound:
        return client.networks.create(NETWORK, driver="bridge", labels={LABEL: "network"})


def subnet() -> ipaddress.IPv4Network:
    """The ``pyrmq-compat`` network's addresses (the pods' and the containerised clients')."""
    client = engine()
    if client is None:
        raise RuntimeError("container mode is off")
    [config] = network(client).attrs["IPAM"]["Config"]
    return ipaddress.IPv4Network(config["Subnet"])


class Pod:
    """One address on the ``pyrmq-compat`` network for the processes of one server.

    A holder container sleeps with the address; each process container joins its network
    namespace (``network_mode=container:<holder>``), so a server's NameServer and brokers reach
    each other on their ports, its address survives a broker's restart, and several servers run
    side by side without publishing a port.
    """

    def __init__(self, name: str) -> None:
        client = engine()
        if client is None:
            raise RuntimeError("container mode is off")
        network(client)
        self.container = client.containers.run(
            SERVER_IMAGE, entrypoint=["sleep", "infinity"], command=[], detach=True, network=NETWORK,
            name=f"pyrmq-compat-{name}-{uuid.uuid4().hex[:8]}", labels=_labels(), healthcheck={"test": ["NONE"]})
        self.container.reload()
        self.ip: str = self.container.attrs["NetworkSettings"]["Networks"][NETWORK]["IPAddress"]
        self.network_mode = f"container:{self.container.id}"

    def close(self) -> None:
        try:
            self.container.remove(force=True)
        except Exception:   # already gone (the engine stopped)
            pass


def server_image_and_command(argv: list[str]) -> tuple[str, list[str] | None, list[str]]:
    """The image, entrypoint and command that run a server's local command line in a container:
    ``<python> -m pyrmq ...`` in the pyrmq image (its entrypoint is ``pyrmq``), ``java ...`` in the
    JDK image."""
    if argv[1:3] == ["-m", "pyrmq"]:
        return SERVER_IMAGE, None, argv[3:]
    if Path(argv[0]).name == "java":
        return JAVA_IMAGE, None, argv
    raise ValueError(f"no image runs {argv[:3]}")


class ContainerProcess:
    """The part of ``subprocess.Popen`` the compat harness uses, for a container.

    Its output is streamed into the given files as the container writes it (stderr into
    ``stdout_path`` when ``stderr_path`` is None), so callers watch events and log lines appear
    exactly as with a local process. Once the container has exited, a file whose stream did not
    end cleanly (the API call failed, or it was still running) is written again whole from the
    engine's log: a scenario's result never misses lines the program printed.
    """

    def __init__(self, argv: list[str], stdout_path: Path, stderr_path: Path | None, cwd: Path, *,
                 image: str = JAVA_IMAGE, network_mode: str = "host", entrypoint: list[str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        client = engine()
        if client is None:
            raise RuntimeError("container mode is off")
        if network_mode == NETWORK:
            network(client)
        self.args = argv
        self.container = client.containers.run(
            image, command=argv, entrypoint=entrypoint, detach=True, network_mode=network_mode,
            volumes=_volumes(Path(cwd)), working_dir=str(cwd), environment=env or {},
            user=f"{os.getuid()}:{os.getgid()}", labels=_labels(), healthcheck={"test": ["NONE"]})
        self.returncode: int | None = None
        self._polled_at = 0.0
        self._sink_lock = threading.Lock()
        self._taken_over = False      # set once _finish rewrites the files: late pumps stop writing
        self._pumped_whole: set[Path] = set()
        # where this container's output starts in each file (a restarted server appends to its log)
        self._starts = {path: path.stat().st_size if path.exists() else 0
                        for path in (stdout_path, stderr_path) if path is not None}
        if stderr_path is None:
            self._sinks = [(stdout_path, True, True)]
        else:
            self._sinks = [(stdout_path, True, False), (stderr_path, False, True)]
        self._pumps = [threading.Thread(target=self._pump, args=sink, daemon=True) for sink in self._sinks]
        for pump in self._pumps:
            pump.start()

    @property
    def pid(self) -> str:
        return self.container.short_id

    def _pump(self, path: Path, want_stdout: bool, want_stderr: bool) -> None:
        try:
            with open(path, "ab") as sink:
                for chunk in self.container.logs(stream=True, follow=True, stdout=want_stdout, stderr=want_stderr):
                    with self._sink_lock:
                        if self._taken_over:
                            return
                        sink.write(chunk)
                        sink.flush()
            with self._sink_lock:
                self._pumped_whole.add(path)
        except Exception:   # the API call failed, or the container was removed under the stream
            pass

    def _finish(self, code: int) -> int:
        self.returncode = code
        for pump in self._pumps:
            pump.join(timeout=5)
        with self._sink_lock:
            self._taken_over = True
            for path, want_stdout, want_stderr in self._sinks:
                if path not in self._pumped_whole:
                    try:
                        whole = self.container.logs(stdout=want_stdout, stderr=want_stderr)
                    except Exception:   # removed meanwhile: keep what was streamed
                        continue
                    with open(path, "a+b") as sink:   # appends go to the end: after the truncate
                        sink.truncate(self._starts[path])
                        sink.write(whole)
        try:
            self.container.remove(force=True)
        except Exception:   # already removed
            pass
        return code

    def poll(self) -> int | None:
        now = time.monotonic()
        if self.returncode is None and now - self._polled_at >= POLL_INTERVAL_S:
            self._polled_at = now
            self.container.reload()
            if self.container.status in ("exited", "dead"):
                self._finish(self.container.attrs["State"]["ExitCode"])
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        try:
            result = self.container.wait(timeout=timeout)
        except Exception as exc:   # the SDK raises requests' ReadTimeout
            raise subprocess.TimeoutExpired(self.args, timeout or 0) from exc
        return self._finish(result["StatusCode"])

    def send_signal(self, signum: int) -> None:
        try:
            self.container.kill(signal=signum)
        except Exception:   # it exited already
            pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

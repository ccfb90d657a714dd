"""pyrmq in containers, on a real Docker engine, with images built from Debian's packages alone
(``scripts/docker_images.py``: no image registry is reachable here).

- The image: standalone by default, the servers run as the unprivileged ``rocketmq`` user with the
  store on a volume, the HEALTHCHECK (``pyrmq health``, over the remoting protocol) turns healthy,
  and ``docker stop`` ends it gracefully (exit 0, not the SIGKILL after the grace period).
- ``docker-compose.yml``: its NameServer and Broker, the official Java client 4.9.8 producing and
  consuming through the published ports; the broker (SYNC_FLUSH) is killed with ``docker kill``,
  started again on its volume, and every acknowledged message is there.
- The compat suite's container mode (CI's): the shared servers are pods of the right image on the
  ``pyrmq-compat`` network, and the Java runner's connections come from a container beside them.

Under CI=true a missing engine fails these tests (``make test`` starts a private one as root).
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time
import uuid

import pytest

from compat_tests import docker_engine
from compat_tests.checks import assert_received_exactly, assert_sent_ok
from compat_tests.cluster import client4_fixture  # noqa: F401  (the Java client 4.9.8)
from compat_tests.docker_engine import REPO, connect, require_engine
from pyrmq.client.sync import PullConsumer
from tests.broker.conftest import free_port

pytestmark = [pytest.mark.compat, pytest.mark.slow]

IMAGE = "pyrmq:latest"
HEALTHY_TIMEOUT_S = 90
COMPOSE_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def engine():
    return require_engine()


@pytest.fixture(scope="module")
def docker_env(engine) -> dict[str, str]:
    """The environment of docker / docker-compose commands: the engine the SDK reached."""
    _, host = connect()
    return {**os.environ, "DOCKER_HOST": host}


@pytest.fixture(scope="module")
def images(engine, docker_env) -> None:
    """pyrmq-base (cached by its recipe), pyrmq:latest and pyrmq-jdk:latest, built as `make docker-images` does."""
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "docker_images.py")], env=docker_env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"docker_images.py exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    engine.images.get(IMAGE)



def _wait_healthy(container, timeout: float = HEALTHY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        container.reload()
        state = container.attrs["State"]
        health = state.get("Health", {}).get("Status")
        if health == "healthy":
            return
        assert state["Status"] == "running", f"{container.name} is {state['Status']}:\n{_logs(container)}"
        assert time.monotonic() < deadline, f"{container.name} not healthy ({health}) in {timeout:.0f} s:\n{_logs(container)}"
        time.sleep(0.5)


def _logs(container) -> str:
    return container.logs(tail=40).decode(errors="replace")


def test_image_runs_unprivileged_healthy_and_stops_gracefully(engine, images):
    container = engine.containers.run(IMAGE, detach=True, ports={"9876/tcp": ("127.0.0.1", free_port())})
    try:
        config = engine.images.get(IMAGE).attrs["Config"]
        assert config["User"] == "rocketmq" and "/data" in config["Volumes"]
        assert config["Healthcheck"]["Test"] == ["CMD", "pyrmq", "health"]
        _wait_healthy(container)
        uid = container.exec_run(["id", "-u"])
        assert uid.output.decode().strip() == "10001"
        # the store is on the volume, written by that user
        listing = container.exec_run(["ls", "-n", "/data/store"])
        assert listing.exit_code == 0 and " 10001 " in listing.output.decode(), listing.output
        started = time.monotonic()
        container.stop(timeout=20)
        container.reload()
        assert container.attrs["State"]["ExitCode"] == 0, _logs(container)   # 137 would be the SIGKILL after the grace
        assert time.monotonic() - started < 15
        assert "broker stopped" in _logs(container)
    finally:
        container.remove(force=True, v=True)


class Compose:
    """``docker-compose`` (Debian's) on the repository's compose file, as its own project."""

    def __init__(self, env: dict[str, str], **settings: str) -> None:
        self.project = f"pyrmqt{uuid.uuid4().hex[:8]}"
        self.env = {**env, **settings}

    def __call__(self, *args: str) -> str:
        argv = ["docker-compose", "-p", self.project, "-f", str(REPO / "docker-compose.yml"), *args]
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=COMPOSE_TIMEOUT_S)
        assert proc.returncode == 0, f"{' '.join(args)}: {proc.stderr[-4000:]}"
        return proc.stdout

    def container(self, engine, service: str):
        [found] = engine.containers.list(all=True, filters={"label": [f"com.docker.compose.project={self.project}",
                                                                      f"com.docker.compose.service={service}"]})
        return found


def test_compose_java_client_through_published_ports_and_broker_kill(engine, images, docker_env, client4):  # noqa: F811
    namesrv_port, broker_port = free_port(), free_port()
    compose = Compose(docker_env, PYRMQ_NAMESRV_PORT=str(namesrv_port), PYRMQ_BROKER_PORT=str(broker_port),
                      PYRMQ_FLUSH_DISK_TYPE="SYNC_FLUSH")
    namesrv = f"127.0.0.1:{namesrv_port}"
    tag = uuid.uuid4().hex[:8]
    topic, group = f"DockerT_{tag}", f"DockerG_{tag}"
    try:
        compose("up", "-d", "--no-build", "namesrv", "broker")
        broker = compose.container(engine, "broker")
        for service in ("namesrv", "broker"):
            _wait_healthy(compose.container(engine, service))

        before = client4.run("produce", namesrv=namesrv, topic=topic, mode="sync", count=40, tags="TagA,TagB",
                             create_topic=4, body_prefix="before")
        assert [e["status"] for e in before.sent] == ["SEND_OK"] * 40
        assert {e["offsetMsgId"][:16] for e in before.sent} == {f"7F000001{broker_port:08X}"}   # 127.0.0.1:port
        consumed = client4.run("consume", namesrv=namesrv, topic=topic, group=group, count=40, idle_ms=500)
        assert_received_exactly(before.sent, consumed.received)

        # SIGKILL: no flush, no shutdown hook. SYNC_FLUSH acknowledged each message after its fsync.
        broker.kill()
        broker.reload()
        assert broker.attrs["State"]["ExitCode"] == 137
        compose("start", "broker")
        _wait_healthy(broker)
        after = client4.run("produce", namesrv=namesrv, topic=topic, mode="sync", count=10, body_prefix="after")
        assert [e["status"] for e in after.sent] == ["SEND_OK"] * 10

        pulled = client4.run("pull", namesrv=namesrv, topic=topic, group=f"{group}_pull")
        assert_received_exactly(before.sent + after.sent, pulled.received)
    finally:
        subprocess.run(["docker-compose", "-p", compose.project, "-f", str(REPO / "docker-compose.yml"),
                        "down", "-v", "--timeout", "5"], env=compose.env, capture_output=True, timeout=COMPOSE_TIMEOUT_S)


@pytest.mark.compat_servers("pyrmq", "apache", "pyrmq-split")
def test_container_mode_runs_servers_and_runner_in_containers(compat_containers, server, server_kind, client4,  # noqa: F811
                                                              names):
    if compat_containers is None:
        pytest.skip("container mode is off: PYRMQ_COMPAT_DOCKER=1 turns it on (CI=true does by default)")
    pod = server.config.pod
    assert pod is not None, "a shared server ran as local processes in container mode"
    network = docker_engine.network(compat_containers).attrs["IPAM"]["Config"][0]
    subnet, gateway = ipaddress.ip_network(network["Subnet"]), ipaddress.ip_address(network["Gateway"])
    assert ipaddress.ip_address(pod.ip) in subnet and server.broker_addr == f"{pod.ip}:{server.config.ports.listen}"
    broker = server._broker_process().container
    broker.reload()
    image = "pyrmq:latest" if server_kind.startswith("pyrmq") else "pyrmq-jdk:latest"
    assert image in broker.image.tags and broker.attrs["HostConfig"]["NetworkMode"] == pod.network_mode
    assert broker.status == "running"

    run = client4.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync", count=4,
                      create_topic=1)
    assert_sent_ok(run.sent, 4, server)   # offsetMsgId: the pod's address, as the broker registered it
    with PullConsumer(server.namesrv_addr, names.group, timeout=10) as consumer:
        [mq] = consumer.fetch_queues(names.topic)
        pulled = consumer.pull(mq, 0).messages
    assert [m.body.decode() for m in pulled] == [e["body"] for e in run.sent]
    # A client on the host would reach the pod from the bridge's gateway address.
    born = {ipaddress.ip_address(m.born_host[0]) for m in pulled}
    assert len(born) == 1 and born <= set(subnet.hosts()) - {gateway, ipaddress.ip_address(pod.ip)}, born


def test_container_output_is_whole_when_its_stream_is_lost(engine, images, tmp_path, monkeypatch):
    """A container whose log stream failed (the engine's API call errors, as it did once in CI: a
    scenario with no events at all) still leaves its whole output in the files once it exited:
    the harness reads a scenario's events from them."""
    def lost_stream(self, path, want_stdout, want_stderr):
        with open(path, "ab") as sink:
            sink.write(b"partial")   # written, then the stream broke (the real pump swallows the error)

    monkeypatch.setattr(docker_engine.ContainerProcess, "_pump", lost_stream)
    out, err = tmp_path / "run.jsonl", tmp_path / "run.err"
    out.write_bytes(b"an earlier run's line\n")   # a restarted server appends to its file
    lines = [f'{{"ev": "line", "i": {i}}}' for i in range(3)]
    program = f"import sys; print({chr(10).join(lines)!r}); print('to stderr', file=sys.stderr)"
    proc = docker_engine.ContainerProcess(["-c", program], out, err, tmp_path, image=IMAGE, entrypoint=["python3"])
    assert proc.wait(timeout=60) == 0
    assert out.read_text() == "an earlier run's line\n" + "\n".join(lines) + "\n"
    assert err.read_text() == "to stderr\n"

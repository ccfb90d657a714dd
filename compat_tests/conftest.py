"""Fixtures of the compat suite: Java builds, servers, clients and unique names.

Parameters (both are session-scoped, so one shared server serves every test of its kind):

- ``server_kind``: ``pyrmq``, ``apache`` (Apache RocketMQ 4.9.7) and/or ``apache5`` (5.3.3);
  ``--compat-servers`` or ``PYRMQ_COMPAT_SERVERS`` (comma-separated, default
  ``pyrmq,apache,apache5``). ``pyrmq-split`` (``pyrmq namesrv`` + ``pyrmq broker`` as two
  processes) runs only when named. A test runs on the kinds of its ``compat_servers(...)`` marker
  (default ``pyrmq``, ``apache``, ``pyrmq-split``) that are selected: Apache 5.3 serves only the
  scenarios that name it (5.x features and a 5.x client baseline), so the suite pays its start
  once and not for every 4.x scenario.
- ``client_kind``: ``client4`` (rocketmq-client 4.9.8) and/or ``client5`` (5.3.3);
  ``--compat-clients`` or ``PYRMQ_COMPAT_CLIENTS`` (default both).

A test marked ``compat_exclude(server, client)`` is deselected for that pair (not skipped): the
pair is not a valid reference run (see the test's docstring).

With ``CI=true`` a missing JDK or Maven fails the suite; elsewhere it skips with the reason.

Container mode (``PYRMQ_COMPAT_DOCKER=1``; on by default under CI=true, ``PYRMQ_COMPAT_DOCKER=0``
turns it off): the images are built first (``scripts/docker_images.py``, as ``make
docker-images``), then every server of these fixtures runs in a pod of containers and every Java
scenario runner in a container (compat_tests/docker_engine.py). Exceptions, run as processes
whatever the mode: a pyrmq broker that starts class-filter FilterServers (they compile Java, and
the pyrmq image has no JDK), and the clusters of compat_tests/cluster.py (mixed clusters, HA).
"""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
import uuid
from dataclasses import dataclass

import pytest

from compat_tests import build, docker_engine
from compat_tests.javaclient import JavaClient
from compat_tests.servers import (Apache5Server, ApacheServer, PyrmqServer, PyrmqSplitServer, Server, ServerConfig,
                                  TwoBrokerCluster, allocate_ports)

# pyrmq-split (NameServer and broker as two pyrmq processes) runs only when asked for by name.
SERVER_KINDS = ("pyrmq", "apache", "apache5", "pyrmq-split")
DEFAULT_SERVER_KINDS = ("pyrmq", "apache", "apache5")
# The kinds a test without a compat_servers marker may run on.
UNMARKED_SERVER_KINDS = ("pyrmq", "apache", "pyrmq-split")
# Apache reference version per server kind (build.build_reference).
APACHE_VERSIONS = {"apache": "4.9.7", "apache5": "5.3.3"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("compat", "RocketMQ client compatibility suite")
    group.addoption("--compat-servers", default=None,
                    help="servers to run against, comma-separated: pyrmq,apache,apache5 "
                         "(default: $PYRMQ_COMPAT_SERVERS or pyrmq,apache,apache5)")
    group.addoption("--compat-clients", default=None,
                    help="Java client versions, comma-separated: client4,client5 "
                         "(default: $PYRMQ_COMPAT_CLIENTS or client4,client5)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "compat_exclude(server, client): deselect this (server, client) pair")
    config.addinivalue_line(
        "markers", "compat_servers(*kinds): the server kinds this test runs on (default pyrmq, apache, pyrmq-split)")


def _selected(config: pytest.Config, what: str, known: tuple[str, ...], default: tuple[str, ...]) -> list[str]:
    raw = config.getoption(f"--compat-{what}") or os.environ.get(f"PYRMQ_COMPAT_{what.upper()}") or ",".join(default)
    chosen = [s.strip() for s in raw.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise pytest.UsageError(f"unknown compat {what}: {unknown}; known: {list(known)}")
    return chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "server_kind" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("compat_servers")
        allowed = marker.args if marker else UNMARKED_SERVER_KINDS
        kinds = [k for k in _selected(metafunc.config, "servers", SERVER_KINDS, DEFAULT_SERVER_KINDS) if k in allowed]
        metafunc.parametrize("server_kind", kinds, scope="session")
    if "client_kind" in metafunc.fixturenames:
        metafunc.parametrize("client_kind",
                             _selected(metafunc.config, "clients", build.CLIENT_FLAVORS, build.CLIENT_FLAVORS),
                             scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        pair = (params.get("server_kind"), params.get("client_kind"))
        if any(tuple(m.args) == pair for m in item.iter_markers("compat_exclude")):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# ------------------------------------------------------------------------------------- containers

@pytest.fixture(scope="session", autouse=True)
def compat_containers(tmp_path_factory):
    """Container mode: the images built (cached by content), the test run's temp root shared with
    every container, containers of dead sessions removed. None when the mode is off."""
    client = docker_engine.engine() if docker_engine.enabled() else None
    if client is None:
        yield None
        return
    docker_engine.remove_orphans(client)
    docker_engine.share(tmp_path_factory.getbasetemp())
    _, host = docker_engine.connect()
    proc = subprocess.run([sys.executable, str(docker_engine.REPO / "scripts" / "docker_images.py")],
                          env={**os.environ, "DOCKER_HOST": host}, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        pytest.fail(f"docker_images.py exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}",
                    pytrace=False)
    yield client


def _pod(request: pytest.FixtureRequest, name: str) -> docker_engine.Pod | None:
    """A pod for a server's processes in container mode (removed after the server stops)."""
    if request.getfixturevalue("compat_containers") is None:
        return None
    pod = docker_engine.Pod(name)
    request.addfinalizer(pod.close)
    return pod


# ------------------------------------------------------------------------------------- builds

@pytest.fixture(scope="session")
def java_toolchain() -> None:
    try:
        build.require_tools()
    except build.ToolMissing as exc:
        if build.in_ci():
            pytest.fail(f"{exc} (CI=true: the compat suite must run in CI)", pytrace=False)
        pytest.skip(str(exc))


def _built(fn, *args) -> build.JavaBuild:
    try:
        return fn(*args)
    except (build.BuildFailed, OSError) as exc:
        pytest.fail(f"Maven build for the compat suite failed: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def reference_build(java_toolchain) -> build.JavaBuild:
    return _built(build.build_reference, APACHE_VERSIONS["apache"])


@pytest.fixture(scope="session")
def reference5_build(java_toolchain) -> build.JavaBuild:
    return _built(build.build_reference, APACHE_VERSIONS["apache5"])


@pytest.fixture(scope="session")
def java_client(client_kind: str, java_toolchain, tmp_path_factory) -> JavaClient:
    return JavaClient(_built(build.build_client, client_kind), tmp_path_factory.mktemp(f"{client_kind}-runs"))


# ------------------------------------------------------------------------------------- servers

def _start_server(kind: str, request: pytest.FixtureRequest, tmp_path_factory,
                  flush_disk_type: str = "ASYNC_FLUSH", broker_extra: dict[str, str] | None = None,
                  tls: dict[str, str] | None = None, probe_ssl: ssl.SSLContext | None = None,
                  plain_acl: str | None = None) -> Server:
    # Class-filter FilterServers compile Java: the pyrmq image has no JDK, so such a broker runs locally.
    in_pod = not (kind.startswith("pyrmq") and "filterServerNums" in (broker_extra or {}))
    config = ServerConfig(tmp_path_factory.mktemp(f"{kind}-server"), allocate_ports(),
                          flush_disk_type=flush_disk_type, broker_extra=dict(broker_extra or {}),
                          tls=dict(tls or {}), probe_ssl=probe_ssl, plain_acl=plain_acl,
                          pod=_pod(request, kind) if in_pod else None)
    if kind == "apache":
        srv: Server = ApacheServer(config, request.getfixturevalue("reference_build").classpath)
    elif kind == "apache5":
        srv = Apache5Server(config, request.getfixturevalue("reference5_build").classpath)
    elif kind == "pyrmq-split":
        srv = PyrmqSplitServer(config)
    else:
        srv = PyrmqServer(config)
    request.addfinalizer(srv.close)  # before start: a server that fails to start is stopped too
    srv.start()
    return srv


@pytest.fixture(scope="session")
def server(server_kind: str, java_toolchain, request, tmp_path_factory) -> Server:
    """One server per kind, shared by every test that only needs its own topics and groups."""
    return _start_server(server_kind, request, tmp_path_factory)


@pytest.fixture
def server_factory(server_kind: str, java_toolchain, request, tmp_path_factory):
    """Servers of this test alone (restart and kill scenarios); stopped at the test's end."""

    def make(flush_disk_type: str = "ASYNC_FLUSH") -> Server:
        return _start_server(server_kind, request, tmp_path_factory, flush_disk_type)

    return make


@pytest.fixture(scope="module")
def module_server_factory(server_kind: str, java_toolchain, request, tmp_path_factory):
    """Servers shared by one test module, with extra broker.conf keys (Apache names); stopped at
    the module's end. ``make(accessMessageInMemoryMaxRatio="0")``."""

    def make(**broker_extra: str) -> Server:
        return _start_server(server_kind, request, tmp_path_factory, broker_extra=broker_extra)

    return make


@pytest.fixture(scope="module")
def module_tls_server_factory(server_kind: str, java_toolchain, request, tmp_path_factory):
    """Servers with TLS settings (Apache's system property names: -D flags of both Apache JVMs,
    broker.conf / namesrv.conf keys for pyrmq), shared by one test module. ``make(tls={...},
    probe_ssl=ctx)``; the readiness probe speaks TLS through ``probe_ssl``."""

    def make(tls: dict[str, str], probe_ssl: ssl.SSLContext | None = None) -> Server:
        return _start_server(server_kind, request, tmp_path_factory, tls=tls, probe_ssl=probe_ssl)

    return make


@pytest.fixture
def two_broker_cluster(server_kind: str, java_toolchain, request, tmp_path_factory) -> TwoBrokerCluster:
    """One NameServer with broker-a and broker-b (DefaultCluster), each its own process, for this
    test alone (fail-over scenarios stop and start brokers). pyrmq-split runs as pyrmq here."""
    kind = "apache" if server_kind == "apache" else "pyrmq"
    classpath = request.getfixturevalue("reference_build").classpath if kind == "apache" else None
    cluster = TwoBrokerCluster(kind, tmp_path_factory.mktemp(f"{kind}-two-brokers"), classpath,
                               pod=_pod(request, f"{kind}-two-brokers"))
    request.addfinalizer(cluster.close)
    cluster.start()
    return cluster


@pytest.fixture(scope="session")
def java_clients(java_toolchain, tmp_path_factory, request) -> dict[str, JavaClient]:
    """Every selected client version at once (cross-version scenarios: produce with one, read with
    each)."""
    flavors = _selected(request.config, "clients", build.CLIENT_FLAVORS, build.CLIENT_FLAVORS)
    return {f: JavaClient(_built(build.build_client, f), tmp_path_factory.mktemp(f"{f}-cross-runs"))
            for f in flavors}


# ------------------------------------------------------------------------------------- names

@dataclass(frozen=True)
class Names:
    topic: str
    group: str

    def another_group(self, suffix: str) -> str:
        return f"{self.group}_{suffix}"


@pytest.fixture
def names(request) -> Names:
    """A topic and a consumer group no other test (or earlier run on a kept store) uses."""
    base = re.sub(r"[^A-Za-z0-9]", "", request.node.originalname.removeprefix("test_"))[:40]
    tag = uuid.uuid4().hex[:8]
    return Names(topic=f"T_{base}_{tag}", group=f"G_{base}_{tag}")

"""Clusters built node by node, for scenarios that mix pyrmq and Apache RocketMQ.

``servers.py`` runs one NameServer with one broker of one kind. Here each node is its own object:
a NameServer of either kind (:class:`PyrmqNameServer`, :class:`ApacheNameServer`) and brokers of
either kind (:class:`PyrmqBroker`, :class:`ApacheBroker`) that register with any NameServer
address, on any store directory. A broker of one kind can therefore be stopped and one of the
other kind started on the same store directory and ports (store interoperability), or brokers
of both kinds can register with one NameServer (mixed clusters).

Every node runs as a child process in its own work directory (``HOME`` / ``user.home`` point
into it, so Apache's logs land in ``<workdir>/logs``); :class:`Cluster` remembers what it started
and SIGKILLs whatever still runs at teardown.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from compat_tests import build
from compat_tests.checks import wait_consumer_offsets_at
from compat_tests.javaclient import JavaClient
from compat_tests.servers import (
    AUTO_CREATE_TOPIC_KEY,
    GET_MAX_OFFSET,
    GET_ROUTEINFO_BY_TOPIC,
    LOGBACK_TEMPLATE,
    LOOPBACK,
    PORT_RANGE,
    PROBE_TIMEOUT_S,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    ProbeError,
    apache_jvm,
    tail_of,
    spawn_logged,
    remoting_call,
)

CLUSTER_NAME = "DefaultCluster"
TOPIC_NOT_EXIST = 17

# Small files keep a temp store small; both kinds are given the same sizes (Apache refuses files
# whose length differs from its configured size).
MAPPED_FILE_SIZE_COMMIT_LOG = 64 * 1024 * 1024
MAPPED_FILE_SIZE_CONSUME_QUEUE = 300_000 * 20


# --------------------------------------------------------------------------------------- ports

_handed_out: set[int] = set()


def _free(port: int) -> bool:
    if port in _handed_out:
        return False
    for host in (LOOPBACK, "0.0.0.0"):  # Apache binds the wildcard address
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_port_block(size: int) -> int:
    """The first of ``size`` consecutive free loopback ports, never handed out before in this
    session (so two nodes asked for in a row cannot get the same ones)."""
    rng = random.Random()
    for _ in range(1000):
        base = rng.randrange(PORT_RANGE[0], PORT_RANGE[1] - size)
        block = range(base, base + size)
        if all(_free(p) for p in block):
            _handed_out.update(block)
            return base
    raise RuntimeError(f"no {size} free consecutive loopback ports in {PORT_RANGE}")


def broker_listen_port() -> int:
    """A broker's listen port L with L-2 (fast port), L-1 and L+1 (HA) free as well."""
    return free_port_block(4) + 2


# --------------------------------------------------------------------------------------- processes

class Node(ABC):
    """One child process: a NameServer or a broker."""

    kind: str
    role: str
    graceful_exit_codes: frozenset[int] = frozenset({0})

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.home = workdir / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.out_path = workdir / f"{self.role}.out"
        self.proc: subprocess.Popen | None = None

    @abstractmethod
    def argv(self) -> list[str]:
        ...

    def env(self) -> dict[str, str]:
        return dict(os.environ, HOME=str(self.home))

    def launch(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, f"{self} is running"
        argv = self.argv()
        self.proc = spawn_logged(argv, self.out_path, cwd=self.workdir, env=self.env(),
                                 banner=" ".join(argv[-6:]))

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self} exited with {self.proc.returncode}\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; the exit code (SIGKILL after the timeout: then -9)."""
        assert self.proc is not None, f"{self} never started"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.running:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def close(self) -> None:
        self.kill()

    def log_files(self) -> list[Path]:
        return [self.out_path]

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(tail_of(p, lines) for p in self.log_files())

    def __repr__(self) -> str:
        return f"<{self.kind} {self.role} {self.workdir.name}>"


def _wait_listening(node: Node, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node.check_alive()
        try:
            socket.create_connection((LOOPBACK, port), timeout=PROBE_TIMEOUT_S).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{node} not listening on {port} after {timeout:.0f}s\n{node.log_tail()}")


# --------------------------------------------------------------------------------------- Apache JVM

def _apache_logging(node: Node, role: str) -> Path:
    """ROCKETMQ_HOME/conf/logback_<role>.xml sending everything to <workdir>/logs/<role>.log."""
    log_file = node.workdir / "logs" / f"{role}.log"
    conf = node.home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / f"logback_{role}.xml").write_text(LOGBACK_TEMPLATE.format(log_file=log_file))
    return log_file


# --------------------------------------------------------------------------------------- NameServers

class NameServer(Node):
    role = "namesrv"

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        super().__init__(workdir)
        self.port = port if port is not None else free_port_block(1)

    @property
    def addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self, timeout: float = START_TIMEOUT_S) -> NameServer:
        self.launch()
        _wait_listening(self, self.port, timeout)
        return self

    def route(self, topic: str) -> dict | None:
        """The topic's route (TopicRouteData as JSON), or None if the NameServer has none."""
        header, body = remoting_call((LOOPBACK, self.port), GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if header.get("code") == TOPIC_NOT_EXIST:
            return None
        assert header.get("code") == 0, header
        return lenient_json(body)

    def broker_names(self, topic: str) -> set[str]:
        route = self.route(topic)
        return {b["brokerName"] for b in (route or {}).get("brokerDatas", [])}

    def wait_route(self, topic: str, broker_names: set[str], timeout: float = 30.0) -> dict:
        """Until the topic's route names exactly these brokers, each with queue data."""
        deadline = time.monotonic() + timeout
        route = None
        while time.monotonic() < deadline:
            route = self.route(topic)
            if route is not None:
                brokers = {b["brokerName"] for b in route.get("brokerDatas", [])}
                queues = {q["brokerName"] for q in route.get("queueDatas", [])}
                if brokers == queues == broker_names:
                    return route
            time.sleep(0.1)
        raise AssertionError(f"route of {topic} at {self} never named {sorted(broker_names)}: {route}")


def lenient_json(body: bytes) -> dict:
    """fastjson writes integer map keys unquoted (brokerAddrs {0:"..."}); quote them for Python."""
    text = body.decode("utf-8")
    return json.loads(re.sub(r'([{,])(-?\d+):', r'\1"\2":', text))


class PyrmqNameServer(NameServer):
    kind = "pyrmq"

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "pyrmq", "namesrv", "--port", str(self.port), "--bind", LOOPBACK]


class ApacheNameServer(NameServer):
    kind = "apache"

    def __init__(self, workdir: Path, classpath: str, port: int | None = None) -> None:
        super().__init__(workdir, port)
        self.classpath = classpath
        self.log_file = _apache_logging(self, "namesrv")
        self.conf_path = workdir / "namesrv.conf"
        self.conf_path.write_text(f"listenPort={self.port}\n")

    def env(self) -> dict[str, str]:
        return dict(super().env(), ROCKETMQ_HOME=str(self.home))

    def argv(self) -> list[str]:
        return apache_jvm("java", self.classpath, self.home) + [
            "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(self.conf_path)]

    def log_files(self) -> list[Path]:
        return [self.out_path, self.log_file]


# --------------------------------------------------------------------------------------- brokers

@dataclass
class BrokerSpec:
    """What a broker is, independent of which implementation runs it: name, ports, store."""

    name: str
    store_dir: Path
    namesrv_addr: str
    listen_port: int = field(default_factory=broker_listen_port)
    cluster: str = CLUSTER_NAME
    flush_disk_type: str = "ASYNC_FLUSH"
    commit_log_file_size: int = MAPPED_FILE_SIZE_COMMIT_LOG
    consume_queue_file_size: int = MAPPED_FILE_SIZE_CONSUME_QUEUE
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def addr(self) -> str:
        return f"{LOOPBACK}:{self.listen_port}"

    @property
    def endpoint(self) -> tuple[str, int]:
        """(host, port), as remoting_call takes it."""
        return LOOPBACK, self.listen_port

    def conf(self, more: dict[str, str] | None = None) -> str:
        """broker.conf in Apache RocketMQ's keys, read by both kinds."""
        keys = {
            "brokerClusterName": self.cluster,
            "brokerName": self.name,
            "brokerId": "0",
            "listenPort": str(self.listen_port),
            "haListenPort": str(self.listen_port + 1),
            "brokerIP1": LOOPBACK,
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(self.store_dir),
            "storePathCommitLog": str(self.store_dir / "commitlog"),
            "flushDiskType": self.flush_disk_type,
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
            "mappedFileSizeCommitLog": str(self.commit_log_file_size),
            "mappedFileSizeConsumeQueue": str(self.consume_queue_file_size),
        }
        keys.update(more or {})
        keys.update(self.extra)
        return "".join(f"{k}={v}\n" for k, v in keys.items())


class Broker(Node):
    role = "broker"

    def __init__(self, workdir: Path, spec: BrokerSpec) -> None:
        super().__init__(workdir)
        self.spec = spec
        self.conf_path = workdir / "broker.conf"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def addr(self) -> str:
        return self.spec.addr

    def _booted(self) -> bool:
        return True

    def start(self, timeout: float = START_TIMEOUT_S) -> Broker:
        """Launch, then wait until the NameServer routes TBW102 to this broker's address and the
        broker answers a request on its port."""
        self.launch()
        host, port = self.spec.namesrv_addr.split(";")[0].rsplit(":", 1)
        deadline = time.monotonic() + timeout
        last = "not probed yet"
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                header, body = remoting_call((host, int(port)), GET_ROUTEINFO_BY_TOPIC,
                                             {"topic": AUTO_CREATE_TOPIC_KEY})
                if header.get("code") != 0 or f'"{self.addr}"' not in body.decode("utf-8", "replace"):
                    last = f"TBW102 route: code {header.get('code')} body {body[:300]!r}"
                else:
                    remoting_call(self.spec.endpoint, GET_MAX_OFFSET,
                                  {"topic": AUTO_CREATE_TOPIC_KEY, "queueId": "0"})
                    if self._booted():
                        return self
                    last = "no boot success line yet"
            except (OSError, ProbeError, ValueError) as exc:
                last = repr(exc)
            time.sleep(0.1)
        raise RuntimeError(f"{self} not ready after {timeout:.0f}s: {last}\n{self.log_tail()}")


class PyrmqBroker(Broker):
    kind = "pyrmq"

    def argv(self) -> list[str]:
        self.conf_path.write_text(self.spec.conf({"bindAddress": LOOPBACK}))
        return [sys.executable, "-m", "pyrmq", "broker", "-c", str(self.conf_path), "-n", self.spec.namesrv_addr]


class ApacheBroker(Broker):
    kind = "apache"
    # The JVM exits 143 on SIGTERM after running its shutdown hooks.
    graceful_exit_codes = frozenset({0, 143})

    def __init__(self, workdir: Path, spec: BrokerSpec, classpath: str) -> None:
        super().__init__(workdir, spec)
        self.classpath = classpath
        self.log_file = _apache_logging(self, "broker")
        self.boots_before = 0

    def env(self) -> dict[str, str]:
        return dict(super().env(), ROCKETMQ_HOME=str(self.home))

    def argv(self) -> list[str]:
        self.conf_path.write_text(self.spec.conf({
            # Do not refuse writes with "broker busy" on a loaded 2-core machine.
            "waitTimeMillsInSendQueue": "5000",
            "osPageCacheBusyTimeOutMills": "5000",
            "diskMaxUsedSpaceRatio": "95",
        }))
        self.boots_before = self._boot_lines()
        return apache_jvm("java", self.classpath, self.home) + [
            "org.apache.rocketmq.broker.BrokerStartup", "-c", str(self.conf_path), "-n", self.spec.namesrv_addr]

    def _boot_lines(self) -> int:
        try:
            return self.out_path.read_bytes().count(b"boot success")
        except OSError:
            return 0

    def _booted(self) -> bool:
        return self._boot_lines() > self.boots_before

    def log_files(self) -> list[Path]:
        return [self.out_path, self.log_file]

    def log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    def store_load_report(self) -> tuple[set[str], list[str]]:
        """From the broker log: the config files (``topics.json`` ...) loaded OK, and every line
        saying a config file or the store failed to load (Apache then falls back to ``.bak``
        silently, or refuses to start)."""
        text = self.log_text()
        loaded = set(re.findall(r"load \S+/config/([\w.]+\.json) OK", text))
        if "load commit log OK" in text:
            loaded.add("commitlog")
        if "load logics queue all over, OK" in text:
            loaded.add("consumequeue")
        failures = [line for line in text.splitlines()
                    if re.search(r"load .*[Ff]ailed|load exception|try to load backup", line)]
        return loaded, failures


# --------------------------------------------------------------------------------------- cluster

class Cluster:
    """Creates nodes in per-node work directories under ``root`` and closes them all at the end."""

    def __init__(self, root: Path, reference_classpath: str | None) -> None:
        self.root = root
        self.reference_classpath = reference_classpath
        self.nodes: list[Node] = []
        self._seq = 0

    def _workdir(self, label: str) -> Path:
        self._seq += 1
        path = self.root / f"{self._seq:02d}-{label}"
        path.mkdir(parents=True)
        return path

    def _classpath(self) -> str:
        assert self.reference_classpath, "Apache nodes need the reference build"
        return self.reference_classpath

    def namesrv(self, kind: str) -> NameServer:
        workdir = self._workdir(f"{kind}-namesrv")
        node: NameServer = (ApacheNameServer(workdir, self._classpath()) if kind == "apache"
                            else PyrmqNameServer(workdir))
        self.nodes.append(node)
        return node.start()

    def broker(self, kind: str, spec: BrokerSpec, start: bool = True) -> Broker:
        workdir = self._workdir(f"{kind}-{spec.name}")
        node: Broker = (ApacheBroker(workdir, spec, self._classpath()) if kind == "apache"
                        else PyrmqBroker(workdir, spec))
        self.nodes.append(node)
        return node.start() if start else node

    def close(self) -> None:
        for node in reversed(self.nodes):
            node.close()

    def logs(self) -> str:
        return "\n".join(node.log_tail(30) for node in self.nodes)


# --------------------------------------------------------------------------------------- fixtures
# A test module imports these (``cluster_fixture, client4_fixture``) and asks for ``cluster`` and
# ``client4``.

def _both_kinds_selected(config: pytest.Config) -> bool:
    """These scenarios run pyrmq and Apache together; a --compat-servers / PYRMQ_COMPAT_SERVERS
    selection that leaves one of them out leaves them out too."""
    raw = config.getoption("--compat-servers", None) or os.environ.get("PYRMQ_COMPAT_SERVERS")
    return not raw or {"pyrmq", "apache"} <= {s.strip() for s in raw.split(",")}


@pytest.fixture(name="cluster")
def cluster_fixture(request, tmp_path) -> Cluster:
    """Nodes of this test alone; every process it started is SIGKILLed at the test's end."""
    if not _both_kinds_selected(request.config):
        pytest.skip("mixes pyrmq and apache; the compat server selection leaves one out")
    reference_build = request.getfixturevalue("reference_build")  # JDK/Maven policy: fail in CI
    c = Cluster(tmp_path / "nodes", reference_build.classpath)
    yield c
    c.close()
    # Shown by pytest only when the test failed: where each node's files are, and their log tails.
    print(f"cluster nodes under {c.root}:\n{c.logs()}")


@pytest.fixture(name="client4", scope="session")
def client4_fixture(java_toolchain, tmp_path_factory) -> JavaClient:
    """The official Java client 4.9.8 (the scenario runner built with -P client4)."""
    try:
        built = build.build_client("client4")
    except (build.BuildFailed, OSError) as exc:
        pytest.fail(f"Maven build for the compat suite failed: {exc}", pytrace=False)
    # A private copy of the compiled runner: a rebuild (``mvn clean``) by another pytest session
    # on this checkout would otherwise delete the classes under a running scenario.
    classes = tmp_path_factory.mktemp("client4-classes") / "classes"
    shutil.copytree(built.classes, classes)
    private = build.JavaBuild(built.name, classes, built.dependency_classpath)
    return JavaClient(private, tmp_path_factory.mktemp("client4-interop-runs"))


# --------------------------------------------------------------------------------------- checks

def assert_acked_by(sent: list[dict], count: int, brokers: dict[str, str],
                    first_offsets: dict[tuple[str, int], int] | None = None) -> None:
    """Every message acknowledged SEND_OK, each by one of ``brokers`` (name -> address): its
    offsetMsgId names that broker's address, and per (broker, queue) the offsets are consecutive,
    starting at ``first_offsets`` (default 0, a fresh topic)."""
    from collections import defaultdict

    from compat_tests.checks import decode_offset_msg_id

    assert len(sent) == count, f"{len(sent)} sent events for {count} messages"
    bad = [e for e in sent if e["status"] != "SEND_OK"]
    assert not bad, f"not SEND_OK: {bad[:3]}"
    assert len({e["msgId"] for e in sent}) == count, "duplicate msgId"
    per_queue: dict[tuple[str, int], list[int]] = defaultdict(list)
    for e in sent:
        assert e["broker"] in brokers, f"sent to an unknown broker: {e}"
        host, port, _ = decode_offset_msg_id(e["offsetMsgId"])
        assert f"{host}:{port}" == brokers[e["broker"]], f"offsetMsgId of {e} is not {brokers[e['broker']]}"
        per_queue[(e["broker"], e["queueId"])].append(e["queueOffset"])
    for key, offsets in per_queue.items():
        start = (first_offsets or {}).get(key, 0)
        assert sorted(offsets) == list(range(start, start + len(offsets))), f"{key}: offsets {sorted(offsets)}"


def next_offsets(*sent_lists: list[dict]) -> dict[tuple[str, int], int]:
    """Per (broker, queue): the next queue offset after the sends given."""
    out: dict[tuple[str, int], int] = {}
    for sent in sent_lists:
        for e in sent:
            key = (e["broker"], e["queueId"])
            out[key] = max(out.get(key, 0), e["queueOffset"] + 1)
    return out


def wait_consumer_offsets(broker: Broker, group: str, topic: str, expected: dict[int, int],
                          timeout: float = 30.0) -> float:
    """Until the broker's committed offsets of the group are ``expected`` (queue id -> offset)."""
    return wait_consumer_offsets_at(broker.spec.endpoint, group, topic, expected, timeout,
                                    check=broker.check_alive, describe=broker.log_tail)


def queue_ends(*sent_lists: list[dict]) -> dict[int, int]:
    """Per queue id: the next queue offset after the sends given, all to one broker."""
    ends = next_offsets(*sent_lists)
    assert len({b for b, _ in ends}) <= 1, f"sent to several brokers: {sorted(ends)}"
    return {q: end for (_, q), end in ends.items()}

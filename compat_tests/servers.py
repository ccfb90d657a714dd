"""The servers a compat scenario runs against: pyrmq (ours) and Apache RocketMQ (the references:
4.9.7, and 5.3.3 for what 5.x clients do).

Both are driven through one interface, :class:`Server`: ``start``, ``stop`` (SIGTERM, wait),
``kill`` (SIGKILL), ``restart`` (same store directory, same ports) and ``namesrv_addr``. Each
server lives in its own work directory and on its own free loopback ports, so several can run
side by side and a restarted one comes back exactly where it was.

The readiness probe speaks the remoting protocol itself (a JSON-header GET_ROUTEINFO_BY_TOPIC for
TBW102 to the NameServer) instead of importing pyrmq's codec: the harness must not share code
with the server it judges.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compat_tests import docker_engine

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
# The name TLS probes check the server certificate against (tests/tls_pki.py issues it for
# 127.0.0.1 and localhost; a server in a container answers on its pod's address).
TLS_SERVER_NAME = "localhost"
CLUSTER_NAME = "DefaultCluster"
BROKER_NAME = "broker-a"
AUTO_CREATE_TOPIC_KEY = "TBW102"

# Ports are drawn below the kernel's ephemeral range (32768+ on Linux), so that no client
# connection can take one of them while a server is down between stop and restart.
PORT_RANGE = (20000, 32000)

START_TIMEOUT_S = 90.0   # Apache on a busy 2-core CI machine: JVM start + store load + register
STOP_TIMEOUT_S = 30.0    # graceful stop; Apache's shutdown hook flushes and unregisters
PROBE_TIMEOUT_S = 2.0

GET_ROUTEINFO_BY_TOPIC = 105
GET_MAX_OFFSET = 30
# The version our probe claims: V4_9_8 in MQVersion.Version's ordering.
PROBE_CLIENT_VERSION = 409


# --------------------------------------------------------------------------------------- ports

@dataclass(frozen=True)
class Ports:
    """A broker binds listen, listen - 2 (the "fast"/VIP port) and listen + 1 (HA)."""

    namesrv: int
    listen: int

    @property
    def fast(self) -> int:
        return self.listen - 2

    @property
    def ha(self) -> int:
        return self.listen + 1

    def all(self) -> tuple[int, ...]:
        return (self.namesrv, self.fast, self.listen - 1, self.listen, self.ha)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    # Apache binds the wildcard address; a port taken there is not free either.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


# Ports handed out in this session: a block is free until its server binds it, so two allocations
# in a row must not return overlapping blocks.
_HANDED_OUT: set[int] = set()


def allocate_ports() -> Ports:
    """A NameServer port and a block of four free broker ports (fast, unused, listen, ha)."""
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(PORT_RANGE[0], PORT_RANGE[1] - 8)
        ports = Ports(namesrv=base, listen=base + 4)
        block = set(range(base, base + 8))
        if not block & _HANDED_OUT and all(_port_is_free(p) for p in ports.all()):
            _HANDED_OUT.update(block)
            return ports
    raise RuntimeError(f"no free block of loopback ports in {PORT_RANGE}")


# --------------------------------------------------------------------------------------- probe

class ProbeError(Exception):
    pass


def remoting_call(addr: tuple[str, int], code: int, ext_fields: dict[str, str] | None = None,
                  timeout: float = PROBE_TIMEOUT_S, ssl_context: ssl.SSLContext | None = None,
                  body: bytes = b"") -> tuple[dict, bytes]:
    """One request with a JSON header and ``body`` (over TLS with ``ssl_context``); returns
    (response header, body)."""
    header = json.dumps({"code": code, "extFields": ext_fields or {}, "flag": 0, "language": "JAVA",
                         "opaque": 1, "serializeTypeCurrentRPC": "JSON",
                         "version": PROBE_CLIENT_VERSION}).encode()
    frame = struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body
    with socket.create_connection(addr, timeout=timeout) as raw:
        s = ssl_context.wrap_socket(raw, server_hostname=TLS_SERVER_NAME) if ssl_context is not None else raw
        s.settimeout(timeout)
        s.sendall(frame)

        def read(n: int) -> bytes:
            buf = bytearray()
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise ProbeError(f"{addr}: connection closed after {len(buf)} of {n} bytes")
                buf += chunk
            return bytes(buf)

        (total,) = struct.unpack(">I", read(4))
        if not 4 <= total <= 16 * 1024 * 1024:
            raise ProbeError(f"{addr}: implausible frame length {total}")
        data = read(total)
    (mark,) = struct.unpack(">I", data[:4])
    header_len = mark & 0xFFFFFF
    if mark >> 24 != 0:
        raise ProbeError(f"{addr}: response header is not JSON (serialize type {mark >> 24})")
    return json.loads(data[4:4 + header_len]), data[4 + header_len:]


# --------------------------------------------------------------------------------------- config

@dataclass(frozen=True)
class ServerConfig:
    workdir: Path
    ports: Ports
    flush_disk_type: str = "ASYNC_FLUSH"
    # 64 MiB commit log files keep a temp store small (Apache's default is 1 GiB).
    mapped_file_size_commit_log: int = 64 * 1024 * 1024
    # More broker.conf keys (Apache names), e.g. {"accessMessageInMemoryMaxRatio": "0"}.
    broker_extra: dict[str, str] = field(default_factory=dict)
    broker_name: str = BROKER_NAME
    # TLS settings under Apache's system property names ({"tls.server.mode": "enforcing",
    # "tls.config.file": ...}): -D flags of both Apache JVMs; pyrmq reads them from broker.conf
    # (and namesrv.conf).  The readiness probe speaks TLS with probe_ssl when given.
    tls: dict[str, str] = field(default_factory=dict)
    probe_ssl: ssl.SSLContext | None = None
    # ACL 1.0: the text of plain_acl.yml; when set the broker runs with aclEnable=true and reads
    # it where each server kind looks (pyrmq: beside broker.conf; Apache: $ROCKETMQ_HOME/conf).
    plain_acl: str | None = None
    # The address the servers listen on and register: loopback, or the pod's address in the
    # container mode (docker_engine.Pod, which then runs every process of the server).
    pod: Any = field(default=None, compare=False, repr=False)

    @property
    def host(self) -> str:
        return self.pod.ip if self.pod is not None else LOOPBACK

    @property
    def store_dir(self) -> Path:
        return self.workdir / "store"

    @property
    def home(self) -> Path:
        """Stands in for ~ (Apache writes ~/logs, ~/store, ~/namesrv)."""
        return self.workdir / "home"

    def broker_conf(self, extra: dict[str, str] | None = None) -> str:
        """broker.conf with Apache RocketMQ's keys: the one contract both servers read."""
        keys = {
            "brokerClusterName": CLUSTER_NAME,
            "brokerName": self.broker_name,
            "brokerId": "0",
            "listenPort": str(self.ports.listen),
            "haListenPort": str(self.ports.ha),
            "brokerIP1": self.host,
            "namesrvAddr": f"{self.host}:{self.ports.namesrv}",
            "storePathRootDir": str(self.store_dir),
            "flushDiskType": self.flush_disk_type,
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
            "mappedFileSizeCommitLog": str(self.mapped_file_size_commit_log),
        }
        if self.plain_acl is not None:
            keys["aclEnable"] = "true"
        keys.update(self.broker_extra)
        keys.update(extra or {})
        return "".join(f"{k}={v}\n" for k, v in keys.items())


# --------------------------------------------------------------------------------------- servers

class Server(ABC):
    """A NameServer plus one master broker, run as child processes of the test session."""

    kind: str
    # Exit codes that count as a graceful stop after SIGTERM.
    graceful_exit_codes: frozenset[int] = frozenset({0})

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.config.workdir.mkdir(parents=True, exist_ok=True)
        self.config.home.mkdir(parents=True, exist_ok=True)
        self.starts = 0
        if config.plain_acl is not None:
            self.write_plain_acl(config.plain_acl)

    @property
    def plain_acl_path(self) -> Path:
        """Where this kind's broker reads plain_acl.yml: pyrmq beside its -c file (the work
        directory), Apache in $ROCKETMQ_HOME/conf (overridden in ApacheServer)."""
        return self.config.workdir / "plain_acl.yml"

    def write_plain_acl(self, text: str) -> None:
        """(Re)write the broker's plain_acl.yml; a running broker picks the change up."""
        self.plain_acl_path.parent.mkdir(parents=True, exist_ok=True)
        self.plain_acl_path.write_text(text)

    # -- addresses
    @property
    def namesrv_addr(self) -> str:
        return f"{self.config.host}:{self.config.ports.namesrv}"

    @property
    def broker_addr(self) -> str:
        return f"{self.config.host}:{self.config.ports.listen}"

    # -- lifecycle
    @abstractmethod
    def _processes(self) -> list[subprocess.Popen]:
        """Running child processes, broker last."""

    @abstractmethod
    def _launch(self) -> None:
        """Start whatever is not running."""

    @abstractmethod
    def _broker_process(self) -> subprocess.Popen | None:
        ...

    @abstractmethod
    def log_tail(self, lines: int = 40) -> str:
        ...

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        self.starts += 1
        self._launch()
        self.wait_ready(timeout)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> list[int]:
        """SIGTERM every process (broker first), wait; SIGKILL what outlives the timeout."""
        codes = []
        for proc in reversed(self._processes()):
            codes.append(_terminate(proc, timeout))
        return codes

    def stop_broker(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM the broker process only (for pyrmq standalone: the whole server); its exit code."""
        proc = self._broker_process()
        assert proc is not None, "never started"
        return _terminate(proc, timeout)

    def kill(self) -> None:
        """SIGKILL the broker process (for pyrmq standalone that is the NameServer as well)."""
        proc = self._broker_process()
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def restart(self, timeout: float = START_TIMEOUT_S) -> int:
        """SIGTERM the broker, start it again on the same store and ports; the stop's exit code.
        A separate NameServer (Apache) keeps running, as it would in production."""
        code = self.stop_broker()
        self.start(timeout)
        return code

    def close(self) -> None:
        """Finalizer: SIGKILL whatever still runs. Graceful stops are asserted where they matter
        (the restart scenario); at teardown they would only cost time (Apache takes ~8 s)."""
        for proc in self._processes():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    # -- readiness
    def _extra_ready(self) -> bool:
        return True

    def wait_ready(self, timeout: float) -> None:
        """Until the NameServer routes TBW102 to our broker and the broker answers a request."""
        deadline = time.monotonic() + timeout
        last_error = "not probed yet"
        while time.monotonic() < deadline:
            for proc in self._processes():
                if proc.poll() is not None:
                    raise RuntimeError(f"{self.kind} exited with {proc.returncode} while starting\n"
                                       f"{self.log_tail()}")
            try:
                header, body = remoting_call((self.config.host, self.config.ports.namesrv), GET_ROUTEINFO_BY_TOPIC,
                                             {"topic": AUTO_CREATE_TOPIC_KEY}, ssl_context=self.config.probe_ssl)
                if header.get("code") != 0 or f'"{self.broker_addr}"' not in body.decode("utf-8", "replace"):
                    last_error = f"route of TBW102: code {header.get('code')} body {body[:200]!r}"
                else:
                    remoting_call((self.config.host, self.config.ports.listen), GET_MAX_OFFSET,
                                  {"topic": AUTO_CREATE_TOPIC_KEY, "queueId": "0"}, ssl_context=self.config.probe_ssl)
                    if self._extra_ready():
                        return
                    last_error = "broker has not reported boot success"
            except (OSError, ProbeError, ValueError) as exc:
                last_error = repr(exc)
            time.sleep(0.1)
        raise RuntimeError(f"{self.kind} not ready after {timeout:.0f}s: {last_error}\n{self.log_tail()}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} namesrv={self.namesrv_addr} broker={self.broker_addr}>"


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the test session dies (Linux PR_SET_PDEATHSIG), so
    a killed pytest (a CI time limit, kill -9) leaves no broker or JVM behind."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def wait_listening(host: str, port: int, proc: subprocess.Popen, timeout: float = START_TIMEOUT_S) -> None:
    """Until something accepts on the port; a broker is started only after its NameServer
    listens, as in any deployment (a broker's first registration would otherwise be lost and
    only retried at its next 30 s registration period)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return  # wait_ready reports the exit with the log
        try:
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
            return
        except OSError:
            time.sleep(0.05)


def _terminate(proc: subprocess.Popen, timeout: float) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("pid %s ignored SIGTERM for %.0fs; killing", proc.pid, timeout)
            proc.kill()
            proc.wait()
    return proc.returncode


def spawn_logged(argv: list[str], out_path: Path, *, cwd: Path, env: dict[str, str],
                 banner: str, pod: Any = None) -> subprocess.Popen:
    """Start a server child with stdout+stderr appended to ``out_path`` after a ``=== banner``
    line; the child is killed when the test session dies. With a ``pod`` it is a container in
    that pod (the same command line; ``env``'s changes to this process's environment)."""
    with open(out_path, "ab") as out:
        out.write(f"=== {banner}\n".encode())
        out.flush()
        if pod is None:
            return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    image, entrypoint, command = docker_engine.server_image_and_command(argv)
    changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
    return docker_engine.ContainerProcess(command, out_path, None, cwd, image=image, entrypoint=entrypoint,
                                          network_mode=pod.network_mode, env=changed)  # type: ignore[return-value]


def tail_of(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"({path}: no output)"
    return f"--- {path}\n" + "\n".join(text)


class PyrmqServer(Server):
    """``python -m pyrmq standalone -c broker.conf --namesrv-port P``: NameServer and broker in one."""

    kind = "pyrmq"

    def __init__(self, config: ServerConfig, python: str = sys.executable) -> None:
        super().__init__(config)
        self.python = python
        self.proc: subprocess.Popen | None = None
        self.conf_path = config.workdir / "broker.conf"
        self.conf_path.write_text(config.broker_conf(config.tls))
        self.out_path = config.workdir / "pyrmq.out"

    def command(self) -> list[str]:
        return [self.python, "-m", "pyrmq", "standalone", "-c", str(self.conf_path),
                "--namesrv-port", str(self.config.ports.namesrv)]

    def _processes(self) -> list[subprocess.Popen]:
        return [self.proc] if self.proc is not None else []

    def _broker_process(self) -> subprocess.Popen | None:
        return self.proc

    def _launch(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        self.proc = spawn_logged(self.command(), self.out_path, cwd=self.config.workdir,
                                 env=dict(os.environ, HOME=str(self.config.home)),
                                 banner=f"start {self.starts}: {' '.join(self.command())}", pod=self.config.pod)

    def log_tail(self, lines: int = 40) -> str:
        return tail_of(self.out_path, lines)


class TwoProcessServer(Server):
    """A NameServer process and a broker process (``namesrv`` / ``broker``), each with its log."""

    namesrv: subprocess.Popen | None
    broker: subprocess.Popen | None

    @abstractmethod
    def _env(self) -> dict[str, str]:
        ...

    def _spawn(self, argv: list[str], out_path: Path) -> subprocess.Popen:
        return spawn_logged(argv, out_path, cwd=self.config.workdir, env=self._env(),
                            banner=f"start {self.starts}: {' '.join(argv[-4:])}", pod=self.config.pod)

    def _processes(self) -> list[subprocess.Popen]:
        return [p for p in (self.namesrv, self.broker) if p is not None]

    def _broker_process(self) -> subprocess.Popen | None:
        return self.broker


class PyrmqSplitServer(TwoProcessServer):
    """``python -m pyrmq namesrv --port P`` and ``python -m pyrmq broker -c broker.conf -n
    127.0.0.1:P`` as two processes, the way Apache runs: registration goes over the network."""

    kind = "pyrmq-split"

    def __init__(self, config: ServerConfig, python: str = sys.executable) -> None:
        super().__init__(config)
        self.python = python
        self.namesrv: subprocess.Popen | None = None
        self.broker: subprocess.Popen | None = None
        self.conf_path = config.workdir / "broker.conf"
        self.conf_path.write_text(config.broker_conf(config.tls))
        self.namesrv_conf = config.workdir / "namesrv.conf"
        self.namesrv_conf.write_text("".join(f"{k}={v}\n" for k, v in config.tls.items()))
        self.namesrv_out = config.workdir / "namesrv.out"
        self.broker_out = config.workdir / "broker.out"

    def _env(self) -> dict[str, str]:
        return dict(os.environ, HOME=str(self.config.home))

    def _launch(self) -> None:
        if self.namesrv is None or self.namesrv.poll() is not None:
            self.namesrv = self._spawn([self.python, "-m", "pyrmq", "namesrv", "-c", str(self.namesrv_conf),
                                        "--port", str(self.config.ports.namesrv)], self.namesrv_out)
            wait_listening(self.config.host, self.config.ports.namesrv, self.namesrv)
        if self.broker is None or self.broker.poll() is not None:
            self.broker = self._spawn([self.python, "-m", "pyrmq", "broker", "-c", str(self.conf_path),
                                       "-n", self.namesrv_addr], self.broker_out)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(tail_of(p, lines) for p in (self.namesrv_out, self.broker_out))


# JVM flags for Apache RocketMQ 4.9.x on JDK 9+: its MappedFile unmaps through internal NIO API.
JAVA_OPENS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
]


def apache_jvm(java: str, classpath: str, home: Path, *properties: str) -> list[str]:
    """The JVM command line of an Apache NameServer or broker living under ``home``, up to its
    main class; ``properties``: more -D flags (a later -D of a name wins).

    ``java.io.tmpdir`` is ``home/tmp``: with TLS permissive (Apache's default) every server
    start writes a self-signed key and certificate there (Netty's ``keyutil_*`` files) and never
    deletes them; under the default ``/tmp`` each test run left some 80 behind."""
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return [java, "-Xms256m", "-Xmx256m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC",
            f"-Duser.home={home}", f"-Drocketmq.home.dir={home}", f"-Djava.io.tmpdir={tmp}",
            # The store refuses writes when the disk is fuller than this (default 90 %).
            "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.98",
            "-Drocketmq.broker.diskSpaceCleanForciblyRatio=0.98",
            *properties, *JAVA_OPENS, "-cp", classpath]


LOGBACK_TEMPLATE = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log_file}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{24}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""



def apache_broker_extras(store_dir: Path) -> dict[str, str]:
    """broker.conf keys every Apache broker of the harness gets besides the shared ones."""
    return {
        # Apache's default is ~/store/commitlog whatever storePathRootDir says.
        "storePathCommitLog": str(store_dir / "commitlog"),
        # Do not refuse writes with "broker busy" on a loaded 2-core machine: the defaults
        # (200 ms in the send queue, 1 s per page-cache write) are tuned for servers.
        "waitTimeMillsInSendQueue": "5000",
        "osPageCacheBusyTimeOutMills": "5000",
        "diskMaxUsedSpaceRatio": "95",
    }

class ApacheServer(TwoProcessServer):
    """Apache RocketMQ's NamesrvStartup and BrokerStartup from the Maven Central jars."""

    kind = "apache"
    # The JVM exits 143 on SIGTERM after running its shutdown hooks.
    graceful_exit_codes = frozenset({0, 143})
    BOOT_SUCCESS = b"boot success"

    def __init__(self, config: ServerConfig, classpath: str, java: str = "java") -> None:
        super().__init__(config)
        self.classpath = classpath
        self.java = java
        self.namesrv: subprocess.Popen | None = None
        self.broker: subprocess.Popen | None = None
        self.broker_boots_seen = 0
        conf_dir = config.home / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        # BrokerStartup/NamesrvStartup read $ROCKETMQ_HOME/conf/logback_{broker,namesrv}.xml.
        for role in ("broker", "namesrv"):
            (conf_dir / f"logback_{role}.xml").write_text(
                LOGBACK_TEMPLATE.format(log_file=config.workdir / "logs" / f"{role}.log"))
        self.namesrv_conf = config.workdir / "namesrv.conf"
        self.namesrv_conf.write_text(f"listenPort={config.ports.namesrv}\n")
        self.broker_conf = config.workdir / "broker.conf"
        self.broker_conf.write_text(config.broker_conf(apache_broker_extras(config.store_dir)))
        self.namesrv_out = config.workdir / "namesrv.out"
        self.broker_out = config.workdir / "broker.out"

    def _jvm(self) -> list[str]:
        return apache_jvm(self.java, self.classpath, self.config.home,
                          *(f"-D{k}={v}" for k, v in self.config.tls.items()))

    def _env(self) -> dict[str, str]:
        return dict(os.environ, ROCKETMQ_HOME=str(self.config.home))

    @property
    def plain_acl_path(self) -> Path:
        return self.config.home / "conf" / "plain_acl.yml"

    def _launch(self) -> None:
        if self.namesrv is None or self.namesrv.poll() is not None:
            self.namesrv = self._spawn(
                self._jvm() + ["org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(self.namesrv_conf)],
                self.namesrv_out)
            wait_listening(self.config.host, self.config.ports.namesrv, self.namesrv)
        if self.broker is None or self.broker.poll() is not None:
            self.broker_boots_seen = self._boot_lines()
            self.broker = self._spawn(
                self._jvm() + ["org.apache.rocketmq.broker.BrokerStartup", "-c", str(self.broker_conf),
                               "-n", self.namesrv_addr],
                self.broker_out)

    def _boot_lines(self) -> int:
        try:
            return self.broker_out.read_bytes().count(self.BOOT_SUCCESS)
        except OSError:
            return 0

    def _extra_ready(self) -> bool:
        # After a restart the NameServer may still route to the old broker for a moment; the
        # new one prints "boot success" only once it has registered itself.
        return self._boot_lines() > self.broker_boots_seen

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(tail_of(p, lines) for p in (
            self.namesrv_out, self.broker_out, self.config.workdir / "logs" / "broker.log"))


class Apache5Server(ApacheServer):
    """Apache RocketMQ 5.3.x (the 5.x reference): the same NamesrvStartup / BrokerStartup
    command lines as 4.9.7 from the 5.3.3 jars. 5.x configures its own (shaded) logback and
    writes under ``$HOME/logs/rocketmqlogs``; it ignores the 4.9.x logback files."""

    kind = "apache5"

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(tail_of(p, lines) for p in (
            self.namesrv_out, self.broker_out, self.config.home / "logs" / "rocketmqlogs" / "broker.log"))


# --------------------------------------------------------------------------------------- two brokers

class TwoBrokerCluster:
    """One NameServer and two master brokers, ``broker-a`` and ``broker-b``, of one cluster, every
    one its own process (pyrmq: ``pyrmq namesrv`` + ``pyrmq broker`` x2; Apache: NamesrvStartup +
    BrokerStartup x2), so that a broker can be stopped (SIGTERM) and started again on its store
    while the NameServer and the other broker keep running."""

    BROKER_NAMES = ("broker-a", "broker-b")

    def __init__(self, kind: str, workdir: Path, classpath: str | None = None, python: str = sys.executable,
                 broker_extra: dict[str, str] | None = None, pod: Any = None) -> None:
        if kind not in ("pyrmq", "apache"):
            raise ValueError(f"two-broker cluster of kind {kind!r}")
        self.kind = kind
        self.workdir = workdir
        self.classpath = classpath
        self.python = python
        self.pod = pod   # container mode: every process in this one docker_engine.Pod
        self.host = pod.ip if pod is not None else LOOPBACK
        first = allocate_ports()
        while True:
            second = allocate_ports()
            if not set(first.all()) & set(second.all()):
                break
        self.namesrv_port = first.namesrv
        self.configs: dict[str, ServerConfig] = {}
        for name, ports in zip(self.BROKER_NAMES, (first, second)):
            cfg = ServerConfig(workdir / name, Ports(namesrv=first.namesrv, listen=ports.listen),
                               broker_extra=dict(broker_extra or {}), broker_name=name, pod=pod)
            cfg.workdir.mkdir(parents=True, exist_ok=True)
            cfg.home.mkdir(parents=True, exist_ok=True)
            self.configs[name] = cfg
        self.namesrv_home = workdir / "namesrv" / "home"
        self.namesrv_home.mkdir(parents=True, exist_ok=True)
        self.namesrv: subprocess.Popen | None = None
        self.brokers: dict[str, subprocess.Popen | None] = dict.fromkeys(self.BROKER_NAMES)
        self.boots_seen: dict[str, int] = dict.fromkeys(self.BROKER_NAMES, 0)
        for cfg in self.configs.values():
            extra = {}
            if kind == "apache":
                extra = apache_broker_extras(cfg.store_dir)
                conf_dir = cfg.home / "conf"
                conf_dir.mkdir(parents=True, exist_ok=True)
                (conf_dir / "logback_broker.xml").write_text(
                    LOGBACK_TEMPLATE.format(log_file=cfg.workdir / "logs" / "broker.log"))
            (cfg.workdir / "broker.conf").write_text(cfg.broker_conf(extra))
        if kind == "apache":
            conf_dir = self.namesrv_home / "conf"
            conf_dir.mkdir(parents=True, exist_ok=True)
            (conf_dir / "logback_namesrv.xml").write_text(
                LOGBACK_TEMPLATE.format(log_file=workdir / "namesrv" / "logs" / "namesrv.log"))
            (workdir / "namesrv" / "namesrv.conf").write_text(f"listenPort={self.namesrv_port}\n")

    # -- addresses
    @property
    def namesrv_addr(self) -> str:
        return f"{self.host}:{self.namesrv_port}"

    def broker_addr(self, name: str) -> str:
        return f"{self.host}:{self.configs[name].ports.listen}"

    # -- processes
    def _jvm(self, home: Path) -> list[str]:
        assert self.classpath, "Apache needs the reference classpath"
        return apache_jvm("java", self.classpath, home)

    def _spawn(self, argv: list[str], cwd: Path, home: Path, out_path: Path) -> subprocess.Popen:
        return spawn_logged(argv, out_path, cwd=cwd, env=dict(os.environ, HOME=str(home), ROCKETMQ_HOME=str(home)),
                            banner=f"start: {' '.join(argv[-4:])}", pod=self.pod)

    def _broker_out(self, name: str) -> Path:
        return self.configs[name].workdir / "broker.out"

    def _boot_lines(self, name: str) -> int:
        try:
            return self._broker_out(name).read_bytes().count(ApacheServer.BOOT_SUCCESS)
        except OSError:
            return 0

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        if self.namesrv is None or self.namesrv.poll() is not None:
            home = self.namesrv_home
            if self.kind == "apache":
                argv = self._jvm(home) + ["org.apache.rocketmq.namesrv.NamesrvStartup", "-c",
                                          str(self.workdir / "namesrv" / "namesrv.conf")]
            else:
                argv = [self.python, "-m", "pyrmq", "namesrv", "--port", str(self.namesrv_port)]
            self.namesrv = self._spawn(argv, self.workdir / "namesrv", home, self.workdir / "namesrv" / "namesrv.out")
            wait_listening(self.host, self.namesrv_port, self.namesrv)
        for name in self.BROKER_NAMES:
            self._launch_broker(name)
        for name in self.BROKER_NAMES:
            self._wait_broker(name, timeout)

    def _launch_broker(self, name: str) -> None:
        proc = self.brokers[name]
        if proc is not None and proc.poll() is None:
            return
        cfg = self.configs[name]
        conf = str(cfg.workdir / "broker.conf")
        if self.kind == "apache":
            argv = self._jvm(cfg.home) + ["org.apache.rocketmq.broker.BrokerStartup", "-c", conf,
                                          "-n", self.namesrv_addr]
        else:
            argv = [self.python, "-m", "pyrmq", "broker", "-c", conf, "-n", self.namesrv_addr]
        self.boots_seen[name] = self._boot_lines(name)
        self.brokers[name] = self._spawn(argv, cfg.workdir, cfg.home, self._broker_out(name))

    def _wait_broker(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error = "not probed yet"
        addr = self.broker_addr(name)
        while time.monotonic() < deadline:
            for proc in (self.namesrv, self.brokers[name]):
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"{self.kind} {name} exited with {proc.returncode}\n{self.log_tail()}")
            try:
                header, body = remoting_call((self.host, self.namesrv_port), GET_ROUTEINFO_BY_TOPIC,
                                             {"topic": AUTO_CREATE_TOPIC_KEY})
                if header.get("code") != 0 or f'"{addr}"' not in body.decode("utf-8", "replace"):
                    last_error = f"route of TBW102 lacks {addr}: code {header.get('code')}"
                else:
                    remoting_call((self.host, self.configs[name].ports.listen), GET_MAX_OFFSET,
                                  {"topic": AUTO_CREATE_TOPIC_KEY, "queueId": "0"})
                    if self.kind != "apache" or self._boot_lines(name) > self.boots_seen[name]:
                        return
                    last_error = "broker has not reported boot success"
            except (OSError, ProbeError, ValueError) as exc:
                last_error = repr(exc)
            time.sleep(0.1)
        raise RuntimeError(f"{self.kind} {name} not ready after {timeout:.0f}s: {last_error}\n{self.log_tail()}")

    def stop_broker(self, name: str, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM one broker and wait for it; its exit code."""
        proc = self.brokers[name]
        assert proc is not None, f"{name} never started"
        return _terminate(proc, timeout)

    def start_broker(self, name: str, timeout: float = START_TIMEOUT_S) -> None:
        """Start a stopped broker again on its store and ports."""
        self._launch_broker(name)
        self._wait_broker(name, timeout)

    @property
    def graceful_exit_codes(self) -> frozenset[int]:
        return ApacheServer.graceful_exit_codes if self.kind == "apache" else frozenset({0})

    def close(self) -> None:
        for proc in [*self.brokers.values(), self.namesrv]:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()

    def log_tail(self, lines: int = 30) -> str:
        paths = [self.workdir / "namesrv" / "namesrv.out"]
        for name, cfg in self.configs.items():
            paths += [self._broker_out(name), cfg.workdir / "logs" / "broker.log"]
        return "\n".join(tail_of(p, lines) for p in paths if p.exists())

    def __repr__(self) -> str:
        return f"<TwoBrokerCluster {self.kind} namesrv={self.namesrv_addr} " + \
            " ".join(f"{n}={self.broker_addr(n)}" for n in self.BROKER_NAMES) + ">"

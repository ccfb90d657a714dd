"""TLS with the official Java client, on pyrmq and on the Apache reference alike (client4: 5.x
builds its TLS from the same TlsSystemConfig keys and the same ClientConfig.useTLS).

- The shared server runs each kind's defaults: ``tls.server.mode=permissive`` with
  ``tls.test.mode.enable=true`` (a self-signed certificate made at start). A client with
  ``setUseTLS(true)`` and nothing else (test mode: it trusts any server) sends and consumes over
  TLS; a plain client is served on the same ports.
- A server set up as Apache's TLS guide does: ``tls.server.mode=enforcing`` (-D flags for Apache,
  broker.conf for pyrmq) and a ``tls.config.file`` with a CA-signed server certificate, client
  certificates required and checked, and the broker's own client certificate for registering.
  A Java client with ``-Dtls.enable=true`` that checks the server against the CA and shows its
  client certificate sends and consumes; a plain connection is closed with a log line; a TLS one
  without a client certificate is refused.

That the Java client really spoke TLS is read from its own log ("Prepend SSL handler", written
by NettyRemotingClient when it puts TLS in front of a connection).
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import time
from pathlib import Path

import pytest

from compat_tests.checks import assert_received_exactly, assert_sent_ok
from compat_tests.servers import TLS_SERVER_NAME
from tests.tls_pki import Pki, make_pki

pytestmark = [pytest.mark.compat,
              pytest.mark.compat_exclude("pyrmq", "client5"),
              pytest.mark.compat_exclude("apache", "client5"),
              pytest.mark.compat_exclude("pyrmq-split", "client5")]

COUNT = 20
CLIENT_TLS_LINE = "Prepend SSL handler"
# What each kind logs when a plain client meets an enforcing port.
REFUSAL_LINES = {"pyrmq": "refused, tls.server.mode is enforcing",
                 "pyrmq-split": "refused, tls.server.mode is enforcing",
                 "apache": "Clients intend to establish an insecure connection while this server is running in SSL "
                           "enforcing mode"}
GET_ROUTEINFO_BY_TOPIC = 105


@pytest.fixture(scope="module")
def pki(java_client) -> Pki:
    # Under the client's work directory: a containerised Java runner sees that directory only.
    return make_pki(java_client.workdir / "tls-pki")


@pytest.fixture(scope="module")
def enforcing_server(module_tls_server_factory, pki):
    tls_file = pki.ca.parent / "tls.properties"
    tls_file.write_text("\n".join([
        "tls.test.mode.enable=false",
        "tls.server.need.client.auth=require",
        f"tls.server.certPath={pki.server_cert}",
        f"tls.server.keyPath={pki.server_key}",
        "tls.server.authClient=true",
        f"tls.server.trustCertPath={pki.ca}",
        # The broker registers with the NameServer over TLS (enforcing: tls.enable defaults to true).
        f"tls.client.certPath={pki.client_cert}",
        f"tls.client.keyPath={pki.client_key}",
        "tls.client.authServer=true",
        f"tls.client.trustCertPath={pki.ca}",
    ]) + "\n")
    return module_tls_server_factory({"tls.server.mode": "enforcing", "tls.config.file": str(tls_file)},
                                     probe_ssl=_python_tls(pki, with_client_cert=True))


def _python_tls(pki: Pki, with_client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if with_client_cert:
        ctx.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return ctx


def _tls_connections_in_log(log_root: Path) -> int:
    return sum(path.read_text(errors="replace").count(CLIENT_TLS_LINE) for path in log_root.glob("*.log"))


def _route_request() -> bytes:
    header = json.dumps({"code": GET_ROUTEINFO_BY_TOPIC, "extFields": {"topic": "TBW102"}, "flag": 0,
                         "language": "JAVA", "opaque": 1, "serializeTypeCurrentRPC": "JSON",
                         "version": 409}).encode()
    return struct.pack(">II", 4 + len(header), len(header)) + header


def _answered(host: str, port: int, ctx: ssl.SSLContext | None) -> bool:
    """Whether a GET_ROUTEINFO_BY_TOPIC gets any answer (False: closed, reset or refused)."""
    try:
        with socket.create_connection((host, port), timeout=5) as raw:
            sock = ctx.wrap_socket(raw, server_hostname=TLS_SERVER_NAME) if ctx is not None else raw
            sock.sendall(_route_request())
            return len(sock.recv(4)) == 4
    except OSError:    # a reset, or the TLS alert of a refused client certificate
        return False


def _produce_and_consume(java_client, server, topic: str, group: str, log_root: Path,
                         system_properties: dict[str, str], **options: object) -> None:
    consumed = java_client.run("consume", namesrv=server.namesrv_addr, topic=topic, group=group,
                               create_topic=4, wait_balanced=1, produce=COUNT, count=COUNT, idle_ms=1000,
                               system_properties={"rocketmq.client.logRoot": str(log_root), **system_properties},
                               **options)
    assert_sent_ok(consumed.sent, COUNT, server)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(consumed.sent, consumed.received)


def test_default_server_serves_tls_and_plain_clients(server, java_client, names, tmp_path):
    tls_logs, plain_logs = tmp_path / "tls-client-logs", tmp_path / "plain-client-logs"
    _produce_and_consume(java_client, server, names.topic, names.group, tls_logs, {}, use_tls=1)
    # a NameServer connection and one per broker port in use, each with TLS in front
    assert _tls_connections_in_log(tls_logs) >= 2
    _produce_and_consume(java_client, server, f"{names.topic}_plain", names.another_group("plain"), plain_logs, {})
    assert _tls_connections_in_log(plain_logs) == 0


@pytest.mark.slow
def test_enforcing_server_with_client_certificates(enforcing_server, server_kind, java_client, names, pki, tmp_path):
    client_tls = {"tls.enable": "true", "tls.test.mode.enable": "false", "tls.client.authServer": "true",
                  "tls.client.trustCertPath": str(pki.ca), "tls.client.certPath": str(pki.client_cert),
                  "tls.client.keyPath": str(pki.client_key)}
    _produce_and_consume(java_client, enforcing_server, names.topic, names.group, tmp_path / "client-logs", client_tls)
    assert _tls_connections_in_log(tmp_path / "client-logs") >= 2

    host, ports = enforcing_server.config.host, enforcing_server.config.ports
    for port in (ports.namesrv, ports.listen):
        assert _answered(host, port, _python_tls(pki, with_client_cert=True))
        assert not _answered(host, port, None), f"plain request answered on {port}"
        assert not _answered(host, port, _python_tls(pki, with_client_cert=False)), \
            f"TLS without a client certificate answered on {port}"
    wanted = REFUSAL_LINES[server_kind]
    deadline = time.monotonic() + 10      # Apache's log appender may lag a moment
    while True:
        logged = sum(path.read_text(errors="replace").count(wanted)
                     for path in enforcing_server.config.workdir.rglob("*") if path.suffix in (".out", ".log"))
        if logged >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert logged >= 2, f"{wanted!r} logged {logged} times\n{enforcing_server.log_tail()}"

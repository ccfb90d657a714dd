"""TLS on a real loopback port, driven by the standard library's blocking ``ssl`` clients in worker
threads: permissive serves plain and TLS on one port, enforcing refuses plain with a log line,
disabled refuses TLS; client certificates required / optional; the first-byte look and the
handshake are bounded and lose no byte; a silent client holds up nobody."""

from __future__ import annotations

import logging
import socket
import ssl
import time
from dataclasses import replace
from pathlib import Path

import pytest
import trio

from pyrmq.codec.remoting import FrameDecoder, RemotingCommand, encode_command
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.server import RemotingServer
from pyrmq.remoting.tls import TlsListener, TlsPolicy, tls_listener_wrapper
from pyrmq.remoting.tls_config import ClientAuth, TlsConfig, TlsMode
from pyrmq.remoting.tls_context import server_ssl_context
from tests.tls_pki import Pki, make_pki

ECHO = 1000
CLIENT_TIMEOUT_S = 5.0
TLS_LOG = "pyrmq.remoting.tls"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _config(pki: Pki, mode: TlsMode, auth: ClientAuth = ClientAuth.NONE) -> TlsConfig:
    return TlsConfig(server_mode=mode, test_mode_enable=False, server_cert_path=str(pki.server_cert),
                     server_key_path=str(pki.server_key), server_trust_cert_path=str(pki.ca),
                     server_need_client_auth=auth)


def _table() -> ProcessorTable:
    table = ProcessorTable("test")
    table.register(ECHO, lambda ch, req: req.response(0, remark=f"{req.field('x')} tls={isinstance(ch.peer.stream, trio.SSLStream)}"))
    return table


async def _serve(nursery: trio.Nursery, wrap_listener) -> int:
    server = RemotingServer(_table(), "127.0.0.1", 0, wrap_listener=wrap_listener)
    return await nursery.start(server.serve)


def _frame(opaque: int) -> bytes:
    return encode_command(RemotingCommand(code=ECHO, opaque=opaque, ext_fields={"x": str(opaque)}))


def _read_response(recv) -> RemotingCommand:
    decoder = FrameDecoder()
    while True:
        data = recv(65536)
        if not data:
            raise ConnectionError("closed by the server")
        decoder.receive_data(data)
        for frame in decoder.frames():
            return frame


def _client_context(pki: Pki | None, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    if pki is None:                       # a test-mode server: nothing to verify it against
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None:
        ctx.load_cert_chain(*cert)
    return ctx


def _call(port: int, ctx: ssl.SSLContext | None, opaque: int = 1, split_first_byte: bool = False) -> str:
    """One echo request, plain or TLS; the answer's remark.  Raises OSError when refused."""
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as raw:
        sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1") if ctx is not None else raw
        frame = _frame(opaque)
        if split_first_byte:
            sock.sendall(frame[:1])
            time.sleep(0.05)
        sock.sendall(frame if not split_first_byte else frame[1:])
        response = _read_response(sock.recv)
    assert response.opaque == opaque
    return response.remark


def _call_tls_trickled(port: int, ctx: ssl.SSLContext, opaque: int) -> str:
    """TLS whose ClientHello leaves in two pieces, its first byte alone: the server's look at the
    first byte must leave it for the handshake."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as sock:
        first_flight = True
        while True:
            try:
                tls.do_handshake()
                sock.sendall(outgoing.read())
                break
            except ssl.SSLWantReadError:
                data = outgoing.read()
                if first_flight:
                    sock.sendall(data[:1])
                    time.sleep(0.05)
                    data, first_flight = data[1:], False
                sock.sendall(data)
                received = sock.recv(65536)
                if not received:
                    raise ConnectionError("closed during the handshake") from None
                incoming.write(received)
        tls.write(_frame(opaque))
        sock.sendall(outgoing.read())

        def recv(n: int) -> bytes:
            while True:
                try:
                    return tls.read(n)
                except ssl.SSLWantReadError:
                    received = sock.recv(65536)
                    if not received:
                        return b""
                    incoming.write(received)

        return _read_response(recv).remark


def _closed_without_answer(port: int, payload: bytes) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as sock:
        sock.sendall(payload)
        try:
            return sock.recv(65536) == b""
        except ConnectionResetError:     # closed with our bytes unread: the kernel sends a reset
            return True


def _tls_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == TLS_LOG and r.levelno >= logging.WARNING]


async def test_permissive_serves_plain_and_tls_on_one_port(nursery, pki):
    port = await _serve(nursery, tls_listener_wrapper(_config(pki, TlsMode.PERMISSIVE), 120))
    assert await trio.to_thread.run_sync(_call, port, None, 1) == "1 tls=False"
    assert await trio.to_thread.run_sync(_call, port, _client_context(pki), 2) == "2 tls=True"
    async with trio.open_nursery() as clients:   # side by side
        for i in range(3, 9):
            clients.start_soon(trio.to_thread.run_sync, _call, port, _client_context(pki) if i % 2 else None, i)


async def test_no_byte_is_lost_when_the_first_arrives_alone(nursery, pki):
    port = await _serve(nursery, tls_listener_wrapper(_config(pki, TlsMode.PERMISSIVE), 120))
    assert await trio.to_thread.run_sync(lambda: _call(port, None, 5, split_first_byte=True)) == "5 tls=False"
    assert await trio.to_thread.run_sync(_call_tls_trickled, port, _client_context(pki), 6) == "6 tls=True"


async def test_enforcing_refuses_plain_with_a_log_line_and_serves_tls(nursery, pki, caplog):
    port = await _serve(nursery, tls_listener_wrapper(_config(pki, TlsMode.ENFORCING), 120))
    assert await trio.to_thread.run_sync(_closed_without_answer, port, _frame(1))
    with pytest.raises(ConnectionError):
        await trio.to_thread.run_sync(_call, port, None, 2)
    assert await trio.to_thread.run_sync(_call, port, _client_context(pki), 3) == "3 tls=True"
    refusals = [line for line in _tls_lines(caplog) if "refused" in line]
    assert len(refusals) == 2
    assert refusals[0].startswith("closing connection from 127.0.0.1:")
    assert refusals[0].endswith("plain connection (first byte 0x00) refused, tls.server.mode is enforcing")


async def test_disabled_serves_plain_and_closes_a_tls_handshake(nursery, pki, caplog):
    assert tls_listener_wrapper(_config(pki, TlsMode.DISABLED), 120) is None
    port = await _serve(nursery, None)
    assert await trio.to_thread.run_sync(_call, port, None, 1) == "1 tls=False"
    with pytest.raises(OSError):
        await trio.to_thread.run_sync(_call, port, _client_context(pki), 2)
    # The frame decoder sees a length whose top byte is 0x16 (far past the frame limit) and says why.
    [line] = [r.getMessage() for r in caplog.records
              if "closing connection from" in r.getMessage() and r.name == "pyrmq.remoting.channel"]
    assert line.endswith(": TLS client on a plain remoting port (tls.server.mode=disabled): enable TLS on the "
                         "server (permissive or enforcing) or turn it off in the client"), line


async def test_required_client_certificate(nursery, pki, caplog):
    port = await _serve(nursery, tls_listener_wrapper(_config(pki, TlsMode.ENFORCING, ClientAuth.REQUIRE), 120))
    good = _client_context(pki, (pki.client_cert, pki.client_key))
    assert await trio.to_thread.run_sync(_call, port, good, 1) == "1 tls=True"
    for ctx in (_client_context(pki), _client_context(pki, (pki.stranger_cert, pki.stranger_key))):
        # TLS 1.3: the client's handshake ends before the server has checked its certificate; the
        # refusal arrives as an alert or a close on its first read.
        with pytest.raises(OSError):
            await trio.to_thread.run_sync(_call, port, ctx, 2)
    failures = [line for line in _tls_lines(caplog) if "TLS handshake failed" in line]
    assert len(failures) == 2, failures


async def test_optional_client_certificate(nursery, pki):
    port = await _serve(nursery, tls_listener_wrapper(_config(pki, TlsMode.PERMISSIVE, ClientAuth.OPTIONAL), 120))
    assert await trio.to_thread.run_sync(_call, port, _client_context(pki), 1) == "1 tls=True"
    good = _client_context(pki, (pki.client_cert, pki.client_key))
    assert await trio.to_thread.run_sync(_call, port, good, 2) == "2 tls=True"
    with pytest.raises(OSError):   # a certificate shown is checked
        await trio.to_thread.run_sync(_call, port, _client_context(pki, (pki.stranger_cert, pki.stranger_key)), 3)
    assert await trio.to_thread.run_sync(_call, port, None, 4) == "4 tls=False"


async def test_test_mode_serves_a_self_signed_certificate(nursery):
    port = await _serve(nursery, tls_listener_wrapper(TlsConfig(server_mode=TlsMode.ENFORCING), 120))
    assert await trio.to_thread.run_sync(_call, port, _client_context(None), 1) == "1 tls=True"

    def peer_cert() -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as raw:
            with _client_context(None).wrap_socket(raw) as tls:
                der = tls.getpeercert(binary_form=True)
                assert der is not None
                return der

    # One certificate per process (made once), and nothing a CA-checking client accepts.
    assert await trio.to_thread.run_sync(peer_cert) == await trio.to_thread.run_sync(peer_cert)
    with pytest.raises(ssl.SSLCertVerificationError):
        await trio.to_thread.run_sync(_call, port, ssl.create_default_context(), 2)


def _policy(pki: Pki, **timeouts: float) -> TlsPolicy:
    config = _config(pki, TlsMode.ENFORCING)
    return TlsPolicy(config.server_mode, server_ssl_context(config), **timeouts)


async def test_silent_client_is_closed_at_the_first_byte_deadline_and_blocks_nobody(nursery, pki, caplog):
    policy = _policy(pki, first_bytes_timeout=0.5)
    port = await _serve(nursery, lambda listener: TlsListener(listener, policy))

    def silent() -> float:
        with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as sock:
            start = time.monotonic()
            assert sock.recv(1) == b""
            return time.monotonic() - start

    async with trio.open_nursery() as clients:
        clients.start_soon(trio.to_thread.run_sync, silent)
        await trio.sleep(0.1)
        # accepted and served while the silent one is still being waited for
        assert await trio.to_thread.run_sync(_call, port, _client_context(pki), 1) == "1 tls=True"
    assert [line for line in _tls_lines(caplog) if "nothing sent within 0.5 s" in line]


async def test_stalled_handshake_is_closed_at_the_handshake_deadline(nursery, pki, caplog):
    policy = _policy(pki, first_bytes_timeout=30, handshake_timeout=0.5)
    port = await _serve(nursery, lambda listener: TlsListener(listener, policy))

    def stall() -> float:
        with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as sock:
            sock.sendall(b"\x16\x03\x01")     # the start of a ClientHello record, then nothing
            start = time.monotonic()
            try:
                assert sock.recv(1) == b""
            except ConnectionResetError:
                pass
            return time.monotonic() - start

    waited = await trio.to_thread.run_sync(stall)
    assert 0.4 < waited < 3
    assert [line for line in _tls_lines(caplog) if "TLS handshake not completed within 0.5 s" in line]


async def test_test_mode_ignores_configured_certificate_with_a_warning(pki, caplog):
    config = replace(_config(pki, TlsMode.PERMISSIVE), test_mode_enable=True)
    assert server_ssl_context(config) is server_ssl_context(TlsConfig())
    assert any("tls.server.certPath / keyPath are ignored" in r.getMessage() for r in caplog.records)


MIXED_CLIENTS = 120      # half TLS, half plain; a third of each sends its first byte alone
MIXED_REQUESTS = 5       # requests per connection
MIXED_AT_ONCE = 12


def _session(port: int, ctx: ssl.SSLContext | None, first: int, split_first_byte: bool) -> list[int]:
    """MIXED_REQUESTS echo requests on one connection; the opaques answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as raw:
        sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1") if ctx is not None else raw
        frames = b"".join(_frame(first + i) for i in range(MIXED_REQUESTS))
        if split_first_byte:
            sock.sendall(frames[:1])
            time.sleep(0.02)
            frames = frames[1:]
        sock.sendall(frames)
        decoder, answered = FrameDecoder(), []
        while len(answered) < MIXED_REQUESTS:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            decoder.receive_data(data)
            answered += [frame.opaque for frame in decoder.frames()]
        return answered


@pytest.mark.parametrize("mode", [TlsMode.PERMISSIVE, TlsMode.ENFORCING])
async def test_mixed_load(nursery, pki, caplog, mode):
    """Many clients at once, TLS and plain: in permissive every request is answered on its own
    connection; in enforcing every TLS one is and every plain connection is closed with one line."""
    port = await _serve(nursery, tls_listener_wrapper(_config(pki, mode), 120))
    results: dict[int, list[int] | str] = {}
    limiter = trio.CapacityLimiter(MIXED_AT_ONCE)

    async def client(n: int) -> None:
        ctx = _client_context(pki) if n % 2 else None
        first = n * 100
        try:
            results[n] = await trio.to_thread.run_sync(_session, port, ctx, first, n % 3 == 0, limiter=limiter)
        except OSError as exc:
            results[n] = repr(exc)

    async with trio.open_nursery() as clients:
        for n in range(MIXED_CLIENTS):
            clients.start_soon(client, n)
    tls_clients = [n for n in range(MIXED_CLIENTS) if n % 2]
    plain_clients = [n for n in range(MIXED_CLIENTS) if not n % 2]
    for n in tls_clients + (plain_clients if mode is TlsMode.PERMISSIVE else []):
        assert results[n] == [n * 100 + i for i in range(MIXED_REQUESTS)], (n, results[n])
    refusals = [line for line in _tls_lines(caplog) if "refused" in line]
    if mode is TlsMode.ENFORCING:
        assert all(isinstance(results[n], str) for n in plain_clients)
        assert len(refusals) == len(plain_clients)
    else:
        assert refusals == []

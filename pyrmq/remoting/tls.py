"""TLS on the remoting ports, decided per connection as Apache's NettyRemotingServer does (its
HandshakeHandler): the first byte a client sends says whether it starts a TLS handshake.

- ``permissive``: a first byte 0x16 (a TLS handshake record) gets TLS, anything else is served
  plain on the same port;
- ``enforcing``: TLS only; a plain client is closed with a log line;
- ``disabled``: no wrapper at all.  A client that starts a handshake anyway is closed by the frame
  decoder with a log line: 0x16 as the top byte of a frame length means more than 16 MiB.

The first byte is looked at with MSG_PEEK, so it stays in the socket for whoever reads next (the
frame decoder, or the TLS stream) and nothing is lost.  Looking waits at most
``first_bytes_timeout`` (the idle deadline: a plain client may stay silent as long on any port),
and the handshake at most ``handshake_timeout`` (Netty's 10 s default).  All of it happens on the
connection's own reader task, the first time the channel reads, never in the accept loop.

Plain connections keep their ``SocketPeerStream`` and its ``sendmsg`` gather-write; a TLS one is a
``PeerStream`` over ``trio.SSLStream``.
"""

from __future__ import annotations

import logging
import math
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import trio

from pyrmq.remoting.tls_config import TlsConfig, TlsMode
from pyrmq.remoting.tls_context import server_ssl_context
from pyrmq.remoting.transport import Buffer, PeerStream, SocketPeerStream

log = logging.getLogger(__name__)

# The content type of a TLS handshake record, the first byte of every ClientHello.  No remoting
# frame starts with it: a frame's first byte is the top byte of its length, 0x00 or 0x01 below the
# 16 MiB frame limit.
TLS_HANDSHAKE_RECORD: Final = 0x16
# Netty's SslHandler gives a handshake 10 s (handshakeTimeoutMillis).
DEFAULT_HANDSHAKE_TIMEOUT_S: Final = 10.0

Listener = trio.abc.Listener[PeerStream]


@dataclass(frozen=True)
class TlsPolicy:
    """What a TLS listener does with each new connection."""

    mode: TlsMode
    ssl_context: ssl.SSLContext
    first_bytes_timeout: float | None
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_S

    async def negotiate(self, raw: SocketPeerStream) -> PeerStream:
        """The stream to speak remoting over: ``raw`` itself (plain) or TLS over it.  Raises
        ``trio.BrokenResourceError`` for a connection that is refused (after its log line)."""
        first = b""
        with trio.move_on_after(self.first_bytes_timeout or math.inf) as waiting:
            first = await raw.peek(1)
        if waiting.cancelled_caught:
            log.warning("closing connection from %s: nothing sent within %g s", raw.remote_addr,
                        self.first_bytes_timeout)
            raise trio.BrokenResourceError("no first byte")
        if not first:
            return raw      # closed before sending anything: the reader sees the EOF
        if first[0] != TLS_HANDSHAKE_RECORD:
            if self.mode is TlsMode.ENFORCING:
                log.warning("closing connection from %s: plain connection (first byte 0x%02x) refused, "
                            "tls.server.mode is enforcing", raw.remote_addr, first[0])
                raise trio.BrokenResourceError("plain connection refused")
            return raw
        tls = trio.SSLStream(raw.stream, self.ssl_context, server_side=True)
        with trio.move_on_after(self.handshake_timeout) as handshaking:
            try:
                await tls.do_handshake()
            except trio.BrokenResourceError as exc:
                log.warning("closing connection from %s: TLS handshake failed: %s", raw.remote_addr,
                            exc.__cause__ or exc)
                raise
        if handshaking.cancelled_caught:
            log.warning("closing connection from %s: TLS handshake not completed within %g s", raw.remote_addr,
                        self.handshake_timeout)
            raise trio.BrokenResourceError("TLS handshake timed out")
        return PeerStream(tls, raw.remote_addr, raw.local_addr)


class NegotiatingPeerStream(PeerStream):
    """A fresh connection of a TLS listener: plain or TLS is decided on its first read or write
    (whichever comes first; the server only writes after reading), then every call goes to the
    stream that was decided on."""

    def __init__(self, raw: SocketPeerStream, policy: TlsPolicy) -> None:
        super().__init__(raw.stream, raw.remote_addr, raw.local_addr)
        self._raw = raw
        self._policy = policy
        self._peer: PeerStream | None = None
        self._failed = False
        self._lock = trio.Lock()

    async def _negotiated(self) -> PeerStream:
        async with self._lock:
            if self._failed:
                raise trio.BrokenResourceError("connection refused")
            if self._peer is None:
                try:
                    self._peer = await self._policy.negotiate(self._raw)
                except BaseException:
                    # Refused, or cancelled mid-handshake: the socket holds a half-read exchange
                    # that cannot be resumed.
                    self._failed = True
                    raise
                self.stream = self._peer.stream
            return self._peer

    async def receive_some(self, max_bytes: int) -> bytes | bytearray:
        peer = self._peer if self._peer is not None else await self._negotiated()
        return await peer.receive_some(max_bytes)

    async def send_buffers(self, buffers: Sequence[Buffer]) -> None:
        peer = self._peer if self._peer is not None else await self._negotiated()
        await peer.send_buffers(buffers)

    def try_send(self, buffers: Sequence[Buffer]) -> int | None:
        return None if self._peer is None else self._peer.try_send(buffers)

    async def aclose(self) -> None:
        await (self._peer or self._raw).aclose()


class TlsListener(trio.abc.Listener[PeerStream]):
    """Wraps a TCP listener: its connections negotiate TLS per ``policy`` on first use."""

    def __init__(self, listener: Listener, policy: TlsPolicy) -> None:
        self.listener = listener
        self.policy = policy

    async def accept(self) -> PeerStream:
        peer = await self.listener.accept()
        if not isinstance(peer, SocketPeerStream):
            await trio.aclose_forcefully(peer)
            raise TypeError(f"TLS detection needs a socket connection, got {peer!r}")
        return NegotiatingPeerStream(peer, self.policy)

    async def aclose(self) -> None:
        await self.listener.aclose()


def tls_listener_wrapper(config: TlsConfig, first_bytes_timeout: float | None,
                         name: str = "remoting") -> Callable[[Listener], Listener] | None:
    """The ``wrap_listener`` of a ``RemotingServer`` under ``config``; None when TLS is disabled.
    Builds the SSL context now, so a bad certificate stops the start (``TlsConfigError``)."""
    log.info("%s: %s", name, config.describe())
    if config.server_mode is TlsMode.DISABLED:
        return None
    policy = TlsPolicy(config.server_mode, server_ssl_context(config), first_bytes_timeout)
    return lambda listener: TlsListener(listener, policy)


async def start_client_tls(peer: PeerStream, ssl_context: ssl.SSLContext, server_hostname: str) -> PeerStream:
    """TLS over a client connection, handshake done.  Raises ``ConnectionError`` (an OSError, as a
    failed connect) when the handshake fails; the connection is closed then."""
    tls = trio.SSLStream(peer.stream, ssl_context, server_hostname=server_hostname)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError as exc:
        await trio.aclose_forcefully(peer)
        raise ConnectionError(f"TLS handshake with {peer.remote_addr} failed: {exc.__cause__ or exc}") from exc
    except BaseException:
        await trio.aclose_forcefully(peer)
        raise
    return PeerStream(tls, peer.remote_addr, peer.local_addr)

"""The seam between remoting and the byte transport: listeners that yield ``PeerStream``s.

A ``PeerStream`` is a connected ``trio.abc.Stream`` plus the two address strings a channel logs
and the roles use (born host, client ids), so nothing above this module reaches through
``stream.socket``.  A TLS listener is a wrapper around a ``trio.abc.Listener[PeerStream]`` that
returns ``PeerStream(trio.SSLStream(peer.stream, ...), peer.remote_addr, peer.local_addr)``;
hypercorn's ``trio/run.py`` wraps its listeners the same way.

``send_buffers`` is the gather-write of a channel's writer: plain TCP hands the buffers (header
bytes and memoryviews of mapped store files) to ``sendmsg`` untouched; any other stream (TLS)
gets them joined into one ``send_all``. ``try_send`` is the same write made at once, without
waiting: plain TCP only (one ``writev`` on the non-blocking socket), so that a channel can send
its answers from the reader's step instead of waking its writer task for them.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import trio

log = logging.getLogger(__name__)


def split_addr(addr: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as (host, port); ValueError for anything else."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad address {addr!r}: expected host:port")
    return host.strip("[]"), int(port)

# sendmsg refuses more iovecs than this (EMSGSIZE); Linux and the BSDs allow 1024.
IOV_MAX: Final = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in getattr(os, "sysconf_names", {}) else 1024

Buffer = bytes | bytearray | memoryview

# Out of descriptors, buffers or memory: the condition passes when connections close, so accept
# again after a pause instead of failing the server (trio's serve_listeners does the same).
ACCEPT_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_CAPACITY_PAUSE_S: Final = 0.1


def format_addr(sockname: tuple[Any, ...]) -> str:
    """``host:port`` as RocketMQ writes it; IPv6 hosts in brackets."""
    host, port = sockname[0], sockname[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class PeerStream(trio.abc.AsyncResource):
    """A connected byte stream and the addresses it joins: all a ``Channel`` talks through."""

    def __init__(self, stream: trio.abc.Stream, remote_addr: str, local_addr: str = "") -> None:
        self.stream = stream
        self.remote_addr = remote_addr
        self.local_addr = local_addr

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.local_addr} <- {self.remote_addr}>"

    async def receive_some(self, max_bytes: int) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    def try_send(self, buffers: Sequence[Buffer]) -> int | None:
        """Bytes of ``buffers`` written at once without blocking (0 when the socket is full), or
        None when this stream cannot write outside its task (TLS). Raises OSError."""
        return None

    async def send_buffers(self, buffers: Sequence[Buffer]) -> None:
        """Send every byte of ``buffers`` in order.  Streams without gather-write (TLS) join them."""
        await self.stream.send_all(buffers[0] if len(buffers) == 1 else b"".join(buffers))

    async def aclose(self) -> None:
        await self.stream.aclose()


def consume_sent(buffers: list[Buffer], sent: int) -> list[Buffer]:
    """What is left of ``buffers`` after the first ``sent`` bytes went out (a partial write)."""
    index = 0
    while index < len(buffers) and sent >= len(buffers[index]):
        sent -= len(buffers[index])
        index += 1
    rest = buffers[index:]
    if sent:
        rest[0] = memoryview(rest[0])[sent:]
    return rest


class SocketPeerStream(PeerStream):
    """A plain TCP connection: gather-writes with ``sendmsg``, no copy of the body buffers."""

    stream: trio.SocketStream

    @classmethod
    def from_socket_stream(cls, stream: trio.SocketStream, remote_addr: str | None = None) -> SocketPeerStream:
        """Raises ``OSError`` when the peer is already gone (ENOTCONN from getpeername)."""
        sock = stream.socket
        return cls(stream, remote_addr or format_addr(sock.getpeername()), format_addr(sock.getsockname()))

    async def peek(self, max_bytes: int) -> bytes:
        """The first bytes waiting on the socket, left there (MSG_PEEK): whoever reads next gets
        them too.  Waits until some arrive; ``b""`` at EOF."""
        return await self.stream.socket.recv(max_bytes, socket.MSG_PEEK)

    async def receive_some(self, max_bytes: int) -> bytes:
        """trio's ``SocketStream.receive_some`` in one function instead of five layers (error
        translation, method wrapper, non-blocking helper, its async context manager): a reader
        pays them on every request. The same steps: a cancellation is taken before reading; a
        read that needs no wait still yields once, so a peer that always has bytes waiting does
        not starve the other connections; otherwise it waits until the socket is readable."""
        sock = self.stream.socket
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            data = os.read(sock.fileno(), max_bytes)   # trio keeps its sockets non-blocking
        except BlockingIOError:
            pass
        except OSError as exc:
            raise _stream_error(exc) from exc
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return data
        while True:
            await trio.lowlevel.wait_readable(sock)
            try:
                return os.read(sock.fileno(), max_bytes)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise _stream_error(exc) from exc

    def try_send(self, buffers: Sequence[Buffer]) -> int | None:
        try:
            # trio keeps its sockets non-blocking: this never waits
            return os.writev(self.stream.socket.fileno(), buffers[:IOV_MAX])
        except BlockingIOError:
            return 0

    async def send_buffers(self, buffers: Sequence[Buffer]) -> None:
        sock = self.stream.socket
        pending = list(buffers)
        while pending:
            # trio's sendmsg waits until the socket is writable, then makes one syscall that may
            # write only part of what it was given.
            sent = await sock.sendmsg(pending[:IOV_MAX])
            pending = consume_sent(pending, sent)


def _stream_error(exc: OSError) -> trio.BrokenResourceError | trio.ClosedResourceError:
    """A failed read as trio's streams report it: closed under us, or broken."""
    if exc.errno in (errno.EBADF, errno.ENOTSOCK):   # closed by another task while we waited
        return trio.ClosedResourceError("this socket was already closed")
    return trio.BrokenResourceError(f"socket connection broken: {exc}")


class TCPListener(trio.abc.Listener[PeerStream]):
    """A ``trio.SocketListener`` whose accepted connections come with their addresses."""

    def __init__(self, listener: trio.SocketListener) -> None:
        self.listener = listener
        self.local_addr = format_addr(listener.socket.getsockname())
        self.port: int = listener.socket.getsockname()[1]

    async def accept(self) -> PeerStream:
        while True:
            stream = await self.listener.accept()
            try:
                return SocketPeerStream.from_socket_stream(stream)
            except OSError as exc:   # reset before we looked at it: nothing to serve
                log.debug("accepted connection gone at once: %s", exc)
                await trio.aclose_forcefully(stream)

    async def aclose(self) -> None:
        await self.listener.aclose()


class PortInUseError(OSError):
    """A server's port is taken: the message names the role and the port, the one line a user sees."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EADDRINUSE, message)

    def __str__(self) -> str:
        return str(self.strerror)


async def open_tcp_listeners(port: int, host: str | None = None, role: str = "server") -> list[TCPListener]:
    """One listener per address ``host`` resolves to (both stacks for a wildcard), as trio's."""
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise PortInUseError(f"{role}: port {port} on {host or '0.0.0.0'} is already in use "
                                        "(another NameServer or broker? change its port or stop it)") from None
    return [TCPListener(listener) for listener in listeners]


async def open_tcp_peer_stream(host: str, port: int, remote_addr: str | None = None) -> SocketPeerStream:
    """Connect; ``remote_addr`` overrides the peer address string (a client logs what it dialled)."""
    stream = await trio.open_tcp_stream(host, port)
    try:
        return SocketPeerStream.from_socket_stream(stream, remote_addr)
    except OSError:
        await trio.aclose_forcefully(stream)
        raise


async def accept_loop(listener: trio.abc.Listener[PeerStream], nursery: trio.Nursery,
                      handle: Callable[[PeerStream], Awaitable[None]], name: str) -> None:
    """Accept connections forever, each handled by ``handle`` in ``nursery``.  Running out of
    descriptors or memory is logged and waited out; any other accept failure ends the loop."""
    while True:
        try:
            peer = await listener.accept()
        except OSError as exc:
            if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                raise
            log.error("%s accept failed, retrying in %g s: %s", name, ACCEPT_CAPACITY_PAUSE_S, exc)
            await trio.sleep(ACCEPT_CAPACITY_PAUSE_S)
            continue
        nursery.start_soon(handle, peer)

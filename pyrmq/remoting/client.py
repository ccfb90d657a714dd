"""Remoting client: one connection per address, request/response by opaque, oneway requests.

Used by the broker to talk to NameServers, by tests and by the bench tools.
"""

from __future__ import annotations

import logging
import ssl
from contextlib import AbstractAsyncContextManager
from typing import Any, Callable

import trio

from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel, ChannelClosedError, Dispatcher
from pyrmq.remoting.tls import start_client_tls
from pyrmq.remoting.transport import PeerStream, open_tcp_peer_stream, split_addr

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0


class RemotingClient:
    """Keeps a channel per ``host:port``; must run inside ``async with RemotingClient(...)``.
    With ``ssl_context`` every connection speaks TLS (Apache's NettyClientConfig.useTLS)."""

    def __init__(self, dispatcher: Dispatcher | None = None, ssl_context: ssl.SSLContext | None = None) -> None:
        self.dispatcher = dispatcher
        self.ssl_context = ssl_context
        self._channels: dict[str, Channel] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: AbstractAsyncContextManager[trio.Nursery] | None = None

    async def __aenter__(self) -> RemotingClient:
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        self.close()
        assert self._nursery_cm is not None
        suppress: bool | None = await self._nursery_cm.__aexit__(*exc_info)
        return suppress

    def close(self) -> None:
        for channel in list(self._channels.values()):
            channel.close()
        self._channels.clear()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def channel(self, addr: str) -> Channel:
        channel = self._channels.get(addr)
        if channel is not None and not channel.closed:
            return channel
        lock = self._locks.setdefault(addr, trio.Lock())
        async with lock:
            channel = self._channels.get(addr)
            if channel is not None and not channel.closed:
                return channel
            host, port = split_addr(addr)
            with trio.fail_after(CONNECT_TIMEOUT_S):   # the TLS handshake included
                peer: PeerStream = await open_tcp_peer_stream(host, port, remote_addr=addr)
                if self.ssl_context is not None:
                    peer = await start_client_tls(peer, self.ssl_context, host)
            channel = Channel(peer)
            self._channels[addr] = channel
            channel.on_close(self._forget_channel(addr))
            assert self._nursery is not None
            self._nursery.start_soon(channel.run, self.dispatcher)
            return channel

    def _forget_channel(self, addr: str) -> Callable[[Channel], None]:
        """A close callback dropping ``addr``'s channel, unless a newer one replaced it."""
        def forget(closed: Channel) -> None:
            if self._channels.get(addr) is closed:
                del self._channels[addr]
        return forget

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        channel = await self.channel(addr)
        return await channel.invoke(request, timeout)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        channel = await self.channel(addr)
        if channel.closed:
            raise ChannelClosedError(f"connection to {addr} closed")
        channel.send_oneway(request)

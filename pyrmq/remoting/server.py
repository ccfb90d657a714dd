"""Remoting server: accepts connections and runs one Channel per peer in a handler nursery.

The accept loop follows trio's ``serve_listeners``: running out of descriptors or memory is logged
and waited out, any other accept failure ends the server, and every accepted stream is closed in
``finally``.  Listeners are ``trio.abc.Listener[PeerStream]`` (see transport.py), so a TLS wrapper
plugs in through ``wrap_listener`` without the channel knowing.
"""

from __future__ import annotations

import logging
from typing import Callable, Final

import trio

from pyrmq.codec.remoting import MAX_FRAME_BYTES
from pyrmq.remoting.channel import DEFAULT_WRITE_TIMEOUT_S, Channel, Dispatcher
from pyrmq.remoting.transport import PeerStream, accept_loop, open_tcp_listeners

log = logging.getLogger(__name__)

# Apache's serverChannelMaxIdleTimeSeconds: clients heartbeat every 30 s, so 120 s of silence
# means the peer is gone or is not a RocketMQ client.
DEFAULT_IDLE_TIMEOUT_S: Final = 120.0
# A started frame must be complete within this: a 16 MiB frame needs only ~0.5 MB/s.
DEFAULT_FRAME_TIMEOUT_S: Final = 30.0

Listener = trio.abc.Listener[PeerStream]


class RemotingServer:
    """Listens on ``host:port``; ``serve`` reports the bound port through ``task_status``."""

    def __init__(self, dispatcher: Dispatcher, host: str, port: int, name: str = "remoting",
                 max_frame_bytes: int = MAX_FRAME_BYTES,
                 on_channel: Callable[[Channel], None] | None = None, *,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT_S,
                 frame_timeout: float | None = DEFAULT_FRAME_TIMEOUT_S,
                 write_timeout: float | None = DEFAULT_WRITE_TIMEOUT_S,
                 wrap_listener: Callable[[Listener], Listener] | None = None) -> None:
        self.dispatcher = dispatcher
        self.host = host
        self.port = port
        self.name = name
        self.max_frame_bytes = max_frame_bytes
        self.on_channel = on_channel
        self.idle_timeout = idle_timeout
        self.frame_timeout = frame_timeout
        self.write_timeout = write_timeout
        self.wrap_listener = wrap_listener
        self.channels: set[Channel] = set()
        self._cancel_scope: trio.CancelScope | None = None
        self._accept_scope = trio.CancelScope()

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        tcp_listeners = await open_tcp_listeners(self.port, host=self.host, role=self.name)
        self.port = tcp_listeners[0].port
        listeners: list[Listener] = list(tcp_listeners)
        if self.wrap_listener is not None:
            listeners = [self.wrap_listener(listener) for listener in listeners]
        log.info("%s listening on %s:%d", self.name, self.host, self.port)
        await self.serve_listeners(listeners, task_status=task_status)

    async def serve_listeners(self, listeners: list[Listener], *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve connections from ``listeners`` (closed on return) until ``close()``."""
        with trio.CancelScope() as scope:
            self._cancel_scope = scope
            async with trio.open_nursery() as handlers:
                task_status.started(self.port)
                # Accepting has its own scope so a graceful stop ends it while connections go on.
                try:
                    with self._accept_scope:
                        async with trio.open_nursery() as acceptors:
                            for listener in listeners:
                                acceptors.start_soon(accept_loop, listener, handlers, self._handle, self.name)
                finally:
                    for listener in listeners:
                        await trio.aclose_forcefully(listener)

    async def _handle(self, peer: PeerStream) -> None:
        try:
            channel = Channel(peer, self.max_frame_bytes, idle_timeout=self.idle_timeout,
                              frame_timeout=self.frame_timeout, write_timeout=self.write_timeout)
            self.channels.add(channel)
            channel.on_close(self.channels.discard)
            if self.on_channel is not None:
                self.on_channel(channel)
            await channel.run(self.dispatcher)
        except Exception:   # one connection's failure never ends the server (the channel logs its own)
            log.exception("%s: connection from %s failed", self.name, peer.remote_addr)
        finally:
            await trio.aclose_forcefully(peer)

    def stop_accepting(self) -> None:
        self._accept_scope.cancel()

    def close(self) -> None:
        """Stop accepting and drop every connection."""
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

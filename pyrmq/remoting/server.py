"""Remoting server: accepts connections and runs one Channel per peer in a handler nursery."""

from __future__ import annotations

import logging
from typing import Callable

import trio

from pyrmq.codec.remoting import MAX_FRAME_BYTES
from pyrmq.remoting.channel import Channel, Dispatcher

log = logging.getLogger(__name__)


def _addr(sockname) -> str:
    host, port = sockname[0], sockname[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class RemotingServer:
    """Listens on ``host:port``; ``serve`` reports the bound port through ``task_status``."""

    def __init__(self, dispatcher: Dispatcher, host: str, port: int, name: str = "remoting",
                 max_frame_bytes: int = MAX_FRAME_BYTES,
                 on_channel: Callable[[Channel], None] | None = None) -> None:
        self.dispatcher = dispatcher
        self.host = host
        self.port = port
        self.name = name
        self.max_frame_bytes = max_frame_bytes
        self.on_channel = on_channel
        self.channels: set[Channel] = set()
        self._listeners: list[trio.SocketListener] = []
        self._cancel_scope: trio.CancelScope | None = None
        self._accept_scope = trio.CancelScope()

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self._listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        self.port = self._listeners[0].socket.getsockname()[1]
        log.info("%s listening on %s:%d", self.name, self.host, self.port)
        with trio.CancelScope() as scope:
            self._cancel_scope = scope
            async with trio.open_nursery() as handlers:
                task_status.started(self.port)
                # Accepting has its own scope so a graceful stop ends it while connections go on.
                try:
                    with self._accept_scope:
                        async with trio.open_nursery() as acceptors:
                            for listener in self._listeners:
                                acceptors.start_soon(self._accept_loop, listener, handlers)
                finally:
                    for listener in self._listeners:
                        listener.socket.close()

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:   # e.g. EMFILE: log, back off, keep serving
                log.warning("%s accept failed: %s", self.name, exc)
                await trio.sleep(0.1)
                continue
            nursery.start_soon(self._handle, stream)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            remote = _addr(stream.socket.getpeername())
            local = _addr(stream.socket.getsockname())
        except OSError:
            await trio.aclose_forcefully(stream)
            return
        channel = Channel(stream, remote, local, self.max_frame_bytes)
        self.channels.add(channel)
        channel.on_close(self.channels.discard)
        if self.on_channel is not None:
            self.on_channel(channel)
        await channel.run(self.dispatcher)

    def stop_accepting(self) -> None:
        self._accept_scope.cancel()

    def close(self) -> None:
        """Stop accepting and drop every connection."""
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

"""A test peer that reads none of its answers until told to (shared by the channel tests)."""

from __future__ import annotations

import trio

from pyrmq.remoting.transport import PeerStream


class StalledPeer(PeerStream):
    """Reads none of its answers until ``drain`` is set."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        super().__init__(stream, "10.0.0.9:4242")
        self.drain = trio.Event()

    async def send_buffers(self, buffers) -> None:
        await self.drain.wait()
        await super().send_buffers(buffers)

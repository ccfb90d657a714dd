"""The edge of the server: the accept loop's capacity errors, and listener wrappers (the seam a
TLS listener uses)."""

from __future__ import annotations

import errno
import logging

import pytest
import trio
import trio.testing

from pyrmq.codec.remoting import FrameDecoder, RemotingCommand, encode_command, make_request
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.server import RemotingServer
from pyrmq.remoting.transport import PeerStream

ECHO = 1000


def _table() -> ProcessorTable:
    table = ProcessorTable("test")
    table.register(ECHO, lambda ch, req: req.response(0, remark=req.field("x"), body=req.body))
    return table


def _echo(opaque: int) -> bytes:
    return encode_command(RemotingCommand(code=ECHO, opaque=opaque, ext_fields={"x": str(opaque)}))


class _Listener(trio.abc.Listener[PeerStream]):
    """Accept outcomes scripted: exceptions are raised, streams returned, then nothing more."""

    def __init__(self, outcomes) -> None:
        self.outcomes = list(outcomes)

    async def accept(self) -> PeerStream:
        await trio.lowlevel.checkpoint()
        if not self.outcomes:
            await trio.sleep_forever()
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_accept_out_of_descriptors_is_logged_and_waited_out(nursery, autojump_clock, caplog):
    client, server_side = trio.testing.memory_stream_pair()
    listener = _Listener([OSError(errno.EMFILE, "Too many open files"),
                          PeerStream(server_side, "10.0.0.9:1", "10.0.0.1:2")])
    server = RemotingServer(_table(), "127.0.0.1", 0)
    await nursery.start(server.serve_listeners, [listener])
    await client.send_all(_echo(3))
    decoder = FrameDecoder()
    decoder.receive_data(await client.receive_some())
    assert [r.opaque for r in decoder.frames()] == [3]          # served after the pause
    assert any("accept failed, retrying" in r.getMessage() and r.levelno == logging.ERROR
               for r in caplog.records)
    server.close()


async def test_other_accept_errors_end_the_server():
    server = RemotingServer(_table(), "127.0.0.1", 0)
    with pytest.raises(BaseExceptionGroup) as info:
        await server.serve_listeners([_Listener([OSError(errno.EBADF, "Bad file descriptor")])])
    assert info.group_contains(OSError, match="Bad file descriptor", depth=None)


class _CountingStream(trio.abc.Stream):
    """A stream wrapped around another, as trio.SSLStream wraps the TCP stream."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.bytes_sent = 0

    async def send_all(self, data) -> None:
        self.bytes_sent += len(data)
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes=None) -> bytes:
        return await self.inner.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


class _WrappingListener(trio.abc.Listener[PeerStream]):
    def __init__(self, inner: trio.abc.Listener[PeerStream]) -> None:
        self.inner = inner
        self.streams: list[_CountingStream] = []

    async def accept(self) -> PeerStream:
        peer = await self.inner.accept()
        wrapped = _CountingStream(peer.stream)
        self.streams.append(wrapped)
        return PeerStream(wrapped, peer.remote_addr, peer.local_addr)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_listener_wrapper_carries_the_whole_conversation(nursery):
    wrappers: list[_WrappingListener] = []
    channels: list[Channel] = []

    def wrap(listener):
        wrappers.append(_WrappingListener(listener))
        return wrappers[-1]

    server = RemotingServer(_table(), "127.0.0.1", 0, wrap_listener=wrap, on_channel=channels.append)
    await nursery.start(server.serve)
    with trio.fail_after(10):
        async with RemotingClient() as client:
            addr = f"127.0.0.1:{server.port}"
            response = await client.invoke(addr, make_request(ECHO, {"x": "via wrapper"}, b"body"))
            local_port = next(iter(client._channels.values())).peer.local_addr.rsplit(":", 1)[1]
    assert (response.remark, response.body) == ("via wrapper", b"body")
    [stream] = [s for w in wrappers for s in w.streams]
    assert stream.bytes_sent == len(encode_command(response))
    assert channels[0].remote_addr == f"127.0.0.1:{local_port}"
    assert channels[0].local_addr == addr
    server.close()

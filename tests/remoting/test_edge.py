"""The edge of the server: deadlines for partial frames and idle peers (trio's clock, so the
autojump clock runs them instantly), the accept loop's capacity errors, and listener wrappers (the
seam a TLS listener uses)."""

from __future__ import annotations

import errno
import logging

import pytest
import trio
import trio.testing

from pyrmq.codec.remoting import FrameDecoder, RemotingCommand, encode_command, make_request
from pyrmq.remoting import channel as channel_module
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.server import RemotingServer
from pyrmq.remoting.transport import PeerStream
from tests.remoting.stalled_peer import StalledPeer

ECHO = 1000
IDLE_S = 120
FRAME_S = 30


def _table() -> ProcessorTable:
    table = ProcessorTable("test")
    table.register(ECHO, lambda ch, req: req.response(0, remark=req.field("x"), body=req.body))
    return table


def _echo(opaque: int) -> bytes:
    return encode_command(RemotingCommand(code=ECHO, opaque=opaque, ext_fields={"x": str(opaque)}))


async def _served_memory_channel(nursery: trio.Nursery):
    client, server = trio.testing.memory_stream_pair()
    channel = Channel(PeerStream(server, "10.0.0.9:4242", "10.0.0.1:10911"),
                      idle_timeout=IDLE_S, frame_timeout=FRAME_S)
    nursery.start_soon(channel.run, _table())
    return client, channel


def _closing_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("closing connection from")]


async def _closed_at_the_frame_deadline(channel: Channel, caplog) -> None:
    """The 10 bytes of a frame just sent are dropped at FRAME_S, not half a second earlier."""
    await trio.sleep(FRAME_S - 0.5)
    assert not channel.closed
    await trio.sleep(1)
    assert channel.closed
    assert _closing_lines(caplog) == [
        "closing connection from 10.0.0.9:4242: partial frame (10 bytes) not completed within 30 s"]


async def test_partial_frame_is_closed_at_the_frame_deadline(nursery, autojump_clock, caplog):
    client, channel = await _served_memory_channel(nursery)
    await trio.sleep(5)
    await client.send_all(_echo(1)[:10])          # half a frame, then nothing
    await _closed_at_the_frame_deadline(channel, caplog)


async def test_slow_frame_completed_in_time_is_served(nursery, autojump_clock):
    client, channel = await _served_memory_channel(nursery)
    frame = _echo(7)
    for i in range(len(frame)):                   # byte by byte, the last one just inside 30 s
        await client.send_all(frame[i:i + 1])
        await trio.sleep(FRAME_S / (len(frame) + 1))
    decoder = FrameDecoder()
    decoder.receive_data(await client.receive_some())
    assert [r.opaque for r in decoder.frames()] == [7]
    assert not channel.closed


async def test_idle_peer_is_closed_and_an_active_one_is_not(nursery, autojump_clock, caplog):
    quiet, quiet_channel = await _served_memory_channel(nursery)
    active, active_channel = await _served_memory_channel(nursery)
    for opaque in range(1, 11):                   # 10 frames, one every 60 s: 600 s in all
        await active.send_all(_echo(opaque))
        await trio.sleep(IDLE_S / 2)
        if opaque == 3:                           # 180 s in
            assert quiet_channel.closed
    assert not active_channel.closed
    assert _closing_lines(caplog) == ["closing connection from 10.0.0.9:4242: no complete frame for 120 s"]


async def test_deadlines_hold_after_the_reader_extended_them_lazily(nursery, autojump_clock, caplog):
    # the reader moves its deadline later only when the scope fires early: after five stretches
    # of activity (a frame every 60 s), a frame left half-sent is still closed 30 s after it began,
    # and not a second before
    client, channel = await _served_memory_channel(nursery)
    for opaque in range(1, 11):
        await client.send_all(_echo(opaque))
        await trio.sleep(IDLE_S / 2)
    await client.send_all(_echo(11)[:10])
    await _closed_at_the_frame_deadline(channel, caplog)
    decoder = FrameDecoder()
    while (data := await client.receive_some()):
        decoder.receive_data(data)
    assert [r.opaque for r in decoder.frames()] == list(range(1, 11))


async def test_zero_disables_both_deadlines(nursery, autojump_clock):
    client, server = trio.testing.memory_stream_pair()
    channel = Channel(PeerStream(server, "10.0.0.9:4242"), idle_timeout=0, frame_timeout=0)
    nursery.start_soon(channel.run, _table())
    await client.send_all(_echo(1)[:10])
    await trio.sleep(IDLE_S * 100)
    assert not channel.closed


async def test_time_spent_waiting_for_the_peer_to_drain_is_not_idle_time(nursery, autojump_clock, monkeypatch):
    monkeypatch.setattr(channel_module, "OUTBOUND_HIGH_WATER", 10)   # one answer exceeds it
    client, server = trio.testing.memory_stream_pair()
    peer = StalledPeer(server)
    channel = Channel(peer, idle_timeout=IDLE_S, frame_timeout=FRAME_S, write_timeout=IDLE_S * 10)
    nursery.start_soon(channel.run, _table())
    await client.send_all(_echo(1))
    await trio.sleep(IDLE_S * 2)           # the reader waits for the writer, not for the peer
    peer.drain.set()
    await trio.sleep(IDLE_S - 1)
    assert not channel.closed
    await trio.sleep(2)
    assert channel.closed


async def test_server_applies_its_deadlines(nursery, caplog):
    server = RemotingServer(_table(), "127.0.0.1", 0, frame_timeout=0.2)
    await nursery.start(server.serve)
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with stream:
            await stream.send_all(_echo(1)[:5])
            assert await stream.receive_some() == b""      # closed by the server, no answer
    assert "not completed within 0.2 s" in " ".join(_closing_lines(caplog))
    server.close()


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

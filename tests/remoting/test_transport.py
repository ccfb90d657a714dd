"""The transport seam: gather-writes that survive partial sendmsg, the join fallback for streams
without one (TLS), and pull-answer buffers reaching the wire byte-identical to the joined frame."""

from __future__ import annotations

import errno
import mmap
import socket

import pytest
import trio
import trio.testing

from pyrmq.codec.remoting import RemotingCommand, encode_command
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.transport import IOV_MAX, PeerStream, SocketPeerStream, consume_sent

BUFFERS = [b"abc", b"", b"defg", b"h"]


@pytest.mark.parametrize("sent,rest", [
    (0, [b"abc", b"", b"defg", b"h"]),
    (2, [b"c", b"", b"defg", b"h"]),
    (3, [b"defg", b"h"]),          # a fully sent buffer and the empty one after it are dropped
    (5, [b"fg", b"h"]),
    (7, [b"h"]),
    (8, []),
])
def test_consume_sent(sent, rest):
    assert [bytes(b) for b in consume_sent(list(BUFFERS), sent)] == rest


class _TrickleSocket:
    """sendmsg that takes at most ``limit`` bytes per call, as a full socket buffer does."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.calls: list[int] = []
        self.received = bytearray()

    async def sendmsg(self, buffers):
        await trio.lowlevel.checkpoint()
        if len(buffers) > IOV_MAX:
            raise OSError(errno.EMSGSIZE, "Message too long")
        data = b"".join(bytes(b) for b in buffers)[:self.limit]
        self.calls.append(len(buffers))
        self.received += data
        return len(data)


class _FakeSocketStream:
    def __init__(self, sock) -> None:
        self.socket = sock


async def test_partial_sendmsg_writes_are_resumed_where_they_stopped():
    sock = _TrickleSocket(limit=3)
    peer = SocketPeerStream(_FakeSocketStream(sock), "peer:1", "local:2")
    buffers = [b"header", memoryview(b"0123456789"), b"", memoryview(b"tail")]
    await peer.send_buffers(buffers)
    assert bytes(sock.received) == b"header0123456789tail"
    assert len(sock.calls) == 7      # 20 bytes, 3 per call: every byte once, none twice


async def test_more_buffers_than_iov_max_go_out_in_several_calls():
    sock = _TrickleSocket(limit=10**9)
    peer = SocketPeerStream(_FakeSocketStream(sock), "peer:1", "local:2")
    buffers = [b"%d," % i for i in range(2 * IOV_MAX + 5)]
    await peer.send_buffers(buffers)
    assert bytes(sock.received) == b"".join(buffers)
    assert sock.calls == [IOV_MAX, IOV_MAX, 5]


async def test_gather_write_over_a_real_socket_with_a_small_send_buffer():
    left, right = trio.socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    payload = [bytes([i]) * 50_000 for i in range(1, 21)]     # 1 MB through a 4 KiB buffer
    peer = SocketPeerStream(trio.SocketStream(left), "peer:1", "local:2")
    received = bytearray()

    async def drain():
        while len(received) < 1_000_000:
            received.extend(await right.recv(65536))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            await peer.send_buffers([memoryview(p) for p in payload])
    assert bytes(received) == b"".join(payload)
    left.close()
    right.close()


async def test_stream_without_gather_write_gets_the_buffers_joined():
    send, receive = trio.testing.memory_stream_one_way_pair()
    peer = PeerStream(send, "peer:1")
    await peer.send_buffers([b"ab", memoryview(b"cd"), b"e"])
    assert await receive.receive_some() == b"abcde"


def _pull_answer(body) -> RemotingCommand:
    return RemotingCommand(code=0, opaque=9, flag=1, remark="FOUND",
                           ext_fields={"nextBeginOffset": "3", "minOffset": "0", "maxOffset": "3"}, body=body)


async def _receive_then_close(sock, size: int, channel: Channel, nursery: trio.Nursery) -> bytes:
    """``size`` bytes read from ``sock``, then the channel closed and its tasks cancelled."""
    received = bytearray()
    while len(received) < size:
        received.extend(await sock.recv(65536))
    channel.close()
    nursery.cancel_scope.cancel()
    return bytes(received)


async def test_pull_answer_on_the_wire_equals_the_joined_frame(tmp_path):
    # memoryviews of a mapped file, as the store hands them to the pull processor
    path = tmp_path / "commitlog"
    path.write_bytes(bytes(range(256)) * 64)
    with path.open("r+b") as f:
        mapping = mmap.mmap(f.fileno(), 0)
    view = memoryview(mapping)
    records = [view[0:100], view[100:1000], view[5000:16384]]
    left, right = trio.socket.socketpair()
    channel = Channel(SocketPeerStream(trio.SocketStream(left), "peer:1", "local:2"))
    expected = encode_command(_pull_answer(b"".join(records))) * 2
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel.run, None)
            channel.send_response(_pull_answer(records))
            channel.send_response(_pull_answer(records))
            received = await _receive_then_close(right, len(expected), channel, nursery)
    assert received == expected
    del records
    view.release()
    mapping.close()
    right.close()


def test_closing_a_channel_drops_its_queued_mmap_slices(tmp_path):
    path = tmp_path / "commitlog"
    path.write_bytes(b"\0" * 4096)
    with path.open("r+b") as f:
        mapping = mmap.mmap(f.fileno(), 0)
    view = memoryview(mapping)
    send, _ = trio.testing.memory_stream_pair()
    channel = Channel(PeerStream(send, "peer:1"))     # never run: the answer stays queued
    channel.send_response(_pull_answer([view[0:10], view[100:200]]))
    # backpressure counts the body buffers too
    assert channel._outbound_bytes == len(encode_command(_pull_answer(bytes(110))))
    view.release()
    channel.close()
    mapping.close()    # BufferError while a queued slice still exports the mapping


async def test_answers_are_written_at_once_and_what_the_socket_refuses_goes_through_the_writer_in_order():
    left, right = trio.socket.socketpair()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    channel = Channel(SocketPeerStream(trio.SocketStream(left), "peer:1", "local:2"))
    # no writer task yet: an answer the socket has room for is on the wire when send_response returns
    channel.send_response(_pull_answer(b"x" * 100))
    assert channel._outbound_bytes == 0
    first = encode_command(_pull_answer(b"x" * 100))
    # far more than the socket holds: the rest waits for the writer, still in order
    answers = [RemotingCommand(code=0, opaque=i, flag=1, remark=None, ext_fields={}, body=bytes([i]) * 100_000)
               for i in range(1, 21)]
    expected = first + b"".join(encode_command(a) for a in answers)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel.run, None)
            for a in answers:
                channel.send_response(a)
            assert channel._outbound_bytes > 0
            received = await _receive_then_close(right, len(expected), channel, nursery)
    assert received == expected
    right.close()

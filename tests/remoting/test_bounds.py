"""Per-peer bounds of a channel: a peer that does not read is throttled, then disconnected; answers
owed to it (held pulls) stop its reader at a count; an invalid frame is answered, not dispatched;
a failure inside the connection closes that connection only (trio's clock: autojump)."""

from __future__ import annotations

import trio
import trio.testing

from pyrmq.codec.remoting import FrameDecoder, RemotingCommand, encode_command
from pyrmq.remoting import channel as channel_module
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.transport import PeerStream
from tests.remoting.stalled_peer import StalledPeer

ECHO = 1000
HOLD = 1001
BIG = 1002


def _frame(code: int, opaque: int, **ext: str) -> bytes:
    return encode_command(RemotingCommand(code=code, opaque=opaque, ext_fields=ext))


async def _answers(stream: trio.abc.Stream, count: int) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    answers: list[RemotingCommand] = []
    while len(answers) < count:
        data = await stream.receive_some()
        assert data, f"closed after {len(answers)} answers"
        decoder.receive_data(data)
        answers.extend(decoder.frames())
    return answers


async def test_a_peer_that_does_not_read_is_disconnected_at_the_write_deadline(nursery, autojump_clock, caplog):
    table = ProcessorTable("test")
    table.register(ECHO, lambda ch, req: req.response(0))
    client, server = trio.testing.memory_stream_pair()
    peer = StalledPeer(server)
    channel = Channel(peer, write_timeout=30)
    nursery.start_soon(channel.run, table)
    await client.send_all(_frame(ECHO, 1))
    await trio.sleep(29)
    assert not channel.closed
    await trio.sleep(2)
    assert channel.closed
    assert any("does not read its answers" in r.getMessage() and "within 30 s" in r.getMessage()
               for r in caplog.records)


async def test_queued_answers_beyond_the_limit_disconnect_and_free_the_queue(nursery, autojump_clock, monkeypatch):
    monkeypatch.setattr(channel_module, "OUTBOUND_LIMIT", 1000)
    client, server = trio.testing.memory_stream_pair()
    peer = StalledPeer(server)
    channel = Channel(peer, write_timeout=0)
    nursery.start_soon(channel.run, ProcessorTable("test"))
    await trio.sleep(1)
    for opaque in range(5):   # answers owed from before (held pulls) arrive while nobody reads
        channel.send_response(RemotingCommand(code=0, opaque=opaque, flag=1, body=b"x" * 300))
    assert channel.closed
    assert channel._outbound == [] and channel._outbound_bytes == 0


async def test_owed_answers_stop_the_reader_until_they_are_settled(nursery, autojump_clock, monkeypatch):
    monkeypatch.setattr(channel_module, "MAX_OWED_ANSWERS", 3)
    held: list[tuple[Channel, RemotingCommand]] = []
    table = ProcessorTable("test")
    table.register(ECHO, lambda ch, req: req.response(0))

    def hold(ch: Channel, req: RemotingCommand) -> None:
        held.append((ch, req))   # answered later, like a held pull

    table.register(HOLD, hold)
    client, server = trio.testing.memory_stream_pair()
    channel = Channel(PeerStream(server, "10.0.0.9:4242"))
    nursery.start_soon(channel.run, table)
    # the same opaque each time: a hostile peer's reuse does not escape the count
    for _ in range(4):
        await client.send_all(_frame(HOLD, 7))
        await trio.sleep(0.1)
    assert len(held) == 3           # the reader stopped at the bound; the fourth waits in the socket
    ch, req = held.pop(0)
    ch.send_response(req.response(0))
    await trio.sleep(1)
    assert len(held) == 3           # one settled, the fourth read
    await client.send_all(_frame(ECHO, 99))
    await trio.sleep(1)
    for ch, req in held:
        ch.send_response(req.response(0))
    held.clear()
    answers = await _answers(client, 5)
    assert [a.opaque for a in answers] == [7, 7, 7, 7, 99]   # the echo was read only after them


async def test_an_invalid_frame_is_answered_and_the_connection_goes_on(nursery, autojump_clock):
    calls = []
    table = ProcessorTable("test")
    table.register(ECHO, lambda ch, req: calls.append(req.field("x")) or req.response(0, remark=req.field("x")))
    client, server = trio.testing.memory_stream_pair()
    channel = Channel(PeerStream(server, "10.0.0.9:4242"))
    nursery.start_soon(channel.run, table)
    header = b'{"code":1000,"opaque":5,"flag":0,"extFields":{"x":"a\\ud800"}}'
    bad = len(header).to_bytes(4, "big")
    bad = (4 + len(header)).to_bytes(4, "big") + bad + header
    await client.send_all(bad + _frame(ECHO, 6, x="fine"))
    first, second = await _answers(client, 2)
    assert (first.opaque, first.code) == (5, 1)
    assert "header field 'x' is not valid Unicode text" in first.remark
    assert (second.opaque, second.code, second.remark) == (6, 0, "fine")
    assert calls == ["fine"]
    assert not channel.closed


async def test_a_dispatcher_that_raises_closes_only_its_connection(nursery, autojump_clock, caplog):
    class Broken:
        def dispatch(self, channel, request):
            raise RuntimeError("boom")

    client, server = trio.testing.memory_stream_pair()
    channel = Channel(PeerStream(server, "10.0.0.9:4242"))
    done = trio.Event()

    async def run() -> None:
        await channel.run(Broken())
        done.set()

    nursery.start_soon(run)
    await client.send_all(_frame(ECHO, 1))
    with trio.fail_after(5):
        await done.wait()           # run() returned instead of raising into the server's nursery
    assert channel.closed
    assert any("internal error: RuntimeError: boom" in r.getMessage() for r in caplog.records)


async def test_an_answer_that_cannot_be_encoded_becomes_system_error(nursery, autojump_clock):
    table = ProcessorTable("test")
    table.register(BIG, lambda ch, req: req.response(0, remark="bad \ud800 text"))
    client, server = trio.testing.memory_stream_pair()
    channel = Channel(PeerStream(server, "10.0.0.9:4242"))
    nursery.start_soon(channel.run, table)
    await client.send_all(_frame(BIG, 3))
    (answer,) = await _answers(client, 1)
    assert (answer.opaque, answer.code) == (3, 1)
    assert "could not encode its answer" in answer.remark

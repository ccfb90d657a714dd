"""Answers that are ready later: a processor returns an awaitable, the channel answers when it
completes, the reader keeps serving meanwhile, and a failing awaitable is answered SYSTEM_ERROR
without harming the connection."""

from __future__ import annotations

import trio
import trio.testing

from pyrmq.codec.remoting import FrameDecoder, RemotingCommand, encode_command
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable, RequestError
from pyrmq.remoting.transport import PeerStream

NOW = 1
LATER = 2
BROKEN_LATER = 3
REFUSED_LATER = 4


class _Harness:
    def __init__(self) -> None:
        self.release = trio.Event()
        self.table = ProcessorTable("test")
        self.table.register(NOW, lambda ch, req: req.response(0, remark="now"))
        self.table.register(LATER, lambda ch, req: self._later(req))
        self.table.register(BROKEN_LATER, lambda ch, req: self._broken(req))
        self.table.register(REFUSED_LATER, lambda ch, req: self._refused(req))

    async def _later(self, request: RemotingCommand) -> RemotingCommand:
        await self.release.wait()
        return request.response(0, remark="later")

    async def _broken(self, request: RemotingCommand) -> RemotingCommand:
        await trio.lowlevel.checkpoint()
        raise ValueError("disk on fire")

    async def _refused(self, request: RemotingCommand) -> RemotingCommand:
        await trio.lowlevel.checkpoint()
        raise RequestError(12, "slave not available")


async def _receive(stream, decoder: FrameDecoder, count: int) -> list[RemotingCommand]:
    got: list[RemotingCommand] = []
    while len(got) < count:
        decoder.receive_data(await stream.receive_some())
        got.extend(decoder.frames())
    return got


def _request(code: int, opaque: int, oneway: bool = False) -> bytes:
    return encode_command(RemotingCommand(code=code, opaque=opaque, flag=2 if oneway else 0))


async def _serve(nursery: trio.Nursery, harness: _Harness):
    client, server = trio.testing.memory_stream_pair()
    channel = Channel(PeerStream(server, "peer:1"))
    nursery.start_soon(channel.run, harness.table)
    return client, channel, FrameDecoder()


async def test_deferred_answer_does_not_hold_up_the_reader(nursery):
    harness = _Harness()
    client, _, decoder = await _serve(nursery, harness)
    with trio.fail_after(5):
        await client.send_all(_request(LATER, 1) + _request(NOW, 2))
        [first] = await _receive(client, decoder, 1)
        assert (first.opaque, first.remark) == (2, "now")
        await client.send_all(_request(NOW, 3))
        [second] = await _receive(client, decoder, 1)
        assert second.opaque == 3
        harness.release.set()
        [third] = await _receive(client, decoder, 1)
        assert (third.opaque, third.remark) == (1, "later")


async def test_failing_deferred_answer_is_system_error_and_the_connection_lives(nursery, caplog):
    client, channel, decoder = await _serve(nursery, _Harness())
    with trio.fail_after(5):
        await client.send_all(_request(BROKEN_LATER, 1))
        [failed] = await _receive(client, decoder, 1)
        assert (failed.opaque, failed.code, failed.remark) == (1, 1, "ValueError: disk on fire")
        await client.send_all(_request(REFUSED_LATER, 2))
        [refused] = await _receive(client, decoder, 1)
        assert (refused.opaque, refused.code, refused.remark) == (2, 12, "slave not available")
        await client.send_all(_request(NOW, 3))
        [fine] = await _receive(client, decoder, 1)
        assert fine.opaque == 3 and not channel.closed
    assert "deferred answer to code 3 (opaque 1) from peer:1 failed" in caplog.text
    assert "code 4" not in caplog.text          # a refusal is an answer, not a failure


async def test_oneway_deferred_runs_but_is_not_answered(nursery):
    harness = _Harness()
    harness.release.set()
    client, _, decoder = await _serve(nursery, harness)
    with trio.fail_after(5):
        await client.send_all(_request(LATER, 1, oneway=True) + _request(NOW, 2))
        await trio.testing.wait_all_tasks_blocked()
        got = await _receive(client, decoder, 1)
    assert [r.opaque for r in got] == [2]
    assert decoder.buffered == 0

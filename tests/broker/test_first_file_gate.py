"""Sends to a queue with no consume queue file yet: the file is created by a worker thread, and
the sends pipelined meanwhile on one connection are stored in the order they were sent."""

from __future__ import annotations

import pytest
import trio

from pyrmq.codec.remoting import FrameDecoder
from tests.broker.rmq import send_frame

SENDS = 40


async def _pipelined_sends(addr: str, frames: list[bytes]) -> dict[int, dict[str, str]]:
    host, port = addr.rsplit(":", 1)
    answers: dict[int, dict[str, str]] = {}
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(b"".join(frames))   # all in flight before the first answer
        decoder = FrameDecoder()
        while len(answers) < len(frames):
            data = await stream.receive_some(65536)
            assert data, "the broker closed the connection"
            decoder.receive_data(data)
            for response in decoder.frames():
                assert response.code == 0, response.remark
                answers[response.opaque] = response.ext_fields or {}
    return answers


@pytest.mark.parametrize("broker_overrides", [{}, {"flushDiskType": "SYNC_FLUSH"}])
async def test_pipelined_sends_to_a_new_queue_keep_their_order(cluster, broker_overrides):
    gate = cluster.broker.send_processor.first_files
    with trio.fail_after(20):
        answers = await _pipelined_sends(cluster.broker_addr,
                                         [send_frame("TopicGate", 3, opaque) for opaque in range(1, SENDS + 1)])
    # queue offsets in the order the frames were written: none overtook the one that waited
    assert [int(answers[o]["queueOffset"]) for o in range(1, SENDS + 1)] == list(range(SENDS))
    assert {answers[o]["queueId"] for o in answers} == {"3"}
    cq = cluster.broker.store.consume_queues.get("TopicGate", 3)
    assert gate.prepared_queues == 1
    assert cq.mapped_file_queue.files_created_inline == 0   # not created on the event loop
    assert cq.get_max_offset_in_queue() == SENDS
    assert not gate._parked


async def test_a_queue_with_its_file_does_not_wait(cluster):
    gate = cluster.broker.send_processor.first_files
    with trio.fail_after(20):
        await _pipelined_sends(cluster.broker_addr, [send_frame("TopicGate2", 0, 1)])
        assert gate.prepared_queues == 1
        answers = await _pipelined_sends(cluster.broker_addr, [send_frame("TopicGate2", 0, o) for o in (2, 3)])
    assert [answers[o]["queueOffset"] for o in (2, 3)] == ["1", "2"]
    assert gate.prepared_queues == 1
    assert not gate.needs_gate("TopicGate2", 0)

"""Producer scenarios: sync, async, oneway and batch sends, read back with a pull consumer.

The pull consumer (DefaultMQPullConsumer) reads every queue from offset 0 to the end, so the
read-back is exact: every body once, at the queue and offset the send result named, and nothing
else.
"""

from __future__ import annotations

import pytest

from compat_tests.checks import (assert_dense_queues, assert_received_exactly, assert_sent_ok,
                                 decode_offset_msg_id, queue_order)

pytestmark = pytest.mark.compat

COUNT = 24


def _pull_all(java_client, server, names):
    pulled = java_client.run("pull", namesrv=server.namesrv_addr, topic=names.topic, group=names.group)
    per_queue_max = {}
    for p in pulled.of("pull"):
        assert p["minOffset"] == 0, p
        if p["status"] == "NO_NEW_MSG":
            # The last pull of each queue: asked at the end offset, which is the queue's max offset.
            assert p["offset"] == p["nextBeginOffset"] == p["maxOffset"], p
            per_queue_max[p["queueId"]] = p["maxOffset"]
    return pulled, per_queue_max


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_send_and_pull_back(mode, server, java_client, names):
    produced = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode=mode,
                               count=COUNT, tags="TagA,TagB,TagC")
    assert produced.summary == {**produced.summary, "ok": COUNT, "failed": 0}
    assert_sent_ok(produced.sent, COUNT, server)

    pulled, per_queue_max = _pull_all(java_client, server, names)
    assert_received_exactly(produced.sent, pulled.received)
    # The topic was auto-created from TBW102 with the producer's default of 4 queues.
    assert sorted(per_queue_max) == [0, 1, 2, 3]
    sent_per_queue = queue_order(produced.sent)
    assert {q: len(b) for q, b in sent_per_queue.items()} == {q: n for q, n in per_queue_max.items() if n}
    # Pulled in queue-offset order, each queue holds exactly what was sent to it, in that order.
    assert queue_order(pulled.received) == sent_per_queue
    if mode == "sync":
        # One sender, one message at a time: the send order is the queue order.
        for bodies in sent_per_queue.values():
            assert bodies == sorted(bodies, key=lambda b: int(b.rsplit("-", 1)[1]))


def test_oneway_send(server, java_client, names):
    produced = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="oneway",
                               count=COUNT, tags="TagA,TagB")
    assert [e["status"] for e in produced.sent] == ["ONEWAY"] * COUNT
    pulled, _ = _pull_all(java_client, server, names)
    assert_received_exactly(produced.sent, pulled.received)
    # No order assertion: without a response to wait for, the broker may store a connection's
    # oneway requests in any order (Apache runs them on a thread pool).
    assert_dense_queues(pulled.received)


def test_batch_send(server, java_client, names):
    produced = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="batch",
                               count=COUNT, batch_size=8, tags="TagA,TagB")
    assert_sent_ok(produced.sent, COUNT, server)
    # Each batch lands in one queue at consecutive offsets and consecutive commit log records.
    for start in range(0, COUNT, 8):
        batch = sorted((e for e in produced.sent if start <= e["i"] < start + 8), key=lambda e: e["i"])
        assert len({e["queueId"] for e in batch}) == 1, batch
        offsets = [e["queueOffset"] for e in batch]
        assert offsets == list(range(offsets[0], offsets[0] + 8))
        phys = [decode_offset_msg_id(e["offsetMsgId"])[2] for e in batch]
        assert phys == sorted(phys)
    pulled, _ = _pull_all(java_client, server, names)
    assert_received_exactly(produced.sent, pulled.received, check_msg_id=False)
    by_body = {e["body"]: e for e in pulled.received}
    sent_ids = {e["msgId"] for e in produced.sent}
    for start in range(0, COUNT, 8):
        batch = [e for e in produced.sent if start <= e["i"] < start + 8]
        got = {by_body[e["body"]]["msgId"] for e in batch}
        if java_client.flavor == "client4":
            assert [by_body[e["body"]]["msgId"] for e in batch] == [e["msgId"] for e in batch]
        else:
            # The 5.x client also gives the batch itself a UNIQ_KEY. The broker stores each entry's
            # properties followed by the batch's (spec/message.md section 5), and the later UNIQ_KEY
            # wins when the client decodes: all entries of a batch read back with the batch's id.
            assert len(got) == 1 and not got & sent_ids, got

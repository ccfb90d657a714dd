"""A timer message over a real socket to an in-process broker: parked until due, then pullable
in its real topic; an out-of-range delay is refused with Apache's code and remark."""

from __future__ import annotations

import pytest
import trio

from pyrmq.broker.recall_processor import decode_recall_handle
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import make_request
from tests.broker.rmq import pull, send
from tests.broker.test_delay_and_retry import existing_topics

FAST_TIMER = {"timerPrecisionMs": "100", "timerMaxDelaySec": "60"}


@pytest.mark.parametrize("broker_overrides", [FAST_TIMER])
async def test_timer_message_is_pulled_only_once_due(cluster):
    existing_topics(cluster, "TopicTimer")
    sent_at = trio.current_time()
    resp = await send(cluster.client, cluster.broker_addr, "TopicTimer", b"at last", tags="TagT",
                      extra={"TIMER_DELAY_MS": "800"}, queue_id=2)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    early, _ = await pull(cluster.client, cluster.broker_addr, "TopicTimer", 2, 0)
    assert early.code != ResponseCode.SUCCESS   # parked in rmq_sys_wheel_timer, not in its topic
    with trio.fail_after(5):
        while True:
            resp, messages = await pull(cluster.client, cluster.broker_addr, "TopicTimer", 2, 0)
            if messages:
                break
            await trio.sleep(0.02)
    arrived = trio.current_time() - sent_at
    assert 0.8 <= arrived < 0.8 + 0.1 + 0.5   # not before due; within the precision (and the poll)
    [message] = messages
    assert (message.topic, message.queue_id, message.body) == ("TopicTimer", 2, b"at last")
    assert message.properties["TIMER_DELAY_MS"] == "800" and message.properties["REAL_TOPIC"] == "TopicTimer"
    assert {"TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS"} <= set(message.properties)
    assert cluster.broker.store.find_consume_queue("rmq_sys_wheel_timer", 0).get_max_offset_in_queue() == 1


@pytest.mark.parametrize("broker_overrides", [FAST_TIMER])
async def test_timer_beyond_the_max_delay_is_refused(cluster):
    existing_topics(cluster, "TopicTimer")
    resp = await send(cluster.client, cluster.broker_addr, "TopicTimer", b"never", extra={"TIMER_DELAY_SEC": "61"})
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert resp.remark == ("timer message illegal, the delay time should not be bigger than the max delay 60000ms; "
                           "or if set del msg, the delay time should be bigger than the current time")


@pytest.mark.parametrize("broker_overrides", [{"timerWheelEnable": "false"}])
async def test_timer_refused_when_the_wheel_is_off(cluster):
    existing_topics(cluster, "TopicTimer")
    resp = await send(cluster.client, cluster.broker_addr, "TopicTimer", b"no", extra={"TIMER_DELAY_MS": "1000"})
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                        "accurate timer message is not enabled, timerWheelEnable is false")
    # a delay level still works, and wins over the timer properties (which go)
    resp = await send(cluster.client, cluster.broker_addr, "TopicTimer", b"lvl", extra={"TIMER_DELAY_MS": "1000",
                                                                                       "DELAY": "1"})
    assert resp.code == ResponseCode.SUCCESS
    parked = cluster.broker.store.look_message_by_offset(
        next(cluster.broker.store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 0).iter_units(0))[0])
    assert "TIMER_DELAY_MS" not in parked.properties and parked.properties["DELAY"] == "1"


@pytest.mark.parametrize("broker_overrides", [{**FAST_TIMER, "recallMessageEnable": "true"}])
async def test_recall_cancels_a_timer_message_not_yet_delivered(cluster):
    existing_topics(cluster, "TopicTimer")
    recalled = await send(cluster.client, cluster.broker_addr, "TopicTimer", b"recalled",
                          extra={"TIMER_DELAY_MS": "700"})
    kept = await send(cluster.client, cluster.broker_addr, "TopicTimer", b"kept", extra={"TIMER_DELAY_MS": "700"})
    handle = recalled.ext_fields["recallHandle"]
    topic, broker, timestamp, uniq = decode_recall_handle(handle)
    assert (topic, broker) == ("TopicTimer", "broker-a") and int(timestamp) % 100 == 1
    wrong = await cluster.client.invoke(cluster.broker_addr, make_request(
        RequestCode.RECALL_MESSAGE, {"producerGroup": "pg", "topic": "TopicTimer", "recallHandle": "bm9wZQ=="}))
    assert (wrong.code, wrong.remark) == (ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid")
    answer = await cluster.client.invoke(cluster.broker_addr, make_request(
        RequestCode.RECALL_MESSAGE, {"producerGroup": "pg", "topic": "TopicTimer", "recallHandle": handle}))
    assert answer.code == ResponseCode.SUCCESS and answer.ext_fields["msgId"] == uniq
    await trio.sleep(1.2)
    bodies = []
    for queue_id in range(4):
        resp, messages = await pull(cluster.client, cluster.broker_addr, "TopicTimer", queue_id, 0)
        bodies += [m.body for m in messages]
    assert bodies == [b"kept"] and kept.code == 0


@pytest.mark.parametrize("broker_overrides", [FAST_TIMER])
async def test_recall_is_off_by_default(cluster):
    existing_topics(cluster, "TopicTimer")
    sent = await send(cluster.client, cluster.broker_addr, "TopicTimer", b"x", extra={"TIMER_DELAY_MS": "5000"})
    answer = await cluster.client.invoke(cluster.broker_addr, make_request(
        RequestCode.RECALL_MESSAGE, {"topic": "TopicTimer", "recallHandle": sent.ext_fields["recallHandle"]}))
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")

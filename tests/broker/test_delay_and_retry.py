"""Delayed delivery through SCHEDULE_TOPIC_XXXX and CONSUMER_SEND_MSG_BACK to %RETRY% / %DLQ%."""

from __future__ import annotations

import pytest
import trio

from pyrmq.broker.topic_config import TopicConfig
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.system_topics import SCHEDULE_TOPIC
from pyrmq.codec.remoting import make_request
from tests.broker.rmq import pull, send

FAST_LEVELS = {"messageDelayLevel": "1s 2s 3s"}


def existing_topics(cluster, *topics: str, queues: int = 4) -> None:
    """Create the topics and their consume queue files in the broker, not by a send: a send that
    creates its topic is answered once topics.json is written by a worker thread, and the first
    send to a queue once a worker thread created its file; while trio waits for a thread the
    autojump clock runs on to the next deadline -- past a delay level, or a client's timeout."""
    for topic in topics:
        cluster.broker.topic_config_manager.update(TopicConfig(topic, queues, queues))
        existing_queue_files(cluster, topic, range(queues))


def existing_queue_files(cluster, topic: str, queue_ids) -> None:
    for queue_id in queue_ids:
        cluster.broker.store.consume_queues.find_or_create(topic, queue_id).prepare_unit(0)


def existing_schedule_queues(cluster) -> None:
    """The queue files of SCHEDULE_TOPIC_XXXX for FAST_LEVELS' three levels (queue = level - 1)."""
    existing_queue_files(cluster, SCHEDULE_TOPIC, range(3))


async def wait_for_messages(cluster, topic: str, queue_id: int, count: int = 1):
    with trio.fail_after(10):
        while True:
            resp, messages = await pull(cluster.client, cluster.broker_addr, topic, queue_id, 0)
            if len(messages) >= count:
                return messages
            await trio.sleep(0.05)


@pytest.mark.parametrize("broker_overrides", [FAST_LEVELS])
async def test_delayed_message_arrives_after_its_level(cluster, autojump_clock):
    existing_topics(cluster, "TopicD")
    existing_schedule_queues(cluster)
    resp = await send(cluster.client, cluster.broker_addr, "TopicD", b"later", tags="TagD",
                      extra={"DELAY": "1"}, queue_id=2)
    assert resp.code == 0
    sent_at = trio.current_time()
    immediately, _ = await pull(cluster.client, cluster.broker_addr, "TopicD", 2, 0)
    assert immediately.code != 0      # parked, not yet visible
    [message] = await wait_for_messages(cluster, "TopicD", 2)
    assert trio.current_time() - sent_at >= 0.9
    assert message.body == b"later" and message.queue_id == 2 and message.topic == "TopicD"
    # as Java: the delivered copy keeps DELAY, REAL_TOPIC and REAL_QID in its properties
    assert (message.properties["DELAY"], message.properties["REAL_TOPIC"], message.properties["REAL_QID"]) == \
        ("1", "TopicD", "2")
    assert message.properties["TAGS"] == "TagD"
    assert cluster.broker.schedule_service.offset_table == {1: 1}


@pytest.mark.parametrize("broker_overrides", [FAST_LEVELS])
async def test_send_back_retries_then_dead_letters(cluster, autojump_clock):
    inv = cluster.client.invoke
    existing_topics(cluster, "TopicB2")
    existing_topics(cluster, "%RETRY%bg", "%DLQ%bg", queues=1)   # as the send-back creates them
    existing_schedule_queues(cluster)
    resp = await send(cluster.client, cluster.broker_addr, "TopicB2", b"failing", tags="T")
    _, [original] = await pull(cluster.client, cluster.broker_addr, "TopicB2", 0, 0)
    back = await inv(cluster.broker_addr, make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": str(original.commit_log_offset), "group": "bg", "delayLevel": "1",
        "originMsgId": resp.ext_fields["msgId"], "originTopic": "TopicB2", "maxReconsumeTimes": "1"}))
    assert back.code == 0, back.remark
    [retried] = await wait_for_messages(cluster, "%RETRY%bg", 0)
    assert retried.body == b"failing" and retried.reconsume_times == 1
    assert retried.properties["RETRY_TOPIC"] == "TopicB2"
    assert retried.properties["ORIGIN_MESSAGE_ID"] == original.msg_id
    # retried once already and maxReconsumeTimes is 1: the next failure goes to the DLQ at once
    back = await inv(cluster.broker_addr, make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": str(retried.commit_log_offset), "group": "bg", "delayLevel": "0", "maxReconsumeTimes": "1"}))
    assert back.code == 0
    _, [dead] = await pull(cluster.client, cluster.broker_addr, "%DLQ%bg", 0, 0)
    assert dead.body == b"failing" and dead.reconsume_times == 2
    assert dead.properties["ORIGIN_MESSAGE_ID"] == original.msg_id
    assert cluster.broker.topic_config_manager.select("%DLQ%bg").read_queue_nums == 1
    missing = await inv(cluster.broker_addr, make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": "999999", "group": "bg", "delayLevel": "0"}))
    assert (missing.code, missing.remark) == (1, "look message by offset failed, 999999")


@pytest.mark.parametrize("broker_overrides", [FAST_LEVELS])
async def test_schedule_progress_survives_restart(cluster, autojump_clock):
    existing_topics(cluster, "TopicDR")
    existing_schedule_queues(cluster)
    await send(cluster.client, cluster.broker_addr, "TopicDR", b"x", extra={"DELAY": "9"})   # clamped to 3
    service = cluster.broker.schedule_service
    with trio.fail_after(10):
        while service.offset_table.get(3) != 1:
            await trio.sleep(0.05)
    service.persist()
    assert service.offsets.path.read_text() == "{\n\t\"offsetTable\":{3:1\n\t}\n}"

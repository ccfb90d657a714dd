"""Config JSON files are written off the event loop: a burst of auto-created topics costs one write
of topics.json per round of concurrent senders (not one per topic), the file is complete after a
graceful stop, and an admin change -- or a send that auto-created its topic -- is on disk before it
is answered."""

from __future__ import annotations

import os

import trio

from pyrmq.broker.config import build_config
from pyrmq.broker.controller import BrokerController
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import decode_offset_msg_id
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from tests.broker.conftest import broker_properties
from tests.broker.rmq import send

AUTO_CREATED_TOPICS = 1500


def count_replaces(monkeypatch, name: str) -> list[str]:
    """Every rename onto a file called ``name`` (write_atomically's last step)."""
    seen: list[str] = []
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if os.path.basename(os.fspath(dst)) == name:
            seen.append(os.fspath(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    return seen


async def test_burst_of_auto_created_topics_is_a_few_writes(nursery, tmp_path, monkeypatch):
    writes = count_replaces(monkeypatch, "topics.json")
    loaded = build_config(broker_properties(tmp_path, 1, namesrvAddr=""))
    broker = BrokerController(loaded)
    await nursery.start(broker.run)
    writes_at_start = len(writes)
    with trio.fail_after(120):
        async with RemotingClient() as client:
            async def send_many(first: int) -> None:
                for i in range(first, AUTO_CREATED_TOPICS, 10):
                    resp = await send(client, loaded.broker.broker_addr, f"Auto{i}", b"x")
                    assert resp.code == 0, resp.remark

            async with trio.open_nursery() as senders:
                for first in range(10):
                    senders.start_soon(send_many, first)
        broker.stop()
        await broker.wait_stopped()
    burst_writes = len(writes) - writes_at_start
    print(f"topics.json writes for {AUTO_CREATED_TOPICS} auto-created topics: {burst_writes}")
    # Each send that creates a topic is answered once topics.json holds it (a crash must not forget
    # the topic of an acknowledged message), so the 10 senders' 150 rounds are about 150 writes:
    # group commits, where Apache writes once per topic.
    assert burst_writes <= AUTO_CREATED_TOPICS / 10 * 1.5
    table = fastjson.loads((tmp_path / "store" / "config" / "topics.json").read_text())["topicConfigTable"]
    assert {f"Auto{i}" for i in range(AUTO_CREATED_TOPICS)} <= set(table)


async def test_topic_changes_are_answered_once_on_disk(cluster):
    """Apache answers UPDATE_AND_CREATE_TOPIC / DELETE_TOPIC_IN_BROKER after persisting; so do we,
    even when the change waits out the persister's coalescing pause."""
    path = cluster.broker.topic_config_manager.path
    with trio.fail_after(10):
        for name in ("Made1", "Made2", "Made3"):
            resp = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": name, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}))
            assert resp.code == 0, resp.remark
            assert name in fastjson.loads(path.read_text())["topicConfigTable"]
        resp = await cluster.client.invoke(cluster.broker_addr, make_request(
            RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Made2"}))
        assert resp.code == 0, resp.remark
        assert "Made2" not in fastjson.loads(path.read_text())["topicConfigTable"]


async def test_send_that_creates_its_topic_is_answered_once_the_topic_is_on_disk(cluster):
    """A crash right after SEND_OK must not forget the topic (its messages would have no route):
    as Apache persists an auto-created topic before answering, the answer waits for topics.json.
    Later sends to the topic are answered at once."""
    path = cluster.broker.topic_config_manager.path
    with trio.fail_after(10):
        await cluster.broker.config_persister.wait_written()
        for name in ("Fresh1", "Fresh2", "Fresh3"):      # each one inside the coalescing pause
            resp = await send(cluster.client, cluster.broker_addr, name, b"x")
            assert resp.code == 0, resp.remark
            assert name in fastjson.loads(path.read_text())["topicConfigTable"]
            assert not cluster.broker.topic_config_manager.created_unwritten(name)


async def test_send_back_that_creates_the_retry_topic_is_answered_once_it_is_on_disk(cluster):
    path = cluster.broker.topic_config_manager.path
    with trio.fail_after(10):
        resp = await send(cluster.client, cluster.broker_addr, "FreshB", b"failing")
        await cluster.broker.config_persister.wait_written()
        back = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": str(decode_offset_msg_id(resp.ext_fields["msgId"])[2]), "group": "freshg", "delayLevel": "1",
            "originMsgId": resp.ext_fields["msgId"], "originTopic": "FreshB", "maxReconsumeTimes": "16"}))
        assert back.code == 0, back.remark
        assert "%RETRY%freshg" in fastjson.loads(path.read_text())["topicConfigTable"]
        dead = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": str(decode_offset_msg_id(resp.ext_fields["msgId"])[2]), "group": "freshg", "delayLevel": "-1"}))
        assert dead.code == 0, dead.remark
        assert fastjson.loads(path.read_text())["topicConfigTable"]["%DLQ%freshg"]["readQueueNums"] == 1

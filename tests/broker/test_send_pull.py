"""Send and pull through a real broker: exact bodies, properties, offsets, ids, filters, limits."""

from __future__ import annotations

import pytest
import trio

from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import BatchEntry, decode_offset_msg_id, encode_batch, properties_to_string
from pyrmq.codec.remoting import SerializeType, make_request
from tests.broker.rmq import pull, send


@pytest.mark.parametrize("serialize_type", list(SerializeType))
async def test_send_then_pull_exact(cluster, serialize_type):
    with trio.fail_after(10):
        bodies = [f"hello {i}".encode() for i in range(5)]
        for i, body in enumerate(bodies):
            resp = await send(cluster.client, cluster.broker_addr, "TopicA", body, tags="TagA", keys=f"k{i}",
                              queue_id=1, serialize_type=serialize_type)
            assert resp.code == 0, resp.remark
            assert resp.serialize_type is serialize_type
            assert resp.ext_fields["queueId"] == "1"
            assert resp.ext_fields["queueOffset"] == str(i)
            assert resp.ext_fields["MSG_REGION"] == "DefaultRegion" and resp.ext_fields["TRACE_ON"] == "true"
            ip, port, offset = decode_offset_msg_id(resp.ext_fields["msgId"])
            assert (ip, port) == (bytes([127, 0, 0, 1]), int(cluster.broker_addr.split(":")[1]))
        resp, messages = await pull(cluster.client, cluster.broker_addr, "TopicA", 1, 0)
        assert resp.code == 0 and resp.remark == "FOUND"
        assert resp.ext_fields["nextBeginOffset"] == "5"
        assert resp.ext_fields["minOffset"] == "0" and resp.ext_fields["maxOffset"] == "5"
        assert [m.body for m in messages] == bodies
        assert [m.queue_offset for m in messages] == list(range(5))
        assert [m.properties["KEYS"] for m in messages] == [f"k{i}" for i in range(5)]
        assert all(m.properties["TAGS"] == "TagA" and m.properties["CLUSTER"] == "DefaultCluster" for m in messages)
        assert all("WAIT" not in m.properties for m in messages)   # 4.9.x strips WAIT
        assert all(m.flag == 7 and m.topic == "TopicA" and m.queue_id == 1 for m in messages)
        # the same record is served by VIEW_MESSAGE_BY_ID at its commit-log offset
        view = await cluster.client.invoke(cluster.broker_addr, make_request(
            RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(messages[2].commit_log_offset)}))
        assert view.code == 0 and b"hello 2" in view.body


async def test_batch_send_stores_separate_records(cluster):
    with trio.fail_after(10):
        entries = [BatchEntry(0, f"b{i}".encode(), properties_to_string({"UNIQ_KEY": f"U{i}", "TAGS": "T"}))
                   for i in range(4)]
        resp = await send(cluster.client, cluster.broker_addr, "TopicB", encode_batch(entries),
                          code=RequestCode.SEND_BATCH_MESSAGE, batch=True, queue_id=0)
        assert resp.code == 0, resp.remark
        assert len(resp.ext_fields["msgId"].split(",")) == 4
        assert resp.ext_fields["queueOffset"] == "0"
        resp, messages = await pull(cluster.client, cluster.broker_addr, "TopicB", 0, 0)
        assert [m.body for m in messages] == [b"b0", b"b1", b"b2", b"b3"]
        assert [m.properties["UNIQ_KEY"] for m in messages] == ["U0", "U1", "U2", "U3"]
        assert [m.queue_offset for m in messages] == [0, 1, 2, 3]


async def test_tag_filter_on_pull(cluster):
    with trio.fail_after(10):
        for tag in ["TagA", "TagB", "TagC", "TagA"]:
            await send(cluster.client, cluster.broker_addr, "TopicF", tag.encode(), tags=tag)
        resp, messages = await pull(cluster.client, cluster.broker_addr, "TopicF", 0, 0, subscription="TagA || TagC")
        assert [m.body for m in messages] == [b"TagA", b"TagC", b"TagA"]
        assert resp.ext_fields["nextBeginOffset"] == "4"
        resp, messages = await pull(cluster.client, cluster.broker_addr, "TopicF", 0, 1, subscription="TagZ")
        assert resp.code == 20 and messages == []   # PULL_RETRY_IMMEDIATELY: scanned, none matched
        assert resp.ext_fields["nextBeginOffset"] == "4"


async def test_pull_status_codes(cluster):
    with trio.fail_after(10):
        await send(cluster.client, cluster.broker_addr, "TopicS", b"x")
        resp, _ = await pull(cluster.client, cluster.broker_addr, "TopicS", 0, 1)
        assert (resp.code, resp.ext_fields["nextBeginOffset"]) == (19, "1")      # OFFSET_OVERFLOW_ONE
        resp, _ = await pull(cluster.client, cluster.broker_addr, "TopicS", 0, 9)
        assert (resp.code, resp.ext_fields["nextBeginOffset"]) == (21, "1")      # OFFSET_OVERFLOW_BADLY
        resp, _ = await pull(cluster.client, cluster.broker_addr, "TopicS", 1, 0)
        assert (resp.code, resp.ext_fields["nextBeginOffset"]) == (19, "0")      # empty queue, offset 0
        resp, _ = await pull(cluster.client, cluster.broker_addr, "TopicS", 1, 3)
        assert resp.code == 21                                                   # empty queue, offset != 0
        resp, _ = await pull(cluster.client, cluster.broker_addr, "TopicS", 99, 0)
        assert resp.code == 1 and "queueId[99] is illegal" in resp.remark
        resp, _ = await pull(cluster.client, cluster.broker_addr, "NoSuchTopic", 0, 0)
        assert resp.code == 17
        resp, _ = await pull(cluster.client, cluster.broker_addr, "TopicS", 0, 0, sys_flag=0)
        assert resp.code == 24     # no subscription flag and no heartbeat


async def test_topic_validation_and_limits(cluster):
    with trio.fail_after(10):
        resp = await send(cluster.client, cluster.broker_addr, "bad/topic", b"x")
        assert resp.code == 1 and "contains illegal characters" in resp.remark
        resp = await send(cluster.client, cluster.broker_addr, "T" * 128, b"x")
        assert resp.code == 1 and "longer than topic max length 127" in resp.remark
        resp = await send(cluster.client, cluster.broker_addr, "SCHEDULE_TOPIC_XXXX", b"x")
        assert (resp.code, resp.remark) == (16, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.")
        resp = await send(cluster.client, cluster.broker_addr, "TopicL", b"x" * (4 * 1024 * 1024 + 1))
        assert resp.code == 13
        resp = await send(cluster.client, cluster.broker_addr, "TopicL", b"x", extra={"big": "v" * 33000})
        assert resp.code == 13
        resp = await send(cluster.client, cluster.broker_addr, "TopicL", b"x", queue_id=4)
        assert resp.code == 1 and "request queueId[4] is illegal" in resp.remark
        missing = make_request(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "TopicL"}, b"x")
        resp = await cluster.client.invoke(cluster.broker_addr, missing)
        assert (resp.code, resp.remark) == (1, "the custom field <e> is null")   # V2 names, as Java says


async def test_auto_create_and_update_topic_reach_the_namesrv(cluster):
    with trio.fail_after(10):
        resp = await send(cluster.client, cluster.broker_addr, "AutoTopic", b"x")
        assert resp.code == 0
        config = cluster.broker.topic_config_manager.select("AutoTopic")
        assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (4, 4, 6)
        resp = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "Made", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}))
        assert resp.code == 0
        for topic, queues in (("AutoTopic", 4), ("Made", 8)):
            for _ in range(100):
                route = await cluster.client.invoke(cluster.namesrv_addr, make_request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
                if route.code == 0:
                    break
                await trio.sleep(0.02)
            assert route.code == 0
            assert fastjson.loads(route.body)["queueDatas"][0]["writeQueueNums"] == queues
        topics_json = fastjson.loads((cluster.broker.topic_config_manager.path).read_text())
        assert topics_json["topicConfigTable"]["Made"]["readQueueNums"] == 8
        resp = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "TBW102", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "order": "false"}))
        assert (resp.code, resp.remark) == (1, "The topic[TBW102] is conflict with system topic.")


async def test_queue_offset_queries(cluster):
    with trio.fail_after(10):
        for _ in range(3):
            await send(cluster.client, cluster.broker_addr, "TopicQ", b"x")
            await trio.sleep(0.01)
        header = {"topic": "TopicQ", "queueId": "0"}
        inv = cluster.client.invoke
        assert (await inv(cluster.broker_addr, make_request(RequestCode.GET_MAX_OFFSET, dict(header)))).ext_fields == {"offset": "3"}
        assert (await inv(cluster.broker_addr, make_request(RequestCode.GET_MIN_OFFSET, dict(header)))).ext_fields == {"offset": "0"}
        earliest = await inv(cluster.broker_addr, make_request(RequestCode.GET_EARLIEST_MSG_STORETIME, dict(header)))
        first_time = int(earliest.ext_fields["timestamp"])
        assert first_time > 0
        found = await inv(cluster.broker_addr, make_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                                            {**header, "timestamp": str(first_time)}))
        assert found.ext_fields == {"offset": "0"}


async def test_topic_stats_runtime_info_and_broker_config(cluster):
    """The admin answers mqadmin reads: per-queue offsets under this broker's name, live figures."""
    from pyrmq.codec.admin_bodies import TopicStatsTable

    addr = cluster.broker_addr
    with trio.fail_after(10):
        for body in (b"a", b"b", b"c"):
            assert (await send(cluster.client, addr, "TopicStats", body, queue_id=1)).code == 0
        resp = await cluster.client.invoke(
            addr, make_request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "TopicStats"}), timeout=5)
        assert resp.code == 0, resp.remark
        table = TopicStatsTable.decode(resp.body).offset_table
        by_queue = {mq.queue_id: (mq.topic, mq.broker_name, o.min_offset, o.max_offset) for mq, o in table.items()}
        assert by_queue[1] == ("TopicStats", "broker-a", 0, 3)
        assert by_queue[0] == ("TopicStats", "broker-a", 0, 0)
        resp = await cluster.client.invoke(addr, make_request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=5)
        assert resp.code == 0, resp.remark
        table = fastjson.loads(resp.body)["table"]
        assert int(table["msgPutTotalTodayNow"]) >= 3 and int(table["bootTimestamp"]) > 0
        resp = await cluster.client.invoke(addr, make_request(RequestCode.GET_BROKER_CONFIG), timeout=5)
        assert resp.code == 0 and b"brokerName=broker-a\n" in resp.body


async def test_get_topic_config_as_apache_5(cluster):
    """GET_TOPIC_CONFIG (351), which the 5.x admin sends before examineTopicStats."""
    with trio.fail_after(10):
        assert (await send(cluster.client, cluster.broker_addr, "TopicCfg", b"x", queue_id=0)).code == 0
        answer = await cluster.client.invoke(cluster.broker_addr, make_request(351, {"topic": "TopicCfg", "lo": "true"}))
        assert answer.code == 0, answer.remark
        assert fastjson.loads(answer.body) == {
            "attributes": {}, "order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
            "topicName": "TopicCfg", "topicSysFlag": 0, "writeQueueNums": 4}
        missing = await cluster.client.invoke(cluster.broker_addr, make_request(351, {"topic": "NoSuchTopic"}))
        assert (missing.code, missing.remark) == (17, "No topic in this broker. topic: NoSuchTopic")

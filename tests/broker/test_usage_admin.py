"""GET_PRODUCER_CONNECTION_LIST (204), QUERY_TOPIC_CONSUME_BY_WHO (300), CLONE_GROUP_OFFSET (314) and
GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) against an in-process broker: Apache 4.9.7's bodies and
remarks (mqadmin producerConnection, the message track of queryMsgById, the dashboard's topic list)."""

from __future__ import annotations

import trio

from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from tests.broker.rmq import send
from tests.broker.test_consumers import heartbeat


def producer_heartbeat(group: str, client_id: str) -> bytes:
    return fastjson.dumps({"clientID": client_id, "consumerDataSet": [],
                           "producerDataSet": [{"groupName": group}]}).encode()


async def test_producer_connections_list_each_connection_of_the_group(cluster):
    with trio.fail_after(10):
        async with RemotingClient() as producer:
            resp = await producer.invoke(cluster.broker_addr, make_request(
                RequestCode.HEART_BEAT, body=producer_heartbeat("PG_a", "10.0.0.1@7")))
            assert resp.code == 0
            listed = await cluster.client.invoke(cluster.broker_addr, make_request(
                RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG_a"}))
            assert listed.code == 0
            [conn] = fastjson.loads(listed.body)["connectionSet"]
            assert conn["clientId"] == "10.0.0.1@7" and conn["clientAddr"].startswith("127.0.0.1:")
            assert set(conn) == {"clientAddr", "clientId", "language", "version"}
        missing = await cluster.client.invoke(cluster.broker_addr, make_request(
            RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG_none"}))
        assert (missing.code, missing.remark, missing.body) == (1, "the producer group[PG_none] not exist", None)


async def test_topic_consumed_by_online_groups_and_groups_with_offsets(cluster):
    inv = cluster.client.invoke
    with trio.fail_after(10):
        async with RemotingClient() as consumer:
            await consumer.invoke(cluster.broker_addr, make_request(
                RequestCode.HEART_BEAT, body=heartbeat("online_g", "10.0.0.2@1", "TopicW")))
            await inv(cluster.broker_addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "offset_g", "topic": "TopicW", "queueId": "0", "commitOffset": "3"}))
            await inv(cluster.broker_addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "other_g", "topic": "TopicOther", "queueId": "0", "commitOffset": "1"}))
            resp = await inv(cluster.broker_addr, make_request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                                               {"topic": "TopicW"}))
            assert resp.code == 0
            assert sorted(fastjson.loads(resp.body)["groupList"]) == ["offset_g", "online_g"]
        nobody = await inv(cluster.broker_addr, make_request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                                             {"topic": "TopicNone"}))
        assert (nobody.code, fastjson.loads(nobody.body)) == (0, {"groupList": []})


async def test_system_topic_list_from_broker(cluster):
    resp = await cluster.client.invoke(cluster.broker_addr, make_request(
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))
    body = fastjson.loads(resp.body)
    assert resp.code == 0 and "brokerAddr" not in body
    cluster_name = cluster.broker.config.broker_cluster_name
    broker_name = cluster.broker.config.broker_name
    assert sorted(body["topicList"]) == sorted([
        "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
        cluster_name, broker_name, f"{cluster_name}_REPLY_TOPIC"])


async def test_clone_group_offset_copies_the_source_groups_offsets(cluster):
    """mqadmin cloneGroupOffset -s src -d dest -t topic [-o offline]."""
    inv = cluster.client.invoke
    with trio.fail_after(10):
        for payload in (b"a", b"b", b"c"):
            await send(cluster.client, cluster.broker_addr, "TopicC", payload)
        for queue_id, offset in ((0, 2), (1, 1)):
            await inv(cluster.broker_addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "src_g", "topic": "TopicC", "queueId": str(queue_id), "commitOffset": str(offset)}))
        resp = await inv(cluster.broker_addr, make_request(RequestCode.CLONE_GROUP_OFFSET, {
            "srcGroup": "src_g", "destGroup": "dest_g", "topic": "TopicC", "offline": "true"}))
        assert resp.code == 0
        offsets = cluster.broker.consumer_offset_manager
        assert [offsets.query_offset("dest_g", "TopicC", q) for q in (0, 1, 2)] == [2, 1, -1]
        # an online source group that does not subscribe to the topic: nothing is cloned
        async with RemotingClient() as consumer:
            await consumer.invoke(cluster.broker_addr, make_request(
                RequestCode.HEART_BEAT, body=heartbeat("src_g", "10.0.0.3@1", "TopicElse")))
            resp = await inv(cluster.broker_addr, make_request(RequestCode.CLONE_GROUP_OFFSET, {
                "srcGroup": "src_g", "destGroup": "dest_g2", "topic": "TopicC", "offline": "false"}))
        assert resp.code == 0 and offsets.query_offset("dest_g2", "TopicC", 0) == -1
        # an unknown topic is skipped, still SUCCESS
        resp = await inv(cluster.broker_addr, make_request(RequestCode.CLONE_GROUP_OFFSET, {
            "srcGroup": "src_g", "destGroup": "dest_g3", "topic": "NoSuchTopic", "offline": "true"}))
        assert resp.code == 0 and offsets.query_offset("dest_g3", "NoSuchTopic", 0) == -1


async def test_consume_time_span_per_write_queue(cluster):
    inv = cluster.client.invoke
    with trio.fail_after(10):
        for payload in (b"a", b"b", b"c"):
            await send(cluster.client, cluster.broker_addr, "TopicSpan", payload)
        await inv(cluster.broker_addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": "span_g", "topic": "TopicSpan", "queueId": "0", "commitOffset": "1"}))
        resp = await inv(cluster.broker_addr, make_request(RequestCode.QUERY_CONSUME_TIME_SPAN,
                                                           {"topic": "TopicSpan", "group": "span_g"}))
        assert resp.code == 0
        spans = fastjson.loads(resp.body)["consumeTimeSpanSet"]
        store = cluster.broker.store
        config = cluster.broker.topic_config_manager.select("TopicSpan")
        assert [s["messageQueue"] for s in spans] == [
            {"brokerName": cluster.broker.config.broker_name, "queueId": q, "topic": "TopicSpan"}
            for q in range(config.write_queue_nums)]
        times = [store.get_message_store_timestamp("TopicSpan", 0, i) for i in range(3)]
        first = spans[0]
        assert (first["minTimeStamp"], first["maxTimeStamp"], first["consumeTimeStamp"]) == (times[0], times[2], times[0])
        assert first["delayTime"] >= 0 and sorted(first) == ["consumeTimeStamp", "delayTime", "maxTimeStamp",
                                                              "messageQueue", "minTimeStamp"]
        missing = await inv(cluster.broker_addr, make_request(RequestCode.QUERY_CONSUME_TIME_SPAN,
                                                              {"topic": "NoTopic", "group": "span_g"}))
        assert (missing.code, missing.remark) == (17, "topic[NoTopic] not exist")

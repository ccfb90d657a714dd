"""What mqadmin reads inside the broker (issue 13 point 1), against an in-process NameServer and
broker, with Apache 4.9.7's body shapes and remarks: QUERY_CONSUME_QUEUE (321, queryCq) and
GET_ALL_PRODUCER_INFO (328, producer)."""

from __future__ import annotations

import trio

from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message_props import tags_string_to_tags_code
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from tests.broker.rmq import send
from tests.broker.test_usage_admin import producer_heartbeat

QUERY_CONSUME_QUEUE = 321
GET_ALL_PRODUCER_INFO = 328


async def test_query_consume_queue_lists_the_units_from_an_index(cluster):
    inv = cluster.client.invoke
    with trio.fail_after(10):
        sizes = []
        for body in (b"a", b"bb", b"ccc"):
            resp = await send(cluster.client, cluster.broker_addr, "TopicCq", body, tags="TagA")
            assert resp.code == 0
        for unit in cluster.broker.store.find_consume_queue("TopicCq", 0).iter_units(0):
            sizes.append(unit)
        resp = await inv(cluster.broker_addr, make_request(QUERY_CONSUME_QUEUE, {
            "topic": "TopicCq", "queueId": "0", "index": "1", "count": "5"}))
        assert (resp.code, resp.remark) == (0, None)
        tag = tags_string_to_tags_code("TagA")
        assert fastjson.loads(resp.body) == {
            "maxQueueIndex": 3, "minQueueIndex": 0,
            "queueData": [{"eval": False, "physicOffset": off, "physicSize": size, "tagsCode": tag}
                          for off, size, _ in sizes[1:]]}
        one = await inv(cluster.broker_addr, make_request(QUERY_CONSUME_QUEUE, {
            "topic": "TopicCq", "queueId": "0", "index": "0", "count": "1", "consumerGroup": "offline_g"}))
        body = fastjson.loads(one.body)
        assert len(body["queueData"]) == 1
        assert body["filterData"] == "offline_g@TopicCq is not online!" and "subscriptionData" not in body
        past = await inv(cluster.broker_addr, make_request(QUERY_CONSUME_QUEUE, {
            "topic": "TopicCq", "queueId": "0", "index": "4000", "count": "1"}))
        assert (past.code, past.remark, past.body) == (0, "Index 4000 of 0@TopicCq is not exist!", None)
        none = await inv(cluster.broker_addr, make_request(QUERY_CONSUME_QUEUE, {
            "topic": "TopicNoCq", "queueId": "2", "index": "0", "count": "1"}))
        assert (none.code, none.remark, none.body) == (ResponseCode.SYSTEM_ERROR, "2@TopicNoCq is not exist!", None)


async def test_all_producer_info_names_every_connection_of_every_group(cluster):
    with trio.fail_after(10):
        async with RemotingClient() as producer:
            for group, client_id in (("PG_x", "10.0.0.1@1"), ("CLIENT_INNER_PRODUCER", "10.0.0.1@1")):
                resp = await producer.invoke(cluster.broker_addr, make_request(
                    RequestCode.HEART_BEAT, body=producer_heartbeat(group, client_id)))
                assert resp.code == 0
            resp = await cluster.client.invoke(cluster.broker_addr, make_request(GET_ALL_PRODUCER_INFO))
            assert resp.code == 0
            data = fastjson.loads(resp.body)["data"]
            assert sorted(data) == ["CLIENT_INNER_PRODUCER", "PG_x"]
            [info] = data["PG_x"]
            assert set(info) == {"clientId", "remoteIP", "language", "version", "lastUpdateTimestamp"}
            assert info["clientId"] == "10.0.0.1@1" and info["remoteIP"].startswith("/127.0.0.1:")



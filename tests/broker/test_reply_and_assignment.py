"""Request/reply (SEND_REPLY_MESSAGE_V2 -> PUSH_REPLY_MESSAGE_TO_CLIENT) and the 5.x server-side
rebalance (QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE, POP codes) against an in-process broker."""

from __future__ import annotations

import json

import pytest
import trio

from pyrmq.broker.assignment_processor import allocate_averagely, allocate_by_circle
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import string_to_properties
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.dispatch import ProcessorTable
from tests.broker.rmq import pull, send

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def _heartbeat(client_id: str, producer_group: str = "", consumer_group: str = "", topic: str = "") -> bytes:
    body: dict = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": []}
    if producer_group:
        body["producerDataSet"].append({"groupName": producer_group})
    if consumer_group:
        body["consumerDataSet"].append({
            "groupName": consumer_group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [],
                                     "subVersion": 1, "expressionType": "TAG", "classFilterMode": False}]})
    return json.dumps(body).encode()


async def test_reply_is_pushed_to_the_requester_and_stored(cluster):
    pushed = []
    table = ProcessorTable("client")

    def on_push(channel, request):
        pushed.append(request)
        return request.response(0)

    table.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, on_push)
    with trio.fail_after(10):
        async with RemotingClient(table) as requester:
            hb = await requester.invoke(cluster.broker_addr, make_request(
                RequestCode.HEART_BEAT, body=_heartbeat("10.0.0.9@req", producer_group="req_pg")))
            assert hb.code == 0
            reply = await send(cluster.client, cluster.broker_addr, REPLY_TOPIC, b"the answer",
                               code=RequestCode.SEND_REPLY_MESSAGE_V2,
                               extra={"MSG_TYPE": "reply", "REPLY_TO_CLIENT": "10.0.0.9@req", "CORRELATION_ID": "c-1"})
            assert reply.code == 0, reply.remark
            assert reply.ext_fields["queueOffset"] == "0" and reply.ext_fields["msgId"] != "0"
            [push] = pushed
            assert push.body == b"the answer"
            assert push.ext_fields["topic"] == REPLY_TOPIC and push.ext_fields["producerGroup"] == "test_pg"
            props = string_to_properties(push.ext_fields["properties"])
            assert props["CORRELATION_ID"] == "c-1" and int(props["PUSH_REPLY_TIME"]) > 0
            assert {"bornHost", "storeHost", "storeTimestamp"} <= set(push.ext_fields)
            # stored as well, with the replier's properties as sent (no PUSH_REPLY_TIME)
            _, [stored] = await pull(cluster.client, cluster.broker_addr, REPLY_TOPIC, 0, 0)
            assert stored.body == b"the answer" and "PUSH_REPLY_TIME" not in stored.properties


async def test_reply_without_a_requester_is_a_system_error_with_apaches_remarks(cluster):
    with trio.fail_after(10):
        gone = await send(cluster.client, cluster.broker_addr, REPLY_TOPIC, b"x", code=RequestCode.SEND_REPLY_MESSAGE_V2,
                          extra={"REPLY_TO_CLIENT": "10.0.0.1@nobody"})
        assert (gone.code, gone.remark) == (1, "push reply message fail, channel of <10.0.0.1@nobody> not found.")
        anonymous = await send(cluster.client, cluster.broker_addr, REPLY_TOPIC, b"y",
                               code=RequestCode.SEND_REPLY_MESSAGE_V2)
        assert (anonymous.code, anonymous.remark) == (1, "reply message properties[REPLY_TO_CLIENT] is null")
        # both are stored all the same (Apache stores before looking at the push's outcome)
        _, stored = await pull(cluster.client, cluster.broker_addr, REPLY_TOPIC, 0, 0)
        assert [m.body for m in stored] == [b"x", b"y"]


def test_allocation_strategies_match_javas():
    queues = [("T", "b", i) for i in range(5)]
    cids = ["a", "b", "c"]
    assert [allocate_averagely(c, queues, cids) for c in cids] == [queues[0:2], queues[2:4], queues[4:5]]
    assert [allocate_by_circle(c, queues, cids) for c in cids] == [queues[0::3], queues[1::3], queues[2::3]]
    assert allocate_averagely("d", queues, cids) == []
    many = [f"c{i}" for i in range(7)]
    assert [len(allocate_averagely(c, queues, many)) for c in many] == [1, 1, 1, 1, 1, 0, 0]


async def test_query_assignment_splits_the_group_and_pop_is_refused(cluster):
    with trio.fail_after(10):
        assert (await send(cluster.client, cluster.broker_addr, "TopicQA", b"x")).code == 0
        clients = ["10.0.0.1@a", "10.0.0.2@b"]
        async with RemotingClient() as a, RemotingClient() as b:
            for conn, cid in zip((a, b), clients, strict=True):
                hb = await conn.invoke(cluster.broker_addr, make_request(
                    RequestCode.HEART_BEAT, body=_heartbeat(cid, consumer_group="qa_g", topic="TopicQA")))
                assert hb.code == 0
            seen = []
            for cid in clients:
                resp = await a.invoke(cluster.broker_addr, make_request(400, body=json.dumps({
                    "topic": "TopicQA", "consumerGroup": "qa_g", "clientId": cid, "strategyName": "AVG",
                    "messageModel": "CLUSTERING"}).encode()))
                assert resp.code == 0
                assignments = json.loads(resp.body)["messageQueueAssignments"]
                assert {x["mode"] for x in assignments} == {"PULL"}
                seen.append(sorted(x["messageQueue"]["queueId"] for x in assignments))
            assert seen == [[0, 1], [2, 3]]   # the topic was auto-created with the sender's 4 queues
            unknown = await a.invoke(cluster.broker_addr, make_request(400, body=json.dumps({
                "topic": "NoSuchTopic", "consumerGroup": "qa_g", "clientId": clients[0], "strategyName": "AVG",
                "messageModel": "CLUSTERING"}).encode()))
            assert unknown.code == 0 and "messageQueueAssignments" not in json.loads(unknown.body)
            mode = await a.invoke(cluster.broker_addr, make_request(401, body=json.dumps({
                "topic": "TopicQA", "consumerGroup": "qa_g", "mode": "POP", "popShareQueueNum": 0}).encode()))
            assert (mode.code, mode.remark) == (3, " request type 401 not supported")   # as Apache 4.9
            mode = await a.invoke(cluster.broker_addr, make_request(401, body=json.dumps({
                "topic": "TopicQA", "consumerGroup": "qa_g", "mode": "PULL"}).encode()))
            assert mode.code == 0
            pop = await a.invoke(cluster.broker_addr, make_request(200050, {"consumerGroup": "qa_g", "topic": "TopicQA"}))
            assert (pop.code, pop.remark) == (3, " request type 200050 not supported")


@pytest.mark.parametrize("broker_overrides", [{"enableShutdownGracefully": "true", "shutdownWaitTimeSeconds": "1"}])
async def test_graceful_stop_answers_go_away_to_new_clients_only(cluster):
    """Apache 5.3's gate: GO_AWAY (1500) only to requests whose version is above V5_3_1 (475)."""
    with trio.fail_after(10):
        assert (await send(cluster.client, cluster.broker_addr, "TopicGA", b"before")).code == 0
        async with RemotingClient() as client:
            await client.channel(cluster.broker_addr)   # connected before the stop begins
            cluster.broker.stop()
            while not cluster.broker._going_away:
                await trio.sleep(0.005)
            request = make_request(RequestCode.GET_MAX_OFFSET, {"topic": "TopicGA", "queueId": "0"})
            request.version = 479   # V5_3_3
            answer = await client.invoke(cluster.broker_addr, request)
            assert (answer.code, answer.remark) == (1500, "please go away")
            request = make_request(RequestCode.GET_MAX_OFFSET, {"topic": "TopicGA", "queueId": "0"})
            request.version = 409   # V4_9_8: served as before
            answer = await client.invoke(cluster.broker_addr, request)
            assert (answer.code, answer.ext_fields["offset"]) == (0, "1")


async def test_static_topic_ext_fields_are_tolerated(cluster):
    """5.x clients may add RpcRequestHeader / TopicQueueRequestHeader fields (bname, lo, oway, nsd,
    ns) to sends, pulls and offset requests; pyrmq serves those requests as if they were absent."""
    rpc = {"bname": "broker-a", "lo": "false", "oway": "false", "nsd": "false", "ns": ""}
    with trio.fail_after(10):
        sent = await send(cluster.client, cluster.broker_addr, "TopicST", b"x", extra=None)
        assert sent.code == 0
        request = make_request(RequestCode.SEND_MESSAGE_V2, {**rpc, "a": "pg", "b": "TopicST", "c": "TBW102", "d": "4",
                                                             "e": "0", "f": "0", "g": "1", "h": "0", "i": ""}, b"y")
        assert (await cluster.client.invoke(cluster.broker_addr, request)).code == 0
        pulled = make_request(RequestCode.PULL_MESSAGE, {
            **rpc, "consumerGroup": "st_g", "topic": "TopicST", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
            "expressionType": "TAG"})
        answer = await cluster.client.invoke(cluster.broker_addr, pulled)
        assert answer.code == 0 and answer.ext_fields["nextBeginOffset"] == "2"
        update = make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            **rpc, "consumerGroup": "st_g", "topic": "TopicST", "queueId": "0", "commitOffset": "2"})
        assert (await cluster.client.invoke(cluster.broker_addr, update)).code == 0
        query = make_request(RequestCode.QUERY_CONSUMER_OFFSET, {
            **rpc, "consumerGroup": "st_g", "topic": "TopicST", "queueId": "0"})
        answer = await cluster.client.invoke(cluster.broker_addr, query)
        assert (answer.code, answer.ext_fields["offset"]) == (0, "2")
        for code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET):
            answer = await cluster.client.invoke(cluster.broker_addr, make_request(
                code, {**rpc, "topic": "TopicST", "queueId": "0"}))
            assert answer.code == 0

"""Request/reply (SEND_REPLY_MESSAGE_V2 -> PUSH_REPLY_MESSAGE_TO_CLIENT) and the 5.x server-side
rebalance (QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE, POP codes) against an in-process broker."""

from __future__ import annotations

import json

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
            assert mode.code == 3 and "only PULL" in mode.remark
            mode = await a.invoke(cluster.broker_addr, make_request(401, body=json.dumps({
                "topic": "TopicQA", "consumerGroup": "qa_g", "mode": "PULL"}).encode()))
            assert mode.code == 0
            pop = await a.invoke(cluster.broker_addr, make_request(200050, {"consumerGroup": "qa_g", "topic": "TopicQA"}))
            assert pop.code == 3 and "POP consumption is not supported" in pop.remark

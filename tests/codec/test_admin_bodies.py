"""Typed admin bodies: the exact bytes the servers answered with before they were typed (and
Apache writes), round trips, and the bodies of captured Apache frames."""

from __future__ import annotations

import pytest

from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import (
    Connection,
    ConsumeStats,
    ConsumerConnection,
    ConsumerIdList,
    KVTable,
    LockBatchResult,
    MessageQueue,
    OffsetWrapper,
    ResetOffsetBody,
    Subscription,
    TopicOffset,
    TopicStatsTable,
)
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.namesrv_bodies import BrokerData, ClusterInfo, TopicList
from tests.codec.test_golden_frames import decode, load

MQ0 = MessageQueue("TopicTest", "broker-a", 0)
MQ1 = MessageQueue("TopicTest", "broker-a", 1)
SUB = Subscription("TopicTest", "TagA || TagB", ("TagA", "TagB"), (2598919, 2598920), 1700000000000)

CASES = [
    (TopicStatsTable({MQ0: TopicOffset(0, 250, 1700000000123), MQ1: TopicOffset(3, 249, 0)}),
     b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
     b'{"lastUpdateTimestamp":1700000000123,"maxOffset":250,"minOffset":0},'
     b'{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:'
     b'{"lastUpdateTimestamp":0,"maxOffset":249,"minOffset":3}}}'),
    (ConsumeStats({MQ0: OffsetWrapper(250, 200, 1700000000123)}),
     b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
     b'{"brokerOffset":250,"consumerOffset":200,"lastTimestamp":1700000000123}}}'),
    (ResetOffsetBody({MQ0: 5, MQ1: 7}),
     b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:5,'
     b'{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:7}}'),
    (ConsumerConnection((Connection("10.0.0.7@1234", "10.0.0.7:50000", "JAVA", 409),),
                        {"TopicTest": SUB}, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET"),
     b'{"connectionSet":[{"clientAddr":"10.0.0.7:50000","clientId":"10.0.0.7@1234","language":"JAVA",'
     b'"version":409}],"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
     b'"messageModel":"CLUSTERING","subscriptionTable":{"TopicTest":{"classFilterMode":false,'
     b'"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB",'
     b'"subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"TopicTest"}}}'),
    (KVTable({"brokerVersion": "409", "bootTimestamp": "1700000000000"}),
     b'{"table":{"bootTimestamp":"1700000000000","brokerVersion":"409"}}'),
    (ConsumerIdList(("c1", "c2")), b'{"consumerIdList":["c1","c2"]}'),
    (LockBatchResult((MQ1,)), b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}]}'),
    (ClusterInfo({"broker-a": BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})},
                 {"DefaultCluster": ("broker-a",)}),
     b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
     b'"brokerName":"broker-a","cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'),
    (TopicList(("TopicTest", "%RETRY%g")), b'{"topicList":["TopicTest","%RETRY%g"]}'),
    (TopicList(("DefaultCluster", "broker-a"), "10.0.0.1:10911"),
     b'{"brokerAddr":"10.0.0.1:10911","topicList":["DefaultCluster","broker-a"]}'),
]


@pytest.mark.parametrize("body, data", CASES, ids=lambda c: type(c).__name__ if not isinstance(c, bytes) else "")
def test_exact_bytes_and_round_trip(body, data):
    assert body.encode() == data
    assert type(body).decode(data) == body


def test_standard_json_keys_decode_too():
    """Writers that quote map keys (standard JSON) give the same models."""
    assert ClusterInfo.decode(b'{"brokerAddrTable":{"b":{"brokerAddrs":{"0":"a:1"},"brokerName":"b",'
                              b'"cluster":"C"}},"clusterAddrTable":{"C":["b"]}}').broker_addr_table["b"] == \
        BrokerData("C", "b", {0: "a:1"})
    key = fastjson.dumps(MQ0.to_json())
    assert ResetOffsetBody.decode(fastjson.dumps({"offsetTable": {key: 9}}).encode()) == ResetOffsetBody({MQ0: 9})


@pytest.mark.parametrize("data", [b"[]", b'{"offsetTable":{{"queueId":0}:{}}}', b'{"offsetTable":{"x":1}}', b"{"])
def test_wrong_shapes_are_protocol_errors(data):
    with pytest.raises(ProtocolError):
        TopicStatsTable.decode(data)


@pytest.mark.parametrize("tps", ['"nan"', '"-Infinity"', '"1_0"', '"١"', "true", "[]"])
def test_numeric_members_are_ascii_and_finite(tps):
    """float()/int() would take these, and the body could no longer be written back as read."""
    with pytest.raises(ProtocolError):
        ConsumeStats.decode(f'{{"consumeTps":{tps}}}'.encode())
    with pytest.raises(ProtocolError):
        ResetOffsetBody.decode(f'{{"offsetTable":{{{{"brokerName":"b","queueId":{tps},"topic":"T"}}:1}}}}'.encode())
    assert ConsumeStats.decode(b'{"consumeTps":"2.5"}').consume_tps == 2.5   # fastjson converts digits in a string


@pytest.mark.parametrize("name", ["broker_get_consumer_list_response_json.bin",
                                  "broker_get_consumer_list_response_rocketmq.bin"])
def test_apache_consumer_list_body(name):
    (frame,) = decode(load(name))
    body = ConsumerIdList.decode(frame.body)
    assert body.consumer_id_list and all("@" in c for c in body.consumer_id_list)
    assert body.encode() == bytes(frame.body)


@pytest.mark.parametrize("name", ["client_heartbeat_json.bin", "client_heartbeat_rocketmq.bin"])
def test_apache_client_subscriptions(name):
    (frame,) = decode(load(name))
    (consumer,) = fastjson.loads(frame.body)["consumerDataSet"]
    subs = [Subscription.from_json(s) for s in consumer["subscriptionDataSet"]]
    assert subs and all(s.topic for s in subs)
    assert [Subscription.from_json(s.to_json()) for s in subs] == subs

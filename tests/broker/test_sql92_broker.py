"""SQL92 filtering through an in-process broker: CHECK_CLIENT_CONFIG, pulls with and without the
SUBSCRIPTION flag (23, 27, 28, enablePropertyFilter=false), filterSupportRetry, long polling
woken only by a matching message, and consumerFilter.json written in Apache's shape."""

import json

import pytest
import trio

from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import decode_messages
from pyrmq.codec.remoting import make_request
from tests.broker.rmq import pull, pull_request, send

TOPIC = "TopicSql"
GROUP = "sql_cg"


@pytest.fixture
def broker_overrides():
    return {"enablePropertyFilter": "true", "filterSupportRetry": "true"}


def heartbeat(expression: str, sub_version: int, topic: str = TOPIC, expression_type: str = "SQL92") -> bytes:
    return json.dumps({"clientID": "127.0.0.1@sql", "producerDataSet": [], "consumerDataSet": [{
        "groupName": GROUP, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": topic, "subString": expression, "tagsSet": [], "codeSet": [],
                                 "subVersion": sub_version, "expressionType": expression_type,
                                 "classFilterMode": False}]}]}).encode()


def sql_pull(offset: int = 0, *, expression: str = "a = 3", flag: int = 0x4, sub_version: int = 0, **kwargs):
    request = pull_request(TOPIC, 0, offset, group=GROUP, sys_flag=flag, subscription=expression, **kwargs)
    request.ext_fields.update({"expressionType": "SQL92", "subVersion": str(sub_version)})
    return request


async def fill(cluster):
    for i in range(10):
        extra = {"a": str(i)} if i != 9 else {}       # message 9 has no property a (NULL)
        if i == 4:
            extra["b"] = "text"
        await send(cluster.client, cluster.broker_addr, TOPIC, f"m{i}".encode(), tags=f"T{i % 2}", extra=extra)


async def invoke(cluster, request):
    response = await cluster.client.invoke(cluster.broker_addr, request, timeout=10)
    bodies = [m.body.decode() for m in decode_messages(response.body)] if response.code == 0 and response.body else []
    return response, bodies


async def test_pull_with_subscription_flag(cluster):
    with trio.fail_after(20):
        await fill(cluster)
        cases = [("a = 3", ["m3"]), ("a > 6", ["m7", "m8"]), ("a >= 2 AND a < 4 OR TAGS = 'T1' AND a = 9", ["m2", "m3"]),
                 ("a IS NULL", ["m9"]), ("a BETWEEN 7 AND 100", ["m7", "m8"]), ("a IN ('1', '5')", ["m1", "m5"]),
                 ("b = 'text'", ["m4"]), ("a > 5.5", ["m6", "m7", "m8"]), ("NOT (a = 1)", [f"m{i}" for i in range(9) if i != 1]),
                 ("b > 1", [])]
        for expression, expected in cases:
            response, bodies = await invoke(cluster, sql_pull(expression=expression))
            assert bodies == expected, expression
            if not expected:
                assert response.code == 20 and response.ext_fields["nextBeginOffset"] == "10"
        response, _ = await invoke(cluster, sql_pull(expression="a = "))
        assert response.code == 23 and response.remark.startswith("parse the consumer's subscription failed")
        assert "<EOF>" in response.remark
        response, _ = await invoke(cluster, sql_pull(expression=""))
        assert response.code == 23


async def test_heartbeat_registered_filter_pull_and_versions(cluster):
    with trio.fail_after(20):
        await fill(cluster)
        client, addr = cluster.client, cluster.broker_addr
        response, _ = await invoke(cluster, sql_pull(flag=0))
        assert response.code == 24   # no heartbeat yet: subscription does not exist
        assert (await client.invoke(addr, make_request(RequestCode.HEART_BEAT, body=heartbeat("a = 3", 5)))).code == 0
        response, bodies = await invoke(cluster, sql_pull(flag=0, sub_version=5))
        assert (response.code, bodies) == (0, ["m3"])
        response, _ = await invoke(cluster, sql_pull(flag=0, sub_version=6))
        assert response.code == 25   # the consumer's subscription is newer than the broker's
        filters = cluster.broker.consumer_filter_manager
        data = filters.get(TOPIC, GROUP)
        assert (data.client_version, data.expression.text, data.dead) == (5, "a = 3", False)
        assert [f.group for f in filters.live_filters(TOPIC)] == [GROUP]
        assert data.bloom_filter_data.bit_num == 112 and len(data.bloom_filter_data.bit_pos) == 3
        # a newer version with a new expression replaces the filter
        await client.invoke(addr, make_request(RequestCode.HEART_BEAT, body=heartbeat("a > 7", 7)))
        response, bodies = await invoke(cluster, sql_pull(flag=0, sub_version=7))
        assert bodies == ["m8"]
        # a newer subscription whose filter data lags: 28
        data = filters.get(TOPIC, GROUP)
        data.client_version = 6
        response, _ = await invoke(cluster, sql_pull(flag=0, sub_version=7))
        assert (response.code, response.remark) == (28, "the consumer's consumer filter data not latest")
        # an expression that does not compile is not registered: 27
        await client.invoke(addr, make_request(RequestCode.HEART_BEAT, body=heartbeat("a >", 9)))
        assert filters.get(TOPIC, GROUP) is None
        response, _ = await invoke(cluster, sql_pull(flag=0, sub_version=9))
        assert response.code == 27 and "filter data is not exist" in response.remark
        # the group moves to a tag subscription of another topic: nothing left alive on TOPIC
        await client.invoke(addr, make_request(RequestCode.HEART_BEAT, body=heartbeat("a = 1", 10)))
        await client.invoke(addr, make_request(RequestCode.HEART_BEAT, body=heartbeat("*", 11, "Other", "TAG")))
        assert filters.get(TOPIC, GROUP).dead and filters.live_filters(TOPIC) == []


async def test_check_client_config(cluster):
    def check(expression_type: str, expression: str):
        body = json.dumps({"clientId": "c1", "group": GROUP, "subscriptionData": {
            "topic": TOPIC, "subString": expression, "expressionType": expression_type, "subVersion": 1,
            "tagsSet": [], "codeSet": [], "classFilterMode": False}}).encode()
        return cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.CHECK_CLIENT_CONFIG, body=body))

    with trio.fail_after(10):
        await fill(cluster)
        assert (await check("SQL92", "a = 1")).code == 0
        assert (await check("TAG", "TagA || TagB")).code == 0
        response = await check("SQL92", "a = 'x")
        assert response.code == 23 and "Lexical error" in response.remark
        # a runtime-changeable key (UPDATE_BROKER_CONFIG), read at every check and pull
        update = make_request(RequestCode.UPDATE_BROKER_CONFIG, {}, b"enablePropertyFilter=false\n")
        assert (await cluster.client.invoke(cluster.broker_addr, update)).code == 0
        response = await check("SQL92", "a = 1")
        assert (response.code, response.remark) == (1, "The broker does not support consumer to filter message by SQL92")
        response, _ = await invoke(cluster, sql_pull())
        assert (response.code, response.remark) == (1, "The broker does not support consumer to filter message by SQL92")


async def test_long_poll_is_woken_only_by_a_matching_message(cluster):
    with trio.fail_after(20):
        await fill(cluster)
        held = cluster.client.invoke(cluster.broker_addr, sql_pull(10, expression="a = 42", flag=0x4 | 0x2,
                                                                     suspend_ms=15000), timeout=20)
        result = {}

        async def wait_pull():
            result["response"] = await held

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_pull)
            await trio.sleep(0.3)
            await send(cluster.client, cluster.broker_addr, TOPIC, b"other", extra={"a": "41"})
            await trio.sleep(0.5)
            assert "response" not in result
            started = trio.current_time()
            await send(cluster.client, cluster.broker_addr, TOPIC, b"wanted", extra={"a": "42"})
        assert trio.current_time() - started < 2
        assert [m.body for m in decode_messages(result["response"].body)] == [b"wanted"]


async def test_retry_topic_uses_the_original_topics_filter(cluster):
    with trio.fail_after(20):
        client, addr = cluster.client, cluster.broker_addr
        await client.invoke(addr, make_request(RequestCode.HEART_BEAT, body=heartbeat("a = 3", 1)))
        retry = f"%RETRY%{GROUP}"
        for value in ("3", "4"):
            await send(client, addr, retry, f"r{value}".encode(), extra={"a": value, "RETRY_TOPIC": TOPIC})
        await send(client, addr, retry, b"other-topic", extra={"a": "4", "RETRY_TOPIC": "Elsewhere"})
        _, messages = await pull(client, addr, retry, 0, 0, group=GROUP)
        assert [m.body for m in messages] == [b"r3", b"other-topic"]
        cluster.broker.config.filter_support_retry = False
        _, messages = await pull(client, addr, retry, 0, 0, group=GROUP)
        assert [m.body for m in messages] == [b"r3", b"r4", b"other-topic"]


async def test_consumer_filter_json_has_apaches_shape(cluster):
    with trio.fail_after(20):
        await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.HEART_BEAT, body=heartbeat("a > 5", 17)))
        filters = cluster.broker.consumer_filter_manager
        filters.persist()
        data = fastjson.loads(filters.path.read_text())
        entry = data["filterDataByTopic"][TOPIC]["groupFilterData"][GROUP]
        assert data["filterDataByTopic"][TOPIC]["topic"] == TOPIC
        assert list(entry) == ["bloomFilterData", "bornTime", "clientVersion", "consumerGroup", "dead", "deadTime",
                               "expression", "expressionType", "topic"]
        assert entry["bloomFilterData"]["bitNum"] == 112
        assert (entry["clientVersion"], entry["expression"], entry["expressionType"], entry["dead"]) == (
            17, "a > 5", "SQL92", False)

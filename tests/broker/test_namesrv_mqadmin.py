"""What mqadmin reads from and changes in the NameServer (issue 13 point 1), with Apache 4.9.7's
bodies and remarks: GET_NAMESRV_CONFIG (319) and UPDATE_NAMESRV_CONFIG (318, getNamesrvConfig /
updateNamesrvConfig), and the topic order of GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206, topicList),
which is a Java HashMap's."""

from __future__ import annotations

import trio

from pyrmq.broker.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.java_order import hash_map_order
from pyrmq.codec.java_properties import parse_properties
from pyrmq.codec.remoting import make_request

UPDATE_NAMESRV_CONFIG = 318
GET_NAMESRV_CONFIG = 319


async def test_namesrv_config_reads_and_changes_by_allow_list(cluster):
    inv = cluster.client.invoke
    with trio.fail_after(10):
        before = parse_properties((await inv(cluster.namesrv_addr, make_request(GET_NAMESRV_CONFIG))).body.decode())
        assert before["orderMessageEnable"] == "false"
        for key in ("productEnvName", "clusterTest", "configStorePath", "rocketmqHome", "serverWorkerThreads"):
            assert key in before, key
        ok = await inv(cluster.namesrv_addr, make_request(UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n"))
        assert (ok.code, ok.remark) == (0, None)
        after = parse_properties((await inv(cluster.namesrv_addr, make_request(GET_NAMESRV_CONFIG))).body.decode())
        assert after["orderMessageEnable"] == "true"
        path = await inv(cluster.namesrv_addr, make_request(UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/x\n"))
        assert (path.code, path.remark) == (ResponseCode.NO_PERMISSION, "Can not update config path")
        other = await inv(cluster.namesrv_addr, make_request(UPDATE_NAMESRV_CONFIG,
                                                            body=b"orderMessageEnable=false\nlistenPort=1\n"))
        assert other.code == ResponseCode.NO_PERMISSION and "listenPort" in other.remark
        bad = await inv(cluster.namesrv_addr, make_request(UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=yes\n"))
        assert bad.code == ResponseCode.SYSTEM_ERROR and "orderMessageEnable" in bad.remark
        still = parse_properties((await inv(cluster.namesrv_addr, make_request(GET_NAMESRV_CONFIG))).body.decode())
        assert still["orderMessageEnable"] == "true"   # a refused request changes nothing


async def test_topic_list_in_java_hash_map_order(cluster):
    inv = cluster.client.invoke
    with trio.fail_after(10):
        resp = await inv(cluster.namesrv_addr, make_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        topics = fastjson.loads(resp.body)["topicList"]
        assert topics == hash_map_order(topics, 1024)


def test_hash_map_order_is_bucket_then_insertion():
    # "Aa" and "BB" have the same Java hashCode: same bucket, insertion order kept
    assert hash_map_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert hash_map_order(["Aa", "BB"]) == ["Aa", "BB"]
    # 16 buckets: "a" (97) in 1, "b" in 2, "c" in 3; "q" (113) shares bucket 1 with "a"
    assert hash_map_order(["c", "b", "a"]) == ["a", "b", "c"]
    assert hash_map_order(["q", "c", "a"]) == ["q", "a", "c"]
    # past 12 keys the table has 32 buckets
    keys = [f"k{i}" for i in range(13)]
    assert hash_map_order(keys) == hash_map_order(keys, 32)


async def test_the_registration_body_is_encoded_again_only_after_a_change(cluster):
    """REGISTER_BROKER's body (every 30 s) is reused while the topic table, its data version, the
    broker's permission and its FilterServers stay the same, and always equals a fresh encoding."""
    broker = cluster.broker
    registration = broker.registration
    first = registration._body()
    encoded = registration.bodies_encoded
    assert registration._body() is first and registration.bodies_encoded == encoded
    broker.topic_config_manager.update(TopicConfig("T_registered_later", 4, 4, PERM_READ | PERM_WRITE))
    second = registration._body()
    assert registration.bodies_encoded == encoded + 1
    assert b'"T_registered_later"' in second and b'"T_registered_later"' not in first
    broker.config.broker_permission = PERM_READ
    third = registration._body()
    assert registration.bodies_encoded == encoded + 2 and third != second
    assert third == registration._encode_body()
    assert all(c["perm"] == PERM_READ for c in fastjson.loads(third.decode())["topicConfigSerializeWrapper"]
               ["topicConfigTable"].values())

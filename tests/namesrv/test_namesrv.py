"""NameServer: registration, routes in both JSON forms, liveness (expiry and connection close),
KV config, cluster info -- through real sockets and the routing tables directly."""

from __future__ import annotations

import zlib

import trio

from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.register_body import topic_rows
from pyrmq.codec.remoting import make_request
from pyrmq.namesrv.route_info import BROKER_CHANNEL_EXPIRED_MS, RouteInfoManager
from pyrmq.remoting.client import RemotingClient

TOPIC_TABLE = {"TopicTest": {"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
                             "topicName": "TopicTest", "topicSysFlag": 0, "writeQueueNums": 4}}


def register_request(broker_id: int = 0, addr: str = "192.168.0.10:10911", version: dict | None = None):
    body = fastjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": version or {"counter": 3, "timestamp": 1700000000000}, "topicConfigTable": TOPIC_TABLE}}).encode()
    return make_request(RequestCode.REGISTER_BROKER, {
        "brokerName": "broker-a", "brokerAddr": addr, "clusterName": "DefaultCluster",
        "haServerAddr": addr.replace("10911", "10912"), "brokerId": str(broker_id), "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, body)


async def test_route_legacy_and_standard_forms(namesrv):
    with trio.fail_after(5):
        async with RemotingClient() as client:
            assert (await client.invoke(namesrv.addr, register_request())).code == 0
            assert (await client.invoke(namesrv.addr, register_request(1, "192.168.0.11:10911"))).code == 0
            request = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
            request.version = 317   # Go v2 client
            legacy = await client.invoke(namesrv.addr, request)
            assert legacy.body == (
                b'{"brokerDatas":[{"brokerAddrs":{0:"192.168.0.10:10911",1:"192.168.0.11:10911"},"brokerName":"broker-a",'
                b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
                b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
            request = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})  # version 409
            standard = await client.invoke(namesrv.addr, request)
            assert b'"brokerAddrs":{"0":"192.168.0.10:10911","1":"192.168.0.11:10911"}' in standard.body
            missing = await client.invoke(namesrv.addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}))
            assert missing.code == 17
            assert missing.remark.startswith("No topic route info in name server for the topic: Nope")


async def test_slave_learns_master_and_broker_dropped_when_connection_closes(namesrv):
    with trio.fail_after(5):
        async with RemotingClient() as master_conn:
            await master_conn.invoke(namesrv.addr, register_request())
            async with RemotingClient() as slave_conn:
                resp = await slave_conn.invoke(namesrv.addr, register_request(1, "192.168.0.11:10911"))
                assert resp.ext_fields == {"masterAddr": "192.168.0.10:10911", "haServerAddr": "192.168.0.10:10912"}
        # both connections closed: the brokers are gone and so is the topic's route
        while namesrv.route_info.broker_live_table:
            await trio.sleep(0.01)
        assert namesrv.route_info.topic_route_body("TopicTest", True) is None
        assert namesrv.route_info.cluster_info().to_json() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


async def test_crc_mismatch_refused(namesrv):
    with trio.fail_after(5):
        async with RemotingClient() as client:
            request = register_request()
            request.ext_fields["bodyCrc32"] = "12345"
            resp = await client.invoke(namesrv.addr, request)
            assert (resp.code, resp.remark) == (1, "crc32 not match")


async def test_cluster_info_topic_list_and_kv(namesrv, tmp_path):
    with trio.fail_after(5):
        async with RemotingClient() as client:
            await client.invoke(namesrv.addr, register_request())
            info = await client.invoke(namesrv.addr, make_request(RequestCode.GET_BROKER_CLUSTER_INFO))
            assert info.body == (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.0.10:10911"},'
                                 b'"brokerName":"broker-a","cluster":"DefaultCluster"}},'
                                 b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')
            topics = await client.invoke(namesrv.addr, make_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
            assert topics.body == b'{"topicList":["TopicTest"]}'
            kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest"}
            missing = await client.invoke(namesrv.addr, make_request(RequestCode.GET_KV_CONFIG, dict(kv)))
            assert (missing.code, missing.remark) == (22, "No config item, Namespace: ORDER_TOPIC_CONFIG Key: TopicTest")
            put = await client.invoke(namesrv.addr, make_request(RequestCode.PUT_KV_CONFIG, {**kv, "value": "broker-a:4"}))
            assert put.code == 0
            got = await client.invoke(namesrv.addr, make_request(RequestCode.GET_KV_CONFIG, dict(kv)))
            assert got.ext_fields == {"value": "broker-a:4"}
            assert fastjson.loads((tmp_path / "kvConfig.json").read_text()) == {
                "configTable": {"ORDER_TOPIC_CONFIG": {"TopicTest": "broker-a:4"}}}
            bad = await client.invoke(namesrv.addr, make_request(RequestCode.GET_KV_CONFIG, {"namespace": "x"}))
            assert (bad.code, bad.remark) == (1, "the custom field <key> is null")


def test_silent_broker_expires_after_120s():
    routes = RouteInfoManager()
    routes.register_broker("C", "10.0.0.1:10911", "b", 0, "10.0.0.1:10912", {"counter": 1},
                           topic_rows({"T": TOPIC_TABLE["TopicTest"] | {"topicName": "T"}}), [], None,
                           now_ms=1000)
    assert routes.scan_not_active_brokers(now_ms=1000 + BROKER_CHANNEL_EXPIRED_MS) == []
    assert routes.broker_live_table
    routes.scan_not_active_brokers(now_ms=1001 + BROKER_CHANNEL_EXPIRED_MS)
    assert not routes.broker_live_table and not routes.topic_queue_table


def test_queue_data_only_from_master_and_on_version_change():
    routes = RouteInfoManager()
    table = {"T": {"topicName": "T", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}
    routes.register_broker("C", "a:1", "b", 1, "a:2", {"counter": 1}, topic_rows(table), [], None)
    assert routes.topic_queue_table == {}          # a slave's topics are not routed
    routes.register_broker("C", "m:1", "b", 0, "m:2", {"counter": 1}, topic_rows(table), [], None)
    assert routes.topic_queue_table["T"]["b"].write_queue_nums == 4
    changed = {"T": {"topicName": "T", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6}}
    routes.register_broker("C", "m:1", "b", 0, "m:2", {"counter": 1}, topic_rows(changed), [], None)
    assert routes.topic_queue_table["T"]["b"].write_queue_nums == 4   # same DataVersion: ignored
    routes.register_broker("C", "m:1", "b", 0, "m:2", {"counter": 2}, topic_rows(changed), [], None)
    assert routes.topic_queue_table["T"]["b"].write_queue_nums == 8


async def test_unit_topic_lists_by_topic_sys_flag(namesrv):
    """GET_UNIT_TOPIC_LIST (311), GET_HAS_UNIT_SUB_TOPIC_LIST (312) and
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313) pick topics by their unit bits (1: unit, 2: unit sub)."""
    table = {name: TOPIC_TABLE["TopicTest"] | {"topicName": name, "topicSysFlag": flag}
             for name, flag in (("Plain", 0), ("Unit", 1), ("UnitSub", 2), ("Both", 3))}
    body = fastjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": table}}).encode()
    request = register_request()
    request.body = body
    request.ext_fields["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)
    with trio.fail_after(5):
        async with RemotingClient() as client:
            assert (await client.invoke(namesrv.addr, request)).code == 0
            lists = {}
            for code in (311, 312, 313):
                answer = await client.invoke(namesrv.addr, make_request(code))
                assert answer.code == 0
                lists[code] = sorted(fastjson.loads(answer.body)["topicList"])
    assert lists == {311: ["Both", "Unit"], 312: ["Both", "UnitSub"], 313: ["UnitSub"]}


def _reference_route(routes: RouteInfoManager, topic: str, standard: bool, order_conf: str | None) -> bytes | None:
    """The route as one JSON object encoded whole: what topic_route_body's fragments must equal."""
    queues = routes.topic_queue_table.get(topic)
    if not queues:
        return None
    broker_datas, filter_servers = [], {}
    for name in queues:
        data = routes.broker_addr_table.get(name)
        if data is None:
            continue
        addrs = {(str(k) if standard else k): v for k, v in data.broker_addrs.items()}
        broker_datas.append({"brokerAddrs": addrs, "brokerName": name, "cluster": data.cluster})
        filter_servers.update({a: routes.filter_server_table[a] for a in data.broker_addrs.values()
                               if routes.filter_server_table.get(a)})
    if not broker_datas:
        return None
    route = {"brokerDatas": broker_datas, "filterServerTable": filter_servers,
             "queueDatas": [q.to_json() for q in queues.values()]}
    if order_conf is not None:
        route["orderTopicConf"] = order_conf
    return fastjson.dumps(route).encode()


def test_route_fragments_equal_the_whole_route_encoded():
    """Registrations, a changed queue count, write permission wiped and restored, a slave, filter
    servers, an unregistered broker and an order conf: every route body is byte for byte the route
    encoded as one object, in both JSON forms."""
    import random
    rnd = random.Random(7)
    routes = RouteInfoManager()
    topics = [f"T{i}" for i in range(12)]
    version = 0

    def check() -> None:
        for topic in topics + ["Nope"]:
            for standard in (False, True):
                for order_conf in (None, "broker-0:4;broker-1:4"):
                    assert (routes.topic_route_body(topic, standard, order_conf)
                            == _reference_route(routes, topic, standard, order_conf)), (topic, standard)

    for _ in range(60):
        n = rnd.randrange(4)
        action = rnd.randrange(5)
        if action <= 1:
            version += 1
            table = {t: {"topicName": t, "readQueueNums": rnd.choice((4, 8)), "writeQueueNums": rnd.choice((4, 8)),
                         "perm": rnd.choice((2, 4, 6)), "topicSysFlag": rnd.randrange(2)}
                     for t in rnd.sample(topics, rnd.randrange(1, 6))}
            routes.register_broker("C", f"10.0.0.{n}:10911", f"broker-{n}", rnd.choice((0, 0, 1)), f"10.0.0.{n}:10912",
                                   {"counter": version}, topic_rows(table), rnd.choice(([], [f"10.0.0.{n}:40001"])), None)
        elif action == 2:
            routes.change_write_perm(f"broker-{n}", wipe=rnd.random() < 0.5)
        elif action == 3:
            routes.unregister_broker("C", f"10.0.0.{n}:10911", f"broker-{n}", rnd.choice((0, 1)))
        else:
            routes.register_broker("C", f"10.0.1.{n}:10911", f"broker-{n}", 1, f"10.0.1.{n}:10912", None, None, [],
                                   None)
        check()
    assert any(routes.topic_route_body(t, False) for t in topics)

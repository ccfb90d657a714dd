"""The console's JSON API against a real in-process NameServer + broker: every answer is read back
from what the broker stored, through the same remoting calls mqadmin makes."""

from __future__ import annotations

import time

import pytest
import trio

from pyrmq.broker.config import ConfigError, build_config
from pyrmq.broker.controller import BrokerController
from pyrmq.codec.admin_bodies import ResetOffsetBody
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.dispatch import ProcessorTable
from tests.broker.conftest import broker_properties
from tests.broker.rmq import pull, send
from tests.broker.test_consumers import heartbeat
from tests.broker.test_dead_letters import dead_letter   # CONSUMER_SEND_MSG_BACK with delayLevel -1
from tests.console.conftest import call


async def create_topic(cluster, topic: str, queues: int) -> None:
    answer = await call(cluster, "POST", "/api/topics", {"topic": topic, "writeQueueNums": queues})
    assert answer.status == 200, answer.body
    assert answer.json() == {"topic": topic, "brokers": ["broker-a"], "readQueueNums": queues,
                             "writeQueueNums": queues, "perm": 6}


async def send_to(cluster, topic: str, queue_id: int, body: bytes, **kwargs):
    sent = await send(cluster.client, cluster.broker_addr, topic, body, queue_id=queue_id, **kwargs)
    assert sent.code == 0, sent.remark
    return sent


def commit(cluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    for queue_id, offset in offsets.items():
        cluster.broker.consumer_offset_manager.commit_offset(group, topic, queue_id, offset)


def topic_row(answer, topic: str):
    [row] = [t for t in answer.json()["topics"] if t["topic"] == topic]
    return row


async def test_cluster_lists_the_broker_with_its_runtime_figures(cluster):
    answer = await call(cluster, "GET", "/api/cluster")
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/json; charset=utf-8"
    [broker] = answer.json()["brokers"]
    assert {k: broker[k] for k in ("cluster", "brokerName", "brokerId", "role", "addr")} == {
        "cluster": "DefaultCluster", "brokerName": "broker-a", "brokerId": 0, "role": "MASTER",
        "addr": cluster.broker_addr}
    assert broker["putTps"] == 0.0 and broker["getTps"] == 0.0
    info = broker["info"]
    assert info["brokerVersionDesc"] == "V4_9_8"
    assert (info["haConnectionCount"], info["slaveFallBehindMuch"]) == ("0", "0")
    assert "commitLogDiskRatio" in info and "consumeQueueDiskRatio" in info


async def test_topics_create_count_change_and_drained_first_delete(cluster):
    await create_topic(cluster, "ConsoleT", 3)
    config = cluster.broker.topic_config_manager.select("ConsoleT")
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (3, 3, 6)
    for queue_id, count in ((0, 3), (1, 2)):
        for i in range(count):
            await send_to(cluster, "ConsoleT", queue_id, b"m%d" % i)
    row = topic_row(await call(cluster, "GET", "/api/topics"), "ConsoleT")
    assert row == {"topic": "ConsoleT", "system": False, "brokers": ["broker-a"], "readQueueNums": 3,
                   "writeQueueNums": 3, "perm": 6, "maxOffset": 5, "messages": 5}

    answer = await call(cluster, "POST", "/api/topics", {"topic": "ConsoleT", "writeQueueNums": 4,
                                                         "readQueueNums": 4})
    assert answer.status == 200
    row = topic_row(await call(cluster, "GET", "/api/topics"), "ConsoleT")
    assert (row["readQueueNums"], row["writeQueueNums"], row["maxOffset"]) == (4, 4, 5)

    # a group that has consumed part of it: the topic turns read-only and stays, with what is left
    commit(cluster, "ConsoleG", "ConsoleT", {0: 1, 1: 2, 2: 0, 3: 0})
    detail = (await call(cluster, "GET", "/api/topic?topic=ConsoleT")).json()
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in detail["queues"]] == [
        (0, 0, 3), (1, 0, 2), (2, 0, 0), (3, 0, 0)]
    assert [(c["group"], c["lag"], [r["consumerOffset"] for r in c["queues"]]) for c in detail["consumers"]] == [
        ("ConsoleG", 2, [1, 2, 0, 0])]
    assert (await call(cluster, "GET", "/api/topic?topic=NoSuchT")).status == 400
    answer = await call(cluster, "POST", "/api/topics/delete", {"topic": "ConsoleT"})
    assert answer.status == 200
    result = answer.json()
    assert (result["deleted"], result["perm"]) == (False, 4)
    assert [(r["group"], r["queueId"], r["consumerOffset"], r["brokerOffset"], r["lag"])
            for r in result["remaining"]] == [("ConsoleG", 0, 1, 3, 2)]
    assert cluster.broker.topic_config_manager.select("ConsoleT").perm == 4
    refused = await send(cluster.client, cluster.broker_addr, "ConsoleT", b"late")
    assert refused.code != 0                         # no more sends while it drains

    commit(cluster, "ConsoleG", "ConsoleT", {0: 3})
    answer = await call(cluster, "POST", "/api/topics/delete", {"topic": "ConsoleT"})
    assert answer.json() == {"topic": "ConsoleT", "deleted": True, "perm": 4, "remaining": []}
    assert cluster.broker.topic_config_manager.select("ConsoleT") is None
    assert all(t["topic"] != "ConsoleT" for t in (await call(cluster, "GET", "/api/topics")).json()["topics"])


async def test_group_details_lag_retry_and_dlq_counts(cluster):
    await create_topic(cluster, "GroupT", 2)
    for queue_id in (0, 0, 0, 1):
        await send_to(cluster, "GroupT", queue_id, b"x")
    commit(cluster, "GroupG", "GroupT", {0: 1, 1: 1})
    await dead_letter(cluster, "GroupT", "GroupG", b"dead", queue_id=1)

    groups = (await call(cluster, "GET", "/api/groups")).json()["groups"]
    [row] = [g for g in groups if g["group"] == "GroupG"]
    assert (row["lag"], row["members"], row["system"]) == (3, 0, False)   # 2 + 1 (the dead letter's source)

    detail = (await call(cluster, "GET", "/api/group?group=GroupG")).json()
    assert [(q["topic"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["lag"]) for q in detail["queues"]
            if q["topic"] == "GroupT"] == [("GroupT", 0, 3, 1, 2), ("GroupT", 1, 2, 1, 1)]
    assert (detail["dlqMessages"], detail["retryMessages"], detail["members"]) == (1, 0, [])
    bad = await call(cluster, "GET", "/api/group?group=bad%20name")
    assert bad.status == 400 and "illegal characters" in bad.json()["error"]


async def test_reset_offset_by_time_rewrites_the_offsets_of_an_offline_group(cluster):
    await create_topic(cluster, "ResetT", 2)
    for queue_id in (0, 0, 1):
        await send_to(cluster, "ResetT", queue_id, b"before")
    # SEARCH_OFFSET_BY_TIMESTAMP answers the message nearest in time (Apache's binary search), so
    # the time is put far from the last message before it and close to the first after it
    await trio.sleep(0.5)
    middle = int(time.time() * 1000)
    await trio.sleep(0.002)
    for queue_id in (0, 1, 1):
        await send_to(cluster, "ResetT", queue_id, b"after")
    commit(cluster, "ResetG", "ResetT", {0: 3, 1: 3})
    answer = await call(cluster, "POST", "/api/groups/reset-offset",
                        {"group": "ResetG", "topic": "ResetT", "timestamp": middle})
    assert answer.status == 200, answer.body
    assert answer.json() == {"group": "ResetG", "topic": "ResetT", "timestamp": middle, "offsets": [
        {"brokerName": "broker-a", "queueId": 0, "offset": 2}, {"brokerName": "broker-a", "queueId": 1, "offset": 1}]}
    offsets = cluster.broker.consumer_offset_manager
    assert (offsets.query_offset("ResetG", "ResetT", 0), offsets.query_offset("ResetG", "ResetT", 1)) == (2, 1)

    answer = await call(cluster, "POST", "/api/groups/reset-offset",
                        {"group": "ResetG", "topic": "ResetT", "timestamp": -1})
    assert [o["offset"] for o in answer.json()["offsets"]] == [3, 3]
    assert (await call(cluster, "POST", "/api/groups/reset-offset",
                       {"group": "ResetG", "topic": "ResetT", "timestamp": "soon"})).status == 400


async def test_messages_by_key_unique_key_id_offset_and_time(cluster):
    await create_topic(cluster, "MsgT", 2)
    began = int(time.time() * 1000)
    first = await send_to(cluster, "MsgT", 0, b"hello", keys="k1 k2", tags="TA", extra={"color": "red"})
    await send_to(cluster, "MsgT", 1, b"\xff\x00binary", keys="k2")
    await send_to(cluster, "MsgT", 0, b"third", keys="k3")

    by_key = (await call(cluster, "GET", "/api/messages/by-key?topic=MsgT&key=k2")).json()["messages"]
    assert [(m["bodyText"], m["bodyHex"], m["queueId"]) for m in by_key] == [
        ("hello", b"hello".hex(), 0), (None, b"\xff\x00binary".hex(), 1)]
    hello = by_key[0]
    assert (hello["tags"], hello["keys"], hello["properties"]["color"], hello["bodySize"]) == ("TA", "k1 k2", "red", 5)
    assert hello["msgId"] == first.ext_fields["msgId"]          # the broker answers with the offset msgId
    assert len(hello["uniqKey"]) == 32                          # the UNIQ_KEY the sender made

    unique = (await call(cluster, "GET", f"/api/messages/by-unique-key?topic=MsgT&key={hello['uniqKey']}")).json()
    assert [m["msgId"] for m in unique["messages"]] == [hello["msgId"]]
    by_id = (await call(cluster, "GET", f"/api/messages/by-id?msgId={hello['msgId']}")).json()
    assert [(m["bodyText"], m["queueOffset"]) for m in by_id["messages"]] == [("hello", 0)]
    by_offset = (await call(cluster, "GET", "/api/messages/by-offset?topic=MsgT&brokerName=broker-a&queueId=0"
                                            "&offset=1&count=5")).json()
    assert [(m["bodyText"], m["queueOffset"]) for m in by_offset["messages"]] == [("third", 1)]
    by_time = (await call(cluster, "GET", f"/api/messages/by-time?topic=MsgT&begin={began}")).json()
    assert sorted(m["bodySize"] for m in by_time["messages"]) == [5, 5, 8]
    none = (await call(cluster, "GET", "/api/messages/by-time?topic=MsgT&begin=0&end=1")).json()
    assert none["messages"] == []
    assert (await call(cluster, "GET", "/api/messages/by-key?topic=MsgT&key=none")).json()["messages"] == []
    bad = await call(cluster, "GET", "/api/messages/by-id?msgId=zz")
    assert bad.status == 502 and "not an offset msgId" in bad.json()["error"]


async def test_dead_letters_are_listed_and_resent_to_their_topic(cluster):
    await create_topic(cluster, "DeadT", 1)
    original = await dead_letter(cluster, "DeadT", "DeadG", b"poison", keys="dead-key")
    letters = (await call(cluster, "GET", "/api/dlq?group=DeadG")).json()["messages"]
    assert [(m["topic"], m["bodyText"], m["properties"]["RETRY_TOPIC"], m["brokerName"]) for m in letters] == [
        ("%DLQ%DeadG", "poison", "DeadT", "broker-a")]
    answer = await call(cluster, "POST", "/api/dlq/resend",
                        {"group": "DeadG", "msgId": letters[0]["msgId"], "brokerName": "broker-a"})
    assert answer.status == 200, answer.body
    resent = answer.json()
    assert (resent["msgId"], resent["topic"]) == (letters[0]["msgId"], "DeadT")
    _, messages = await pull(cluster.client, cluster.broker_addr, "DeadT", 0, 1)
    [copy] = messages
    assert (copy.body, copy.keys, copy.reconsume_times) == (b"poison", "dead-key", 0)
    assert copy.properties["UNIQ_KEY"] == original.properties["UNIQ_KEY"]
    wrong = await call(cluster, "POST", "/api/dlq/resend",
                       {"group": "OtherG", "msgId": letters[0]["msgId"], "brokerName": "broker-a"})
    assert wrong.status == 502 and "not in %DLQ%OtherG" in wrong.json()["error"]


async def test_live_figures_for_the_charts(cluster):
    await create_topic(cluster, "LiveT", 1)
    await send_to(cluster, "LiveT", 0, b"x")
    commit(cluster, "LiveG", "LiveT", {0: 0})
    live = (await call(cluster, "GET", "/api/live?group=LiveG")).json()
    assert abs(live["time"] - time.time() * 1000) < 10_000
    assert set(live["brokers"]) == {"broker-a"}
    assert set(live["brokers"]["broker-a"]) == {"putTps", "getTps", "putTotal", "getTotal"}
    assert (live["brokers"]["broker-a"]["putTotal"], live["brokers"]["broker-a"]["getTotal"]) == (1, 0)
    assert live["group"] == {"group": "LiveG", "lag": 1, "consumeTps": 0.0}


async def test_writes_are_json_posts_with_checked_names(cluster):
    form = await call(cluster, "POST", "/api/topics", raw=b"topic=X&writeQueueNums=1",
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status == 415
    cross = await call(cluster, "POST", "/api/topics", {"topic": "X", "writeQueueNums": 1},
                       headers={"Origin": "http://evil.example"})
    assert cross.status == 403
    bad_name = await call(cluster, "POST", "/api/topics", {"topic": "../etc", "writeQueueNums": 1})
    assert bad_name.status == 400 and "illegal characters" in bad_name.json()["error"]
    too_many = await call(cluster, "POST", "/api/topics", {"topic": "Fine", "writeQueueNums": 100000})
    assert too_many.status == 400 and "between 1 and 1024" in too_many.json()["error"]
    system = await call(cluster, "POST", "/api/topics", {"topic": "%RETRY%g", "writeQueueNums": 1})
    assert system.status == 400
    assert (await call(cluster, "POST", "/api/topics", raw=b"[1]",
                       headers={"Content-Type": "application/json"})).status == 400
    assert (await call(cluster, "POST", "/api/topics", raw=b"{" + b" " * 20_000 + b"}",
                       headers={"Content-Type": "application/json"})).status == 400
    assert (await call(cluster, "GET", "/api/topics/delete")).status == 405
    assert (await call(cluster, "GET", "/api/nothing")).status == 404
    assert cluster.broker.topic_config_manager.select("Fine") is None


async def test_the_page_and_its_files_come_from_a_fixed_table(cluster):
    page = await call(cluster, "GET", "/")
    assert page.status == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert b"<title>pyrmq console</title>" in page.body
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name, kind in (("console.js", "text/javascript"), ("charts.js", "text/javascript"), ("console.css", "text/css")):
        answer = await call(cluster, "GET", f"/static/{name}")
        assert answer.status == 200 and answer.headers["content-type"].startswith(kind)
    for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/server.py", "/static/"):
        assert (await call(cluster, "GET", path)).status == 404


def test_console_port_is_checked_and_off_by_default(tmp_path):
    loaded = build_config(broker_properties(tmp_path, 9876))
    assert (loaded.broker.console_port, loaded.broker.console_bind_address) == (0, "127.0.0.1")
    with pytest.raises(ConfigError, match="consolePort=70000 is not a TCP port"):
        build_config(broker_properties(tmp_path, 9876, consolePort=70000))


async def test_reset_offset_with_a_consumer_online_goes_through_the_broker(cluster):
    """INVOKE_BROKER_TO_RESET_OFFSET (222): the broker sends the new offsets to each online client
    (RESET_CONSUMER_CLIENT_OFFSET, 220), which resets and commits them itself, as Apache's."""
    await create_topic(cluster, "OnlineT", 1)
    for _ in range(4):
        await send_to(cluster, "OnlineT", 0, b"x")
    commit(cluster, "OnlineG", "OnlineT", {0: 4})
    told = []
    table = ProcessorTable("client")
    table.register(220, lambda channel, request: told.append(
        (request.field("group"), ResetOffsetBody.decode(bytes(request.body)).offset_table)))
    async with RemotingClient(table) as consumer:
        beat = await consumer.invoke(cluster.broker_addr, make_request(
            RequestCode.HEART_BEAT, body=heartbeat("OnlineG", "10.0.0.9@online", "OnlineT")))
        assert beat.code == 0
        members = (await call(cluster, "GET", "/api/group?group=OnlineG")).json()["members"]
        assert [m["clientId"] for m in members] == ["10.0.0.9@online"]
        answer = await call(cluster, "POST", "/api/groups/reset-offset",
                            {"group": "OnlineG", "topic": "OnlineT", "timestamp": 0})
        assert answer.json()["offsets"] == [{"brokerName": "broker-a", "queueId": 0, "offset": 0}]
        with trio.fail_after(10):
            while not told:
                await trio.sleep(0.01)
    [(group, table_told)] = told
    assert group == "OnlineG" and {mq.queue_id: offset for mq, offset in table_told.items()} == {0: 0}
    # the stored offset is the client's to commit
    assert cluster.broker.consumer_offset_manager.query_offset("OnlineG", "OnlineT", 0) == 4


def test_the_console_is_off_unless_configured(tmp_path):
    assert BrokerController(build_config(broker_properties(tmp_path, 9876))).console is None


async def test_on_loopback_only_loopback_host_names_are_answered(cluster):
    """A page of another site whose name is re-pointed at 127.0.0.1 (DNS rebinding) sends its own
    name as Host: refused."""
    assert (await call(cluster, "GET", "/api/cluster", headers={"Host": "evil.example"})).status == 403
    assert (await call(cluster, "GET", "/", headers={"Host": "evil.example:80"})).status == 403
    for host in ("localhost", f"localhost:{cluster.broker.console.port}", "127.0.0.1", "[::1]:8080"):
        assert (await call(cluster, "GET", "/", headers={"Host": host})).status == 200, host

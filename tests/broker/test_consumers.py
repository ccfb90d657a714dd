"""Long polling, consumer groups (heartbeat, rebalance notification), offsets, SYNC_FLUSH and
restart, against an in-process broker."""

from __future__ import annotations

import pytest
import trio

from pyrmq.broker.config import build_config
from pyrmq.broker.controller import BrokerController
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.dispatch import ProcessorTable
from tests.broker.conftest import broker_properties
from tests.broker.rmq import pull, pull_request, send

SUSPEND = 0x2
SUBSCRIPTION = 0x4
COMMIT = 0x1


async def test_long_poll_is_woken_by_a_new_message(cluster):
    with trio.fail_after(10):
        await send(cluster.client, cluster.broker_addr, "TopicLP", b"first")
        results = []

        async def waiting_pull():
            results.append(await pull(cluster.client, cluster.broker_addr, "TopicLP", 0, 1,
                                      sys_flag=SUSPEND | SUBSCRIPTION, suspend_ms=60_000))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiting_pull)
            # the pull is parked at the broker (a 60 s hold would outlive fail_after(10))
            while not cluster.broker.pull_processor.hold_service._held:
                await trio.sleep(0.005)
            await send(cluster.client, cluster.broker_addr, "TopicLP", b"second")
        [(resp, messages)] = results
        assert resp.code == 0 and [m.body for m in messages] == [b"second"]


async def test_long_poll_expires_with_pull_not_found(cluster):
    with trio.fail_after(10):
        await send(cluster.client, cluster.broker_addr, "TopicLP2", b"x")
        resp, messages = await pull(cluster.client, cluster.broker_addr, "TopicLP2", 0, 1,
                                    sys_flag=SUSPEND | SUBSCRIPTION, suspend_ms=300)
        assert (resp.code, messages) == (19, [])
        assert resp.ext_fields["nextBeginOffset"] == "1"


@pytest.mark.parametrize("broker_overrides", [{"longPollingEnable": "false", "shortPollingTimeMills": "200"}])
async def test_short_polling_when_long_polling_off(cluster):
    with trio.fail_after(10):
        await send(cluster.client, cluster.broker_addr, "TopicSP", b"x")
        start = trio.current_time()
        resp, _ = await pull(cluster.client, cluster.broker_addr, "TopicSP", 0, 1,
                             sys_flag=SUSPEND | SUBSCRIPTION, suspend_ms=60_000)
        assert resp.code == 19
        # held for shortPollingTimeMills, not for the client's 60 s (bounded by fail_after above)
        assert trio.current_time() - start >= 0.2


def heartbeat(group: str, client_id: str, topic: str, sub: str = "*") -> bytes:
    return fastjson.dumps({"clientID": client_id, "consumerDataSet": [{
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY", "groupName": group,
        "messageModel": "CLUSTERING", "subscriptionDataSet": [{
            "classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": sub, "subVersion": 1,
            "tagsSet": [] if sub == "*" else [sub], "topic": topic}], "unitMode": False}],
        "producerDataSet": []}).encode()


async def test_heartbeat_consumer_list_and_notify(cluster):
    notified = []
    table = ProcessorTable("client")
    table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                   lambda ch, req: notified.append(req.field("consumerGroup")))
    with trio.fail_after(10):
        async with RemotingClient(table) as first:
            resp = await first.invoke(cluster.broker_addr, make_request(
                RequestCode.HEART_BEAT, body=heartbeat("g1", "10.0.0.1@1", "TopicG", "TagA")))
            assert resp.code == 0
            assert cluster.broker.topic_config_manager.select("%RETRY%g1").read_queue_nums == 1
            async with RemotingClient() as second:
                await second.invoke(cluster.broker_addr, make_request(
                    RequestCode.HEART_BEAT, body=heartbeat("g1", "10.0.0.2@2", "TopicG", "TagA")))
                listed = await second.invoke(cluster.broker_addr, make_request(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g1"}))
                assert sorted(fastjson.loads(listed.body)["consumerIdList"]) == ["10.0.0.1@1", "10.0.0.2@2"]
                while notified.count("g1") < 2:   # own join + second's join
                    await trio.sleep(0.005)
                # pulls without the subscription flag use the heartbeat's subscription (TagA)
                await send(cluster.client, cluster.broker_addr, "TopicG", b"a", tags="TagA")
                await send(cluster.client, cluster.broker_addr, "TopicG", b"b", tags="TagB")
                resp, messages = await pull(second, cluster.broker_addr, "TopicG", 0, 0, group="g1", sys_flag=0)
                assert [m.body for m in messages] == [b"a"]
            # the second consumer's connection closed: the first is told to rebalance
            while notified.count("g1") < 3:
                await trio.sleep(0.005)
            listed = await first.invoke(cluster.broker_addr, make_request(
                RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g1"}))
            assert fastjson.loads(listed.body)["consumerIdList"] == ["10.0.0.1@1"]
        missing = await cluster.client.invoke(cluster.broker_addr, make_request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody"}))
        assert (missing.code, missing.remark) == (1, "no consumer for this group, nobody")


async def test_consumer_offsets(cluster):
    inv = cluster.client.invoke
    with trio.fail_after(10):
        await send(cluster.client, cluster.broker_addr, "TopicO", b"x")
        q = {"consumerGroup": "og", "topic": "TopicO", "queueId": "0"}
        # a new group on a queue still starting at 0 with its first message in memory starts at 0
        assert (await inv(cluster.broker_addr, make_request(RequestCode.QUERY_CONSUMER_OFFSET, dict(q)))).ext_fields == {"offset": "0"}
        resp = await inv(cluster.broker_addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "1"}))
        assert resp.code == 0
        assert (await inv(cluster.broker_addr, make_request(RequestCode.QUERY_CONSUMER_OFFSET, dict(q)))).ext_fields == {"offset": "1"}
        # a pull with the commit flag stores the client's offset
        await inv(cluster.broker_addr, pull_request("TopicO", 0, 1, group="og", sys_flag=COMMIT | SUBSCRIPTION,
                                                    commit_offset=1))
        await inv(cluster.broker_addr, pull_request("TopicO", 0, 0, group="og2", sys_flag=COMMIT | SUBSCRIPTION,
                                                    commit_offset=5))
        assert cluster.broker.consumer_offset_manager.query_offset("og2", "TopicO", 0) == 5


async def test_restart_keeps_messages_offsets_and_topics(nursery, tmp_path):
    props = broker_properties(tmp_path, 1, namesrvAddr="")
    for round_ in range(2):
        broker = BrokerController(build_config(props))
        await nursery.start(broker.run)
        addr = broker.config.broker_addr
        with trio.fail_after(10):
            async with RemotingClient() as client:
                if round_ == 0:
                    for i in range(3):
                        assert (await send(client, addr, "TopicR", f"m{i}".encode())).code == 0
                    await client.invoke(addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                        "consumerGroup": "rg", "topic": "TopicR", "queueId": "0", "commitOffset": "2"}))
                else:
                    resp, messages = await pull(client, addr, "TopicR", 0, 0)
                    assert [m.body for m in messages] == [b"m0", b"m1", b"m2"]
                    offset = await client.invoke(addr, make_request(RequestCode.QUERY_CONSUMER_OFFSET, {
                        "consumerGroup": "rg", "topic": "TopicR", "queueId": "0"}))
                    assert offset.ext_fields == {"offset": "2"}
                    assert (await send(client, addr, "TopicR", b"m3")).ext_fields["queueOffset"] == "3"
        broker.stop()
        with trio.fail_after(10):
            await broker.wait_stopped()
        assert not (tmp_path / "store" / "abort").exists()


async def _concurrent_sends(cluster, count):
    results = []

    async def one(i):
        results.append(await send(cluster.client, cluster.broker_addr, "TopicSF", f"s{i}".encode()))

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(one, i)
    return results


@pytest.mark.parametrize("broker_overrides", [{"flushDiskType": "SYNC_FLUSH"}])
async def test_sync_flush_acknowledges_only_flushed_data(cluster):
    with trio.fail_after(10):
        results = await _concurrent_sends(cluster, 50)
        assert all(r.code == 0 for r in results)
        assert sorted(int(r.ext_fields["queueOffset"]) for r in results if r.ext_fields["queueId"] == "0") == \
            list(range(sum(r.ext_fields["queueId"] == "0" for r in results)))
        store = cluster.broker.store
        assert store.commit_log.flushed_where >= store.get_max_phy_offset()
        # group commit: far fewer flushes than sends
        assert 1 <= cluster.broker.flush_service.group_commits < 50
        assert cluster.broker.flush_service.pending_waiters == 0


@pytest.mark.parametrize("broker_overrides", [{"flushDiskType": "SYNC_FLUSH", "syncFlushTimeout": "300"}])
async def test_sync_flush_timeout_and_unwaited_sends(cluster, monkeypatch):
    """A send whose record is not flushed within syncFlushTimeout is answered FLUSH_DISK_TIMEOUT
    (stored all the same, with its msgId); one that does not wait (WAIT=false) is answered at once
    and flushed by the group commit within its idle interval, as Apache's GroupCommitService."""
    store = cluster.broker.store
    real_flushed_by = store.commit_log_flushed_by
    # each group commit syncs, but nothing counts as flushed
    monkeypatch.setattr(store, "commit_log_flushed_by", lambda plan: store.commit_log.flushed_where)
    with trio.fail_after(10):
        started = trio.current_time()
        results = await _concurrent_sends(cluster, 5)
        assert trio.current_time() - started >= 0.3
        assert [r.code for r in results] == [10] * 5   # FLUSH_DISK_TIMEOUT
        assert all(r.ext_fields["msgId"] for r in results)
        assert cluster.broker.flush_service.pending_waiters == 0
        monkeypatch.setattr(store, "commit_log_flushed_by", real_flushed_by)
        r = await send(cluster.client, cluster.broker_addr, "TopicSF", b"flushed")
        assert r.code == 0
        assert store.commit_log.flushed_where >= store.get_max_phy_offset()
        r = await send(cluster.client, cluster.broker_addr, "TopicSF", b"no wait", extra={"WAIT": "false"})
        assert r.code == 0
        while store.commit_log.flushed_where < store.get_max_phy_offset():
            await trio.sleep(0.005)


async def test_lock_batch_mq_and_expiry(cluster):
    def body(client_id, queues):
        return fastjson.dumps({"clientId": client_id, "consumerGroup": "og", "mqSet": [
            {"brokerName": "broker-a", "queueId": q, "topic": "TopicL"} for q in queues]}).encode()

    inv = cluster.client.invoke
    with trio.fail_after(10):
        first = await inv(cluster.broker_addr, make_request(RequestCode.LOCK_BATCH_MQ, body=body("c1", [0, 1])))
        assert first.body == (b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicL"},'
                              b'{"brokerName":"broker-a","queueId":1,"topic":"TopicL"}]}')
        second = await inv(cluster.broker_addr, make_request(RequestCode.LOCK_BATCH_MQ, body=body("c2", [1, 2])))
        assert fastjson.loads(second.body)["lockOKMQSet"] == [{"brokerName": "broker-a", "queueId": 2, "topic": "TopicL"}]
        await inv(cluster.broker_addr, make_request(RequestCode.UNLOCK_BATCH_MQ, body=body("c1", [1])))
        third = await inv(cluster.broker_addr, make_request(RequestCode.LOCK_BATCH_MQ, body=body("c2", [1])))
        assert len(fastjson.loads(third.body)["lockOKMQSet"]) == 1
    locks = cluster.broker.rebalance_lock_manager
    key = ("TopicL", "broker-a", 0)
    assert locks.lock_owner("og", key) == "c1"
    now = 10**13
    assert locks.try_lock_batch("og", [key], "c2", now_ms=now) == [key]   # c1's lease expired long ago


async def test_consume_stats_connections_and_reset_offset(cluster):
    resets = []
    table = ProcessorTable("client")
    table.register(220, lambda ch, req: resets.append((req.ext_fields, fastjson.loads(req.body))))
    table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, lambda ch, req: None)
    inv = cluster.client.invoke
    with trio.fail_after(10):
        for i in range(3):
            await send(cluster.client, cluster.broker_addr, "TopicRS", f"m{i}".encode(), queue_id=0)
        await inv(cluster.broker_addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": "rsg", "topic": "TopicRS", "queueId": "0", "commitOffset": "2"}))
        for q in (1, 2, 3):
            await inv(cluster.broker_addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "rsg", "topic": "TopicRS", "queueId": str(q), "commitOffset": "0"}))
        stats = await inv(cluster.broker_addr, make_request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "rsg"}))
        parsed = fastjson.loads(stats.body)
        assert stats.body.startswith(b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicRS"}:')
        q0 = parsed["offsetTable"][fastjson.ObjectKey.of({"brokerName": "broker-a", "queueId": 0, "topic": "TopicRS"})]
        assert (q0["brokerOffset"], q0["consumerOffset"]) == (3, 2) and q0["lastTimestamp"] > 0

        offline = await inv(cluster.broker_addr, make_request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                              {"consumerGroup": "rsg"}))
        assert (offline.code, offline.remark) == (206, "the consumer group not online")
        reset_header = {"topic": "TopicRS", "group": "rsg", "timestamp": "0", "isForce": "true"}
        offline = await inv(cluster.broker_addr, make_request(222, dict(reset_header)))
        assert offline.code == 206

        async with RemotingClient(table) as consumer:
            await consumer.invoke(cluster.broker_addr, make_request(
                RequestCode.HEART_BEAT, body=heartbeat("rsg", "10.0.0.9@9", "TopicRS")))
            conns = await inv(cluster.broker_addr, make_request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                                {"consumerGroup": "rsg"}))
            conn = fastjson.loads(conns.body)
            assert conn["connectionSet"][0]["clientId"] == "10.0.0.9@9"
            assert conn["messageModel"] == "CLUSTERING" and "TopicRS" in conn["subscriptionTable"]
            reset = await inv(cluster.broker_addr, make_request(222, dict(reset_header)))
            assert reset.code == 0
            while not resets:
                await trio.sleep(0.005)
        header, body = resets[0]
        assert header == {"topic": "TopicRS", "group": "rsg", "timestamp": "0"}
        assert body["offsetTable"][fastjson.ObjectKey.of({"brokerName": "broker-a", "queueId": 0, "topic": "TopicRS"})] == 0

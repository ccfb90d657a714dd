"""The official Go client (rocketmq-client-go/v2) as producer and admin: sync, async, oneway and
batch sends read back exactly with the Go pull consumer; topics created and deleted with the Go
admin API.

The Go client sends single messages with SEND_MESSAGE (10, V1 header names), batches with
SEND_BATCH_MESSAGE (320), and asks routes with GET_ROUTEINFO_BY_TOPIC at version 317 (the legacy
route JSON with unquoted brokerAddrs keys). Message i goes to queue (start + i) % 4 (round robin),
so 24 messages fill every queue of an auto-created topic: the read-back never waits on an empty
queue (the Go pull consumer always asks the broker to park a pull at a queue's end for 20 s).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from compat_tests import goclient
from compat_tests.checks import (assert_dense_queues, assert_received_exactly, assert_sent_ok,
                                 decode_offset_msg_id, queue_order)
from compat_tests.servers import GET_ROUTEINFO_BY_TOPIC, remoting_call

pytestmark = pytest.mark.compat

COUNT = 24
TOPIC_NOT_EXIST = 17


@pytest.fixture(scope="session")
def go_client(tmp_path_factory) -> goclient.GoClient:
    return goclient.session_client(tmp_path_factory)


def _pull_back(go_client, server, names, **options):
    """Every queue from offset 0 to its max offset with the Go pull consumer (PullFrom)."""
    pulled = go_client.run("pull-consume", mode="from", namesrv=server.namesrv_addr, topic=names.topic,
                           group=names.another_group("pull"), **options)
    per_queue_max = {}
    for p in pulled.of("pull"):
        assert p["minOffset"] == 0, p
        assert p["status"] in ("FOUND", "NO_NEW_MSG", "NO_MATCHED_MSG"), p
        per_queue_max[p["queueId"]] = p["maxOffset"]
    return pulled, per_queue_max


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_go_send_and_pull_back(mode, server, go_client, names):
    produced = go_client.run(f"send-{mode}", namesrv=server.namesrv_addr, topic=names.topic, count=COUNT,
                             tags="TagA,TagB,TagC")
    assert produced.summary == {**produced.summary, "ok": COUNT, "failed": 0}
    assert_sent_ok(produced.sent, COUNT, server)
    # The topic was auto-created from TBW102 with the Go producer's default of 4 queues.
    assert {e["queueId"] for e in produced.sent} == {0, 1, 2, 3}
    assert {e["brokerName"] for e in produced.sent} == {"broker-a"}

    pulled, per_queue_max = _pull_back(go_client, server, names)
    assert_received_exactly(produced.sent, pulled.received)
    sent_per_queue = queue_order(produced.sent)
    assert per_queue_max == {q: len(b) for q, b in sent_per_queue.items()}
    assert queue_order(pulled.received) == sent_per_queue
    assert {e["storeHost"] for e in pulled.received} == {server.broker_addr}
    if mode == "sync":
        # One sender, one message at a time, round robin: queue order = send order, 6 per queue.
        for bodies in sent_per_queue.values():
            assert len(bodies) == COUNT // 4
            assert bodies == sorted(bodies, key=lambda b: int(b.rsplit("-", 1)[1]))


def test_go_oneway_send(server, go_client, names):
    produced = go_client.run("send-oneway", namesrv=server.namesrv_addr, topic=names.topic, count=COUNT,
                             tags="TagA,TagB")
    assert [e["status"] for e in produced.sent] == ["ONEWAY"] * COUNT
    pulled, per_queue_max = _pull_back(go_client, server, names)
    assert_received_exactly(produced.sent, pulled.received)
    assert_dense_queues(pulled.received)
    assert per_queue_max == {0: COUNT // 4, 1: COUNT // 4, 2: COUNT // 4, 3: COUNT // 4}
    # Oneway sends carry the client's unique id like any other.
    assert len({e["msgId"] for e in pulled.received}) == COUNT
    assert all(e["msgId"] == e["uniqKey"] != "" for e in pulled.received)


def test_go_batch_send(server, go_client, names):
    """SEND_BATCH_MESSAGE (320): each batch lands in one queue at consecutive offsets; the response's
    msgId header lists every entry's offset message id. The Go client gives batch entries no
    UNIQ_KEY, so a consumer's msgId is the entry's offset message id."""
    batch_size = 6
    produced = go_client.run("send-batch", namesrv=server.namesrv_addr, topic=names.topic, count=COUNT,
                             batch_size=batch_size, tags="TagA,TagB,TagC")
    assert produced.summary == {**produced.summary, "ok": COUNT, "failed": 0}
    batches = produced.of("batch")
    assert [b["n"] for b in batches] == [batch_size] * (COUNT // batch_size)
    assert all(b["status"] == "SEND_OK" for b in batches)
    assert sorted(b["queueId"] for b in batches) == [0, 1, 2, 3]
    assert all(b["queueOffset"] == 0 for b in batches), "a fresh topic, one batch per queue"
    commit_log_offsets = []
    for b in batches:
        ids = b["offsetMsgId"].split(",")
        assert len(ids) == batch_size, b
        decoded = [decode_offset_msg_id(i) for i in ids]
        assert {f"{h}:{p}" for h, p, _ in decoded} == {server.broker_addr}
        offsets = [o for _, _, o in decoded]
        assert offsets == sorted(offsets), b
        commit_log_offsets += offsets
    assert len(set(commit_log_offsets)) == COUNT

    sent = produced.sent
    assert sorted(e["i"] for e in sent) == list(range(COUNT))
    per_batch = defaultdict(list)
    for e in sent:
        per_batch[e["batch"]].append(e)
    for entries in per_batch.values():
        assert len({e["queueId"] for e in entries}) == 1
        assert [e["queueOffset"] for e in sorted(entries, key=lambda e: e["i"])] == list(range(batch_size))

    pulled, per_queue_max = _pull_back(go_client, server, names)
    assert per_queue_max == {0: batch_size, 1: batch_size, 2: batch_size, 3: batch_size}
    assert_received_exactly(sent, pulled.received, check_msg_id=False)
    by_body = {e["body"]: e for e in pulled.received}
    for s in sent:
        r = by_body[s["body"]]
        assert r["uniqKey"] == "" and r["msgId"] == r["offsetMsgId"] == s["offsetMsgId"], (s, r)
    assert queue_order(pulled.received) == queue_order(sent)


def test_go_admin_create_and_delete_topic(server, go_client, names):
    """CREATE_TOPIC (17) to the broker with 3 queues: the NameServer routes it with 3 queues, a Go
    producer sends only to those; DELETE_TOPIC_IN_BROKER (215) + DELETE_TOPIC_IN_NAMESRV (216):
    the route is gone."""
    queues = 3
    created = go_client.run("admin-create-topic", namesrv=server.namesrv_addr, topic=names.topic,
                            broker=server.broker_addr, queues=queues)
    (route,) = created.of("route")
    assert route["queues"] == [{"brokerName": "broker-a", "queueId": q} for q in range(queues)]

    count = 12
    produced = go_client.run("send-sync", namesrv=server.namesrv_addr, topic=names.topic, count=count)
    assert_sent_ok(produced.sent, count, server)
    per_queue = defaultdict(int)
    for e in produced.sent:
        per_queue[e["queueId"]] += 1
    assert dict(per_queue) == {q: count // queues for q in range(queues)}

    pulled, per_queue_max = _pull_back(go_client, server, names)
    assert per_queue_max == {q: count // queues for q in range(queues)}
    assert_received_exactly(produced.sent, pulled.received)

    go_client.run("admin-delete-topic", namesrv=server.namesrv_addr, topic=names.topic, broker=server.broker_addr)
    after = go_client.run("route", namesrv=server.namesrv_addr, topic=names.topic)
    assert after.summary["found"] is False, after.describe()
    header, _ = remoting_call((server.config.host, server.config.ports.namesrv), GET_ROUTEINFO_BY_TOPIC,
                              {"topic": names.topic})
    assert header["code"] == TOPIC_NOT_EXIST, header

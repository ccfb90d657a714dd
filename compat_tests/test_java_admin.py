"""DefaultMQAdminExt basics, and producer fail-over between two brokers of one cluster."""

from __future__ import annotations

from collections import Counter

import pytest

from compat_tests.checks import assert_received_exactly, decode_offset_msg_id

pytestmark = pytest.mark.compat


def test_admin_topic_lifecycle(server, java_client, names):
    """createAndUpdateTopicConfig (3 queues, perm 6) on broker-a; examineBrokerClusterInfo,
    examineTopicRouteInfo, fetchAllTopicList; 9 sends (3 per queue), each read back with
    viewMessage (offset msgId); topic stats; consume stats once a group
    consumed them; deleteTopicInBroker + deleteTopicInNameServer. The stats are asked per broker
    with MQClientAPIImpl (GET_TOPIC_STATS_INFO, GET_CONSUME_STATS): the 5.3.3 admin's
    examineTopicStats / examineConsumeStats first send GET_TOPIC_CONFIG (351), which Apache 4.9.7
    answers REQUEST_CODE_NOT_SUPPORTED."""
    run = java_client.run("admin", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          queues=3, count=9)
    addr = server.broker_addr
    (cluster,) = run.of("cluster")
    assert cluster["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    assert cluster["brokerAddrTable"] == {
        "broker-a": {"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": addr}}}
    (created,) = run.of("created")
    assert created["addr"] == addr
    (route,) = run.of("route")
    assert route["route"] == {
        "queueDatas": [{"brokerName": "broker-a", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6,
                        "topicSysFlag": 0}],
        "brokerDatas": [{"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": addr}}]}
    (topics,) = run.of("topics")
    assert topics["hasTopic"] and topics["hasTBW102"]

    sent = run.sent
    assert [e["queueId"] for e in sorted(sent, key=lambda e: e["i"])] == [i % 3 for i in range(9)]
    assert {e["status"] for e in sent} == {"SEND_OK"}
    views = {e["offsetMsgId"]: e for e in run.of("view")}
    for e in sent:  # viewMessage(offsetMsgId): VIEW_MESSAGE_BY_ID to the broker in the id
        v = views[e["offsetMsgId"]]
        assert (v["body"], v["keys"], v["queueId"], v["queueOffset"]) == \
            (e["body"], e["keys"], e["queueId"], e["queueOffset"]), (e, v)
    (window,) = run.of("sent_window")
    stats = {e["label"]: e for e in run.of("topic_stats")}
    after_send = stats["after send"]["queues"]
    assert sorted(after_send) == [f"broker-a/{q}" for q in range(3)]
    for q in range(3):
        s = after_send[f"broker-a/{q}"]
        assert (s["minOffset"], s["maxOffset"]) == (0, 3), s
        assert window["t0"] <= s["lastUpdateTimestamp"] <= window["t1"], (s, window)

    assert_received_exactly(sent, run.received)
    last_store = {q: max(e["storeTimestamp"] for e in run.received if e["queueId"] == q) for q in range(3)}
    for q in range(3):
        assert after_send[f"broker-a/{q}"]["lastUpdateTimestamp"] == last_store[q]
    (consumed,) = [e for e in run.of("consume_stats") if e["label"] == "consumed"]
    assert consumed["queues"] == {
        f"broker-a/{names.topic}/{q}": {"brokerOffset": 3, "consumerOffset": 3, "lastTimestamp": last_store[q]}
        for q in range(3)}

    assert run.of("deleted")
    (gone,) = run.of("route_after_delete")
    assert gone.get("code") == 17, gone  # TOPIC_NOT_EXIST from the NameServer
    (after,) = run.of("topics_after_delete")
    assert after["hasTopic"] is False
    assert stats["after delete"].get("code") == 17, stats["after delete"]


@pytest.mark.slow
@pytest.mark.compat_exclude("pyrmq", "client5")
@pytest.mark.compat_exclude("apache", "client5")
@pytest.mark.compat_exclude("pyrmq-split", "client5")
def test_producer_fails_over_to_the_other_broker(two_broker_cluster, java_client, names):
    """A topic on broker-a and broker-b (4 queues each); a sync producer with
    sendLatencyFaultEnable sends every 20 ms; broker-a is stopped (SIGTERM) mid-stream. The
    producer keeps succeeding on broker-b (a failed attempt is retried on the other broker);
    broker-a is started again and every SEND_OK message is read back from where its send result
    said it went, once. A send whose reply was lost in the stop may have been stored all the same
    (the Apache broker keeps it), and if the client retried it, again on broker-b: such extra
    copies are allowed, as the client promises no more, but only for the message in flight at the
    stop and never more copies than attempts. Client 4 only: the fault tolerance is the same in 5.x."""
    cluster = two_broker_cluster
    # 16 s of sends: the stop of an Apache broker can take several seconds, during which broker-a
    # still answers; the claim about the sends after the stop needs sends left to make it on.
    total = 800
    retries = 2
    producer = java_client.start("produce", namesrv=cluster.namesrv_addr, topic=names.topic, mode="sync",
                                 count=total, interval_ms=20, retries=retries, latency_fault=1, create_topic=4,
                                 expect_queues=8, send_timeout_ms=3000, deadline_ms=120_000)
    try:
        producer.wait_for(lambda evs: sum(e["ev"] == "sent" for e in evs) >= 100, timeout=60)
        started_stop = sum(e["ev"] in ("sent", "send_failed") for e in producer.events())
        code = cluster.stop_broker("broker-a")
        stopped_after = sum(e["ev"] == "sent" for e in producer.events())
        stopped = stopped_after + sum(e["ev"] == "send_failed" for e in producer.events())
        result = producer.wait().check()
    finally:
        producer.kill()
    assert code in cluster.graceful_exit_codes, code
    ok = [e for e in result.sent if e["status"] == "SEND_OK"]
    failed = result.of("send_failed")
    assert len(result.sent) + len(failed) == total
    assert {e["broker"] for e in result.sent[:100]} == {"broker-a", "broker-b"}
    # After the stop: everything that was acknowledged went to broker-b, and the producer kept
    # going (at most a couple of sends in flight during the stop may fail).
    assert total - stopped_after >= 100, f"broker-a's stop took {stopped_after - started_stop} sends"
    later = sorted(result.sent, key=lambda e: e["i"])[stopped_after + 5:]
    assert len(later) >= total - stopped_after - 10, (len(later), stopped_after)
    assert {e["broker"] for e in later} == {"broker-b"}
    assert len(failed) <= 2, failed
    for e in ok:  # each acknowledged message is on the broker its result named
        host, port, _ = decode_offset_msg_id(e["offsetMsgId"])
        assert f"{host}:{port}" == cluster.broker_addr(e["broker"]), e

    cluster.start_broker("broker-a")
    pulled = java_client.run("pull", namesrv=cluster.namesrv_addr, topic=names.topic, group=names.group)
    per_broker = Counter(e["broker"] for e in ok)
    assert per_broker["broker-a"] and per_broker["broker-b"]
    # pull reads every queue of both brokers from offset 0. Each SEND_OK message is there once at
    # the queue, queue offset and commit log offset its result named.
    stored = Counter((e["body"], e["queueId"], e["queueOffset"], e["commitLogOffset"]) for e in pulled.received)
    acknowledged = Counter((e["body"], e["queueId"], e["queueOffset"], decode_offset_msg_id(e["offsetMsgId"])[2])
                           for e in ok)
    assert {k: stored[k] for k in acknowledged} == acknowledged
    # Anything else is an earlier attempt of a send whose reply was lost: a body the producer sent,
    # under the msgId of that one send (a retry resends the same message), at most one copy per
    # attempt, and only for what was in flight while broker-a stopped (sync sends: i counts them;
    # 5 for the lag of reading the runner's output).
    attempted = {e["body"]: e["i"] for e in result.sent + failed}
    copies = Counter(e["body"] for e in pulled.received)
    assert set(copies) <= set(attempted), set(copies) - set(attempted)
    assert max(copies.values()) <= 1 + retries, copies.most_common(3)
    msg_ids: dict[str, set[str]] = {}
    for e in pulled.received:
        msg_ids.setdefault(e["body"], set()).add(e["msgId"])
    assert all(len(ids) == 1 for ids in msg_ids.values()), {b: ids for b, ids in msg_ids.items() if len(ids) > 1}
    assert all(msg_ids[e["body"]] == {e["msgId"]} for e in ok)
    extra = {e["body"] for e in pulled.received} - {body for body, *_ in acknowledged
                                                     if copies[body] == 1}
    in_flight = sorted(attempted[body] for body in extra)
    assert all(started_stop <= i <= stopped + 5 for i in in_flight), (in_flight, started_stop, stopped)


def test_admin_query_message_by_key(server, java_client, names):
    """DefaultMQAdminExt.queryMessage(topic, key): QUERY_MESSAGE (12) to each broker of the
    route, answered from the broker's index of message keys; every key k-i finds exactly its one
    message."""
    run = java_client.run("admin", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          queues=3, count=3)
    by_i = {e["i"]: e for e in run.sent}
    queried = {e["key"]: e.get("bodies", e.get("error")) for e in run.of("query_key")}
    assert queried == {f"k-{i}": [by_i[i]["body"]] for i in range(3)}

"""Consumer groups with the Java clients: orderly consumption with queue locks, broadcasting, and
a clustering group whose members join and leave while messages keep coming."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from compat_tests.checks import assert_received_exactly, assert_sent_ok

pytestmark = pytest.mark.compat


def test_orderly_per_key_order_and_lock_handoff(server, java_client, names):
    """8 keys x 10 messages sent with a MessageQueueSelector (queue = key % 4), consumed by
    MessageListenerOrderly. Consumer 0 locks all four queues (LOCK_BATCH_MQ); a lock request for
    them under another client id gets none. Half of each key is consumed by consumer 0; consumer
    1 joins and gets queues only as consumer 0 releases them; the second half is consumed by
    whoever holds the key's queue. Per key the seqs arrive in order, every message once; per
    queue the consumer changes at most once (0 ... 0 then 1 ... 1). Consumer 0 leaves and
    consumer 1 locks all four; after it leaves too the locks are free (another client id gets
    all four), and UNLOCK_BATCH_MQ frees them again."""
    keys, per_key = 8, 10
    run = java_client.run("orderly", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          keys=keys, per_key=per_key, create_topic=4, timeout_ms=120_000, deadline_ms=150_000)
    sent, received = run.sent, run.received
    assert len(sent) == keys * per_key and {e["status"] for e in sent} == {"SEND_OK"}
    assert all(e["queueId"] == e["key"] % 4 for e in sent), "selector not honoured"
    for q in range(4):  # per queue, dense offsets in send order
        offsets = [e["queueOffset"] for e in sent if e["queueId"] == q]
        assert offsets == list(range(len(offsets))), (q, offsets)

    counts = Counter(e["body"] for e in received)
    assert set(counts) == {e["body"] for e in sent}, "missing or extra messages"
    assert set(counts.values()) == {1}, {b: n for b, n in counts.items() if n > 1}
    by_body = {e["body"]: e for e in sent}
    for r in received:
        s = by_body[r["body"]]
        assert (r["queueId"], r["queueOffset"], r["keys"], r["tags"]) == \
            (s["queueId"], s["queueOffset"], s["keys"], s["tags"]), (s, r)

    # Per key, in the order the listener saw them (one JSON line at a time): 0, 1, ..., 9.
    per_key_seqs: dict[int, list[int]] = defaultdict(list)
    per_queue_consumers: dict[int, list[int]] = defaultdict(list)
    for r in received:
        key, seq = r["body"][1:].split("-")
        per_key_seqs[int(key)].append(int(seq))
        per_queue_consumers[r["queueId"]].append(r["c"])
    assert per_key_seqs == {k: list(range(per_key)) for k in range(keys)}
    for q, consumers in per_queue_consumers.items():
        assert consumers == sorted(consumers), f"queue {q} went back and forth: {consumers}"

    probes = {p["when"]: p["locked"] for p in run.of("probe")}
    assert probes == {"held": [], "released": [0, 1, 2, 3], "unlocked": [0, 1, 2, 3]}

    balanced = {b["phase"]: b["assignment"] for b in run.of("balanced")}
    assert balanced["one"] == [[0, 1, 2, 3]]
    a0, a1 = (set(a) for a in balanced["two"])
    assert a0 and a1 and not a0 & a1 and a0 | a1 == {0, 1, 2, 3}
    assert balanced["handover"] == [[0, 1, 2, 3]]
    assert {r["c"] for r in received if r.get("phase") == 1} == {0}
    for r in received:
        if r.get("phase") == 2:
            assert r["queueId"] in (a0, a1)[r["c"]], r


def test_broadcasting_consumers_each_get_everything(server, java_client, names):
    """Two consumers of one group in BROADCASTING mode: each holds all four queues and receives
    all 20 messages once; offsets live in the client (LocalFileOffsetStore, at each queue's end)
    and the broker has none for the group (consume stats: consumerOffset 0 everywhere)."""
    count = 20
    run = java_client.run("broadcast", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          consumers=2, count=count, create_topic=4)
    assert_sent_ok(run.sent, count, server)
    for c in (0, 1):
        assert_received_exactly(run.sent, [e for e in run.received if e["c"] == c])
    (balanced,) = run.of("balanced")
    assert balanced["assignment"] == [[0, 1, 2, 3], [0, 1, 2, 3]]
    per_queue = Counter(e["queueId"] for e in run.sent)
    for e in run.of("client_offsets"):
        assert e["store"] == "LocalFileOffsetStore", e
        assert e["offsets"] == {str(q): per_queue[q] for q in range(4)}, e
    (stats,) = run.of("consume_stats")
    assert stats["queues"] == {
        f"broker-a/{names.topic}/{q}": {"brokerOffset": per_queue[q], "consumerOffset": 0, "lastTimestamp": 0}
        for q in range(4)}, stats


@pytest.mark.slow
@pytest.mark.compat_exclude("pyrmq", "client5")
@pytest.mark.compat_exclude("apache", "client5")
@pytest.mark.compat_exclude("pyrmq-split", "client5")
def test_clustering_consumers_join_and_leave(server, java_client, names):
    """A producer sends every 20 ms while consumer 0 runs alone, consumer 1 joins, consumer 2
    joins and consumer 1 leaves. After each change the group settles (disjoint queue sets
    covering the 4 queues) well within the clients' 20 s rebalance interval; the union of what
    the consumers received is exactly what was sent (clustering is at-least-once: a message may
    come twice around a rebalance, then to two different consumers). Client 4 only: the
    rebalance and offset logic is the same in 5.x."""
    run = java_client.run("churn", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          create_topic=4, interval_ms=20, step_ms=1500, timeout_ms=100_000, deadline_ms=150_000)
    sent = run.sent
    assert not run.of("send_failed"), run.of("send_failed")[:3]
    assert len(sent) >= 100 and {e["status"] for e in sent} == {"SEND_OK"}
    sent_bodies = {e["body"] for e in sent}
    got = Counter(e["body"] for e in run.received)
    missing = sent_bodies - got.keys()
    assert not missing, f"{len(missing)} lost: {sorted(missing)[:10]}"
    assert got.keys() <= sent_bodies
    balanced = {b["phase"]: b for b in run.of("balanced")}
    assert list(balanced) == ["c0", "c1 joined", "c2 joined", "c1 left"]
    assert [len(b["assignment"]) for b in balanced.values()] == [1, 2, 3, 2]
    slow = {p: b["ms"] for p, b in balanced.items() if b["ms"] > 20_000}
    assert not slow, f"rebalances slower than the 20 s interval: {slow}"
    assert {e["c"] for e in run.received} == {0, 1, 2}
    receivers: dict[str, set[int]] = defaultdict(set)
    for e in run.received:
        receivers[e["body"]].add(e["c"])
    dups = {b: n for b, n in got.items() if n > 1}
    same_consumer = [b for b in dups if len(receivers[b]) < 2]
    assert not same_consumer, f"delivered twice to the same consumer: {same_consumer[:10]}"
    print(f"churn: {len(sent)} sent, {len(dups)} delivered twice across rebalances, "
          f"settle times {[b['ms'] for b in balanced.values()]} ms")

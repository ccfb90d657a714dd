"""The official Go client (rocketmq-client-go/v2) as consumer: push (clustering), push with a tag
expression, two push consumers sharing a group, and the Go pull consumer (PullFrom and Poll/ACK).

Messages are sent with the Go producer (sync, round robin over the 4 queues of the auto-created
topic). Consumers start from the first offset (a new group has no committed offset; the Go
client's default would be the last offset). The Go client pulls with a 20 s suspend time, never
sends UNREGISTER_CLIENT, and rebalances on NOTIFY_CONSUMER_IDS_CHANGED and every 20 s, so the
waits are generous while the assertions are exact.
"""

from __future__ import annotations

import pytest

from compat_tests import goclient
from compat_tests.checks import (
    assert_dense_queues,
    assert_received_exactly,
    assert_sent_ok,
    assert_two_consumers_split,
    seed_group_offset,
    wait_committed_offsets,
)

pytestmark = pytest.mark.compat

COUNT = 30
TAGS = "TagA,TagB,TagC"


@pytest.fixture(scope="session")
def go_client(tmp_path_factory) -> goclient.GoClient:
    return goclient.session_client(tmp_path_factory)


def _produce(go_client, server, names, count=COUNT, tags=TAGS):
    produced = go_client.run("send-sync", namesrv=server.namesrv_addr, topic=names.topic, count=count, tags=tags)
    assert_sent_ok(produced.sent, count, server)
    return produced


def test_go_push_consumer_receives_all(server, go_client, names):
    produced = _produce(go_client, server, names)
    consumed = go_client.run("push-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                             count=COUNT, idle_ms=1000)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(produced.sent, consumed.received)
    assert {e["reconsumeTimes"] for e in consumed.received} == {0}
    assert {e["topic"] for e in consumed.received} == {names.topic}
    assert {e["storeHost"] for e in consumed.received} == {server.broker_addr}
    assert_dense_queues(consumed.received)


def test_go_push_consumer_tag_filter(server, go_client, names):
    produced = _produce(go_client, server, names)
    wanted = [e for e in produced.sent if e["tags"] in ("TagA", "TagC")]
    assert len(wanted) == 20
    consumed = go_client.run("push-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                             tag_expr="TagA || TagC", count=len(wanted), idle_ms=1500)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(wanted, consumed.received)


def test_go_two_push_consumers_split_queues(server, go_client, names):
    """Two Go push consumers (two client instances, one process) in one group: once both see two
    members they hold disjoint non-empty queue sets covering all 4; then 40 messages are sent and
    each consumer receives exactly those of its own queues, every message once."""
    count = 40
    run = go_client.run("push-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                        consumers=2, create_topic=4, broker=server.broker_addr, produce=count, idle_ms=1500)
    assert_two_consumers_split(run, server, count)


@pytest.mark.parametrize("tag_expr", ["*", "TagB"])
def test_go_pull_consumer_pull_from(tag_expr, server, go_client, names):
    """The Go pull consumer's PullFrom over every queue from offset 0: exactly the matching messages,
    each queue read to the max offset the broker reports (= messages sent to it)."""
    produced = _produce(go_client, server, names, count=24)
    wanted = [e for e in produced.sent if tag_expr == "*" or e["tags"] == tag_expr]
    pulled = go_client.run("pull-consume", mode="from", namesrv=server.namesrv_addr, topic=names.topic,
                           group=names.group, tag_expr=tag_expr)
    assert_received_exactly(wanted, pulled.received)
    pulls = pulled.of("pull")
    assert all(p["status"] in ("FOUND", "NO_MATCHED_MSG") for p in pulls), pulls
    last = {}
    for p in pulls:
        assert p["offset"] == last.get(p["queueId"], {"nextBeginOffset": 0})["nextBeginOffset"], p
        last[p["queueId"]] = p
    sent_per_queue = {q: sum(1 for e in produced.sent if e["queueId"] == q) for q in range(4)}
    assert {q: p["maxOffset"] for q, p in last.items()} == sent_per_queue
    assert {q: p["nextBeginOffset"] for q, p in last.items()} == sent_per_queue


def test_go_pull_consumer_poll(server, go_client, names):
    """The Go pull consumer's own rebalancing and background pulls, consumed with Poll and ACK."""
    produced = _produce(go_client, server, names)
    consumed = go_client.run("pull-consume", mode="poll", namesrv=server.namesrv_addr, topic=names.topic,
                             group=names.group, count=COUNT, idle_ms=1000)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(produced.sent, consumed.received)


def test_go_consumer_group_resumes_from_committed_offsets(server, go_client, names):
    """The Go consumer commits with UPDATE_CONSUMER_OFFSET (15, oneway: every 5 s and at shutdown,
    just before it closes the connection). The broker holds exactly the consumed offsets, and the
    next consumer of the group gets only what was sent afterwards."""
    first = _produce(go_client, server, names, count=20)
    seed_group_offset(server, names.group, names.topic)
    consumed = go_client.run("push-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                             count=20, idle_ms=500)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(first.sent, consumed.received)
    per_queue = {q: sum(1 for e in first.sent if e["queueId"] == q) for q in range(4)}
    wait_committed_offsets(server, names.group, names.topic, per_queue)

    second = go_client.run("send-sync", namesrv=server.namesrv_addr, topic=names.topic, count=10, first=20,
                           tags=TAGS)
    assert_sent_ok_continued(second.sent, per_queue)
    resumed = go_client.run("push-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                            count=10, idle_ms=1500)
    assert resumed.summary["complete"], resumed.describe()
    assert_received_exactly(second.sent, resumed.received)


def assert_sent_ok_continued(sent, before):
    """SEND_OK, and each queue's offsets continue densely from what it held before."""
    assert all(e["status"] == "SEND_OK" for e in sent), sent
    for q in range(4):
        offsets = sorted(e["queueOffset"] for e in sent if e["queueId"] == q)
        assert offsets == list(range(before[q], before[q] + len(offsets))), (q, offsets)


def test_go_orderly_push_consumer(server, go_client, names):
    """An orderly Go consumer locks its queues (LOCK_BATCH_MQ) and consumes each queue in offset order."""
    produced = _produce(go_client, server, names)
    consumed = go_client.run("push-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                             count=COUNT, orderly="true", idle_ms=1000)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(produced.sent, consumed.received)
    for q in range(4):
        order = [e["queueOffset"] for e in consumed.received if e["queueId"] == q]
        assert order == list(range(len(order))), f"queue {q} consumed out of order: {order}"


def test_go_compressed_bodies(server, go_client, names):
    """Bodies over 4 KiB: the Go producer zlib-compresses them and sets sysFlag bit 0; the broker
    stores and serves them as they are and the Go consumer inflates them."""
    count = 8
    produced = go_client.run("send-sync", namesrv=server.namesrv_addr, topic=names.topic, count=count,
                             body_size=6000)
    assert_sent_ok(produced.sent, count, server)
    assert all(len(e["body"]) == 6000 for e in produced.sent)
    consumed = go_client.run("push-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                             count=count, idle_ms=1000)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(produced.sent, consumed.received)
    assert all(e["sysFlag"] & 1 for e in consumed.received), [e["sysFlag"] for e in consumed.received]


def test_go_push_consumer_retry(server, go_client, names):
    """A failed delivery (ConsumeRetryLater, delay level 1) is sent back with CONSUMER_SEND_MSG_BACK
    (36); the broker redelivers it about 1 s later through %RETRY%<group> with reconsumeTimes 1, the
    same msgId, and the Go client shows it under the original topic. The Go client ignores the
    response code of 36: a broker that does not handle it silently loses the message."""
    count = 6
    produced = _produce(go_client, server, names, count=count)
    consumed = go_client.run("push-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                             count=count, retry_first="true", idle_ms=1500, deadline_ms=15_000)
    assert consumed.summary["complete"], consumed.describe()
    first = [e for e in consumed.received if e["reconsumeTimes"] == 0]
    again = [e for e in consumed.received if e["reconsumeTimes"] == 1]
    assert len(first) + len(again) == len(consumed.received)
    assert_received_exactly(produced.sent, first)
    assert sorted(e["body"] for e in again) == sorted(e["body"] for e in produced.sent)
    sent_by_body = {e["body"]: e for e in produced.sent}
    for e in again:
        s = sent_by_body[e["body"]]
        assert (e["msgId"], e["tags"], e["keys"], e["seq"]) == (s["msgId"], s["tags"], s["keys"], str(s["i"])), e
        assert e["topic"] == names.topic and e["retryTopic"] == names.topic, e

"""pyrmq.client (the Python client) with the Java 4.9.8 client, on pyrmq and on the Apache 4.9.7
reference: a Java push consumer receives exactly what pyrmq.client sent (single sends, a batch, a
compressed body), and pyrmq.client's pull consumer reads exactly what the Java producer sent and
commits the group's offsets on the broker.  The 5.x client adds nothing here (client4 only)."""

from __future__ import annotations

import pytest
import trio

from compat_tests.checks import assert_received_exactly, assert_sent_ok
from pyrmq.client import OutgoingMessage
from pyrmq.client.sync import Producer, PullConsumer
from pyrmq.codec.admin_bodies import ConsumerConnection, ConsumeStats
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient

pytestmark = [pytest.mark.compat, pytest.mark.compat_exclude("pyrmq", "client5"),
              pytest.mark.compat_exclude("apache", "client5"), pytest.mark.compat_exclude("pyrmq-split", "client5")]

COUNT = 12      # single sends; then one batch of BATCH
BATCH = 3
BIG = 10_000    # over the 4 KiB compression threshold


def _sent_event(i: int, body: str, tags: str, keys: str, result, entry: int = 0) -> dict:
    """A send as the Java runner reports it (compat_tests/checks.py reads these fields)."""
    return {"i": i, "body": body, "tags": tags, "keys": keys, "status": result.status.value,
            "msgId": result.msg_id.split(",")[entry], "offsetMsgId": result.offset_msg_id.split(",")[entry],
            "queueId": result.queue.queue_id, "queueOffset": result.queue_offset + entry}


def _admin_view(server, group: str) -> tuple[int, ConsumerConnection, ConsumeStats]:
    """What mqadmin consumerProgress reads: the route of the group's retry topic (made by the
    broker at the group's first heartbeat), the group's connections, its consume stats."""
    async def ask() -> tuple[int, ConsumerConnection, ConsumeStats]:
        async with RemotingClient() as client:
            route = await client.invoke(server.namesrv_addr, make_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"%RETRY%{group}"}))
            connection = await client.invoke(server.broker_addr, make_request(
                RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}))
            stats = await client.invoke(server.broker_addr, make_request(
                RequestCode.GET_CONSUME_STATS, {"consumerGroup": group}))
            assert connection.code == 0 and stats.code == 0, (connection.remark, stats.remark)
            return route.code, ConsumerConnection.decode(connection.body), ConsumeStats.decode(stats.body)
    return trio.run(ask)


def test_java_consumes_what_pyrmq_client_sent(server, java_client, names):
    sent = []
    with Producer(server.namesrv_addr, names.group + "_pg", timeout=10) as producer:
        for i in range(COUNT):
            body = f"{names.topic}-{i}" + ("-" + "x" * BIG if i == COUNT - 1 else "")
            tags, keys = ("TagA", "TagB")[i % 2], f"k-{i}"
            result = producer.send(names.topic, body.encode(), tags=tags, keys=keys, properties={"seq": str(i)})
            sent.append(_sent_event(i, body, tags, keys, result))
        batch = [OutgoingMessage(f"{names.topic}-{i}".encode(), tags="TagC", keys=f"k-{i}", properties={"seq": str(i)})
                 for i in range(COUNT, COUNT + BATCH)]
        result = producer.send_batch(names.topic, batch)
        sent += [_sent_event(COUNT + j, m.body.decode(), "TagC", f"k-{COUNT + j}", result, j)
                 for j, m in enumerate(batch)]
    assert_sent_ok(sent, COUNT + BATCH, server)
    consumed = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                               count=COUNT + BATCH, idle_ms=500)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(sent, consumed.received)
    flags = {e["body"]: e["sysFlag"] | 0x1 for e in consumed.received}   # Java may clear bit 0 after inflating
    assert flags.pop(sent[COUNT - 1]["body"]) == 0x301   # COMPRESSED | ZLIB, as the Java producer sets
    assert set(flags.values()) == {0x1}


def test_pyrmq_client_pulls_what_java_sent(server, java_client, names):
    produced = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync",
                               count=COUNT, tags="TagA,TagB")
    assert_sent_ok(produced.sent, COUNT, server)
    received, tag_b = [], []
    with PullConsumer(server.namesrv_addr, names.group, timeout=10) as consumer:
        queues = consumer.fetch_queues(names.topic)
        assert sorted(mq.queue_id for mq in queues) == [0, 1, 2, 3]
        for mq in queues:
            offset = max(consumer.query_offset(mq), 0)
            while True:
                result = consumer.pull(mq, offset)
                if result.status.value != "FOUND":
                    assert result.status.value == "NO_NEW_MSG" and result.max_offset == offset
                    break
                received += [{"body": m.body.decode(), "tags": m.tags, "keys": m.keys, "seq": m.properties.get("seq"),
                              "msgId": m.msg_id, "queueId": m.queue_id, "queueOffset": m.queue_offset,
                              "commitLogOffset": m.commit_log_offset} for m in result.messages]
                offset = result.next_begin_offset
            consumer.update_offset(mq, offset)
            assert consumer.query_offset(mq) == offset == consumer.max_offset(mq)
            tag_b += [m.body.decode() for m in consumer.pull(mq, 0, tag_expression="TagB").messages]
        # While it runs, the group is online with its subscription and its committed offsets.
        route_code, connection, stats = _admin_view(server, names.group)
        assert route_code == 0
        assert [c.client_id for c in connection.connection_set] == [consumer.client_id]
        assert connection.consume_type == "CONSUME_ACTIVELY" and names.topic in connection.subscription_table
        assert {mq.queue_id: (w.consumer_offset, w.broker_offset) for mq, w in stats.offset_table.items()
                if mq.topic == names.topic} == {mq.queue_id: (n, n) for mq, n in
                                                ((mq, consumer.max_offset(mq)) for mq in queues)}
    assert_received_exactly(produced.sent, received)
    assert sorted(tag_b) == sorted(e["body"] for e in produced.sent if e["tags"] == "TagB")

"""The ``rocketmq`` stream source and sink against a pyrmq broker process, through the remoting
protocol: a query with a checkpoint reads every message exactly once across a restart and
commits the group's offsets; the sink's rows arrive with bodies, tags, keys and properties."""

from __future__ import annotations

import time

import pytest

from compat_tests.servers import PyrmqServer, ServerConfig, allocate_ports
from pyrmq.client.sync import Producer, PullConsumer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    server = PyrmqServer(ServerConfig(tmp_path_factory.mktemp("stream-broker"), allocate_ports()))
    try:
        server.start()
        yield server
    finally:
        server.close()


def _produce(namesrv: str, topic: str, first: int, count: int) -> dict[str, bytes]:
    sent = {}
    with Producer(namesrv, "stream_test_pg", timeout=10) as producer:
        for i in range(first, first + count):
            body = f"m-{i}".encode()
            sent[producer.send(topic, body, tags=f"T{i % 3}", keys=f"k-{i}").msg_id] = body
    return sent


def _run_until_caught_up(spark, namesrv, topic, group, checkpoint, out, **options):
    reader = (spark.readStream.format("rocketmq").option("namesrv", namesrv).option("topic", topic)
              .option("consumerGroup", group))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        wait_group_caught_up(namesrv, topic, group)
    finally:
        query.stop()


def wait_group_caught_up(namesrv: str, topic: str, group: str, timeout: float = 20.0) -> None:
    """The group's offsets on the broker reach the queues' ends while the query runs: stored at
    the first trigger after the last batch completed (a trigger fires every 200 ms here)."""
    with PullConsumer(namesrv, group, timeout=10) as consumer:   # a pull client: no rebalance to disturb
        queues = consumer.fetch_queues(topic)
        deadline = time.monotonic() + timeout
        while True:
            lag = {mq.queue_id: consumer.max_offset(mq) - consumer.query_offset(mq) for mq in queues}
            if not any(lag.values()):
                return
            assert time.monotonic() < deadline, f"group {group} still lags by {lag}"
            time.sleep(0.2)


def test_stream_reads_every_message_once_across_a_restart(spark, broker, tmp_path):
    namesrv, topic, group = broker.namesrv_addr, "StreamT", "stream_test_cg"
    sent = _produce(namesrv, topic, 0, 40)
    checkpoint, out = str(tmp_path / "checkpoint"), str(tmp_path / "out")

    _run_until_caught_up(spark, namesrv, topic, group, checkpoint, out, maxMessagesPerTrigger="7")
    rows = spark.read.parquet(out).collect()
    assert sorted((r.msg_id, bytes(r.body)) for r in rows) == sorted(sent.items())

    sent.update(_produce(namesrv, topic, 40, 25))   # while no query runs; then the query restarts
    _run_until_caught_up(spark, namesrv, topic, group, checkpoint, out)
    rows = spark.read.parquet(out).collect()
    assert len(rows) == 65
    assert sorted((r.msg_id, bytes(r.body)) for r in rows) == sorted(sent.items())
    by_id = {r.msg_id: r for r in rows}
    some = by_id[next(iter(sent))]
    assert some.topic == topic and some.tags in ("T0", "T1", "T2") and some.keys.startswith("k-")
    assert len({(r.queue_id, r.queue_offset) for r in rows}) == 65   # no queue offset twice

    # The group's offsets on the broker stayed where the query stopped: the queues' ends.
    with PullConsumer(namesrv, group, timeout=10) as consumer:
        for mq in consumer.fetch_queues(topic):
            assert consumer.query_offset(mq) == consumer.max_offset(mq), mq


def test_sink_sends_rows_with_tags_keys_and_properties(spark, broker):
    namesrv, topic = broker.namesrv_addr, "SinkT"
    rows = [(f"body-{i}".encode(), f"Tag{i % 2}", f"key-{i} alt-{i}", {"seq": str(i)}) for i in range(30)]
    df = spark.createDataFrame(rows, "body binary, tags string, keys string, properties map<string,string>")
    df.repartition(3).write.format("rocketmq").option("namesrv", namesrv).option("topic", topic).mode("append").save()

    got = {}
    with PullConsumer(namesrv, "sink_test_cg", timeout=10) as consumer:
        for mq in consumer.fetch_queues(topic):
            offset, end = consumer.min_offset(mq), consumer.max_offset(mq)
            while offset < end:
                result = consumer.pull(mq, offset, max_nums=32)
                for m in result.messages:
                    got[m.body] = (m.tags, m.keys, m.properties.get("seq"))
                offset = result.next_begin_offset
    assert got == {body: (tags, keys, props["seq"]) for body, tags, keys, props in rows}

"""The Spark ``rocketmq`` stream source and sink with the official Java client 4.9.8, on pyrmq and
on the Apache 4.9.7 reference: a streaming query reads a topic while the Java producer sends to
it, is stopped mid-stream and restarted from its checkpoint, and has every message exactly once;
the sink's messages reach a Java push consumer with bodies, tags, keys and properties intact."""

from __future__ import annotations

import time

import pytest

from pyrmq.client.sync import PullConsumer
from tests.spark.conftest import spark  # noqa: F401  (the shared local[2] SparkSession)
from tests.spark.test_stream import wait_group_caught_up

pytestmark = [pytest.mark.compat, pytest.mark.slow,
              pytest.mark.compat_exclude("pyrmq", "client5"), pytest.mark.compat_exclude("apache", "client5"),
              pytest.mark.compat_exclude("pyrmq-split", "client5")]

COUNT = 120
INTERVAL_MS = 25
FIRST_QUERY_ROWS = 20   # the first query is stopped once it has written at least this many


def _start_query(spark, server, names, checkpoint, out):  # noqa: F811
    return (spark.readStream.format("rocketmq").option("namesrv", server.namesrv_addr)
            .option("topic", names.topic).option("consumerGroup", names.group).option("maxMessagesPerTrigger", "10")
            .load().writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds").start())


def _written(spark, out) -> int:  # noqa: F811
    try:
        return spark.read.parquet(out).count()
    except Exception:   # no batch committed yet: the path has no files and no metadata
        return 0


def test_stream_has_every_java_message_once_across_a_query_restart(spark, server, java_client, names, tmp_path):  # noqa: F811
    checkpoint, out = str(tmp_path / "checkpoint"), str(tmp_path / "out")
    # The topic exists before the query plans its queues (a topic made by the first send could
    # come up after the query's first look).
    java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, count=1, body_prefix="warm",
                    create_topic=4)
    producer = java_client.start("produce", namesrv=server.namesrv_addr, topic=names.topic, count=COUNT,
                                 interval_ms=INTERVAL_MS, tags="TagA,TagB")
    query = _start_query(spark, server, names, checkpoint, out)
    try:
        deadline = time.monotonic() + 120
        while _written(spark, out) < FIRST_QUERY_ROWS:
            assert time.monotonic() < deadline, "the first query wrote nothing in 120 s"
            assert query.exception() is None, query.exception()
            time.sleep(0.2)
    finally:
        query.stop()   # mid-stream: at 10 messages a trigger the query cannot have caught up
    first_rows = _written(spark, out)
    produced = producer.wait().check()
    # (not checks.assert_sent_ok: the warm-up message took an offset, the topic is not fresh)
    assert sorted(e["i"] for e in produced.sent) == list(range(COUNT))
    assert {e["status"] for e in produced.sent} == {"SEND_OK"}
    assert len({e["msgId"] for e in produced.sent}) == COUNT

    query = _start_query(spark, server, names, checkpoint, out)
    try:
        query.processAllAvailable()
        wait_group_caught_up(server.namesrv_addr, names.topic, names.group)
    finally:
        query.stop()

    rows = [r for r in spark.read.parquet(out).collect() if not bytes(r.body).startswith(b"warm")]
    assert FIRST_QUERY_ROWS <= first_rows < COUNT   # the restarted query read the rest
    got = sorted((r.msg_id, bytes(r.body).decode(), r.tags, r.keys, r.properties["seq"]) for r in rows)
    assert got == sorted((e["msgId"], e["body"], e["tags"], e["keys"], str(e["i"])) for e in produced.sent)
    with PullConsumer(server.namesrv_addr, names.group, timeout=10) as consumer:
        for mq in consumer.fetch_queues(names.topic):
            assert consumer.query_offset(mq) == consumer.max_offset(mq), mq


def test_java_consumes_what_the_spark_sink_sent(spark, server, java_client, names):  # noqa: F811
    rows = [(f"{names.topic}-{i}".encode() + (b"-" + b"z" * 5000 if i == 7 else b""), ("TagA", "TagB")[i % 2],
             f"k-{i}", {"seq": str(i)}) for i in range(24)]
    df = spark.createDataFrame(rows, "body binary, tags string, keys string, properties map<string,string>")
    df.repartition(3).write.format("rocketmq").option("namesrv", server.namesrv_addr) \
        .option("topic", names.topic).mode("append").save()
    consumed = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                               count=len(rows), idle_ms=500)
    assert consumed.summary["complete"], consumed.describe()
    got = sorted((e["body"], e["tags"], e["keys"], e["seq"]) for e in consumed.received)
    assert got == sorted((body.decode(), tags, keys, props["seq"]) for body, tags, keys, props in rows)

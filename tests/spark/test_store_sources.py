"""The store-file data sources against a known mix written by pyrmq, and a store written by
Apache RocketMQ 4.9.8 (tests/fixtures/store): every row, push-down counted, damage reported."""

from __future__ import annotations

import datetime as dt

import pytest

from pyrmq.codec.message import java_string_hash, tags_string_to_tags_code
from pyrmq_spark.stats_sink import read_stats

pytestmark = pytest.mark.slow

CL = "rocketmq_commitlog"


def _rows(df):
    return [r.asDict() for r in df.collect()]


def test_commitlog_returns_exactly_the_messages_sent(spark, mixed_store):
    rows = _rows(spark.read.format(CL).option("decompress", "true").load(mixed_store.root))
    good = {r["phy_offset"]: r for r in rows if r["_corrupt"] is None}
    expected = {s.phy_offset: s for s in [*mixed_store.sent, mixed_store.delayed_copy]}
    schedule = good.pop(mixed_store.schedule_record_offset)
    assert set(good) == set(expected)
    for offset, s in expected.items():
        r = good[offset]
        assert (r["topic"], r["queue_id"], r["queue_offset"], r["tags"], r["body"]) == \
            (s.topic, s.queue_id, s.queue_offset, s.tags, s.body), offset
        assert r["keys"] == s.keys and r["sys_flag"] & 0x701 == s.sys_flag
        assert r["uniq_key"] and r["properties"]["UNIQ_KEY"] == r["uniq_key"]
        assert r["store_host"].startswith("127.0.0.1:") and r["born_host"]
        assert r["store_timestamp"] >= r["born_timestamp"] - dt.timedelta(seconds=5)
        assert r["store_size"] > len(s.stored_body) and r["reconsume_times"] == 0
        assert r["flag"] == 7   # what tests/broker/rmq.send sends
    # the delayed message: parked in SCHEDULE_TOPIC_XXXX (queue = level - 1), then delivered
    assert (schedule["topic"], schedule["queue_id"]) == ("SCHEDULE_TOPIC_XXXX", 0)
    assert schedule["properties"]["REAL_TOPIC"] == "TopicD" and schedule["properties"]["DELAY"] == "1"
    assert good[mixed_store.delayed_copy.phy_offset]["properties"]["REAL_QID"] == "3"
    # the damage: one row for the overwritten head (its bytes, nothing decoded), one for the bad CRC
    corrupt = sorted((r for r in rows if r["_corrupt"] is not None), key=lambda r: r["phy_offset"])
    head, crc = corrupt
    victim = mixed_store.head_damaged
    assert head["phy_offset"] == victim.phy_offset and head["topic"] is None and head["body"] is None
    next_record = min(s.phy_offset for s in mixed_store.sent if s.phy_offset > victim.phy_offset)
    assert head["store_size"] == next_record - victim.phy_offset   # the damaged range ends where it resynchronised
    assert (crc["phy_offset"], crc["topic"], crc["queue_offset"]) == \
        (mixed_store.crc_damaged.phy_offset, "TopicV", mixed_store.crc_damaged.queue_offset)
    assert "CRC" in crc["_corrupt"]
    # without decompress the stored (compressed) bytes come back
    raw = {r["phy_offset"]: r["body"] for r in _rows(
        spark.read.format(CL).schema("phy_offset bigint, body binary").load(mixed_store.root))}
    for s in mixed_store.sent:
        assert raw[s.phy_offset] == s.stored_body


def _stats(tmp_path, name):
    return read_stats(str(tmp_path / name))


def test_pushdown_decodes_only_the_matching_records(spark, mixed_store, tmp_path):
    valid = len(mixed_store.sent) + 3   # + the CRC-damaged one, the schedule record and the delivered copy
    df = (spark.read.format(CL).option("statsDir", str(tmp_path / "q1")).load(mixed_store.root)
          .filter("topic = 'TopicB' and queue_id = 0"))
    got = sorted(r["body"] for r in df.select("body").collect())
    want = sorted(s.body for s in mixed_store.sent if s.topic == "TopicB" and s.queue_id == 0)
    assert got == want
    stats = _stats(tmp_path, "q1")
    assert sum(s["records"] for s in stats) == valid
    assert sum(s["decoded"] for s in stats) == len(want)

    # time and offset bounds: the second segment only, and the partition of the first is never planned
    second = min(s.phy_offset for s in mixed_store.sent if s.topic == "TopicBig")
    t0 = dt.datetime(2000, 1, 1)
    df = (spark.read.format(CL).option("statsDir", str(tmp_path / "q2")).load(mixed_store.root)
          .filter(f"phy_offset >= {second} and store_timestamp > timestamp'{t0}' and topic in ('TopicA', 'TopicBig')"))
    assert sorted(r["phy_offset"] for r in df.select("phy_offset").collect()) == \
        sorted(s.phy_offset for s in mixed_store.sent if s.phy_offset >= second and s.topic in ("TopicA", "TopicBig"))
    stats = _stats(tmp_path, "q2")
    assert len(stats) == 1 and stats[0]["decoded"] == 2 and stats[0]["records"] == 4

    # a Spark without push-down: the same through options
    df = (spark.read.format(CL).option("pushdown", "false").option("topic", "TopicC").option("queueId", "1")
          .option("statsDir", str(tmp_path / "q3")).option("decompress", "true").load(mixed_store.root))
    assert [r["keys"] for r in df.collect()] == ["lz4"]
    assert sum(s["decoded"] for s in _stats(tmp_path, "q3")) == 1


def test_skip_mode_splits_and_pruned_schema(spark, mixed_store, tmp_path):
    df = spark.read.format(CL).option("corrupt", "skip").option("statsDir", str(tmp_path / "s")).load(mixed_store.root)
    assert df.filter("_corrupt is not null").count() == 0
    assert sum(s["corrupt"] for s in _stats(tmp_path, "s")) == 2
    assert sum(s["torn_tails"] for s in _stats(tmp_path, "s")) == 1
    whole = sorted(r["phy_offset"] for r in spark.read.format(CL).load(mixed_store.root).select("phy_offset").collect())
    small = spark.read.format(CL).schema("topic string, phy_offset bigint, store_size int, _corrupt string") \
        .option("splitBytes", "1024").load(mixed_store.root)
    assert small.rdd.getNumPartitions() > 4
    assert sorted(r["phy_offset"] for r in small.collect()) == whole
    with pytest.raises(Exception, match="no column"):
        spark.read.format(CL).schema("nonsense int").load(mixed_store.root).collect()


def test_consume_queue_rows(spark, mixed_store):
    rows = _rows(spark.read.format("rocketmq_consumequeue").load(mixed_store.root))
    by_key = {(r["topic"], r["queue_id"], r["queue_offset"]): r for r in rows}
    # dispatched before the damage: the damaged records have their units too
    everything = [*mixed_store.sent, mixed_store.head_damaged, mixed_store.crc_damaged, mixed_store.delayed_copy]
    for s in everything:
        r = by_key[(s.topic, s.queue_id, s.queue_offset)]
        assert r["phy_offset"] == s.phy_offset and r["ext_offset"] is None
        assert r["tags_code"] == (tags_string_to_tags_code(s.tags) if s.tags else 0)
    [sched] = [r for r in rows if r["topic"] == "SCHEDULE_TOPIC_XXXX"]
    assert sched["phy_offset"] == mixed_store.schedule_record_offset
    assert len(rows) == len(everything) + 1
    only = spark.read.format("rocketmq_consumequeue").option("topic", "TopicB").load(mixed_store.root)
    assert only.count() == sum(1 for s in everything if s.topic == "TopicB")


def _key_hash(key: str) -> int:
    h = abs(java_string_hash(key))
    return h if h >= 0 else 0


def test_index_rows(spark, mixed_store):
    rows = _rows(spark.read.format("rocketmq_index").load(mixed_store.root))
    items = {(r["key_hash"], r["phy_offset"]) for r in rows}
    for s in mixed_store.sent:
        for k in (s.keys or "").split():
            assert (_key_hash(f"{s.topic}#{k}"), s.phy_offset) in items, (s.topic, k)
    assert all(r["slot"] == r["key_hash"] % 5_000_000 for r in rows)
    assert sorted(r["item"] for r in rows) == list(range(1, len(rows) + 1))


def test_apache_written_store(spark, apache_store):
    """1000 messages of Apache's quickstart Producer, stored by Apache RocketMQ 4.9.8."""
    rows = _rows(spark.read.format(CL).load(apache_store))
    assert len(rows) == 1000 and all(r["_corrupt"] is None for r in rows)
    assert sorted(r["body"] for r in rows) == sorted(b"Hello RocketMQ %d" % i for i in range(1000))
    assert {r["topic"] for r in rows} == {"TopicTest"} and {r["tags"] for r in rows} == {"TagA"}
    for q in range(4):
        assert sorted(r["queue_offset"] for r in rows if r["queue_id"] == q) == list(range(250))
    first_file = [r for r in rows if r["phy_offset"] < 131072]
    assert len(first_file) == 607
    cq = _rows(spark.read.format("rocketmq_consumequeue").load(apache_store))
    assert {(r["queue_id"], r["queue_offset"], r["phy_offset"], r["size"]) for r in cq} == \
        {(r["queue_id"], r["queue_offset"], r["phy_offset"], r["store_size"]) for r in rows}
    index = _rows(spark.read.format("rocketmq_index").option("maxHashSlotNum", "64")
                  .option("maxIndexNum", "2048").load(apache_store))
    assert {r["phy_offset"] for r in index} == {r["phy_offset"] for r in rows}   # one UNIQ_KEY item each
    by_offset = {r["phy_offset"]: r for r in rows}
    for item in index:
        assert item["key_hash"] == _key_hash("TopicTest#" + by_offset[item["phy_offset"]]["uniq_key"])

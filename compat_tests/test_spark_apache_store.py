"""The Spark store-file sources on a store written live by Apache RocketMQ 4.9.7, through the
official Java client 4.9.8: Apache's bytes end to end.

The same kind of mix as tests/spark/mixed_store.py: a topic with tags and keys, bodies over 4 KiB
that the client compresses with zlib, LZ4 and zstd (one JVM per codec: the 4.9.8 producer reads
the system property ``rocketmq.message.compressType`` once, and sets the COMPRESSED flag plus the
codec's sysFlag bits), a 4 MiB random body (which rolls the commit log to a second segment), and a
delayed message (its SCHEDULE_TOPIC_XXXX record and the copy Apache delivers a second later). The
broker is stopped cleanly; a copy of its store is damaged as the pyrmq mix is (an overwritten
record head, a body failing its CRC, a torn tail), and ``rocketmq_commitlog``,
``rocketmq_consumequeue`` and ``rocketmq_index`` must return exactly what was sent and stored.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import shutil
import time
import zlib
from collections import Counter
from dataclasses import dataclass

import lz4.frame
import pytest
import zstandard

from compat_tests import docker_engine
from compat_tests.cluster import client4_fixture  # noqa: F401  (the Java client 4.9.8)
from pyrmq.client.model import Message
from pyrmq.client.sync import PullConsumer
from pyrmq.codec.message import MessageSysFlag, decode_offset_msg_id, tags_string_to_tags_code
from pyrmq.codec.system_topics import SCHEDULE_TOPIC
from pyrmq.store.index_file import index_key_hash
from pyrmq_spark.stats_sink import read_stats
from tests.spark.conftest import spark  # noqa: F401  (the shared local[2] SparkSession)
from tests.spark.mixed_store import damage_store

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.compat_servers("apache")]

CL = "rocketmq_commitlog"
MAX_BODY = 4 * 1024 * 1024   # the client's maxMessageSize: the largest body it sends
# The 4 MiB record does not fit after the small ones (over 4 KiB of them): it opens a second
# segment, and the delayed message's two records (some 300 bytes each) still fit after it.
SEGMENT_BYTES = MAX_BODY + 2048
COMPRESSED = MessageSysFlag.COMPRESSED_FLAG
# rocketmq.message.compressType -> the sysFlag bits the client sets, and an inflater that is not
# the code under test (Java writes streamed frames: the zstd frame has no content size).
CODECS = {
    "ZLIB": (COMPRESSED | MessageSysFlag.COMPRESSION_ZLIB_TYPE, zlib.decompress),
    "LZ4": (COMPRESSED | MessageSysFlag.COMPRESSION_LZ4_TYPE, lz4.frame.decompress),
    "ZSTD": (COMPRESSED | MessageSysFlag.COMPRESSION_ZSTD_TYPE,
             lambda data: zstandard.ZstdDecompressor().decompressobj().decompress(data)),
}
FLAG_BITS = COMPRESSED | MessageSysFlag.COMPRESSION_TYPE_MASK


@dataclass
class Stored:
    """One record as the producer and the broker's answers describe it."""

    topic: str
    queue_id: int
    queue_offset: int
    phy_offset: int
    uniq_key: str
    tags: str | None
    keys: str | None
    sha256: str                 # of the body as the producer gave it
    codec: str | None = None    # the client compressed it (a CODECS key)
    seq: str | None = None      # the user property "seq"


@dataclass
class ApacheMixedStore:
    root: str             # the store as the stopped broker left it
    damaged: str          # a copy of it, damaged
    broker_addr: str
    clients: ipaddress.IPv4Network   # where the Java client connects from (loopback, or the pods' network)
    sent: list[Stored]    # every message the client sent, in commit log order
    head_victim: Stored   # its head overwritten in the copy
    crc_victim: Stored    # a body byte flipped in the copy
    schedule: Stored      # the delayed message as first stored, in SCHEDULE_TOPIC_XXXX
    delivered: Stored     # the copy Apache delivered to the real topic

    def intact(self) -> list[Stored]:
        return [s for s in self.sent if s not in (self.head_victim, self.crc_victim)]

    def records(self) -> list[Stored]:
        """Every record in the commit log, in order."""
        return sorted([*self.sent, self.schedule, self.delivered], key=lambda s: s.phy_offset)


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def _stored(event: dict, topic: str, codec: str | None = None) -> Stored:
    """From a ``sent`` event of the runner (the body, or its digest for ``bigbody``)."""
    assert event["status"] == "SEND_OK", event
    body_sha = event["sha256"] if "sha256" in event else _sha(event["body"].encode())
    return Stored(topic, event["queueId"], event["queueOffset"], decode_offset_msg_id(event["offsetMsgId"])[2],
                  event["msgId"], event.get("tags"), event.get("keys"), body_sha, codec, str(event["i"]))


def _wait_delivered(namesrv: str, topic: str, queue_id: int, timeout: float = 30.0) -> list[Message]:
    """The delayed message's delivered copy, pulled from the real topic's queue once it is there."""
    with PullConsumer(namesrv, "SA_G_delay", timeout=10) as consumer:
        [mq] = [q for q in consumer.fetch_queues(topic) if q.queue_id == queue_id]
        deadline = time.monotonic() + timeout
        while True:
            found = consumer.pull(mq, 0).messages
            if found:
                return found
            assert time.monotonic() < deadline, f"no delivered copy in {topic}:{queue_id} after {timeout} s"
            time.sleep(0.2)


def _copy_store(store: str, into: str) -> None:
    """The commit log copied (it is what gets damaged); the derived files hard-linked: the default
    index file is 420 MB, sparse, and the readers map every file read-only."""
    shutil.copytree(store, into, copy_function=os.link, ignore=shutil.ignore_patterns("commitlog"))
    shutil.copytree(os.path.join(store, "commitlog"), os.path.join(into, "commitlog"))


@pytest.fixture(scope="module")
def apache_mixed(module_server_factory, client4, tmp_path_factory) -> ApacheMixedStore:  # noqa: F811
    server = module_server_factory(mappedFileSizeCommitLog=str(SEGMENT_BYTES), messageDelayLevel="1s 2s")
    ns = server.namesrv_addr
    plain = client4.run("produce", namesrv=ns, topic="SA_Orders", count=12, tags="TagA,TagB")
    sent = [_stored(e, "SA_Orders") for e in plain.sent]
    for codec in CODECS:
        topic = f"SA_{codec}"
        run = client4.run("produce", namesrv=ns, topic=topic, count=2, tags=codec, body_size=10_000,
                          system_properties={"rocketmq.message.compressType": codec})
        sent += [_stored(e, topic, codec) for e in run.sent]
    big = client4.run("bigbody", namesrv=ns, topic="SA_Big", group="SA_G_big", size=MAX_BODY, plan="random/off",
                      timeout_ms=60_000)
    [big_event] = big.sent
    assert big_event["length"] == MAX_BODY
    sent.append(_stored(dict(big_event, tags="TagBig", keys="k-0"), "SA_Big"))   # what Bodies.bigBody sets
    delayed = client4.run("produce", namesrv=ns, topic="SA_Later", count=1, tags="TagD", delay_level=1)
    [event] = delayed.sent
    # The answer names the record in SCHEDULE_TOPIC_XXXX (offsetMsgId, queueOffset) but the queue
    # the producer chose; the schedule topic's queue is the delay level - 1.
    schedule = _stored(event, SCHEDULE_TOPIC)
    schedule.queue_id = 0
    [copy] = _wait_delivered(ns, "SA_Later", event["queueId"])
    assert (copy.msg_id, copy.body.decode()) == (event["msgId"], event["body"])
    delivered = Stored("SA_Later", copy.queue_id, copy.queue_offset, copy.commit_log_offset, event["msgId"],
                       "TagD", "k-0", schedule.sha256, seq="0")

    codes = server.stop()
    assert all(c in server.graceful_exit_codes for c in codes), f"exit codes {codes}\n{server.log_tail()}"
    store = str(server.config.store_dir)
    assert not os.path.exists(os.path.join(store, "abort")), "a clean stop leaves no abort file"

    sent.sort(key=lambda s: s.phy_offset)
    # Victims in the middle of the first segment, each followed by an intact record.
    head_victim, crc_victim = sent[3], sent[7]
    damaged = str(tmp_path_factory.mktemp("apache-damaged") / "store")
    _copy_store(store, damaged)
    damage_store(damaged, head_victim.phy_offset, crc_victim.phy_offset, SEGMENT_BYTES)
    clients = docker_engine.subnet() if server.config.pod is not None else ipaddress.ip_network("127.0.0.0/8")
    return ApacheMixedStore(store, damaged, server.broker_addr, clients, sent, head_victim, crc_victim, schedule, delivered)


def _rows(df) -> list[dict]:
    return [r.asDict() for r in df.collect()]


def _body_sha(row: dict) -> str:
    return _sha(bytes(row["body"]))


def test_the_store_apache_left_reads_without_damage(spark, apache_mixed):  # noqa: F811
    rows = _rows(spark.read.format(CL).schema("phy_offset bigint, topic string, uniq_key string, _corrupt string")
                 .load(apache_mixed.root))
    assert [r["_corrupt"] for r in rows if r["_corrupt"] is not None] == []
    assert sorted((r["phy_offset"], r["topic"], r["uniq_key"]) for r in rows) == \
        [(s.phy_offset, s.topic, s.uniq_key) for s in apache_mixed.records()]
    # the 4 MiB record opened the second segment; the first ends in Apache's end-of-file blank
    [big] = [s for s in apache_mixed.sent if s.topic == "SA_Big"]
    assert big.phy_offset == SEGMENT_BYTES
    assert sorted(os.listdir(os.path.join(apache_mixed.root, "commitlog"))) == [f"{0:020d}", f"{SEGMENT_BYTES:020d}"]


def test_commitlog_rows_are_the_messages_sent(spark, apache_mixed, tmp_path):  # noqa: F811
    m = apache_mixed
    stats_dir = str(tmp_path / "stats")
    rows = _rows(spark.read.format(CL).option("decompress", "true").option("statsDir", stats_dir).load(m.damaged))
    good = {r["phy_offset"]: r for r in rows if r["_corrupt"] is None}
    assert set(good) == {s.phy_offset for s in [*m.intact(), m.schedule, m.delivered]}
    for s in [*m.intact(), m.schedule, m.delivered]:
        r = good[s.phy_offset]
        assert (r["topic"], r["queue_id"], r["queue_offset"], r["tags"], r["keys"], r["uniq_key"]) == \
            (s.topic, s.queue_id, s.queue_offset, s.tags, s.keys, s.uniq_key), s
        assert _body_sha(r) == s.sha256, s   # inflated where the client compressed it
        assert r["sys_flag"] & FLAG_BITS == (CODECS[s.codec][0] if s.codec else 0), (hex(r["sys_flag"]), s)
        assert r["properties"]["UNIQ_KEY"] == s.uniq_key and r["properties"].get("seq") == s.seq, s
        assert r["store_host"] == m.broker_addr, s
        assert ipaddress.ip_address(r["born_host"].rsplit(":", 1)[0]) in m.clients, s
        assert r["reconsume_times"] == 0 and r["flag"] == 0, s
    assert {len(good[s.phy_offset]["body"]) for s in m.sent if s.codec} == {10_000}
    assert {len(good[s.phy_offset]["body"]) for s in m.sent if s.topic == "SA_Big"} == {MAX_BODY}
    # the delayed message: parked in SCHEDULE_TOPIC_XXXX with its real topic and queue, then delivered
    schedule, delivered = good[m.schedule.phy_offset], good[m.delivered.phy_offset]
    assert schedule["properties"]["DELAY"] == "1"
    real_qid = str(delivered["queue_id"])
    assert (schedule["properties"]["REAL_TOPIC"], schedule["properties"]["REAL_QID"]) == ("SA_Later", real_qid)
    # Apache writes the copy's property string before it clears DELAY: DELAY, REAL_TOPIC, REAL_QID stay
    assert {k: delivered["properties"][k] for k in ("DELAY", "REAL_TOPIC", "REAL_QID")} == \
        {"DELAY": "1", "REAL_TOPIC": "SA_Later", "REAL_QID": real_qid}
    assert delivered["phy_offset"] > schedule["phy_offset"] and delivered["queue_offset"] == 0

    # the damage: the overwritten head is one row up to the next record; the flipped body keeps its fields
    head, crc = sorted((r for r in rows if r["_corrupt"] is not None), key=lambda r: r["phy_offset"])
    after_head = min(s.phy_offset for s in m.sent if s.phy_offset > m.head_victim.phy_offset)
    assert (head["phy_offset"], head["store_size"], head["topic"], head["body"]) == \
        (m.head_victim.phy_offset, after_head - m.head_victim.phy_offset, None, None)
    assert (crc["phy_offset"], crc["topic"], crc["queue_id"], crc["queue_offset"], crc["uniq_key"]) == \
        (m.crc_victim.phy_offset, m.crc_victim.topic, m.crc_victim.queue_id, m.crc_victim.queue_offset,
         m.crc_victim.uniq_key)
    assert "CRC" in crc["_corrupt"]
    stats = read_stats(stats_dir)
    assert (sum(s["corrupt"] for s in stats), sum(s["torn_tails"] for s in stats)) == (2, 1)


def test_stored_bodies_are_the_clients_compressed_bytes(spark, apache_mixed):  # noqa: F811
    m = apache_mixed
    raw = {r["phy_offset"]: r for r in _rows(
        spark.read.format(CL).schema("phy_offset bigint, store_size int, sys_flag int, body binary").load(m.damaged))}
    for s in m.intact():
        body = bytes(raw[s.phy_offset]["body"])
        assert raw[s.phy_offset]["store_size"] > len(body), s
        if s.codec is None:
            assert _sha(body) == s.sha256, s
            continue
        flags, inflate = CODECS[s.codec]
        assert raw[s.phy_offset]["sys_flag"] & FLAG_BITS == flags, s
        assert len(body) < 1000 and _sha(inflate(body)) == s.sha256, s


def test_consume_queue_rows_are_every_dispatched_record(spark, apache_mixed):  # noqa: F811
    m = apache_mixed
    stored = {r["phy_offset"]: r for r in _rows(spark.read.format(CL).load(m.root)
                                                .selectExpr("phy_offset", "store_size", "unix_millis(store_timestamp) ms"))}
    rows = _rows(spark.read.format("rocketmq_consumequeue").load(m.damaged))
    # dispatched before the damage: the damaged records have their units too
    assert sorted((r["topic"], r["queue_id"], r["queue_offset"], r["phy_offset"], r["size"]) for r in rows) == \
        sorted((s.topic, s.queue_id, s.queue_offset, s.phy_offset, stored[s.phy_offset]["store_size"])
               for s in m.records())
    tags = {s.phy_offset: s.tags for s in m.records()}
    for r in rows:
        assert r["ext_offset"] is None
        if r["topic"] == SCHEDULE_TOPIC:   # its tags code is the delivery time: stored + 1 s (level 1)
            assert r["tags_code"] == stored[r["phy_offset"]]["ms"] + 1000, r
        else:
            assert r["tags_code"] == tags_string_to_tags_code(tags[r["phy_offset"]]), r


def test_index_items_are_every_key_and_uniq_key(spark, apache_mixed):  # noqa: F811
    """Apache's default index file (5,000,000 slots, 20,000,000 items): the source's defaults."""
    m = apache_mixed
    rows = _rows(spark.read.format("rocketmq_index").load(m.damaged))
    expected = Counter()
    for s in m.records():
        for key in [s.uniq_key, *(s.keys or "").split()]:
            expected[(index_key_hash(f"{s.topic}#{key}"), s.phy_offset)] += 1
    assert Counter((r["key_hash"], r["phy_offset"]) for r in rows) == expected
    assert sorted(r["item"] for r in rows) == list(range(1, len(rows) + 1))
    assert all(r["slot"] == r["key_hash"] % 5_000_000 for r in rows)

"""The parts of the commit log source that need no Spark: body inflation, the filter translation,
and the scan's resynchronisation over damage, on records encoded by pyrmq.codec."""

from __future__ import annotations

import datetime as dt
import os
import zlib

import pytest

from pyrmq.codec.body_compression import BodyInflateError, inflate_body
from pyrmq.codec.commit_log_walk import offset_to_file_name
from pyrmq.codec.message import BLANK_MAGIC_CODE, BLANK_RECORD, MessageSysFlag, encode_message_record_bytes

try:
    import pyspark.sql.datasource as datasource
except ImportError as exc:   # the spark extra is missing: a failure in CI, a skip elsewhere
    if os.environ.get("CI", "").lower() == "true":
        raise
    pytest.skip(f'{exc} (pip install -e ".[spark]")', allow_module_level=True)

from pyrmq_spark import commitlog_scan as cl  # noqa: E402
from pyrmq_spark.commitlog_scan import MAX_INFLATED_BYTES  # noqa: E402
from pyrmq_spark.predicates import Predicate, absorb, to_micros  # noqa: E402
from pyrmq_spark.store_files import commit_log_segments  # noqa: E402

F = MessageSysFlag


def test_inflation_cap():
    """The codecs are tested with the codec (tests/codec); here, the executor's cap holds."""
    with pytest.raises(BodyInflateError):
        inflate_body(zlib.compress(bytes(MAX_INFLATED_BYTES + 1)), F.COMPRESSED_FLAG, MAX_INFLATED_BYTES)
    assert len(inflate_body(zlib.compress(bytes(MAX_INFLATED_BYTES)), F.COMPRESSED_FLAG, MAX_INFLATED_BYTES)) == MAX_INFLATED_BYTES


def test_filters_taken_and_left():
    cols = cl.FILTER_COLUMNS
    p = absorb(Predicate(), datasource.EqualTo(("topic",), "T"), cols)
    p = absorb(p, datasource.In(("queue_id",), (1, 2)), cols)
    p = absorb(p, datasource.GreaterThan(("phy_offset",), 100), cols)
    p = absorb(p, datasource.LessThanOrEqual(("store_timestamp",), dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)), cols)
    assert p.values == {"topic": frozenset({"T"}), "queue_id": frozenset({1, 2})}
    assert p.low == {"phy_offset": 101}
    assert p.high == {"store_timestamp": to_micros(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))}
    assert p.accepts("store_timestamp", 1704067200000) and not p.accepts("store_timestamp", 1704067200001)
    assert absorb(p, datasource.EqualTo(("body",), b"x"), cols) is None
    assert absorb(p, datasource.StringStartsWith(("topic",), "T"), cols) is None
    assert absorb(p, datasource.GreaterThan(("topic",), "T"), cols) is None


def _segment(tmp_path, records: int = 6, damage: int | None = None, torn: bool = False) -> tuple[str, list[int]]:
    size = 64 * 1024
    buf = bytearray(size)
    offsets = []
    pos = 0
    for i in range(records):
        rec = encode_message_record_bytes(queue_offset=i, physical_offset=pos, store_timestamp=1000 + i,
                                          topic="T%d" % (i % 2), queue_id=0, flag=0, body=b"body-%d" % i,
                                          properties="TAGS\x01t\x02", sys_flag=0, born_timestamp=1,
                                          born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 2))
        buf[pos:pos + len(rec)] = rec
        offsets.append(pos)
        pos += len(rec)
    if damage is not None:
        buf[offsets[damage] + 4:offsets[damage] + 12] = b"\xff" * 8
    if torn:
        buf[pos:pos + 30] = buf[0:30]
    else:
        BLANK_RECORD.pack_into(buf, pos, size - pos, BLANK_MAGIC_CODE)
    d = tmp_path / "commitlog"
    d.mkdir()
    (d / offset_to_file_name(0)).write_bytes(buf)
    return str(tmp_path), offsets


def _scan(root: str, split_bytes: int = cl.DEFAULT_SPLIT_BYTES, **kwargs):
    rows, stats = [], []
    wanted = frozenset(cl.COLUMN_NAMES)
    for split in cl.plan(commit_log_segments(root), kwargs.pop("predicate", Predicate()), split_bytes):
        st = cl.ScanStats()
        for batch in cl.scan(split, wanted, Predicate(), stats=st, **kwargs):
            rows += [dict(zip(batch.names, values)) for values in zip(*(batch.data[n] for n in batch.names))]
        stats.append(st)
    return rows, stats


@pytest.mark.parametrize("split_bytes, damage", [(cl.DEFAULT_SPLIT_BYTES, 2), (150, 2), (150, 4)])
def test_damaged_head_becomes_one_row_and_the_scan_resynchronises(tmp_path, split_bytes, damage):
    root, offsets = _segment(tmp_path, damage=damage)
    rows, stats = _scan(root, split_bytes)
    assert [r["phy_offset"] for r in rows] == offsets
    bad = rows[damage]
    assert bad["topic"] is None and bad["store_size"] == offsets[damage + 1] - offsets[damage]
    assert "invalid" in bad["_corrupt"]
    assert [r["body"] for r in rows if r["_corrupt"] is None] == [b"body-%d" % i for i in range(6) if i != damage]
    assert sum(s.corrupt for s in stats) == 1 and sum(s.records for s in stats) == 5
    # partitions are cut at valid records only: none after the damage
    assert len(stats) == {(cl.DEFAULT_SPLIT_BYTES, 2): 1, (150, 2): 1, (150, 4): 2}[(split_bytes, damage)]


def test_damage_before_the_blank_record_and_torn_tails(tmp_path):
    root, offsets = _segment(tmp_path / "a", damage=5)   # the last record, then the end-of-file blank
    rows, stats = _scan(root)
    assert rows[-1]["_corrupt"] and rows[-1]["phy_offset"] == offsets[5] and len(rows) == 6
    root, offsets = _segment(tmp_path / "b", torn=True)  # a record head cut off by a crash
    rows, stats = _scan(root)
    assert len(rows) == 6 and all(r["_corrupt"] is None for r in rows) and stats[0].torn_tails == 1
    rows, stats = _scan(root, corrupt_rows=False)
    assert len(rows) == 6


@pytest.fixture
def tmp_path(tmp_path):
    for sub in ("a", "b"):
        os.makedirs(tmp_path / sub, exist_ok=True)
    return tmp_path


async def test_consume_queue_ext_units_resolved(tmp_path):
    """A broker with enableConsumeQueueExt: each unit's tagsCode is an ext address, resolved into
    the real tags code and store time."""
    import trio

    from pyrmq.broker.config import build_config
    from pyrmq.broker.controller import BrokerController
    from pyrmq.broker.topic_config import TopicConfig
    from pyrmq.codec.message import tags_string_to_tags_code
    from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController
    from pyrmq.remoting.client import RemotingClient
    from pyrmq_spark.consumequeue_source import read_units
    from pyrmq_spark.store_files import consume_queue_files
    from tests.broker.conftest import broker_properties
    from tests.broker.rmq import send

    async with trio.open_nursery() as nursery:
        namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                                  kv_config_path=str(tmp_path / "kv.json")))
        await nursery.start(namesrv.run)
        loaded = build_config(broker_properties(tmp_path, namesrv.port, enableConsumeQueueExt="true"))
        broker = BrokerController(loaded)
        await nursery.start(broker.run)
        broker.topic_config_manager.update(TopicConfig("TopicX", 1, 1))
        async with RemotingClient() as client:
            for tag in ("t1", "t2", "t3"):
                assert (await send(client, loaded.broker.broker_addr, "TopicX", b"x", tags=tag)).code == 0
        with trio.fail_after(10):
            while not any(q.topic == "TopicX" and q.file.size for q in consume_queue_files(str(tmp_path / "store"))):
                await trio.sleep(0.05)
            await trio.sleep(0.3)
        broker.stop()
        await broker.wait_stopped()
        namesrv.server.close()
        nursery.cancel_scope.cancel()
    [queue] = [q for q in consume_queue_files(str(tmp_path / "store")) if q.topic == "TopicX"]
    [data] = list(read_units(queue))
    assert all(o is not None for o in data["ext_offset"])
    assert data["ext_tags_code"] == [tags_string_to_tags_code(t) for t in ("t1", "t2", "t3")]
    assert all(ts > 1_600_000_000_000 for ts in data["ext_store_timestamp"])

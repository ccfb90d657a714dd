"""``rocketmq_consumequeue``: one row per consume queue unit (store.md §4).

    spark.read.format("rocketmq_consumequeue").load("/data/store")

One partition per consume queue file; options ``topic`` and ``queueId`` (comma lists) leave
other queues' files out at planning. A queue's units end at the first unit that is not valid
(offset < 0 or size <= 0), as the broker's readers stop; pre-blank fill units (store.md §4.3) are
skipped. A tags code at or below ``Integer.MIN_VALUE - 1`` is a ConsumeQueueExt address (§4.5):
``ext_offset`` gives the ext queue offset it stands for, and the unit there (in
``consumequeue_ext/<topic>/<queueId>/``, written with ``enableConsumeQueueExt``) is resolved into
``ext_tags_code``, ``ext_store_timestamp`` and ``ext_bitmap`` (the SQL92 bloom filter bits);
they stay null where the ext unit is missing or not valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pyrmq.codec.store_formats import (
    CQ_EXT_MIN_UNIT_SIZE,
    CQ_EXT_UNIT_HEAD,
    CQ_PRE_BLANK_SIZE,
    CQ_STORE_UNIT_SIZE,
    CQ_UNIT,
    cq_unit_is_valid,
    ext_undecorate,
    is_ext_addr,
)

from pyrmq_spark.commitlog_scan import arrow_batch
from pyrmq_spark.commitlog_source import wanted_columns
from pyrmq_spark.options import store_path
from pyrmq_spark.predicates import from_options
from pyrmq_spark.stats_sink import write_stats
from pyrmq_spark.store_files import QueueFile, ReadOnlyMap, SegmentFile, consume_queue_ext_segments, consume_queue_files

COLUMNS = (("topic", "string"), ("queue_id", "int"), ("queue_offset", "bigint"), ("phy_offset", "bigint"),
           ("size", "int"), ("tags_code", "bigint"), ("ext_offset", "bigint"), ("ext_tags_code", "bigint"),
           ("ext_store_timestamp", "timestamp"), ("ext_bitmap", "binary"))
COLUMN_NAMES = tuple(n for n, _ in COLUMNS)
BATCH_ROWS = 65536


@dataclass
class QueueStats:
    split: int = 0
    units: int = 0


class QueuePartition(InputPartition):
    def __init__(self, index: int, queue_file: QueueFile) -> None:
        super().__init__(index)
        self.queue_file = queue_file


class _ExtUnits:
    """The ext units of one queue, mapped on first use."""

    def __init__(self, queue_file: QueueFile) -> None:
        self.segments: list[SegmentFile] | None = None
        self.queue_file = queue_file
        self.maps: dict[str, ReadOnlyMap] = {}

    def unit(self, offset: int) -> tuple[int, int, bytes] | None:
        """(tags code, store time, bitmap) of the ext unit at ``offset``, or None."""
        if self.segments is None:
            self.segments = consume_queue_ext_segments(self.queue_file)
        for seg in self.segments:
            pos = offset - seg.from_offset
            if 0 <= pos and pos + CQ_EXT_MIN_UNIT_SIZE <= seg.size:
                m = self.maps.get(seg.path) or self.maps.setdefault(seg.path, ReadOnlyMap(seg.path))
                size, tags_code, store_time, bitmap_size = CQ_EXT_UNIT_HEAD.unpack_from(m.buf, pos)
                if size < CQ_EXT_MIN_UNIT_SIZE or size != CQ_EXT_UNIT_HEAD.size + bitmap_size or pos + size > seg.size:
                    return None
                return tags_code, store_time, bytes(m.buf[pos + CQ_EXT_UNIT_HEAD.size:pos + size])
        return None

    def close(self) -> None:
        for m in self.maps.values():
            m.__exit__()


def read_units(queue_file: QueueFile) -> Iterator[dict[str, list[Any]]]:
    """Column lists of the valid units of one file."""
    seg = queue_file.file
    data: dict[str, list[Any]] = {n: [] for n in COLUMN_NAMES}
    ext = _ExtUnits(queue_file)
    try:
        with ReadOnlyMap(seg.path) as m:
            for pos in range(0, seg.size - CQ_STORE_UNIT_SIZE + 1, CQ_STORE_UNIT_SIZE):
                phy_offset, size, tags_code = CQ_UNIT.unpack_from(m.buf, pos)
                if size == CQ_PRE_BLANK_SIZE and phy_offset == 0:
                    continue
                if not cq_unit_is_valid(phy_offset, size):
                    break
                row = [queue_file.topic, queue_file.queue_id, (seg.from_offset + pos) // CQ_STORE_UNIT_SIZE,
                       phy_offset, size, tags_code, None, None, None, None]
                if is_ext_addr(tags_code):
                    row[6] = ext_undecorate(tags_code)
                    unit = ext.unit(row[6])
                    if unit is not None:
                        row[7:10] = unit
                for name, value in zip(COLUMN_NAMES, row):
                    data[name].append(value)
                if len(data["topic"]) >= BATCH_ROWS:
                    yield data
                    data = {n: [] for n in COLUMN_NAMES}
    finally:
        ext.close()
    if data["topic"]:
        yield data


class ConsumeQueueReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.path = store_path(options)
        self.schema = schema
        wanted_columns(schema, COLUMN_NAMES, "rocketmq_consumequeue")
        self.predicate = from_options(options)
        self.stats_dir = options.get("statsDir")

    def partitions(self) -> list[InputPartition]:
        files = [q for q in consume_queue_files(self.path)
                 if self.predicate.accepts("topic", q.topic) and self.predicate.accepts("queue_id", q.queue_id)]
        return [QueuePartition(i, q) for i, q in enumerate(files)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        assert isinstance(partition, QueuePartition)
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        stats = QueueStats(split=partition.value)
        for data in read_units(partition.queue_file):
            stats.units += len(data["topic"])
            yield arrow_batch(data, arrow_schema)
        write_stats(self.stats_dir, "consumequeue", stats)


class ConsumeQueueDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq_consumequeue"

    def schema(self) -> str:
        return ", ".join(f"{n} {t}" for n, t in COLUMNS)

    def reader(self, schema: StructType) -> DataSourceReader:
        return ConsumeQueueReader(self.options, schema)

"""``rocketmq_consumequeue``: one row per consume queue unit (store.md §4).

    spark.read.format("rocketmq_consumequeue").load("/data/store")

One partition per consume queue file; options ``topic`` and ``queueId`` (comma lists) leave
other queues' files out at planning. A queue's units end at the first unit that is not valid
(offset < 0 or size <= 0), as the broker's readers stop; pre-blank fill units (store.md §4.3) are
skipped. A tags code at or below ``Integer.MIN_VALUE - 1`` is a ConsumeQueueExt address (§4.5):
``ext_offset`` gives the ext file offset it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pyrmq.codec.store_formats import CQ_PRE_BLANK_SIZE, CQ_STORE_UNIT_SIZE, CQ_UNIT, cq_unit_is_valid

from pyrmq_spark.commitlog_scan import arrow_batch
from pyrmq_spark.commitlog_source import wanted_columns
from pyrmq_spark.options import store_path
from pyrmq_spark.predicates import from_options
from pyrmq_spark.stats_sink import write_stats
from pyrmq_spark.store_files import QueueFile, ReadOnlyMap, consume_queue_files

COLUMNS = (("topic", "string"), ("queue_id", "int"), ("queue_offset", "bigint"), ("phy_offset", "bigint"),
           ("size", "int"), ("tags_code", "bigint"), ("ext_offset", "bigint"))
COLUMN_NAMES = tuple(n for n, _ in COLUMNS)
# Java's ConsumeQueueExt.isExtAddr: addresses are offset + Long.MIN_VALUE, below any int32 hash.
_EXT_ADDR_MAX = -2_147_483_649
_LONG_MIN = -(1 << 63)
BATCH_ROWS = 65536


@dataclass
class QueueStats:
    split: int = 0
    units: int = 0


class QueuePartition(InputPartition):
    def __init__(self, index: int, queue_file: QueueFile) -> None:
        super().__init__(index)
        self.queue_file = queue_file


def read_units(queue_file: QueueFile) -> Iterator[dict[str, list[Any]]]:
    """Column lists of the valid units of one file."""
    seg = queue_file.file
    data: dict[str, list[Any]] = {n: [] for n in COLUMN_NAMES}
    with ReadOnlyMap(seg.path) as m:
        for pos in range(0, seg.size - CQ_STORE_UNIT_SIZE + 1, CQ_STORE_UNIT_SIZE):
            phy_offset, size, tags_code = CQ_UNIT.unpack_from(m.buf, pos)
            if size == CQ_PRE_BLANK_SIZE and phy_offset == 0:
                continue
            if not cq_unit_is_valid(phy_offset, size):
                break
            data["topic"].append(queue_file.topic)
            data["queue_id"].append(queue_file.queue_id)
            data["queue_offset"].append((seg.from_offset + pos) // CQ_STORE_UNIT_SIZE)
            data["phy_offset"].append(phy_offset)
            data["size"].append(size)
            data["tags_code"].append(tags_code)
            data["ext_offset"].append(tags_code - _LONG_MIN if tags_code <= _EXT_ADDR_MAX else None)
            if len(data["topic"]) >= BATCH_ROWS:
                yield data
                data = {n: [] for n in COLUMN_NAMES}
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

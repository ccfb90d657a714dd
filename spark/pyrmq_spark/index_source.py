"""``rocketmq_index``: one row per IndexFile item (store.md §5).

    spark.read.format("rocketmq_index").load("/data/store")

One partition per index file. Items 1 .. indexCount-1 are read (item 0 is never used). The slot
table's size is not in the file: options ``maxHashSlotNum`` and ``maxIndexNum`` (the broker's
settings, Apache's defaults 5,000,000 and 20,000,000) must match the file's length, which is
checked. ``store_timestamp`` is the file's begin timestamp plus the item's time diff (whole
seconds, as the index keeps it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pyrmq.codec.store_formats import (
    INDEX_HEADER,
    INDEX_ITEM,
    INDEX_ITEM_SIZE,
    INDEX_MAX_HASH_SLOT_NUM,
    INDEX_MAX_INDEX_NUM,
    index_file_size,
    index_item_position,
)

from pyrmq_spark.commitlog_scan import arrow_batch
from pyrmq_spark.commitlog_source import wanted_columns
from pyrmq_spark.options import OptionError, integer, store_path
from pyrmq_spark.stats_sink import write_stats
from pyrmq_spark.store_files import ReadOnlyMap, index_files

COLUMNS = (("file", "string"), ("file_begin_timestamp", "timestamp"), ("item", "int"), ("key_hash", "int"),
           ("slot", "int"), ("phy_offset", "bigint"), ("time_diff", "int"), ("store_timestamp", "timestamp"),
           ("prev_index", "int"))
COLUMN_NAMES = tuple(n for n, _ in COLUMNS)
BATCH_ROWS = 65536


@dataclass
class IndexStats:
    split: int = 0
    items: int = 0


class IndexPartition(InputPartition):
    def __init__(self, index: int, path: str) -> None:
        super().__init__(index)
        self.path = path


def read_items(path: str, slots: int, items: int) -> Iterator[dict[str, list[Any]]]:
    size = os.path.getsize(path)
    if size != index_file_size(slots, items):
        raise OptionError(f"index file {path} is {size} bytes, not the {index_file_size(slots, items)} of "
                          f"maxHashSlotNum={slots} and maxIndexNum={items}: set those options to the broker's")
    name = os.path.basename(path)
    data: dict[str, list[Any]] = {n: [] for n in COLUMN_NAMES}
    with ReadOnlyMap(path) as m:
        begin_ts, _, _, _, _, index_count = INDEX_HEADER.unpack_from(m.buf, 0)
        last = min(index_count, items)
        first_pos = index_item_position(1, slots)
        for n in range(1, last):
            key_hash, phy_offset, time_diff, prev_index = INDEX_ITEM.unpack_from(
                m.buf, first_pos + (n - 1) * INDEX_ITEM_SIZE)
            data["file"].append(name)
            data["file_begin_timestamp"].append(begin_ts)
            data["item"].append(n)
            data["key_hash"].append(key_hash)
            data["slot"].append(key_hash % slots)
            data["phy_offset"].append(phy_offset)
            data["time_diff"].append(time_diff)
            data["store_timestamp"].append(begin_ts + time_diff * 1000)
            data["prev_index"].append(prev_index)
            if len(data["item"]) >= BATCH_ROWS:
                yield data
                data = {n: [] for n in COLUMN_NAMES}
    if data["item"]:
        yield data


class IndexReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.path = store_path(options)
        self.schema = schema
        wanted_columns(schema, COLUMN_NAMES, "rocketmq_index")
        self.slots = integer(options, "maxHashSlotNum", INDEX_MAX_HASH_SLOT_NUM)
        self.items = integer(options, "maxIndexNum", INDEX_MAX_INDEX_NUM)
        self.stats_dir = options.get("statsDir")

    def partitions(self) -> list[InputPartition]:
        return [IndexPartition(i, p) for i, p in enumerate(index_files(self.path))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        assert isinstance(partition, IndexPartition)
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        stats = IndexStats(split=partition.value)
        for data in read_items(partition.path, self.slots, self.items):
            stats.items += len(data["item"])
            yield arrow_batch(data, arrow_schema)
        write_stats(self.stats_dir, "index", stats)


class IndexDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq_index"

    def schema(self) -> str:
        return ", ".join(f"{n} {t}" for n, t in COLUMNS)

    def reader(self, schema: StructType) -> DataSourceReader:
        return IndexReader(self.options, schema)

"""``rocketmq_commitlog``: one row per stored message of a RocketMQ commit log.

    spark.read.format("rocketmq_commitlog").load("/data/store")

Options: ``decompress`` (inflate compressed bodies, default false), ``verifyCrc`` (check the
body CRC of every returned row, default true), ``corrupt`` (``column``: damaged ranges become
rows with ``_corrupt`` set, the default; ``skip``: left out and counted), ``splitBytes``
(partition size within a segment, default 128 MiB), ``statsDir`` (debug: per-partition counts as
JSON), ``pushdown`` (default true; false gives a reader without ``pushFilters``), and the
filter options of :func:`pyrmq_spark.predicates.from_options` for a Spark without push-down.

Column pruning: Spark does not pass a Python source the columns a query uses, so give a schema
with just the columns wanted (any subset of the full one, by name), e.g.
``.schema("topic string, store_size int")``; bodies are then never copied.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pyrmq_spark import commitlog_scan as cl
from pyrmq_spark.options import OptionError, flag, integer, store_path
from pyrmq_spark.predicates import Predicate, absorb, from_options
from pyrmq_spark.stats_sink import write_stats
from pyrmq_spark.store_files import commit_log_segments


class SplitPartition(InputPartition):
    def __init__(self, split: cl.Split) -> None:
        super().__init__(split.index)
        self.split = split


def wanted_columns(schema: StructType, known: tuple[str, ...], source: str) -> frozenset[str]:
    names = frozenset(schema.fieldNames())
    unknown = names - frozenset(known)
    if unknown:
        raise OptionError(f"{source} has no column(s) {sorted(unknown)}; it has {list(known)}")
    return names


class CommitLogReader(DataSourceReader):
    """Without ``pushFilters``: for ``pushdown=false`` and Spark 4.0 (filters by option only)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.path = store_path(options)
        self.schema = schema
        self.wanted = wanted_columns(schema, cl.COLUMN_NAMES, "rocketmq_commitlog")
        self.predicate: Predicate = from_options(options)
        self.decompress = flag(options, "decompress", False)
        self.verify_crc = flag(options, "verifyCrc", True)
        mode = options.get("corrupt", "column")
        if mode not in ("column", "skip"):
            raise OptionError(f"option corrupt: column or skip, got {mode!r}")
        self.corrupt_rows = mode == "column"
        self.split_bytes = integer(options, "splitBytes", cl.DEFAULT_SPLIT_BYTES)
        self.stats_dir = options.get("statsDir")

    def partitions(self) -> list[InputPartition]:
        splits = cl.plan(commit_log_segments(self.path), self.predicate, self.split_bytes)
        return [SplitPartition(s) for s in splits]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        assert isinstance(partition, SplitPartition)
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        stats = cl.ScanStats()
        for batch in cl.scan(partition.split, self.wanted, self.predicate, decompress=self.decompress,
                             verify_crc=self.verify_crc, corrupt_rows=self.corrupt_rows, stats=stats):
            yield cl.to_arrow(batch, arrow_schema)
        write_stats(self.stats_dir, "commitlog", stats)


class PushDownCommitLogReader(CommitLogReader):
    """Takes Spark's filters on topic, queue_id, queue_offset, phy_offset and store_timestamp."""

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        for f in filters:
            narrowed = absorb(self.predicate, f, cl.FILTER_COLUMNS)
            if narrowed is None:
                yield f
            else:
                self.predicate = narrowed


class CommitLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq_commitlog"

    def schema(self) -> str:
        return cl.SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        if flag(self.options, "pushdown", True):
            return PushDownCommitLogReader(self.options, schema)
        return CommitLogReader(self.options, schema)

"""PySpark data sources over RocketMQ store files (commit log, consume queues, index files).

    import pyrmq_spark
    pyrmq_spark.register(spark)
    spark.read.format("rocketmq_commitlog").load("/data/store")
    spark.readStream.format("rocketmq").option("namesrv", "127.0.0.1:9876").option("topic", "T").load()

The store-file readers use only :mod:`pyrmq.codec` (an import-linter contract holds them to it) and map files
read-only, so they run against a live broker's store or a copy, written by pyrmq or Apache
RocketMQ. The ``rocketmq`` stream source and sink talk to brokers with :mod:`pyrmq.client`.
"""

from __future__ import annotations

from typing import Any

# The commit log reader implements pushFilters; Spark then refuses to plan it unless Python filter
# push-down is on (it is off by default).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, *, pushdown: bool = True) -> None:
    """Register every source of this package with ``spark`` (a SparkSession); with ``pushdown``
    also turn on Spark's Python filter push-down, which the commit log source uses."""
    from pyrmq_spark.commitlog_source import CommitLogDataSource
    from pyrmq_spark.consumequeue_source import ConsumeQueueDataSource
    from pyrmq_spark.index_source import IndexDataSource
    from pyrmq_spark.stream_source import RocketMQDataSource

    if pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
    for source in (CommitLogDataSource, ConsumeQueueDataSource, IndexDataSource, RocketMQDataSource):
        spark.dataSource.register(source)


__all__ = ["PUSHDOWN_CONF", "register"]

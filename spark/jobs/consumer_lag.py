"""Consumer lag per group and queue: the committed offsets of ``config/consumerOffset.json``
against the consume queues' ends.

    spark-submit spark/jobs/consumer_lag.py --store /data/store --out /data/reports

Writes ``consumer_lag`` (Parquet: group, topic, queue_id, consumer_offset, min_offset,
max_offset, lag) and ``consumer_lag.png`` (total lag per group and topic). ``max_offset`` is one
past the queue's last unit and ``min_offset`` its first (what the broker answers to
GET_MAX_OFFSET / GET_MIN_OFFSET); ``lag`` is ``max_offset - consumer_offset``, never below 0, as
``mqadmin consumerProgress`` counts it (its "Diff"). A group's retry topic (``%RETRY%group``)
has its own rows. A queue with a committed offset but no consume queue files left has null
offsets and lag. The store's files are read as they are: on a live broker the committed offsets
are as fresh as its last persist (every 5 s by default).
"""

from __future__ import annotations

import sys
from typing import Any

from pyrmq_spark.jobkit import consumer_offsets, job_arguments, ranked_bars, submit, write_result

NAME = "consumer_lag"
OFFSETS_SCHEMA = "group string, topic string, queue_id int, consumer_offset bigint"


def run(spark: Any, store: str, out: str) -> Any:
    from pyspark.sql import functions as F

    offsets = consumer_offsets(store)
    committed = spark.createDataFrame(offsets, OFFSETS_SCHEMA)
    topics = sorted({topic for _, topic, _, _ in offsets})
    units = spark.read.format("rocketmq_consumequeue").schema("topic string, queue_id int, queue_offset bigint")
    if topics:   # read only the committed topics' queue files (planned away by the source)
        units = units.option("topic", ",".join(topics))
    ends = (units.load(store).groupBy("topic", "queue_id")
            .agg(F.min("queue_offset").alias("min_offset"), (F.max("queue_offset") + 1).alias("max_offset")))
    lag = F.greatest(F.col("max_offset") - F.col("consumer_offset"), F.lit(0).cast("long"))
    result = (committed.join(ends, ["topic", "queue_id"], "left")
              .select("group", "topic", "queue_id", "consumer_offset", "min_offset", "max_offset", lag.alias("lag"))
              .orderBy("group", "topic", "queue_id"))
    return write_result(result, out, NAME, chart)


def chart(rows: list[Any], path: str) -> None:
    totals: dict[str, int] = {}
    for r in rows:
        label = f"{r.group} / {r.topic}"
        totals[label] = totals.get(label, 0) + (r.lag or 0)
    ranked_bars("Consumer lag per group and topic", totals, path, "messages behind")


def main(argv: list[str] | None = None) -> None:
    submit(NAME, run, job_arguments(__doc__.splitlines()[0]), argv)


if __name__ == "__main__":
    main(sys.argv[1:])

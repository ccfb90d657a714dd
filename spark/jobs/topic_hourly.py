"""Messages and bytes per topic per hour, from the commit log.

    spark-submit spark/jobs/topic_hourly.py --store /data/store --out /data/reports
    topic_hourly.run(spark, "/data/store", "/data/reports", topics=["TopicA"])

Writes ``topic_hourly`` (Parquet: hour, topic, messages, body_bytes, stored_bytes) and
``topic_hourly.png`` (messages per hour of the busiest topics). ``body_bytes`` counts bodies as
stored (compressed ones compressed); ``stored_bytes`` is the records' size in the commit log.
Hours are in the session time zone. Only topic, store time and sizes are decoded: no body is read.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any, Iterable

from pyrmq_spark.jobkit import commit_log, job_arguments, stacked_hours, submit, write_result

NAME = "topic_hourly"
CHART_TOPICS = 8


def run(spark: Any, store: str, out: str, *, topics: Iterable[str] | None = None,
        since: dt.datetime | None = None, until: dt.datetime | None = None) -> Any:
    from pyspark.sql import functions as F

    df = commit_log(spark, store, "topic string, store_timestamp timestamp, store_size int, body_size int",
                    topics=topics, since=since, until=until)
    result = (df.groupBy(F.date_trunc("hour", "store_timestamp").alias("hour"), "topic")
              .agg(F.count(F.lit(1)).alias("messages"), F.sum("body_size").cast("long").alias("body_bytes"),
                   F.sum("store_size").cast("long").alias("stored_bytes"))
              .orderBy("hour", "topic"))
    return write_result(result, out, NAME, chart)


def chart(rows: list[Any], path: str) -> None:
    totals: dict[str, int] = {}
    for r in rows:
        totals[r.topic] = totals.get(r.topic, 0) + r.messages
    busiest = sorted(totals, key=lambda t: (-totals[t], t))[:CHART_TOPICS]
    series: dict[str, dict[Any, int]] = {topic: {} for topic in busiest}
    for r in rows:
        counts = series.setdefault(r.topic if r.topic in busiest else "(other topics)", {})
        counts[r.hour] = counts.get(r.hour, 0) + r.messages
    stacked_hours("Messages per hour by topic", series, path)


def main(argv: list[str] | None = None) -> None:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument("--topic", action="append", help="only this topic (repeatable)")
    parser.add_argument("--since", type=dt.datetime.fromisoformat, help="store time from (ISO 8601)")
    parser.add_argument("--until", type=dt.datetime.fromisoformat, help="store time before (ISO 8601)")
    submit(NAME, run, parser, argv, lambda args: {"topics": args.topic, "since": args.since, "until": args.until})


if __name__ == "__main__":
    main(sys.argv[1:])

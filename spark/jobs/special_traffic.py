"""Delayed, timer, retry and dead-letter traffic per hour, from the commit log.

    spark-submit spark/jobs/special_traffic.py --store /data/store --out /data/reports

Writes ``special_traffic`` (Parquet: hour, kind, topic, origin_topic, group, delay_level, messages)
and ``special_traffic.png`` (messages per hour by kind). The kinds, by the topic a record is
stored in:

- ``delay``: parked in SCHEDULE_TOPIC_XXXX by a delay level (``delay_level`` = queue + 1) until
  it is due; ``origin_topic`` is the topic it is for (REAL_TOPIC);
- ``retry_backoff``: the same for a message a consumer sent back, which waits there before going
  to its group's retry topic (REAL_TOPIC is ``%RETRY%group``);
- ``timer``: a 5.x timer message parked in rmq_sys_wheel_timer;
- ``retry``: stored in ``%RETRY%group``, for redelivery to ``group``;
- ``dlq``: dead-lettered to ``%DLQ%group`` after its last retry.

For ``retry``, ``retry_backoff`` and ``dlq``, ``origin_topic`` is the topic the message was first
sent to (RETRY_TOPIC). The delivered copies of due messages are ordinary traffic of their topic and
not counted. A first pass reads only the topic column (no body, no properties) to find these
topics; the second decodes properties only for their records (topic push-down).
"""

from __future__ import annotations

import sys
from typing import Any

from pyrmq.codec.message import MessageConst
from pyrmq.codec.system_topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC, TIMER_TOPIC

from pyrmq_spark.jobkit import commit_log, job_arguments, stacked_hours, submit, write_result

NAME = "special_traffic"
KINDS = ("delay", "retry_backoff", "timer", "retry", "dlq")


def is_special(topic: str) -> bool:
    return topic in (SCHEDULE_TOPIC, TIMER_TOPIC) or topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))


def run(spark: Any, store: str, out: str) -> Any:
    from pyspark.sql import functions as F

    topics = [r.topic for r in commit_log(spark, store, "topic string").distinct().collect() if is_special(r.topic)]
    df = commit_log(spark, store, "topic string, queue_id int, store_timestamp timestamp, "
                    "properties map<string,string>", topics=topics or [""])
    topic, props = F.col("topic"), F.col("properties")
    real, retry_of = props[MessageConst.PROPERTY_REAL_TOPIC], props[MessageConst.PROPERTY_RETRY_TOPIC]
    backoff = (topic == SCHEDULE_TOPIC) & real.startswith(RETRY_GROUP_TOPIC_PREFIX)
    kind = (F.when(backoff, "retry_backoff").when(topic == SCHEDULE_TOPIC, "delay").when(topic == TIMER_TOPIC, "timer")
            .when(topic.startswith(RETRY_GROUP_TOPIC_PREFIX), "retry").otherwise("dlq"))
    group = (F.when(backoff, real.substr(len(RETRY_GROUP_TOPIC_PREFIX) + 1, 1 << 16))
             .when(topic.startswith(RETRY_GROUP_TOPIC_PREFIX), topic.substr(len(RETRY_GROUP_TOPIC_PREFIX) + 1, 1 << 16))
             .when(topic.startswith(DLQ_GROUP_TOPIC_PREFIX), topic.substr(len(DLQ_GROUP_TOPIC_PREFIX) + 1, 1 << 16)))
    origin = F.when(backoff | topic.startswith(RETRY_GROUP_TOPIC_PREFIX) | topic.startswith(DLQ_GROUP_TOPIC_PREFIX),
                    retry_of).otherwise(real)
    level = F.when(topic == SCHEDULE_TOPIC, F.col("queue_id") + 1)
    result = (df.select(F.date_trunc("hour", "store_timestamp").alias("hour"), kind.alias("kind"), "topic",
                        origin.alias("origin_topic"), group.alias("group"), level.alias("delay_level"))
              .groupBy("hour", "kind", "topic", "origin_topic", "group", "delay_level")
              .agg(F.count(F.lit(1)).alias("messages"))
              .orderBy("hour", "kind", "topic", "origin_topic", "group", "delay_level"))
    return write_result(result, out, NAME, chart)


def chart(rows: list[Any], path: str) -> None:
    series: dict[str, dict[Any, int]] = {kind: {} for kind in KINDS if any(r.kind == kind for r in rows)}
    for r in rows:
        series[r.kind][r.hour] = series[r.kind].get(r.hour, 0) + r.messages
    stacked_hours("Delayed, timer, retry and dead-letter messages per hour", series, path)


def main(argv: list[str] | None = None) -> None:
    submit(NAME, run, job_arguments(__doc__.splitlines()[0]), argv)


if __name__ == "__main__":
    main(sys.argv[1:])

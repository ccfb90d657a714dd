"""A histogram of message body sizes per topic, in power-of-two buckets, from the commit log.

    spark-submit spark/jobs/body_sizes.py --store /data/store --out /data/reports

Writes ``body_sizes`` (Parquet: topic, bucket_low, bucket_high, messages; a body of ``n`` bytes
falls in ``[bucket_low, bucket_high)``, where ``bucket_low`` is the largest power of two not above
``n``, and an empty body in ``[0, 1)``) and ``body_sizes.png`` (all topics together). Sizes are as
stored: a compressed body counts its compressed bytes. Bodies themselves are not read: the size
comes from the record's BODYLEN.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

from pyrmq_spark.jobkit import commit_log, figure, human_bytes, job_arguments, save, submit, write_result

NAME = "body_sizes"


def bucket_low(size: str) -> Any:
    """The bucket of the column ``size``: 0 for 0, else the largest power of two <= size. log2 in
    doubles can land a hair off near a power of two; the two corrections make the result exact."""
    from pyspark.sql import functions as F

    guess = f"shiftleft(1L, cast(floor(log2({size})) as int))"
    return F.expr(f"case when {size} <= 0 then 0L when {guess} > {size} then shiftright({guess}, 1) "
                  f"when shiftleft({guess}, 1) <= {size} then shiftleft({guess}, 1) else {guess} end")


def run(spark: Any, store: str, out: str, *, topics: Iterable[str] | None = None) -> Any:
    from pyspark.sql import functions as F

    df = commit_log(spark, store, "topic string, body_size int", topics=topics)
    low = bucket_low("body_size")
    result = (df.select("topic", low.alias("bucket_low"))
              .withColumn("bucket_high", F.when(F.col("bucket_low") == 0, F.lit(1).cast("long"))
                          .otherwise(F.col("bucket_low") * 2))
              .groupBy("topic", "bucket_low", "bucket_high").agg(F.count(F.lit(1)).alias("messages"))
              .orderBy("topic", "bucket_low"))
    return write_result(result, out, NAME, chart)


def chart(rows: list[Any], path: str) -> None:
    counts: dict[int, int] = {}
    for r in rows:
        counts[r.bucket_low] = counts.get(r.bucket_low, 0) + r.messages
    lows = sorted(counts)
    fig, ax = figure("Body sizes (as stored), all topics")
    ax.bar(range(len(lows)), [counts[b] for b in lows])
    ax.set_xticks(range(len(lows)), [f"≥{human_bytes(b)}" for b in lows], rotation=45, ha="right")
    ax.set_xlabel("body size bucket")
    ax.set_ylabel("messages")
    save(fig, path)


def main(argv: list[str] | None = None) -> None:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument("--topic", action="append", help="only this topic (repeatable)")
    submit(NAME, run, parser, argv, lambda args: {"topics": args.topic})


if __name__ == "__main__":
    main(sys.argv[1:])

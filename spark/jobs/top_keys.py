"""The message keys that occur most, per topic, with when each was first and last stored.

    spark-submit spark/jobs/top_keys.py --store /data/store --out /data/reports --limit 50

Writes ``top_keys`` (Parquet: topic, key, messages, first_stored, last_stored; the ``limit``
most frequent (topic, key) pairs, most frequent first, ties by topic then key) and
``top_keys.png``. Keys are the KEYS property split on spaces, as the broker indexes them (a
message with ``"a b"`` counts for ``a`` and for ``b``); the UNIQ_KEY is not a key here.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Iterable

from pyrmq.codec.message import MessageConst

from pyrmq_spark.jobkit import commit_log, job_arguments, ranked_bars, submit, write_result

NAME = "top_keys"
DEFAULT_LIMIT = 50


def run(spark: Any, store: str, out: str, *, limit: int = DEFAULT_LIMIT, topics: Iterable[str] | None = None) -> Any:
    from pyspark.sql import functions as F

    df = commit_log(spark, store, "topic string, keys string, store_timestamp timestamp", topics=topics)
    keys = (df.filter(F.col("keys").isNotNull())
            .select("topic", "store_timestamp",
                    F.explode(F.split("keys", re.escape(MessageConst.KEY_SEPARATOR))).alias("key"))
            .filter(F.col("key") != ""))
    result = (keys.groupBy("topic", "key")
              .agg(F.count(F.lit(1)).alias("messages"), F.min("store_timestamp").alias("first_stored"),
                   F.max("store_timestamp").alias("last_stored"))
              .orderBy(F.desc("messages"), "topic", "key").limit(limit))
    return write_result(result, out, NAME, chart)


def chart(rows: list[Any], path: str) -> None:
    ranked_bars("Most frequent keys", {f"{r.topic} / {r.key}": r.messages for r in rows}, path, "messages")


def main(argv: list[str] | None = None) -> None:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="how many (topic, key) pairs")
    parser.add_argument("--topic", action="append", help="only this topic (repeatable)")
    submit(NAME, run, parser, argv, lambda args: {"limit": args.limit, "topics": args.topic})


if __name__ == "__main__":
    main(sys.argv[1:])

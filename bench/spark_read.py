"""Reading a 1 GiB commit log: the rocketmq_commitlog source on local[2] against a single-process
Python scan of the same file with the same code (pyrmq_spark.commitlog_scan over pyrmq.codec).

    python bench/spark_read.py [--gib 1] [--body 1024] [--dir /tmp/pyrmq-spark-bench]

Writes one commit log segment of the given size (records encoded by pyrmq.codec: 8 topics, 4
queues, tags and keys, bodies of --body bytes) unless it is already there, then times, in one run:
the single-process scan of all columns, Spark with all columns, Spark with a pruned schema (no
body), and Spark with a pushed filter (one topic, one queue). Prints rows/s and MB/s (the file's records and
bytes over wall time, also for the filtered query; Spark's timings include planning and task start, not the session start).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from pyrmq.codec.commit_log_walk import offset_to_file_name
from pyrmq.codec.message import (
    BLANK_RECORD,
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    encode_record,
    host_to_bytes,
    properties_to_string,
)

GIB = 1024 ** 3


def write_segment(path: str, size: int, body_bytes: int) -> int:
    """A full segment of records and its end-of-file blank record; returns the record count."""
    body = (b"pyrmq spark bench " * (body_bytes // 18 + 1))[:body_bytes]
    buf = bytearray(size)
    pos = count = 0
    store_ts = 1_700_000_000_000
    queue_offsets: dict[tuple[int, int], int] = {}
    born_ip, store_ip = host_to_bytes("10.0.0.1"), host_to_bytes("10.0.0.2")
    while True:
        t, q = count % 8, (count // 8) % 4
        key = (t, q)
        props = properties_to_string({"TAGS": f"Tag{q}", "KEYS": f"k{t}", "UNIQ_KEY": "AC11000100002A9F0000000000000000"})
        qo = queue_offsets.get(key, 0)
        written = encode_record(buf, pos, size - END_FILE_MIN_BLANK_LENGTH, f"BenchTopic{t}", props, body, q, 0, 0,
                                store_ts, born_ip, 50000, store_ip, 10911, 0, 0, qo, pos, store_ts + count // 100)
        if written < 0:   # no room left: the file ends here
            break
        queue_offsets[key] = qo + 1
        pos += written
        count += 1
    BLANK_RECORD.pack_into(buf, pos, size - pos, BLANK_MAGIC_CODE)
    with open(path, "wb") as f:
        f.write(buf)
    return count


def python_scan(root: str) -> tuple[int, float]:
    """All columns, one process: plan, scan every split, build the Arrow batches."""
    from pyrmq_spark import commitlog_scan as cl
    from pyrmq_spark.predicates import Predicate
    from pyrmq_spark.store_files import commit_log_segments

    schema = cl.arrow_schema()
    started = time.perf_counter()
    rows = 0
    wanted = frozenset(cl.COLUMN_NAMES)
    for split in cl.plan(commit_log_segments(root), Predicate()):
        for batch in cl.scan(split, wanted, Predicate()):
            rows += cl.to_arrow(batch, schema).num_rows
    return rows, time.perf_counter() - started


def spark_runs(root: str) -> list[tuple[str, int, float]]:
    from pyspark.sql import SparkSession

    import pyrmq_spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pyrmq_spark.register(spark)
    out = []
    queries = [
        ("spark, all columns", lambda: spark.read.format("rocketmq_commitlog").load(root)),
        ("spark, no body (pruned schema)", lambda: spark.read.format("rocketmq_commitlog")
         .schema("topic string, queue_id int, store_size int, store_timestamp timestamp").load(root)),
        ("spark, topic+queue pushed", lambda: spark.read.format("rocketmq_commitlog").load(root)
         .filter("topic = 'BenchTopic3' and queue_id = 1")),
    ]
    for name, make in queries:
        started = time.perf_counter()
        # count() is enough: a Python source is not told which columns a query uses, so every
        # column of the given schema is decoded and shipped as Arrow
        rows = make().count()
        out.append((name, rows, time.perf_counter() - started))
    spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--dir", default="/tmp/pyrmq-spark-bench")
    args = ap.parse_args()
    size = int(args.gib * GIB)
    commitlog = os.path.join(args.dir, "commitlog")
    os.makedirs(commitlog, exist_ok=True)
    path = os.path.join(commitlog, offset_to_file_name(0))
    if not os.path.exists(path) or os.path.getsize(path) != size:
        started = time.perf_counter()
        n = write_segment(path, size, args.body)
        print(f"wrote {n} records, {size / 1e6:.0f} MB in {time.perf_counter() - started:.1f} s")
    mb = size / 1e6
    rows, secs = python_scan(args.dir)
    print(f"{'python, one process, all columns':34} {rows:>9} rows {secs:7.1f} s {rows / secs:>10,.0f} rows/s {mb / secs:7.1f} MB/s")
    for name, n, secs in spark_runs(args.dir):
        print(f"{name:34} {n:>9} rows {secs:7.1f} s {rows / secs:>10,.0f} rows/s {mb / secs:7.1f} MB/s")


if __name__ == "__main__":
    main()

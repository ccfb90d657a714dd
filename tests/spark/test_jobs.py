"""The jobs of spark/jobs on a store whose contents are known (tests/spark/jobs_store.py): each
job's Parquet rows against what was sent, its PNG written; one job through spark-submit on
local[*], one on a standalone Spark master and worker started here from the pyspark installation."""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pyrmq.codec.system_topics import SCHEDULE_TOPIC
from tests.spark.jobs_store import DLQ, ORDER_GROUP, ORDERS, PAY_GROUP, PAYMENTS, RETRY
from tests.spark.spark_cluster import StandaloneCluster, spark_submit

pytestmark = pytest.mark.slow

JOBS = Path(__file__).resolve().parents[2] / "spark" / "jobs"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load_job(name: str):
    """A job module of spark/jobs, imported from its file as a notebook would."""
    spec = importlib.util.spec_from_file_location(f"pyrmq_jobs_{name}", JOBS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_png(out: Path, name: str) -> None:
    data = (out / f"{name}.png").read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 2000, name   # a drawn chart, not an empty file


def local_hours(store) -> set[dt.datetime]:
    """The UTC hours the store's messages can fall in, as PySpark returns them (naive local time)."""
    first = store.started.replace(minute=0, second=0, microsecond=0)
    hours, hour = set(), first
    while hour <= store.finished:
        hours.add(hour.astimezone().replace(tzinfo=None))
        hour += dt.timedelta(hours=1)
    return hours


def by_topic(rows, value) -> dict[str, int]:
    totals: Counter = Counter()
    for r in rows:
        totals[r.topic] += value(r)
    return dict(totals)


def test_topic_hourly(spark, jobs_store, tmp_path):
    rows = load_job("topic_hourly").run(spark, jobs_store.root, str(tmp_path)).collect()
    assert {r.hour for r in rows} <= local_hours(jobs_store)
    assert by_topic(rows, lambda r: r.messages) == Counter(r.topic for r in jobs_store.records)
    body_bytes: Counter = Counter()
    for rec in jobs_store.records:
        body_bytes[rec.topic] += rec.body_size
    assert by_topic(rows, lambda r: r.body_bytes) == dict(body_bytes)
    # the records' sizes as the broker's dispatch wrote them into the consume queues
    units = spark.read.format("rocketmq_consumequeue").load(jobs_store.root).collect()
    assert by_topic(rows, lambda r: r.stored_bytes) == by_topic(units, lambda u: u.size)
    assert_png(tmp_path, "topic_hourly")

    only = load_job("topic_hourly").run(spark, jobs_store.root, str(tmp_path / "one"), topics=[PAYMENTS],
                                        until=dt.datetime(2000, 1, 1)).collect()
    assert only == []   # nothing was stored before 2000
    only = load_job("topic_hourly").run(spark, jobs_store.root, str(tmp_path / "one"), topics=[PAYMENTS]).collect()
    assert by_topic(only, lambda r: r.messages) == {PAYMENTS: 10}


def test_body_sizes(spark, jobs_store, tmp_path):
    rows = load_job("body_sizes").run(spark, jobs_store.root, str(tmp_path)).collect()
    want: Counter = Counter()
    for rec in jobs_store.records:
        low = 1 << (rec.body_size.bit_length() - 1) if rec.body_size else 0
        want[(rec.topic, low, low * 2 if low else 1)] += 1
    assert {(r.topic, r.bucket_low, r.bucket_high): r.messages for r in rows} == dict(want)
    # the edges: 1023 and 1024 bytes in neighbouring buckets, 1 byte in [1, 2)
    orders = {r.bucket_low for r in rows if r.topic == ORDERS}
    assert {1, 2, 64, 512, 1024, 4096, 65536} <= orders
    assert [r.topic for r in rows] == sorted(r.topic for r in rows)
    assert_png(tmp_path, "body_sizes")


def test_top_keys(spark, jobs_store, tmp_path):
    job = load_job("top_keys")
    rows = job.run(spark, jobs_store.root, str(tmp_path), limit=1000).collect()
    want: Counter = Counter()
    for rec in jobs_store.records:
        for key in (rec.keys or "").split():
            want[(rec.topic, key)] += 1
    assert {(r.topic, r.key): r.messages for r in rows} == dict(want)
    assert all(r.first_stored <= r.last_stored for r in rows)
    # most frequent first, ties by topic then key
    top = job.run(spark, jobs_store.root, str(tmp_path / "top3"), limit=3).collect()
    ranked = sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert [((r.topic, r.key), r.messages) for r in top] == ranked
    assert_png(tmp_path, "top_keys")


def test_consumer_lag(spark, jobs_store, tmp_path):
    rows = load_job("consumer_lag").run(spark, jobs_store.root, str(tmp_path)).collect()
    got = {(r.group, r.topic, r.queue_id): (r.consumer_offset, r.min_offset, r.max_offset, r.lag) for r in rows}
    want = {}
    for (group, topic, queue_id), offset in jobs_store.committed.items():
        end = jobs_store.queue_ends[(topic, queue_id)]
        want[(group, topic, queue_id)] = (offset, 0, end, max(end - offset, 0))
    assert got == want
    assert got[(ORDER_GROUP, ORDERS, 1)][3] == 0 and got[(PAY_GROUP, RETRY, 0)][3] == 1
    assert [(r.group, r.topic, r.queue_id) for r in rows] == sorted(want)
    assert_png(tmp_path, "consumer_lag")


def test_consumer_lag_without_offsets(spark, tmp_path, mixed_store):
    """A store no group has committed to (the mixed store): no rows, and still a chart."""
    assert load_job("consumer_lag").run(spark, mixed_store.root, str(tmp_path)).count() == 0
    assert_png(tmp_path, "consumer_lag")


def test_special_traffic(spark, jobs_store, tmp_path):
    rows = load_job("special_traffic").run(spark, jobs_store.root, str(tmp_path)).collect()
    assert {r.hour for r in rows} <= local_hours(jobs_store)
    got = Counter()
    for r in rows:
        got[(r.kind, r.topic, r.origin_topic, r.group, r.delay_level)] += r.messages
    assert got == {("delay", SCHEDULE_TOPIC, ORDERS, None, 2): 1,
                   ("retry_backoff", SCHEDULE_TOPIC, PAYMENTS, PAY_GROUP, 3): 1,
                   ("retry", RETRY, PAYMENTS, PAY_GROUP, None): 1,
                   ("dlq", DLQ, PAYMENTS, PAY_GROUP, None): 1}
    assert_png(tmp_path, "special_traffic")


def _parquet_rows(spark, path: Path) -> list:
    return sorted(tuple(r) for r in spark.read.parquet(str(path)).collect())


def test_spark_submit_local(spark, jobs_store, tmp_path):
    """``spark-submit spark/jobs/consumer_lag.py`` on local[*]: what run() writes, in a new JVM."""
    out = tmp_path / "submitted"
    spark_submit(JOBS / "consumer_lag.py", "--master", "local[*]", args=["--store", jobs_store.root, "--out", str(out)])
    load_job("consumer_lag").run(spark, jobs_store.root, str(tmp_path / "in_process"))
    assert _parquet_rows(spark, out / "consumer_lag") == _parquet_rows(spark, tmp_path / "in_process" / "consumer_lag")
    assert_png(out, "consumer_lag")


def test_job_as_a_python_script(spark, jobs_store, tmp_path):
    """``python spark/jobs/body_sizes.py --master local[2]`` with no PYSPARK_PYTHON set and another
    python3 first on PATH: the job's Python workers still run its own interpreter."""
    out = tmp_path / "script"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PATH"] = "/usr/bin:/bin"   # the system python3, which has no pyrmq_spark
    proc = subprocess.run([sys.executable, str(JOBS / "body_sizes.py"), "--master", "local[2]", "--store", jobs_store.root,
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-6000:]
    load_job("body_sizes").run(spark, jobs_store.root, str(tmp_path / "in_process"))
    assert _parquet_rows(spark, out / "body_sizes") == _parquet_rows(spark, tmp_path / "in_process" / "body_sizes")
    assert_png(out, "body_sizes")


def test_job_on_standalone_cluster(spark, jobs_store, tmp_path):
    """topic_hourly submitted to a standalone master with one worker: its executor (another JVM,
    with its own Python workers) reads the store by the shared path; same rows as local."""
    out = tmp_path / "cluster"
    with StandaloneCluster(tmp_path / "spark") as cluster:
        spark_submit(JOBS / "topic_hourly.py", "--master", cluster.master_url, "--executor-memory", "512m",
                     args=["--store", jobs_store.root, "--out", str(out)])
        assert cluster.ran_an_executor(), cluster.log_tail()
    load_job("topic_hourly").run(spark, jobs_store.root, str(tmp_path / "local"))
    assert _parquet_rows(spark, out / "topic_hourly") == _parquet_rows(spark, tmp_path / "local" / "topic_hourly")
    assert_png(out, "topic_hourly")


def test_job_arguments_are_checked():
    """A job's command line refuses what it does not know before any Spark starts."""
    proc = subprocess.run([sys.executable, str(JOBS / "top_keys.py"), "--store", "/x", "--out", "/y", "--limit", "many"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "invalid int value" in proc.stderr

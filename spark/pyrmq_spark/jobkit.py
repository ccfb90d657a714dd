"""What the analysis jobs of ``spark/jobs/`` share: their command line, their SparkSession, the
store sources read with a narrow schema, the consumer offsets of a store, and a job's output
(Parquet, then a PNG chart drawn from the Parquet just written).

A job is a module with ``run(spark, store, out, ...)`` (callable from a notebook or another
job) and a ``main()`` for ``spark-submit``; the code here keeps those two thin. Only the driver
uses this module: the executors run the data sources and Spark's own operators, never a job's
Python, so a cluster needs ``pyrmq_spark`` installed on its workers and nothing else.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from typing import Any, Callable, Iterable

from pyrmq.codec import fastjson
from pyrmq.codec.system_topics import TOPIC_GROUP_SEPARATOR

Chart = Callable[[list[Any], str], None]
CONSUMER_OFFSET_FILE = os.path.join("config", "consumerOffset.json")


def job_arguments(description: str) -> argparse.ArgumentParser:
    """The options every job takes; a job adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--store", required=True,
                        help="store root (storePathRootDir) on a path every executor can read")
    parser.add_argument("--out", required=True, help="output directory (Parquet and PNG)")
    parser.add_argument("--master", help="Spark master when not run by spark-submit (e.g. local[*])")
    parser.add_argument("--timezone", default="UTC", help="session time zone for hours (default UTC)")
    return parser


def job_session(app_name: str, args: argparse.Namespace) -> Any:
    """The SparkSession of a job's ``main()``: spark-submit's master and configuration unless
    ``--master`` is given, the job's time zone, and every pyrmq_spark source registered."""
    from pyspark.sql import SparkSession

    import pyrmq_spark

    builder = SparkSession.builder.appName(app_name)
    if args.master:
        builder = builder.master(args.master)
        # Started as `python job.py --master ...`: the JVM this starts inherits the environment, and
        # its Python workers (the data source planner's too) must run this interpreter, the one
        # that has pyrmq_spark, not whatever python3 is first on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = builder.getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", args.timezone)
    pyrmq_spark.register(spark)
    return spark


def submit(name: str, run: Callable[..., Any], parser: argparse.ArgumentParser, argv: list[str] | None,
           options: Callable[[argparse.Namespace], dict[str, Any]] = lambda args: {}) -> None:
    """A job's ``main()``: parse ``argv``, start the session, ``run(spark, store, out, **options)``,
    stop the session (also when the job fails)."""
    args = parser.parse_args(argv)
    spark = job_session(name, args)
    try:
        run(spark, args.store, args.out, **options(args))
    finally:
        spark.stop()


def commit_log(spark: Any, store: str, columns: str, *, topics: Iterable[str] | None = None,
               since: dt.datetime | None = None, until: dt.datetime | None = None) -> Any:
    """The intact messages of the commit log with only ``columns`` (a DDL list) decoded; damaged
    records are left out. ``topics`` and the ``[since, until)`` store-time window are pushed
    down to the scan, so other records are not decoded."""
    from pyspark.sql import functions as F

    df = spark.read.format("rocketmq_commitlog").schema(f"{columns}, _corrupt string").load(store)
    df = df.filter(F.col("_corrupt").isNull())
    if topics:
        df = df.filter(F.col("topic").isin(list(topics)))
    if since is not None:
        df = df.filter(F.col("store_timestamp") >= F.lit(since))
    if until is not None:
        df = df.filter(F.col("store_timestamp") < F.lit(until))
    return df.drop("_corrupt")


def consumer_offsets(store: str) -> list[tuple[str, str, int, int]]:
    """(group, topic, queue_id, offset) of the store's ``config/consumerOffset.json``, or of its
    ``.bak`` when the file is missing or unreadable, as the broker loads it; [] when neither is
    there. Read on the driver: it is small, and fastjson's unquoted integer keys are no JSON
    Spark reads."""
    path = os.path.join(store, CONSUMER_OFFSET_FILE)
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, "rb") as f:
                data = fastjson.loads(f.read())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return _offset_rows(data.get("offsetTable") or {})
    return []


def _offset_rows(table: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    rows = []
    for key, queues in table.items():
        topic, sep, group = str(key).partition(TOPIC_GROUP_SEPARATOR)
        if not sep or not isinstance(queues, dict):
            continue
        rows.extend((group, topic, int(q), int(offset)) for q, offset in queues.items())
    rows.sort()
    return rows


def write_result(df: Any, out: str, name: str, chart: Chart) -> Any:
    """Write ``df`` as ``out/name`` (Parquet, one file: a job's result is small), draw
    ``out/name.png`` from the rows written, and return the written data as a DataFrame."""
    path = os.path.join(out, name)
    df.coalesce(1).write.mode("overwrite").parquet(path)
    written = df.sparkSession.read.parquet(path)
    chart(written.collect(), path + ".png")
    return written


def figure(title: str, width: float = 10, height: float = 5) -> tuple[Any, Any]:
    """A matplotlib figure and axes drawn off-screen (no display on a Spark driver)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_title(title)
    return fig, ax


def save(fig: Any, path: str) -> None:
    from matplotlib import pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def stacked_hours(title: str, series: dict[str, dict[Any, int]], path: str, ylabel: str = "messages") -> None:
    """Bars per hour, one stacked segment per series (in the order given), at most ~24 hour labels."""
    hours = sorted({h for counts in series.values() for h in counts})
    fig, ax = figure(title)
    bottom = [0] * len(hours)
    for label, counts in series.items():
        values = [counts.get(h, 0) for h in hours]
        ax.bar(range(len(hours)), values, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, values)]
    step = max(1, len(hours) // 24)
    ax.set_xticks(range(0, len(hours), step), [h.strftime("%Y-%m-%d %H:00") for h in hours][::step],
                  rotation=45, ha="right")
    ax.set_ylabel(ylabel)
    if series:
        ax.legend(loc="upper left", fontsize="small")
    save(fig, path)


def ranked_bars(title: str, totals: dict[str, int], path: str, xlabel: str, top: int = 25) -> None:
    """Horizontal bars of the ``top`` largest totals, largest first (ties by label)."""
    labels = sorted(totals, key=lambda k: (-totals[k], k))[:top]
    fig, ax = figure(title, height=max(3, 0.3 * len(labels) + 1))
    ax.barh(range(len(labels)), [totals[k] for k in labels])
    ax.set_yticks(range(len(labels)), labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    save(fig, path)


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB': chart labels."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.4g} {unit}"

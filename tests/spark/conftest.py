"""One local SparkSession for the whole test session (local[2], UI off, two shuffle partitions),
and the stores the data source tests read.

With CI=true a missing pyspark or JDK fails the tests; elsewhere they skip with the reason.
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest


APACHE_FIXTURE = Path(__file__).parent.parent / "fixtures" / "store" / "apache-4.9.8-small.tar.gz"


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the Spark tests must run in CI)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spark():
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        _missing('pyspark is not installed (pip install -e ".[spark]")')
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        _missing("no JDK (Spark 4 needs Java 17+)")
    import pyrmq_spark

    # The Python workers must be this interpreter (the venv with pyrmq), not whatever python3 is first on PATH.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("pyrmq-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    pyrmq_spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def mixed_store(tmp_path_factory):
    # imported here: it needs the spark extra (zstandard), whose absence the spark fixture reports
    from tests.spark.mixed_store import write_mixed_store

    return write_mixed_store(str(tmp_path_factory.mktemp("mixed")))


@pytest.fixture(scope="session")
def jobs_store(tmp_path_factory):
    from tests.spark.jobs_store import write_jobs_store

    return write_jobs_store(str(tmp_path_factory.mktemp("jobs")))


@pytest.fixture(scope="session")
def apache_store(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("apache")
    with tarfile.open(APACHE_FIXTURE) as tar:
        tar.extractall(root, filter="data")
    return str(root / "store")

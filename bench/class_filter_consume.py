"""Consume rate of the official Java 4.9.8 push consumer on one pyrmq broker: a tag subscription
(``TagA``, filtered by the broker) against a class subscription (compat_tests/filters/EvenSeq.java
through the FilterServer the broker starts, the JVM worker deciding) selecting the same half of
the messages. Messages are produced first, so the figure is the rate at which a consumer
catches up: accepted messages per second between its first and its last delivery.

    python bench/class_filter_consume.py [--messages 4000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from compat_tests import build  # noqa: E402
from compat_tests.javaclient import JavaClient  # noqa: E402
from compat_tests.servers import PyrmqServer, ServerConfig, allocate_ports  # noqa: E402
from compat_tests.test_class_filter import routed_filter_servers  # noqa: E402

FILTER_CLASS = "pyrmq.compat.filters.EvenSeq"
FILTER_SOURCE = REPO / "compat_tests" / "filters" / "EvenSeq.java"


def rate(result) -> tuple[int, float]:
    at = [e["at"] for e in result.received]
    return len(at), len(at) / max((max(at) - min(at)) / 1000, 1e-3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=4000)
    args = parser.parse_args()
    n = args.messages
    java = JavaClient(build.build_client("client4"), Path(tempfile.mkdtemp(prefix="class-filter-bench-")))
    [common_jar] = [p for p in java.build.dependency_classpath.split(os.pathsep) if "rocketmq-common-" in p]
    with tempfile.TemporaryDirectory() as d:
        config = ServerConfig(Path(d), allocate_ports(), broker_extra={
            "filterServerNums": "1", "filterClassUploadEnable": "true", "filterClassUploadGroups": "bench_class",
            "filterJavaClasspath": common_jar})
        server = PyrmqServer(config)
        try:
            server.start()
            java.run("produce", namesrv=server.namesrv_addr, topic="ClassBench", mode="batch", batch_size=32,
                     count=n, tags="TagA,TagB", create_topic=4)
            deadline = time.monotonic() + 30
            while not routed_filter_servers(server, "ClassBench") and time.monotonic() < deadline:
                time.sleep(0.2)
            common = dict(namesrv=server.namesrv_addr, topic="ClassBench", count=n // 2, idle_ms=1000,
                          timeout_ms=120_000, deadline_ms=150_000)
            tag = java.run("consume", group="bench_tag", tag_expr="TagA", **common)
            cls = java.run("consume", group="bench_class", filter_class=FILTER_CLASS, filter_source=FILTER_SOURCE,
                           **common)
        finally:
            server.stop()
    for name, result in (("tag TagA (broker)", tag), ("class EvenSeq (FilterServer, JVM worker)", cls)):
        count, per_s = rate(result)
        print(f"{name}: {count} of {n} messages, {per_s:.0f} msg/s")


if __name__ == "__main__":
    main()

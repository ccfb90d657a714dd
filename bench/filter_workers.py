"""Cost of class filtering per message and per worker start: a Python and a Java filter worker
(pyrmq/filtersrv/workers.py, in the jail) asked about N messages one at a time, then in batches of
32 as a FilterServer asks for one pull (sent together, answered one by one); the start of a
worker and the compile of an uploaded Java class timed too.

    python bench/filter_workers.py [--messages 2000] [--common-jar PATH/rocketmq-common-4.9.8.jar]

Without --common-jar (or with no JDK) only the Python worker is measured.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import trio

from pyrmq.codec.message_props import properties_to_string
from pyrmq.filtersrv.java_toolchain import JavaToolchain, JavaUnavailable
from pyrmq.filtersrv.workers import FilterWorker, WorkerLimits, jail_argv

PY_FILTER = b"class Even:\n    def match(self, m):\n        return int(m.properties['seq']) % 2 == 0\n"
BATCH = 32   # the Java push consumer's pullBatchSize
JAVA_FILTER = b"""package bench;
public class Even implements org.apache.rocketmq.common.filter.MessageFilter {
    public boolean match(org.apache.rocketmq.common.message.MessageExt m,
                         org.apache.rocketmq.common.filter.FilterContext c) {
        return Integer.parseInt(m.getUserProperty("seq")) % 2 == 0;
    }
}
"""


def message(i: int) -> dict[str, object]:
    return dict(consumer_group="G", topic="T", queue_id=0, queue_offset=i, commit_log_offset=i * 200, sys_flag=0,
                born_timestamp=1, store_timestamp=2, reconsume_times=0, flag=0,
                properties=properties_to_string({"seq": str(i), "TAGS": "A", "KEYS": f"k-{i}"}),
                body=b"x" * 128)


async def measure(name: str, worker: FilterWorker, n: int) -> None:
    started = time.perf_counter()
    await worker.load()
    start_ms = (time.perf_counter() - started) * 1000
    latencies = []
    began = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        reply = await worker.match(**message(i))
        latencies.append((time.perf_counter() - t) * 1e6)
        assert reply.accepted == (i % 2 == 0), reply
    total = time.perf_counter() - began
    latencies.sort()
    print(f"{name}: worker start + load {start_ms:.0f} ms; one at a time: {n} messages in {total:.2f} s = "
          f"{n / total:.0f} msg/s, median {statistics.median(latencies):.0f} us, p99 {latencies[int(n * 0.99)]:.0f} us")
    began = time.perf_counter()
    for first in range(0, n, BATCH):
        replies = await worker.match_batch([message(i) for i in range(first, min(first + BATCH, n))])
        assert [r.accepted for r in replies] == [i % 2 == 0 for i in range(first, first + len(replies))]
    total = time.perf_counter() - began
    print(f"{name}: in pulls of {BATCH} (as a FilterServer asks): {n} messages in {total:.2f} s = {n / total:.0f} msg/s")
    worker.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--common-jar", default="")
    args = parser.parse_args()
    limits = WorkerLimits(match_timeout_s=5.0)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        work.chmod(0o755)
        (work / "cwd").mkdir(mode=0o555)
        (work / "classes").mkdir()
        argv = [*jail_argv(["--cpu-seconds", "60", "--address-space-mb", "256"], str(work / "cwd")), "python"]
        await measure("python", FilterWorker("bench", argv, "python:Even", PY_FILTER, limits), args.messages)
        if not args.common_jar:
            return
        try:
            java = await trio.to_thread.run_sync(JavaToolchain.create, work, [args.common_jar], limits)
        except JavaUnavailable as exc:
            print(f"java: {exc}")
            return
        await java.compile("bench.Warm", b"package bench; public class Warm {}")   # builds the worker program
        t = time.perf_counter()
        classes = await java.compile("bench.Even", JAVA_FILTER)
        print(f"java: javac of an uploaded class in the jail {(time.perf_counter() - t) * 1000:.0f} ms")
        await measure("java", FilterWorker("bench", java.worker_argv(), "bench.Even", str(classes).encode(), limits),
                      args.messages)


if __name__ == "__main__":
    trio.run(main)

"""Class filtering with the official Java 4.9.8 client through a FilterServer the pyrmq broker
starts itself (filterServerNums=1): ``subscribe(topic, fullClassName, filterClassSource)`` uploads
compat_tests/filters/SeqFilter.java to the FilterServer, which compiles it with the JDK and runs it
in a jailed JVM worker. The consumer receives exactly the accepted messages; the message whose
filter loops forever and the one whose filter allocates without bound are stopped and rejected
alone; after a kill -9 of the FilterServer a new one is running within one check period and the
consumer goes on; a group off the upload allow-list is refused with a clear remark.

pyrmq only: Apache 4.9.7 has no FilterServer (removed in 4.9.6, CVE-2023-33246), so there is no
reference run. client4 only: the 5.x client no longer uploads filter classes (5.1.1).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from compat_tests.servers import remoting_call
from pyrmq.broker.filter_server_manager import CHECK_PERIOD_S

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.compat_servers("pyrmq"),
              pytest.mark.compat_exclude("pyrmq", "client5")]

FILTER_CLASS = "pyrmq.compat.filters.SeqFilter"
FILTER_SOURCE = Path(__file__).parent / "filters" / "SeqFilter.java"
GET_ROUTEINFO_BY_TOPIC = 105
COUNT = 12
ACCEPTED = [i for i in range(COUNT) if i % 2 == 0 and i not in (4, 6)]   # 4 loops, 6 exhausts memory


def filter_server_pids(parent: int) -> list[int]:
    """Children of the broker process running ``pyrmq filtersrv``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"filtersrv" in cmdline:
            found.append(int(entry.name))
    return found


def routed_filter_servers(server, topic: str) -> list[str]:
    host, port = server.namesrv_addr.rsplit(":", 1)
    header, body = remoting_call((host, int(port)), GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if header.get("code") != 0:
        return []
    return json.loads(body).get("filterServerTable", {}).get(server.broker_addr, [])


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout} s")


def test_java_class_filter_through_broker_started_filter_server(module_server_factory, java_client, names):
    [common_jar] = [p for p in java_client.build.dependency_classpath.split(os.pathsep) if "rocketmq-common-" in p]
    server = module_server_factory(filterServerNums="1", filterClassUploadEnable="true",
                                   filterClassUploadGroups=names.group, filterJavaClasspath=common_jar,
                                   filterMatchTimeoutMillis="1000")
    broker = server._broker_process()
    java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync", count=COUNT,
                    create_topic=2)
    wait_until(lambda: routed_filter_servers(server, names.topic), 20, "a FilterServer in the topic's route")
    [first_pid] = filter_server_pids(broker.pid)

    expected = {f"{names.topic}-{i}" for i in ACCEPTED} | {f"second-{i}" for i in ACCEPTED}
    consumer = java_client.start("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                                 count=len(expected), filter_class=FILTER_CLASS, filter_source=FILTER_SOURCE,
                                 heartbeat_ms=2000, poll_namesrv_ms=2000, idle_ms=3000, timeout_ms=100_000,
                                 deadline_ms=110_000)
    try:
        first = {f"{names.topic}-{i}" for i in ACCEPTED}
        consumer.wait_for(lambda events: first <= {e.get("body") for e in events if e["ev"] == "recv"}, 60)

        killed_at = time.monotonic()
        os.kill(first_pid, signal.SIGKILL)
        wait_until(lambda: [p for p in filter_server_pids(broker.pid) if p != first_pid], CHECK_PERIOD_S + 2,
                   "a new FilterServer process")
        restarted_s = time.monotonic() - killed_at
        java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync", count=COUNT,
                        body_prefix="second")
        result = consumer.wait().check()
    finally:
        consumer.kill()
    bodies = [e["body"] for e in result.received]
    assert set(bodies) == expected, result.describe()
    print(f"FilterServer back {restarted_s:.1f} s after kill -9; {len(bodies)} deliveries of {len(expected)} "
          "accepted messages")

    log = server.log_tail(400)
    assert "no answer within 1 s; worker killed" in log and "OutOfMemoryError" in log

    # A group off the allow-list: its upload is refused, so its pulls find no class and get nothing.
    other = names.another_group("notallowed")
    refused = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=other, count=1,
                              filter_class=FILTER_CLASS, filter_source=FILTER_SOURCE, heartbeat_ms=2000,
                              idle_ms=0, timeout_ms=8000)
    assert refused.received == []
    assert f"consumer group {other} may not upload filter classes (not in filterClassUploadGroups)" in \
        server.log_tail(400)

"""Chaos: the official Java client produces (orderly, by key) and consumes (two orderly push
consumers of one group) while the broker is killed with SIGKILL and restarted on its store, again
and again; a SYNC_FLUSH broker must lose no acknowledged message and break no key's order.

The checker (``compat_tests/chaos.py``) counts lost acknowledged messages (must be 0), duplicates
(reported: a producer retrying after a kill, a consumer offset rolled back) and per-key order
violations (must be 0). Every run writes its report to ``chaos-report.json`` in the test's temp
directory and prints the summary line.

For pyrmq the killed process is ``pyrmq standalone`` (NameServer and broker together); for
Apache only the broker JVM (its NameServer stays up, as in production).

Length: ``PYRMQ_CHAOS_SECONDS`` (default 40) of production with ``PYRMQ_CHAOS_KILLS`` (default 5)
kills spread over it. A longer run outside CI::

    PYRMQ_CHAOS_SECONDS=300 PYRMQ_CHAOS_KILLS=30 PYRMQ_COMPAT_SERVERS=pyrmq PYRMQ_COMPAT_CLIENTS=client4 \\
        .venv/bin/python -m pytest compat_tests/test_chaos.py -s --timeout 0
"""

from __future__ import annotations

import os
import random
import time

import pytest

from compat_tests.chaos import check

pytestmark = [pytest.mark.compat, pytest.mark.slow]

CHAOS_S = float(os.environ.get("PYRMQ_CHAOS_SECONDS", "40"))
KILLS = int(os.environ.get("PYRMQ_CHAOS_KILLS", "5"))
KEYS = 8
# After the producers stop: how long the consumers may take to receive every acknowledged message.
DRAIN_TIMEOUT_S = 90


# One client version: the run is about the broker (client5 speaks the same remoting protocol), and
# each run takes about a minute of the CI budget.
@pytest.mark.compat_exclude("pyrmq", "client5")
@pytest.mark.compat_exclude("apache", "client5")
@pytest.mark.compat_exclude("pyrmq-split", "client5")
def test_kill9_chaos_loses_nothing_acknowledged_and_keeps_key_order(server_factory, java_client, names, tmp_path):
    server = server_factory(flush_disk_type="SYNC_FLUSH")
    deadline_ms = int((CHAOS_S + KILLS * 40 + DRAIN_TIMEOUT_S + 60) * 1000)
    java_client.run("create-topic", namesrv=server.namesrv_addr, topic=names.topic, queues=4)
    consumer = java_client.start("chaos-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                                 consumers=2, orderly=1, duration_ms=deadline_ms, deadline_ms=deadline_ms)
    producer = java_client.start("chaos-produce", namesrv=server.namesrv_addr, topic=names.topic, keys=KEYS,
                                 threads=2, duration_ms=int(CHAOS_S * 1000), send_timeout_ms=3000, retries=0,
                                 deadline_ms=deadline_ms)
    rng = random.Random(names.topic)
    kills = 0
    try:
        producer.wait_for(lambda evs: sum(e["ev"] == "sent" for e in evs) >= 20, timeout=60)
        started = time.monotonic()
        for k in range(KILLS):
            # spread the kills over the production time, at irregular moments
            due = started + CHAOS_S * (k + rng.uniform(0.3, 0.9)) / (KILLS + 0.5)
            time.sleep(max(0.0, due - time.monotonic()))
            server.kill()
            kills += 1
            time.sleep(rng.uniform(0.1, 1.5))
            server.start()
        produced = producer.wait().check()
        acked = {e["body"] for e in produced.sent if e["status"] == "SEND_OK"}

        def received_all(events: list[dict]) -> bool:
            return acked <= {e["body"] for e in events if e["ev"] == "recv"}

        try:
            consumer.wait_for(received_all, timeout=DRAIN_TIMEOUT_S)
            time.sleep(2)   # late redeliveries count as duplicates too
        except AssertionError:
            pass   # the report below names what is missing
        consumed = consumer.result()
    finally:
        producer.kill()
        consumer.kill()
    assert not consumed.of("error"), consumed.describe()
    report = check(produced.sent, produced.of("send_failed"), consumed.received, kills=kills)
    (tmp_path / "chaos-report.json").write_text(report.to_json())
    print(f"chaos {server.kind}/{java_client.flavor}: {report.summary()}")
    assert report.sent_ok >= 200, report.summary()
    assert kills == KILLS
    assert not report.lost, f"{len(report.lost)} acknowledged messages lost: {report.lost[:10]}\n{report.summary()}"
    assert not report.order_violations, f"{report.order_violations[:10]}\n{report.summary()}"
    assert not report.unexpected, f"received but never sent: {report.unexpected[:10]}"

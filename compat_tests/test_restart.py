"""Broker restarts: consumer offsets survive a graceful restart; nothing acknowledged under
SYNC_FLUSH is lost to kill -9. Each test has its own server."""

from __future__ import annotations

import pytest

from compat_tests.checks import assert_received_exactly, assert_sent_ok, seed_group_offset, wait_committed_offsets

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def test_consumer_offsets_survive_restart(server_factory, java_client, names):
    server = server_factory()
    first = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync", count=20,
                            body_prefix="before")
    assert_sent_ok(first.sent, 20, server)
    seed_group_offset(server, names.group, names.topic)
    consumed = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                               count=20, idle_ms=1000)
    assert_received_exactly(first.sent, consumed.received)
    # The consumer's last commits are oneway frames sent as it shuts down: stop the broker only
    # once it holds them.
    per_queue = {q: sum(1 for e in first.sent if e["queueId"] == q) for q in range(4)}
    wait_committed_offsets(server, names.group, names.topic, per_queue)

    exit_code = server.restart()
    assert exit_code in server.graceful_exit_codes, f"exit code {exit_code} after SIGTERM"

    second = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync", count=10,
                             body_prefix="after")
    assert all(e["status"] == "SEND_OK" for e in second.sent) and len(second.sent) == 10
    # The queues continue where they were: offsets after the 20 already there.
    assert sorted(e["queueOffset"] for e in second.sent) == sorted(
        n for q in range(4) for n in range(sum(1 for e in first.sent if e["queueId"] == q),
                                           sum(1 for e in first.sent + second.sent if e["queueId"] == q)))
    again = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                            count=10, idle_ms=2500)
    # Exactly the new ten: the group's committed offsets came back with the broker.
    assert_received_exactly(second.sent, again.received)


def test_sync_flush_kill9_loses_no_acknowledged_message(server_factory, java_client, names):
    server = server_factory(flush_disk_type="SYNC_FLUSH")
    producer = java_client.start("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync",
                                 count=100_000, interval_ms=2, stop_after_failures=3, retries=0,
                                 send_timeout_ms=3000)
    try:
        producer.wait_for(lambda evs: sum(e["ev"] == "sent" for e in evs) >= 60, timeout=60)
        server.kill()
        result = producer.wait().check()
    finally:
        producer.kill()
    acked = [e for e in result.sent if e["status"] == "SEND_OK"]
    assert len(acked) >= 60 and result.of("send_failed"), "the broker did not die mid-stream"
    attempted = {e["body"] for e in result.sent + result.of("send_failed")}

    server.start()  # the same store directory and ports
    consumed = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic,
                               group=names.another_group("after_kill"), count=len(acked), idle_ms=3000,
                               timeout_ms=60_000)
    received = {e["body"] for e in consumed.received}
    lost = sorted({e["body"] for e in acked} - received, key=lambda b: int(b.rsplit("-", 1)[1]))
    assert not lost, f"{len(lost)} acknowledged messages lost: {lost[:10]}"
    assert received <= attempted, f"unexpected bodies: {sorted(received - attempted)[:10]}"
    assert not consumed.duplicates(), consumed.duplicates()

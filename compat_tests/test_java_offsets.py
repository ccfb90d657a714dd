"""Where a new group starts (CONSUME_FROM_FIRST_OFFSET / LAST_OFFSET / TIMESTAMP) and offset
resets (DefaultMQAdminExt.resetOffsetByTimestamp online, updateConsumeOffset offline)."""

from __future__ import annotations

from collections import Counter

import pytest

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def nothing_in_memory_server(module_server_factory):
    """A server on which no message counts as "in memory" (accessMessageInMemoryMaxRatio=0).

    A brand-new group's QUERY_CONSUMER_OFFSET is answered 0 (not QUERY_NOT_FOUND) when the queue's
    first message is still in memory (spec codes.md 4.6), and then every consumeFromWhere starts
    at offset 0; only with QUERY_NOT_FOUND does the client apply LAST (GET_MAX_OFFSET) or
    TIMESTAMP (SEARCH_OFFSET_BY_TIMESTAMP). With the ratio at 0 every message is "on disk", as
    on a broker whose queues are older than its page cache."""
    return module_server_factory(accessMessageInMemoryMaxRatio="0")


def _batches(run) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for e in run.sent:
        out.setdefault(e["body"].split("-")[0], []).append(e)
    return out


def test_new_group_consume_from_first_timestamp_last(nothing_in_memory_server, java_client, names):
    """Batch A, a pause across a whole second T, batch B; then new groups start: FIRST gets
    A+B+C, TIMESTAMP(T) gets B+C, LAST gets only C (sent after the groups held their queues)."""
    _check_from_where(nothing_in_memory_server, java_client, names,
                      {"first": "ABC", "ts": "BC", "last": "C"})


@pytest.mark.compat_exclude("pyrmq", "client5")
@pytest.mark.compat_exclude("apache", "client5")
@pytest.mark.compat_exclude("pyrmq-split", "client5")
def test_new_group_starts_at_zero_while_first_message_in_memory(server, java_client, names):
    """The same on a default broker, where the queues' first messages are still in memory: the
    broker answers a new group's QUERY_CONSUMER_OFFSET with 0, so FIRST, TIMESTAMP and LAST
    all get A+B+C. (Client 4 only: the 5.3.3 client asks QUERY_CONSUMER_OFFSET the same way.)"""
    _check_from_where(server, java_client, names, {"first": "ABC", "ts": "ABC", "last": "ABC"})


def _check_from_where(server, java_client, names, expected: dict[str, str]) -> None:
    count = 12
    run = java_client.run("fromwhere", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          count=count, create_topic=4)
    assert {e["status"] for e in run.sent} == {"SEND_OK"} and len(run.sent) == 3 * count
    batches = _batches(run)
    assert sorted(batches) == ["A", "B", "C"]
    (ts,) = run.of("timestamp")
    for label, wanted in expected.items():
        got = [e for e in run.received if e["g"] == label]
        counts = Counter(e["body"] for e in got)
        assert set(counts.values()) <= {1}, (label, {b: n for b, n in counts.items() if n > 1})
        assert set(counts) == {e["body"] for b in wanted for e in batches[b]}, \
            (label, sorted(counts), ts)
        if label == "ts" and wanted == "BC":
            # The store times are the broker's: T falls between A and B.
            assert min(e["storeTimestamp"] for e in got) >= ts["ms"] > max(
                e["storeTimestamp"] for e in run.received if e["body"].startswith("A-"))


@pytest.mark.slow
def test_offset_reset_by_timestamp_online_and_offline(server, java_client, names):
    """A group consumed A and B (committed: consume stats consumerOffset = brokerOffset). Reset to
    T (between A and B) with the consumer online: the broker computes the offsets (the first B
    message of every queue) and tells the client (RESET_CONSUMER_CLIENT_OFFSET), which receives
    exactly B again. Then offline: searchOffset(T) + updateConsumeOffset per queue, a new
    consumer of the group receives exactly B once more."""
    count = 12
    run = java_client.run("reset", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          count=count, create_topic=4, timeout_ms=110_000, deadline_ms=140_000)
    batches = _batches(run)
    assert {e["status"] for e in run.sent} == {"SEND_OK"} and len(run.sent) == 2 * count
    a_per_queue = Counter(e["queueId"] for e in batches["A"])
    all_per_queue = Counter(e["queueId"] for e in run.sent)
    resets = {e["how"]: e["offsets"] for e in run.of("reset")}
    expected_offsets = {str(q): a_per_queue[q] for q in range(4)}
    assert resets == {"online": expected_offsets, "offline": expected_offsets}
    stats = {e["label"]: e["queues"] for e in run.of("consume_stats")}
    for label in ("consumed", "reconsumed"):
        assert stats[label] == {
            f"broker-a/{names.topic}/{q}": {"brokerOffset": all_per_queue[q], "consumerOffset": all_per_queue[q],
                                            "lastTimestamp": stats[label][f"broker-a/{names.topic}/{q}"]["lastTimestamp"]}
            for q in range(4)}, stats
    bodies = {b: {e["body"] for e in batches[b]} for b in batches}
    for phase, wanted in ((1, bodies["A"] | bodies["B"]), (2, bodies["B"]), (3, bodies["B"])):
        got = Counter(e["body"] for e in run.received if e.get("phase") == phase)
        assert set(got) == wanted, (phase, sorted(set(got) ^ wanted))
        assert set(got.values()) == {1}, (phase, {b: n for b, n in got.items() if n > 1})

"""5.x timer messages with the 5.3.3 Java client (Message.setDelayTimeMs / setDeliverTimeMs):
a message with a 7 s delay arrives in its topic no earlier than due and within 1 s after, also
across a broker restart (SIGTERM, start on the same store) -- on pyrmq and on Apache 5.3.3.

"Arrives" is the store time of the delivered copy (when the broker put it into its real topic,
the same host's clock as the client's); a consumer that is connected the whole time also sees it
within the second. Each message's time is set when the client's clock reads x.500 s
(--timer-align-ms 500), so the due time falls in the middle of the broker's 1 s slot: a timer
delivers a slot once it has passed (pyrmq and Apache alike), half a second after such a due time.
4.9.8 clients have no timer API: client5 only.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

pytestmark = [
    pytest.mark.compat, pytest.mark.slow,
    pytest.mark.compat_servers("pyrmq", "apache5"),
    pytest.mark.compat_exclude("pyrmq", "client4"), pytest.mark.compat_exclude("apache5", "client4"),
]

DELAY_MS = 7000
COUNT = 4


def _produce(java_client, server, names):
    produced = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync", count=COUNT,
                               create_topic=4, timer_delay_ms=DELAY_MS, timer_api="mixed", timer_align_ms=500)
    assert [e["status"] for e in produced.sent] == ["SEND_OK"] * COUNT, produced.sent
    return produced.sent


def _check_arrivals(sent, received, topic, back_at_ms: float = 0, repeat_window_ms: tuple[float, float] | None = None):
    """Each message once, in its topic, stored no earlier than due and within 1 s after -- or,
    when the broker was still restarting at the due time, within 1 s after it was back
    (``back_at_ms``): a JVM start on a loaded machine can outlast the 7 s delay.

    ``repeat_window_ms`` (Apache 5 across a restart): a message due within it may arrive twice,
    both copies under its msgId. Apache's TimerMessageStore.shutdown saves its checkpoint before
    it stops the dequeue threads, so a slot they put meanwhile is put again after the start
    (at-least-once); pyrmq's stop delivers each once."""
    by_body = {e["body"]: e for e in sent}
    counts = Counter(e["body"] for e in received)
    assert set(counts) == set(by_body), counts
    for body, count in counts.items():
        s = by_body[body]
        # its slot was being put during the window: due (at the latest) + the slot's second after its start
        may_repeat = (repeat_window_ms is not None and int(s["created"]) + DELAY_MS <= repeat_window_ms[1]
                      and s["at"] + DELAY_MS + 1000 >= repeat_window_ms[0])
        assert count == 1 or (count == 2 and may_repeat), (body, count, s, repeat_window_ms)
    late = []
    for r in received:
        s = by_body[r["body"]]
        assert r["topic"] == topic and r["msgId"] == s["msgId"]
        earliest_due = int(s["created"]) + DELAY_MS   # the broker's due time is at or after this
        latest_due = max(s["at"] + DELAY_MS, back_at_ms)
        assert r["storeTimestamp"] >= earliest_due, f"{r['body']} stored {earliest_due - r['storeTimestamp']} ms early"
        assert r["storeTimestamp"] <= latest_due + 1000, f"{r['body']} stored {r['storeTimestamp'] - latest_due} ms late"
        late.append(r["storeTimestamp"] - earliest_due)
    print(f"stored after due (ms): {sorted(late)}")
    return late


def test_timer_message_arrives_when_due(server, java_client, names):
    consumer = java_client.start("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                                 count=COUNT, idle_ms=1500, timeout_ms=40_000, create_topic=4)
    try:
        sent = _produce(java_client, server, names)
        consumed = consumer.wait().check()
    finally:
        consumer.kill()
    _check_arrivals(sent, consumed.received, names.topic)
    # the connected consumer got each within the second too
    by_body = {e["body"]: e for e in sent}
    for r in consumed.received:
        assert r["at"] <= by_body[r["body"]]["at"] + DELAY_MS + 1000, r


def test_timer_message_arrives_when_due_across_restart(server_factory, java_client, names):
    server = server_factory()
    sent = _produce(java_client, server, names)
    stop_at_ms = time.time() * 1000
    exit_code = server.restart()
    back_at_ms = time.time() * 1000
    assert exit_code in server.graceful_exit_codes, f"exit code {exit_code} after SIGTERM"
    print(f"broker back {back_at_ms - max(e['at'] for e in sent):.0f} ms after the last send (due after {DELAY_MS})")
    consumed = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                               count=COUNT, idle_ms=1500, timeout_ms=40_000)
    repeat_window = (stop_at_ms, back_at_ms) if server.kind == "apache5" else None
    _check_arrivals(sent, consumed.received, names.topic, back_at_ms, repeat_window)

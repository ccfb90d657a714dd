"""Consumer scenarios: push (concurrent), tag filtering, pull, lite pull, two consumers sharing a
group, and long polling."""

from __future__ import annotations

import pytest

from compat_tests.checks import assert_dense_queues, assert_received_exactly, assert_sent_ok

pytestmark = pytest.mark.compat

COUNT = 30
TAGS = "TagA,TagB,TagC"


def _produce(java_client, server, names, count=COUNT, tags=TAGS):
    produced = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync",
                               count=count, tags=tags)
    assert_sent_ok(produced.sent, count, server)
    return produced


@pytest.mark.compat_servers("pyrmq", "apache", "apache5", "pyrmq-split")
@pytest.mark.compat_exclude("apache5", "client4")
def test_push_consumer_receives_all(server, java_client, names):
    """Also the 5.x baseline: the 5.3.3 client against Apache 5.3.3 (apache5 runs client5 only;
    the 4.9.8 client's pairs are the 4.x references)."""
    produced = _produce(java_client, server, names)
    consumed = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                               count=COUNT, idle_ms=1000)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(produced.sent, consumed.received)
    assert {e["reconsumeTimes"] for e in consumed.received} == {0}


def test_push_consumer_tag_filter(server, java_client, names):
    produced = _produce(java_client, server, names)
    wanted = [e for e in produced.sent if e["tags"] in ("TagA", "TagC")]
    assert len(wanted) == 20
    consumed = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                               tag_expr="TagA || TagC", count=len(wanted), idle_ms=1500)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(wanted, consumed.received)


def test_pull_consumer_tag_filter(server, java_client, names):
    """DefaultMQPullConsumer sends the expression with every pull; the broker filters by tag code."""
    produced = _produce(java_client, server, names)
    wanted = [e for e in produced.sent if e["tags"] == "TagB"]
    pulled = java_client.run("pull", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                             tag_expr="TagB")
    assert_received_exactly(wanted, pulled.received)
    # Every queue was scanned to its end: the last pull of each is NO_NEW_MSG at the max offset.
    ends = {p["queueId"]: p for p in pulled.of("pull") if p["status"] == "NO_NEW_MSG"}
    sent_per_queue = {q: sum(1 for e in produced.sent if e["queueId"] == q) for q in range(4)}
    assert {q: p["maxOffset"] for q, p in ends.items()} == sent_per_queue


@pytest.mark.compat_exclude("apache", "client5")
def test_lite_pull_consumer(server, java_client, names):
    """DefaultLitePullConsumer. The 5.x client pulls with LITE_PULL_MESSAGE (361), which Apache 4.9.x
    answers with REQUEST_CODE_NOT_SUPPORTED, so (apache, client5) is not a reference pair."""
    produced = _produce(java_client, server, names)
    consumed = java_client.run("litepull", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                               count=COUNT, idle_ms=1000)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(produced.sent, consumed.received)
    assert_dense_queues(consumed.received)


def test_two_push_consumers_split_queues(server, java_client, names):
    """Two consumers of one group (one JVM, two client instances) share the topic's queues: each gets
    a disjoint, non-empty part and together they get every message once."""
    count = 40
    run = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          create_topic=4, consumers=2, wait_balanced=1, produce=count, idle_ms=1500)
    assert run.summary["complete"], run.describe()
    assert_sent_ok(run.sent, count, server)
    assert_received_exactly(run.sent, run.received)
    (balanced,) = run.of("balanced")
    assignment = [set(q) for q in balanced["assignment"]]
    assert all(assignment) and not (assignment[0] & assignment[1])
    assert assignment[0] | assignment[1] == {0, 1, 2, 3}
    for c in (0, 1):
        mine = [e for e in run.received if e["c"] == c]
        assert mine, f"consumer {c} received nothing"
        assert {e["queueId"] for e in mine} == assignment[c]


@pytest.mark.slow
def test_long_polling_wakes_waiting_consumer(server, java_client, names):
    """A push consumer whose pull requests are parked at the broker gets a new message at once.

    Measured in one JVM: the consumer's receive time minus the producer's send-return time, and,
    just before the send, how long ago each queue's pull request was sent. Parked pulls are old
    (the consumer idled 1.5 s); a broker that answers empty pulls at once would make the client
    spin and pass the latency bound without long polling, so both must hold. A broker that only
    re-checks parked pulls periodically (Apache: every 5 s) misses the latency bound. Three
    attempts; one must make it (one slow attempt on a loaded machine is noise, three are not).
    """
    run = java_client.run("longpoll", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          create_topic=4, attempts=3, idle_ms=1500)
    latencies = run.of("latency")
    assert len(latencies) == 3
    assert all(e["received"] is not None for e in latencies), latencies
    assert all(len(e["pullAgesMs"]) == 4 for e in latencies), latencies
    good = [e for e in latencies if e["deltaMs"] < 200 and min(e["pullAgesMs"]) >= 500]
    assert good, ("no attempt where parked pulls (>= 500 ms old) woke within 200 ms: "
                  f"{[(e['deltaMs'], e['pullAgesMs']) for e in latencies]}")

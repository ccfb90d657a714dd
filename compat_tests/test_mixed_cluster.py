"""Mixed clusters: pyrmq and Apache RocketMQ nodes in one cluster, driven by the official Java
client 4.9.8.

- a pyrmq broker registered with an Apache NameServer, and an Apache broker registered with a
  pyrmq NameServer, each serving clients routed there by that NameServer;
- one topic over a pyrmq broker and an Apache broker (two broker names, one cluster, one
  NameServer of either kind): one producer's messages land on both, one push consumer gets
  every one of them exactly once; when the broker of the other kind than the NameServer leaves,
  the NameServer routes the topic to the one that stays.
"""

from __future__ import annotations

import uuid

import pytest

from compat_tests.checks import assert_received_exactly
from compat_tests.cluster import (  # noqa: F401  (fixtures)
    CLUSTER_NAME,
    BrokerSpec,
    assert_acked_by,
    client4_fixture,
    cluster_fixture,
    lenient_json,
    next_offsets,
)
from compat_tests.servers import remoting_call

pytestmark = [pytest.mark.compat, pytest.mark.slow]

GET_BROKER_CLUSTER_INFO = 106


def _names(prefix: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"MX_{prefix}_{tag}", f"MX_G_{prefix}_{tag}"


def _cluster_brokers(namesrv) -> dict[str, set[str]]:
    """GET_BROKER_CLUSTER_INFO: cluster name -> broker names."""
    header, body = remoting_call(("127.0.0.1", namesrv.port), GET_BROKER_CLUSTER_INFO)
    assert header.get("code") == 0, header
    info = lenient_json(body)
    return {name: set(brokers) for name, brokers in info["clusterAddrTable"].items()}


@pytest.mark.parametrize("namesrv_kind,broker_kind", [("apache", "pyrmq"), ("pyrmq", "apache")])
def test_broker_serves_clients_routed_by_other_kind_of_namesrv(cluster, client4, namesrv_kind, broker_kind):
    namesrv = cluster.namesrv(namesrv_kind)
    broker = cluster.broker(broker_kind, BrokerSpec(name=f"broker-{broker_kind}", store_dir=cluster.root / "store",
                                                    namesrv_addr=namesrv.addr))
    assert _cluster_brokers(namesrv) == {CLUSTER_NAME: {broker.name}}
    topic, group = _names(f"{broker_kind}_on_{namesrv_kind}")

    produced = client4.run("produce", namesrv=namesrv.addr, topic=topic, mode="sync", count=30,
                           tags="TagA,TagB,TagC")
    assert_acked_by(produced.sent, 30, {broker.name: broker.addr})
    # The broker registered the auto-created topic; the NameServer routes it there.
    route = namesrv.wait_route(topic, {broker.name})
    (queue_data,) = route["queueDatas"]
    assert (queue_data["readQueueNums"], queue_data["writeQueueNums"]) == (4, 4)
    assert list(route["brokerDatas"][0]["brokerAddrs"].values()) == [broker.addr]

    consumed = client4.run("consume", namesrv=namesrv.addr, topic=topic, group=group, count=30, idle_ms=1000)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(produced.sent, consumed.received)

    tagged = client4.run("consume", namesrv=namesrv.addr, topic=topic, group=f"{group}_tagB", tag_expr="TagB",
                         count=10, idle_ms=1000)
    assert_received_exactly([e for e in produced.sent if e["tags"] == "TagB"], tagged.received)


@pytest.mark.parametrize("namesrv_kind", ["apache", "pyrmq"])
def test_topic_spread_over_pyrmq_and_apache_brokers(cluster, client4, namesrv_kind):
    namesrv = cluster.namesrv(namesrv_kind)
    py = cluster.broker("pyrmq", BrokerSpec(name="broker-py", store_dir=cluster.root / "store-py",
                                            namesrv_addr=namesrv.addr))
    ap = cluster.broker("apache", BrokerSpec(name="broker-ap", store_dir=cluster.root / "store-ap",
                                             namesrv_addr=namesrv.addr))
    brokers = {py.name: py.addr, ap.name: ap.addr}
    assert _cluster_brokers(namesrv) == {CLUSTER_NAME: set(brokers)}
    topic, group = _names(f"both_on_{namesrv_kind}")

    # A new topic: the producer takes TBW102's route (both brokers, 4 queues each) and sends
    # round-robin; each broker creates the topic on its first message and registers it.
    produced = client4.run("produce", namesrv=namesrv.addr, topic=topic, mode="sync", count=40,
                           tags="TagA,TagB")
    assert_acked_by(produced.sent, 40, brokers)
    per_broker = {name: sum(1 for e in produced.sent if e["broker"] == name) for name in brokers}
    assert all(n > 0 for n in per_broker.values()), per_broker

    route = namesrv.wait_route(topic, set(brokers))
    assert {q["brokerName"]: q["readQueueNums"] for q in route["queueDatas"]} == {py.name: 4, ap.name: 4}

    consumed = client4.run("consume", namesrv=namesrv.addr, topic=topic, group=group, count=40, idle_ms=1500)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(produced.sent, consumed.received)
    assert {e["body"] for e in consumed.received} == {f"{topic}-{i}" for i in range(40)}

    # The broker of the other kind than the NameServer leaves (SIGTERM: it unregisters, its
    # connection closes); the NameServer routes the topic to the remaining broker only, and new
    # sends go there, continuing its queues.
    leaving, staying = (ap, py) if namesrv_kind == "pyrmq" else (py, ap)
    code = leaving.stop()
    assert code in leaving.graceful_exit_codes, f"{leaving} exit code {code}\n{leaving.log_tail()}"
    namesrv.wait_route(topic, {staying.name}, timeout=15)
    assert _cluster_brokers(namesrv) == {CLUSTER_NAME: {staying.name}}
    after = client4.run("produce", namesrv=namesrv.addr, topic=topic, mode="sync", count=10, body_prefix="after")
    assert_acked_by(after.sent, 10, {staying.name: staying.addr}, next_offsets(produced.sent))

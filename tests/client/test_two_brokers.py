"""A topic on two brokers: the producer rotates over both, goes to the other broker when one
refuses or is gone, keeps away from a failed one, and picks up a route change at its refresh."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
import trio

from pyrmq.broker.config import build_config
from pyrmq.broker.controller import BrokerController
from pyrmq.client import Producer, PullConsumer
from pyrmq.codec.codes import RequestCode
from tests.broker.conftest import broker_properties
from tests.client.helpers import create_topic, watch


@pytest.fixture
async def broker_b(cluster, nursery, tmp_path):
    loaded = build_config(broker_properties(tmp_path / "b", cluster.namesrv.port, brokerName="broker-b"))
    broker = BrokerController(loaded)
    await nursery.start(broker.run)
    yield broker
    broker.stop()
    await broker.wait_stopped()


async def test_sends_move_to_the_other_broker(cluster, broker_b, caplog):
    with trio.fail_after(30):
        await create_topic(cluster, "TwoTopic", queues=2)
        async with Producer(cluster.namesrv_addr, "pg_two", route_refresh_interval=0.3) as producer, \
                PullConsumer(cluster.namesrv_addr, "cg_two") as consumer:
            first = [await producer.send("TwoTopic", b"x") for _ in range(4)]
            assert {r.queue.broker_name for r in first} == {"broker-a"}
            # broker-b gets the topic: seen at the next route refresh, sends rotate over both
            await create_topic(cluster, "TwoTopic", 2, broker_b.config.broker_addr)
            await trio.sleep(0.5)
            spread = Counter((r.queue.broker_name, r.queue.queue_id)
                             for r in [await producer.send("TwoTopic", b"y") for _ in range(8)])
            assert spread == {(b, q): 2 for b in ("broker-a", "broker-b") for q in (0, 1)}

            # broker-a refuses: each send goes on to broker-b, and broker-a is then left alone
            refusals = watch(cluster, RequestCode.SEND_MESSAGE_V2, refuse=100)
            results = [await producer.send("TwoTopic", f"z{i}".encode()) for i in range(6)]
            assert {r.queue.broker_name for r in results} == {"broker-b"}
            assert len(refusals.seen) == 1   # isolated after its first refusal
            refusals.refuse = 0

            # broker-b goes away while the producer's cached route still names it: the send that
            # picks it fails to connect and goes to broker-a, and the route is fetched again
            producer.instance.route_refresh_interval = 3600
            await trio.sleep(0.4)   # the refresh loop's pending 0.3 s turn passes; the next is in an hour
            fresh = await producer.send("TwoTopic", b"fresh route")
            producer._faults.clear("broker-a")
            broker_b.stop()
            await broker_b.wait_stopped()
            with caplog.at_level(logging.INFO, "pyrmq.client.producer"):
                results = [await producer.send("TwoTopic", f"w{i}".encode()) for i in range(4)]
            assert {r.queue.broker_name for r in results} == {"broker-a"}
            assert any("MQConnectError" in r.getMessage() or "failed, attempt 1" in r.getMessage()
                       for r in caplog.records), caplog.text
            queues = await consumer.fetch_queues("TwoTopic")
            assert {mq.broker_name for mq in queues} == {"broker-a"}   # gone from the route too
            stored = sum([await consumer.max_offset(mq) for mq in queues])
            assert stored == 4 + 4 + (fresh.queue.broker_name == "broker-a") + 4

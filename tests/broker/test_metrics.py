"""The Prometheus endpoint (metricsPort), scraped over HTTP while messages flow: rocketmq-exporter's
names and labels are there, TPS and lag move with the traffic, the disk ratio is the file system's.
The stats sampling clock is driven by the test (``tick``), so no window is waited out."""

from __future__ import annotations

import os
import time

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from tests.broker.conftest import free_port
from tests.broker.rmq import pull, send

METRICS_PORT = free_port()


@pytest.fixture
def broker_overrides():
    return {"metricsPort": METRICS_PORT}


async def scrape(port: int, request: bytes | None = None) -> tuple[bytes, bytes]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request or b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = bytearray()
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    return head, body


def samples(body: bytes) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def value(table, name: str, **labels) -> float:
    matches = [v for (n, ls), v in table.items() if n == name and set(labels.items()) <= ls]
    assert len(matches) == 1, (name, labels, matches)
    return matches[0]


async def test_metrics_under_load(cluster):
    addr = cluster.broker_addr
    port = cluster.broker.metrics.server.port
    stats = cluster.broker.stats
    t0 = int(time.time() * 1000)
    sent = 0

    async def produce(count: int) -> None:
        nonlocal sent
        for _ in range(count):
            assert (await send(cluster.client, addr, "TopicM", b"m" * 100, queue_id=sent % 2)).code == 0
            sent += 1

    with trio.fail_after(30):
        stats.tick(0, t0)
        async with trio.open_nursery() as nursery:    # scraped while a producer sends
            nursery.start_soon(produce, 40)
            for _ in range(5):
                head, _ = await scrape(port)
                assert head.startswith(b"HTTP/1.1 200 ")
                await trio.sleep(0)
        resp, messages = await pull(cluster.client, addr, "TopicM", 0, 0, group="gm")
        assert len(messages) == 20
        assert (await cluster.client.invoke(addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": "gm", "topic": "TopicM", "queueId": "0", "commitOffset": "15"}), timeout=5)).code == 0
        stats.tick(10, t0 + 10_000)
        while cluster.broker.store.clean_service.disk_ratios.commit_log < 0:   # first reading after 1 s
            await trio.sleep(0.1)

        head, body = await scrape(port)
        assert b"content-type: text/plain; version=" in head.lower()
        first = samples(body)
        broker = {"cluster": "DefaultCluster", "broker": "broker-a"}
        # the items were born after the tick at t0: their windows open from zero 10 s before their
        # first sample (t0 + 10 s), as Apache's, so 40 messages over 10 s
        assert value(first, "rocketmq_producer_tps", topic="TopicM", **broker) == 4.0
        assert value(first, "rocketmq_producer_offset", topic="TopicM", **broker) == 40
        assert value(first, "rocketmq_broker_tps", brokerIP=addr) == 4.0
        assert value(first, "rocketmq_broker_qps", brokerIP=addr) == 2.0
        assert value(first, "rocketmq_consumer_tps", topic="TopicM", group="gm", **broker) == 2.0
        assert value(first, "rocketmq_consumer_offset", topic="TopicM", group="gm", **broker) == 15
        assert value(first, "rocketmq_group_diff", topic="TopicM", group="gm", queueid="0") == 5
        assert value(first, "rocketmq_group_diff", topic="TopicM", group="gm", queueid="1") == 20
        assert value(first, "rocketmq_group_get_latency_by_storetime", topic="TopicM", group="gm") > 0
        assert value(first, "rocketmq_brokeruntime_msg_put_total_today_now", brokerIP=addr) == 40
        assert value(first, "pyrmq_store_put_messages_total", **broker) == 40
        assert value(first, "pyrmq_store_earliest_message_timestamp_ms", **broker) == messages[0].store_timestamp
        disk = os.statvfs(cluster.broker.store.config.store_path_root_dir)
        used = (disk.f_blocks - disk.f_bfree) / (disk.f_blocks - disk.f_bfree + disk.f_bavail)
        assert abs(value(first, "pyrmq_store_commitlog_disk_ratio", **broker) - used) < 0.01
        assert value(first, "rocketmq_brokeruntime_commitlog_disk_ratio", brokerIP=addr) == \
            value(first, "pyrmq_store_commitlog_disk_ratio", **broker)

        # more traffic, the group catches up: TPS and lag move
        await produce(60)
        assert (await cluster.client.invoke(addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": "gm", "topic": "TopicM", "queueId": "1", "commitOffset": "50"}), timeout=5)).code == 0
        stats.tick(20, t0 + 20_000)
        second = samples((await scrape(port))[1])
        assert value(second, "rocketmq_producer_tps", topic="TopicM", **broker) == 100 / 20
        assert value(second, "rocketmq_producer_offset", topic="TopicM", **broker) == 100
        assert value(second, "rocketmq_group_diff", topic="TopicM", group="gm", queueid="0") == 50 - 15
        assert value(second, "rocketmq_group_diff", topic="TopicM", group="gm", queueid="1") == 0


async def test_metrics_endpoint_answers_only_metrics(cluster):
    port = cluster.broker.metrics.server.port
    with trio.fail_after(10):
        head, _ = await scrape(port, b"GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 404 ")
        head, _ = await scrape(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                                     b"Connection: close\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 405 ")
        head, _ = await scrape(port, b"NOT HTTP AT ALL\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ")
        head, _ = await scrape(port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ")          # a head over 16 KiB
        head, _ = await scrape(port)                       # and it still serves
        assert head.startswith(b"HTTP/1.1 200 ")
    assert cluster.broker.metrics.server.host == "127.0.0.1"   # loopback unless configured

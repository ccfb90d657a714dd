"""What pyrmq.client (the public Python client) does per second against a running broker: 1 KiB
sends one at a time through the blocking facade, then with concurrent senders on the trio API,
then pulls of everything back (32 a pull).

    .venv/bin/python bench/client_throughput.py --namesrv 127.0.0.1:9876 --messages 5000 --inflight 32

A benchmark, not a test; docs/SPARK.md ("pyrmq.client") records its figures.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import trio

from pyrmq.client import Producer, PullConsumer, PullStatus, sync


def sync_sends(namesrv: str, topic: str, count: int, body: bytes) -> float:
    with sync.Producer(namesrv, "bench_pg_sync", timeout=10) as producer:
        producer.send(topic, body)   # route lookup and connection outside the timing
        started = time.perf_counter()
        for _ in range(count):
            producer.send(topic, body)
        return count / (time.perf_counter() - started)


async def concurrent_sends(namesrv: str, topic: str, count: int, inflight: int, body: bytes) -> float:
    async with Producer(namesrv, "bench_pg", timeout=10) as producer:
        await producer.send(topic, body)
        started = time.perf_counter()

        async def sender(share: int) -> None:
            for _ in range(share):
                await producer.send(topic, body)
        async with trio.open_nursery() as nursery:
            for i in range(inflight):
                nursery.start_soon(sender, count // inflight + (i < count % inflight))
        return count / (time.perf_counter() - started)


async def pull_all(namesrv: str, topic: str) -> tuple[int, float]:
    async with PullConsumer(namesrv, f"bench_cg_{uuid.uuid4().hex[:6]}", timeout=10) as consumer:
        queues = await consumer.fetch_queues(topic)
        started = time.perf_counter()
        total = 0
        for mq in queues:
            offset = 0
            while (result := await consumer.pull(mq, offset)).status is PullStatus.FOUND:
                total += len(result.messages)
                offset = result.next_begin_offset
        return total, total / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--inflight", type=int, default=32)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    topic = f"ClientBench_{uuid.uuid4().hex[:8]}"
    body = os.urandom(args.size)
    print(f"sync facade, one at a time: {sync_sends(args.namesrv, topic, args.messages, body):,.0f} sends/s")
    rate = trio.run(concurrent_sends, args.namesrv, topic, args.messages, args.inflight, body)
    print(f"trio API, {args.inflight} concurrent senders: {rate:,.0f} sends/s")
    total, rate = trio.run(pull_all, args.namesrv, topic)
    print(f"pull consumer, 32 a pull: {total:,} messages at {rate:,.0f} messages/s")


if __name__ == "__main__":
    main()

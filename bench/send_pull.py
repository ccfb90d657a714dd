"""Baseline throughput of a running pyrmq (or any RocketMQ broker): sends/s and pulled messages/s
for 1 KiB messages, over the remoting protocol, from one Python process.

    .venv/bin/python bench/send_pull.py --namesrv 127.0.0.1:9876 --messages 20000 --inflight 64

It is a benchmark, not a test: run it by hand and record the figures (bench/RESULTS.md).  The
client is Python too, so the figure is a lower bound of the broker's capacity; for numbers from
the official Java client, side by side with Apache RocketMQ, see bench/side_by_side.py.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import trio

from pyrmq.codec import fastjson
from pyrmq.codec.remoting import SerializeType, make_request
from pyrmq.remoting.client import RemotingClient

SEND_MESSAGE_V2 = 310
PULL_MESSAGE = 11
GET_ROUTEINFO_BY_TOPIC = 105
UPDATE_AND_CREATE_TOPIC = 17


async def find_broker(client: RemotingClient, namesrv: str, topic: str) -> str:
    for _ in range(50):
        response = await client.invoke(namesrv, make_request(GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        if response.code == 0:
            route = fastjson.loads(response.body)
            return next(iter(route["brokerDatas"][0]["brokerAddrs"].values()))
        await trio.sleep(0.2)
    raise SystemExit(f"no route for {topic}: {response.remark}")


async def bench(args) -> None:
    topic = f"Bench_{uuid.uuid4().hex[:8]}"
    body = os.urandom(args.size)
    serialize = SerializeType.ROCKETMQ if args.binary else SerializeType.JSON
    async with RemotingClient() as client:
        broker = await find_broker(client, args.namesrv, "TBW102")
        response = await client.invoke(broker, make_request(UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(args.queues),
            "writeQueueNums": str(args.queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0", "order": "false"}))
        assert response.code == 0, response.remark

        sent = 0
        errors = 0

        async def sender(worker: int) -> None:
            nonlocal sent, errors
            while sent < args.messages:
                queue_id = sent % args.queues
                sent += 1
                header = {"a": "bench_pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
                          "g": str(int(time.time() * 1000)), "h": "0",
                          "i": f"UNIQ_KEY\x01{uuid.uuid4().hex}\x02WAIT\x01true\x02"}
                resp = await client.invoke(broker, make_request(SEND_MESSAGE_V2, header, body,
                                                                serialize_type=serialize), timeout=10)
                if resp.code != 0:
                    errors += 1

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for worker in range(args.inflight):
                nursery.start_soon(sender, worker)
        send_elapsed = time.perf_counter() - start

        pulled = 0
        start = time.perf_counter()
        for queue_id in range(args.queues):
            offset = 0
            while True:
                header = {"consumerGroup": "bench_cg", "topic": topic, "queueId": str(queue_id),
                          "queueOffset": str(offset), "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0",
                          "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
                          "expressionType": "TAG"}
                resp = await client.invoke(broker, make_request(PULL_MESSAGE, header, serialize_type=serialize),
                                           timeout=10)
                if resp.code != 0:
                    break
                next_offset = int(resp.ext_fields["nextBeginOffset"])
                pulled += next_offset - offset
                offset = next_offset
        pull_elapsed = time.perf_counter() - start

    print(f"topic {topic}: {args.messages} x {args.size} B messages, {args.queues} queues, "
          f"{args.inflight} sends in flight, {'ROCKETMQ' if args.binary else 'JSON'} headers")
    print(f"send: {args.messages / send_elapsed:,.0f} msgs/s ({send_elapsed:.2f} s, {errors} errors)")
    print(f"pull: {pulled / pull_elapsed:,.0f} msgs/s ({pulled} messages in {pull_elapsed:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--binary", action="store_true", help="ROCKETMQ binary headers instead of JSON")
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()

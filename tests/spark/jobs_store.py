"""A store for the jobs of spark/jobs, written by a real in-process pyrmq broker, with what each
job reports known in advance: two topics with keys and bodies of many sizes, a delayed message,
committed consumer offsets, and a message that a group fails twice (retry back-off through
SCHEDULE_TOPIC_XXXX, its retry topic, then the dead-letter topic).

``records`` lists every record the commit log ends up holding (topic, queue, body length, keys),
taken from what was sent and how the broker routes it, not read back from the files.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import trio

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from pyrmq.codec.system_topics import SCHEDULE_TOPIC
from tests.broker.rmq import pull, send
from tests.spark.mixed_store import running_broker

ORDER_SIZES = (1, 3, 100, 1000, 1023, 1024, 5000, 70_000)
ORDERS, PAYMENTS, ORDER_GROUP, PAY_GROUP = "Orders", "Payments", "og", "pg"
RETRY, DLQ = f"%RETRY%{PAY_GROUP}", f"%DLQ%{PAY_GROUP}"
DELAY_LEVELS = "1s 1s 1s 1s"   # a consumer's first send-back waits at level 3 (+ reconsume times)


@dataclass(frozen=True)
class Record:
    topic: str
    queue_id: int
    body_size: int
    keys: str | None


@dataclass
class JobsStore:
    root: str                                              # the store root (storePathRootDir)
    records: list[Record] = field(default_factory=list)
    committed: dict[tuple[str, str, int], int] = field(default_factory=dict)   # (group, topic, queue): offset
    queue_ends: dict[tuple[str, int], int] = field(default_factory=dict)       # (topic, queue): max offset
    started: dt.datetime | None = None
    finished: dt.datetime | None = None

    def stored(self, topic: str, queue_id: int, body: bytes, keys: str | None) -> None:
        self.records.append(Record(topic, queue_id, len(body), keys))
        self.queue_ends[(topic, queue_id)] = self.queue_ends.get((topic, queue_id), 0) + 1


def _order(i: int) -> tuple[int, bytes, str]:
    body = (b"o%d:" % i + b"x" * ORDER_SIZES[i % len(ORDER_SIZES)])[:ORDER_SIZES[i % len(ORDER_SIZES)]]
    keys = f"order-{i % 7}" + (" vip" if i % 10 == 0 else "")
    return i % 4, body, keys


async def _write(root: str, store: JobsStore) -> None:
    topics = {ORDERS: 4, PAYMENTS: 2, RETRY: 1, DLQ: 1}
    async with running_broker(root, topics, messageDelayLevel=DELAY_LEVELS, flushIntervalCommitLog=50) as run:
        client, addr = run.client, run.addr
        for i in range(40):
            queue_id, body, keys = _order(i)
            assert (await send(client, addr, ORDERS, body, tags="TagA", keys=keys, queue_id=queue_id)).code == 0
            store.stored(ORDERS, queue_id, body, keys)
        for i in range(10):
            body, keys = b"pay-%d" % i, f"pay-{i % 3}"
            assert (await send(client, addr, PAYMENTS, body, keys=keys, queue_id=i % 2)).code == 0
            store.stored(PAYMENTS, i % 2, body, keys)

        # a delayed order: parked in SCHEDULE_TOPIC_XXXX queue 1 (level 2), then delivered to queue 2
        later = b"delayed order"
        resp = await send(client, addr, ORDERS, later, keys="order-late", queue_id=2, extra={"DELAY": "2"})
        assert resp.code == 0, resp.remark
        store.stored(SCHEDULE_TOPIC, 1, later, "order-late")
        await run.wait_for_messages(ORDERS, 2, store.queue_ends[(ORDERS, 2)] + 1)
        store.stored(ORDERS, 2, later, "order-late")

        # pg fails pay-1 twice: back-off at level 3, its retry topic, then (maxReconsumeTimes 1) the DLQ
        _, messages = await pull(client, addr, PAYMENTS, 1, 0)
        failing = messages[0]
        assert failing.body == b"pay-1"
        back = await client.invoke(addr, make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": str(failing.commit_log_offset), "group": PAY_GROUP, "delayLevel": "0",
            "originMsgId": failing.msg_id, "originTopic": PAYMENTS, "maxReconsumeTimes": "1"}))
        assert back.code == 0, back.remark
        store.stored(SCHEDULE_TOPIC, 2, failing.body, "pay-1")
        [retried] = await run.wait_for_messages(RETRY, 0)
        store.stored(RETRY, 0, failing.body, "pay-1")
        back = await client.invoke(addr, make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": str(retried.commit_log_offset), "group": PAY_GROUP, "delayLevel": "0",
            "maxReconsumeTimes": "1"}))
        assert back.code == 0, back.remark
        await run.wait_for_messages(DLQ, 0)
        store.stored(DLQ, 0, failing.body, "pay-1")

        store.committed = {(ORDER_GROUP, ORDERS, 0): 3, (ORDER_GROUP, ORDERS, 1): 10, (ORDER_GROUP, ORDERS, 2): 0,
                           (PAY_GROUP, PAYMENTS, 0): 5, (PAY_GROUP, PAYMENTS, 1): 2, (PAY_GROUP, RETRY, 0): 0}
        for (group, topic, queue_id), offset in store.committed.items():
            resp = await client.invoke(addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset)}))
            assert resp.code == 0, resp.remark


def write_jobs_store(root: str) -> JobsStore:
    store = JobsStore(root=f"{root}/store")
    store.started = dt.datetime.now(dt.timezone.utc)
    trio.run(_write, root, store)
    store.finished = dt.datetime.now(dt.timezone.utc)
    return store

"""Long polling is filter-aware and guarded: a held pull wakes only for a message its
subscription can match, and a failure while answering it answers SYSTEM_ERROR, nothing more."""

from __future__ import annotations

import trio

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import BatchEntry, decode_messages, encode_batch
from pyrmq.codec.remoting import FrameDecoder, encode_command
from tests.broker.rmq import pull, pull_request, send, send_frame

SUSPEND = 0x2
SUBSCRIPTION = 0x4


async def wait_held(cluster, count=1):
    hold = cluster.broker.pull_processor.hold_service
    while hold.statistics()["held"] < count:
        await trio.sleep(0.005)


async def held_tag_pull(cluster, nursery, topic, results):
    """A TagA message at offset 0 of ``topic``'s queue 0, then a TagA pull from offset 1 held in
    ``nursery`` (its answer and messages go to ``results``)."""
    addr = cluster.broker_addr
    await send(cluster.client, addr, topic, b"first", tags="TagA")

    async def waiting_pull():
        results.append(await pull(cluster.client, addr, topic, 0, 1, subscription="TagA",
                                  sys_flag=SUSPEND | SUBSCRIPTION, suspend_ms=60_000))
    nursery.start_soon(waiting_pull)
    await wait_held(cluster)


async def test_a_held_tag_pull_is_not_woken_by_other_tags(cluster):
    hold = cluster.broker.pull_processor.hold_service
    addr = cluster.broker_addr
    with trio.fail_after(60):
        results = []
        async with trio.open_nursery() as nursery:
            await held_tag_pull(cluster, nursery, "TopicTags", results)
            # 10,000 messages of another tag, 100 batches of 100
            entries = [BatchEntry(flag=0, body=b"other", properties="TAGS\x01TagB") for _ in range(100)]
            for _ in range(100):
                resp = await send(cluster.client, addr, "TopicTags", encode_batch(entries),
                                  code=RequestCode.SEND_BATCH_MESSAGE, batch=True)
                assert resp.code == 0
            assert cluster.broker.store.get_max_offset_in_queue("TopicTags", 0) == 10_001
            await trio.sleep(0.3)   # the hold service has had every chance to answer
            assert hold.wakeups == 0 and results == []
            await send(cluster.client, addr, "TopicTags", b"mine", tags="TagA")
        [(resp, messages)] = results
        assert hold.wakeups == 1
        # a pull scans at most 16,000 CQ bytes (800 units) per answer, as Java does: the consumer
        # is told to retry at once from there, and so reaches its message
        assert (resp.code, resp.ext_fields["nextBeginOffset"], messages) == (20, "801", [])
        offset, delivered = 801, []
        while not delivered:
            resp, delivered = await pull(cluster.client, addr, "TopicTags", 0, offset, subscription="TagA")
            assert resp.code in (0, 20)
            offset = int(resp.ext_fields["nextBeginOffset"])
        assert [(m.body, m.queue_offset) for m in delivered] == [(b"mine", 10_001)]


async def test_a_held_tag_pull_is_woken_by_the_one_matching_entry_of_a_batch(cluster):
    # the hold service is handed the batch's records at once (dispatch_many)
    entries = [BatchEntry(flag=0, body=f"e{i}".encode(), properties=f"TAGS\x01{'TagA' if i == 6 else 'TagB'}")
               for i in range(10)]
    results = []
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await held_tag_pull(cluster, nursery, "TopicBatchWake", results)
            resp = await send(cluster.client, cluster.broker_addr, "TopicBatchWake", encode_batch(entries),
                              code=RequestCode.SEND_BATCH_MESSAGE, batch=True)
            assert resp.code == 0
        [(resp, messages)] = results
    hold = cluster.broker.pull_processor.hold_service
    assert hold.wakeups == 1 and hold.statistics()["held"] == 0
    assert (resp.code, [(m.body, m.queue_offset) for m in messages]) == (0, [(b"e6", 7)])


async def test_a_pull_woken_by_a_batch_of_sends_is_answered_after_them_with_all_their_records(cluster):
    # One connection: a held pull, then three sends in one write (one reader batch). The sends'
    # answers leave first (a sender does not wait for a consumer's answer to be built), then the
    # pull's, holding all three records.
    host, port = cluster.broker_addr.rsplit(":", 1)
    with trio.fail_after(20):
        await send(cluster.client, cluster.broker_addr, "TopicAfterSends", b"first")
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            held = pull_request("TopicAfterSends", 0, 1, sys_flag=SUSPEND | SUBSCRIPTION, suspend_ms=60_000)
            held.opaque = 100
            await stream.send_all(encode_command(held))
            await wait_held(cluster)
            await stream.send_all(b"".join(send_frame("TopicAfterSends", 0, opaque) for opaque in (1, 2, 3)))
            decoder, answers = FrameDecoder(), []
            while len(answers) < 4:
                data = await stream.receive_some(65536)
                assert data, "the broker closed the connection"
                decoder.receive_data(data)
                answers.extend(decoder.frames())
    assert [(a.opaque, a.code) for a in answers] == [(1, 0), (2, 0), (3, 0), (100, 0)]
    assert [(m.body, m.queue_offset) for m in decode_messages(answers[3].body)] == [
        (b"body-1", 1), (b"body-2", 2), (b"body-3", 3)]
    assert cluster.broker.pull_processor.hold_service.wakeups == 1


async def test_a_failure_answering_a_held_pull_leaves_the_broker_serving(cluster, monkeypatch):
    processor = cluster.broker.pull_processor
    addr = cluster.broker_addr
    with trio.fail_after(20):
        await send(cluster.client, addr, "TopicBoom", b"first")
        results = []

        async def waiting_pull(offset):
            results.append(await pull(cluster.client, addr, "TopicBoom", 0, offset,
                                      sys_flag=SUSPEND | SUBSCRIPTION, suspend_ms=60_000))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiting_pull, 1)
            await wait_held(cluster)
            real = processor.process_request

            def boom(channel, request, allow_suspend):
                if not allow_suspend:
                    raise RuntimeError("injected failure")
                return real(channel, request, allow_suspend)

            monkeypatch.setattr(processor, "process_request", boom)
            await send(cluster.client, addr, "TopicBoom", b"second")
        [(resp, messages)] = results
        assert resp.code == 1 and "injected failure" in resp.remark and messages == []
        monkeypatch.undo()
        # the hold service and the broker go on: a new held pull is woken and answered
        results.clear()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiting_pull, 2)
            await wait_held(cluster)
            await send(cluster.client, addr, "TopicBoom", b"third")
        [(resp, messages)] = results
        assert resp.code == 0 and [m.body for m in messages] == [b"third"]
        resp, messages = await pull(cluster.client, addr, "TopicBoom", 0, 1)
        assert [m.body for m in messages] == [b"second", b"third"]


class _Channel:
    """The part of Channel the hold service uses: answers are queued, then written."""

    def __init__(self) -> None:
        self.closed = False
        self.answers: list = []
        self.queued = 0
        self.writes = 0
        self._reading_batch = False

    def send_response(self, response) -> None:
        self.answers.append(response)
        self.queued += 1
        if not self._reading_batch:
            self._write_now()

    def _write_now(self) -> None:
        if self.queued:
            self.writes += 1
            self.queued = 0


class _AnyTag:
    def is_matched_by_consume_queue(self, tags_code) -> bool:
        return True

    def is_matched_by_properties(self, properties) -> bool:
        return True


class _Processor:
    """Answers a re-run held pull with its own opaque, so the test sees which pull was answered."""

    def __init__(self) -> None:
        self.order: list[int] = []

    def process_request(self, channel, request, allow_suspend):
        assert not allow_suspend
        self.order.append(request.opaque)
        return request.response(19)


def test_hold_service_expires_by_deadline_and_forgets_answered_and_closed_pulls():
    import random

    from pyrmq.broker.pull_processor import _HeldPull, PullRequestHoldService
    from pyrmq.codec.message import RecordInfo
    from pyrmq.codec.remoting import make_request

    rnd = random.Random(3)
    processor = _Processor()
    hold = PullRequestHoldService(processor)
    channels = [_Channel() for _ in range(4)]
    deadlines = {}
    for opaque in range(9000):
        request = make_request(11, {})
        request.opaque = opaque
        deadlines[opaque] = rnd.uniform(0, 100)
        hold.suspend(("T", opaque % 3), _HeldPull(channels[opaque % 4], request, 5, deadlines[opaque], _AnyTag()))
    assert hold.statistics()["held"] == 9000
    # a message at queue offset 5 of queue 1 wakes every pull of queue 1 (they wait for offset 5):
    # answered in the dispatch, in arrival order, one write per connection
    hold.dispatch(RecordInfo(100, "T", 1, 5, 0, 0, 0, 0, 0, ""))
    woken = [o for o in range(9000) if o % 3 == 1]
    assert hold.statistics()["held"] == 6000 and hold.wakeups == 3000
    assert processor.order == woken
    assert [c.writes for c in channels] == [1, 1, 1, 1]
    assert sorted(r.opaque for c in channels for r in c.answers) == woken
    for channel in channels:
        channel.answers.clear()
        channel.writes = 0
    processor.order.clear()
    hold._expire(50.0)
    expected = sorted((d, o) for o, d in deadlines.items() if o % 3 != 1 and d <= 50.0)
    assert processor.order == [o for _, o in expected]           # deadline order, woken ones skipped
    # the pulls expiring in one step are answered with one write per connection
    assert [c.writes for c in channels] == [1, 1, 1, 1]
    assert sorted(r.opaque for c in channels for r in c.answers) == sorted(o for _, o in expected)
    for channel in channels[:3]:
        channel.closed = True
    hold._drop_closed()
    left = [o for o, d in deadlines.items() if o % 3 != 1 and d > 50.0 and o % 4 == 3]
    assert hold.statistics()["held"] == len(left)
    assert len(hold._deadlines) == len(left)           # mostly stale: rebuilt from the held pulls
    processor.order.clear()
    hold._expire(100.0)
    assert sorted(processor.order) == sorted(left)
    assert hold.statistics()["held"] == 0 and not hold._held

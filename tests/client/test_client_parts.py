"""The parts of pyrmq.client that need no broker, and the ones that need one only briefly:
UNIQ_KEY layout, route parsing (both NameServer forms), queue choice around a failed broker,
body decompression, TLS, long polling, and a closed sync client."""

from __future__ import annotations

import datetime
import struct
import time
import zlib

import lz4.frame
import pytest
import trio

from pyrmq.client import MessageQueue, MQClientError, Producer, PullConsumer, PullStatus
from pyrmq.client.consumer import build_subscription
from pyrmq.client.ids import UniqIdGenerator, make_client_id
from pyrmq.client.model import decompress_body
from pyrmq.client.producer import _FaultTable
from pyrmq.client.route import TopicRoute
from pyrmq.codec.message import java_string_hash
from tests.client.helpers import create_topic

# A 4.9.8 NameServer's answer to a pre-4.9.4 client (unquoted broker ids), two brokers, one
# read-only; and the standard form.
LEGACY_ROUTE = (b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.2:10911",1:"10.0.0.3:10911"},"brokerName":"broker-b",'
                b'"cluster":"C"},{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"C"}],'
                b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-b","perm":6,"readQueueNums":2,'
                b'"topicSysFlag":0,"writeQueueNums":2},{"brokerName":"broker-a","perm":4,"readQueueNums":3,'
                b'"topicSysFlag":0,"writeQueueNums":3}]}')


def test_uniq_id_layout():
    ids = UniqIdGenerator("10.1.2.3")
    before = time.time()
    first, second = ids.next_id(), ids.next_id()
    raw = bytes.fromhex(first)
    assert len(raw) == 16 and first == first.upper() and raw[:4] == bytes([10, 1, 2, 3])
    (pid,) = struct.unpack(">H", raw[4:6])
    assert pid == __import__("os").getpid() & 0xFFFF
    month = datetime.datetime.fromtimestamp(before).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    (diff_ms,) = struct.unpack(">I", raw[10:14])
    assert abs(month.timestamp() + diff_ms / 1000 - before) < 5      # brokers read the send time from it
    assert struct.unpack(">H", bytes.fromhex(second)[14:])[0] == (struct.unpack(">H", raw[14:])[0] + 1) & 0xFFFF
    assert len(bytes.fromhex(UniqIdGenerator("::1").next_id())) == 28   # IPv6: 16 address bytes
    ip, _, instance = make_client_id("10.1.2.3").partition("@")
    pid_text, _, nanos = instance.partition("#")
    assert ip == "10.1.2.3" and pid_text.isdigit() and nanos.isdigit()


@pytest.mark.parametrize("body", [LEGACY_ROUTE, LEGACY_ROUTE.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')])
def test_route_forms(body):
    route = TopicRoute.decode("T", body)
    # read-only broker-a takes no sends; queues in broker-name order
    assert route.publish_queues() == [MessageQueue("T", "broker-b", 0), MessageQueue("T", "broker-b", 1)]
    assert route.subscribe_queues() == [MessageQueue("T", "broker-a", i) for i in range(3)] + [
        MessageQueue("T", "broker-b", i) for i in range(2)]
    assert route.broker_addr("broker-b", 1) == "10.0.0.3:10911"       # the suggested slave
    assert route.broker_addr("broker-b", 7) == "10.0.0.2:10911"       # gone: the master
    assert route.broker_addr("nope") is None
    borrowed = route.with_queue_limit("New", 1)
    assert borrowed.publish_queues() == [MessageQueue("New", "broker-b", 0)]


async def test_queue_choice_avoids_the_failed_broker():
    producer = Producer("127.0.0.1:9876", "pg")
    queues = TopicRoute.decode("T", LEGACY_ROUTE.replace(b'"perm":4', b'"perm":6')).publish_queues()
    picks = [producer._select_queue(queues, None) for _ in range(5)]
    assert picks == queues   # round-robin
    assert all(producer._select_queue(queues, "broker-a").broker_name == "broker-b" for _ in range(6))
    producer._faults.mark("broker-b")   # in isolation: avoided even when it was not the last failure
    assert all(producer._select_queue(queues, None).broker_name == "broker-a" for _ in range(6))
    # nothing else left: the failed broker is still tried
    assert producer._select_queue([q for q in queues if q.broker_name == "broker-b"], "broker-b").broker_name == \
        "broker-b"


async def test_fault_isolation_ends(autojump_clock):
    faults = _FaultTable()
    faults.mark("b")
    assert not faults.available("b")
    await trio.sleep(31)
    assert faults.available("b")


def test_decompress_body():
    body = b"abc" * 5000
    assert decompress_body(zlib.compress(body), 0x1) == body          # pre-4.9.7 clients: bit 0 only
    assert decompress_body(zlib.compress(body), 0x301) == body
    assert decompress_body(lz4.frame.compress(body), 0x101) == body
    assert decompress_body(body, 0x300) == body                       # type bits without the flag: as is
    with pytest.raises(MQClientError):
        decompress_body(b"not zlib", 0x301)
    with pytest.raises(MQClientError):
        decompress_body(b"zstd", 0x201)                               # not a zstd frame
    with pytest.raises(MQClientError):
        decompress_body(zlib.compress(bytes(80 * 1024 * 1024)), 0x301)  # inflates past the limit


def test_subscription_like_java():
    sub = build_subscription("T", " TagA || TagB ||TagA")
    assert (sub.sub_string, sub.tags_set) == (" TagA || TagB ||TagA", ("TagA", "TagB"))
    assert sub.code_set == tuple(sorted({java_string_hash("TagA"), java_string_hash("TagB")}))
    assert (build_subscription("T", "").sub_string, build_subscription("T", "*").tags_set) == ("*", ())
    assert build_subscription("T", "a > 1", "SQL92").expression_type == "SQL92"


async def test_tls_and_long_polling(cluster):
    """TLS as Apache's default client (the in-process servers are permissive with a self-signed
    test certificate); a long-polling pull held until a message arrives."""
    with trio.fail_after(20):
        await create_topic(cluster, "TlsTopic", queues=1)
        async with Producer(cluster.namesrv_addr, "pg_tls", tls=True) as producer, \
                PullConsumer(cluster.namesrv_addr, "cg_tls", tls=True) as consumer:
            mq = MessageQueue("TlsTopic", "broker-a", 0)
            assert (await consumer.pull(mq, 0)).status is PullStatus.NO_NEW_MSG
            async with trio.open_nursery() as nursery:
                async def send_later() -> None:
                    await trio.sleep(0.5)
                    await producer.send("TlsTopic", b"late")
                nursery.start_soon(send_later)
                started = trio.current_time()
                result = await consumer.pull(mq, 0, long_poll=10)
                waited = trio.current_time() - started
            assert [m.body for m in result.messages] == [b"late"] and 0.4 < waited < 5
            for client in (producer, consumer):
                channels = client.instance.remoting._channels.values()
                assert channels and all(isinstance(c.peer.stream, trio.SSLStream) for c in channels)


async def test_a_closed_sync_client_says_so(cluster):
    from pyrmq.client import sync

    def use_after_close() -> None:
        producer = sync.Producer(cluster.namesrv_addr, "pg_closed")
        producer.close()
        producer.close()   # idempotent
        with pytest.raises(MQClientError, match="closed"):
            producer.send("T", b"x")
        with pytest.raises(MQClientError):
            sync.Producer("not an address", "pg")   # a bad NameServer address fails the constructor

    with trio.fail_after(20):
        await trio.to_thread.run_sync(use_after_close)


async def test_heartbeat_rounds_do_not_overlap(autojump_clock):
    """A round that started before a subscription changed is answered before the next round
    goes out (found by the compat test: Apache handles heartbeats on a thread pool, so two in
    flight at once could leave the broker with the older body)."""
    consumer = PullConsumer("127.0.0.1:9876", "cg_rounds")
    sent: list[tuple[float, float, bytes]] = []

    async def slow_invoke_ok(addr, request, timeout=None, ok=(0,)):
        started = trio.current_time()
        await trio.sleep(1)
        sent.append((started, trio.current_time(), request.body))

    consumer.instance.invoke_ok = slow_invoke_ok
    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer.instance._heartbeat, ["b:1"])   # the round a new route starts
        await trio.sleep(0.5)
        consumer.subscriptions["T"] = build_subscription("T", "*")
        nursery.start_soon(consumer.instance._heartbeat, ["b:1"])
        nursery.start_soon(consumer.instance._heartbeat, ["b:2"])
    assert [end <= next_start for (_, end, _), (next_start, _, _) in zip(sent, sent[1:])] == [True, True]
    assert b'"topic":"T"' not in sent[0][2] and all(b'"topic":"T"' in body for _, _, body in sent[1:])

"""pyrmq.client against an in-process pyrmq broker: exact bodies, tags, keys, properties and
offsets; the send header as Java writes it; compression; batches; retries; offsets; heartbeats."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from pyrmq.client import (
    MessageQueue,
    MQBrokerError,
    MQClientError,
    MQRemotingError,
    OutgoingMessage,
    Producer,
    PullConsumer,
    PullStatus,
    SendStatus,
)
from pyrmq.client.errors import NOT_FOUND_TOPIC_EXCEPTION
from pyrmq.codec.admin_bodies import ConsumerConnection
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import decode_offset_msg_id
from pyrmq.codec.remoting import FrameDecoder, make_request
from tests.client.helpers import create_topic, watch

FRAMES = Path(__file__).resolve().parents[1] / "fixtures" / "frames"


async def test_send_then_pull_exact(cluster):
    with trio.fail_after(20):
        await create_topic(cluster, "ClientTopic")
        async with Producer(cluster.namesrv_addr, "pg_client") as producer, \
                PullConsumer(cluster.namesrv_addr, "cg_client") as consumer:
            sent = []
            for i in range(8):
                sent.append(await producer.send("ClientTopic", f"body {i}".encode(), tags=f"Tag{i % 2}",
                                                keys=f"key{i} other{i}", properties={"color": "blue", "n": str(i)}))
            assert all(r.status is SendStatus.SEND_OK for r in sent)
            queues = await consumer.fetch_queues("ClientTopic")
            assert queues == [MessageQueue("ClientTopic", "broker-a", i) for i in range(4)]
            # round-robin: 8 sends spread two per queue, offsets 0 and 1 on each
            assert sorted((r.queue.queue_id, r.queue_offset) for r in sent) == [(q, o) for q in range(4) for o in (0, 1)]
            by_id = {r.msg_id: (i, r) for i, r in enumerate(sent)}
            got = {}
            for mq in queues:
                result = await consumer.pull(mq, 0)
                assert result.status is PullStatus.FOUND
                assert (result.next_begin_offset, result.min_offset, result.max_offset) == (2, 0, 2)
                for m in result.messages:
                    i, r = by_id[m.msg_id]
                    got[i] = m
                    assert (m.queue_id, m.queue_offset, m.offset_msg_id) == (r.queue.queue_id, r.queue_offset,
                                                                             r.offset_msg_id)
            assert sorted(got) == list(range(8))
            for i, m in got.items():
                assert m.body == f"body {i}".encode() and m.tags == f"Tag{i % 2}"
                assert m.keys == f"key{i} other{i}" and m.keys_list == [f"key{i}", f"other{i}"]
                assert m.properties["color"] == "blue" and m.properties["n"] == str(i)
                assert m.properties["MAX_OFFSET"] == "2" and m.properties["MIN_OFFSET"] == "0"
                assert m.topic == "ClientTopic" and m.broker_name == "broker-a" and m.reconsume_times == 0
                assert m.born_timestamp <= m.store_timestamp <= int(time.time() * 1000)
                _, port, offset = decode_offset_msg_id(m.offset_msg_id)
                assert (port, offset) == (int(cluster.broker_addr.split(":")[1]), m.commit_log_offset)
            # nothing new after the end; a filter; an offset past the end
            mq = queues[0]
            assert (await consumer.pull(mq, 2)).status is PullStatus.NO_NEW_MSG
            tagged = await consumer.pull(mq, 0, tag_expression="Tag1")
            assert [m.tags for m in tagged.messages] == ["Tag1"] * len(tagged.messages)
            assert len(tagged.messages) == sum(1 for m in got.values() if m.queue_id == 0 and m.tags == "Tag1")
            assert (await consumer.pull(mq, 50)).status is PullStatus.OFFSET_ILLEGAL


def _java_send_header() -> dict[str, str]:
    decoder = FrameDecoder()
    decoder.receive_data((FRAMES / "client_send_v2_json.bin").read_bytes())
    (frame,) = list(decoder.frames())
    return frame.ext_fields


async def test_send_header_is_the_java_clients(cluster):
    """The fields and values of a Java 4.9.8 client's SEND_MESSAGE_V2 (captured frame), the
    properties in the same order; only the ids, times and queue differ."""
    with trio.fail_after(20):
        await create_topic(cluster, "TopicTest")
        seen = watch(cluster, RequestCode.SEND_MESSAGE_V2)
        async with Producer(cluster.namesrv_addr, "please_rename_unique_group_name") as producer:
            result = await producer.send("TopicTest", b"Hello RocketMQ 0", tags="TagA")
        (request,) = seen.seen
        java = _java_send_header()
        ours = request.ext_fields
        assert set(ours) == set(java)
        for key in "abcdfhjkmn":
            assert ours[key] == java[key], key
        assert ours["e"] == str(result.queue.queue_id)
        assert abs(int(ours["g"]) - time.time() * 1000) < 10_000
        props = [item.split("\x01") for item in ours["i"].split("\x02")]
        java_props = [item.split("\x01") for item in java["i"].split("\x02")]
        assert [name for name, _ in props] == [name for name, _ in java_props] == ["UNIQ_KEY", "WAIT", "TAGS"]
        assert dict(props)["UNIQ_KEY"] == result.msg_id
        assert len(result.msg_id) == 32 and result.msg_id == result.msg_id.upper()   # IPv4: 16 bytes in hex
        assert request.language == "JAVA" and request.version == 409


@pytest.mark.parametrize("compress", [True, False])
async def test_large_bodies_compressed_as_java(cluster, compress):
    with trio.fail_after(20):
        await create_topic(cluster, "BigTopic", queues=1)
        body = bytes(range(256)) * 40   # 10 KiB, compressible
        small = b"s" * 4095
        async with Producer(cluster.namesrv_addr, "pg_big", compress=compress) as producer, \
                PullConsumer(cluster.namesrv_addr, "cg_big") as consumer:
            await producer.send("BigTopic", body)
            await producer.send("BigTopic", small)
            result = await consumer.pull(MessageQueue("BigTopic", "broker-a", 0), 0)
        big, little = result.messages
        assert big.body == body and little.body == small
        assert big.sys_flag & 0x701 == (0x301 if compress else 0)   # COMPRESSED | ZLIB, as Java 4.9.7+
        assert little.sys_flag & 0x701 == 0


async def test_batch_is_stored_together(cluster):
    with trio.fail_after(20):
        await create_topic(cluster, "BatchTopic", queues=2)
        seen = watch(cluster, RequestCode.SEND_BATCH_MESSAGE)
        async with Producer(cluster.namesrv_addr, "pg_batch") as producer, \
                PullConsumer(cluster.namesrv_addr, "cg_batch") as consumer:
            await producer.send_batch("BatchTopic", [b"zero"])
            result = await producer.send_batch("BatchTopic", [
                OutgoingMessage(b"one", tags="T1", keys="K1"), OutgoingMessage(b"two", tags="T2", properties={"p": "v"}),
                b"three"])
            assert result.status is SendStatus.SEND_OK and result.queue_offset == 0
            ids = result.msg_id.split(",")
            assert len(ids) == 3 and len(result.offset_msg_id.split(",")) == 3
            pulled = await consumer.pull(result.queue, 0)
        assert [m.body for m in pulled.messages] == [b"one", b"two", b"three"]
        assert [m.queue_offset for m in pulled.messages] == [0, 1, 2]
        assert [m.msg_id for m in pulled.messages] == ids
        assert [(m.tags, m.keys) for m in pulled.messages] == [("T1", "K1"), ("T2", None), (None, None)]
        assert pulled.messages[1].properties["p"] == "v"
        header = seen.seen[-1].ext_fields
        assert (header["m"], header["i"], header["f"]) == ("true", "WAIT\x01true", "0")   # as the Java capture


async def test_send_retries_after_a_refusal(cluster):
    with trio.fail_after(20):
        await create_topic(cluster, "RetryTopic", queues=1)
        refusals = watch(cluster, RequestCode.SEND_MESSAGE_V2, refuse=1)
        async with Producer(cluster.namesrv_addr, "pg_retry") as producer, \
                PullConsumer(cluster.namesrv_addr, "cg_retry") as consumer:
            result = await producer.send("RetryTopic", b"once", keys="k")
            assert len(refusals.seen) == 2   # refused with SYSTEM_BUSY, then stored
            # the same message both times: one UNIQ_KEY
            assert len({r.ext_fields["i"] for r in refusals.seen}) == 1
            pulled = await consumer.pull(result.queue, 0)
            assert [m.body for m in pulled.messages] == [b"once"] and result.queue_offset == 0

            refusals.refuse = 10
            with pytest.raises(MQBrokerError) as info:
                await producer.send("RetryTopic", b"never")
            assert info.value.code == 2 and len(refusals.seen) == 2 + 3   # 1 + retry_times_when_send_failed
            refusals.refuse, refusals.refuse_code = 10, 13   # MESSAGE_ILLEGAL: not retried, as Java
            with pytest.raises(MQBrokerError) as info:
                await producer.send("RetryTopic", b"never")
            assert info.value.code == 13 and len(refusals.seen) == 2 + 3 + 1
            assert (await consumer.max_offset(result.queue)) == 1


async def test_offsets(cluster):
    with trio.fail_after(20):
        await create_topic(cluster, "OffsetTopic", queues=1)
        async with Producer(cluster.namesrv_addr, "pg_off") as producer, \
                PullConsumer(cluster.namesrv_addr, "cg_off") as consumer:
            mq = MessageQueue("OffsetTopic", "broker-a", 0)
            # no committed offset: a Java broker answers 0 while the queue's start is in memory
            assert await consumer.query_offset(mq) == 0
            before = int(time.time() * 1000)
            for i in range(5):
                await producer.send("OffsetTopic", f"m{i}".encode())
            assert (await consumer.min_offset(mq), await consumer.max_offset(mq)) == (0, 5)
            assert await consumer.search_offset(mq, before - 1000) == 0
            await consumer.update_offset(mq, 3)
            assert await consumer.query_offset(mq) == 3
        async with PullConsumer(cluster.namesrv_addr, "cg_off") as again:
            assert await again.query_offset(mq) == 3


async def _consumer_connection(cluster, group: str) -> ConsumerConnection | None:
    resp = await cluster.client.invoke(cluster.broker_addr, make_request(
        RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}))
    return ConsumerConnection.decode(resp.body) if resp.code == 0 else None


async def test_heartbeat_registers_the_group_and_close_unregisters(cluster):
    with trio.fail_after(20):
        await create_topic(cluster, "BeatTopic")
        async with PullConsumer(cluster.namesrv_addr, "cg_beat") as consumer:
            await consumer.subscribe("BeatTopic", "TagA || TagB")
            connection = await _consumer_connection(cluster, "cg_beat")
            assert connection is not None
            assert [c.client_id for c in connection.connection_set] == [consumer.client_id]
            ip, _, instance = consumer.client_id.partition("@")
            assert ip and instance.split("#")[0].isdigit()
            sub = connection.subscription_table["BeatTopic"]
            assert (sub.sub_string, sub.tags_set, connection.consume_type) == (
                "TagA || TagB", ("TagA", "TagB"), "CONSUME_ACTIVELY")
            await consumer.pull(MessageQueue("BeatTopic", "broker-a", 0), 0)   # keeps its own filter
            assert (await _consumer_connection(cluster, "cg_beat")).subscription_table["BeatTopic"].tags_set == (
                "TagA", "TagB")
        assert await _consumer_connection(cluster, "cg_beat") is None
        async with Producer(cluster.namesrv_addr, "pg_beat") as producer:
            await producer.send("BeatTopic", b"x")
            for _ in range(100):   # the first heartbeat goes out in the background
                if cluster.broker.producer_manager.groups.get("pg_beat"):
                    break
                await trio.sleep(0.01)
            assert cluster.broker.producer_manager.groups.get("pg_beat")
        assert not cluster.broker.producer_manager.groups.get("pg_beat")


async def test_errors(cluster):
    with trio.fail_after(20):
        async with PullConsumer(cluster.namesrv_addr, "cg_err") as consumer:
            with pytest.raises(MQClientError) as info:
                await consumer.fetch_queues("NoSuchTopic")
            assert info.value.code == NOT_FOUND_TOPIC_EXCEPTION
        async with Producer("127.0.0.1:1", "pg_err", timeout=1) as producer:
            with pytest.raises(MQRemotingError):
                await producer.send("AnyTopic", b"x")
        with pytest.raises(MQClientError):
            async with Producer(cluster.namesrv_addr, "pg_err") as producer:
                await producer.send("bad topic!", b"x")
        with pytest.raises(MQClientError, match="not started or closed"):
            await producer.send("AnyTopic", b"x")   # after close


async def test_sync_facade(cluster):
    """The blocking classes, called from a worker thread while the broker runs on this loop."""
    from pyrmq.client import sync

    await create_topic(cluster, "SyncTopic", queues=1)

    def produce_and_consume() -> list[bytes]:
        with sync.Producer(cluster.namesrv_addr, "pg_sync") as producer:
            producer.send("SyncTopic", b"first", tags="A")
            producer.send_batch("SyncTopic", [b"second", b"third"])
        with sync.PullConsumer(cluster.namesrv_addr, "cg_sync") as consumer:
            (mq,) = consumer.fetch_queues("SyncTopic")
            result = consumer.pull(mq, 0)
            consumer.update_offset(mq, result.next_begin_offset)
            assert consumer.query_offset(mq) == 3 and consumer.max_offset(mq) == 3
        with pytest.raises(MQClientError):
            consumer.max_offset(mq)   # closed
        return [m.body for m in result.messages]

    with trio.fail_after(30):
        assert await trio.to_thread.run_sync(produce_and_consume) == [b"first", b"second", b"third"]


async def test_delay_level(cluster):
    """delay_level=1 (1 s): the message reaches its queue after the delay, DELAY property kept."""
    with trio.fail_after(20):
        await create_topic(cluster, "DelayTopic", queues=1)
        mq = MessageQueue("DelayTopic", "broker-a", 0)
        async with Producer(cluster.namesrv_addr, "pg_delay") as producer, \
                PullConsumer(cluster.namesrv_addr, "cg_delay") as consumer:
            sent_at = trio.current_time()
            result = await producer.send("DelayTopic", b"later", delay_level=1)
            assert result.status is SendStatus.SEND_OK
            assert (await consumer.pull(mq, 0)).status is PullStatus.NO_NEW_MSG
            pulled = await consumer.pull(mq, 0, long_poll=5)
            assert trio.current_time() - sent_at >= 0.9
        (message,) = pulled.messages
        assert message.body == b"later" and message.properties["DELAY"] == "1" and message.msg_id == result.msg_id

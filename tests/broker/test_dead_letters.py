"""Dead letters for operators: listing and re-sending %DLQ%<group> (cli_dlq), the relayed
CONSUME_MESSAGE_DIRECTLY / GET_CONSUMER_RUNNING_INFO, and the accumulation alarm."""

from __future__ import annotations

import json
import logging

import pytest
import trio

from pyrmq.broker.accumulation_alarm import RUNTIME_INFO_KEY
from pyrmq.cli import main as cli_main
from pyrmq.cli_dlq import DlqError, list_dead_letters, resend_dead_letters
from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import KVTable
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import decode_message
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.dispatch import ProcessorTable
from tests.broker.rmq import pull, send
from tests.broker.test_consumers import heartbeat
from tests.broker.test_delay_and_retry import existing_topics


async def dead_letter(cluster, topic: str, group: str, body: bytes, **kwargs):
    """A message sent to ``topic``, then sent back by ``group`` straight to its DLQ (delayLevel -1)."""
    sent = await send(cluster.client, cluster.broker_addr, topic, body, **kwargs)
    assert sent.code == 0, sent.remark
    _, messages = await pull(cluster.client, cluster.broker_addr, topic, kwargs.get("queue_id", 0), 0)
    original = next(m for m in messages if m.body == body)
    back = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": str(original.commit_log_offset), "group": group, "delayLevel": "-1",
        "originMsgId": sent.ext_fields["msgId"], "originTopic": topic, "maxReconsumeTimes": "1"}))
    assert back.code == 0, back.remark
    return original


async def test_list_and_resend_to_the_original_topic(cluster):
    existing_topics(cluster, "TopicDL")
    first = await dead_letter(cluster, "TopicDL", "dg", b"first", tags="TA", keys="k1", extra={"color": "red"})
    await dead_letter(cluster, "TopicDL", "dg", b"second", queue_id=1)
    with trio.fail_after(10):
        letters = await list_dead_letters(cluster.broker_addr, "dg")
    assert [m.body for m in letters] == [b"first", b"second"]
    assert all(m.topic == "%DLQ%dg" and m.properties["RETRY_TOPIC"] == "TopicDL" for m in letters)
    assert letters[0].properties["ORIGIN_MESSAGE_ID"] == first.msg_id
    assert [m.body for m in await list_dead_letters(cluster.broker_addr, "dg", limit=1)] == [b"first"]
    assert await list_dead_letters(cluster.broker_addr, "nobody") == []

    before = {q: cluster.broker.store.get_max_offset_in_queue("TopicDL", q) for q in range(4)}
    [resent] = await resend_dead_letters(cluster.broker_addr, "dg", [letters[0].msg_id])
    assert (resent.msg_id, resent.topic) == (letters[0].msg_id, "TopicDL")
    grown = [q for q in range(4) if cluster.broker.store.get_max_offset_in_queue("TopicDL", q) > before[q]]
    assert len(grown) == 1       # exactly one copy, in one queue
    _, messages = await pull(cluster.client, cluster.broker_addr, "TopicDL", grown[0], before[grown[0]])
    [copy] = messages
    assert (copy.body, copy.tags, copy.keys, copy.reconsume_times) == (b"first", "TA", "k1", 0)
    assert copy.properties["color"] == "red"
    assert copy.properties["UNIQ_KEY"] == first.properties["UNIQ_KEY"]      # the client-visible msgId
    assert "RETRY_TOPIC" not in copy.properties and "DELAY" not in copy.properties
    # the dead letter stays where it was
    assert len(await list_dead_letters(cluster.broker_addr, "dg")) == 2


async def test_resend_refuses_what_is_not_the_groups_dead_letter(cluster):
    existing_topics(cluster, "TopicDX")
    await dead_letter(cluster, "TopicDX", "dx", b"x")
    [letter] = await list_dead_letters(cluster.broker_addr, "dx")
    with pytest.raises(DlqError, match="not in %DLQ%other"):
        await resend_dead_letters(cluster.broker_addr, "other", [letter.msg_id])
    with pytest.raises(DlqError, match="not an offset msgId"):
        await resend_dead_letters(cluster.broker_addr, "dx", ["nothex"])
    cluster.broker.topic_config_manager.delete("TopicDX")
    with pytest.raises(DlqError, match="TopicDX does not exist"):
        await resend_dead_letters(cluster.broker_addr, "dx", [letter.msg_id])


async def test_cli_lists_and_resends(cluster, capsys):
    existing_topics(cluster, "TopicDC")
    await dead_letter(cluster, "TopicDC", "dc", b"cli-body", keys="kc")
    # main() runs its own trio loop: give it a thread, as an operator's shell would be another process
    assert await trio.to_thread.run_sync(cli_main, ["dlq", "-b", cluster.broker_addr, "-g", "dc"]) == 0
    out = capsys.readouterr().out
    assert "TopicDC" in out and "kc/-" in out and out.endswith("1 dead letter(s)\n")
    msg_id = out.splitlines()[1].split()[0]
    assert await trio.to_thread.run_sync(cli_main, ["dlq", "-b", cluster.broker_addr, "-g", "dc",
                                                     "--resend", msg_id]) == 0
    assert capsys.readouterr().out.startswith(f"{msg_id} -> TopicDC (")
    assert await trio.to_thread.run_sync(cli_main, ["dlq", "-b", cluster.broker_addr, "-g", "zz",
                                                     "--resend", msg_id]) == 1
    assert "not in %DLQ%zz" in capsys.readouterr().err


async def test_consume_message_directly_is_relayed_to_the_named_client(cluster):
    existing_topics(cluster, "TopicCD")
    await dead_letter(cluster, "TopicCD", "cdg", b"direct")
    [letter] = await list_dead_letters(cluster.broker_addr, "cdg")
    seen = []

    def consume_directly(channel, request):
        message, _ = decode_message(bytes(request.body))
        seen.append((dict(request.ext_fields), message.body, message.topic))
        return request.response(0, None, body=fastjson.dumps({"consumeResult": "CR_SUCCESS"}).encode())

    table = ProcessorTable("client")
    table.register(309, consume_directly)
    table.register(307, lambda ch, req: req.response(0, None, body=b'{"properties":{}}'))
    header = {"consumerGroup": "cdg", "clientId": "10.0.0.7@7", "msgId": letter.msg_id}
    with trio.fail_after(10):
        async with RemotingClient(table) as consumer:
            beat = await consumer.invoke(cluster.broker_addr, make_request(
                RequestCode.HEART_BEAT, body=heartbeat("cdg", "10.0.0.7@7", "TopicCD")))
            assert beat.code == 0
            answer = await cluster.client.invoke(cluster.broker_addr, make_request(309, dict(header)))
            assert answer.code == 0 and fastjson.loads(answer.body) == {"consumeResult": "CR_SUCCESS"}
            [(fields, body, topic)] = seen
            assert (body, topic) == (b"direct", "%DLQ%cdg")
            assert fields["brokerName"] == cluster.broker.config.broker_name and fields["msgId"] == letter.msg_id
            info = await cluster.client.invoke(cluster.broker_addr, make_request(307, {
                "consumerGroup": "cdg", "clientId": "10.0.0.7@7"}))
            assert (info.code, info.body) == (0, b'{"properties":{}}')
        absent = await cluster.client.invoke(cluster.broker_addr, make_request(309, dict(header)))
    assert (absent.code, absent.remark) == (1, "The Consumer <cdg> <10.0.0.7@7> not online")


@pytest.mark.parametrize("broker_overrides", [{"groupLagAlarmThreshold": "3", "dlqSizeAlarmThreshold": "2"}])
async def test_accumulation_alarm_logs_once_and_shows_in_runtime_info(cluster, caplog):
    caplog.set_level(logging.INFO, "pyrmq.broker.accumulation_alarm")
    alarm = cluster.broker.accumulation_alarm
    existing_topics(cluster, "TopicAL", queues=1)
    offsets = cluster.broker.consumer_offset_manager
    offsets.commit_offset("lagger", "TopicAL", 0, 0)
    for i in range(3):
        await send(cluster.client, cluster.broker_addr, "TopicAL", b"m%d" % i)

    async def alarms():
        info = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.GET_BROKER_RUNTIME_INFO))
        return json.loads(KVTable.decode(bytes(info.body)).table[RUNTIME_INFO_KEY])

    alarm.check()
    alarm.check()
    assert await alarms() == {"lagger": {"lag": 3, "dlq": 0}}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["accumulation alarm: group lagger lag 3 (threshold 3), DLQ 0 (threshold 2)"]
    offsets.commit_offset("lagger", "TopicAL", 0, 1)           # 2 behind now
    existing_topics(cluster, "TopicAD", queues=1)
    await dead_letter(cluster, "TopicAD", "dead", b"d1")
    alarm.check()
    assert await alarms() == {}
    await dead_letter(cluster, "TopicAD", "dead", b"d2")
    alarm.check()
    assert await alarms() == {"dead": {"lag": 0, "dlq": 2}}
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == ["accumulation alarm cleared: group lagger back below the thresholds"]


async def test_accumulation_alarm_is_off_by_default(cluster):
    existing_topics(cluster, "TopicAO", queues=1)
    cluster.broker.consumer_offset_manager.commit_offset("g", "TopicAO", 0, 0)
    await send(cluster.client, cluster.broker_addr, "TopicAO", b"x")
    cluster.broker.accumulation_alarm.check()
    assert cluster.broker.accumulation_alarm.runtime_info() == {RUNTIME_INFO_KEY: "{}"}
    assert cluster.broker.accumulation_alarm.measure()["g"].lag == 1


async def test_consumer_status_asks_every_client_of_the_group(cluster):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, mqadmin getConsumerStatus): each online client of
    the group answers GET_CONSUMER_STATUS_FROM_CLIENT (221) with its offsets; clientAddr asks one."""
    from pyrmq.codec.admin_bodies import GetConsumerStatusBody, MessageQueue

    existing_topics(cluster, "TopicCS")
    asked = []

    def table_of(client_id: str, offset: int) -> ProcessorTable:
        def status(channel, request):
            asked.append((client_id, request.ext_fields["topic"], request.ext_fields["group"]))
            body = GetConsumerStatusBody({MessageQueue("TopicCS", "broker-a", 0): offset})
            return request.response(0, None, body=body.encode())
        table = ProcessorTable("client")
        table.register(221, status)
        return table

    header = {"topic": "TopicCS", "group": "csg"}
    with trio.fail_after(10):
        answer = await cluster.client.invoke(cluster.broker_addr, make_request(223, dict(header)))
        assert (answer.code, answer.remark) == (1, "No Any Consumer online in the consumer group: [csg]")
        async with RemotingClient(table_of("10.0.0.1@1", 5)) as one, RemotingClient(table_of("10.0.0.2@2", 7)) as two:
            for client, client_id in ((one, "10.0.0.1@1"), (two, "10.0.0.2@2")):
                beat = await client.invoke(cluster.broker_addr, make_request(
                    RequestCode.HEART_BEAT, body=heartbeat("csg", client_id, "TopicCS")))
                assert beat.code == 0
            answer = await cluster.client.invoke(cluster.broker_addr, make_request(223, dict(header)))
            assert answer.code == 0, answer.remark
            mq = MessageQueue("TopicCS", "broker-a", 0)
            assert GetConsumerStatusBody.decode(answer.body).consumer_table == {"10.0.0.1@1": {mq: 5},
                                                                                "10.0.0.2@2": {mq: 7}}
            assert sorted(asked) == [("10.0.0.1@1", "TopicCS", "csg"), ("10.0.0.2@2", "TopicCS", "csg")]
            answer = await cluster.client.invoke(cluster.broker_addr, make_request(
                223, {**header, "clientAddr": "10.0.0.2@2"}))
            assert GetConsumerStatusBody.decode(answer.body).consumer_table == {"10.0.0.2@2": {mq: 7}}

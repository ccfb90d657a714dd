"""``pyrmq dlq``: an operator's look at a consumer group's dead letters, and their re-send.

``pyrmq dlq -b HOST:PORT -g GROUP`` lists the messages of ``%DLQ%GROUP`` on that broker (read with
PULL_MESSAGE as the ``TOOLS_CONSUMER`` group with its own subscription, committing nothing, as
mqadmin's and the dashboard's pull consumers do): offset msgId, original topic, reconsume times,
store time, keys, tags, body size.  ``--resend MSGID ...`` reads each dead letter back by its offset
msgId (VIEW_MESSAGE_BY_ID) and sends it (SEND_MESSAGE_V2) to the topic it was first consumed from,
the ``RETRY_TOPIC`` property the broker stored on its first send-back: body, flag, tags, keys,
user properties and UNIQ_KEY (the client-visible msgId) are kept; the retry and delay bookkeeping
(RETRY_TOPIC, REAL_TOPIC, REAL_QID, DELAY, MAX_RECONSUME_TIMES...) is dropped and the reconsume
count starts again at 0.  The dead letter itself stays in the DLQ, as on Apache.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import trio

from pyrmq.broker.topic_config import DLQ_GROUP_TOPIC_PREFIX
from pyrmq.codec.admin_bodies import TopicStatsTable
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import (
    MessageConst,
    MessageExt,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    properties_to_string,
)
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.channel import ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.client import RemotingClient

TIMEOUT_S = 10.0
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"       # Java MixAll.TOOLS_CONSUMER_GROUP
RESEND_PRODUCER_GROUP = "PYRMQ_DLQ_RESEND"
PULL_BATCH = 32
FLAG_SUBSCRIPTION = 0x4                       # the pull names its own subscription ("*")
# What a dead letter carries about its retries and delays; a re-sent message starts afresh.
DROPPED_PROPERTIES = frozenset({
    MessageConst.PROPERTY_RETRY_TOPIC, MessageConst.PROPERTY_REAL_TOPIC, MessageConst.PROPERTY_REAL_QUEUE_ID,
    MessageConst.PROPERTY_DELAY_TIME_LEVEL, MessageConst.PROPERTY_MAX_RECONSUME_TIMES,
    "CONSUME_START_TIME", "MIN_OFFSET", "MAX_OFFSET"})


@dataclass(frozen=True)
class Resent:
    msg_id: str
    topic: str
    new_msg_id: str


class DlqError(RuntimeError):
    pass


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


async def _invoke(client: RemotingClient, addr: str, code: int, fields: dict[str, str], body: bytes | None = None):
    return await client.invoke(addr, make_request(code, fields, body), timeout=TIMEOUT_S)


async def _queues(client: RemotingClient, addr: str, topic: str) -> dict[int, tuple[int, int]]:
    """queue id -> (min offset, max offset) of ``topic`` on the broker; {} when it has no such topic."""
    response = await _invoke(client, addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
    if response.code == ResponseCode.TOPIC_NOT_EXIST:
        return {}
    if response.code != ResponseCode.SUCCESS:
        raise DlqError(f"GET_TOPIC_STATS_INFO {topic} answered {response.code}: {response.remark}")
    table = TopicStatsTable.decode(bytes(response.body or b"{}")).offset_table
    return {mq.queue_id: (o.min_offset, o.max_offset) for mq, o in table.items()}


async def list_dead_letters(addr: str, group: str, limit: int = 1000) -> list[MessageExt]:
    """The first ``limit`` messages of the group's DLQ on the broker at ``addr``, oldest first per queue."""
    async with RemotingClient() as client:
        # errors leave the client's nursery before they are raised, as themselves, not in a group
        found = await _outside(_pull_all(client, addr, dlq_topic(group), limit))
    return _raise_or(found)


async def _pull_all(client: RemotingClient, addr: str, topic: str, limit: int) -> list[MessageExt]:
    found: list[MessageExt] = []
    for queue_id, (offset, max_offset) in sorted((await _queues(client, addr, topic)).items()):
        while offset < max_offset and len(found) < limit:
            response = await _invoke(client, addr, RequestCode.PULL_MESSAGE, {
                "consumerGroup": TOOLS_CONSUMER_GROUP, "topic": topic, "queueId": str(queue_id),
                "queueOffset": str(offset), "maxMsgNums": str(min(PULL_BATCH, limit - len(found))),
                "sysFlag": str(FLAG_SUBSCRIPTION), "commitOffset": "0", "suspendTimeoutMillis": "0",
                "subscription": "*", "subVersion": "0", "expressionType": "TAG"})
            next_offset = int((response.ext_fields or {}).get("nextBeginOffset", offset))
            if response.code == ResponseCode.SUCCESS and response.body:
                found.extend(decode_messages(response.body))
            if next_offset <= offset:      # nothing more readable here (expired files, filtered)
                break
            offset = next_offset
    return found[:limit]


async def _outside(work):
    """The result of ``work``, or the error it raised, carried out of the client's nursery so that
    the caller sees the error itself, not an exception group around it."""
    try:
        return await work
    except (DlqError, OSError, RemotingTimeoutError, ChannelClosedError) as exc:
        return exc


def _raise_or(result):
    if isinstance(result, Exception):
        raise result
    return result


async def resend_dead_letters(addr: str, group: str, msg_ids: list[str]) -> list[Resent]:
    """Re-send each dead letter (by offset msgId) of ``group`` to its original topic on ``addr``."""
    async with RemotingClient() as client:
        done = await _outside(_resend_all(client, addr, group, msg_ids))
    return _raise_or(done)


async def _resend_all(client: RemotingClient, addr: str, group: str, msg_ids: list[str]) -> list[Resent]:
    done = []
    counter = itertools.count()
    for msg_id in msg_ids:
        try:
            _, _, offset = decode_offset_msg_id(msg_id)
        except ValueError as exc:
            raise DlqError(f"{msg_id}: not an offset msgId ({exc})") from None
        response = await _invoke(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
        if response.code != ResponseCode.SUCCESS or not response.body:
            raise DlqError(f"{msg_id}: VIEW_MESSAGE_BY_ID answered {response.code}: {response.remark}")
        message, _ = decode_message(bytes(response.body))
        if message.topic != dlq_topic(group):
            raise DlqError(f"{msg_id}: stored in {message.topic}, not in {dlq_topic(group)}")
        topic = message.properties.get(MessageConst.PROPERTY_RETRY_TOPIC)
        if not topic:
            raise DlqError(f"{msg_id}: no {MessageConst.PROPERTY_RETRY_TOPIC} property, original topic unknown")
        queues = await _queues(client, addr, topic)
        if not queues:
            raise DlqError(f"{msg_id}: topic {topic} does not exist on {addr}")
        queue_id = sorted(queues)[next(counter) % len(queues)]
        properties = {k: v for k, v in message.properties.items() if k not in DROPPED_PROPERTIES}
        properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "true"
        sent = await _invoke(client, addr, RequestCode.SEND_MESSAGE_V2, {
            "a": RESEND_PRODUCER_GROUP, "b": topic, "c": "TBW102", "d": str(len(queues)), "e": str(queue_id),
            "f": str(_resend_sys_flag(message.sys_flag)),
            "g": str(int(time.time() * 1000)), "h": str(message.flag),
            "i": properties_to_string(properties), "j": "0", "k": "false"}, message.body)
        if sent.code != ResponseCode.SUCCESS:
            raise DlqError(f"{msg_id}: send to {topic} answered {sent.code}: {sent.remark}")
        done.append(Resent(msg_id, topic, (sent.ext_fields or {}).get("msgId", "")))
    return done


def _resend_sys_flag(sys_flag: int) -> int:
    """Keep the body's compression bit; a re-sent message is never a transaction part."""
    return sys_flag & 0x1


def format_dead_letters(messages: list[MessageExt]) -> str:
    lines = [f"{'msgId':34} {'original topic':24} {'retries':>7} {'stored at (UTC)':19} {'size':>7} keys/tags"]
    for m in messages:
        stored = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(m.store_timestamp / 1000))
        original = m.properties.get(MessageConst.PROPERTY_RETRY_TOPIC, "?")
        lines.append(f"{m.msg_id:34} {original:24} {m.reconsume_times:7} {stored:19} {len(m.body):7} "
                     f"{m.keys or '-'}/{m.tags or '-'}")
    lines.append(f"{len(messages)} dead letter(s)")
    return "\n".join(lines) + "\n"


def format_resent(resent: list[Resent]) -> str:
    return "".join(f"{r.msg_id} -> {r.topic} ({r.new_msg_id})\n" for r in resent)


def run(addr: str, group: str, resend: list[str] | None, limit: int) -> str:
    if resend:
        return format_resent(trio.run(resend_dead_letters, addr, group, resend))
    return format_dead_letters(trio.run(list_dead_letters, addr, group, limit))

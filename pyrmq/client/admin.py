"""A typed admin client (the calls of Java's ``DefaultMQAdminExt`` that mqadmin and the dashboard
use), over remoting: what the console and ``pyrmq dlq`` read and write, by the same request codes
and bodies as mqadmin, never by reaching into a broker's objects.

``AdminClient`` runs inside the caller's trio loop as an async context manager on a
``ClientInstance`` (which signs every request when given ACL credentials). Failures are the
``MQClientError`` family; a ``TOPIC_NOT_EXIST`` or ``QUERY_NOT_FOUND`` answer is an empty result.
"""

from __future__ import annotations

import ipaddress
import itertools
import ssl
from dataclasses import dataclass
from types import TracebackType
from typing import Final, TypeVar

from pyrmq.client.errors import MESSAGE_ILLEGAL_LOCAL, MQBrokerError, MQClientError
from pyrmq.client.instance import DEFAULT_TIMEOUT_S, AclCredentials, ClientInstance, body_bytes, now_ms
from pyrmq.client.route import MASTER_ID, TopicRoute
from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import (
    Body,
    ConsumerConnection,
    ConsumeStats,
    GroupList,
    KVTable,
    MessageQueue,
    ResetOffsetBody,
    TopicStatsTable,
)
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.message import (
    MessageConst,
    MessageExt,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    properties_to_string,
)
from pyrmq.codec.namesrv_bodies import ClusterInfo, TopicList
from pyrmq.codec.names import validate_group, validate_topic
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.codec.system_topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

B = TypeVar("B", bound=Body)

INVOKE_BROKER_TO_RESET_OFFSET: Final = 222
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"        # Java MixAll.TOOLS_CONSUMER_GROUP
RESEND_PRODUCER_GROUP: Final = "PYRMQ_DLQ_RESEND"
DEFAULT_TOPIC: Final = "TBW102"
PERM_READ_ONLY: Final = 4                             # PermName.PERM_READ: no more sends
PERM_READ_WRITE: Final = 6
PULL_BATCH: Final = 32
FLAG_SUBSCRIPTION: Final = 0x4                        # the pull names its own subscription ("*")
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"         # MixAll.UNIQUE_MSG_QUERY_FLAG
# What a dead letter carries about its retries and delays; a re-sent message starts afresh.
DROPPED_PROPERTIES: Final = frozenset({
    MessageConst.PROPERTY_RETRY_TOPIC, MessageConst.PROPERTY_REAL_TOPIC, MessageConst.PROPERTY_REAL_QUEUE_ID,
    MessageConst.PROPERTY_DELAY_TIME_LEVEL, MessageConst.PROPERTY_MAX_RECONSUME_TIMES,
    "CONSUME_START_TIME", "MIN_OFFSET", "MAX_OFFSET"})


@dataclass(frozen=True, slots=True)
class Resent:
    msg_id: str
    topic: str
    new_msg_id: str


@dataclass(frozen=True, slots=True)
class PullBatch:
    messages: list[MessageExt]
    next_offset: int


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def checked_topic(topic: str) -> str:
    remark = validate_topic(topic)
    if remark is not None:
        raise MQClientError(MESSAGE_ILLEGAL_LOCAL, remark)
    return topic


def checked_group(group: str) -> str:
    remark = validate_group(group)
    if remark is not None:
        raise MQClientError(MESSAGE_ILLEGAL_LOCAL, remark)
    return group


class AdminClient:
    """mqadmin's calls, typed. ``namesrv=None`` for a client given broker addresses only."""

    def __init__(self, namesrv: str | None, *, credentials: AclCredentials | None = None,
                 ssl_context: ssl.SSLContext | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.instance = ClientInstance(namesrv, ssl_context=ssl_context, timeout=timeout, credentials=credentials,
                                       instance_name="pyrmq-admin", heartbeats=False)
        self._queue_turn = itertools.count()

    async def __aenter__(self) -> AdminClient:
        await self.instance.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.instance.__aexit__(exc_type, exc, tb)

    async def _call(self, addr: str, code: int, fields: dict[str, str] | None = None, body: bytes | None = None,
                    ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        return await self.instance.invoke_ok(addr, make_request(code, fields, body), ok=ok)

    # --- NameServer -------------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        response = await self.instance.invoke_namesrv(make_request(RequestCode.GET_BROKER_CLUSTER_INFO))
        return _decoded(ClusterInfo, _ok(response, "namesrv"))

    async def topic_list(self) -> list[str]:
        response = await self.instance.invoke_namesrv(make_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        return sorted(_decoded(TopicList, _ok(response, "namesrv")).topic_list)

    async def route(self, topic: str) -> TopicRoute | None:
        return await self.instance.route(topic, refresh=True)

    async def master_addrs(self, topic: str) -> dict[str, str]:
        """broker name -> master address, of the brokers that hold ``topic``."""
        route = await self.route(topic)
        if route is None:
            return {}
        return {q.broker_name: addr for q in route.queue_datas
                if (addr := route.master_addr(q.broker_name)) is not None}

    async def all_master_addrs(self) -> dict[str, str]:
        """broker name -> master address, over the whole cluster."""
        info = await self.cluster_info()
        return {name: b.broker_addrs[MASTER_ID] for name, b in sorted(info.broker_addr_table.items())
                if MASTER_ID in b.broker_addrs}

    # --- brokers --------------------------------------------------------------------------

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        response = await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return _decoded(KVTable, body_bytes(response)).table

    async def topic_stats(self, addr: str, topic: str) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO; an empty table when the broker has no such topic."""
        response = await self._call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic},
                                    ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return TopicStatsTable()
        return _decoded(TopicStatsTable, body_bytes(response))

    async def create_or_update_topic(self, addr: str, topic: str, read_queue_nums: int, write_queue_nums: int,
                                     perm: int = PERM_READ_WRITE) -> None:
        """UPDATE_AND_CREATE_TOPIC, as mqadmin updateTopic sends it."""
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": checked_topic(topic), "defaultTopic": DEFAULT_TOPIC, "readQueueNums": str(read_queue_nums),
            "writeQueueNums": str(write_queue_nums), "perm": str(perm), "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0", "order": "false"})

    async def delete_topic(self, topic: str, addrs: list[str]) -> None:
        """mqadmin deleteTopic: DELETE_TOPIC_IN_BROKER on each broker, then DELETE_TOPIC_IN_NAMESRV."""
        for addr in addrs:
            await self._call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": checked_topic(topic)})
        for namesrv in self.instance.namesrv_addrs:
            await self._call(namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})

    async def topic_consumers(self, addr: str, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups with offsets or subscriptions on ``topic``."""
        response = await self._call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
        return sorted(_decoded(GroupList, body_bytes(response)).group_list)

    async def subscription_groups(self, addr: str) -> list[str]:
        """The names of the broker's subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""
        response = await self._call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        try:
            obj = fastjson.loads(body_bytes(response))
            return sorted(str(name) for name in obj["subscriptionGroupTable"])
        except (ProtocolError, KeyError, TypeError) as exc:
            raise MQClientError(ResponseCode.SYSTEM_ERROR, f"subscription group table: {exc}") from None

    async def consume_stats(self, addr: str, group: str, topic: str | None = None) -> ConsumeStats:
        fields = {"consumerGroup": checked_group(group)}
        if topic:
            fields["topic"] = topic
        response = await self._call(addr, RequestCode.GET_CONSUME_STATS, fields)
        return _decoded(ConsumeStats, body_bytes(response))

    async def consumer_connections(self, addr: str, group: str) -> ConsumerConnection | None:
        """GET_CONSUMER_CONNECTION_LIST; None when no consumer of the group is online."""
        response = await self._call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                    {"consumerGroup": checked_group(group)},
                                    ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
        if response.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return None
        return _decoded(ConsumerConnection, body_bytes(response))

    # --- offsets --------------------------------------------------------------------------

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        response = await self._call(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                    {"topic": topic, "queueId": str(queue_id), "timestamp": str(timestamp)})
        return int((response.ext_fields or {}).get("offset", "0"))

    async def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        await self._call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset)})

    async def reset_offset_by_time(self, topic: str, group: str, timestamp: int,
                                   force: bool = True) -> dict[MessageQueue, int]:
        """mqadmin resetOffsetByTime: INVOKE_BROKER_TO_RESET_OFFSET on each broker of the topic (the
        broker tells the online consumers); when the group has no consumer online, the stored
        offsets are rewritten instead (``resetOffsetByTimestampOld``: SEARCH_OFFSET_BY_TIMESTAMP and
        UPDATE_CONSUMER_OFFSET per queue), as mqadmin falls back. ``timestamp=-1``: the queue ends."""
        checked_topic(topic)
        checked_group(group)
        result: dict[MessageQueue, int] = {}
        for addr in (await self.master_addrs(topic)).values():
            response = await self._call(addr, INVOKE_BROKER_TO_RESET_OFFSET, {
                "topic": topic, "group": group, "timestamp": str(timestamp), "isForce": str(force).lower()},
                ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
            if response.code == ResponseCode.SUCCESS:
                result.update(_decoded(ResetOffsetBody, body_bytes(response)).offset_table)
                continue
            stats = await self.consume_stats(addr, group, topic)
            for mq, wrapper in sorted(stats.offset_table.items(), key=lambda item: item[0].queue_id):
                if timestamp == -1:
                    target = wrapper.broker_offset
                else:
                    target = await self.search_offset(addr, topic, mq.queue_id, timestamp)
                if not force and target >= wrapper.consumer_offset:
                    target = wrapper.consumer_offset
                await self.update_consumer_offset(addr, group, topic, mq.queue_id, target)
                result[mq] = target
        return result

    # --- messages -------------------------------------------------------------------------

    async def view_message(self, addr: str, commit_log_offset: int) -> MessageExt:
        """VIEW_MESSAGE_BY_ID: the record at ``commit_log_offset``."""
        response = await self._call(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(commit_log_offset)})
        body = body_bytes(response)
        if not body:
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, "VIEW_MESSAGE_BY_ID answered without a body", addr)
        try:
            return decode_message(body)[0]
        except ProtocolError as exc:
            raise MQClientError(ResponseCode.SYSTEM_ERROR, str(exc)) from None

    async def view_message_by_id(self, offset_msg_id: str) -> MessageExt:
        """An offset msgId names its broker and commit log offset (mqadmin queryMsgById)."""
        try:
            host, port, offset = decode_offset_msg_id(offset_msg_id)
        except ValueError as exc:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"{offset_msg_id}: not an offset msgId ({exc})") from None
        return await self.view_message(f"{ipaddress.ip_address(host)}:{port}", offset)

    async def query_message(self, topic: str, key: str, *, unique: bool = False, max_num: int = 64,
                            begin: int = 0, end: int | None = None) -> list[MessageExt]:
        """QUERY_MESSAGE on every broker of the topic: by key (mqadmin queryMsgByKey), or by the
        client-visible msgId with ``unique`` (queryMsgByUniqueKey)."""
        checked_topic(topic)
        fields = {"topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": str(begin),
                  "endTimestamp": str(now_ms() if end is None else end)}
        if unique:
            fields[UNIQUE_KEY_QUERY] = "true"
        found: list[MessageExt] = []
        for addr in (await self.master_addrs(topic)).values():
            response = await self._call(addr, RequestCode.QUERY_MESSAGE, dict(fields),
                                        ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            if response.code == ResponseCode.SUCCESS:
                found.extend(_messages(body_bytes(response)))
        return sorted(found, key=lambda m: m.store_timestamp)[:max_num]

    async def pull(self, addr: str, topic: str, queue_id: int, offset: int, max_nums: int = PULL_BATCH) -> PullBatch:
        """PULL_MESSAGE as the TOOLS_CONSUMER group with its own subscription, committing nothing,
        as mqadmin's and the dashboard's pull consumers read."""
        response = await self._call(addr, RequestCode.PULL_MESSAGE, {
            "consumerGroup": TOOLS_CONSUMER_GROUP, "topic": topic, "queueId": str(queue_id),
            "queueOffset": str(offset), "maxMsgNums": str(max_nums), "sysFlag": str(FLAG_SUBSCRIPTION),
            "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
            "expressionType": "TAG"}, ok=(ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                                          ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_RETRY_IMMEDIATELY))
        next_offset = int((response.ext_fields or {}).get("nextBeginOffset", offset))
        messages = _messages(body_bytes(response)) if response.code == ResponseCode.SUCCESS else []
        return PullBatch(messages, next_offset)

    async def read_queue(self, addr: str, topic: str, queue_id: int, offset: int, max_offset: int,
                         limit: int, until_timestamp: int | None = None) -> list[MessageExt]:
        """Messages of one queue from ``offset`` up to ``max_offset`` (at most ``limit``; with
        ``until_timestamp``, stopping at the first one stored later)."""
        found: list[MessageExt] = []
        while offset < max_offset and len(found) < limit:
            batch = await self.pull(addr, topic, queue_id, offset, min(PULL_BATCH, limit - len(found)))
            for message in batch.messages:
                if until_timestamp is not None and message.store_timestamp > until_timestamp:
                    return found
                found.append(message)
            if batch.next_offset <= offset:      # nothing more readable here (expired files, filtered)
                break
            offset = batch.next_offset
        return found[:limit]

    async def messages_by_time(self, topic: str, begin: int, end: int, limit: int = 64) -> list[MessageExt]:
        """The messages of ``topic`` stored between ``begin`` and ``end`` (ms), over every queue."""
        found: list[MessageExt] = []
        for addr in (await self.master_addrs(topic)).values():
            for mq, offsets in sorted((await self.topic_stats(addr, topic)).offset_table.items(),
                                      key=lambda item: item[0].queue_id):
                start = await self.search_offset(addr, topic, mq.queue_id, begin)
                found.extend(m for m in await self.read_queue(addr, topic, mq.queue_id, start,
                                                              offsets.max_offset, limit, end)
                             if m.store_timestamp >= begin)
        return sorted(found, key=lambda m: m.store_timestamp)[:limit]

    # --- dead letters ---------------------------------------------------------------------

    async def dead_letters(self, addr: str, group: str, limit: int = 1000) -> list[MessageExt]:
        """The first ``limit`` messages of the group's DLQ on ``addr``, oldest first per queue."""
        topic = dlq_topic(checked_group(group))
        found: list[MessageExt] = []
        for mq, offsets in sorted((await self.topic_stats(addr, topic)).offset_table.items(),
                                  key=lambda item: item[0].queue_id):
            found.extend(await self.read_queue(addr, topic, mq.queue_id, offsets.min_offset, offsets.max_offset,
                                               limit - len(found)))
        return found[:limit]

    async def resend_dead_letter(self, addr: str, group: str, msg_id: str) -> Resent:
        """Re-send one dead letter (by offset msgId) of ``group`` to the topic it was first consumed
        from (its RETRY_TOPIC property): body, flag, tags, keys, user properties and UNIQ_KEY are kept;
        the retry and delay bookkeeping is dropped. The dead letter stays in the DLQ, as on Apache."""
        try:
            _, _, offset = decode_offset_msg_id(msg_id)
        except ValueError as exc:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"{msg_id}: not an offset msgId ({exc})") from None
        message = await self.view_message(addr, offset)
        if message.topic != dlq_topic(group):
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"{msg_id}: stored in {message.topic}, not in {dlq_topic(group)}")
        topic = message.properties.get(MessageConst.PROPERTY_RETRY_TOPIC)
        if not topic:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL,
                                f"{msg_id}: no {MessageConst.PROPERTY_RETRY_TOPIC} property, original topic unknown")
        queues = sorted(mq.queue_id for mq in (await self.topic_stats(addr, topic)).offset_table)
        if not queues:
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"{msg_id}: topic {topic} does not exist on {addr}")
        queue_id = queues[next(self._queue_turn) % len(queues)]
        properties = {k: v for k, v in message.properties.items() if k not in DROPPED_PROPERTIES}
        properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "true"
        sent = await self._call(addr, RequestCode.SEND_MESSAGE_V2, {
            "a": RESEND_PRODUCER_GROUP, "b": topic, "c": DEFAULT_TOPIC, "d": str(len(queues)), "e": str(queue_id),
            "f": str(message.sys_flag & 0x1),     # keep the compression bit; never a transaction part
            "g": str(now_ms()), "h": str(message.flag), "i": properties_to_string(properties), "j": "0",
            "k": "false"}, message.body)
        return Resent(msg_id, topic, (sent.ext_fields or {}).get("msgId", ""))


def _ok(response: RemotingCommand, addr: str) -> bytes:
    if response.code != ResponseCode.SUCCESS:
        raise MQBrokerError(response.code, response.remark or "", addr)
    return body_bytes(response)


def _decoded(cls: type[B], body: bytes) -> B:
    try:
        return cls.decode(body or b"{}")
    except ProtocolError as exc:
        raise MQClientError(ResponseCode.SYSTEM_ERROR, str(exc)) from None


def _messages(body: bytes) -> list[MessageExt]:
    try:
        return decode_messages(body)
    except ProtocolError as exc:
        raise MQClientError(ResponseCode.SYSTEM_ERROR, str(exc)) from None

"""``PullConsumer``: pulls messages from queues the caller chooses at offsets the caller keeps, as
Java's ``DefaultMQPullConsumer`` does, plus the group's committed offsets on the brokers.

    async with PullConsumer("127.0.0.1:9876", group="my_group") as consumer:
        for mq in await consumer.fetch_queues("TopicTest"):
            offset = max(await consumer.query_offset(mq), 0)
            result = await consumer.pull(mq, offset)
            ...
            await consumer.update_offset(mq, result.next_begin_offset)

The consumer registers its group with the brokers by heartbeat (type CONSUME_ACTIVELY, with a
subscription for every topic it subscribed to or pulled), so admin tools list it as online.
There is no rebalancing: which queues to read is the caller's choice.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

from pyrmq.client.errors import (
    BROKER_NOT_EXIST_EXCEPTION,
    MESSAGE_ILLEGAL_LOCAL,
    NOT_FOUND_TOPIC_EXCEPTION,
    MQBrokerError,
    MQClientError,
)
from pyrmq.client.instance import GroupClient, body_bytes
from pyrmq.client.model import Message, MessageQueue, PullResult, PullStatus
from pyrmq.client.route import MASTER_ID, TopicRoute
from pyrmq.codec.admin_bodies import Subscription
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import MessageConst, MessageFormatError, decode_messages, java_string_hash
from pyrmq.codec.remoting import RemotingCommand, make_request

log = logging.getLogger(__name__)

# PullSysFlag bits.
FLAG_COMMIT_OFFSET: Final = 0x1
FLAG_SUSPEND: Final = 0x2
FLAG_SUBSCRIPTION: Final = 0x4
# The largest batch a broker returns for one pull (its maxMsgNums cap is 32 by default anyway).
MAX_PULL_NUMS: Final = 1024

_PULL_STATUS: Final = {
    ResponseCode.SUCCESS: PullStatus.FOUND, ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL}


def build_subscription(topic: str, expression: str, expression_type: str = "TAG") -> Subscription:
    """Java's FilterAPI.buildSubscriptionData: ``"*"`` or empty is everything, else tags split on
    ``||`` and trimmed; a SQL92 expression is passed as is.  subVersion is the time it was made."""
    version = int(time.time() * 1000)
    if expression_type != "TAG":
        if not expression:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"an empty {expression_type} expression")
        return Subscription(topic, expression, sub_version=version, expression_type=expression_type)
    if not expression or expression == "*":
        return Subscription(topic, "*", sub_version=version)
    tags = tuple(dict.fromkeys(t.strip() for t in expression.split("||") if t.strip()))
    return Subscription(topic, expression, tags, tuple(sorted({java_string_hash(t) for t in tags})), version)


class PullConsumer(GroupClient):
    """A consumer group member that pulls; use as ``async with PullConsumer(...) as consumer``.
    The keywords other than ``consume_from_where`` (reported in heartbeats) are ``GroupClient``'s."""

    unregister_field = "consumerGroup"

    def __init__(self, namesrv: str, group: str, *, consume_from_where: str = "CONSUME_FROM_LAST_OFFSET",
                 **kwargs: Any) -> None:
        super().__init__(namesrv, group, **kwargs)
        self.consume_from_where = consume_from_where
        self.subscriptions: dict[str, Subscription] = {}
        self._pull_from: dict[MessageQueue, int] = {}   # suggestWhichBrokerId by queue

    def _heartbeat_body(self) -> dict[str, Any]:
        consumer = {"consumeFromWhere": self.consume_from_where, "consumeType": "CONSUME_ACTIVELY",
                    "groupName": self.group, "messageModel": "CLUSTERING",
                    "subscriptionDataSet": [s.to_json() for s in self.subscriptions.values()], "unitMode": False}
        return {"clientID": self.client_id, "consumerDataSet": [consumer], "producerDataSet": []}

    # --- subscriptions and queues ----------------------------------------------------------

    async def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        """Register ``topic`` with this filter in the group's heartbeats (what admin tools show);
        ``pull`` registers a topic with ``"*"`` by itself."""
        self.subscriptions[topic] = build_subscription(topic, expression, expression_type)
        await self._route(topic)
        await self.instance.heartbeat_all()

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, in broker-name then queue-id order."""
        return (await self._route(topic)).subscribe_queues()

    async def _route(self, topic: str, refresh: bool = False) -> TopicRoute:
        route = await self.instance.route(topic, refresh=refresh)
        if route is None:
            raise MQClientError(NOT_FOUND_TOPIC_EXCEPTION, f"no route info of this topic: {topic}")
        return route

    async def _addr(self, mq: MessageQueue, broker_id: int = MASTER_ID) -> str:
        """The broker to ask about ``mq``: ``broker_id`` of its broker set if the route has it,
        else the master, else any; the route is refreshed once when the broker is missing."""
        for refresh in (False, True):
            addr = (await self._route(mq.topic, refresh)).broker_addr(mq.broker_name, broker_id)
            if addr is not None:
                return addr
        raise MQClientError(BROKER_NOT_EXIST_EXCEPTION, f"the broker {mq.broker_name} is not in the route of {mq.topic}")

    # --- pulling --------------------------------------------------------------------------

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, tag_expression: str = "*",
                   timeout: float | None = None, *, expression_type: str = "TAG", long_poll: float = 0.0,
                   commit_offset: int | None = None) -> PullResult:
        """Up to ``max_nums`` messages of ``mq`` from ``offset`` that match the expression (tags
        ``"TagA || TagB"``, or SQL92 with ``expression_type="SQL92"``).

        ``long_poll`` > 0 lets the broker hold the pull that many seconds until a message arrives
        (FLAG_SUSPEND); ``commit_offset`` also stores the group's offset on the master, as a push
        consumer's pulls do.  The next pull of ``mq`` goes to the broker the answer suggests."""
        if not 0 < max_nums <= MAX_PULL_NUMS:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"max_nums {max_nums} not in 1..{MAX_PULL_NUMS}")
        if offset < 0:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"offset {offset} < 0")
        subscription = self.subscriptions.get(mq.topic)
        registered = subscription is not None
        if subscription is None or (subscription.sub_string, subscription.expression_type) != (
                tag_expression or "*", expression_type):
            subscription = build_subscription(mq.topic, tag_expression, expression_type)
        addr = await self._addr(mq, self._pull_from.get(mq, MASTER_ID))
        route = await self._route(mq.topic)
        sys_flag = FLAG_SUBSCRIPTION
        if long_poll > 0:
            sys_flag |= FLAG_SUSPEND
        if commit_offset is not None and addr == route.master_addr(mq.broker_name):
            sys_flag |= FLAG_COMMIT_OFFSET
        header = {"consumerGroup": self.group, "topic": mq.topic, "queueId": str(mq.queue_id),
                  "queueOffset": str(offset), "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag),
                  "commitOffset": str(commit_offset or 0), "suspendTimeoutMillis": str(int(long_poll * 1000)),
                  "subscription": subscription.sub_string, "subVersion": str(subscription.sub_version),
                  "expressionType": subscription.expression_type, "bname": mq.broker_name}
        request_timeout = (self.timeout if timeout is None else timeout) + max(long_poll, 0.0)
        response = await self.instance.invoke(addr, make_request(RequestCode.PULL_MESSAGE, header), request_timeout)
        if not registered:   # Java's subscriptionAutomatically: pulled topics show in the heartbeats
            self.subscriptions[mq.topic] = build_subscription(mq.topic, "*")
            await self.instance.heartbeat_all()
        return self._pull_result(mq, subscription, response, addr)

    def _pull_result(self, mq: MessageQueue, subscription: Subscription, response: RemotingCommand,
                     addr: str) -> PullResult:
        status = _PULL_STATUS.get(response.code)
        if status is None:
            raise MQBrokerError(response.code, response.remark or "", addr)
        fields = response.ext_fields or {}
        try:
            next_begin, min_offset, max_offset = (int(fields[k]) for k in ("nextBeginOffset", "minOffset", "maxOffset"))
            suggested = int(fields.get("suggestWhichBrokerId", MASTER_ID))
        except (KeyError, ValueError):
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"pull answer without its offsets: {fields}", addr) from None
        self._pull_from[mq] = suggested
        messages: list[Message] = []
        if status is PullStatus.FOUND:
            try:
                records = decode_messages(body_bytes(response))
            except MessageFormatError as exc:
                raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"undecodable pull answer: {exc}", addr) from None
            extra = {MessageConst.PROPERTY_MIN_OFFSET: str(min_offset), MessageConst.PROPERTY_MAX_OFFSET: str(max_offset)}
            tags = set(subscription.tags_set)
            for record in records:
                # The broker filters by tag hash code; equal hashes of other tags are dropped here.
                if tags and record.tags not in tags:
                    continue
                messages.append(Message.from_ext(record, mq.broker_name, extra))
        return PullResult(status, next_begin, min_offset, max_offset, messages)

    # --- offsets --------------------------------------------------------------------------

    async def _offset_request(self, code: int, mq: MessageQueue, extra: dict[str, str] | None = None,
                              ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        header = {"topic": mq.topic, "queueId": str(mq.queue_id), "bname": mq.broker_name, **(extra or {})}
        return await self.instance.invoke_ok(await self._addr(mq), make_request(code, header), ok=ok)

    async def query_offset(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq``; -1 when the group has none there."""
        response = await self._offset_request(RequestCode.QUERY_CONSUMER_OFFSET, mq, {"consumerGroup": self.group},
                                              ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        return _offset_field(response)

    async def update_offset(self, mq: MessageQueue, offset: int) -> None:
        """Store the group's offset of ``mq`` on its master (waits for the broker's answer)."""
        await self._offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, mq,
                                   {"consumerGroup": self.group, "commitOffset": str(offset)})

    async def min_offset(self, mq: MessageQueue) -> int:
        return _offset_field(await self._offset_request(RequestCode.GET_MIN_OFFSET, mq))

    async def max_offset(self, mq: MessageQueue) -> int:
        """One past the last message's queue offset."""
        return _offset_field(await self._offset_request(RequestCode.GET_MAX_OFFSET, mq))

    async def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        """The offset of the first message stored at or after ``timestamp`` (ms since the epoch)."""
        return _offset_field(await self._offset_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq,
                                                        {"timestamp": str(timestamp)}))


def _offset_field(response: RemotingCommand) -> int:
    try:
        return int((response.ext_fields or {})["offset"])
    except (KeyError, ValueError):
        raise MQBrokerError(ResponseCode.SYSTEM_ERROR, "answer without an offset", "") from None

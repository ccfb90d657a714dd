"""``Producer``: sends messages as the Java 4.9 ``DefaultMQProducer`` does (SEND_MESSAGE_V2 with
the same header fields and properties, SEND_BATCH_MESSAGE for batches), choosing queues round-robin
over the route's writable queues and retrying on another broker after a failure.

    async with Producer("127.0.0.1:9876", group="my_producer") as producer:
        result = await producer.send("TopicTest", b"hello", tags="TagA", keys="order-1")
"""

from __future__ import annotations

import itertools
import logging
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from pyrmq.client.errors import (
    MESSAGE_ILLEGAL_LOCAL,
    NOT_FOUND_TOPIC_EXCEPTION,
    MQBrokerError,
    MQClientError,
    MQRemotingError,
    MQTimeoutError,
)
from pyrmq.client.ids import UniqIdGenerator
from pyrmq.client.instance import GroupClient, now_ms
from pyrmq.client.model import MessageQueue, SendResult, SendStatus
from pyrmq.client.route import TopicRoute
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import (
    BatchEntry,
    MessageConst,
    MessageSysFlag,
    encode_batch,
    properties_to_string,
)
from pyrmq.codec.remoting import make_request

log = logging.getLogger(__name__)

# Java DefaultMQProducer defaults.
RETRY_TIMES_WHEN_SEND_FAILED: Final = 2
COMPRESS_MSG_BODY_OVER_BYTES: Final = 4 * 1024
COMPRESS_LEVEL: Final = 5              # rocketmq.message.compressLevel
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
DEFAULT_TOPIC: Final = "TBW102"        # createTopicKey: the route a new topic borrows (autoCreateTopicEnable)
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
TOPIC_MAX_LENGTH: Final = 127
_TOPIC_PATTERN: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")
# Answers after which Java retries on another broker (DefaultMQProducer.retryResponseCodes: 204 is
# NO_BUYER_ID, 205 NOT_IN_CURRENT_UNIT); SYSTEM_BUSY added, as a busy broker's peers may not be.
RETRY_RESPONSE_CODES: Final = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.NO_PERMISSION, ResponseCode.SYSTEM_BUSY, 204, 205})
# A broker that failed a send is avoided for this long when others can take the message (a fixed
# stand-in for Java's sendLatencyFaultEnable latency table).
FAULT_ISOLATION_S: Final = 30.0
# Properties the producer sets itself; a caller may not pass them in ``properties``.
_RESERVED: Final = frozenset({
    MessageConst.PROPERTY_TAGS, MessageConst.PROPERTY_KEYS, MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
    MessageConst.PROPERTY_DELAY_TIME_LEVEL, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX})
_STORED_STATUS: Final = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK, ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One message of a batch (``Producer.send_batch``)."""

    body: bytes
    tags: str | None = None
    keys: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


class _FaultTable:
    """Brokers that failed recently, avoided until their isolation ends (trio clock)."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def mark(self, broker_name: str) -> None:
        self._until[broker_name] = trio.current_time() + FAULT_ISOLATION_S

    def clear(self, broker_name: str) -> None:
        self._until.pop(broker_name, None)

    def available(self, broker_name: str) -> bool:
        return self._until.get(broker_name, 0.0) <= trio.current_time()


class Producer(GroupClient):
    """A producer group member; use as ``async with Producer(...) as producer``.

    ``compress`` turns on Java's body compression (zlib level 5 for bodies of 4 KiB or more,
    sysFlag COMPRESSED | ZLIB); ``timeout`` bounds one ``send`` including its retries, as Java's
    sendMsgTimeout does.  The other keywords are ``GroupClient``'s."""

    unregister_field = "producerGroup"

    def __init__(self, namesrv: str, group: str, *, retry_times_when_send_failed: int = RETRY_TIMES_WHEN_SEND_FAILED,
                 compress: bool = True, compress_over: int = COMPRESS_MSG_BODY_OVER_BYTES,
                 create_topic_key: str = DEFAULT_TOPIC, default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
                 **kwargs: Any) -> None:
        super().__init__(namesrv, group, **kwargs)
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.compress = compress
        self.compress_over = compress_over
        self.create_topic_key = create_topic_key
        self.default_topic_queue_nums = default_topic_queue_nums
        self._ids = UniqIdGenerator(self.instance.ip)
        self._faults = _FaultTable()
        self._index = itertools.count()

    def _heartbeat_body(self) -> dict[str, Any]:
        return {"clientID": self.client_id, "consumerDataSet": [], "producerDataSet": [{"groupName": self.group}]}

    # --- sending ------------------------------------------------------------------------

    async def send(self, topic: str, body: bytes, tags: str | None = None, keys: str | None = None,
                   properties: Mapping[str, str] | None = None, delay_level: int = 0, *,
                   timeout: float | None = None) -> SendResult:
        """Send one message and wait until the broker stored it; raises an ``MQClientError``."""
        check_topic(topic)
        check_body(body)
        uniq_id = self._ids.next_id()
        props = message_properties(tags, keys, properties)
        if delay_level:
            if delay_level < 0:
                raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"delay level {delay_level} < 0")
            props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
        props[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_id
        sys_flag = 0
        if self.compress and len(body) >= self.compress_over:
            body = zlib.compress(body, COMPRESS_LEVEL)
            sys_flag |= MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB_TYPE
        return await self._send(topic, body, properties_to_string(props), sys_flag, uniq_id,
                                RequestCode.SEND_MESSAGE_V2, batch=False, timeout=timeout)

    async def send_batch(self, topic: str, messages: Iterable[OutgoingMessage | bytes], *,
                         timeout: float | None = None) -> SendResult:
        """Send messages of one topic in one SEND_BATCH_MESSAGE (Java's ``send(Collection)``): they
        are stored together, on one queue, with consecutive queue offsets."""
        check_topic(topic)
        entries: list[BatchEntry] = []
        ids: list[str] = []
        for message in messages:
            if isinstance(message, (bytes, bytearray)):
                message = OutgoingMessage(bytes(message))
            check_body(message.body)
            props = message_properties(message.tags, message.keys, message.properties)
            ids.append(self._ids.next_id())
            props[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = ids[-1]
            entries.append(BatchEntry(0, message.body, properties_to_string(props)))
        if not entries:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, "a batch needs at least one message")
        body = encode_batch(entries)
        if len(body) > MAX_MESSAGE_SIZE:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"the batch is {len(body)} bytes, more than {MAX_MESSAGE_SIZE}")
        # The batch's own properties: only WAIT, as Java's MessageBatch (each entry has its UNIQ_KEY).
        batch_props = properties_to_string({MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "true"})
        return await self._send(topic, body, batch_props, 0, ",".join(ids), RequestCode.SEND_BATCH_MESSAGE,
                                batch=True, timeout=timeout)

    async def _send(self, topic: str, body: bytes, properties: str, sys_flag: int, msg_id: str, code: int, *,
                    batch: bool, timeout: float | None) -> SendResult:
        """Java's sendDefaultImpl: up to 1 + retry_times attempts within one deadline, each on a
        queue of another broker than the one that just failed."""
        budget = self.timeout if timeout is None else timeout
        deadline = trio.current_time() + budget
        last_failed: str | None = None
        last_error: MQClientError | None = None
        for attempt in range(1 + self.retry_times_when_send_failed):
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                break
            route = await self._publish_route(topic)
            queue = self._select_queue(route.publish_queues(), last_failed)
            addr = route.master_addr(queue.broker_name)
            if addr is None:
                self.instance.forget_route(topic)
                last_error = MQClientError(NOT_FOUND_TOPIC_EXCEPTION, f"no master for broker {queue.broker_name}")
                last_failed = queue.broker_name
                continue
            header = {"a": self.group, "b": topic, "c": self.create_topic_key, "d": str(self.default_topic_queue_nums),
                      "e": str(queue.queue_id), "f": str(sys_flag), "g": str(now_ms()), "h": "0",
                      "i": properties, "j": "0", "k": "false", "m": "true" if batch else "false",
                      "n": queue.broker_name}
            try:
                response = await self.instance.invoke(addr, make_request(code, header, body), remaining)
            except MQRemotingError as exc:
                log.info("send to %s (%s) failed, attempt %d: %s", addr, queue.broker_name, attempt + 1, exc)
                last_error, last_failed = exc, queue.broker_name
                self._faults.mark(queue.broker_name)
                self.instance.forget_route(topic)
                continue
            status = _STORED_STATUS.get(response.code)
            if status is None:
                error = MQBrokerError(response.code, response.remark or "", addr)
                if response.code not in RETRY_RESPONSE_CODES:
                    raise error
                log.info("send to %s refused with %d, attempt %d: %s", addr, response.code, attempt + 1,
                         response.remark)
                last_error, last_failed = error, queue.broker_name
                self._faults.mark(queue.broker_name)
                continue
            self._faults.clear(queue.broker_name)
            fields = response.ext_fields or {}
            try:
                queue_id = int(fields.get("queueId", queue.queue_id))
                queue_offset = int(fields["queueOffset"])
            except (KeyError, ValueError):
                raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"send answer without queue fields: {fields}",
                                    addr) from None
            return SendResult(status, msg_id, fields.get("msgId", ""), MessageQueue(topic, queue.broker_name, queue_id),
                              queue_offset)
        if last_error is not None and not isinstance(last_error, MQTimeoutError):
            raise last_error
        raise MQTimeoutError(f"send to {topic} not done within {budget:g} s "
                             f"({1 + self.retry_times_when_send_failed} attempts allowed): {last_error}")

    async def _publish_route(self, topic: str) -> TopicRoute:
        """The topic's route, or the default topic's cut to ``default_topic_queue_nums`` queues (the
        broker creates the topic at the first send when autoCreateTopicEnable is on)."""
        route = await self.instance.route(topic)
        if route is not None and route.publish_queues():
            return route
        default = await self.instance.route(self.create_topic_key)
        if default is not None:
            borrowed = default.with_queue_limit(topic, self.default_topic_queue_nums)
            if borrowed.publish_queues():
                return borrowed
        raise MQClientError(NOT_FOUND_TOPIC_EXCEPTION, f"no route info of this topic: {topic}")

    def _select_queue(self, queues: list[MessageQueue], last_failed: str | None) -> MessageQueue:
        """Round-robin; skip brokers in isolation and the broker that just failed while another
        queue is left (Java's selectOneMessageQueue with sendLatencyFaultEnable)."""
        start = next(self._index)
        rotated = [queues[(start + i) % len(queues)] for i in range(len(queues))]
        for queue in rotated:
            if queue.broker_name != last_failed and self._faults.available(queue.broker_name):
                return queue
        for queue in rotated:
            if queue.broker_name != last_failed:
                return queue
        return rotated[0]


def check_topic(topic: str) -> None:
    """Java's Validators.checkTopic."""
    if not topic or len(topic) > TOPIC_MAX_LENGTH or not _TOPIC_PATTERN.match(topic):
        raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"the topic {topic!r} is empty, longer than {TOPIC_MAX_LENGTH} "
                                                   "or has characters outside [%|a-zA-Z0-9_-]")
    if topic == DEFAULT_TOPIC:
        raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"the topic {topic} is reserved")


def check_body(body: bytes) -> None:
    if not isinstance(body, (bytes, bytearray)):
        raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"the body must be bytes, not {type(body).__name__}")
    if not body:
        raise MQClientError(MESSAGE_ILLEGAL_LOCAL, "the message body is empty")
    if len(body) > MAX_MESSAGE_SIZE:
        raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"the message body is {len(body)} bytes, more than {MAX_MESSAGE_SIZE}")


def message_properties(tags: str | None, keys: str | None, properties: Mapping[str, str] | None) -> dict[str, str]:
    """The properties in the order Java's Message puts them (TAGS, KEYS, WAIT, user properties):
    the order decides the property string's bytes (properties_to_string)."""
    props: dict[str, str] = {}
    if tags:
        props[MessageConst.PROPERTY_TAGS] = tags
    if keys:
        props[MessageConst.PROPERTY_KEYS] = keys
    props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "true"
    for name, value in (properties or {}).items():
        if name in _RESERVED:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"the property {name} is set by the producer itself")
        if not name or any(sep in f"{name}{value}" for sep in "\x01\x02"):
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, f"property {name!r}: empty name or a separator character")
        props[name] = value
    for text in (tags, keys):
        if text and any(sep in text for sep in "\x01\x02"):
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, "tags and keys may not hold \\x01 or \\x02")
    return props

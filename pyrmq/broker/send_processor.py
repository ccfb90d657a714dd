"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): the send hot path.

Checks in Java's order (spec/codes.md section 3.3), one append into the commit log, and the
response at once -- or, under SYNC_FLUSH, when the group commit that covers the record is on disk.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Callable

import trio

from pyrmq.broker.config import BrokerRole
from pyrmq.broker.first_file_gate import FirstFileGate
from pyrmq.broker.offsets_and_groups import required_group
from pyrmq.broker.recall_processor import recall_handle_for
from pyrmq.broker.schedule_service import redirect_to_schedule
from pyrmq.broker.transaction_messages import half_message
from pyrmq.broker.timer_service import (
    TIMER_KEYS,
    clear_timer_properties,
    is_timer_message,
    transform_timer_message,
    wall_clock_ms,
)
from pyrmq.broker.topic_config import (
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    is_writeable,
    validate_topic,
)
from pyrmq.codec.codes import ResponseCode, TopicSysFlag
from pyrmq.codec.message import (
    MessageConst,
    MessageSysFlag,
    properties_to_string,
    string_to_properties,
    tags_string_to_tags_code,
)
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.codec.send_header import SEND_HEADER_FIELDS, plain_send_fields
from pyrmq.codec.system_topics import SCHEDULE_TOPIC
from pyrmq.codec.text import parse_java_int
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.deferred import Deferred
from pyrmq.remoting.dispatch import RequestError
from pyrmq.remoting.headers import optional_bool, optional_int, required_int
from pyrmq.store.message_store import (
    FlushDiskType,
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
)

if TYPE_CHECKING:
    from pyrmq.broker.config import BrokerConfig
    from pyrmq.broker.broker_stats import BrokerStatsManager
    from pyrmq.broker.flush_service import FlushService
    from pyrmq.broker.offsets_and_groups import SubscriptionGroupManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.ha.master_service import HAService
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

FAQ_URL = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
# Only plain and committed messages are delayed; half messages are not.
_DELAYABLE = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
# replica_offset of a SYNC_MASTER send that found no slave in a state to take it
_SLAVE_NOT_AVAILABLE = -1
# Request versions from V3_4_9 on carry maxReconsumeTimes on send-back.
V3_4_9 = 121
DLQ_NUMS_PER_GROUP = 1
# plain_send_fields' property names: the three it sets, reads and drops, then those of the
# messages the general path takes (a transaction half, a delay level, a timer message)
_PLAIN_PROPERTY_NAMES = (MessageConst.PROPERTY_CLUSTER, MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
                         MessageConst.PROPERTY_TAGS, MessageConst.PROPERTY_TRANSACTION_PREPARED,
                         MessageConst.PROPERTY_DELAY_TIME_LEVEL, *TIMER_KEYS)

_PUT_STATUS_RESPONSES: dict[PutMessageStatus, tuple[int, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        "msg body length limit 4m, msg properties length limit 32k."),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg properties length limit 32k."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: "
        "the broker's disk is full [{disk}], messages are put to the slave, message store has been shut down, etc."),
    PutMessageStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


class _Keys:
    """extFields names of one header flavour: V1 names, or the one-letter V2 names."""

    __slots__ = ("producer_group", "topic", "default_topic", "default_topic_queue_nums", "queue_id",
                 "sys_flag", "born_timestamp", "flag", "properties", "reconsume_times", "unit_mode", "batch",
                 "plain")

    def __init__(self, names: dict[str, str]) -> None:
        for attr, name in names.items():
            setattr(self, attr, name)
        self.plain = tuple(names[field] for field in SEND_HEADER_FIELDS)   # plain_send_fields' names


_V1_KEYS = _Keys({"producer_group": "producerGroup", "topic": "topic", "default_topic": "defaultTopic",
                  "default_topic_queue_nums": "defaultTopicQueueNums", "queue_id": "queueId",
                  "sys_flag": "sysFlag", "born_timestamp": "bornTimestamp", "flag": "flag",
                  "properties": "properties", "reconsume_times": "reconsumeTimes", "unit_mode": "unitMode",
                  "batch": "batch"})
# SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE carry the V1 header under one-letter names.
_V2_KEYS = _Keys({"producer_group": "a", "topic": "b", "default_topic": "c", "default_topic_queue_nums": "d",
                  "queue_id": "e", "sys_flag": "f", "born_timestamp": "g", "flag": "h", "properties": "i",
                  "reconsume_times": "j", "unit_mode": "k", "batch": "m"})


def _required(header: dict[str, str], name: str) -> str:
    value = header.get(name)
    if value is None or value == "":
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")
    return value


def _required_int(header: dict[str, str], name: str, bits: int = 32) -> int:
    """A number of the Java type of the header field (int unless ``bits=64``): the record packs it."""
    value = _required(header, name)
    try:
        return parse_java_int(value, bits=bits)
    except ValueError:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is not a number") from None


def _optional_int(header: dict[str, str], name: str, default: int) -> int:
    """An optional int; raises ValueError when present and not a Java int in ASCII digits."""
    value = header.get(name)
    return parse_java_int(value, bits=32) if value else default


def required_send_fields(header: dict[str, str], keys: _Keys) -> tuple[str, int, int, int, int]:
    """The send header's required fields, checked as Java does: topic, queueId, sysFlag,
    bornTimestamp, flag (producerGroup must be present too)."""
    get = header.get
    topic, queue_id, sys_flag, born_timestamp, flag = (
        get(keys.topic), get(keys.queue_id), get(keys.sys_flag), get(keys.born_timestamp), get(keys.flag))
    if topic and queue_id and sys_flag and born_timestamp and flag and get(keys.producer_group):
        try:   # every field there (the common case): read at once
            return (topic, parse_java_int(queue_id, bits=32), parse_java_int(sys_flag, bits=32),
                    parse_java_int(born_timestamp), parse_java_int(flag, bits=32))
        except ValueError:
            pass
    # one missing or not a number: the first in Java's order is the one refused
    topic = _required(header, keys.topic)
    _required(header, keys.producer_group)
    return (topic, _required_int(header, keys.queue_id), _required_int(header, keys.sys_flag),
            _required_int(header, keys.born_timestamp, bits=64), _required_int(header, keys.flag))


def _delay_level(properties: dict[str, str]) -> int:
    """Java getDelayTimeLevel, 0 when absent (or, here, not a number)."""
    try:
        return int(properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL, "0"))
    except ValueError:
        return 0


class SendMessageProcessor:
    """Sends and sends-back; receives only the services they use."""

    def __init__(self, *, config: BrokerConfig, store: DefaultMessageStore, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, flush_service: FlushService, stats: BrokerStatsManager,
                 max_delay_level: int, replicas: HAService | None = None,
                 clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.flush_service = flush_service
        # SYNC_MASTER: sends wait for a slave's acknowledgement (None on other roles)
        self.replicas = replicas if config.broker_role is BrokerRole.SYNC_MASTER else None
        self.slave_timeout_s = config.slave_timeout / 1000
        self.stats = stats
        self.max_delay_level = max_delay_level
        self.first_files = FirstFileGate(store)
        self.clock = clock   # wall clock ms: timer messages' delivery times
        self.store_host = (config.broker_ip1, config.listen_port)
        self.cluster_name = config.broker_cluster_name
        self.sync_flush = store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._response_fields = {"MSG_REGION": config.region_id,
                                  "TRACE_ON": "true" if config.trace_on else "false"}

    def process(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred | None:
        header = request.ext_fields or {}
        keys = _V2_KEYS if "b" in header else _V1_KEYS
        # a plain message's fields in one call (almost every send); None: the general path below
        plain = plain_send_fields(header, keys.plain, _PLAIN_PROPERTY_NAMES, self.cluster_name)
        if plain is None:
            topic, queue_id, sys_flag, born_timestamp, flag = required_send_fields(header, keys)
        else:
            topic, queue_id, sys_flag, born_timestamp, flag, properties_string, wait_store, reconsume_times, tags_code = (
                plain)
        topic_config = self._check(request, header, keys, topic, queue_id)
        if isinstance(topic_config, RemotingCommand):
            return topic_config
        if queue_id < 0:
            queue_id = random.randrange(max(1, topic_config.write_queue_nums))
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        body = request.body if request.body is not None else b""
        if plain is not None:
            return self._store(request, channel, MessageExtBrokerInner(
                topic=topic, queue_id=queue_id, flag=flag, body=bytes(body), properties_string=properties_string,
                sys_flag=sys_flag, born_timestamp=born_timestamp, born_host=channel.remote_host_port,
                store_host=self.store_host, reconsume_times=reconsume_times, tags_code=tags_code),
                topic, queue_id, wait_store, None)
        properties = string_to_properties(header.get(keys.properties))
        properties[MessageConst.PROPERTY_CLUSTER] = self.cluster_name
        wait_value = properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
        wait_store = wait_value != "false"
        born_host = channel.remote_host_port
        try:
            reconsume_times = _optional_int(header, keys.reconsume_times, 0)
        except ValueError:
            reconsume_times = 0
        is_batch = header.get(keys.batch, "").lower() == "true"

        if is_batch:
            if MessageSysFlag.transaction_value(sys_flag) != MessageSysFlag.TRANSACTION_NOT_TYPE:
                return request.response(ResponseCode.MESSAGE_ILLEGAL, "batch message does not support transaction")
            if MessageConst.PROPERTY_DELAY_TIME_LEVEL in properties:
                return request.response(ResponseCode.MESSAGE_ILLEGAL, "batch message does not support delay message")
            batch = MessageExtBatch(topic=topic, queue_id=queue_id, flag=flag, body=bytes(body),
                                    properties_string=properties_to_string(properties), sys_flag=sys_flag,
                                    born_timestamp=born_timestamp, born_host=born_host,
                                    store_host=self.store_host, reconsume_times=reconsume_times)
            return self._store(request, channel, batch, topic, queue_id, wait_store, None)
        else:
            is_half = properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED, "").lower() == "true"
            if is_half and self.config.reject_transaction_message:
                return request.response(ResponseCode.NO_PERMISSION,
                                        f"the broker[{self.config.broker_ip1}] sending transaction message is forbidden")
            # As the Java broker: WAIT is not stored (9 bytes saved per message) -- except on a
            # delayed message, whose string is rebuilt after WAIT went back into the map.
            entries_held = len(properties)
            if wait_value is not None:
                del properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK]
            store_topic, store_queue_id = topic, queue_id
            recall_handle = None
            delayable = not is_half and MessageSysFlag.transaction_value(sys_flag) in _DELAYABLE
            if delayable and MessageConst.PROPERTY_DELAY_TIME_LEVEL in properties:
                if _delay_level(properties) > 0:
                    # as Apache 5: a delay level wins, the timer properties go
                    clear_timer_properties(properties)
                if wait_value is not None:
                    properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = wait_value
                parked = redirect_to_schedule(properties, topic, queue_id, self.max_delay_level)
                if parked is not None:
                    store_topic, store_queue_id = parked
                elif wait_value is not None:
                    del properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK]
                entries_held = max(entries_held, len(properties))
            if delayable and store_topic == topic and is_timer_message(properties, topic):
                timer = self._timer(request, properties, topic, queue_id, wait_value)
                if isinstance(timer, RemotingCommand):
                    return timer
                if timer is not None:
                    store_topic, store_queue_id = timer
                    entries_held = max(entries_held, len(properties))
                    recall_handle = recall_handle_for(properties, self.config.broker_name)
            inner = MessageExtBrokerInner(
                topic=store_topic, queue_id=store_queue_id, flag=flag, body=bytes(body),
                properties_string=properties_to_string(properties, entries_held), sys_flag=sys_flag,
                born_timestamp=born_timestamp, born_host=born_host, store_host=self.store_host,
                reconsume_times=reconsume_times,
                tags_code=tags_string_to_tags_code(properties.get(MessageConst.PROPERTY_TAGS)))
            if is_half:
                # Java's map still holds WAIT (put back after the string was written); the half
                # message's string is written again from that map with REAL_TOPIC/REAL_QID.
                if wait_value is not None:
                    properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = wait_value
                inner = half_message(inner, properties)
            more_ext = {"recallHandle": recall_handle} if recall_handle is not None else None
            return self._store(request, channel, inner, topic, queue_id, wait_store, more_ext)

    def _store(self, request: RemotingCommand, channel: Channel, record: MessageExtBrokerInner | MessageExtBatch,
               topic: str, queue_id: int, wait_store: bool,
               more_ext: dict[str, str] | None) -> RemotingCommand | Deferred | None:
        """Put ``record`` and answer; a record whose queue has no file yet waits for the gate's
        worker to create it, behind the sends to that queue already waiting."""
        gated = self.first_files.needs_gate(record.topic, record.queue_id)
        if gated:
            parked = self.first_files.park(
                record.topic, record.queue_id, record.sys_flag,
                lambda: self._put_and_respond(request, None, record, topic, queue_id, wait_store, more_ext))
            if parked is not None:
                return parked
        # not gated: the gate found room for the queue's unit, the store need not look again
        return self._put_and_respond(request, channel, record, topic, queue_id, wait_store, more_ext, not gated)

    def _put_and_respond(self, request: RemotingCommand, channel: Channel | None,
                         record: MessageExtBrokerInner | MessageExtBatch, topic: str, queue_id: int,
                         wait_store: bool, more_ext: dict[str, str] | None,
                         unit_room: bool = False) -> RemotingCommand | Deferred | None:
        if isinstance(record, MessageExtBatch):
            result = self.store.put_messages(record, unit_room)
        else:
            result = self.store.put_message(record, unit_room)
        # counted under the topic stored to: a delayed message's SCHEDULE_TOPIC_XXXX, a half message's
        return self._respond(request, result, record.topic, queue_id, wait_store, self.topics.created_unwritten(topic),
                             more_ext, channel)

    def _timer(self, request: RemotingCommand, properties: dict[str, str], topic: str, queue_id: int,
               wait_value: str | None) -> tuple[str, int] | RemotingCommand | None:
        """A 5.x timer message is parked in the timer topic, or refused (Apache's codes and remarks)."""
        if wait_value is not None:   # the string is rebuilt with WAIT, as for a delay level
            properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = wait_value
        result = transform_timer_message(properties, topic, queue_id, self.store.config, self.clock())
        if result is None or isinstance(result[0], int):
            if wait_value is not None:
                del properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK]
        if result is None:
            return None
        if isinstance(result[0], int):
            code, remark = result
            return request.response(code, str(remark))
        return result[0], int(result[1])

    def _check(self, request: RemotingCommand, header: dict[str, str], keys: _Keys, topic: str, queue_id: int):
        broker = self.config
        if not is_writeable(broker.broker_permission):
            # Apache refuses only order topics here: other producers are steered away by the
            # routes (registered with the broker's permission) and in-flight sends still land
            existing = self.topics.select(topic)
            if existing is not None and existing.order:
                return request.response(ResponseCode.NO_PERMISSION,
                                        f"the broker[{broker.broker_ip1}] sending message is forbidden")
        if self.config.broker_role is BrokerRole.SLAVE:
            # Apache's slave store refuses the put: SERVICE_NOT_AVAILABLE with the put's remark
            return self._respond(request, PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), topic, queue_id, False)
        remark = validate_topic(topic)
        if remark is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            return request.response(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        topic_config = self.topics.select(topic)
        if topic_config is None:
            unit_mode = header.get(keys.unit_mode, "").lower() == "true"
            topic_sys_flag = TopicSysFlag.FLAG_UNIT if unit_mode else 0
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                group = self.groups.find(topic[len(RETRY_GROUP_TOPIC_PREFIX):])
                if group is None:
                    return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                            f"subscription group not exist, {topic}")
                topic_config = self.topics.create_in_send_back(topic, max(1, group.retry_queue_nums))
            else:
                default_topic = header.get(keys.default_topic) or "TBW102"
                try:
                    queue_nums = _optional_int(header, keys.default_topic_queue_nums, 4)
                except ValueError:
                    queue_nums = 4
                topic_config = self.topics.create_in_send(topic, default_topic, queue_nums, topic_sys_flag)
            if topic_config is None:
                return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                        f"topic[{topic}] not exist, apply first please!{FAQ_URL}")
        if not is_writeable(topic_config.perm):
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the topic[{topic}] sending message is forbidden")
        max_queues = max(topic_config.write_queue_nums, topic_config.read_queue_nums)
        if queue_id >= max_queues:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"request queueId[{queue_id}] is illegal, {topic_config.topic_name} "
                                    f"Producer: {header.get(keys.producer_group)}")
        return topic_config

    def _respond(self, request: RemotingCommand, result: PutMessageResult, topic: str, queue_id: int,
                 wait_store: bool, topic_unwritten: bool = False,
                 more_ext: dict[str, str] | None = None,
                 channel: Channel | None = None) -> RemotingCommand | Deferred | None:
        append = result.append_result
        if result.status is not PutMessageStatus.PUT_OK or append is None:
            return self._refusal(request, result.status)
        ext = {"msgId": append.msg_id, "queueId": str(queue_id), "queueOffset": str(append.logics_offset),
               **self._response_fields}
        if more_ext is not None:
            ext.update(more_ext)
        # under the topic stored to (a delayed message's SCHEDULE_TOPIC_XXXX), as Apache counts it
        self.stats.on_put(topic, append.msg_num, append.wrote_bytes)
        next_offset = append.wrote_offset + append.wrote_bytes
        sync = self.sync_flush and wait_store
        replica_offset: int | None = None
        if self.replicas is not None and wait_store:
            # Decided at append time, as Apache's submitReplicaRequest: no slave, or one too far
            # behind, is SLAVE_NOT_AVAILABLE at once (the message is stored all the same).
            if not self.replicas.is_slave_ok(next_offset):
                if not (sync or topic_unwritten):
                    return request.response(ResponseCode.SLAVE_NOT_AVAILABLE, ext_fields=ext)
                replica_offset = _SLAVE_NOT_AVAILABLE
            else:
                replica_offset = next_offset
        if not (sync or topic_unwritten or replica_offset is not None):
            return request.response(ResponseCode.SUCCESS, ext_fields=ext)
        if not (topic_unwritten or replica_offset is not None) and channel is not None and not request.is_oneway:
            # only the flush to wait for: a ticket the group commit answers (None: owed till then)
            return self.flush_service.answer_when_flushed(channel, request, ext, next_offset)

        # SYNC_FLUSH: SEND_OK only once the record is on disk (group commit, off the event loop);
        # SYNC_MASTER: only once a slave has it. The channel awaits the answer without holding up
        # its reader.
        return self._answer_when_durable(request, ext, next_offset if sync else None, replica_offset,
                                         topic_unwritten)

    def _refusal(self, request: RemotingCommand, status: PutMessageStatus) -> RemotingCommand:
        """The answer to a put the store did not take: its code and remark (Apache's)."""
        known = _PUT_STATUS_RESPONSES.get(status)
        code, remark = known if known is not None else (ResponseCode.SYSTEM_ERROR, str(status))
        if status is PutMessageStatus.SERVICE_NOT_AVAILABLE and remark is not None:
            # as Apache's diskUtil(): the last readings of the clean service, no statvfs here
            remark = remark.format(disk=self.store.clean_service.disk_ratios.describe())
        return request.response(code, remark)

    async def _answer_when_durable(self, request: RemotingCommand, ext: dict[str, str], flush_offset: int | None,
                                   replica_offset: int | None, topic_unwritten: bool) -> RemotingCommand:
        # The flush and the slave are awaited as if in parallel (as Apache combines the two
        # futures): the slave's deadline counts from the append.
        replica_deadline = trio.current_time() + self.slave_timeout_s
        # A topic auto-created by this send is written to topics.json first (Apache persists it
        # before answering): after a crash that forgot it, the message would have no route.
        if topic_unwritten and not await self.topics.wait_written():
            return request.response(ResponseCode.SYSTEM_ERROR, "persisting topics.json failed, see the server log")
        code = ResponseCode.SUCCESS
        if flush_offset is not None and not await self.flush_service.wait_flushed(flush_offset):
            code = ResponseCode.FLUSH_DISK_TIMEOUT
        # a failed replica status overrides a failed flush status, as in Apache
        if replica_offset == _SLAVE_NOT_AVAILABLE:
            code = ResponseCode.SLAVE_NOT_AVAILABLE
        elif replica_offset is not None and self.replicas is not None:
            timeout = max(0.0, replica_deadline - trio.current_time())
            if not await self.replicas.wait_replicated(replica_offset, timeout):
                code = ResponseCode.FLUSH_SLAVE_TIMEOUT
        return request.response(code, ext_fields=ext)

    def consumer_send_msg_back(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        """CONSUMER_SEND_MSG_BACK (36): a message the consumer failed goes to %RETRY%<group> with a
        delay, or to %DLQ%<group> once it has been retried too often (spec/codes.md section 4.8)."""
        offset = required_int(request, "offset")
        group = required_group(request, "group")
        delay_level = required_int(request, "delayLevel")
        group_config = self.groups.find(group)
        if group_config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"subscription group not exist, {group}{FAQ_URL}")
        if not is_writeable(self.config.broker_permission):
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the broker[{self.config.broker_ip1}] sending message is forbidden")
        if group_config.retry_queue_nums <= 0:
            return request.response(ResponseCode.SUCCESS)
        if self.config.broker_role is BrokerRole.SLAVE:
            # a slave's commit log holds only what its master sent: its store refuses the put
            return self._respond(request, PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE),
                                 RETRY_GROUP_TOPIC_PREFIX + group, 0, False)
        topic = RETRY_GROUP_TOPIC_PREFIX + group
        queue_id = random.randrange(group_config.retry_queue_nums)
        topic_sys_flag = TopicSysFlag.FLAG_UNIT_SUB if optional_bool(request, "unitMode") else 0
        topic_config = self.topics.create_in_send_back(topic, group_config.retry_queue_nums,
                                                       PERM_WRITE | PERM_READ, topic_sys_flag)
        if not is_writeable(topic_config.perm):
            return request.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        message = self.store.look_message_by_offset(offset)
        if message is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        properties = dict(message.properties)
        properties.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, message.topic)
        properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        max_reconsume = group_config.retry_max_times
        if request.version >= V3_4_9:
            max_reconsume = optional_int(request, "maxReconsumeTimes", max_reconsume)
        if message.reconsume_times >= max_reconsume or delay_level < 0:
            topic = DLQ_GROUP_TOPIC_PREFIX + group
            queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
            self.topics.create_in_send_back(topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ)
            store_topic, store_queue_id = topic, queue_id
        else:
            if delay_level == 0:
                delay_level = 3 + message.reconsume_times
            properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
            clear_timer_properties(properties)
        if not properties.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID):
            properties[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = message.msg_id
        if not topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            store_topic, store_queue_id = redirect_to_schedule(
                properties, topic, queue_id, self.max_delay_level) or (topic, queue_id)
        inner = MessageExtBrokerInner(
            topic=store_topic, queue_id=store_queue_id, flag=message.flag, body=message.body,
            properties_string=properties_to_string(properties), sys_flag=message.sys_flag,
            born_timestamp=message.born_timestamp, born_host=message.born_host, store_host=self.store_host,
            reconsume_times=message.reconsume_times + 1,
            tags_code=tags_string_to_tags_code(properties.get(MessageConst.PROPERTY_TAGS)))
        result = self.store.put_message(inner)
        if result.status is not PutMessageStatus.PUT_OK:
            return request.response(ResponseCode.SYSTEM_ERROR, result.status.name)
        # Apache counts a send-back under the message's first topic, and a retry parked for its
        # delay also as a put to SCHEDULE_TOPIC_XXXX (a %DLQ% or undelayed one not at all)
        self.stats.on_send_back(group, properties[MessageConst.PROPERTY_RETRY_TOPIC])
        if store_topic == SCHEDULE_TOPIC and result.append_result is not None:
            self.stats.on_topic_put(store_topic, 1, result.append_result.wrote_bytes)
        if self.topics.created_unwritten(topic):   # the %RETRY% / %DLQ% topic this call created
            return self._answer_when_durable(request, {}, None, None, True)
        return request.response(ResponseCode.SUCCESS)

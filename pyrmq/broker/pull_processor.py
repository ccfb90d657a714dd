"""PULL_MESSAGE (11) / LITE_PULL_MESSAGE (361) and the long-polling hold service.

A pull that finds nothing new is parked (``PullRequestHoldService``) until a message its
subscription can match reaches the store's dispatch pipeline -- the hold service is one of its
dispatchers, so the wake-up happens within the put that stored the message -- or its suspend
timeout passes; then it is re-run without suspension and answered. As in Apache's
PullRequestHoldService, a message of another tag wakes nobody, and a failure while answering a
held pull answers that pull with SYSTEM_ERROR and a log line; the service keeps running.
Checks and status mapping follow spec/codes.md section 4.5.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from pyrmq.broker.client_manager import SUB_ALL, SubscriptionData
from pyrmq.broker.config import BrokerConfig, BrokerRole
from pyrmq.broker.consumer_filter import ConsumerFilterData, ConsumerFilterManager, build_filter_data, is_tag_type
from pyrmq.broker.filter_bitmap import bitmap_says_no
from pyrmq.broker.offsets_and_groups import required_group
from pyrmq.broker.topic_config import is_readable
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.message import MessageConst, RecordInfo, property_value, record_properties_string, \
    string_to_properties
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.common.guard import ServiceGuard
from pyrmq.filter import FilterParseError
from pyrmq.filter.bloom import BloomFilter
from pyrmq.remoting.channel import Channel, after_answers
from pyrmq.remoting.dispatch import RequestError
from pyrmq.remoting.headers import optional_int, optional_str, required_int, required_str
from pyrmq.store.message_store import GetMessageStatus
from pyrmq.store.model import CqExtUnit
from pyrmq.codec.system_topics import RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from pyrmq.broker.client_manager import ConsumerManager
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager, SubscriptionGroupConfig, SubscriptionGroupManager
    from pyrmq.broker.broker_stats import BrokerStatsManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
MASTER_ID = 0
# Held pulls are checked for expiry this often; arrivals wake them at once.
HOLD_CHECK_INTERVAL_S = 0.2
# The pulls of closed connections are dropped this often (a closed channel is never answered).
CLOSED_SWEEP_INTERVAL_S = 5.0
FAQ_URL = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_TAGS = MessageConst.PROPERTY_TAGS + "\x01"

# A pull that found nothing with one of these statuses got an answer that depends only on its
# queue's offsets, or on its queue having no file yet (besides the configs _QuietPull's basis holds).
_QUIET_STATUSES = frozenset({GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.NO_MESSAGE_IN_QUEUE,
                             GetMessageStatus.NO_MATCHED_LOGIC_QUEUE})

_STATUS_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}

# The statuses whose next offset the store corrects -- on a master, or a slave with offsetCheckInSlave.
_CORRECTED_STATUSES = frozenset({
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_TOO_SMALL,
    GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.OFFSET_FOUND_NULL})


def _int32(value: int) -> int:
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def suggest_which_broker_id(slave_read_enable: bool, in_disk: bool, group: SubscriptionGroupConfig) -> int:
    """The broker id a pull answer sends the consumer to next (Apache's suggestWhichBrokerId):
    the master unless ``slaveReadEnable``; then the group's ``whichBrokerWhenConsumeSlowly`` when
    the data pulled is no longer in memory (``accessMessageInMemoryMaxRatio``), else its ``brokerId``.
    """
    if not slave_read_enable:
        return MASTER_ID
    return group.which_broker_when_consume_slowly if in_disk else group.broker_id


class TagMessageFilter:
    """Tag filter: hash codes against the consume queue, then the exact tag on the record."""

    __slots__ = ("subscription", "filters")

    def __init__(self, subscription: SubscriptionData | None) -> None:
        self.subscription = subscription
        self.filters = subscription is not None and subscription.sub_string != SUB_ALL \
            and subscription.expression_type == "TAG" and not subscription.class_filter_mode

    def is_matched_by_consume_queue(self, tags_code: int, ext_unit: CqExtUnit | None = None) -> bool:
        if not self.filters:
            return True
        return _int32(tags_code) in self.subscription.code_set

    def is_matched_by_properties(self, properties: str) -> bool:
        """Whether a just-dispatched record's properties match (always, for tags: the code did)."""
        return True

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        if not self.filters:
            return True
        # A hash collision must not deliver another tag's message. Only the property string is
        # read: the body is neither copied nor decoded.
        try:
            properties = record_properties_string(record)
        except ValueError:   # MessageFormatError or bad UTF-8: not a record this filter matches
            return False
        return property_value(properties, _TAGS) in self.subscription.tags_set


def _record_properties(record: memoryview) -> dict[str, str] | None:
    """The record's properties, read without touching its body (None: not a readable record)."""
    try:
        return string_to_properties(record_properties_string(record))
    except ValueError:   # MessageFormatError or bad UTF-8
        return None


# An expression reading at most this many properties looks each up in the properties string
# (one rfind) instead of parsing all of them into a dict: a few times faster per record.
_LOOKUP_AT_MOST = 4


class ExpressionMessageFilter:
    """SQL92 filter: every unit passes the consume queue (the bloom bitmap, when computed, may
    reject it there); the record's properties are evaluated and only an exact TRUE is delivered."""

    __slots__ = ("filter_data", "_lookups", "bloom")

    def __init__(self, filter_data: ConsumerFilterData | None, bloom: BloomFilter | None = None) -> None:
        self.filter_data = filter_data
        self.bloom = bloom   # the broker's bloom filter: the ext unit's bitmap is read with it
        names = () if filter_data is None else filter_data.expression.property_names
        self._lookups = [(n, n + "\x01") for n in names] if len(names) <= _LOOKUP_AT_MOST else None

    def _properties(self, properties: str) -> dict[str, str]:
        if self._lookups is None:
            return string_to_properties(properties)
        found = {}
        for name, key in self._lookups:
            value = property_value(properties, key)
            if value is not None:
                found[name] = value
        return found

    def is_matched_by_consume_queue(self, tags_code: int, ext_unit: CqExtUnit | None = None) -> bool:
        data = self.filter_data
        if ext_unit is None or data is None or self.bloom is None:
            return True
        return not bitmap_says_no(self.bloom, data.bloom_filter_data, data.born_time, ext_unit)

    def is_matched_by_properties(self, properties: str) -> bool:
        """Whether a record's properties string matches (a dispatched record waking a held pull)."""
        if self.filter_data is None:
            return True
        return self.filter_data.expression.matches(self._properties(properties))

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        if self.filter_data is None:
            return True
        try:
            properties = record_properties_string(record)
        except ValueError:   # MessageFormatError or bad UTF-8: not a record this filter matches
            return False
        return self.filter_data.expression.matches(self._properties(properties))


class RetryExpressionMessageFilter(ExpressionMessageFilter):
    """``filterSupportRetry``: a message of ``%RETRY%<group>`` is evaluated with the group's filter
    of its original topic (its RETRY_TOPIC property); no such filter lets it through."""

    __slots__ = ("group", "filters")

    def __init__(self, group: str, filters: ConsumerFilterManager) -> None:
        super().__init__(None)
        self.group = group
        self.filters = filters

    def _matches(self, properties: dict[str, str]) -> bool:
        real_topic = properties.get(MessageConst.PROPERTY_RETRY_TOPIC)
        data = None if real_topic is None else self.filters.get(real_topic, self.group)
        return data is None or data.expression.matches(properties)

    def is_matched_by_properties(self, properties: str) -> bool:
        return self._matches(string_to_properties(properties))

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        properties = _record_properties(record)
        return properties is not None and self._matches(properties)


MessageFilter = TagMessageFilter | ExpressionMessageFilter


@dataclass(slots=True)
class _QuietPull:
    """What a held tag pull's answer depends on, captured when it was suspended. While the queue
    still spans the same offsets and the basis (configs, subscription) is the same, re-running the
    pull at expiry -- as Apache's executeRequestWhenWakeup does -- would answer exactly this
    status and ext again; the hold service answers with them and skips the re-run, most of what
    an idle long-polling consumer costs the broker."""
    group: str
    topic: str
    queue_id: int
    by_heartbeat: bool         # the subscription is the heartbeat's, not the request's
    basis: tuple[object, ...]
    status: GetMessageStatus
    min_offset: int
    max_offset: int
    ext: dict[str, str]


@dataclass(slots=True)
class _HeldPull:
    channel: Channel
    request: RemotingCommand
    offset: int
    deadline: float            # trio clock
    message_filter: MessageFilter
    quiet: _QuietPull | None = None


class PullRequestHoldService:
    """Held pulls per (topic, queueId); a dispatcher of the store's pipeline.

    A queue's held pulls are a dict by sequence number (O(1) removal, arrival order); their
    deadlines are also in one heap, so an expiry check costs the pulls that expire, not the ones
    held (ten thousand idle consumers would otherwise be scanned five times a second). A pull
    answered by an arrival or dropped with its connection leaves its heap entry behind; the heap
    is rebuilt when such entries outnumber the held pulls.

    A pull woken by a record is answered in the step that dispatched it -- after the store's
    dispatchers, so the record is in its consume queue and index already -- not by a task woken
    for it: one task switch less per message (Apache hands it to its pull executor from the reput
    thread). When a reader's batch of sends woke it, it is answered once the batch's answers are
    written (``after_answers``): the senders do not wait for the pull's work, and the answer holds
    every record of the batch."""

    def __init__(self, processor: PullMessageProcessor) -> None:
        self.processor = processor
        self._held: dict[tuple[str, int], dict[int, _HeldPull]] = {}
        self._deadlines: list[tuple[float, int, tuple[str, int]]] = []   # (deadline, seq, key)
        self._seq = 0
        # Woken pulls waiting for the sends' answers of the reader's batch to be written first
        # (after_answers); None when none wait.
        self._woken: list[_HeldPull] | None = None
        # held pulls answered because a matching message arrived (statistics, tests)
        self.wakeups = 0
        # held pulls answered at expiry from what they found when suspended (tests)
        self.quiet_answers = 0

    def statistics(self) -> dict[str, int]:
        return {"held": sum(len(v) for v in self._held.values()), "wakeups": self.wakeups}

    def suspend(self, key: tuple[str, int], held: _HeldPull) -> None:
        self._seq += 1
        self._held.setdefault(key, {})[self._seq] = held
        heapq.heappush(self._deadlines, (held.deadline, self._seq, key))

    def dispatch(self, request: RecordInfo) -> None:
        """Called for every dispatched record: O(1) when nobody waits on its queue."""
        key = (request.topic, request.queue_id)
        held = self._held.get(key)
        if held is None:
            return
        newest = request.queue_offset + 1
        woken = [seq for seq, pull in held.items()
                 if newest > pull.offset and pull.message_filter.is_matched_by_consume_queue(request.tags_code)
                 and pull.message_filter.is_matched_by_properties(request.properties_string)]
        if woken:
            ready = [held.pop(seq) for seq in woken]
            if not held:
                del self._held[key]
            self.wakeups += len(ready)
            if self._woken is not None:
                self._woken.extend(ready)
                return
            self._woken = ready
            if not after_answers(self._answer_woken):   # not from a reader's batch (a timer, a group commit)
                self._answer_woken()

    def _answer_woken(self) -> None:
        pulls, self._woken = self._woken or [], None
        try:
            self._answer_all(pulls)
        except Exception:   # a consumer's answer must never fail the put that dispatched the record
            log.exception("answering %d woken pulls failed", len(pulls))

    def dispatch_many(self, requests: Sequence[RecordInfo]) -> None:
        """A batch's records: nothing per record when nobody waits, else each record whose queue
        has held pulls, as :meth:`dispatch`."""
        held = self._held
        if held:
            for request in requests:
                if (request.topic, request.queue_id) in held:
                    self.dispatch(request)

    async def run(self) -> None:
        """Answer the held pulls that expire; forget those of closed connections."""
        guard = ServiceGuard("held pull expiry", log)
        sweep_at = trio.current_time() + CLOSED_SWEEP_INTERVAL_S
        while True:
            await trio.sleep(HOLD_CHECK_INTERVAL_S)
            with guard.round():
                now = trio.current_time()
                self._expire(now)
                if now >= sweep_at:
                    sweep_at = now + CLOSED_SWEEP_INTERVAL_S
                    self._drop_closed()

    def _expire(self, now: float) -> None:
        deadlines = self._deadlines
        expired = []
        while deadlines and deadlines[0][0] <= now:
            _, seq, key = heapq.heappop(deadlines)
            held = self._held.get(key)
            pull = None if held is None else held.pop(seq, None)
            if pull is None:
                continue   # answered by an arrival, or dropped with its connection
            if not held:
                del self._held[key]
            expired.append(pull)
        self._answer_all(expired)

    def _drop_closed(self) -> None:
        """Forget the pulls of closed connections; rebuild the heap once it is mostly stale."""
        for key, held in list(self._held.items()):
            closed = [seq for seq, pull in held.items() if pull.channel.closed]
            for seq in closed:
                del held[seq]
            if not held:
                del self._held[key]
        if len(self._deadlines) > 2 * self.statistics()["held"] + 1024:
            self._deadlines = [(pull.deadline, seq, key) for key, held in self._held.items()
                               for seq, pull in held.items()]
            heapq.heapify(self._deadlines)

    def _answer_all(self, pulls: list[_HeldPull]) -> None:
        """Answer these pulls, one write per connection: pulls placed together (a client's
        consumers start at once) expire together, a hundred on one connection."""
        if len(pulls) == 1:
            self._answer(pulls[0])
        elif pulls:
            Channel.send_responses((pull.channel, answer) for pull in pulls
                                   if (answer := self._answer_of(pull)) is not None)

    def _answer(self, pull: _HeldPull) -> None:
        answer = self._answer_of(pull)
        if answer is not None:
            pull.channel.send_response(answer)

    def _answer_of(self, pull: _HeldPull) -> RemotingCommand | None:
        """Re-run a held pull without suspension: its answer (None for a closed connection); never raises."""
        if pull.channel.closed:
            return None
        request = pull.request
        try:
            if pull.quiet is not None:
                response = self.processor.quiet_answer(request, pull.quiet)
                if response is not None:
                    self.quiet_answers += 1
                    return response
            response = self.processor.process_request(pull.channel, request, allow_suspend=False)
        except RequestError as exc:
            response = request.response(exc.code, exc.remark)
        except Exception as exc:  # one pull's failure must not stop the others or the broker
            log.exception("answering a held pull from %s failed", pull.channel.remote_addr)
            response = request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        return response

    def wake_all(self) -> None:
        """Answer every held pull now (shutdown)."""
        held, self._held = self._held, {}
        self._deadlines = []
        self._answer_all([p for pulls in held.values() for p in pulls.values()])


class PullMessageProcessor:
    """Answers pulls from the store; receives only the services a pull needs."""

    def __init__(self, *, config: BrokerConfig, store: DefaultMessageStore, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, consumers: ConsumerManager,
                 offsets: ConsumerOffsetManager, stats: BrokerStatsManager, filters: ConsumerFilterManager) -> None:
        self.config = config
        self.filters = filters
        self.store = store
        self.topics = topics
        self.groups = groups
        self.consumers = consumers
        self.offsets = offsets
        self.stats = stats
        self.is_slave = config.broker_role is BrokerRole.SLAVE
        self.hold_service = PullRequestHoldService(self)

    def process(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return self.process_request(channel, request, allow_suspend=True)

    def process_request(self, channel: Channel, request: RemotingCommand,
                        allow_suspend: bool) -> RemotingCommand | None:
        config = self.config
        group = required_group(request)
        topic = required_str(request, "topic")
        queue_id = required_int(request, "queueId")
        queue_offset = required_int(request, "queueOffset")
        max_msg_nums = required_int(request, "maxMsgNums")
        sys_flag = required_int(request, "sysFlag")
        commit_offset = required_int(request, "commitOffset")
        suspend_timeout_ms = required_int(request, "suspendTimeoutMillis")
        sub_version = optional_int(request, "subVersion", 0) or 0

        if not is_readable(config.broker_permission):
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the broker[{config.broker_ip1}] pulling message is forbidden")
        group_config = self.groups.find(group)
        if group_config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"subscription group [{group}] does not exist, {FAQ_URL}")
        if not group_config.consume_enable:
            return request.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        topic_config = self.topics.select(topic)
        if topic_config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"topic[{topic}] not exist, apply first please! {FAQ_URL}")
        if not is_readable(topic_config.perm):
            return request.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if queue_id < 0 or queue_id >= topic_config.read_queue_nums:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                                    f"[{topic_config.read_queue_nums}] consumer:[{channel.remote_addr}]")

        filter_data: ConsumerFilterData | None = None
        if sys_flag & FLAG_SUBSCRIPTION:
            expression_type = optional_str(request, "expressionType", "TAG") or "TAG"
            sub_string = optional_str(request, "subscription")
            subscription = SubscriptionData.build(topic, sub_string, sub_version, expression_type)
            if not is_tag_type(expression_type):
                if not sub_string:   # Apache's FilterAPI.build refuses an empty expression
                    return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                            f"parse the consumer's subscription failed: Expression can't be null! "
                                            f"{expression_type}")
                if not config.enable_property_filter:
                    return request.response(ResponseCode.SYSTEM_ERROR,
                                            f"The broker does not support consumer to filter message by {expression_type}")
                try:
                    filter_data = build_filter_data(topic, group, sub_string, expression_type, sub_version)
                except FilterParseError as exc:
                    return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                            f"parse the consumer's subscription failed: {exc.message}")
        else:
            group_info = self.consumers.groups.get(group)
            if group_info is None:
                return request.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                        f"the consumer's group info not exist{FAQ_URL}")
            if not group_config.consume_broadcast_enable and group_info.message_model == "BROADCASTING":
                return request.response(ResponseCode.NO_PERMISSION,
                                        f"the consumer group[{group}] can not consume by broadcast way")
            subscription = group_info.subscriptions.get(topic)
            if subscription is None:
                return request.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                        f"the consumer's subscription not exist{FAQ_URL}")
            if subscription.sub_version < sub_version:
                return request.response(ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                        "the consumer's subscription not latest")
            if not is_tag_type(subscription.expression_type):
                filter_data = self.filters.get(topic, group)
                if filter_data is None:
                    return request.response(ResponseCode.FILTER_DATA_NOT_EXIST,
                                            "The broker's consumer filter data is not exist!Your expression may be wrong!")
                if filter_data.client_version < sub_version:
                    return request.response(ResponseCode.FILTER_DATA_NOT_LATEST,
                                            "the consumer's consumer filter data not latest")
                if not config.enable_property_filter:
                    return request.response(
                        ResponseCode.SYSTEM_ERROR,
                        f"The broker does not support consumer to filter message by {subscription.expression_type}")

        message_filter: MessageFilter
        if config.filter_support_retry and topic.startswith(RETRY_GROUP_TOPIC_PREFIX) \
                and not subscription.class_filter_mode:
            message_filter = RetryExpressionMessageFilter(topic[len(RETRY_GROUP_TOPIC_PREFIX):], self.filters)
        elif filter_data is not None and not subscription.class_filter_mode:
            message_filter = ExpressionMessageFilter(filter_data, self.filters.bloom)
        else:
            message_filter = TagMessageFilter(subscription)
        started = time.monotonic_ns()
        result = self.store.get_message(group, topic, queue_id, queue_offset, max_msg_nums, message_filter)
        status = result.status
        if self.is_slave and status in _CORRECTED_STATUSES and not self.store.config.offset_check_in_slave:
            # Apache's nextOffsetCorrection: a slave keeps the consumer's offset (its queue may lag)
            result.next_begin_offset = queue_offset
        if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            code = ResponseCode.PULL_OFFSET_MOVED if queue_offset != 0 else ResponseCode.PULL_NOT_FOUND
        else:
            code = _STATUS_CODES.get(status, ResponseCode.SYSTEM_ERROR)
        suggest = suggest_which_broker_id(config.slave_read_enable, result.suggest_pulling_from_slave, group_config)
        if code == ResponseCode.PULL_OFFSET_MOVED and self.is_slave and not self.store.config.offset_check_in_slave:
            # A slave's queues may only lag the master's: the consumer retries (Apache's "none
            # correction"), pointed at the group's broker, rather than jumping its offset.
            log.warning("PULL_OFFSET_MOVED: none correction. topic=%s, group=%s, requestOffset=%d, suggestBrokerId=%d",
                        topic, group, queue_offset, group_config.broker_id)
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            suggest = group_config.broker_id
        ext = {"nextBeginOffset": str(result.next_begin_offset), "minOffset": str(result.min_offset),
               "maxOffset": str(result.max_offset), "suggestWhichBrokerId": str(suggest)}

        response: RemotingCommand | None
        if code == ResponseCode.SUCCESS:
            # GROUP_GET_LATENCY: Apache times copying the messages to the heap; pyrmq hands out
            # mmap slices, so this is the store read
            self.stats.on_get(group, topic, queue_id, result.message_count, result.buffer_total_size,
                              (time.monotonic_ns() - started) // 1_000_000)
            # The mmap slices go to the socket as they are (one gather-write), never joined.
            response = request.response(code, status.name, ext, result.buffers)
        elif code == ResponseCode.PULL_NOT_FOUND and allow_suspend and sys_flag & FLAG_SUSPEND:
            timeout_ms = suspend_timeout_ms if config.long_polling_enable else config.short_polling_time_mills
            quiet = None
            if status in _QUIET_STATUSES and type(message_filter) is TagMessageFilter:
                by_heartbeat = not sys_flag & FLAG_SUBSCRIPTION
                quiet = _QuietPull(group, topic, queue_id, by_heartbeat, self._basis(group, topic, by_heartbeat),
                                   status, result.min_offset, result.max_offset, ext)
            self.hold_service.suspend((topic, queue_id), _HeldPull(
                channel, request, queue_offset, trio.current_time() + timeout_ms / 1000, message_filter, quiet))
            response = None
        else:
            response = request.response(code, status.name, ext)

        if allow_suspend and sys_flag & FLAG_COMMIT_OFFSET and not self.is_slave:
            self.offsets.commit_offset(group, topic, queue_id, commit_offset)
        return response

    def _basis(self, group: str, topic: str, by_heartbeat: bool) -> tuple[object, ...]:
        """Everything besides the request and the queue's offsets that a tag pull's checks and
        answer read. Configs and subscriptions are replaced, never changed in place, so their
        identity stands for their content; the broker's settings are compared by value."""
        config = self.config
        info = self.consumers.groups.get(group) if by_heartbeat else None
        return (self.groups.table.get(group), self.topics.select(topic), info,
                None if info is None else info.message_model,
                None if info is None else info.subscriptions.get(topic),
                config.broker_permission, config.slave_read_enable, config.filter_support_retry,
                self.store.config.offset_check_in_slave)

    def quiet_answer(self, request: RemotingCommand, quiet: _QuietPull) -> RemotingCommand | None:
        """The answer re-running a held pull would give, when nothing it depends on has changed
        since it was suspended; None when something has (the pull must be re-run)."""
        if self._basis(quiet.group, quiet.topic, quiet.by_heartbeat) != quiet.basis \
                or not self.store.repeat_miss(quiet.topic, quiet.queue_id, quiet.status, quiet.min_offset,
                                          quiet.max_offset):
            return None
        # ext is this pull's own: a held pull is answered once
        return request.response(ResponseCode.PULL_NOT_FOUND, quiet.status.name, quiet.ext)

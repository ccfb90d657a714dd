"""PULL_MESSAGE (11) / LITE_PULL_MESSAGE (361) and the long-polling hold service.

A pull that finds nothing new is parked (``PullRequestHoldService``) until a message for its
queue is dispatched -- the store's dispatch callback wakes it within the same event-loop turn --
or its suspend timeout passes; then it is re-run without suspension and answered.
Checks and status mapping follow spec/codes.md section 4.5.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from pyrmq.broker.client_manager import SUB_ALL, SubscriptionData
from pyrmq.broker.topic_config import is_readable
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.message import MessageConst, MessageFormatError, decode_message
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.headers import optional_int, optional_str, required_int, required_str
from pyrmq.store.message_store import GetMessageStatus

if TYPE_CHECKING:
    from pyrmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
MASTER_ID = 0
# Held pulls are checked for expiry this often; arrivals wake them at once.
HOLD_CHECK_INTERVAL_S = 0.2
FAQ_URL = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

_STATUS_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def _int32(value: int) -> int:
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000


class TagMessageFilter:
    """Tag filter: hash codes against the consume queue, then the exact tag on the record."""

    __slots__ = ("subscription",)

    def __init__(self, subscription: SubscriptionData | None) -> None:
        self.subscription = subscription

    def _filters(self) -> bool:
        sub = self.subscription
        return sub is not None and sub.sub_string != SUB_ALL and sub.expression_type == "TAG" \
            and not sub.class_filter_mode

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        if not self._filters():
            return True
        return _int32(tags_code) in self.subscription.code_set

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        if not self._filters():
            return True
        try:
            message, _ = decode_message(record)
        except MessageFormatError:
            return False
        # A hash collision must not deliver another tag's message.
        return message.properties.get(MessageConst.PROPERTY_TAGS) in self.subscription.tags_set


@dataclass(slots=True)
class _HeldPull:
    channel: Channel
    request: RemotingCommand
    offset: int
    deadline: float
    message_filter: TagMessageFilter


class PullRequestHoldService:
    def __init__(self, processor: PullMessageProcessor) -> None:
        self.processor = processor
        self._held: dict[tuple[str, int], list[_HeldPull]] = {}
        self._arrived: set[tuple[str, int]] = set()
        self._wake = trio.Event()

    def suspend(self, key: tuple[str, int], held: _HeldPull) -> None:
        self._held.setdefault(key, []).append(held)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Called by the store for every dispatched message: must stay O(1) when nobody waits."""
        key = (topic, queue_id)
        if key in self._held:
            self._arrived.add(key)
            self._wake.set()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._expiry_loop)
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                arrived, self._arrived = self._arrived, set()
                for key in arrived:
                    self._check(key, expired_only=False)

    async def _expiry_loop(self) -> None:
        while True:
            await trio.sleep(HOLD_CHECK_INTERVAL_S)
            for key in list(self._held):
                self._check(key, expired_only=True)

    def _check(self, key: tuple[str, int], expired_only: bool) -> None:
        held = self._held.pop(key, None)
        if not held:
            return
        store = self.processor.store
        max_offset = store.get_max_offset_in_queue(*key)
        now = time.monotonic()
        keep = []
        for pull in held:
            if pull.channel.closed:
                continue
            if (not expired_only and max_offset > pull.offset) or now >= pull.deadline:
                response = self.processor.process_request(pull.channel, pull.request, allow_suspend=False)
                if response is not None:
                    pull.channel.send_response(response)
            else:
                keep.append(pull)
        if keep:
            self._held.setdefault(key, []).extend(keep)

    def wake_all(self) -> None:
        """Answer every held pull now (shutdown)."""
        for key in list(self._held):
            held = self._held.pop(key)
            for pull in held:
                if not pull.channel.closed:
                    response = self.processor.process_request(pull.channel, pull.request, allow_suspend=False)
                    if response is not None:
                        pull.channel.send_response(response)


class PullMessageProcessor:
    def __init__(self, ctl: BrokerController) -> None:
        self.ctl = ctl
        self.store = ctl.store
        self.hold_service = PullRequestHoldService(self)

    def process(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return self.process_request(channel, request, allow_suspend=True)

    def process_request(self, channel: Channel, request: RemotingCommand,
                        allow_suspend: bool) -> RemotingCommand | None:
        ctl = self.ctl
        group = required_str(request, "consumerGroup")
        topic = required_str(request, "topic")
        queue_id = required_int(request, "queueId")
        queue_offset = required_int(request, "queueOffset")
        max_msg_nums = required_int(request, "maxMsgNums")
        sys_flag = required_int(request, "sysFlag")
        commit_offset = required_int(request, "commitOffset")
        suspend_timeout_ms = required_int(request, "suspendTimeoutMillis")
        sub_version = optional_int(request, "subVersion", 0) or 0

        if not is_readable(ctl.config.broker_permission):
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the broker[{ctl.config.broker_ip1}] pulling message is forbidden")
        group_config = ctl.subscription_group_manager.find(group)
        if group_config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"subscription group [{group}] does not exist, {FAQ_URL}")
        if not group_config.consume_enable:
            return request.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        topic_config = ctl.topic_config_manager.select(topic)
        if topic_config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"topic[{topic}] not exist, apply first please! {FAQ_URL}")
        if not is_readable(topic_config.perm):
            return request.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if queue_id < 0 or queue_id >= topic_config.read_queue_nums:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                                    f"[{topic_config.read_queue_nums}] consumer:[{channel.remote_addr}]")

        if sys_flag & FLAG_SUBSCRIPTION:
            expression_type = optional_str(request, "expressionType", "TAG")
            if expression_type != "TAG":
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        "The broker does not support consumer to filter message by SQL92")
            subscription = SubscriptionData.build(topic, optional_str(request, "subscription"),
                                                  sub_version, expression_type)
        else:
            group_info = ctl.consumer_manager.groups.get(group)
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
            if subscription.expression_type != "TAG":
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        "The broker does not support consumer to filter message by SQL92")

        message_filter = TagMessageFilter(subscription)
        result = self.store.get_message(group, topic, queue_id, queue_offset, max_msg_nums, message_filter)
        status = result.status
        if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            code = ResponseCode.PULL_OFFSET_MOVED if queue_offset != 0 else ResponseCode.PULL_NOT_FOUND
        else:
            code = _STATUS_CODES.get(status, ResponseCode.SYSTEM_ERROR)
        ext = {"nextBeginOffset": str(result.next_begin_offset), "minOffset": str(result.min_offset),
               "maxOffset": str(result.max_offset),
               "suggestWhichBrokerId": str(group_config.which_broker_when_consume_slowly
                                           if result.suggest_pulling_from_slave else MASTER_ID)}

        response: RemotingCommand | None
        if code == ResponseCode.SUCCESS:
            ctl.stats.get_count += result.message_count
            # The mmap slices go to the socket as they are (one gather-write), never joined.
            response = request.response(code, status.name, ext, result.buffers)
        elif code == ResponseCode.PULL_NOT_FOUND and allow_suspend and sys_flag & FLAG_SUSPEND:
            timeout_ms = suspend_timeout_ms if ctl.config.long_polling_enable else ctl.config.short_polling_time_mills
            self.hold_service.suspend((topic, queue_id), _HeldPull(
                channel, request, queue_offset, time.monotonic() + timeout_ms / 1000, message_filter))
            response = None
        else:
            response = request.response(code, status.name, ext)

        if allow_suspend and sys_flag & FLAG_COMMIT_OFFSET and not ctl.is_slave:
            ctl.consumer_offset_manager.commit_offset(group, topic, queue_id, commit_offset)
        return response

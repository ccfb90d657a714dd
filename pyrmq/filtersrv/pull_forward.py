"""Class-filter pulls (PULL_MESSAGE with the CLASS_FILTER flag, sent by consumers to a
FilterServer): pull the same queue from the broker with the FilterServer's own group, ask the
group's filter class about each message, and answer with the accepted records -- the stored
message layout, byte for byte as the broker sent them -- under the broker's response header.

As Apache's FilterServer (4.2.0 filtersrv DefaultRequestProcessor): no class for (group, topic) is
SYSTEM_ERROR "Find Filter class failed, not registered"; a batch the class rejects entirely is
PULL_RETRY_IMMEDIATELY with the broker's next offset; every other broker answer is passed on;
suggestWhichBrokerId is always the master. Unlike Apache, a filter that throws or times out rejects
that one message (logged) instead of failing the pull.
"""

from __future__ import annotations

import logging

import trio

from pyrmq.codec.body_compression import BodyInflateError, inflate_body
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import decode_message
from pyrmq.codec.message_props import properties_to_string
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.filtersrv.class_manager import FilterClassManager
from pyrmq.filtersrv.config import FILTERSRV_CONSUMER_GROUP
from pyrmq.remoting.channel import Channel, ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.headers import optional_int, required_int, required_str

log = logging.getLogger(__name__)

FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
# Apache's DefaultMQPullConsumer brokerSuspendMaxTimeMillis: a held pull waits at most this long.
MAX_SUSPEND_MS = 20_000
# A filter sees at most this much of a compressed body once inflated.
MAX_INFLATED_BODY = 16 * 1024 * 1024


def _filter_body(body: bytes, sys_flag: int) -> bytes:
    # a body that cannot be inflated reaches the filter as stored
    try:
        return inflate_body(body, sys_flag, MAX_INFLATED_BODY)
    except BodyInflateError:
        return body


class PullForwarder:
    def __init__(self, client: RemotingClient, classes: FilterClassManager, broker_addr: str) -> None:
        self.client = client
        self.classes = classes
        self.broker_addr = broker_addr
        self.accepted = 0
        self.rejected = 0
        self.failed = 0

    def process(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | object:
        group = required_str(request, "consumerGroup")
        topic = required_str(request, "topic")
        filter_class = self.classes.find(group, topic)
        if filter_class is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "Find Filter class failed, not registered")
        return self._forward(request, group, topic)

    async def _forward(self, request: RemotingCommand, group: str, topic: str) -> RemotingCommand:
        queue_id = required_int(request, "queueId")
        sys_flag = required_int(request, "sysFlag")
        suspend_ms = min(optional_int(request, "suspendTimeoutMillis", 0) or 0, MAX_SUSPEND_MS)
        flags = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if sys_flag & FLAG_SUSPEND else 0)
        header = {"consumerGroup": FILTERSRV_CONSUMER_GROUP, "topic": topic, "queueId": str(queue_id),
                  "queueOffset": str(required_int(request, "queueOffset")),
                  "maxMsgNums": str(required_int(request, "maxMsgNums")), "sysFlag": str(flags),
                  "commitOffset": "0", "suspendTimeoutMillis": str(suspend_ms), "subscription": "*",
                  "subVersion": "0", "expressionType": "TAG"}
        try:
            answer = await self.client.invoke(self.broker_addr, make_request(RequestCode.PULL_MESSAGE, header),
                                              suspend_ms / 1000 + 10)
        except (OSError, trio.TooSlowError, RemotingTimeoutError, ChannelClosedError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"Pull Callback Exception, {exc}")
        ext = {k: v for k, v in (answer.ext_fields or {}).items()
               if k in ("nextBeginOffset", "minOffset", "maxOffset")}
        ext["suggestWhichBrokerId"] = "0"
        if answer.code != ResponseCode.SUCCESS:
            return request.response(answer.code, answer.remark, ext)
        body = answer.body if isinstance(answer.body, (bytes, bytearray, memoryview)) else b"".join(answer.body or [])
        kept = await self._filter(bytes(body), group, topic)
        if not kept:
            return request.response(ResponseCode.PULL_RETRY_IMMEDIATELY, None, ext)
        return request.response(ResponseCode.SUCCESS, None, ext, kept)

    async def _filter(self, body: bytes, group: str, topic: str) -> list[memoryview]:
        filter_class = self.classes.find(group, topic)
        if filter_class is None:   # replaced or dropped meanwhile
            return []
        view = memoryview(body)
        spans: list[tuple[int, int]] = []
        messages: list[dict[str, object]] = []
        pos = 0
        while pos < len(body):
            message, end = decode_message(body, pos)
            spans.append((pos, end))
            messages.append(dict(
                consumer_group=group, topic=message.topic, queue_id=message.queue_id,
                queue_offset=message.queue_offset, commit_log_offset=message.commit_log_offset,
                sys_flag=message.sys_flag, born_timestamp=message.born_timestamp,
                store_timestamp=message.store_timestamp, reconsume_times=message.reconsume_times,
                flag=message.flag, properties=properties_to_string(message.properties),
                body=_filter_body(message.body, message.sys_flag)))
            pos = end
        replies = await filter_class.worker.match_batch(messages)
        kept: list[memoryview] = []
        for (start, end), message, reply in zip(spans, messages, replies):
            if reply.accepted:
                self.accepted += 1
                kept.append(view[start:end])
            elif reply.detail:
                self.failed += 1
                log.warning("filter %s rejected message %s/%s@%s: %s", filter_class.class_name, topic,
                            message["queue_id"], message["queue_offset"], reply.detail)
            else:
                self.rejected += 1
        return kept

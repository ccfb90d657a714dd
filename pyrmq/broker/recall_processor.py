"""RECALL_MESSAGE (370, Apache 5.3): cancel a timer message that is not delivered yet.

A timer message's send answer carries a recall handle (``recallHandle``: URL-safe base64 of
``v1 <topic> <brokerName> <TIMER_OUT_MS + 1> <UNIQ_KEY>``).  A recall with it stores a marker
message (TIMER_DEL_UNIQKEY = ``<topic>+<UNIQ_KEY>``, due at the same time) through the timer: it
lands in the same slot of the timing wheel, and when that slot is delivered the marked message is
left out (pyrmq.store.timer_store).  ``recallMessageEnable`` is false by default, as in Apache.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Callable

from pyrmq.broker.timer_service import transform_timer_message
from pyrmq.broker.topic_config import RETRY_GROUP_TOPIC_PREFIX, is_writeable
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.message import MessageConst, properties_to_string, tags_string_to_tags_code
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.store.message_store import MessageExtBrokerInner, PutMessageStatus
from pyrmq.store.timer_store import delete_key

if TYPE_CHECKING:
    from pyrmq.broker.config import BrokerConfig
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.store.message_store import DefaultMessageStore

RECALL_MESSAGE_TAG = "_RECALL_TAG_"
_VERSION = "v1"
_ACCEPTED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
             PutMessageStatus.SLAVE_NOT_AVAILABLE)
_UNAVAILABLE = "recall failed, broker service not available"


def build_recall_handle(topic: str, broker_name: str, timestamp: str, uniq_key: str) -> str:
    raw = " ".join((_VERSION, topic, broker_name, timestamp, uniq_key))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def recall_handle_for(properties: dict[str, str], broker_name: str) -> str | None:
    """The handle a timer message's send answer carries (Apache attachRecallHandle), or None."""
    timer_out = properties.get(MessageConst.PROPERTY_TIMER_OUT_MS)
    real_topic = properties.get(MessageConst.PROPERTY_REAL_TOPIC)
    uniq = properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if timer_out is None or real_topic is None or real_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    # the slot's time + 1: the marker is rounded down into the same slot
    return build_recall_handle(real_topic, broker_name, str(int(timer_out) + 1), uniq or "null")


def decode_recall_handle(handle: str | None) -> tuple[str, str, str, str]:
    """(topic, brokerName, timestamp, UNIQ_KEY); ValueError("recall handle is invalid")."""
    if not handle:
        raise ValueError("recall handle is invalid")
    try:
        raw = base64.urlsafe_b64decode(handle.encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise ValueError("recall handle is invalid") from None
    items = raw.split(" ")
    if items[0] != _VERSION or len(items) < 5:
        raise ValueError("recall handle is invalid")
    return items[1], items[2], items[3], items[4]


def _to_long(text: str) -> int:
    try:
        return int(text) if text.lstrip("+-").isdigit() else -1
    except ValueError:
        return -1


class RecallMessageProcessor:
    def __init__(self, *, config: BrokerConfig, store: DefaultMessageStore, topics: TopicConfigManager,
                 clock: Callable[[], int]) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.clock = clock
        self.store_host = (config.broker_ip1, config.listen_port)

    def process(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        header = request.ext_fields or {}
        ext = {"MSG_REGION": self.config.region_id}
        topic = header.get("topic")
        if not topic or not header.get("recallHandle"):
            return request.response(ResponseCode.SYSTEM_ERROR, "the custom field <topic/recallHandle> is null")
        config = self.config
        if not config.recall_message_enable:
            return request.response(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden", ext_fields=ext)
        if config.broker_role.name == "SLAVE":
            return request.response(ResponseCode.SLAVE_NOT_AVAILABLE, _UNAVAILABLE, ext_fields=ext)
        if not is_writeable(config.broker_permission) and not config.allow_recall_when_broker_not_writeable:
            return request.response(ResponseCode.SERVICE_NOT_AVAILABLE, _UNAVAILABLE, ext_fields=ext)
        if self.topics.select(topic) is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist",
                                    ext_fields=ext)
        try:
            handle_topic, broker_name, timestamp, uniq = decode_recall_handle(header.get("recallHandle"))
        except ValueError as exc:
            return request.response(ResponseCode.ILLEGAL_OPERATION, str(exc), ext_fields=ext)
        if handle_topic != topic:
            return request.response(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match", ext_fields=ext)
        if broker_name != config.broker_name:
            return request.response(ResponseCode.ILLEGAL_OPERATION, _UNAVAILABLE, ext_fields=ext)
        now = self.clock()
        time_left = _to_long(timestamp) - now
        if time_left <= 0 or time_left >= self.store.config.timer_max_delay_sec * 1000:
            return request.response(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid", ext_fields=ext)
        props = {"TAGS": RECALL_MESSAGE_TAG, MessageConst.PROPERTY_TIMER_DEL_UNIQKEY: delete_key(topic, uniq),
                 MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
                 MessageConst.PROPERTY_TIMER_DELIVER_MS: timestamp, "BORN_TIMESTAMP": str(now), "TRACE_CONTEXT": "",
                 MessageConst.PROPERTY_PRODUCER_GROUP: header.get("producerGroup")}
        props = {k: v for k, v in props.items() if v is not None}
        parked = transform_timer_message(props, topic, 0, self.store.config, now)
        if parked is None or isinstance(parked[0], int):
            return request.response(ResponseCode.SYSTEM_ERROR, "recall failed, execute error", ext_fields=ext)
        born_host = channel.remote_host_port
        result = self.store.put_message(MessageExtBrokerInner(
            topic=str(parked[0]), queue_id=int(parked[1]), flag=0, body=b"0", properties_string=properties_to_string(props),
            sys_flag=0, born_timestamp=now, born_host=born_host, store_host=self.store_host,
            tags_code=tags_string_to_tags_code(RECALL_MESSAGE_TAG)))
        if result.status not in _ACCEPTED:
            return request.response(ResponseCode.SYSTEM_ERROR, "recall failed, execute error", ext_fields=ext)
        return request.response(ResponseCode.SUCCESS, ext_fields={**ext, "msgId": uniq})


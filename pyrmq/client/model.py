"""The values pyrmq.client hands back: send and pull results and received messages, as frozen
dataclasses named after Java's (``SendResult``, ``PullResult``, ``MessageExt``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

from pyrmq.codec.admin_bodies import MessageQueue
from pyrmq.codec.body_compression import BodyInflateError, inflate_body
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.message import MessageConst, MessageExt
from pyrmq.client.errors import MQClientError

# Limits on what one decompressed body may grow to: the broker's default maxMessageSize (4 MiB)
# times a generous ratio, so a hostile body cannot exhaust memory.
MAX_INFLATED_BODY_BYTES: Final = 64 * 1024 * 1024

__all__ = ["Message", "MessageQueue", "PullResult", "PullStatus", "SendResult", "SendStatus"]


class SendStatus(enum.Enum):
    """How a sent message was stored (Java ``SendStatus``); everything but SEND_OK means the broker
    stored it but could not flush it or replicate it in time."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    """``msg_id`` is the client-made UNIQ_KEY (comma-joined for a batch), ``offset_msg_id`` the
    broker's id built from its address and the commit-log offset."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True, slots=True)
class Message:
    """A received message (Java ``MessageExt``); ``body`` is already decompressed."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    msg_id: str           # the UNIQ_KEY when the producer set one, else the offset msgId
    offset_msg_id: str
    body: bytes
    tags: str | None
    keys: str | None
    properties: dict[str, str]
    born_timestamp: int
    store_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    reconsume_times: int
    sys_flag: int
    flag: int
    broker_name: str = ""

    @property
    def keys_list(self) -> list[str]:
        """KEYS split on the key separator (a space), as Java's ``getKeys`` users do."""
        return (self.keys or "").split(MessageConst.KEY_SEPARATOR) if self.keys else []

    @classmethod
    def from_ext(cls, ext: MessageExt, broker_name: str, extra: dict[str, str] | None = None) -> Message:
        properties = dict(ext.properties)
        if extra:
            properties.update(extra)
        offset_msg_id = ext.msg_id
        return cls(topic=ext.topic, queue_id=ext.queue_id, queue_offset=ext.queue_offset,
                   commit_log_offset=ext.commit_log_offset,
                   msg_id=properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or offset_msg_id,
                   offset_msg_id=offset_msg_id, body=decompress_body(ext.body, ext.sys_flag),
                   tags=properties.get(MessageConst.PROPERTY_TAGS), keys=properties.get(MessageConst.PROPERTY_KEYS),
                   properties=properties, born_timestamp=ext.born_timestamp, store_timestamp=ext.store_timestamp,
                   born_host=ext.born_host, store_host=ext.store_host, reconsume_times=ext.reconsume_times,
                   sys_flag=ext.sys_flag, flag=ext.flag, broker_name=broker_name)


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[Message] = field(default_factory=list)


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """The body as the producer gave it (``inflate_body``), a failure as the client's error."""
    try:
        return inflate_body(body, sys_flag, MAX_INFLATED_BODY_BYTES)
    except BodyInflateError as exc:
        raise MQClientError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None

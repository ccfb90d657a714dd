"""Who is connected: consumer groups (their client channels and subscriptions) and producer groups.

Heartbeats register clients; a closed connection or 120 s without a heartbeat removes them.  When
a consumer group's membership or subscriptions change, every member is told with
NOTIFY_CONSUMER_IDS_CHANGED so the clients rebalance at once (spec/codes.md section 4.1-4.4).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pyrmq.codec.admin_bodies import Connection, Subscription
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import java_string_hash
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.channel import Channel

log = logging.getLogger(__name__)

SUB_ALL = "*"


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    @classmethod
    def build(cls, topic: str, sub_string: str | None, sub_version: int = 0,
              expression_type: str | None = None) -> SubscriptionData:
        """Parse a TAG expression (``TagA || TagB``, ``*``) as the Java FilterAPI does."""
        sub = cls(topic, sub_version=sub_version, expression_type=expression_type or "TAG")
        if not sub_string or sub_string.strip() in ("", SUB_ALL):
            sub.sub_string = SUB_ALL
            return sub
        sub.sub_string = sub_string
        if sub.expression_type == "TAG":
            for tag in sub_string.split("||"):
                tag = tag.strip()
                if tag:
                    sub.tags_set.append(tag)
                    sub.code_set.add(java_string_hash(tag))
        return sub

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SubscriptionData:
        # Codes are recomputed from the tags: Go hashes UTF-8 bytes and C++ sends atoi(tag).
        try:
            sub_version = int(obj.get("subVersion") or 0)
        except (TypeError, ValueError):
            sub_version = 0
        sub = cls.build(str(obj.get("topic", "")), obj.get("subString"), sub_version,
                        obj.get("expressionType") or "TAG")
        sub.class_filter_mode = bool(obj.get("classFilterMode", False))
        tags = obj.get("tagsSet")
        if sub.expression_type == "TAG" and sub.sub_string != SUB_ALL and isinstance(tags, list):
            sub.tags_set = [str(t) for t in tags]
            sub.code_set = {java_string_hash(str(t)) for t in tags}
        return sub

    def to_body(self) -> Subscription:
        return Subscription(self.topic, self.sub_string, tuple(self.tags_set), tuple(sorted(self.code_set)),
                            self.sub_version, self.expression_type, self.class_filter_mode)

    def to_json(self) -> dict[str, Any]:
        return self.to_body().to_json()


@dataclass(slots=True)
class ClientChannelInfo:
    channel: Channel
    client_id: str
    language: str
    version: int
    last_update_ms: int


def connections(channels: dict[Channel, ClientChannelInfo]) -> tuple[Connection, ...]:
    """A group's clients as the Connection entries of GET_CONSUMER/PRODUCER_CONNECTION_LIST."""
    return tuple(Connection(c.client_id, ch.remote_addr, c.language, c.version) for ch, c in channels.items())


_CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
_MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
_CONSUME_FROM = ("CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                 "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
                 "CONSUME_FROM_TIMESTAMP")


def enum_name(value: Any, names: tuple[str, ...], default: str) -> str:
    """C++ clients send enum ordinals, Java and Go send names."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    if isinstance(value, str) and value in names:
        return value
    return default


@dataclass
class ConsumerGroupInfo:
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[Channel, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return [info.client_id for info in self.channels.values()]


def _now_ms() -> int:
    return int(time.time() * 1000)


class ConsumerManager:
    def __init__(self, channel_expired_ms: int = 120_000) -> None:
        self.channel_expired_ms = channel_expired_ms
        self.groups: dict[str, ConsumerGroupInfo] = {}
        # told when a group's last consumer leaves (its SQL92 filter data is then marked dead)
        self.on_group_removed: Callable[[str], None] | None = None

    def _remove_group(self, group: str) -> None:
        del self.groups[group]
        if self.on_group_removed is not None:
            self.on_group_removed(group)

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.groups.get(group)
        return None if info is None else info.subscriptions.get(topic)

    def subscribes(self, group: str, topic: str) -> bool:
        """False only when the group is online with subscriptions and none to ``topic``: the admin
        answers (consume stats, cloneGroupOffset) skip such topics, as Apache's do."""
        info = self.groups.get(group)
        return info is None or not info.subscriptions or topic in info.subscriptions

    def register_consumer(self, group: str, client: ClientChannelInfo, consume_type: str,
                          message_model: str, consume_from_where: str,
                          subscriptions: list[SubscriptionData], notify: bool) -> None:
        info = self.groups.get(group)
        if info is None:
            info = self.groups[group] = ConsumerGroupInfo(group)
        info.consume_type = consume_type
        info.message_model = message_model
        info.consume_from_where = consume_from_where
        existing = info.channels.get(client.channel)
        channel_added = existing is None
        if existing is None:
            info.channels[client.channel] = client
            log.info("new consumer connected, group %s, client %s, %s", group, client.client_id,
                     client.channel.remote_addr)
        else:
            existing.last_update_ms = client.last_update_ms
            existing.client_id = client.client_id
        subscriptions_changed = self._update_subscriptions(info, subscriptions)
        if (channel_added or subscriptions_changed) and notify:
            self.notify_consumer_ids_changed(info)

    @staticmethod
    def _update_subscriptions(info: ConsumerGroupInfo, subscriptions: list[SubscriptionData]) -> bool:
        changed = False
        topics = set()
        for sub in subscriptions:
            topics.add(sub.topic)
            old = info.subscriptions.get(sub.topic)
            if old is None:
                info.subscriptions[sub.topic] = sub
                changed = True
            elif sub.sub_version > old.sub_version:
                info.subscriptions[sub.topic] = sub
        for topic in [t for t in info.subscriptions if t not in topics]:
            del info.subscriptions[topic]
            changed = True
        return changed

    def unregister_consumer(self, group: str, channel: Channel, notify: bool) -> None:
        info = self.groups.get(group)
        if info is None or info.channels.pop(channel, None) is None:
            return
        if not info.channels:
            self._remove_group(group)
        elif notify:
            self.notify_consumer_ids_changed(info)

    def on_channel_closed(self, channel: Channel, notify_enabled) -> None:
        for group, info in list(self.groups.items()):
            if info.channels.pop(channel, None) is None:
                continue
            log.info("consumer %s of group %s disconnected", channel.remote_addr, group)
            if not info.channels:
                self._remove_group(group)
            elif notify_enabled(group):
                self.notify_consumer_ids_changed(info)

    def scan_not_active(self, now_ms: int | None = None) -> list[Channel]:
        now_ms = _now_ms() if now_ms is None else now_ms
        expired = []
        for info in self.groups.values():
            for channel, client in list(info.channels.items()):
                if now_ms - client.last_update_ms > self.channel_expired_ms:
                    expired.append(channel)
        return expired

    @staticmethod
    def notify_consumer_ids_changed(info: ConsumerGroupInfo) -> None:
        for channel in list(info.channels):
            channel.send_oneway(make_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                             {"consumerGroup": info.group_name},
                                             serialize_type=channel.peer_serialize_type))


class ProducerManager:
    def __init__(self, channel_expired_ms: int = 120_000) -> None:
        self.channel_expired_ms = channel_expired_ms
        self.groups: dict[str, dict[Channel, ClientChannelInfo]] = {}
        self._turn = 0

    def register_producer(self, group: str, client: ClientChannelInfo) -> None:
        channels = self.groups.setdefault(group, {})
        existing = channels.get(client.channel)
        if existing is None:
            channels[client.channel] = client
        else:
            existing.last_update_ms = client.last_update_ms

    def unregister_producer(self, group: str, channel: Channel) -> None:
        channels = self.groups.get(group)
        if channels is not None:
            channels.pop(channel, None)
            if not channels:
                del self.groups[group]

    def on_channel_closed(self, channel: Channel) -> None:
        for group in list(self.groups):
            self.unregister_producer(group, channel)

    def available_channel(self, group: str) -> Channel | None:
        """A live connection of the producer group, taken in turn (the transaction check asks one)."""
        channels = [ch for ch in self.groups.get(group, {}) if not ch.closed]
        if not channels:
            return None
        self._turn += 1
        return channels[self._turn % len(channels)]

    def scan_not_active(self, now_ms: int | None = None) -> list[Channel]:
        now_ms = _now_ms() if now_ms is None else now_ms
        return [ch for channels in self.groups.values() for ch, info in channels.items()
                if now_ms - info.last_update_ms > self.channel_expired_ms]


__all__ = ["ClientChannelInfo", "connections", "ConsumerGroupInfo", "ConsumerManager", "ProducerManager",
           "SubscriptionData", "SUB_ALL", "enum_name", "_CONSUME_TYPES", "_MESSAGE_MODELS", "_CONSUME_FROM"]

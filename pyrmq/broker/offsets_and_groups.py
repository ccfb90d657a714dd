"""Consumer offsets (consumerOffset.json) and subscription groups (subscriptionGroup.json)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyrmq.broker.config_table import OffsetTableFile, VersionedConfigTable
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.names import validate_group
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.dispatch import RequestError
from pyrmq.remoting.headers import required_str
from pyrmq.codec.system_topics import TOPIC_GROUP_SEPARATOR

log = logging.getLogger(__name__)

# Groups every Apache broker creates at start (spec/message.md section 10.1).
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP")
SYSTEM_BROADCAST_GROUPS = ("CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER")


def checked_group(group: str) -> str:
    """``group`` if it is a legal name; else the request is refused with SYSTEM_ERROR and the remark
    (the official clients check the same rule before they send: Validators.checkGroup)."""
    remark = validate_group(group)
    if remark is not None:
        raise RequestError(ResponseCode.SYSTEM_ERROR, remark)
    return group


def required_group(request: RemotingCommand, name: str = "consumerGroup") -> str:
    """The group named by header field ``name``, checked as ``checked_group`` does."""
    return checked_group(required_str(request, name))


class ConsumerOffsetManager(OffsetTableFile):
    """consumerOffset.json: ``topic@group`` -> {queueId: next offset to consume}."""

    offset_table: dict[str, dict[int, int]]

    def parse_table(self, table: dict) -> dict[str, dict[int, int]]:
        return {str(k): {int(q): int(o) for q, o in v.items()} for k, v in table.items()}

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = topic + TOPIC_GROUP_SEPARATOR + group
        queues = self.offset_table.get(key)
        if queues is None:
            queues = self.offset_table[key] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.dirty = True

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        queues = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group)
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def topics_of_group(self, group: str) -> list[str]:
        """The topics ``group`` has committed offsets on (Apache's whichTopicByConsumer)."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        return [key[:-len(suffix)] for key in self.offset_table if key.endswith(suffix)]

    def groups_of_topic(self, topic: str) -> list[str]:
        """The groups that committed offsets on ``topic`` (Apache's whichGroupByTopic)."""
        prefix = topic + TOPIC_GROUP_SEPARATOR
        return [key[len(prefix):] for key in self.offset_table if key.startswith(prefix)]

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> bool:
        """``dest_group`` gets a copy of ``src_group``'s offsets on ``topic``; False when it has none."""
        queues = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + src_group)
        if queues is None:
            return False
        self.offset_table[topic + TOPIC_GROUP_SEPARATOR + dest_group] = dict(queues)
        self.dirty = True
        return True

    def remove_group(self, group: str) -> None:
        """Forget every offset of ``group`` (DELETE_SUBSCRIPTIONGROUP with removeOffset)."""
        for key in [k for k in self.offset_table if k.rpartition(TOPIC_GROUP_SEPARATOR)[2] == group]:
            del self.offset_table[key]
            self.dirty = True

    def remove_topic(self, topic: str) -> None:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        for key in [k for k in self.offset_table if k.startswith(prefix)]:
            del self.offset_table[key]
            self.dirty = True


@dataclass(slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    _KEYS = (("groupName", "group_name"), ("consumeEnable", "consume_enable"),
             ("consumeFromMinEnable", "consume_from_min_enable"),
             ("consumeBroadcastEnable", "consume_broadcast_enable"), ("retryQueueNums", "retry_queue_nums"),
             ("retryMaxTimes", "retry_max_times"), ("brokerId", "broker_id"),
             ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly"),
             ("notifyConsumerIdsChangedEnable", "notify_consumer_ids_changed_enable"))

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, attr) for key, attr in self._KEYS}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        config = cls(str(obj["groupName"]))
        for key, attr in cls._KEYS[1:]:
            if key in obj:
                default = getattr(config, attr)
                value = obj[key]
                setattr(config, attr, bool(value) if isinstance(default, bool) else int(value))
        return config


class SubscriptionGroupManager(VersionedConfigTable[SubscriptionGroupConfig]):
    table_member = "subscriptionGroupTable"

    def __init__(self, path: str | Path, auto_create: bool = True) -> None:
        super().__init__(path)
        self.auto_create = auto_create
        for group in SYSTEM_GROUPS:
            self.table[group] = SubscriptionGroupConfig(group)
        for group in SYSTEM_BROADCAST_GROUPS:
            self.table[group] = SubscriptionGroupConfig(group, consume_broadcast_enable=True)

    def entry_from_json(self, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig.from_json(obj)

    def entry_to_json(self, entry: SubscriptionGroupConfig) -> dict[str, Any]:
        return entry.to_json()

    def update(self, config: SubscriptionGroupConfig) -> None:
        self.table[config.group_name] = config
        self.data_version.next_version()
        self.persist_later()

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created with defaults when auto-creation is on."""
        config = self.table.get(group)
        if config is None and self.auto_create and validate_group(group) is None:
            config = SubscriptionGroupConfig(group)
            self.update(config)
        return config

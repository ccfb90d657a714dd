"""Topic configurations (topics.json): system topics, validation, auto-creation from TBW102 and
retry topics, persistence with a DataVersion (spec/message.md section 10, store.md section 7.1)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pyrmq.broker.config_table import VersionedConfigTable
from pyrmq.codec.names import validate_topic  # noqa: F401  (the broker's processors import it from here)
from pyrmq.codec.system_topics import (  # noqa: F401  (re-exported for the broker's modules)
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    OFFSET_MOVED_EVENT,
    REPLY_TOPIC_POSTFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    TRACE_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    is_system_topic,
)

log = logging.getLogger(__name__)

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


@dataclass(slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TopicConfig:
        return cls(topic_name=str(obj["topicName"]), read_queue_nums=int(obj.get("readQueueNums", 16)),
                   write_queue_nums=int(obj.get("writeQueueNums", 16)), perm=int(obj.get("perm", 6)),
                   topic_filter_type=str(obj.get("topicFilterType", "SINGLE_TAG")),
                   topic_sys_flag=int(obj.get("topicSysFlag", 0)), order=bool(obj.get("order", False)))


class TopicConfigManager(VersionedConfigTable[TopicConfig]):
    table_member = "topicConfigTable"

    def __init__(self, path: str | Path, cluster_name: str, broker_name: str, *,
                 auto_create_topic_enable: bool = True, default_topic_queue_nums: int = 8,
                 cluster_topic_enable: bool = True, broker_topic_enable: bool = True,
                 on_change: Callable[[], None] | None = None) -> None:
        super().__init__(path)
        # Every change reaches the NameServers at once (Java's registerBrokerAll after a change).
        self.on_change = on_change
        self.auto_create_topic_enable = auto_create_topic_enable
        # topics created by a send whose topics.json write is not done yet (see created_unwritten)
        self._created_unwritten: set[str] = set()
        self._add_system_topics(cluster_name, broker_name, default_topic_queue_nums,
                                cluster_topic_enable, broker_topic_enable)

    def _add_system_topics(self, cluster: str, broker: str, default_queue_nums: int,
                           cluster_topic_enable: bool, broker_topic_enable: bool) -> None:
        def add(name: str, queues: int, perm: int = PERM_READ | PERM_WRITE) -> None:
            self.table[name] = TopicConfig(name, queues, queues, perm)

        add(SELF_TEST_TOPIC, 1)
        if self.auto_create_topic_enable:
            add(AUTO_CREATE_TOPIC_KEY_TOPIC, default_queue_nums, PERM_INHERIT | PERM_READ | PERM_WRITE)
        add(BENCHMARK_TOPIC, 1024)
        add(cluster, 16, PERM_INHERIT | (PERM_READ | PERM_WRITE if cluster_topic_enable else 0))
        add(broker, 1, PERM_INHERIT | (PERM_READ | PERM_WRITE if broker_topic_enable else 0))
        add(OFFSET_MOVED_EVENT, 1)
        add(SCHEDULE_TOPIC, 18)
        add(f"{cluster}_{REPLY_TOPIC_POSTFIX}", 1)

    # --- persistence ----------------------------------------------------------------------

    def entry_from_json(self, obj: dict[str, Any]) -> TopicConfig:
        return TopicConfig.from_json(obj)

    def entry_to_json(self, entry: TopicConfig) -> dict[str, Any]:
        return entry.to_json()

    # --- lookups and changes -------------------------------------------------------------

    def select(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def update(self, config: TopicConfig) -> None:
        self.table[config.topic_name] = config
        self._changed()

    def _changed(self) -> None:
        self.data_version.next_version()
        self.persist_later()
        if self.on_change is not None:
            self.on_change()

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self._changed()
        return True

    def _created(self, config: TopicConfig) -> None:
        """Add a topic a message is being stored to; until it is on disk, sends to it are
        answered only after the write (``created_unwritten``), as Apache persists before answering."""
        self.update(config)
        persister = self.persister
        if persister is None:
            return
        name = config.topic_name
        self._created_unwritten.add(name)

        def written(ok: bool) -> None:
            if ok:
                self._created_unwritten.discard(name)
            else:   # the persister retries; keep holding answers until it succeeds
                persister.when_written(written)

        persister.when_written(written)

    def created_unwritten(self, topic: str) -> bool:
        """True while ``topic`` was auto-created and topics.json does not hold it yet: a crash
        now would lose the topic, and with it the route to every message already stored in it."""
        return topic in self._created_unwritten

    async def wait_written(self) -> bool:
        """Wait until everything changed so far is on disk; False if that write failed."""
        if self.persister is None:
            return True
        return await self.persister.wait_written()

    def create_in_send(self, topic: str, default_topic: str, client_queue_nums: int,
                       topic_sys_flag: int) -> TopicConfig | None:
        """Auto-create ``topic`` from the template ``default_topic`` (normally TBW102)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None:
            log.warning("create topic %s failed: default topic %s does not exist", topic, default_topic)
            return None
        perm = template.perm
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.auto_create_topic_enable:
            perm = PERM_READ | PERM_WRITE
        if not perm & PERM_INHERIT:
            log.warning("create topic %s failed: default topic %s has no inherit perm", topic, default_topic)
            return None
        queue_nums = max(0, min(client_queue_nums, template.write_queue_nums))
        config = TopicConfig(topic, queue_nums, queue_nums, perm & ~PERM_INHERIT,
                             template.topic_filter_type, topic_sys_flag)
        log.info("auto-created topic %s from %s with %d queues", topic, default_topic, queue_nums)
        self._created(config)
        return config

    def create_in_send_back(self, topic: str, queue_nums: int, perm: int = PERM_READ | PERM_WRITE,
                            topic_sys_flag: int = 0) -> TopicConfig:
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        config = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        self._created(config)
        return config

"""The accumulation alarm: a consumer group whose lag or dead-letter queue grows past a threshold.

``groupLagAlarmThreshold`` (messages behind, summed over every queue the group has committed an
offset for, its %RETRY% queue included) and ``dlqSizeAlarmThreshold`` (messages in %DLQ%<group>)
are pyrmq's own broker.conf keys, 0 (off) by default.  Every ``accumulationAlarmInterval`` ms the
broker measures each group; a group crossing a threshold is logged once (WARNING) and listed in
GET_BROKER_RUNTIME_INFO under ``pyrmqAccumulationAlarms`` until it falls below again, which is
logged once too (INFO) -- a log line per change, not per check.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from pyrmq.broker.topic_config import DLQ_GROUP_TOPIC_PREFIX
from pyrmq.common.guard import ServiceGuard
from pyrmq.codec.system_topics import TOPIC_GROUP_SEPARATOR

if TYPE_CHECKING:
    from pyrmq.broker.config import BrokerConfig
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

RUNTIME_INFO_KEY = "pyrmqAccumulationAlarms"


@dataclass(frozen=True)
class Accumulation:
    lag: int
    dlq: int


class AccumulationAlarm:
    """Measures every group's lag and DLQ size and keeps the set of groups past a threshold."""

    def __init__(self, *, config: BrokerConfig, store: DefaultMessageStore, topics: TopicConfigManager,
                 offsets: ConsumerOffsetManager) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.alarms: dict[str, Accumulation] = {}

    @property
    def enabled(self) -> bool:
        return self.config.group_lag_alarm_threshold > 0 or self.config.dlq_size_alarm_threshold > 0

    def measure(self) -> dict[str, Accumulation]:
        """Group -> (lag, DLQ size) for every group with committed offsets or a DLQ topic."""
        lag: dict[str, int] = {}
        for key, queues in list(self.offsets.offset_table.items()):
            topic, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
            behind = sum(max(0, self.store.get_max_offset_in_queue(topic, q) - committed)
                         for q, committed in queues.items())
            lag[group] = lag.get(group, 0) + behind
        dlq: dict[str, int] = {}
        for name, config in list(self.topics.table.items()):
            if name.startswith(DLQ_GROUP_TOPIC_PREFIX):
                queues = config.write_queue_nums
                dlq[name[len(DLQ_GROUP_TOPIC_PREFIX):]] = sum(
                    max(0, self.store.get_max_offset_in_queue(name, q) - self.store.get_min_offset_in_queue(name, q))
                    for q in range(queues))
        return {g: Accumulation(lag.get(g, 0), dlq.get(g, 0)) for g in lag.keys() | dlq.keys()}

    def _past(self, figures: Accumulation) -> bool:
        lag_limit, dlq_limit = self.config.group_lag_alarm_threshold, self.config.dlq_size_alarm_threshold
        return (lag_limit > 0 and figures.lag >= lag_limit) or (dlq_limit > 0 and figures.dlq >= dlq_limit)

    def check(self) -> None:
        """One round: log the groups that crossed a threshold or came back below it."""
        if not self.enabled:
            self.alarms.clear()
            return
        current = {g: f for g, f in self.measure().items() if self._past(f)}
        for group in sorted(current.keys() - self.alarms.keys()):
            f = current[group]
            log.warning("accumulation alarm: group %s lag %d (threshold %d), DLQ %d (threshold %d)", group, f.lag,
                        self.config.group_lag_alarm_threshold, f.dlq, self.config.dlq_size_alarm_threshold)
        for group in sorted(self.alarms.keys() - current.keys()):
            log.info("accumulation alarm cleared: group %s back below the thresholds", group)
        self.alarms = current

    def runtime_info(self) -> dict[str, str]:
        """The runtime-info figure: group -> {lag, dlq} of the groups in alarm (always present)."""
        return {RUNTIME_INFO_KEY: json.dumps(
            {g: {"lag": f.lag, "dlq": f.dlq} for g, f in sorted(self.alarms.items())}, separators=(",", ":"))}

    async def run(self) -> None:
        guard = ServiceGuard("accumulation alarm", log)
        while True:
            await trio.sleep(max(100, self.config.accumulation_alarm_interval) / 1000)
            with guard.round():
                self.check()

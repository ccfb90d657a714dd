"""Delayed delivery (Java ScheduleMessageService): messages with a DELAY level are parked in
SCHEDULE_TOPIC_XXXX queue ``level - 1``; the consume-queue tagsCode of each holds its delivery
time; a loop per level re-puts due messages to REAL_TOPIC/REAL_QID and keeps its progress in
delayOffset.json (spec/message.md section 9, store.md sections 7.3 and 11)."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from pyrmq.broker.config_table import OffsetTableFile
from pyrmq.codec.message import MessageConst, tags_string_to_tags_code
from pyrmq.codec.message_props import real_destination
from pyrmq.common.guard import ServiceGuard
from pyrmq.store.message_store import MessageExtBrokerInner, PutMessageStatus
from pyrmq.codec.system_topics import SCHEDULE_TOPIC

if TYPE_CHECKING:
    from pyrmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
# Java checks each level every 100 ms and persists the offsets every 10 s.
TICK_S = 0.1
PERSIST_INTERVAL_S = 10.0
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> list[int]:
    """``"1s 5s 1m"`` -> ``[1000, 5000, 60000]`` (level i is element i-1)."""
    levels = []
    for token in text.split():
        match = re.fullmatch(r"(\d+)([smhd])", token)
        if match is None:
            raise ValueError(f"bad delay level {token!r} in messageDelayLevel (expected e.g. 5s, 1m, 2h, 1d)")
        levels.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    if not levels:
        raise ValueError("messageDelayLevel is empty")
    return levels


def redirect_to_schedule(properties: dict[str, str], topic: str, queue_id: int,
                         max_level: int) -> tuple[str, int] | None:
    """If the message asks for a delay, park it: add REAL_TOPIC/REAL_QID, return the schedule queue."""
    raw = properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
    if raw is None:
        return None
    try:
        level = int(raw)
    except ValueError:
        return None
    if level <= 0:
        return None
    level = min(level, max_level)
    properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
    properties[MessageConst.PROPERTY_REAL_TOPIC] = topic
    properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    return SCHEDULE_TOPIC, level - 1


class DelayOffsetTable(OffsetTableFile):
    """delayOffset.json: delay level -> next offset of its SCHEDULE_TOPIC_XXXX queue."""

    offset_table: dict[int, int]

    def parse_table(self, table: dict) -> dict[int, int]:
        return {int(k): int(v) for k, v in table.items()}


class ScheduleMessageService:
    def __init__(self, ctl: BrokerController, delay_levels: list[int]) -> None:
        self.ctl = ctl
        self.store = ctl.store
        self.delay_ms = delay_levels
        self.offsets = DelayOffsetTable(Path(ctl.store_config.store_path_root_dir) / "config" / "delayOffset.json")
        # the store stamps each parked message's CQ unit with its delivery time
        self.store.schedule_tags_code = self.deliver_timestamp
        # level -> (offset of its first message not yet due, trio time that message falls due)
        self._waiting: dict[int, tuple[int, float]] = {}

    @property
    def max_level(self) -> int:
        return len(self.delay_ms)

    def deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        level = min(max(level, 1), self.max_level)
        return store_timestamp + self.delay_ms[level - 1]

    @property
    def offset_table(self) -> dict[int, int]:
        return self.offsets.offset_table

    def load(self) -> None:
        self.offsets.load()

    def persist(self) -> None:
        self.offsets.persist()

    # --- delivery -------------------------------------------------------------------------

    async def run(self) -> None:
        last_persist = trio.current_time()
        guard = ServiceGuard("delayed message delivery", log)
        while True:
            await trio.sleep(TICK_S)
            with guard.round():
                self.deliver_due(int(time.time() * 1000), trio.current_time())
                if self.offsets.dirty and trio.current_time() - last_persist >= PERSIST_INTERVAL_S:
                    last_persist = trio.current_time()
                    self.offsets.persist_if_dirty()

    def deliver_due(self, now_ms: int, now: float) -> int:
        """Re-put every parked message whose time has come; returns how many were delivered.

        Delivery times are wall clock (``now_ms``): store timestamp plus the level's delay. The
        wait for one is trio's clock (``now``), as Java's timer waits the countdown: a message is
        also due once the countdown seen when it first headed its queue has passed on trio's clock
        (a test's autojump_clock skips it; a wall clock set back does not stretch it).
        """
        delivered = 0
        for level in range(1, self.max_level + 1):
            cq = self.store.find_consume_queue(SCHEDULE_TOPIC, level - 1)
            if cq is None:
                continue
            offset = max(self.offset_table.get(level, 0), cq.get_min_offset_in_queue())
            for commit_log_offset, _size, deliver_at in cq.iter_units(offset):
                # with enableConsumeQueueExt the tagsCode addresses an ext unit holding it
                deliver_at = cq.real_tags_code(deliver_at)
                # A clock set back must not strand messages for longer than their delay.
                if deliver_at > now_ms + self.delay_ms[level - 1]:
                    deliver_at = now_ms
                if deliver_at > now_ms:
                    waiting = self._waiting.get(level)
                    if waiting is None or waiting[0] != offset:
                        self._waiting[level] = (offset, now + (deliver_at - now_ms) / 1000)
                        break
                    if now < waiting[1]:
                        break
                if not self._deliver(commit_log_offset):
                    break    # retry this one on the next tick
                offset += 1
                delivered += 1
            if offset != self.offset_table.get(level, 0):
                self.offset_table[level] = offset
                self.offsets.dirty = True
        return delivered

    def _deliver(self, commit_log_offset: int) -> bool:
        message = self.store.look_message_by_offset(commit_log_offset)
        if message is None:
            log.warning("parked message at %d is gone; skipping it", commit_log_offset)
            return True
        props = message.properties
        destination = real_destination(props)
        if destination is None:
            log.warning("parked message at %d has no REAL_TOPIC/REAL_QID; dropped", commit_log_offset)
            return True
        real_topic, real_queue = destination
        # As Java: the stored property string keeps DELAY, REAL_TOPIC and REAL_QID.
        inner = MessageExtBrokerInner(
            topic=real_topic, queue_id=real_queue, flag=message.flag, body=message.body,
            properties_string=message.properties_string, sys_flag=message.sys_flag,
            born_timestamp=message.born_timestamp, born_host=message.born_host, store_host=message.store_host,
            reconsume_times=message.reconsume_times,
            tags_code=tags_string_to_tags_code(props.get(MessageConst.PROPERTY_TAGS)))
        result = self.store.put_message(inner)
        if result.status is not PutMessageStatus.PUT_OK:
            log.warning("delivering parked message at %d to %s failed: %s", commit_log_offset, real_topic,
                        result.status.name)
            return False
        return True

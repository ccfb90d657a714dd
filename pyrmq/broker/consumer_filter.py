"""ConsumerFilterManager: the SQL92 filters of consumer groups, per topic (spec filter.md 3.4, 3.6).

Heartbeats register each group's SQL92 subscriptions as ConsumerFilterData (compiled expression,
``clientVersion`` = the subscription's subVersion, ``bornTime``/``deadTime``, and the group's
place in the bloom bitmap); a pull without the SUBSCRIPTION flag evaluates with the registered
data.  Topics a group stops subscribing, and groups that leave, are marked dead, kept for
``filterDataCleanTimeSpan`` and then dropped.  ``consumerFilter.json`` has Apache's shape
(store.md 7.5) and is written by the house persister (temp file, fsync, rename, off the loop).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyrmq.codec import fastjson
from pyrmq.common.persister import PersistedConfig
from pyrmq.filter import Expression, FilterParseError, compile_expression
from pyrmq.filter.bloom import BloomFilter, BloomFilterData
from pyrmq.store.config_file import load_json_config

log = logging.getLogger(__name__)

SQL92 = "SQL92"
TAG = "TAG"
# Apache treats every loaded filter as belonging to a consumer gone 30 s ago: it comes back alive
# with the group's next heartbeat, or is cleaned once it has been dead filterDataCleanTimeSpan.
LOADED_DEAD_AGO_MS = 30_000


def is_tag_type(expression_type: str | None) -> bool:
    return not expression_type or expression_type == TAG


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class ConsumerFilterData:
    """One group's filter on one topic (Apache's ConsumerFilterData)."""

    group: str
    topic: str
    expression: Expression
    expression_type: str
    client_version: int
    born_time: int
    dead_time: int = 0
    bloom_filter_data: BloomFilterData | None = None

    @property
    def compiled_expression(self) -> Expression:
        """Apache's name for the compiled expression (the bitmap calculator reads it)."""
        return self.expression

    @property
    def dead(self) -> bool:
        return self.dead_time >= self.born_time

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        if self.bloom_filter_data is not None:
            obj["bloomFilterData"] = self.bloom_filter_data.to_json()
        obj.update({"bornTime": self.born_time, "clientVersion": self.client_version, "consumerGroup": self.group,
                    "dead": self.dead, "deadTime": self.dead_time, "expression": self.expression.text,
                    "expressionType": self.expression_type, "topic": self.topic})
        return obj

    @classmethod
    def from_json(cls, obj: dict[str, Any], topic: str, group: str) -> ConsumerFilterData:
        bloom = obj.get("bloomFilterData")
        return cls(group=str(obj.get("consumerGroup") or group), topic=str(obj.get("topic") or topic),
                   expression=compile_expression(str(obj["expression"])),
                   expression_type=str(obj.get("expressionType") or SQL92),
                   client_version=int(obj.get("clientVersion") or 0), born_time=int(obj.get("bornTime") or 0),
                   dead_time=int(obj.get("deadTime") or 0),
                   bloom_filter_data=BloomFilterData.from_json(bloom) if isinstance(bloom, dict) else None)


def build_filter_data(topic: str, group: str, expression: str, expression_type: str, client_version: int,
                      now_ms: int | None = None) -> ConsumerFilterData:
    """Compile a filter (Apache's ConsumerFilterManager.build); raises FilterParseError."""
    if expression_type != SQL92:
        raise FilterParseError(f"Unsupported expression type: {expression_type}")
    return ConsumerFilterData(group, topic, compile_expression(expression), expression_type, client_version,
                              _now_ms() if now_ms is None else now_ms)


class ConsumerFilterManager(PersistedConfig):
    """``filterDataByTopic``: topic -> group -> ConsumerFilterData."""

    def __init__(self, path: str | Path, bloom: BloomFilter, clean_time_span_ms: Callable[[], int],
                 clock: Callable[[], int] = _now_ms) -> None:
        super().__init__(path)
        self.bloom = bloom
        self.clean_time_span_ms = clean_time_span_ms   # read at every use: a runtime-changeable key
        self.clock = clock
        self.filter_data_by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        self.dirty = False

    # -- lookups (pull, the bitmap dispatcher) --------------------------------------------------
    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        return self.filter_data_by_topic.get(topic, {}).get(group)

    def live_filters(self, topic: str) -> Sequence[ConsumerFilterData]:
        """The topic's filters of groups still consuming (what the bitmap dispatcher evaluates)."""
        groups = self.filter_data_by_topic.get(topic)
        if not groups:
            return ()
        return [data for data in groups.values() if not data.dead]

    def bitmap_filters(self, topic: str) -> Sequence[ConsumerFilterData]:
        """Every filter of the topic, dead ones too (Apache's ``get(topic)``, what its bitmap
        dispatcher evaluates): a group that comes back with the same expression keeps its bornTime,
        so the records stored while it was away must carry its bits or the pull would skip them."""
        groups = self.filter_data_by_topic.get(topic)
        return list(groups.values()) if groups else ()

    # -- heartbeats ---------------------------------------------------------------------------------
    def register_group(self, group: str, subscriptions: Iterable[tuple[str, str, str, int]]) -> None:
        """A heartbeat's subscriptions of ``group``: (topic, expression, type, subVersion) each;
        SQL92 ones are registered, the group's other filters are marked dead."""
        topics = set()
        for topic, expression, expression_type, sub_version in subscriptions:
            topics.add(topic)
            self.register(topic, group, expression, expression_type, sub_version)
        now = self.clock()
        for topic, groups in self.filter_data_by_topic.items():
            data = groups.get(group)
            if data is not None and topic not in topics and not data.dead:
                data.dead_time = now
                self.dirty = True
                log.info("consumer filter of %s on %s is dead: the group no longer subscribes", group, topic)

    def register(self, topic: str, group: str, expression: str, expression_type: str, client_version: int) -> bool:
        if is_tag_type(expression_type) or not expression:
            return False
        groups = self.filter_data_by_topic.setdefault(topic, {})
        bloom_data = self.bloom.generate(f"{group}#{topic}")
        old = groups.get(group)
        if old is not None:
            if client_version <= old.client_version:
                if client_version == old.client_version and old.dead:
                    old.dead_time = 0
                    self.dirty = True
                    return True
                return False
            if old.expression.text == expression and old.expression_type == expression_type \
                    and old.bloom_filter_data == bloom_data:
                old.client_version = client_version
                old.dead_time = 0
                self.dirty = True
                return True
        try:
            data = build_filter_data(topic, group, expression, expression_type, client_version, self.clock())
        except FilterParseError as exc:
            # Not registered: the group's pulls answer FILTER_DATA_NOT_EXIST (the client reports it).
            log.warning("consumer %s on %s: SQL92 expression %r does not compile: %s", group, topic, expression,
                        exc.message)
            if groups.pop(group, None) is not None:
                self.dirty = True
            if not groups:
                del self.filter_data_by_topic[topic]
            return False
        data.bloom_filter_data = bloom_data
        groups[group] = data
        self.dirty = True
        log.info("consumer filter registered: %s on %s: %s", group, topic, expression)
        return True

    def unregister(self, group: str) -> None:
        """The group's last consumer left: its filters are dead (kept for filterDataCleanTimeSpan)."""
        now = self.clock()
        for groups in self.filter_data_by_topic.values():
            data = groups.get(group)
            if data is not None and not data.dead:
                data.dead_time = now
                self.dirty = True

    # -- persistence --------------------------------------------------------------------------------
    def clean(self) -> None:
        """Drop filters dead for at least filterDataCleanTimeSpan, and topics left empty."""
        limit = self.clock() - self.clean_time_span_ms()
        for topic in list(self.filter_data_by_topic):
            groups = self.filter_data_by_topic[topic]
            for group in [g for g, d in groups.items() if d.dead and d.dead_time <= limit]:
                del groups[group]
            if not groups:
                del self.filter_data_by_topic[topic]

    def encode(self, pretty: bool = False) -> str:
        self.clean()
        obj = {"filterDataByTopic": {
            topic: {"groupFilterData": {group: data.to_json() for group, data in groups.items()}, "topic": topic}
            for topic, groups in self.filter_data_by_topic.items()}}
        return fastjson.dumps_pretty(obj) if pretty else fastjson.dumps(obj)

    def persist_if_needed(self) -> None:
        """Called every 10 s: write when something changed or a dead filter may have expired."""
        if self.dirty or any(d.dead for groups in self.filter_data_by_topic.values() for d in groups.values()):
            self.dirty = False
            self.persist_later()

    def load(self) -> None:
        load_json_config(self.path, self._apply)

    def _apply(self, data: dict[str, Any]) -> None:
        loaded: dict[str, dict[str, ConsumerFilterData]] = {}
        now = self.clock()
        for topic, by_topic in (data.get("filterDataByTopic") or {}).items():
            if not isinstance(by_topic, dict):
                continue
            groups: dict[str, ConsumerFilterData] = {}
            for group, obj in (by_topic.get("groupFilterData") or {}).items():
                if not isinstance(obj, dict):
                    continue
                try:
                    entry = ConsumerFilterData.from_json(obj, str(topic), str(group))
                except FilterParseError as exc:
                    log.error("consumerFilter.json: %s on %s does not compile, dropped: %s", group, topic, exc.message)
                    continue
                if not self.bloom.is_valid(entry.bloom_filter_data):
                    # bitmaps made with other bloom parameters cannot be read: ignore the whole file
                    log.info("consumerFilter.json was written for another bloom filter (%s), ignored: %s",
                             entry.bloom_filter_data, self.path)
                    return
                if entry.dead_time == 0:
                    entry.dead_time = max(entry.born_time, now - LOADED_DEAD_AGO_MS)
                groups[str(group)] = entry
            if groups:
                loaded[str(topic)] = groups
        self.filter_data_by_topic = loaded

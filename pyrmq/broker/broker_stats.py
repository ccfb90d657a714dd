"""The broker's traffic statistics, as Apache's BrokerStatsManager keeps them.

Named sets of items (``TOPIC_PUT_NUMS`` keyed by topic, ``GROUP_GET_NUMS`` by ``topic@group``,
``BROKER_PUT_NUMS`` by cluster, ...), each item a running value and call count with snapshots
every 10 s (the last minute), every 10 min (the last hour) and every hour (the last day), from
which VIEW_BROKER_STATS_DATA (mqadmin statsAll, rocketmq-exporter) answers sum, TPS and average
per call. The daily totals of GET_BROKER_RUNTIME_INFO (``msgPutTotalTodayMorning``, ...) are
here too.

Counting is on the send and pull paths: one dict lookup and two additions per item. Sampling is
the broker's periodic task (:meth:`BrokerStatsManager.run`); every method takes the time from
its caller, so tests drive the windows without waiting.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import trio

from pyrmq.codec.system_topics import TOPIC_GROUP_SEPARATOR
from pyrmq.store.store_stats import CallSnapshot, StoreStats

log = logging.getLogger(__name__)

# Apache's stats names (BrokerStatsManager / Stats); these are the sets pyrmq counts.
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, GROUP_GET_LATENCY,
               SNDBCK_PUT_NUMS, BROKER_PUT_NUMS, BROKER_GET_NUMS)

# (interval s, snapshots kept): the minute, hour and day windows of every item
_MINUTE = (10, 7)
_HOUR = (600, 7)
_DAY = (3600, 25)


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """One window of an item: what was added, per second, and per call."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


def _window(snapshots: deque[CallSnapshot]) -> StatsSnapshot:
    if not snapshots:
        return StatsSnapshot()
    first, last = snapshots[0], snapshots[-1]
    total = last.value - first.value
    elapsed = last.timestamp_ms - first.timestamp_ms
    times = last.times - first.times
    return StatsSnapshot(total, total * 1000.0 / elapsed if elapsed > 0 else 0.0,
                         total / times if times > 0 else 0.0, times)


class StatsItem:
    """One key of one set: ``value`` added up over ``times`` calls, and its windows."""

    __slots__ = ("value", "times", "minute", "hour", "day")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self.minute: deque[CallSnapshot] = deque(maxlen=_MINUTE[1])
        self.hour: deque[CallSnapshot] = deque(maxlen=_HOUR[1])
        self.day: deque[CallSnapshot] = deque(maxlen=_DAY[1])

    def sample(self, window: deque[CallSnapshot], interval_s: int, now_ms: int) -> None:
        if not window:   # a new item's window starts from zero one interval ago, as Apache's
            window.append(CallSnapshot(now_ms - interval_s * 1000, 0, 0))
        window.append(CallSnapshot(now_ms, self.times, self.value))

    def in_minute(self) -> StatsSnapshot:
        return _window(self.minute)

    def in_hour(self) -> StatsSnapshot:
        return _window(self.hour)

    def in_day(self) -> StatsSnapshot:
        return _window(self.day)


class StatsItemSet:
    """The items of one stats name, created on their first count."""

    __slots__ = ("name", "items")

    def __init__(self, name: str) -> None:
        self.name = name
        self.items: dict[str, StatsItem] = {}

    def add(self, key: str, value: int, times: int = 1) -> None:
        item = self.item_for(key)
        item.value += value
        item.times += times

    def item_for(self, key: str) -> StatsItem:
        """The item of ``key``, created on its first count."""
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = StatsItem()
        return item

    def sample_minute(self, now_ms: int) -> None:
        for item in self.items.values():
            item.sample(item.minute, _MINUTE[0], now_ms)

    def sample_hour(self, now_ms: int) -> None:
        for item in self.items.values():
            item.sample(item.hour, _HOUR[0], now_ms)

    def sample_day(self, now_ms: int) -> None:
        for item in self.items.values():
            item.sample(item.day, _DAY[0], now_ms)

    def drop_keys(self, doomed: Callable[[str], bool]) -> None:
        for key in [k for k in self.items if doomed(k)]:
            del self.items[key]


class BrokerStatsManager:
    """Every set the broker counts, the daily totals, and the task that samples them."""

    def __init__(self, cluster_name: str, store_stats: StoreStats) -> None:
        self.cluster_name = cluster_name
        self.store_stats = store_stats
        self.sets = {name: StatsItemSet(name) for name in STATS_NAMES}
        self._topic_put_nums = self.sets[TOPIC_PUT_NUMS]
        self._topic_put_size = self.sets[TOPIC_PUT_SIZE]
        self._group_get_nums = self.sets[GROUP_GET_NUMS]
        self._group_get_size = self.sets[GROUP_GET_SIZE]
        self._group_get_latency = self.sets[GROUP_GET_LATENCY]
        self._broker_put_nums = self.sets[BROKER_PUT_NUMS]
        # a send's items, found once: (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE) by topic, BROKER_PUT_NUMS
        self._topic_put_items: dict[str, tuple[StatsItem, StatsItem]] = {}
        self._cluster_put_item: StatsItem | None = None
        self._broker_get_nums = self.sets[BROKER_GET_NUMS]
        # BrokerStats: the store's totals at this morning's and yesterday morning's midnight
        self.put_total_today_morning = 0
        self.get_total_today_morning = 0
        self.put_total_yesterday_morning = 0
        self.get_total_yesterday_morning = 0

    # ------------------------------------------------------------------ counting (hot paths)

    def on_put(self, topic: str, msg_num: int, wrote_bytes: int) -> None:
        """A send stored ``msg_num`` messages (one call, however many a batch held)."""
        self.on_topic_put(topic, msg_num, wrote_bytes)
        cluster = self._cluster_put_item
        if cluster is None:
            cluster = self._cluster_put_item = self._broker_put_nums.item_for(self.cluster_name)
        cluster.value += msg_num
        cluster.times += 1

    def on_topic_put(self, topic: str, msg_num: int, wrote_bytes: int) -> None:
        items = self._topic_put_items.get(topic)
        if items is None:
            items = self._topic_put_items[topic] = (self._topic_put_nums.item_for(topic), self._topic_put_size.item_for(topic))
        nums, size = items
        nums.value += msg_num
        nums.times += 1
        size.value += wrote_bytes
        size.times += 1

    def on_get(self, group: str, topic: str, queue_id: int, msg_count: int, size: int, latency_ms: int) -> None:
        """A pull found ``msg_count`` messages of ``size`` bytes after ``latency_ms`` in the broker."""
        key = topic + TOPIC_GROUP_SEPARATOR + group
        self._group_get_nums.add(key, msg_count)
        self._group_get_size.add(key, size)
        self._broker_get_nums.add(self.cluster_name, msg_count)
        self._group_get_latency.add(f"{queue_id}{TOPIC_GROUP_SEPARATOR}{key}", latency_ms)

    def on_send_back(self, group: str, topic: str) -> None:
        self.sets[SNDBCK_PUT_NUMS].add(topic + TOPIC_GROUP_SEPARATOR + group, 1)

    # ------------------------------------------------------------------ reading

    def item(self, stats_name: str, stats_key: str) -> StatsItem | None:
        stats_set = self.sets.get(stats_name)
        return stats_set.items.get(stats_key) if stats_set is not None else None

    def in_minute(self, stats_name: str, stats_key: str) -> StatsSnapshot:
        """An item's last minute; an empty one for an item never counted."""
        item = self.item(stats_name, stats_key)
        return item.in_minute() if item is not None else StatsSnapshot()

    def group_get_tps(self, group: str, topic: str) -> float:
        """Messages a group pulled of a topic per second, over the last minute."""
        return self.in_minute(GROUP_GET_NUMS, topic + TOPIC_GROUP_SEPARATOR + group).tps

    def runtime_info(self) -> dict[str, str]:
        """The daily totals of GET_BROKER_RUNTIME_INFO."""
        store = self.store_stats
        return {"msgPutTotalTodayNow": str(store.put_times_total()),
                "msgGetTotalTodayNow": str(store.get_transferred_msgs),
                "msgPutTotalTodayMorning": str(self.put_total_today_morning),
                "msgGetTotalTodayMorning": str(self.get_total_today_morning),
                "msgPutTotalYesterdayMorning": str(self.put_total_yesterday_morning),
                "msgGetTotalYesterdayMorning": str(self.get_total_yesterday_morning)}

    # ------------------------------------------------------------------ forgetting

    def on_topic_deleted(self, topic: str) -> None:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            self.sets[name].items.pop(topic, None)
        self._topic_put_items.pop(topic, None)
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            self.sets[name].drop_keys(lambda key: key.startswith(prefix))
        self._group_get_latency.drop_keys(lambda key: key.partition(TOPIC_GROUP_SEPARATOR)[2].startswith(prefix))

    def on_group_deleted(self, group: str) -> None:
        suffix = TOPIC_GROUP_SEPARATOR + group
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, GROUP_GET_LATENCY):
            self.sets[name].drop_keys(lambda key: key.endswith(suffix))

    # ------------------------------------------------------------------ sampling

    def record_morning(self) -> None:
        """At midnight: today's totals so far become yesterday's, the store's now today's start."""
        self.put_total_yesterday_morning = self.put_total_today_morning
        self.get_total_yesterday_morning = self.get_total_today_morning
        self.put_total_today_morning = self.store_stats.put_times_total()
        self.get_total_today_morning = self.store_stats.get_transferred_msgs

    def tick(self, elapsed_s: int, now_ms: int) -> None:
        """One second of the sampling clock, ``elapsed_s`` seconds after it started: the store's
        rates every second, its put-time distribution every minute, the items every 10 s, 10 min
        and hour (all from the first second, as Apache's schedules)."""
        self.store_stats.sample(now_ms)
        if elapsed_s % 60 == 0 and elapsed_s:
            self.store_stats.rotate_put_times()
        for interval_s, sample in ((_MINUTE[0], StatsItemSet.sample_minute), (_HOUR[0], StatsItemSet.sample_hour),
                                   (_DAY[0], StatsItemSet.sample_day)):
            if elapsed_s % interval_s == 0:
                for stats_set in self.sets.values():
                    sample(stats_set, now_ms)

    async def run(self) -> None:
        """Samples once a second for as long as the broker runs; the daily totals at midnight."""
        start = trio.current_time()
        elapsed_s = 0
        day = time.localtime().tm_yday
        while True:
            try:
                self.tick(elapsed_s, int(time.time() * 1000))
                if time.localtime().tm_yday != day:
                    day = time.localtime().tm_yday
                    self.record_morning()
            except Exception:   # statistics never take the broker down
                log.exception("sampling the broker statistics failed")
            elapsed_s += 1
            await trio.sleep_until(start + elapsed_s)

"""The store's own counters and their samples, as Apache's StoreStatsService keeps them.

Puts (per topic, times and bytes, failures, how long each took), gets (found, missed, messages
handed out) and, sampled once a second by the broker, their rates over the last 10, 60 and 600
seconds. GET_BROKER_RUNTIME_INFO (mqadmin brokerStatus, clusterList, the dashboard, the exporter)
and the Prometheus endpoint read them.

Synchronous and clock-free: the caller passes the time to :meth:`StoreStats.sample`, so tests
drive the windows without waiting.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass

from pyrmq.codec.text import java_double

# Samples kept: one a second for the longest window (600 s), plus the one it starts from.
MAX_SAMPLES = 600
TPS_WINDOWS_S = (10, 60, 600)

# The coarse put-time distribution of mqadmin brokerStatus (ms upper bounds, exclusive, after the
# first: "<= 0 ms"); the names are Apache's, which the exporter's pmdt metrics follow.
PUT_TIME_DESC = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
                 "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")
_PUT_TIME_BOUNDS = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)


def _fine_bounds() -> tuple[int, ...]:
    """The finer buckets the put latency percentiles are read from (ms, inclusive upper bounds):
    1 ms steps to 20 ms, then 2, 5, 10, 50, 100 and 1000 ms steps to 10 s, as Apache's."""
    bounds: list[int] = []
    edge = 0
    for step, count in ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9)):
        for _ in range(count):
            edge += step
            bounds.append(edge)
    return tuple(bounds)


_FINE_BOUNDS = _fine_bounds()


@dataclass(frozen=True, slots=True)
class CallSnapshot:
    """A counter's value at one moment: ``times`` calls that added up to ``value``."""

    timestamp_ms: int
    times: int
    value: int = 0


def tps(before: CallSnapshot, after: CallSnapshot) -> float:
    """Calls per second between two snapshots (0 when they share a timestamp)."""
    elapsed = after.timestamp_ms - before.timestamp_ms
    return (after.times - before.times) * 1000.0 / elapsed if elapsed > 0 else 0.0


class _Samples:
    """One counter's per-second snapshots."""

    __slots__ = ("snapshots",)

    def __init__(self) -> None:
        self.snapshots: deque[CallSnapshot] = deque(maxlen=MAX_SAMPLES + 1)

    def add(self, now_ms: int, total: int) -> None:
        self.snapshots.append(CallSnapshot(now_ms, total))

    def rate(self, seconds: int) -> float | None:
        """The rate over the last ``seconds`` samples; None until that many were taken."""
        snaps = self.snapshots
        if len(snaps) <= seconds:
            return None
        return tps(snaps[-1 - seconds], snaps[-1])


def _rate_text(rate: float | None) -> str:
    # Apache prints nothing for a window not yet covered
    return "" if rate is None else java_double(rate)


class StoreStats:
    """Put and get counters of one store (the broker increments nothing here itself)."""

    def __init__(self, boot_timestamp_ms: int) -> None:
        self.boot_timestamp_ms = boot_timestamp_ms
        # messages and bytes stored (Apache counts them per topic and reads only their sums)
        self._put_messages = 0
        self._put_bytes = 0
        self.put_failed_times = 0
        self.put_entire_time_max_ms = 0
        self.get_entire_time_max_ms = 0
        self.get_found_times = 0
        self.get_miss_times = 0
        self.get_transferred_msgs = 0
        # found reads by where their data was, by Apache's rule (older than the memory share of
        # RAM: on disk): the page cache hit estimate
        self.get_in_memory_times = 0
        self.get_from_disk_times = 0
        self.dispatch_max_buffer = 0
        # the distributions being counted, and the last minute's (what brokerStatus shows)
        self._put_times = [0] * len(PUT_TIME_DESC)
        self.last_put_times: list[int] | None = None
        self._fine = [0] * (len(_FINE_BOUNDS) + 1)
        self._last_fine = [0] * (len(_FINE_BOUNDS) + 1)
        self._put_samples = _Samples()
        self._found_samples = _Samples()
        self._miss_samples = _Samples()
        self._transferred_samples = _Samples()

    # ------------------------------------------------------------------ counting (hot path)

    def on_put(self, msg_num: int, wrote_bytes: int, elapsed_ms: int) -> None:
        self._put_messages += msg_num
        self._put_bytes += wrote_bytes
        if elapsed_ms <= 0:     # nearly every put: it is an mmap write
            self._put_times[0] += 1
            self._fine[0] += 1
            return
        self._put_times[bisect_left(_PUT_TIME_BOUNDS, elapsed_ms + 1)] += 1
        self._fine[bisect_left(_FINE_BOUNDS, elapsed_ms)] += 1
        if elapsed_ms > self.put_entire_time_max_ms:
            self.put_entire_time_max_ms = elapsed_ms

    def on_put_failed(self) -> None:
        self.put_failed_times += 1

    def on_get(self, message_count: int, elapsed_ms: int, from_disk: bool = False) -> None:
        """One read of a queue: found when it returned messages."""
        if message_count:
            self.get_found_times += 1
            self.get_transferred_msgs += message_count
            if from_disk:
                self.get_from_disk_times += 1
            else:
                self.get_in_memory_times += 1
        else:
            self.get_miss_times += 1
        if elapsed_ms > self.get_entire_time_max_ms:
            self.get_entire_time_max_ms = elapsed_ms

    # ------------------------------------------------------------------ totals

    def page_cache_hit_estimate(self) -> float:
        """The share of found reads whose data was within the in-memory window; NaN before any."""
        reads = self.get_in_memory_times + self.get_from_disk_times
        return self.get_in_memory_times / reads if reads else float("nan")

    def put_times_total(self) -> int:
        return self._put_messages

    def put_size_total(self) -> int:
        return self._put_bytes

    # ------------------------------------------------------------------ sampling (the broker's clock)

    def sample(self, now_ms: int) -> None:
        """Once a second."""
        self._put_samples.add(now_ms, self.put_times_total())
        self._found_samples.add(now_ms, self.get_found_times)
        self._miss_samples.add(now_ms, self.get_miss_times)
        self._transferred_samples.add(now_ms, self.get_transferred_msgs)

    def rotate_put_times(self) -> None:
        """Once a minute: the distributions counted so far become the ones shown."""
        self.last_put_times, self._put_times = self._put_times, [0] * len(PUT_TIME_DESC)
        self._last_fine, self._fine = self._fine, [0] * (len(_FINE_BOUNDS) + 1)

    def put_tps(self, seconds: int) -> float | None:
        return self._put_samples.rate(seconds)

    def get_found_tps(self, seconds: int) -> float | None:
        return self._found_samples.rate(seconds)

    def get_miss_tps(self, seconds: int) -> float:
        # Apache adds found and missed here (its "getMissTps" is the rate of all reads)
        return (self._found_samples.rate(seconds) or 0.0) + (self._miss_samples.rate(seconds) or 0.0)

    def get_total_tps(self, seconds: int) -> float:
        return self.get_miss_tps(seconds)

    def get_transferred_tps(self, seconds: int) -> float | None:
        return self._transferred_samples.rate(seconds)

    def put_latency_percentile(self, fraction: float) -> float:
        """The put time (ms) under which ``fraction`` of last minute's puts took, interpolated in
        its bucket."""
        counts = self._last_fine
        target = int(sum(counts) * fraction)
        passed = 0
        bounds = (*_FINE_BOUNDS, _FINE_BOUNDS[-1] * 2)
        for i, count in enumerate(counts):
            if target <= passed + count:
                low = bounds[i - 1] if i else 0
                return low + ((bounds[i] - low) * (target - passed) / count if count else 0.0)
            passed += count
        return 0.0

    def runtime_info(self, now_ms: int) -> dict[str, str]:
        """The store's part of GET_BROKER_RUNTIME_INFO, Apache's keys and text forms."""
        total = self.put_times_total() or 1   # Apache divides by it
        size = self.put_size_total()
        last = self.last_put_times
        distribution = "null" if last is None else \
            "".join(f"{desc}:{n} " for desc, n in zip(PUT_TIME_DESC, last))
        return {
            "bootTimestamp": str(self.boot_timestamp_ms),
            "runtime": format_runtime(now_ms - self.boot_timestamp_ms),
            "putMessageEntireTimeMax": str(self.put_entire_time_max_ms),
            "putMessageTimesTotal": str(total),
            "putMessageFailedTimes": str(self.put_failed_times),
            "putMessageSizeTotal": str(size),
            "putMessageDistributeTime": distribution,
            "putMessageAverageSize": java_double(size / total),
            "dispatchMaxBuffer": str(self.dispatch_max_buffer),
            "getMessageEntireTimeMax": str(self.get_entire_time_max_ms),
            "putTps": " ".join(_rate_text(self.put_tps(s)) for s in TPS_WINDOWS_S),
            "getFoundTps": " ".join(_rate_text(self.get_found_tps(s)) for s in TPS_WINDOWS_S),
            "getMissTps": " ".join(_rate_text(self.get_miss_tps(s)) for s in TPS_WINDOWS_S),
            "getTotalTps": " ".join(_rate_text(self.get_total_tps(s)) for s in TPS_WINDOWS_S),
            "getTransferedTps": " ".join(_rate_text(self.get_transferred_tps(s)) for s in TPS_WINDOWS_S),
            "putLatency99": f"{self.put_latency_percentile(0.99):.2f}",
            "putLatency999": f"{self.put_latency_percentile(0.999):.2f}",
        }


def format_runtime(elapsed_ms: int) -> str:
    """How long the store has run, as Apache writes it: ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``."""
    seconds = max(0, elapsed_ms) // 1000
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"

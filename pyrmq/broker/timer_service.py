"""5.x timer messages on the broker: the send-side transform (Apache 5.3 HookUtils
``checkIfTimerMessage`` / ``transformTimerMessage``) and the service that runs the timing wheel
(:mod:`pyrmq.store.timer_store`): taking messages in, delivering them when due, and flushing its
files in a worker thread.  Design and crash behaviour: docs/MESSAGING.md, "Timer messages"."""

from __future__ import annotations

import logging
import os
import time
from typing import Callable

import trio

from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.message import MessageConst
from pyrmq.common.guard import ServiceGuard
from pyrmq.store.message_store import DefaultMessageStore, MessageStoreConfig
from pyrmq.codec.system_topics import TIMER_TOPIC
from pyrmq.store.timer_store import TimerMessageStore, round_deliver_ms

log = logging.getLogger(__name__)

# Apache waits 100 ms * precision / 1000 between rounds when there is nothing to do; pyrmq also
# wakes at the next slot boundary so that a due slot is delivered as soon as it has passed.
_MAX_SLEEP_S = 0.1
_INT64 = 1 << 64
TIMER_KEYS = (MessageConst.PROPERTY_TIMER_DELIVER_MS, MessageConst.PROPERTY_TIMER_DELAY_SEC,
              MessageConst.PROPERTY_TIMER_DELAY_MS)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _java_long(value: int) -> int:
    """``value`` wrapped as Java's long arithmetic wraps it."""
    value %= _INT64
    return value - _INT64 if value >= _INT64 // 2 else value


def _parse_long(text: str) -> int:
    """Java Long.parseLong: optional sign, ASCII digits, within range; ValueError otherwise."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise ValueError(text)
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(text)
    return value


def timer_illegal_remark(config: MessageStoreConfig) -> str:
    return ("timer message illegal, the delay time should not be bigger than the max delay "
            f"{config.timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger than the "
            "current time")


def clear_timer_properties(properties: dict[str, str]) -> None:
    """A message with a delay level ignores the timer properties (Apache removes them)."""
    for key in TIMER_KEYS:
        properties.pop(key, None)


def is_timer_message(properties: dict[str, str], topic: str) -> bool:
    """Apache's checkIfTimerMessage for a message without a delay level."""
    if topic == TIMER_TOPIC or MessageConst.PROPERTY_TIMER_OUT_MS in properties:
        return False   # taken in already (a delivered timer message keeps TIMER_OUT_MS)
    return not properties.keys().isdisjoint(TIMER_KEYS)


def transform_timer_message(properties: dict[str, str], topic: str, queue_id: int, config: MessageStoreConfig,
                            now_ms: int) -> tuple[str, int] | tuple[int, str] | None:
    """Park a timer message: returns ``(TIMER_TOPIC, 0)`` with TIMER_OUT_MS, REAL_TOPIC and REAL_QID
    added to ``properties``; ``(response code, remark)`` when it is refused; None when it is not
    a timer message or already due (then it is stored as it is, timer properties and all)."""
    if not is_timer_message(properties, topic):
        return None
    if not config.timer_wheel_enable:
        return (ResponseCode.SYSTEM_ERROR,
                f"accurate timer message is not enabled, timerWheelEnable is {str(config.timer_wheel_enable).lower()}")
    try:
        if MessageConst.PROPERTY_TIMER_DELAY_SEC in properties:
            deliver_ms = _java_long(now_ms + _parse_long(properties[MessageConst.PROPERTY_TIMER_DELAY_SEC]) * 1000)
        elif MessageConst.PROPERTY_TIMER_DELAY_MS in properties:
            deliver_ms = _java_long(now_ms + _parse_long(properties[MessageConst.PROPERTY_TIMER_DELAY_MS]))
        else:
            deliver_ms = _parse_long(properties[MessageConst.PROPERTY_TIMER_DELIVER_MS])
    except ValueError:
        return ResponseCode.MESSAGE_ILLEGAL, timer_illegal_remark(config)
    if deliver_ms > now_ms:
        if deliver_ms - now_ms > config.timer_max_delay_sec * 1000:
            return ResponseCode.MESSAGE_ILLEGAL, timer_illegal_remark(config)
        deliver_ms = round_deliver_ms(deliver_ms, config.timer_precision_ms)
        properties[MessageConst.PROPERTY_TIMER_OUT_MS] = str(deliver_ms)
        properties[MessageConst.PROPERTY_REAL_TOPIC] = topic
        properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return TIMER_TOPIC, 0
    if MessageConst.PROPERTY_TIMER_DEL_UNIQKEY in properties:
        return ResponseCode.MESSAGE_ILLEGAL, timer_illegal_remark(config)
    return None


class TimerService:
    """Runs the timing wheel on the trio loop; files are synced by worker threads."""

    def __init__(self, store: DefaultMessageStore, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.store = store
        self.config = store.config
        self.clock = clock
        self.timer_store = TimerMessageStore(
            store.config, read_record=store.select_one_message_by_offset,
            put=lambda message: store.put_message(message).status,
            timer_queue=lambda: store.find_consume_queue(TIMER_TOPIC, 0))
        self._last_flush = 0.0
        self._load_failed = False

    @property
    def opened(self) -> bool:
        return self.timer_store.log is not None

    def needed(self) -> bool:
        """The timer files are made with the first timer message: a broker that never gets one
        never takes their disk space (6 MB of wheel by default)."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        return os.path.isdir(self.config.timer_dir()) or (cq is not None and cq.get_max_offset_in_queue() > 0)

    def load(self) -> None:
        """Open and recover the timer files if there are any (blocking: with the store's load).
        A file that cannot be made (a full disk) leaves the timer closed, to be tried again by
        the loop; the broker serves meanwhile and the timer messages wait in their topic."""
        if not self.needed():
            return
        try:
            self.timer_store.load(self.clock())
            self._load_failed = False
        except OSError as exc:
            self.timer_store.close()
            if not self._load_failed:
                log.error("timer: cannot open the timer files (%s); timer messages wait until they can be", exc)
            self._load_failed = True

    def tick(self) -> int:
        """Take in what arrived, deliver what is due; returns the work done (0: nothing)."""
        if not self.opened:
            return 0
        now = self.clock()
        work = self.timer_store.enqueue(now)
        return work + self.timer_store.dequeue(now)

    def _sleep_s(self) -> float:
        precision = self.config.timer_precision_ms
        now = self.clock()
        next_boundary = (now // precision + 1) * precision
        return max(0.001, min(_MAX_SLEEP_S, (next_boundary - now) / 1000 + 0.001))

    async def run(self) -> None:
        guard = ServiceGuard("timer message delivery", log)
        interval = self.config.timer_flush_interval_ms / 1000
        while True:
            work = 0
            with guard.round():
                if not self.opened and self.needed() and trio.current_time() - self._last_flush >= interval:
                    self._last_flush = trio.current_time()   # at most one attempt per flush interval
                    # the first timer message: the files are made in a worker thread; a full
                    # disk is logged and retried, the messages wait in the timer topic
                    await trio.to_thread.run_sync(self.load)
                work = self.tick()
                if self.opened and trio.current_time() - self._last_flush >= interval:
                    self._last_flush = trio.current_time()
                    point = self.timer_store.flush_point()
                    await trio.to_thread.run_sync(self.timer_store.flush, point)
            # a round that did a full batch goes on at once (after letting others run)
            await trio.sleep(0 if work >= 4096 else self._sleep_s())

    def shutdown(self) -> None:
        """Final flush and close (blocking; the broker's stop runs it in a worker thread)."""
        if self.timer_store.log is None:
            return
        try:
            self.timer_store.flush(self.timer_store.flush_point())
        except OSError as exc:
            log.error("flushing the timer files at shutdown failed: %s", exc)
        self.timer_store.close()

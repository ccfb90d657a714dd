"""5.x timer messages: a persistent timing wheel with a log (Apache 5's TimerMessageStore, in
pyrmq's own format; docs/MESSAGING.md "Timer messages" has the design and the crash behaviour).

A timer message is stored in ``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS (its delivery
time, rounded to ``timerPrecisionMs``) and REAL_TOPIC / REAL_QID.  This store

- **enqueues**: reads that consume queue from a checkpointed offset; per message one timer log
  unit is appended (its ``prev_pos`` is the slot's previous newest unit) and the slot of its
  delivery time is pointed at it -- O(1);
- **dequeues**: walks the wheel one slot (one precision interval) at a time; a slot whose time has
  passed is followed newest -> oldest through the log, and its messages are put, oldest first, to
  their real topic and queue with TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS added -- O(1) per message,
  O(1) per empty slot;
- **checkpoints** in a mapped page: what the flusher made durable (log position and consume queue
  offset, written after the log and the wheel were synced, in a worker thread) and how far
  delivery went (read time, the slot being delivered and how many of its messages were put,
  updated as it goes so that a kill -9 loses nothing of it).

Files, under ``<store>/pyrmq-timer/``: ``log/`` (fixed 56-byte units in files named by offset),
``wheel`` (one 24-byte slot per precision interval of the longest delay, plus a margin),
``checkpoint`` (one page).  Layouts: :mod:`pyrmq.codec.timer_formats`.

Synchronous and single-threaded except :meth:`TimerMessageStore.flush`, which a worker thread runs
while the owner goes on appending (the log's flush takes no lock the append takes).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Callable

from pyrmq.codec.message import (
    MessageConst,
    MessageFormatError,
    decode_message,
    property_value,
    record_properties_string,
    tags_string_to_tags_code,
)
from pyrmq.codec.message_props import NAME_VALUE_SEPARATOR, properties_to_string, real_destination
from pyrmq.codec.timer_formats import (
    TIMER_FLAG_DELETE,
    TIMER_FLAG_IMMEDIATE,
    TIMER_LOG_UNIT_SIZE,
    pack_timer_log_unit,
)
from pyrmq.store import crash_points
from pyrmq.store.mapped_file import MappedFile
from pyrmq.store.timer_files import LogUnit, TimerCheckpoint, TimerLog, TimerWheel
from pyrmq.store.model import MessageExtBrokerInner, MessageStoreConfig, PutMessageStatus

log = logging.getLogger(__name__)
_CRASH = crash_points.armed("timer.unit_appended", "timer.delivered_one", "timer.read_time_moved",
                            "timer.flushed_before_checkpoint")

# Slots beyond the longest delay: room for the clock to move while a message is taken in.
BLANK_SLOTS = 60
# Java decodes a stored record's properties into HashMap(128): the delivered copy's string
# follows that map's iteration order (properties_to_string's bucket count).
_JAVA_DECODE_MAP_ENTRIES = 96
# TIMER_ENQUEUE_MS of a message that was due when it was taken in (Apache: Long.MAX_VALUE)
NEVER_ENQUEUED = (1 << 63) - 1
# Put outcomes after which a message is given up rather than retried (Apache's PUT_NO_RETRY)
_NO_RETRY = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)

_TIMER_OUT = MessageConst.PROPERTY_TIMER_OUT_MS + NAME_VALUE_SEPARATOR
_DEL_KEY = MessageConst.PROPERTY_TIMER_DEL_UNIQKEY + NAME_VALUE_SEPARATOR


def delete_key(real_topic: str, uniq_key: str) -> str:
    """What TIMER_DEL_UNIQKEY holds to cancel a message (Apache buildDeleteKey)."""
    return f"{real_topic}+{uniq_key}"


def round_deliver_ms(deliver_ms: int, precision_ms: int) -> int:
    """Apache's rounding of a delivery time to its slot: down to the precision, and an exact
    multiple one slot earlier (the slot is delivered once its whole interval has passed)."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


@dataclass
class TimerStats:
    enqueued: int = 0   # units taken into the wheel
    delivered: int = 0   # messages put to their real topic
    recalled: int = 0   # messages a recall marker cancelled
    possible_duplicates: int = 0   # messages a crash may make delivered twice (reported at start)


Putter = Callable[[MessageExtBrokerInner], PutMessageStatus]
Reader = Callable[[int], "memoryview | None"]


class TimerMessageStore:
    """Enqueue from the timer topic's consume queue, dequeue slot by slot; see the module docstring.

    ``read_record(offset)`` returns a stored record, ``put(message)`` stores one, and
    ``timer_queue()`` the rmq_sys_wheel_timer consume queue (or None): the message store's, or a
    test's.  Times are passed in (``now_ms``): the broker's service gives the wall clock.
    """

    def __init__(self, config: MessageStoreConfig, *, read_record: Reader, put: Putter,
                 timer_queue: Callable[[], object]) -> None:
        self.config = config
        self.precision_ms = config.timer_precision_ms
        # the wheel spans the longest delay plus a margin: no message ever needs to go round twice
        self.slots = -(-config.timer_max_delay_sec * 1000 // self.precision_ms) + 2 * BLANK_SLOTS
        self.span_ms = self.slots * self.precision_ms
        self.roll_ms = (self.slots - BLANK_SLOTS) * self.precision_ms
        self.read_record = read_record
        self._put = put
        self.timer_queue = timer_queue
        self.stats = TimerStats()
        self.queue_offset = 0   # next rmq_sys_wheel_timer unit to take in
        self.read_time_ms = -1   # every slot before it is delivered
        self.write_time_ms = -1   # the wheel's "now" (a multiple of the precision)
        self.checkpoint: TimerCheckpoint | None = None
        self.wheel: TimerWheel | None = None
        self.log: TimerLog | None = None
        self._delivering_keys: set[str] | None = None

    # ------------------------------------------------------------------ lifecycle

    def load(self, now_ms: int) -> None:
        """Open (or create) the files and recover; blocking, run before serving."""
        directory = self.config.timer_dir()
        os.makedirs(directory, exist_ok=True)
        self.checkpoint = ckpt = TimerCheckpoint(os.path.join(directory, "checkpoint"), self.precision_ms, self.slots)
        self.wheel = TimerWheel(os.path.join(directory, "wheel"), self.slots, self.precision_ms)
        self.log = TimerLog(os.path.join(directory, "log"), self.config.mapped_file_size_timer_log)
        flushed_pos = ckpt.get("flushed_log_pos")
        rebuild = self.wheel.created or ckpt.geometry_changed
        end, units, torn = self.log.recover(0 if rebuild else flushed_pos)
        self.read_time_ms = ckpt.get("read_time_ms")
        if self.read_time_ms < 0:
            self.read_time_ms = now_ms
        # a multiple of the precision (another precision since the last run: its slot)
        self.read_time_ms = self.read_time_ms // self.precision_ms * self.precision_ms
        ckpt.set("read_time_ms", self.read_time_ms)
        if not rebuild and (torn or end < ckpt.get("log_end")):
            # units that the wheel may point at are gone (a power loss, a unit cut in half): the
            # wheel is rebuilt from the log -- the one start-up that reads every pending unit
            log.warning("timer: the log ends at %d (%s, %d last written); rebuilding the wheel",
                        end, "a torn unit" if torn else "units lost", ckpt.get("log_end"))
            rebuild = True
            units = list(self.log.units_from(0))
        if rebuild:
            self.wheel.reset()
        queue_offset = ckpt.get("flushed_queue_offset")
        for pos, unit in units:
            flags, _prev, deliver_ms, _enq, _off, _size, unit_queue_offset = unit
            queue_offset = max(queue_offset, unit_queue_offset + 1)
            if rebuild:   # slot times of another precision become this one's
                deliver_ms = deliver_ms // self.precision_ms * self.precision_ms
            if flags & TIMER_FLAG_IMMEDIATE or deliver_ms < self.read_time_ms:
                continue
            last_pos, num = self.wheel.get(deliver_ms)
            if last_pos < pos:   # linked already when last_pos >= pos (and < end: no rebuild then)
                self._relink(pos, unit, last_pos, num, rebuild)
        self.queue_offset = queue_offset
        ckpt.set("log_end", end)
        self.log.prepare_next_file()
        delivering = ckpt.get("delivering_ms")
        if delivering == self.read_time_ms:
            done = ckpt.get("delivered_in_slot")
            _, num = self.wheel.get(delivering)
            if num > done:
                # the message being put when the broker stopped may be put again
                self.stats.possible_duplicates = 1
                log.warning("timer: delivery of slot %d was interrupted after %d of %d messages; the next "
                            "one may be delivered twice", delivering, done, num)
        log.info("timer store loaded: read time %d, consume queue offset %d, log end %d%s", self.read_time_ms,
                 self.queue_offset, end, " (wheel rebuilt)" if rebuild else "")

    def _relink(self, pos: int, unit: LogUnit, last_pos: int, num: int,
                rebuild: bool) -> None:
        assert self.wheel is not None and self.log is not None
        flags, prev, deliver_ms, enqueue_ms, offset, size, queue_offset = unit
        slot_ms = deliver_ms // self.precision_ms * self.precision_ms
        if rebuild and (prev != last_pos or slot_ms != deliver_ms):
            # the chain is rebuilt from the units themselves: rewrite the link in place
            deliver_ms = slot_ms
            mf = self.log.queue.find_mapped_file_by_offset(pos)
            assert mf is not None
            rel = pos - mf.file_from_offset
            mf.view[rel:rel + TIMER_LOG_UNIT_SIZE] = pack_timer_log_unit(
                flags, last_pos, deliver_ms, enqueue_ms, offset, size, queue_offset)
        self.wheel.put(deliver_ms, pos, num + 1)

    def flush(self, point: tuple[int, int, list[MappedFile]]) -> None:
        """Make the log and the wheel durable, then record what they hold, then delete log files
        that are all delivered (worker thread).  ``point`` is :meth:`flush_point`, taken on the
        owner's thread."""
        assert self.log is not None and self.wheel is not None and self.checkpoint is not None
        log_pos, queue_offset, expired = point
        self.log.flush()
        self.wheel.sync()
        if _CRASH:
            crash_points.reach("timer.flushed_before_checkpoint")
        self.checkpoint.set("flushed_log_pos", log_pos)
        self.checkpoint.set("flushed_queue_offset", queue_offset)
        self.checkpoint.sync()
        for mf in expired:
            if self.log.queue.delete_first_file(mf):
                log.info("timer: deleted log file %s (all delivered)", mf.file_name)
        self.log.prepare_next_file()

    def flush_point(self) -> tuple[int, int, list[MappedFile]]:
        """What a flush may claim (the log's end and the consume queue offset, consistent with
        each other) and the log files it may delete."""
        assert self.log is not None
        return self.log.end, self.queue_offset, self.log.expired_files(self.read_time_ms - self.span_ms)

    def close(self) -> None:
        for part in (self.log, self.wheel, self.checkpoint):
            if part is not None:
                part.close()
        self.log = self.wheel = self.checkpoint = None

    # ------------------------------------------------------------------ enqueue

    def enqueue(self, now_ms: int, max_units: int = 4096) -> int:
        """Take in the timer topic's new consume queue units; returns how many."""
        cq = self.timer_queue()
        if cq is None:
            return 0
        self._move_write_time(now_ms)
        offset = max(self.queue_offset, cq.get_min_offset_in_queue())   # type: ignore[attr-defined]
        done = 0
        for commit_log_offset, size, _tags in cq.iter_units(offset, max_units):   # type: ignore[attr-defined]
            if not self._enqueue_one(commit_log_offset, size, offset, now_ms):
                break
            offset += 1
            done += 1
            self.queue_offset = offset
        return done

    def _move_write_time(self, now_ms: int) -> None:
        write_time = now_ms // self.precision_ms * self.precision_ms
        if write_time > self.write_time_ms:
            self.write_time_ms = write_time

    def _enqueue_one(self, commit_log_offset: int, size: int, queue_offset: int, now_ms: int) -> bool:
        record = self.read_record(commit_log_offset)
        if record is None:
            log.warning("timer: message at commit log offset %d is gone; skipped", commit_log_offset)
            return True
        try:
            props = record_properties_string(record)
            deliver_ms = int(property_value(props, _TIMER_OUT) or "")
        except (MessageFormatError, ValueError):
            log.warning("timer: message at commit log offset %d has no TIMER_OUT_MS; skipped", commit_log_offset)
            return True
        flags = TIMER_FLAG_DELETE if property_value(props, _DEL_KEY) else 0
        # its slot (already rounded when sent -- unless sent under another timerPrecisionMs)
        deliver_ms = deliver_ms // self.precision_ms * self.precision_ms
        if deliver_ms < self.write_time_ms:
            # due already (taken in late): put now, as Apache, marked as never enqueued
            if not flags & TIMER_FLAG_DELETE:
                status = self._deliver(record, NEVER_ENQUEUED, now_ms)
                if status is None:
                    return False
            return self._append(TIMER_FLAG_IMMEDIATE | flags, deliver_ms, commit_log_offset, size, queue_offset,
                                link=False)
        if deliver_ms - self.write_time_ms >= self.roll_ms:
            # beyond the wheel (a longer maximum delay when it was sent): parked in the wheel's
            # last slot for now and taken in again from there
            deliver_ms = self.write_time_ms + self.roll_ms - self.precision_ms
        return self._append(flags, deliver_ms, commit_log_offset, size, queue_offset, link=True)

    def _append(self, flags: int, deliver_ms: int, commit_log_offset: int, size: int, queue_offset: int, *,
                link: bool) -> bool:
        assert self.wheel is not None and self.log is not None and self.checkpoint is not None
        last_pos, num = self.wheel.get(deliver_ms) if link else (-1, 0)
        unit = pack_timer_log_unit(flags, last_pos, deliver_ms, self.write_time_ms, commit_log_offset, size,
                                   queue_offset)
        try:
            pos = self.log.append(unit)
        except OSError as exc:
            log.error("timer: cannot write the timer log (%s); retrying", exc)
            return False
        self.checkpoint.set("log_end", pos + TIMER_LOG_UNIT_SIZE)
        if _CRASH:
            crash_points.reach("timer.unit_appended")
        if link:
            self.wheel.put(deliver_ms, pos, num + 1)
            self.stats.enqueued += 1
        return True

    # ------------------------------------------------------------------ dequeue

    def dequeue(self, now_ms: int, max_messages: int = 4096) -> int:
        """Deliver every slot whose interval has passed; returns how many messages were put.
        Stops early (to be called again) after ``max_messages`` or when a put fails."""
        assert self.wheel is not None and self.checkpoint is not None
        self._move_write_time(now_ms)
        delivered = 0
        if self.write_time_ms - self.read_time_ms > self.span_ms:
            delivered += self._catch_up(now_ms)
        while self.read_time_ms < self.write_time_ms and delivered < max_messages:
            slot_time = self.read_time_ms
            last_pos, num = self.wheel.get(slot_time)
            if num > 0 or last_pos >= 0:
                result = self._deliver_slot(slot_time, last_pos, now_ms)
                if result is None:
                    return delivered
                delivered += result
                self._slot_done(slot_time, slot_time + self.precision_ms)
            else:   # an empty slot: only the read time moves
                self.read_time_ms = slot_time + self.precision_ms
                self.checkpoint.set("read_time_ms", self.read_time_ms)
        return delivered

    def _slot_done(self, slot_time: int | None, read_time: int) -> None:
        """The read time moves past the slot before the slot is cleared: a crash in between
        leaves a slot no walk visits again, never one walked twice."""
        assert self.wheel is not None and self.checkpoint is not None
        if read_time > self.read_time_ms:
            self.read_time_ms = read_time
            self.checkpoint.set("read_time_ms", read_time)
        if _CRASH:
            crash_points.reach("timer.read_time_moved")
        if slot_time is not None:
            self.wheel.clear(slot_time)
        self.checkpoint.set("delivering_ms", -1)
        self.checkpoint.set("delivered_in_slot", 0)

    def _catch_up(self, now_ms: int) -> int:
        """After a stop longer than the wheel's span: every slot still holding messages is due;
        walked by index (the times are no longer in order)."""
        assert self.wheel is not None and self.checkpoint is not None
        log.warning("timer: %d ms behind, more than the wheel's span; delivering every pending slot",
                    self.write_time_ms - self.read_time_ms)
        delivered = 0
        for index in range(self.slots):
            slot_time = self.wheel.slot_time_at(index)
            if self.read_time_ms <= slot_time < self.write_time_ms:
                last_pos, _num = self.wheel.get(slot_time)
                result = self._deliver_slot(slot_time, last_pos, now_ms)
                if result is None:
                    return delivered
                delivered += result
                self._slot_done(slot_time, self.read_time_ms)
        self._slot_done(None, self.write_time_ms)
        return delivered

    def _chain(self, slot_time: int, last_pos: int) -> list[tuple[int, int, int, int, int]]:
        """The slot's units oldest first: (flags, deliver_ms, enqueue_ms, offset, size)."""
        assert self.log is not None
        units = []
        pos = last_pos
        seen = 0
        while pos >= 0:
            unit = self.log.read(pos)
            if unit is None or unit[2] != slot_time:
                log.error("timer: slot %d links to an invalid unit at %d; the rest of its chain is lost",
                          slot_time, pos)
                break
            flags, prev, deliver_ms, enqueue_ms, offset, size, _queue_offset = unit
            units.append((flags, deliver_ms, enqueue_ms, offset, size))
            seen += 1
            if prev >= pos:   # links only go back: anything else is damage, not a chain
                break
            pos = prev
        units.reverse()
        return units

    def _deliver_slot(self, slot_time: int, last_pos: int, now_ms: int) -> int | None:
        """Put the slot's messages; None when a put failed (retried from the same message)."""
        assert self.wheel is not None and self.checkpoint is not None
        ckpt = self.checkpoint
        if ckpt.get("delivering_ms") != slot_time:
            ckpt.set("delivered_in_slot", 0)
            ckpt.set("delivering_ms", slot_time)
        done = ckpt.get("delivered_in_slot")
        units = self._chain(slot_time, last_pos)
        deleted = self._recalled(units)
        delivered = 0
        for i in range(done, len(units)):
            flags, deliver_ms, enqueue_ms, offset, size = units[i]
            if not flags & TIMER_FLAG_DELETE:
                record = self.read_record(offset)
                if record is None:
                    log.warning("timer: message at commit log offset %d is gone; skipped", offset)
                else:
                    status = self._deliver(record, enqueue_ms, now_ms, deleted, slot_time)
                    if status is None:
                        return None
                    delivered += status
            if _CRASH:
                crash_points.reach("timer.delivered_one")
            ckpt.set("delivered_in_slot", i + 1)
        return delivered

    def _recalled(self, units: list[tuple[int, int, int, int, int]]) -> set[str]:
        keys: set[str] = set()
        for flags, _d, _e, offset, _s in units:
            if flags & TIMER_FLAG_DELETE:
                record = self.read_record(offset)
                if record is not None:
                    key = property_value(record_properties_string(record), _DEL_KEY)
                    if key:
                        keys.add(key)
        return keys

    def _deliver(self, record: memoryview, enqueue_ms: int, now_ms: int, deleted: set[str] | None = None,
                 slot_time: int | None = None) -> int | None:
        """Put the parked message to its real topic; 1 when put, 0 when dropped or cancelled,
        None when the put failed and must be retried."""
        try:
            msg, _ = decode_message(record)
        except MessageFormatError as exc:
            log.warning("timer: unreadable parked message (%s); skipped", exc)
            return 0
        props = dict(msg.properties)
        destination = real_destination(props)
        if destination is None:
            log.warning("timer: parked message at %d has no REAL_TOPIC/REAL_QID; dropped", msg.commit_log_offset)
            return 0
        real_topic, real_queue = destination
        uniq = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if deleted and uniq and delete_key(real_topic, uniq) in deleted:
            self.stats.recalled += 1
            return 0
        timer_out = props.get(MessageConst.PROPERTY_TIMER_OUT_MS)
        if (slot_time is not None and timer_out is not None and timer_out.isdigit()
                and int(timer_out) >= slot_time + self.precision_ms):
            # parked in a nearer slot because it was beyond the wheel: into its own slot now
            return self._reenqueue(msg.commit_log_offset, msg.store_size, int(timer_out))
        # As Apache's TimerMessageStore.convert: the two times are added, and the string is made
        # before REAL_TOPIC / REAL_QID leave the map -- the delivered copy keeps them
        props[MessageConst.PROPERTY_TIMER_ENQUEUE_MS] = str(enqueue_ms)
        props[MessageConst.PROPERTY_TIMER_DEQUEUE_MS] = str(now_ms)
        inner = MessageExtBrokerInner(
            topic=real_topic, queue_id=real_queue, flag=msg.flag, body=msg.body,
            properties_string=properties_to_string(props, _JAVA_DECODE_MAP_ENTRIES), sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
            reconsume_times=msg.reconsume_times,
            tags_code=tags_string_to_tags_code(props.get(MessageConst.PROPERTY_TAGS)))
        status = self._put(inner)
        if status is PutMessageStatus.PUT_OK:
            self.stats.delivered += 1
            return 1
        if status in _NO_RETRY:
            log.warning("timer: delivering the message at %d to %s refused (%s); dropped", msg.commit_log_offset,
                        real_topic, status.name)
            return 0
        log.warning("timer: delivering the message at %d to %s failed (%s); retrying", msg.commit_log_offset,
                    real_topic, status.name)
        return None

    def _reenqueue(self, commit_log_offset: int, size: int, deliver_ms: int) -> int | None:
        deliver_ms = deliver_ms // self.precision_ms * self.precision_ms
        if deliver_ms - self.write_time_ms >= self.roll_ms:
            deliver_ms = self.write_time_ms + self.roll_ms - self.precision_ms
        ok = self._append(0, deliver_ms, commit_log_offset, size, -1, link=True)
        return 0 if ok else None

    # ------------------------------------------------------------------ figures

    def pending(self) -> int:
        """Messages in the timer topic not yet taken in, plus those in the wheel (for operators):
        the wheel's part is the enqueued minus delivered count since start, so only a figure."""
        cq = self.timer_queue()
        behind = cq.get_max_offset_in_queue() - self.queue_offset if cq is not None else 0   # type: ignore[attr-defined]
        return max(0, behind)

"""The timer store's three files (pyrmq.store.timer_store): the checkpoint page, the timing
wheel and the timer log.  Layouts in :mod:`pyrmq.codec.timer_formats`; no policy here."""

from __future__ import annotations

import logging
import os
from typing import Iterator

from pyrmq.codec.timer_formats import (
    EMPTY_SLOT,
    INT64,
    TIMER_CHECKPOINT,
    TIMER_CHECKPOINT_MAGIC,
    TIMER_CHECKPOINT_OFFSETS,
    TIMER_CHECKPOINT_SIZE,
    TIMER_LOG_UNIT_SIZE,
    TIMER_SLOT,
    TIMER_SLOT_SIZE,
    unpack_timer_log_unit,
)
from pyrmq.store.mapped_file import FixedMapping, MappedFile
from pyrmq.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

LogUnit = tuple[int, int, int, int, int, int, int]


class TimerCheckpoint:
    """The one-page checkpoint, read and written in place through a mapping."""

    def __init__(self, path: str, precision_ms: int, slots: int) -> None:
        create = not os.path.exists(path)
        self.file = FixedMapping(path, TIMER_CHECKPOINT_SIZE, create=create, size_hint="one page",
                                 reserve_first=TIMER_CHECKPOINT_SIZE)
        magic, precision, stored_slots, *_ = TIMER_CHECKPOINT.unpack_from(self.file.view, 0)
        self.fresh = magic != TIMER_CHECKPOINT_MAGIC
        self.geometry_changed = not self.fresh and (precision, stored_slots) != (precision_ms, slots)
        if self.fresh:
            TIMER_CHECKPOINT.pack_into(self.file.view, 0, TIMER_CHECKPOINT_MAGIC, precision_ms, slots,
                                       0, 0, -1, -1, 0, 0)
        elif self.geometry_changed:
            TIMER_CHECKPOINT.pack_into(self.file.view, 0, TIMER_CHECKPOINT_MAGIC, precision_ms, slots,
                                       *TIMER_CHECKPOINT.unpack_from(self.file.view, 0)[3:])

    def get(self, name: str) -> int:
        value: int = INT64.unpack_from(self.file.view, TIMER_CHECKPOINT_OFFSETS[name])[0]
        return value

    def set(self, name: str, value: int) -> None:
        INT64.pack_into(self.file.view, TIMER_CHECKPOINT_OFFSETS[name], value)

    def sync(self) -> None:
        self.file.sync()

    def close(self) -> None:
        self.file.close()


class TimerWheel:
    """One slot per precision interval, indexed by ``time // precision % slots``; a slot whose
    time is not the one asked for is empty for it."""

    def __init__(self, path: str, slots: int, precision_ms: int) -> None:
        self.slots = slots
        self.precision_ms = precision_ms
        size = slots * TIMER_SLOT_SIZE
        if os.path.exists(path) and os.path.getsize(path) != size:
            os.unlink(path)   # another geometry: the caller rebuilds it from the log
        create = not os.path.exists(path)
        self.file = FixedMapping(path, size, create=create, size_hint="timer wheel slots", reserve_first=size)
        if create:
            self.reset()
        self.created = create

    def _pos(self, time_ms: int) -> int:
        return (time_ms // self.precision_ms) % self.slots * TIMER_SLOT_SIZE

    def get(self, time_ms: int) -> tuple[int, int]:
        """(last_pos, num) of the slot for ``time_ms``; (-1, 0) when it holds nothing for it."""
        slot_time, last_pos, num, _ = TIMER_SLOT.unpack_from(self.file.view, self._pos(time_ms))
        if slot_time != time_ms:
            return -1, 0
        return last_pos, num

    def slot_time_at(self, index: int) -> int:
        slot_time: int = TIMER_SLOT.unpack_from(self.file.view, index * TIMER_SLOT_SIZE)[0]
        return slot_time

    def put(self, time_ms: int, last_pos: int, num: int) -> None:
        TIMER_SLOT.pack_into(self.file.view, self._pos(time_ms), time_ms, last_pos, num, 0)

    def clear(self, time_ms: int) -> None:
        pos = self._pos(time_ms)
        self.file.view[pos:pos + TIMER_SLOT_SIZE] = EMPTY_SLOT

    def reset(self) -> None:
        self.file.view[:] = EMPTY_SLOT * self.slots

    def sync(self) -> None:
        self.file.sync()

    def close(self) -> None:
        self.file.close()


class TimerLog:
    """Append-only fixed-size units in files named by their first byte's offset."""

    def __init__(self, directory: str, file_size: int) -> None:
        units = max(1, -(-file_size // TIMER_LOG_UNIT_SIZE))
        self.queue = MappedFileQueue(directory, units * TIMER_LOG_UNIT_SIZE)

    @property
    def end(self) -> int:
        return self.queue.max_offset()

    def read(self, pos: int) -> LogUnit | None:
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel + TIMER_LOG_UNIT_SIZE > mf.wrote_position:
            return None
        try:
            return unpack_timer_log_unit(mf.view, rel)
        except ValueError:   # the file was deleted meanwhile (all its units were delivered)
            return None

    def expired_files(self, before_enqueue_ms: int) -> list[MappedFile]:
        """The first files whose last unit was taken in before ``before_enqueue_ms`` (every unit
        in them was delivered), never the last file."""
        found = []
        for mf in self.queue.mapped_files[:-1]:
            last = self.read(mf.file_from_offset + mf.file_size - TIMER_LOG_UNIT_SIZE)
            if last is None or last[3] >= before_enqueue_ms:
                break
            found.append(mf)
        return found

    def append(self, unit: bytes) -> int:
        """Write one unit at the end; returns its position.  Raises OSError when no file can be
        created or reserved (the caller retries later)."""
        mf = self.queue.get_last_mapped_file()
        wrote = mf.wrote_position
        end = wrote + TIMER_LOG_UNIT_SIZE
        if end > mf.reserved:
            mf.reserve_to(end)
        mf.view[wrote:end] = unit
        mf.wrote_position = end
        pos = mf.file_from_offset + wrote
        self.queue.commit(pos + TIMER_LOG_UNIT_SIZE)
        return pos

    def recover(self, from_pos: int) -> tuple[int, list[tuple[int, LogUnit]], bool]:
        """Find the end of valid units from ``from_pos`` (everything below it is trusted), zero
        what follows; returns (end, [(pos, unit)] of the valid units from ``from_pos``, whether
        the end is a torn unit rather than never-written zeros)."""
        self.queue.load()
        files = self.queue.mapped_files
        if not files:
            return 0, [], False
        start = max(from_pos, files[0].file_from_offset)
        found = []
        pos = start
        end = start
        torn = False
        for mf in files:
            if mf.file_from_offset + mf.file_size <= start:
                continue
            rel = max(0, pos - mf.file_from_offset)
            stop = False
            while rel + TIMER_LOG_UNIT_SIZE <= mf.file_size:
                unit = unpack_timer_log_unit(mf.view, rel)
                if unit is None:
                    torn = any(mf.view[rel:rel + TIMER_LOG_UNIT_SIZE])
                    stop = True
                    break
                found.append((mf.file_from_offset + rel, unit))
                rel += TIMER_LOG_UNIT_SIZE
            end = mf.file_from_offset + rel
            pos = end
            if stop:
                break
        self.queue.truncate_dirty_files(end, TIMER_LOG_UNIT_SIZE * 64)
        for mf in self.queue.mapped_files:
            mf.wrote_position = mf.flushed_position = max(0, min(mf.file_size, end - mf.file_from_offset))
            if mf.wrote_position:
                mf.reserved = max(mf.reserved, mf.wrote_position)
        return end, found, torn

    def units_from(self, pos: int) -> Iterator[tuple[int, LogUnit]]:
        """Every valid unit from ``pos`` to the end (the wheel's rebuild)."""
        end = self.end
        pos = max(pos, self.queue.min_offset())
        while pos < end:
            unit = self.read(pos)
            if unit is not None:
                yield pos, unit
            pos += TIMER_LOG_UNIT_SIZE

    def prepare_next_file(self) -> None:
        """Create the file appends go to next, ahead of need (blocking: the load or the flush
        thread), so that the trio loop's appends never create one: the first file, or the next
        one once the last is half full."""
        last = self.queue.last_mapped_file()
        if last is None:
            self.queue.get_last_mapped_file()
        elif last.wrote_position > last.file_size // 2 and not self.queue.next_file_prepared():
            self.queue.prepare_next_file()

    def flush(self) -> int:
        return self.queue.flush()

    def close(self) -> None:
        self.queue.close()

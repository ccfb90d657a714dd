"""One ConsumeQueue: the 20-byte index units of a (topic, queueId) (store.md §4).

Logical offset ``i`` is byte ``i * 20`` of the queue's address space; files are named by the
byte offset of their first unit.

Finding a queue's end at start-up.  A queue's files hold valid units, then zeros: units are
written in order, every truncation zeroes what it drops, and the zeroes are synced at once.  So
after a clean stop (and after a crash, for every queue no record since the checkpoint went to)
the end is found by a binary search over the units of the last file that starts with one --
about 20 unit reads for a full 300,000-unit file -- and nothing after it is read.  Only a queue
the commit log wrote to after the checkpoint may hold a torn tail after a crash (pages written
back out of order before a power loss); it is scanned unit by unit from its third-to-last file
as Apache does, and whatever follows its end is zeroed (holes skipped unread).  Apache reads
every queue's last files unit by unit at every start; start-up time here grows with the data
written since the checkpoint, not with the number of queues.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Iterator

from pyrmq.codec.store_formats import CQ_PRE_BLANK_SIZE, CQ_STORE_UNIT_SIZE, CQ_UNIT, is_ext_addr
from pyrmq.store.consume_queue_ext import ConsumeQueueExt
from pyrmq.store.mapped_file import MappedFile
from pyrmq.store.mapped_file_queue import MappedFileQueue
from pyrmq.store.model import DispatchError

log = logging.getLogger(__name__)

_UNIT = CQ_STORE_UNIT_SIZE
_PRE_BLANK_UNIT = CQ_UNIT.pack(0, CQ_PRE_BLANK_SIZE, 0)


def consume_queue_file_size(configured: int) -> int:
    """Round the configured size up to whole units, as Java does."""
    return -(-configured // _UNIT) * _UNIT


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, root_dir: str, mapped_file_size: int,
                 ext: ConsumeQueueExt | None = None) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = consume_queue_file_size(mapped_file_size)
        # units are read a few at a time, a page holds 204 of them: no read-around (mapped_file.py)
        self.mapped_file_queue = MappedFileQueue(
            os.path.join(root_dir, topic, str(queue_id)), self.mapped_file_size, random_access=True)
        self.max_physic_offset = -1  # end (offset + size) of the last unit written
        self.min_logic_offset = 0  # byte position of the first readable unit
        self.units_read_at_recovery = 0   # statistics: the work start-up did on this queue
        # with enableConsumeQueueExt: the side units a unit's tagsCode may address (store.md §4.5)
        self.ext = ext

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic!r}, {self.queue_id})"

    def load(self) -> None:
        self.mapped_file_queue.load()
        if self.ext is not None:
            self.ext.load()

    # ------------------------------------------------------------------ offsets

    def get_max_offset_in_queue(self) -> int:
        return self.mapped_file_queue.max_offset() // _UNIT

    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // _UNIT

    max_offset = property(get_max_offset_in_queue)
    min_offset = property(get_min_offset_in_queue)

    def roll_next_file(self, index: int) -> int:
        units = self.mapped_file_size // _UNIT
        return index + units - index % units

    # ------------------------------------------------------------------ writes

    def prepare_first_file(self, cq_offset: int) -> bool:
        """Create the first file of this empty queue, the one for ``cq_offset``'s unit, into its
        prepared slot; True if one was created. Blocking: a worker thread (FirstFileGate)."""
        return self.mapped_file_queue.prepare_first_file(cq_offset * _UNIT)

    def prepare_unit(self, cq_offset: int) -> MappedFile:
        """The file the unit for ``cq_offset`` goes to, created if needed, with the space up to
        that unit reserved (the pre-blank units of a queue's first file included). Raises OSError
        (EMFILE, ENOSPC, ...) when the file cannot be created or reserved."""
        expect = cq_offset * _UNIT
        mf = self.mapped_file_queue.get_last_mapped_file(expect)
        end = max(mf.wrote_position, expect - mf.file_from_offset) + _UNIT
        if end > mf.reserved:
            mf.reserve_to(end)
        return mf

    def put_unit(self, commit_log_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write the unit for logical offset ``cq_offset``; duplicates are ignored (True).

        Raises DispatchError when the file for it cannot be created or reserved: the record must
        be dispatched again later, never skipped."""
        if commit_log_offset + size <= self.max_physic_offset:
            log.debug("%r: unit for %d already built", self, commit_log_offset)
            return True
        expect = cq_offset * _UNIT
        mfq = self.mapped_file_queue
        files = mfq.mapped_files
        mf = files[-1] if files else None
        # the common case: the unit goes at the write position, in reserved space
        if (mf is None or mf.file_from_offset + mf.wrote_position != expect
                or mf.wrote_position + _UNIT > mf.reserved):
            try:
                mf = self.prepare_unit(cq_offset)
            except OSError as e:
                raise DispatchError(f"{self!r}: cannot create or reserve a consume queue file: {e}", e) from e
        if mf.first_create_in_queue and cq_offset != 0 and mf.wrote_position == 0:
            self.min_logic_offset = expect
            self._fill_pre_blank(mf, expect)
        if cq_offset != 0:
            current = mf.file_from_offset + mf.wrote_position
            if expect < current:
                log.warning("%r: unit %d built again (write position %d)", self, cq_offset,
                            current // _UNIT)
                return True
            if expect != current:
                log.warning("%r: logical offset %d expected, write position is %d", self,
                            cq_offset, current // _UNIT)
        pos = mf.wrote_position
        CQ_UNIT.pack_into(mf.mm, pos, commit_log_offset, size, tags_code)
        mf.wrote_position = pos + _UNIT
        mfq.commit(mf.file_from_offset + pos + _UNIT)
        self.max_physic_offset = commit_log_offset + size
        return True

    def put_units(self, units: bytes, first_cq_offset: int, first_end: int, last_end: int) -> bool:
        """Write consecutive units (encoded, from logical offset ``first_cq_offset``; the first
        record ends at commit log offset ``first_end``, the last at ``last_end``) at once, when
        that is what ``put_unit`` would do for each: they continue the last file where it was
        written, in its reserved space, none a duplicate. False, with nothing written, otherwise
        (the caller puts them one by one)."""
        files = self.mapped_file_queue.mapped_files
        if not files or first_cq_offset == 0 or not units:
            return False
        mf = files[-1]
        pos = mf.wrote_position
        end = pos + len(units)
        if (pos == 0 or mf.file_from_offset + pos != first_cq_offset * _UNIT or end > mf.reserved
                or first_end <= self.max_physic_offset):
            return False
        mf.mm[pos:end] = units
        mf.wrote_position = end
        self.mapped_file_queue.commit(mf.file_from_offset + end)
        self.max_physic_offset = last_end
        return True

    def _fill_pre_blank(self, mf: MappedFile, until_where: int) -> None:
        until = until_where % self.mapped_file_size
        for pos in range(0, until, _UNIT):
            mf.mm[pos:pos + _UNIT] = _PRE_BLANK_UNIT
        mf.wrote_position = until
        self.mapped_file_queue.set_positions(mf.file_from_offset + until)

    # ------------------------------------------------------------------ reads

    def get_index_buffer(self, start_index: int) -> memoryview | None:
        """Units from ``start_index`` to the write position of the file holding it."""
        offset = start_index * _UNIT
        if offset < self.min_logic_offset:
            return None
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select(offset - mf.file_from_offset)

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        buf = self.get_index_buffer(index)
        if buf is None or len(buf) < _UNIT:
            return None
        return CQ_UNIT.unpack_from(buf)

    def real_tags_code(self, tags_code: int) -> int:
        """The tags code a unit's tagsCode stands for: itself, or the one in the ext unit it
        addresses (a reader that compares tags codes must go through this)."""
        if self.ext is None or not is_ext_addr(tags_code):
            return tags_code
        return self.ext.get_tags_code(tags_code)

    def iter_units(self, start_index: int, max_units: int | None = None) -> Iterator[tuple[int, int, int]]:
        """(commit_log_offset, size, tags_code) from ``start_index``, across files."""
        index = start_index
        remaining = max_units
        while remaining is None or remaining > 0:
            buf = self.get_index_buffer(index)
            if buf is None or len(buf) < _UNIT:
                return
            n = len(buf) // _UNIT
            if remaining is not None:
                n = min(n, remaining)
                remaining -= n
            yield from CQ_UNIT.iter_unpack(buf[: n * _UNIT])
            index += n

    def last_unit(self) -> tuple[int, int, int] | None:
        max_offset = self.get_max_offset_in_queue()
        if max_offset == 0:
            return None
        return self.get_unit(max_offset - 1)

    def get_offset_in_queue_by_time(
        self, timestamp: int, pickup_store_timestamp: Callable[[int, int], int], min_phy_offset: int
    ) -> int:
        """Logical offset of the unit whose record store time is nearest ``timestamp`` (§4.4)."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            return 0
        mf = next((f for f in files if f.last_modified() * 1000 >= timestamp), files[-1])
        buf = mf.select(0)
        if buf is None or len(buf) < _UNIT:
            return 0
        low = max(0, self.min_logic_offset - mf.file_from_offset)
        high = len(buf) - _UNIT
        target = left = right = -1
        left_value = right_value = -1
        while high >= low:
            mid = (low + high) // (2 * _UNIT) * _UNIT
            phy_offset, size, _ = CQ_UNIT.unpack_from(buf, mid)
            if phy_offset < min_phy_offset:
                low = mid + _UNIT
                left = mid
                continue
            store_time = pickup_store_timestamp(phy_offset, size)
            if store_time < 0:
                return 0
            if store_time == timestamp:
                target = mid
                break
            if store_time > timestamp:
                high = mid - _UNIT
                right, right_value = mid, store_time
            else:
                low = mid + _UNIT
                left, left_value = mid, store_time
        if target != -1:
            offset = target
        elif left_value == -1:
            offset = right
        elif right_value == -1:
            offset = left
        else:
            offset = right if abs(timestamp - left_value) > abs(timestamp - right_value) else left
        return (mf.file_from_offset + offset) // _UNIT

    # ------------------------------------------------------------------ recovery

    def recover(self, careful: bool = True) -> None:
        """Find the end of valid units and drop what follows (module docstring).

        ``careful``: the queue may have a torn tail (a crash, and records since the checkpoint
        went to it): scan unit by unit from the third-to-last file and zero the rest.  Otherwise
        binary-search the end and read nothing after it.
        """
        files = self.mapped_file_queue.mapped_files
        if not files:
            return
        if not careful:
            self.mapped_file_queue.truncate_dirty_files(self._search_end(files), clean_run=0)
            self._recover_ext()
            return
        index = max(0, len(files) - 3)
        mf = files[index]
        while True:
            end = self._valid_end(mf)
            if end == self.mapped_file_size and index + 1 < len(files):
                index += 1
                mf = files[index]
                continue
            break
        process_offset = mf.file_from_offset + end
        self.mapped_file_queue.truncate_dirty_files(process_offset, clean_run=self.mapped_file_size)
        self._recover_ext()

    def _last_ext_address(self) -> int | None:
        last = self.last_unit()
        return last[2] if last is not None and is_ext_addr(last[2]) else None

    def _recover_ext(self) -> None:
        """The ext queue ends with the unit the queue's last unit addresses (Apache recovers it
        after the queue and truncates it to the queue's max ext address)."""
        if self.ext is not None:
            self.ext.recover(self._last_ext_address())

    def estimate_max_physic_offset(self) -> int:
        """The end (offset + size) of the last unit as the binary search finds it, changing
        nothing (-1 without units): where a crash recovery must start scanning."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            return -1
        saved, self.max_physic_offset = self.max_physic_offset, -1
        self._search_end(files)
        found, self.max_physic_offset = self.max_physic_offset, saved
        return found

    def _valid_end(self, mf: MappedFile) -> int:
        """Position after the last valid unit of ``mf`` (updates ``max_physic_offset``); units
        in holes are zeros, not read (MappedFile.leading_data_end)."""
        end = 0
        for offset, size, _ in CQ_UNIT.iter_unpack(mf.view[:self._units_with_data(mf) * _UNIT]):
            self.units_read_at_recovery += 1
            if offset >= 0 and size > 0:
                end += _UNIT
                self.max_physic_offset = offset + size
            else:
                break
        return end

    def _valid_unit(self, mf: MappedFile, index: int) -> tuple[int, int] | None:
        self.units_read_at_recovery += 1
        offset, size, _ = CQ_UNIT.unpack_from(mf.view, index * _UNIT)
        return (offset, size) if offset >= 0 and size > 0 else None

    @staticmethod
    def _units_with_data(mf: MappedFile) -> int:
        """Units of ``mf`` before its first hole: the others are zeros (invalid) unread."""
        return mf.leading_data_end() // _UNIT

    def _search_end(self, files: list[MappedFile]) -> int:
        """The end of valid units of a queue whose files are valid units then zeros: the last
        file that starts with a unit, then a binary search in it (sets ``max_physic_offset``)."""
        units = self.mapped_file_size // _UNIT
        for index in range(len(files) - 1, max(-1, len(files) - 4), -1):
            mf = files[index]
            with_data = self._units_with_data(mf)
            if with_data == 0 or self._valid_unit(mf, 0) is None:
                continue
            # unit low - 1 is valid; unit high is past the end (a hole, or the end of the file)
            low, high = 1, with_data
            while low < high:
                mid = (low + high) // 2
                if self._valid_unit(mf, mid) is None:
                    high = mid
                else:
                    low = mid + 1
            last = self._valid_unit(mf, low - 1)
            assert last is not None
            self.max_physic_offset = last[0] + last[1]
            if low == units and index + 1 < len(files):
                return files[index + 1].file_from_offset
            return mf.file_from_offset + low * _UNIT
        # no unit in the last three files: as the careful scan, the queue ends where they start
        return files[max(0, len(files) - 3)].file_from_offset

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop every unit whose commit-log offset is >= ``phy_offset``."""
        mfq = self.mapped_file_queue
        self.max_physic_offset = phy_offset
        while True:
            mf = mfq.last_mapped_file()
            if mf is None:
                break
            keep = 0
            stale_end = 0
            units = CQ_UNIT.iter_unpack(mf.view[:self._units_with_data(mf) * _UNIT])
            for i, (offset, size, _) in enumerate(units):
                if not (offset >= 0 and size > 0):
                    break
                stale_end = (i + 1) * _UNIT
                if offset < phy_offset:
                    keep = stale_end
                    self.max_physic_offset = offset + size
            if keep == 0:
                mfq.delete_last_mapped_file()
                continue
            if mf.zero(keep, stale_end):
                mf.sync()   # as truncate_dirty_files: a start may trust zeros after the end
            mf.wrote_position = mf.flushed_position = keep
            mfq.set_positions(mf.file_from_offset + keep)
            break
        if mfq.last_mapped_file() is None:
            mfq.set_positions(0)
        if self.ext is not None:
            address = self._last_ext_address()
            if address is not None:
                self.ext.truncate_by_max_address(address)

    def correct_min_offset(self, phy_min_offset: int) -> list[MappedFile]:
        """Set the min offset to the first unit of the first file whose record is still in the
        CommitLog; as Apache's correctMinOffset, leave it where it was when there is none (a
        queue nobody wrote to since the commit log moved on keeps its min offset).  Ext files
        wholly before the first unit's ext unit are deleted: returns them."""
        mf = self.mapped_file_queue.first_mapped_file()
        if mf is None:
            return []
        buf = mf.select(0)
        if buf is None:
            return []
        # commit log offsets grow along a queue (pre-blank units hold 0): binary search, so a
        # start reads a few units per queue, not a file
        units = len(buf) // _UNIT
        low, high = 0, units
        while low < high:
            mid = (low + high) // 2
            if CQ_UNIT.unpack_from(buf, mid * _UNIT)[0] >= phy_min_offset:
                high = mid
            else:
                low = mid + 1
        first_tags_code = CQ_UNIT.unpack_from(buf, low * _UNIT)[2] if low < units else 0
        buf.release()
        if low < units:
            self.min_logic_offset = mf.file_from_offset + low * _UNIT
        if self.ext is not None and is_ext_addr(first_tags_code):
            return self.ext.truncate_by_min_address(first_tags_code)
        return []

    # ------------------------------------------------------------------ lifecycle

    def file_queues(self) -> tuple[MappedFileQueue, ...]:
        """Its files, the ext's first (a unit may point into the ext: synced before the unit)."""
        mfq = self.mapped_file_queue
        return (mfq,) if self.ext is None else (self.ext.mapped_file_queue, mfq)

    def flush(self, least_pages: int = 0) -> int:
        """Sync its files (the ext's first); returns the queue's flushed position."""
        for mfq in self.file_queues():
            mfq.flush(least_pages)
        return self.mapped_file_queue.flushed_where

    def close(self) -> None:
        self.mapped_file_queue.close()
        if self.ext is not None:
            self.ext.close()

    def destroy(self) -> None:
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.mapped_file_queue.destroy()
        if self.ext is not None:
            self.ext.destroy()
        try:
            os.rmdir(os.path.dirname(self.mapped_file_queue.store_path))
        except OSError:
            pass

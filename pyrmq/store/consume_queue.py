"""One ConsumeQueue: the 20-byte index units of a (topic, queueId) (store.md §4).

Logical offset ``i`` is byte ``i * 20`` of the queue's address space; files are named by the
byte offset of their first unit.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Iterator

from pyrmq.codec.store_formats import CQ_PRE_BLANK_SIZE, CQ_STORE_UNIT_SIZE, CQ_UNIT
from pyrmq.store.mapped_file import MappedFile
from pyrmq.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

_UNIT = CQ_STORE_UNIT_SIZE
_PRE_BLANK_UNIT = CQ_UNIT.pack(0, CQ_PRE_BLANK_SIZE, 0)


def consume_queue_file_size(configured: int) -> int:
    """Round the configured size up to whole units, as Java does."""
    return -(-configured // _UNIT) * _UNIT


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, root_dir: str, mapped_file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = consume_queue_file_size(mapped_file_size)
        self.mapped_file_queue = MappedFileQueue(
            os.path.join(root_dir, topic, str(queue_id)), self.mapped_file_size)
        self.max_physic_offset = -1  # end (offset + size) of the last unit written
        self.min_logic_offset = 0  # byte position of the first readable unit

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic!r}, {self.queue_id})"

    def load(self) -> None:
        self.mapped_file_queue.load()

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

    def put_unit(self, commit_log_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write the unit for logical offset ``cq_offset``; duplicates are ignored (True)."""
        if commit_log_offset + size <= self.max_physic_offset:
            log.debug("%r: unit for %d already built", self, commit_log_offset)
            return True
        expect = cq_offset * _UNIT
        mfq = self.mapped_file_queue
        try:
            mf = mfq.get_last_mapped_file(expect)
        except OSError as e:
            log.error("%r: cannot create a consume queue file: %s", self, e)
            return False
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

    def recover(self) -> None:
        """Find the end of valid units (from the third-to-last file) and drop what follows."""
        files = self.mapped_file_queue.mapped_files
        if not files:
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

    def _valid_end(self, mf: MappedFile) -> int:
        """Position after the last valid unit of ``mf`` (updates ``max_physic_offset``)."""
        end = 0
        for offset, size, _ in CQ_UNIT.iter_unpack(mf.view):
            if offset >= 0 and size > 0:
                end += _UNIT
                self.max_physic_offset = offset + size
            else:
                break
        return end

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
            for i, (offset, size, _) in enumerate(CQ_UNIT.iter_unpack(mf.view)):
                if not (offset >= 0 and size > 0):
                    break
                stale_end = (i + 1) * _UNIT
                if offset < phy_offset:
                    keep = stale_end
                    self.max_physic_offset = offset + size
            if keep == 0:
                mfq.delete_last_mapped_file()
                continue
            mf.zero(keep, stale_end)
            mf.wrote_position = mf.flushed_position = keep
            mfq.set_positions(mf.file_from_offset + keep)
            break
        if mfq.last_mapped_file() is None:
            mfq.set_positions(0)

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """Set the min offset to the first unit of the first file whose record is still in the
        CommitLog; as Apache's correctMinOffset, leave it where it was when there is none (a
        queue nobody wrote to since the commit log moved on keeps its min offset)."""
        mf = self.mapped_file_queue.first_mapped_file()
        if mf is None:
            return
        buf = mf.select(0)
        if buf is None:
            return
        for i, (offset, _, _) in enumerate(CQ_UNIT.iter_unpack(buf[: len(buf) // _UNIT * _UNIT])):
            if offset >= phy_min_offset:
                self.min_logic_offset = mf.file_from_offset + i * _UNIT
                return

    # ------------------------------------------------------------------ lifecycle

    def flush(self, least_pages: int = 0) -> int:
        return self.mapped_file_queue.flush(least_pages)

    def close(self) -> None:
        self.mapped_file_queue.close()

    def destroy(self) -> None:
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.mapped_file_queue.destroy()
        try:
            os.rmdir(os.path.dirname(self.mapped_file_queue.store_path))
        except OSError:
            pass

"""ConsumeQueueExt: the variable-size side units of one consume queue (store.md section 4.5).

With ``enableConsumeQueueExt`` every consume queue unit gets an ext unit -- the real tags code,
the store time and the SQL92 filter bitmap -- and the CQ unit's tagsCode then holds the ext
unit's address (``extOffset + Long.MIN_VALUE``), which no real tags code can equal.  The files
(``mappedFileSizeConsumeQueueExt``, 48 MiB) live under ``consumequeue_ext/<topic>/<queueId>/``
and are byte-for-byte Apache RocketMQ's: a unit that does not fit in a file's remaining room
(4 bytes are always kept free) is preceded by an int16 ``-1`` that marks the file full.

The ext queue is derived data owned by its consume queue: it is written just before the CQ unit
that addresses it, recovered and truncated to the CQ's last ext address, and trimmed from the
front when the CQ's min offset moves (Apache ConsumeQueue/ConsumeQueueExt).
"""

from __future__ import annotations

import logging
import os

from pyrmq.codec.store_formats import (
    CQ_EXT_END_BLANK,
    CQ_EXT_FULL_MARK,
    CQ_EXT_MAX_ADDR,
    CQ_EXT_MAX_REAL_OFFSET,
    CQ_EXT_MAX_UNIT_SIZE,
    CQ_EXT_MIN_UNIT_SIZE,
    CQ_EXT_SIZE,
    CQ_EXT_UNIT_HEAD,
    LONG_MIN,
    ext_decorate,
    ext_undecorate,
    is_ext_addr,
)
from pyrmq.store.mapped_file import MappedFile
from pyrmq.store.mapped_file_queue import MappedFileQueue
from pyrmq.store.model import CqExtUnit

log = logging.getLogger(__name__)

# Apache retries a put this often (a full file is marked, then the next one is taken).
_PUT_ATTEMPTS = 3


class ConsumeQueueExt:
    def __init__(self, topic: str, queue_id: int, root_dir: str, mapped_file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size
        # units are read one at a time at pull: no read-around
        self.mapped_file_queue = MappedFileQueue(
            os.path.join(root_dir, topic, str(queue_id)), mapped_file_size, random_access=True)
        self.puts_failed = 0   # statistics: units that fell back to a plain tagsCode

    def __repr__(self) -> str:
        return f"ConsumeQueueExt({self.topic!r}, {self.queue_id})"

    def load(self) -> None:
        self.mapped_file_queue.load()

    # ------------------------------------------------------------------ writes

    def put(self, tags_code: int, msg_store_time: int, bit_map: bytes | bytearray | None) -> int | None:
        """Append a unit; its address (for the CQ unit's tagsCode), or None when it could not be
        written -- then the CQ unit keeps the plain tags code, as Apache does."""
        bit_map_size = len(bit_map) if bit_map else 0
        size = CQ_EXT_MIN_UNIT_SIZE + bit_map_size
        mfq = self.mapped_file_queue
        if size > CQ_EXT_MAX_UNIT_SIZE or mfq.max_offset() + size > CQ_EXT_MAX_REAL_OFFSET:
            log.error("%r: unit of %d bytes cannot be stored", self, size)
            self.puts_failed += 1
            return None
        for _ in range(_PUT_ATTEMPTS):
            try:
                mf = mfq.get_last_mapped_file(0)   # a new file if there is none or the last is full
                wrote = mf.wrote_position
                if size > self.mapped_file_size - wrote - CQ_EXT_END_BLANK:
                    self._mark_full(mf, wrote)
                    continue
                if wrote + size > mf.reserved:
                    mf.reserve_to(wrote + size)
            except OSError as e:
                log.warning("%r: cannot create or reserve an ext file (%s); the unit keeps its tags code", self, e)
                break
            CQ_EXT_UNIT_HEAD.pack_into(mf.mm, wrote, size, tags_code, msg_store_time, bit_map_size)
            if bit_map_size:
                assert bit_map is not None
                start = wrote + CQ_EXT_MIN_UNIT_SIZE
                mf.mm[start:start + bit_map_size] = bit_map
            mf.wrote_position = wrote + size
            mfq.commit(mf.file_from_offset + wrote + size)
            return ext_decorate(mf.file_from_offset + wrote)
        self.puts_failed += 1
        return None

    def _mark_full(self, mf: MappedFile, wrote: int) -> None:
        """The next unit does not fit: an int16 -1 says so to every reader, the file is done."""
        if wrote + CQ_EXT_SIZE.size > mf.reserved:
            mf.reserve_to(wrote + CQ_EXT_SIZE.size)
        CQ_EXT_SIZE.pack_into(mf.mm, wrote, CQ_EXT_FULL_MARK)
        mf.wrote_position = self.mapped_file_size
        self.mapped_file_queue.commit(mf.file_from_offset + self.mapped_file_size)

    # ------------------------------------------------------------------ reads

    def get(self, address: int) -> CqExtUnit | None:
        """The unit at ``address`` (a CQ unit's tagsCode), None if it is not an ext address or
        no unit is there."""
        if address > CQ_EXT_MAX_ADDR:
            return None
        found = self.mapped_file_queue.locate(address - LONG_MIN, CQ_EXT_MIN_UNIT_SIZE)
        if found is None:
            return None
        mf, pos = found
        try:
            size, tags_code, store_time, bit_map_size = CQ_EXT_UNIT_HEAD.unpack_from(mf.view, pos)
        except ValueError:   # released: the clean service deleted the file meanwhile
            return None
        if size < CQ_EXT_MIN_UNIT_SIZE:
            return None
        bit_map = None
        if bit_map_size > 0:
            start = pos + CQ_EXT_MIN_UNIT_SIZE
            if start + bit_map_size > mf.wrote_position:
                return None
            bit_map = bytes(mf.view[start:start + bit_map_size])
        return CqExtUnit(size, tags_code, store_time, bit_map)

    def get_tags_code(self, tags_code: int) -> int:
        """The real tags code behind a CQ unit's tagsCode (unchanged when it is not an address;
        0 when the unit is gone, as Apache's readers see a missing unit)."""
        if not is_ext_addr(tags_code):
            return tags_code
        unit = self.get(tags_code)
        return unit.tags_code if unit is not None else 0

    def min_address(self) -> int:
        first = self.mapped_file_queue.first_mapped_file()
        return ext_decorate(first.file_from_offset if first is not None else 0)

    def max_address(self) -> int:
        return ext_decorate(self.mapped_file_queue.max_offset())

    # ------------------------------------------------------------------ recovery

    def recover(self, max_address: int | None) -> None:
        """Find the end of the units and forget what follows it.

        ``max_address``: the last ext address of the consume queue, when it has one -- then the
        end is just after that unit (Apache recovers the ext and truncates it there; units past
        it belong to records the CQ does not hold).  Otherwise the last file is walked unit by
        unit: every earlier file is complete, so Apache's walk over all files ends in it too.
        """
        mfq = self.mapped_file_queue
        files = mfq.mapped_files
        if not files:
            return
        if max_address is not None and is_ext_addr(max_address):
            unit = self._unit_size_at(ext_undecorate(max_address))
            if unit is not None:
                mfq.truncate_dirty_files(ext_undecorate(max_address) + unit, clean_run=self.mapped_file_size)
                return
            log.error("%r: the consume queue's last ext unit %d is not there", self, ext_undecorate(max_address))
        last = files[-1]
        pos = 0
        view = last.view
        limit = last.leading_data_end()
        while pos + CQ_EXT_SIZE.size <= limit:
            size = CQ_EXT_SIZE.unpack_from(view, pos)[0]
            if size <= 0:
                break
            pos += size
        mfq.truncate_dirty_files(last.file_from_offset + min(pos, self.mapped_file_size),
                                 clean_run=self.mapped_file_size)

    def _unit_size_at(self, offset: int) -> int | None:
        found = self.mapped_file_queue.locate(offset, CQ_EXT_MIN_UNIT_SIZE)
        if found is None:
            return None
        mf, pos = found
        size = CQ_EXT_SIZE.unpack_from(mf.view, pos)[0]
        return size if size >= CQ_EXT_MIN_UNIT_SIZE else None

    def truncate_by_max_address(self, max_address: int) -> None:
        """Drop every unit after the one at ``max_address`` (the CQ's last ext address)."""
        if not is_ext_addr(max_address):
            return
        offset = ext_undecorate(max_address)
        size = self._unit_size_at(offset)
        if size is None:
            log.error("%r: ext unit %d not found, not truncated", self, offset)
            return
        self.mapped_file_queue.truncate_dirty_files(offset + size, clean_run=self.mapped_file_size)

    def truncate_by_min_address(self, min_address: int) -> list[MappedFile]:
        """Delete the files wholly before ``min_address`` (the CQ's first ext address); the
        files deleted (never the last one)."""
        if not is_ext_addr(min_address):
            return []
        offset = ext_undecorate(min_address)
        mfq = self.mapped_file_queue
        deleted = []
        for mf in list(mfq.mapped_files):
            if mf.file_from_offset + self.mapped_file_size >= offset or not mfq.delete_first_file(mf):
                break
            log.info("deleted consume queue ext file %s of %s queue %d", mf.file_name, self.topic, self.queue_id)
            deleted.append(mf)
        return deleted

    # ------------------------------------------------------------------ lifecycle

    def flush(self, least_pages: int = 0) -> int:
        return self.mapped_file_queue.flush(least_pages)

    def close(self) -> None:
        self.mapped_file_queue.close()

    def destroy(self) -> None:
        self.mapped_file_queue.destroy()
        try:
            os.rmdir(os.path.dirname(self.mapped_file_queue.store_path))
        except OSError:
            pass   # other queues of the topic are still there

"""IndexFile: a hash index from message keys to commit-log offsets (store.md §5).

One file = 40-byte header · slot table (``hash_slot_num`` × int32) · item area (``index_num`` ×
20 bytes). A slot holds the index of the newest item whose key hashes to it; each item links to
the previous item of the same slot, so a lookup walks one chain. Item 0 is never used
(``index_count`` starts at 1). Files are created at full length but sparse: the header and
slot table (written anywhere, 20 MB by default) are reserved at creation, the items (appended)
a chunk at a time ahead of the writer (mapped_file.py), so the default 420 MB file costs disk
blocks for its slots and the items written, and a full disk is an OSError, never a SIGBUS.

The header lives in memory and is written into the mapping on every insert, as Java's
IndexHeader does, so the bytes on disk are always current up to the last flush.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

from pyrmq.codec.index_codec import INVALID_INDEX, index_build_records, index_put, index_put_py, index_time_diff
from pyrmq.codec.index_codec import index_key_hash as index_key_hash
from pyrmq.codec.index_codec import topic_key_hash as topic_key_hash
from pyrmq.codec.store_formats import (
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_ITEM,
    INDEX_ITEM_SIZE,
    INDEX_SLOT,
    INDEX_SLOT_SIZE,
    index_file_size,
)
from pyrmq.store import crash_points
from pyrmq.store.mapped_file import FixedMapping

if TYPE_CHECKING:
    from pyrmq.codec.message import RecordInfo

log = logging.getLogger(__name__)

# Item, slot and header are written in one call (C when built). The crash point sits between
# the item and the slot, so a process that arms it writes through the Python twin.
_ITEM_CRASH_ARMED = crash_points.armed("index.item_written")
_index_put = (functools.partial(index_put_py, after_item=functools.partial(crash_points.reach, "index.item_written"))
              if _ITEM_CRASH_ARMED else index_put)
# Items are reserved this far ahead: 52,428 items per fallocate.
ITEMS_RESERVE_CHUNK = 1024 * 1024


class IndexFile(FixedMapping):
    """One mapped index file; positions follow store_formats' declared layout."""

    def __init__(self, path: str, hash_slot_num: int, index_num: int, *, create: bool = False,
                 end_phy_offset: int = 0, end_timestamp: int = 0) -> None:
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self._items_start = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE
        # item 1 is the first written; its end is what a new file needs reserved
        first_item_end = self._items_start + 2 * INDEX_ITEM_SIZE
        super().__init__(path, index_file_size(hash_slot_num, index_num), create=create,
                         size_hint=f"maxHashSlotNum={hash_slot_num} and maxIndexNum={index_num}",
                         reserve_chunk=ITEMS_RESERVE_CHUNK, reserve_first=first_item_end,
                         random_access=True)   # hash slots and chains: random by nature
        if create:
            self.begin_timestamp = self.end_timestamp = max(0, end_timestamp)
            self.begin_phy_offset = self.end_phy_offset = max(0, end_phy_offset)
            self.hash_slot_count = 0
            self.index_count = 1
            self._write_header()
        else:
            (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
             self.hash_slot_count, self.index_count) = INDEX_HEADER.unpack_from(self.mm, 0)
            # a header is trusted no further than the file's own size: a count past the item
            # area would send lookups outside the mapping (a full file is then rolled over)
            self.index_count = min(max(self.index_count, 1), index_num)

    def __repr__(self) -> str:
        return f"IndexFile({self.file_name}, count={self.index_count})"

    def _write_header(self) -> None:
        INDEX_HEADER.pack_into(self.mm, 0, self.begin_timestamp, self.end_timestamp,
                               self.begin_phy_offset, self.end_phy_offset,
                               self.hash_slot_count, self.index_count)

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Append one item (Java IndexFile.putKey); False when the file is full."""
        count = self.index_count
        if count >= self.index_num:
            return False
        item_end = self._items_start + (count + 1) * INDEX_ITEM_SIZE
        if item_end > self.reserved:
            # a file opened at start-up has reserved == 0: its slot table (maybe sparse, written
            # by an older broker) is reserved too before any slot is written
            self.reserve(self.reserved, item_end)
        begin = self.begin_timestamp
        time_diff = index_time_diff(begin, store_timestamp)
        if count <= 1:
            begin_phy_offset, begin_timestamp = phy_offset, store_timestamp
        else:
            begin_phy_offset, begin_timestamp = self.begin_phy_offset, begin
        self.hash_slot_count = _index_put(self.mm, self.hash_slot_num, count, key_hash, phy_offset, time_diff,
                                          begin_timestamp, store_timestamp, begin_phy_offset, phy_offset,
                                          self.hash_slot_count)
        self.begin_phy_offset = begin_phy_offset
        self.begin_timestamp = begin_timestamp
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        return True

    def build_records(self, records: list[RecordInfo], start: int, uniq_key_name: str, keys_name: str) -> int:
        """Index the keys of ``records[start:]`` in one call (``index_build_records``), as far as
        the items reserved so far reach; returns the first record left to ``put_key`` (the
        file's first item, a record whose keys need more space, or the file is full), or
        len(records). With the item crash point armed every record is left to ``put_key``."""
        if _ITEM_CRASH_ARMED:
            return start
        limit = min(self.index_num, (self.reserved - self._items_start) // INDEX_ITEM_SIZE)
        stop, self.index_count, self.hash_slot_count, self.end_phy_offset, self.end_timestamp = index_build_records(
            self.mm, self.hash_slot_num, limit, records, start, uniq_key_name, keys_name, self.index_count,
            self.hash_slot_count, self.begin_timestamp, self.begin_phy_offset, self.end_phy_offset, self.end_timestamp)
        return stop

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def select_phy_offsets(self, out: list[int], key_hash: int, max_num: int, begin: int, end: int) -> None:
        """Append to ``out`` the offsets of items with ``key_hash`` stored within [begin, end]."""
        count = self.index_count
        mm = self.mm
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * INDEX_SLOT_SIZE
        (index,) = INDEX_SLOT.unpack_from(mm, slot_pos)
        if index <= INVALID_INDEX or index >= count:   # items 1 .. count-1 are written
            return
        begin_timestamp = self.begin_timestamp
        while len(out) < max_num:
            hash_read, phy_offset, time_diff, prev = INDEX_ITEM.unpack_from(
                mm, self._items_start + index * INDEX_ITEM_SIZE)
            if time_diff < 0:
                break
            time_read = begin_timestamp + time_diff * 1000
            if hash_read == key_hash and begin <= time_read <= end:
                out.append(phy_offset)
            # items only link to older items: a link forward or to itself is damage, and
            # following it could go round for ever
            if prev <= INVALID_INDEX or prev >= index or time_read < begin:
                break
            index = prev

    def flush(self) -> None:
        """Sync the file (blocking; call from a worker thread). The header in the mapping is
        already current: every insert writes it."""
        self.sync()

"""Store structures: ConsumeQueue unit and its ext unit, checkpoint, IndexFile header/slot/item.

Each layout is declared with construct and mirrored by a ``struct.Struct`` used on hot paths;
tests prove the two agree. See spec/store.md §4.1, §4.5, §5, §6.1.

Sans-I/O: no files, no sockets, no trio.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from construct import Bytes, Int16sb, Int32sb, Int64sb, Padding, Struct, this

# --------------------------------------------------------------------------------------------
# ConsumeQueue (store.md §4)
# --------------------------------------------------------------------------------------------

CQ_STORE_UNIT_SIZE = 20
CQ_UNITS_PER_FILE = 300_000  # Java mappedFileSizeConsumeQueue / 20
CQ_PRE_BLANK_SIZE = 0x7FFFFFFF  # size field of the pre-blank fill units (§4.3)

ConsumeQueueUnit = Struct(
    "commit_log_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,
)
CQ_UNIT = struct.Struct(">qiq")


@dataclass(frozen=True, slots=True)
class CqUnit:
    commit_log_offset: int
    size: int
    tags_code: int


def cq_unit_is_valid(commit_log_offset: int, size: int) -> bool:
    """Readers and recovery stop at the first unit that is not valid."""
    return commit_log_offset >= 0 and size > 0


# --------------------------------------------------------------------------------------------
# ConsumeQueueExt (store.md §4.5): variable units, addressed from a CQ unit's tagsCode
# --------------------------------------------------------------------------------------------

CQ_EXT_MIN_UNIT_SIZE = 20  # size + tagsCode + msgStoreTime + bitMapSize, no bitmap
CQ_EXT_MAX_UNIT_SIZE = 0x7FFF  # the size field is an int16
CQ_EXT_END_BLANK = 4  # always left free at a file's end, room for the -1 "full" marker
CQ_EXT_FULL_MARK = -1  # size field written where the next unit did not fit
LONG_MIN = -(1 << 63)
# tagsCode values at or below this are ext addresses (extOffset + Long.MIN_VALUE); a real tags
# code is a sign-extended int32 hash, so never that low
CQ_EXT_MAX_ADDR = -(1 << 31) - 1
CQ_EXT_MAX_REAL_OFFSET = CQ_EXT_MAX_ADDR - LONG_MIN

ConsumeQueueExtUnit = Struct(
    "size" / Int16sb,
    "tags_code" / Int64sb,
    "msg_store_time" / Int64sb,
    "bit_map_size" / Int16sb,
    "filter_bit_map" / Bytes(this.bit_map_size),
)
CQ_EXT_UNIT_HEAD = struct.Struct(">hqqh")   # the fixed part of ConsumeQueueExtUnit
CQ_EXT_SIZE = struct.Struct(">h")


def is_ext_addr(tags_code: int) -> bool:
    """Whether a CQ unit's tagsCode is the address of an ext unit rather than a tags code."""
    return tags_code <= CQ_EXT_MAX_ADDR


def ext_decorate(offset: int) -> int:
    """The tagsCode that addresses the ext unit at byte ``offset`` of the ext queue."""
    return offset if is_ext_addr(offset) else offset + LONG_MIN


def ext_undecorate(address: int) -> int:
    """The ext queue byte offset an address names (a non-address is returned unchanged)."""
    return address - LONG_MIN if is_ext_addr(address) else address


# --------------------------------------------------------------------------------------------
# Checkpoint (store.md §6.1)
# --------------------------------------------------------------------------------------------

CHECKPOINT_FILE_SIZE = 4096  # one OS page, as Java maps it
CHECKPOINT_CORRECTION_MS = 3000  # minTimestamp backs off 3 s from the smaller of the two

Checkpoint = Struct(
    "physic_msg_timestamp" / Int64sb,
    "logics_msg_timestamp" / Int64sb,
    "index_msg_timestamp" / Int64sb,
    "master_flushed_offset" / Int64sb,  # 5.x only; 4.x leaves zeros
    "confirm_phy_offset" / Int64sb,  # 5.x only
    Padding(CHECKPOINT_FILE_SIZE - 40),
)
CHECKPOINT_4X = struct.Struct(">qqq")  # what pyrmq (like 4.9.8) reads and writes
CHECKPOINT_5X = struct.Struct(">qqqqq")


def checkpoint_min_timestamp(physic_msg_timestamp: int, logics_msg_timestamp: int) -> int:
    return max(0, min(physic_msg_timestamp, logics_msg_timestamp) - CHECKPOINT_CORRECTION_MS)


# --------------------------------------------------------------------------------------------
# IndexFile (store.md §5)
# --------------------------------------------------------------------------------------------

INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ITEM_SIZE = 20
INDEX_MAX_HASH_SLOT_NUM = 5_000_000
INDEX_MAX_INDEX_NUM = 20_000_000

IndexHeader = Struct(
    "begin_timestamp" / Int64sb,
    "end_timestamp" / Int64sb,
    "begin_phy_offset" / Int64sb,
    "end_phy_offset" / Int64sb,
    "hash_slot_count" / Int32sb,
    "index_count" / Int32sb,
)
INDEX_HEADER = struct.Struct(">qqqqii")

IndexSlot = Struct("item_index" / Int32sb)
INDEX_SLOT = struct.Struct(">i")

IndexItem = Struct(
    "key_hash" / Int32sb,
    "commit_log_offset" / Int64sb,
    "time_diff" / Int32sb,
    "prev_index" / Int32sb,
)
INDEX_ITEM = struct.Struct(">iqii")


def index_file_size(slots: int = INDEX_MAX_HASH_SLOT_NUM, items: int = INDEX_MAX_INDEX_NUM) -> int:
    return INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + items * INDEX_ITEM_SIZE


def index_slot_position(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * INDEX_SLOT_SIZE


def index_item_position(item: int, slots: int = INDEX_MAX_HASH_SLOT_NUM) -> int:
    return INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + item * INDEX_ITEM_SIZE


__all__ = [
    "CHECKPOINT_4X", "CHECKPOINT_5X", "CHECKPOINT_CORRECTION_MS", "CHECKPOINT_FILE_SIZE",
    "CQ_EXT_END_BLANK", "CQ_EXT_FULL_MARK", "CQ_EXT_MAX_ADDR", "CQ_EXT_MAX_REAL_OFFSET",
    "CQ_EXT_MAX_UNIT_SIZE", "CQ_EXT_MIN_UNIT_SIZE", "CQ_EXT_SIZE", "CQ_EXT_UNIT_HEAD", "LONG_MIN",
    "CQ_PRE_BLANK_SIZE", "CQ_STORE_UNIT_SIZE", "CQ_UNIT", "CQ_UNITS_PER_FILE", "Checkpoint",
    "ConsumeQueueExtUnit", "ConsumeQueueUnit", "CqUnit", "INDEX_HEADER", "INDEX_HEADER_SIZE", "INDEX_ITEM",
    "INDEX_ITEM_SIZE", "INDEX_MAX_HASH_SLOT_NUM", "INDEX_MAX_INDEX_NUM", "INDEX_SLOT",
    "INDEX_SLOT_SIZE", "IndexHeader", "IndexItem", "IndexSlot", "checkpoint_min_timestamp",
    "cq_unit_is_valid", "ext_decorate", "ext_undecorate", "index_file_size", "is_ext_addr", "index_item_position", "index_slot_position",
]

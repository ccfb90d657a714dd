"""An index file's key hash and item insert (store.md §5), sans-I/O: buffers in, numbers out.

The layouts are store_formats' declarations. ``topic_key_hash``, ``index_put`` and
``index_build_records`` are C when the extension is built (pyrmq.codec.native), these ``*_py``
twins otherwise.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyrmq.codec.message_props import MessageConst, MessageSysFlag, java_string_hash, property_value_py
from pyrmq.codec.native import native_function
from pyrmq.codec.store_formats import INDEX_HEADER, INDEX_HEADER_SIZE, INDEX_ITEM, INDEX_ITEM_SIZE, INDEX_SLOT, INDEX_SLOT_SIZE

if TYPE_CHECKING:
    from pyrmq.codec.message import RecordInfo, WriteBuffer

INT32_MAX = 0x7FFF_FFFF
INVALID_INDEX = 0  # an index slot's value / an item's link meaning "no item"
# a store time this many ms after the file's begin or later has the largest time diff
_TIME_DIFF_CLAMP_MS = (INT32_MAX + 1) * 1000
# a record with more keys than this is indexed by IndexService.build_index (index_build_records
# keeps one record's key positions on the C stack)
INDEX_KEYS_IN_ONE_GO = 16
_TRANSACTION_MASK = MessageSysFlag.TRANSACTION_MASK
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_KEY_SEPARATOR = MessageConst.KEY_SEPARATOR


def index_key_hash(key: str) -> int:
    """``abs(key.hashCode())``, 0 when that is still negative (hashCode was Integer.MIN_VALUE)."""
    return _abs_index_hash(java_string_hash(key) & 0xFFFF_FFFF)


def _abs_index_hash(h: int) -> int:
    """Java's ``Math.abs`` of the int32 whose bits are ``h``; 0 for Integer.MIN_VALUE (whose abs
    stays negative: the index files hold 0 then)."""
    if h & 0x8000_0000:
        h = 0x1_0000_0000 - h
    return h if h <= INT32_MAX else 0


# Java's hash is linear: hash(p + q) = hash(p) * 31**len(q) + hash(q) (mod 2**32). An index key
# is ``topic#key``, and a UNIQ_KEY's first 20 hex digits name its producer (address, pid, class
# loader): only the last 12 (time and counter) change from message to message. So the hash of
# everything before the key's last 12 characters is cached (for a short key: ``topic#``), and
# each key hashes at most 12 characters.
_TAIL = 12
_TAIL_WEIGHTS = tuple(pow(31, i, 1 << 32) for i in reversed(range(_TAIL)))   # 31**11 .. 31**0
_TAIL_SHIFTS = tuple(pow(31, n, 1 << 32) for n in range(_TAIL + 1))


@functools.lru_cache(maxsize=4096)
def _head_hash(head: str) -> int:
    return java_string_hash(head) & 0xFFFF_FFFF


def topic_key_hash_py(topic: str, key: str) -> int:
    """``index_key_hash(f"{topic}#{key}")``, the hash of the key's repeating head cached."""
    split = len(key) - _TAIL if len(key) > _TAIL else 0
    tail = key[split:]
    if not tail.isascii():
        return index_key_hash(f"{topic}#{key}")
    n = len(tail)
    return _abs_index_hash((_head_hash(f"{topic}#{key[:split]}") * _TAIL_SHIFTS[n]
                            + sum(map(operator.mul, tail.encode(), _TAIL_WEIGHTS[_TAIL - n:]))) & 0xFFFF_FFFF)


def index_put_py(mm: WriteBuffer, hash_slot_num: int, count: int, key_hash: int, phy_offset: int,
                 time_diff: int, begin_timestamp: int, end_timestamp: int, begin_phy_offset: int,
                 end_phy_offset: int, hash_slot_count: int,
                 after_item: Callable[[], None] | None = None) -> int:
    """Write item ``count`` of an index file (its slot's previous item as its link), point the
    slot at it, and write the header (the given fields, ``count + 1`` items). Returns the
    header's hash slot count: one more when the slot was empty. ``after_item`` runs between the
    item and the slot (the store's crash point)."""
    items_start = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE
    item_pos = items_start + count * INDEX_ITEM_SIZE
    if item_pos + INDEX_ITEM_SIZE > len(mm):
        raise ValueError("index_put: the item is past the end of the file")
    slot_pos = INDEX_HEADER_SIZE + (key_hash % hash_slot_num) * INDEX_SLOT_SIZE
    (slot_value,) = INDEX_SLOT.unpack_from(mm, slot_pos)
    if slot_value <= INVALID_INDEX or slot_value > count:
        slot_value = INVALID_INDEX
    INDEX_ITEM.pack_into(mm, item_pos, key_hash, phy_offset, time_diff, slot_value)
    if after_item is not None:
        after_item()
    INDEX_SLOT.pack_into(mm, slot_pos, count)
    if slot_value == INVALID_INDEX:
        hash_slot_count += 1
    INDEX_HEADER.pack_into(mm, 0, begin_timestamp, end_timestamp, begin_phy_offset, end_phy_offset,
                           hash_slot_count, count + 1)
    return hash_slot_count


def index_time_diff(begin_timestamp: int, store_timestamp: int) -> int:
    """An item's seconds since its file's begin (Java: long division truncating toward zero, then
    clamped to [0, Int.MAX]); 0 for a file without a begin."""
    delta = store_timestamp - begin_timestamp
    if begin_timestamp <= 0 or delta < 0:
        return 0
    return delta // 1000 if delta < _TIME_DIFF_CLAMP_MS else INT32_MAX


def index_key_list(uniq_key: str | None, keys: str | None) -> list[str]:
    """The keys a record is indexed under: its UNIQ_KEY, then each non-empty KEYS token (a
    property parsed from a record is never empty, as in Java)."""
    key_list = [uniq_key] if uniq_key else []
    if keys:
        key_list += [k for k in keys.split(_KEY_SEPARATOR) if k]
    return key_list


def index_build_records_py(mm: WriteBuffer, hash_slot_num: int, count_limit: int, records: list[RecordInfo],
                           start: int, uniq_key_name: str, keys_name: str, count: int, hash_slot_count: int,
                           begin_timestamp: int, begin_phy_offset: int, end_phy_offset: int,
                           end_timestamp: int) -> tuple[int, int, int, int, int]:
    """Index the keys of ``records[start:]`` into one index file, as IndexService.build_index
    does record by record (UNIQ_KEY, then each non-empty KEYS token: an ``index_put`` of
    ``topic#key`` each); records below ``end_phy_offset``, rolled back or without keys are
    skipped. Stops at the first record it leaves to build_index: the file's first item (it sets
    the file's begin), all of a record's keys not fitting below ``count_limit``, or more than
    INDEX_KEYS_IN_ONE_GO keys. Returns (where it stopped, count, hash slot count, end offset, end
    timestamp). The twin of ``_native.index_build_records``: one call for many records."""
    if not isinstance(records, list) or not isinstance(uniq_key_name, str) or not isinstance(keys_name, str) \
            or not uniq_key_name or not keys_name:
        raise TypeError("index_build_records: records must be a list and the names non-empty str")
    count_limit = min(count_limit, INT32_MAX - 1)
    i = min(max(start, 0), len(records))
    while i < len(records):
        record = records[i]
        phy, timestamp = record.commit_log_offset, record.store_timestamp
        if phy >= end_phy_offset and record.sys_flag & _TRANSACTION_MASK != _ROLLBACK:
            props = record.properties_string
            key_list = index_key_list(property_value_py(props, uniq_key_name), property_value_py(props, keys_name))
            if key_list and (len(key_list) > INDEX_KEYS_IN_ONE_GO or count <= 1 or count + len(key_list) > count_limit):
                break
            time_diff = index_time_diff(begin_timestamp, timestamp)
            for key in key_list:
                hash_slot_count = index_put_py(mm, hash_slot_num, count, topic_key_hash_py(record.topic, key), phy,
                                               time_diff, begin_timestamp, timestamp, begin_phy_offset, phy,
                                               hash_slot_count)
                count += 1
            if key_list:
                end_phy_offset, end_timestamp = phy, timestamp
        i += 1
    return i, count, hash_slot_count, end_phy_offset, end_timestamp


_INDEX_LAYOUT = {"INDEX_HEADER_SIZE": INDEX_HEADER.size, "INDEX_SLOT_SIZE": INDEX_SLOT.size,
                 "INDEX_ITEM_SIZE": INDEX_ITEM.size}
topic_key_hash = native_function("topic_key_hash", topic_key_hash_py)
index_put = native_function("index_put", index_put_py, _INDEX_LAYOUT)
index_build_records = native_function(
    "index_build_records", index_build_records_py,
    {**_INDEX_LAYOUT, "TRANSACTION_MASK": _TRANSACTION_MASK, "TRANSACTION_ROLLBACK_TYPE": _ROLLBACK,
     "KEY_SEPARATOR_CHAR": ord(_KEY_SEPARATOR)})

"""The send path's per-message byte work: C when ``pyrmq.codec._native`` was built, else Python.

Each function here exists twice. The ``*_py`` twin is the reference, written from the layouts
declared in :mod:`pyrmq.codec.store_formats`; the C one (``_native.c``) does the same work in a
fraction of the interpreter's time (issue 14). The public names are bound to the C functions
when the extension is importable and its layout constants match the declarations, to the twins
otherwise: a machine without a C compiler gets a slower broker, never a different store.
``tests/codec/test_native.py`` proves the twins write the same bytes and return the same values.

``PYRMQ_NATIVE=0`` in the environment binds the twins even when the extension is there (to
measure one against the other).
"""

from __future__ import annotations

import functools
import operator
import os
import struct
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from pyrmq.codec.message_props import java_string_hash
from pyrmq.codec.store_formats import INDEX_HEADER, INDEX_HEADER_SIZE, INDEX_ITEM, INDEX_ITEM_SIZE, INDEX_SLOT, INDEX_SLOT_SIZE

if TYPE_CHECKING:
    from pyrmq.codec.message import WriteBuffer

INT32_MAX = 0x7FFF_FFFF
INVALID_INDEX = 0  # an index slot's value / an item's link meaning "no item"


# --------------------------------------------------------------------------------------------
# Index key hash


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


# --------------------------------------------------------------------------------------------
# Index file insert


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


# --------------------------------------------------------------------------------------------
# Remoting: the extFields of a ROCKETMQ binary header (remoting.md)

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


def decode_ext_fields_py(data: bytes | memoryview, max_fields: int) -> dict[str, str]:
    """The extFields of a ROCKETMQ header: (uint16 key length, key, uint32 value length, value)
    until the end of ``data``, UTF-8. Empty keys and values are dropped (Java reads them as null),
    the last duplicate is kept. Every length is checked before it is used: ValueError when one
    overruns ``data`` or more than ``max_fields`` entries are kept, UnicodeDecodeError for text
    that is not UTF-8."""
    view = memoryview(data)
    end = len(view)
    pos = 0
    ext: dict[str, str] = {}
    while pos < end:
        if len(ext) >= max_fields:
            raise ValueError(f"more than {max_fields} extFields entries")
        if end - pos < 2:
            raise ValueError("truncated extFields key length")
        (key_len,) = _U16.unpack_from(view, pos)
        pos += 2
        if end - pos < key_len + 4:
            raise ValueError("extFields key overruns the header")
        key_at = pos
        pos += key_len
        (val_len,) = _U32.unpack_from(view, pos)
        pos += 4
        if val_len > end - pos:
            raise ValueError("extFields value overruns the header")
        key = str(view[key_at:key_at + key_len], "utf-8")
        value = str(view[pos:pos + val_len], "utf-8")
        pos += val_len
        if key and value:
            ext[key] = value
    return ext


def encode_ext_fields_py(ext: dict[str, str]) -> bytes:
    """The extFields part of a ROCKETMQ header, its uint32 length first: every entry whose key
    and value are not None. ValueError for a key longer than 65,535 bytes, UnicodeEncodeError
    for text UTF-8 cannot hold (a lone surrogate)."""
    parts: list[bytes] = []
    for key, value in ext.items():
        if key is None or value is None:
            continue
        kb = key.encode("utf-8")
        vb = value.encode("utf-8")
        if len(kb) > 0xFFFF:
            raise ValueError("extFields key longer than 65535 bytes")
        parts += (_U16.pack(len(kb)), kb, _U32.pack(len(vb)), vb)
    body = b"".join(parts)
    return _U32.pack(len(body)) + body


# --------------------------------------------------------------------------------------------
# Binding


def _load_native() -> ModuleType | None:
    if os.environ.get("PYRMQ_NATIVE", "1") == "0":
        return None
    try:
        from pyrmq.codec import _native
    except ImportError:   # built without a C compiler: the twins above
        return None
    declared = (INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, INDEX_ITEM_SIZE,
                INDEX_HEADER.size, INDEX_SLOT.size, INDEX_ITEM.size)
    compiled = (_native.INDEX_HEADER_SIZE, _native.INDEX_SLOT_SIZE, _native.INDEX_ITEM_SIZE) * 2
    if declared != compiled:
        raise RuntimeError(f"pyrmq.codec._native was built for index layout {compiled[:3]}, "
                           f"store_formats declares {declared}: rebuild it (pip install -e .)")
    return _native


_native_module = _load_native()
NATIVE: bool = _native_module is not None

topic_key_hash: Callable[[str, str], int] = topic_key_hash_py
index_put: Callable[..., int] = index_put_py
decode_ext_fields: Callable[[bytes | memoryview, int], dict[str, str]] = decode_ext_fields_py
encode_ext_fields: Callable[[dict[str, str]], bytes] = encode_ext_fields_py
if _native_module is not None:
    topic_key_hash = _native_module.topic_key_hash
    index_put = _native_module.index_put
    decode_ext_fields = _native_module.decode_ext_fields
    encode_ext_fields = _native_module.encode_ext_fields

"""Batch send body (SEND_BATCH_MESSAGE): one entry per message, message.md §5.

Declared with construct (``BatchEntryFormat``); ``decode_batch`` uses the derived
``BATCH_ENTRY_HEAD`` struct and checks every length before slicing.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable

from construct import Bytes, Int16sb, Int32sb, Struct, this

from pyrmq.codec.message_props import (MAX_BATCH_ENTRIES, MAX_PROPERTIES_LENGTH, PROPERTY_SEPARATOR,
                                      MessageFormatError)
from pyrmq.codec.native import native_function

_INT16 = struct.Struct(">h")

# --------------------------------------------------------------------------------------------
# Batch body (message.md §5)
# --------------------------------------------------------------------------------------------

BatchEntryFormat = Struct(
    "total_size" / Int32sb,
    "magic" / Int32sb,
    "body_crc" / Int32sb,
    "flag" / Int32sb,
    "body_length" / Int32sb,
    "body" / Bytes(this.body_length),
    "properties_length" / Int16sb,
    "properties" / Bytes(this.properties_length),
)
BATCH_ENTRY_HEAD = struct.Struct(">iiiii")  # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN
BATCH_ENTRY_OVERHEAD = BATCH_ENTRY_HEAD.size + 2


@dataclass(frozen=True, slots=True)
class BatchEntry:
    flag: int
    body: bytes
    properties: str


def split_batch_py(body: bytes | memoryview, max_entries: int,
                   suffix: str | None = None) -> list[tuple[int, bytes, str]]:
    """The (flag, body, properties) of each entry of a batch send body; every length is checked
    before slicing. With a ``suffix`` (the batch's own properties), each entry's properties end
    with it as the entry's stored record holds them (Apache's batch encoder): a separator between
    the two when both are non-empty and the entry's do not end with one. ValueError for a body
    that does not split into whole entries, has more than ``max_entries`` of them, or properties
    that are not UTF-8."""
    mv = memoryview(body)
    n = len(mv)
    pos = 0
    out: list[tuple[int, bytes, str]] = []
    while pos < n:
        if len(out) >= max_entries:
            raise ValueError(f"batch has more than {max_entries} entries")
        if n - pos < BATCH_ENTRY_OVERHEAD:
            raise ValueError(f"truncated batch entry at {pos}")
        total_size, _magic, _crc, flag, body_length = BATCH_ENTRY_HEAD.unpack_from(mv, pos)
        if total_size < BATCH_ENTRY_OVERHEAD or total_size > n - pos:
            raise ValueError(f"batch entry size {total_size} at {pos} out of range")
        end = pos + total_size
        p = pos + BATCH_ENTRY_HEAD.size
        if body_length < 0 or p + body_length + 2 > end:
            raise ValueError(f"batch entry body length {body_length} at {pos} out of range")
        entry_body = bytes(mv[p:p + body_length])
        p += body_length
        (prop_length,) = _INT16.unpack_from(mv, p)
        p += 2
        if prop_length < 0 or p + prop_length != end:
            raise ValueError(f"batch entry at {pos}: size does not match its lengths")
        try:
            props = str(mv[p:end], "utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"batch entry at {pos}: properties are not UTF-8") from None
        if suffix:
            props += suffix if not props or props.endswith(PROPERTY_SEPARATOR) else PROPERTY_SEPARATOR + suffix
        out.append((flag, entry_body, props))
        pos = end
    return out


_split_batch = native_function("split_batch", split_batch_py, {
    "BATCH_ENTRY_HEAD_SIZE": BATCH_ENTRY_HEAD.size, "PROPERTY_SEPARATOR_CHAR": ord(PROPERTY_SEPARATOR),
    "MAX_PROPERTIES_LENGTH": MAX_PROPERTIES_LENGTH})


def split_batch(body: bytes | memoryview, max_entries: int = MAX_BATCH_ENTRIES,
                suffix: str | None = None) -> list[tuple[int, bytes, str]]:
    """The (flag, body, properties) of each entry of a batch send body (C when built), each
    entry's properties followed by ``suffix`` as :func:`split_batch_py` says; raises
    MessageFormatError for a malformed one."""
    try:
        return _split_batch(body, max_entries, suffix)
    except ValueError as e:
        raise MessageFormatError(str(e)) from None


def decode_batch(body: bytes | memoryview, max_entries: int = MAX_BATCH_ENTRIES) -> list[BatchEntry]:
    """Split a batch send body into entries; every length is checked before slicing."""
    return [BatchEntry(*entry) for entry in split_batch(body, max_entries)]


def encode_batch(entries: Iterable[BatchEntry]) -> bytes:
    """Batch body the way the Java client writes it (magic 0, crc 0)."""
    parts = []
    for e in entries:
        props = e.properties.encode()
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise MessageFormatError(f"properties length {len(props)} > {MAX_PROPERTIES_LENGTH}")
        parts.append(BATCH_ENTRY_HEAD.pack(
            BATCH_ENTRY_OVERHEAD + len(e.body) + len(props), 0, 0, e.flag, len(e.body)))
        parts.append(e.body)
        parts.append(_INT16.pack(len(props)))
        parts.append(props)
    return b"".join(parts)

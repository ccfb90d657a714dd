"""Batch send body (SEND_BATCH_MESSAGE): one entry per message, message.md §5.

Declared with construct (``BatchEntryFormat``); ``decode_batch`` uses the derived
``BATCH_ENTRY_HEAD`` struct and checks every length before slicing.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable

from construct import Bytes, Int16sb, Int32sb, Struct, this

from pyrmq.codec.message_props import MAX_BATCH_ENTRIES, MAX_PROPERTIES_LENGTH, MessageFormatError

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


def decode_batch(body: bytes | memoryview, max_entries: int = MAX_BATCH_ENTRIES) -> list[BatchEntry]:
    """Split a batch send body into entries; every length is checked before slicing."""
    mv = memoryview(body)
    n = len(mv)
    pos = 0
    out: list[BatchEntry] = []
    while pos < n:
        if len(out) >= max_entries:
            raise MessageFormatError(f"batch has more than {max_entries} entries")
        if n - pos < BATCH_ENTRY_OVERHEAD:
            raise MessageFormatError(f"truncated batch entry at {pos}")
        total_size, _magic, _crc, flag, body_length = BATCH_ENTRY_HEAD.unpack_from(mv, pos)
        if total_size < BATCH_ENTRY_OVERHEAD or total_size > n - pos:
            raise MessageFormatError(f"batch entry size {total_size} at {pos} out of range")
        end = pos + total_size
        p = pos + BATCH_ENTRY_HEAD.size
        if body_length < 0 or p + body_length + 2 > end:
            raise MessageFormatError(f"batch entry body length {body_length} at {pos} out of range")
        entry_body = bytes(mv[p:p + body_length])
        p += body_length
        (prop_length,) = _INT16.unpack_from(mv, p)
        p += 2
        if prop_length < 0 or p + prop_length != end:
            raise MessageFormatError(f"batch entry at {pos}: size does not match its lengths")
        try:
            props = str(mv[p:end], "utf-8")
        except UnicodeDecodeError as e:
            raise MessageFormatError(f"batch entry at {pos}: {e}") from e
        out.append(BatchEntry(flag, entry_body, props))
        pos = end
    return out


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

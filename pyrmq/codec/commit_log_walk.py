"""Walking the records of a commit log buffer, and the names of store files (store.md §1-2).

Everything a reader of store files needs besides the record layout itself: the broker's
recovery and reput service walk the mapped files with :class:`RecordWalker`, and readers outside
the broker (the Spark data sources) walk file bytes the same way with nothing but the codec.

A commit log file holds consecutive records; the last one is followed by a blank record (its
magic is ``BLANK_MAGIC_CODE``) that declares the rest of the file empty, unless the file ends
exactly at a record. Past the written data there are zeros -- or, after a crash, a torn record.
The walker stops at the first of: the end of the given data, a blank record, or a record that is
not valid (:func:`check_record` decides), and says which one it met.

Sans-I/O: no files, no sockets, no trio.
"""

from __future__ import annotations

import enum
import struct
from typing import Iterator

from pyrmq.codec.message import MAGIC_CODE_V1, MAGIC_CODE_V2, ReadBuffer, RecordInfo, check_record

_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE: the first two fields of every record

# Store file names are the global offset of their first byte, zero-padded (Java's UtilAll.offset2FileName).
FILE_NAME_DIGITS = 20


def offset_to_file_name(offset: int) -> str:
    """``00000000001073741824`` for offset 1 GiB."""
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def file_name_to_offset(name: str) -> int | None:
    """The offset a store file name stands for, or None for a name that is not one."""
    if len(name) != FILE_NAME_DIGITS or not name.isdigit() or not name.isascii():
        return None
    return int(name)


class WalkEnd(enum.Enum):
    """Why a walk stopped."""

    END_OF_DATA = "end of data"   # the next record would start at (or past) the limit
    END_OF_FILE = "end of file"   # a blank record: the rest of this file holds no record
    INVALID = "invalid record"    # torn, corrupt or misplaced: nothing after it is trusted
    INCOMPLETE = "incomplete record"  # a record whose head says it runs past the limit


class RecordWalker:
    """Iterates over the records of ``buf[pos:limit]``; then ``end`` and ``position`` tell why
    and where it stopped (``position`` is relative to ``buf``, like ``pos``).

    ``file_from_offset`` is the commit log offset of ``buf[0]``: each record's PHYSICALOFFSET
    must equal its place (a stale record from before a truncation is thereby invalid).
    ``check_crc`` checks body CRCs (recovery, replicated bytes); a record cut off by ``limit``
    is INCOMPLETE rather than INVALID when its 8-byte head is plausible, so a reader of bytes that
    are still arriving (a slave's commit log) can wait for the rest.
    """

    __slots__ = ("buf", "position", "limit", "file_from_offset", "check_crc", "end")

    def __init__(self, buf: ReadBuffer, pos: int, limit: int, *, file_from_offset: int = 0,
                 check_crc: bool = True) -> None:
        self.buf = buf
        self.position = pos
        self.limit = limit
        self.file_from_offset = file_from_offset
        self.check_crc = check_crc
        self.end: WalkEnd | None = None

    def __iter__(self) -> Iterator[RecordInfo]:
        return self._walk(True)   # type: ignore[return-value]  # with info, every item is a RecordInfo

    def skip_all(self) -> None:
        """Walk to the end without building the records' RecordInfo (the same verdicts, about
        half the time): where a scan only needs ``end`` and ``position``."""
        for _ in self._walk(False):
            pass

    def _walk(self, info: bool) -> Iterator[RecordInfo | int]:
        buf, limit, base, check_crc = self.buf, self.limit, self.file_from_offset, self.check_crc
        pos = self.position
        try:
            while True:
                if pos >= limit:
                    self.end = WalkEnd.END_OF_DATA
                    return
                record = check_record(buf, pos, limit, check_crc=check_crc, expected_offset=base + pos, info=info)
                if record is None:
                    self.end = self._why_invalid(pos)
                    return
                if record == 0:
                    self.end = WalkEnd.END_OF_FILE
                    return
                pos += record if isinstance(record, int) else record.size
                self.position = pos
                yield record
        finally:
            self.position = pos

    def _why_invalid(self, pos: int) -> WalkEnd:
        """INCOMPLETE when the head is readable and announces more bytes than are there."""
        if self.limit - pos < 8:
            return WalkEnd.INCOMPLETE
        total_size, magic = _HEAD.unpack_from(self.buf, pos)
        if magic in (MAGIC_CODE_V1, MAGIC_CODE_V2) and total_size > self.limit - pos:
            return WalkEnd.INCOMPLETE
        return WalkEnd.INVALID


__all__ = [
    "FILE_NAME_DIGITS", "RecordWalker", "WalkEnd", "file_name_to_offset", "offset_to_file_name",
]

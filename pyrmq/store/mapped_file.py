"""One pre-sized, memory-mapped store file (CommitLog or ConsumeQueue segment).

The file name is the global offset of its first byte, 20 digits zero-padded. Writers put bytes
straight into ``mm`` (slice assignment / ``pack_into``); readers get memoryview slices of the
mapping. ``sync()`` is the only call meant for a worker thread.
"""

from __future__ import annotations

import logging
import mmap
import os

from pyrmq.codec.commit_log_walk import FILE_NAME_DIGITS, offset_to_file_name
from pyrmq.store import crash_points
from pyrmq.store.model import StoreError

__all__ = ["FILE_NAME_DIGITS", "OS_PAGE_SIZE", "FixedMapping", "MappedFile", "offset_to_file_name"]

log = logging.getLogger(__name__)

OS_PAGE_SIZE = 4096
_CRASH_CREATED = crash_points.armed("file.created.commitlog", "file.created.consumequeue", "file.created.index")


class FixedMapping:
    """A file of a fixed size mapped read-write: created sparse (``ftruncate``) or opened only
    when its length is the expected one.  Shared by the store files and the index files."""

    def __init__(self, path: str, file_size: int, *, create: bool, size_hint: str) -> None:
        self.path = path
        self.file_name = os.path.basename(path)
        self.file_size = file_size
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(path, flags, 0o644)
        try:
            if create and _CRASH_CREATED:
                crash_points.file_created(path)
            if create:
                os.ftruncate(self.fd, file_size)   # sparse: nothing is written until used
            else:
                actual = os.fstat(self.fd).st_size
                if actual != file_size:
                    raise StoreError(f"{path}: length not matched: file has {actual} bytes, expected "
                                     f"{file_size} ({size_hint})")
            self.mm = mmap.mmap(self.fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        self.view = memoryview(self.mm)
        self.closed = False

    def sync(self) -> None:
        """Write dirty pages of this file to disk (blocking; call from a worker thread).

        ``os.fdatasync`` releases the GIL, unlike ``mmap.flush`` (msync runs with the GIL held
        in CPython); on Linux it writes back pages dirtied through the shared mapping as well.
        """
        if not self.closed:
            os.fdatasync(self.fd)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.try_unmap():
            # a reader still holds a memoryview of the mapping; the mapping goes away with it
            log.debug("%s still has readers; leaving the mapping to the garbage collector", self.path)
        os.close(self.fd)

    def try_unmap(self) -> bool:
        """Unmap now; False while a reader still holds a view of the mapping (retry later).

        A mapping cannot be closed while memoryviews export it (a pull answer being sent): the
        clean service retries such "hanged" files, as Apache's redeleteHangedFile does.
        """
        if self.mm.closed:
            return True
        try:
            self.view.release()
            self.mm.close()
        except BufferError:
            return False
        return True

    @property
    def mapped(self) -> bool:
        return not self.mm.closed

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class MappedFile(FixedMapping):
    """A store file mapped read-write; positions are relative to the file start."""

    def __init__(self, path: str, file_size: int, *, create: bool = False) -> None:
        try:
            self.file_from_offset = int(os.path.basename(path))
        except ValueError as e:
            raise StoreError(f"store file name is not an offset: {path}") from e
        super().__init__(path, file_size, create=create, size_hint="the configured mapped file size")
        self.wrote_position = 0
        self.flushed_position = 0
        # set on the first file created in an empty consume queue (pre-blank fill, store.md §4.3)
        self.first_create_in_queue = False

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position})"

    @property
    def max_offset(self) -> int:
        """Global offset just after the last written byte."""
        return self.file_from_offset + self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def select(self, pos: int, size: int | None = None) -> memoryview | None:
        """Slice of written data from ``pos`` (to the write position if ``size`` is None)."""
        end = self.wrote_position if size is None else pos + size
        if pos < 0 or end > self.wrote_position or end < pos:
            return None
        try:
            return self.view[pos:end]
        except ValueError:   # released: the clean service deleted the file meanwhile
            return None

    def zero(self, start: int, end: int) -> None:
        """Zero ``[start, end)`` of the file (dirty tail after recovery)."""
        end = min(end, self.file_size)
        if start < end:
            self.mm[start:end] = bytes(end - start)

    def zero_dirty_tail(self, start: int, clean_run: int) -> None:
        """Zero stale bytes from ``start`` until ``clean_run`` consecutive zero bytes are seen.

        Old records beyond a truncation point must not come back to life when a shorter record
        is written over the start of them, so recovery zeroes them; the scan stops after a run of
        zeros longer than any record (the never-written part of a pre-sized file).
        """
        chunk = 64 * 1024
        zeros = bytes(chunk)
        run = 0
        pos = start
        while pos < self.file_size and run < clean_run:
            end = min(pos + chunk, self.file_size)
            if self.mm[pos:end] == zeros[: end - pos]:
                run += end - pos
            else:
                self.mm[pos:end] = zeros[: end - pos]
                run = 0
            pos = end

    def last_modified(self) -> float:
        try:
            return os.stat(self.path).st_mtime
        except FileNotFoundError:
            return 0.0

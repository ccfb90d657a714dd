"""One pre-sized, memory-mapped store file (CommitLog or ConsumeQueue segment).

The file name is the global offset of its first byte, 20 digits zero-padded. Writers put bytes
straight into ``mm`` (slice assignment / ``pack_into``); readers get memoryview slices of the
mapping. ``sync()`` is the only call meant for a worker thread.

Space is reserved before it is written.  A file is created with its full length but sparse
(``ftruncate``), as Apache creates its files: the first write to a page with no block behind it
allocates one inside the page fault, and when the disk is full the kernel answers with SIGBUS,
which kills the process -- and kills it again at every restart that writes there.  So no byte is
written through a mapping before :meth:`FixedMapping.reserve` allocated its blocks
(``posix_fallocate``), a chunk ahead of the writer; a reservation that fails is an ``OSError``
the writer turns into a refused put.  Reserving chunk by chunk rather than whole files keeps
disk use close to the data written (a 6 MB consume queue file of one message takes one chunk).
Recovery never writes to a page that is not allocated: it reads holes as zeros and clears only
pages that hold something (:meth:`MappedFile.zero_dirty_tail`), so it runs on a full disk.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
from typing import Callable

from pyrmq.codec.commit_log_walk import FILE_NAME_DIGITS, offset_to_file_name
from pyrmq.store import crash_points
from pyrmq.store.model import StoreError

__all__ = ["FILE_NAME_DIGITS", "OS_PAGE_SIZE", "FixedMapping", "MappedFile", "offset_to_file_name", "sync_file_system"]

log = logging.getLogger(__name__)

OS_PAGE_SIZE = 4096
_CRASH_CREATED = crash_points.armed("file.created.commitlog", "file.created.consumequeue", "file.created.index")
# errnos of a partition (or quota) that has no room left: a smaller reservation may still fit
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# a filesystem without fallocate (glibc emulates it almost everywhere): files stay sparse there
_NO_FALLOCATE_ERRNOS = frozenset({errno.EOPNOTSUPP, errno.ENOSYS})
# bytes compared at once while looking for stale data after a truncation point
_SCAN_CHUNK = 64 * 1024
_ZEROS = bytes(_SCAN_CHUNK)
# How far ahead a store file is reserved unless its owner says otherwise: 16 pages, so a consume
# queue (20-byte units) reserves once per 3,276 units and an idle one holds 64 KiB of disk.
DEFAULT_RESERVE_CHUNK = 64 * 1024
_no_fallocate_warned: set[str] = set()


def _syncfs() -> Callable[[int], int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs   # glibc >= 2.14; a CDLL call releases the GIL
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_SYNCFS = _syncfs()


def sync_file_system(directory: str) -> int | None:
    """Write back every dirty page of the file system holding ``directory`` (Linux ``syncfs``:
    one journal commit, where an fdatasync per file commits once per file); returns that file
    system's device number, or None when ``syncfs`` is not available. Blocking: a worker thread.
    Raises OSError when the write-back failed."""
    if _SYNCFS is None:
        return None
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _SYNCFS(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs of {directory}: {os.strerror(err)}")
        return os.fstat(fd).st_dev
    finally:
        os.close(fd)


def page_floor(n: int) -> int:
    return n - n % OS_PAGE_SIZE


def page_ceil(n: int) -> int:
    return -(-n // OS_PAGE_SIZE) * OS_PAGE_SIZE


class FixedMapping:
    """A file of a fixed size mapped read-write: created with its first ``reserve_first`` bytes
    reserved, or opened only when its length is the expected one.  Shared by the store files and
    the index files.

    ``reserved``: no byte below it needs a new block when written (it is allocated, or -- in a
    file opened at start-up, below the point writers continue from -- written already).  Writers
    compare their end with it and call :meth:`reserve` first; ``reserve_chunk`` is how far ahead a
    reservation goes when the disk has room.
    """

    def __init__(self, path: str, file_size: int, *, create: bool, size_hint: str,
                 reserve_chunk: int = 0, reserve_first: int = 0, random_access: bool = False) -> None:
        self.path = path
        self.file_name = os.path.basename(path)
        self.file_size = file_size
        self.reserve_chunk = reserve_chunk
        self.reserved = 0
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(path, flags, 0o644)
        try:
            if create and _CRASH_CREATED:
                crash_points.file_created(path)
            if create:
                os.ftruncate(self.fd, file_size)
                # no chunk ahead yet: a file made ahead of need (AllocateService) must not take
                # the space the file being written needs -- freed space would go to it first
                self.reserve(0, reserve_first, ahead=False)
            else:
                actual = os.fstat(self.fd).st_size
                if actual != file_size:
                    raise StoreError(f"{path}: length not matched: file has {actual} bytes, expected "
                                     f"{file_size} ({size_hint})")
            self.mm = mmap.mmap(self.fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self.st_dev = os.fstat(self.fd).st_dev   # its file system: one syncfs may sync it (consume queues)
            if random_access:
                # a fault reads its page only: the default read-around of a mapping reads
                # read_ahead_kb around it (8 MB on many disks), a whole 6 MB consume queue file
                # of which one unit was wanted -- 2,000 queues made 12 GB of page cache at start-up
                self.mm.madvise(mmap.MADV_RANDOM)
        except BaseException:
            os.close(self.fd)
            if create:   # a file that could not be made ready must not be found at the next start
                _unlink_quietly(path)
            raise
        self.view = memoryview(self.mm)
        self.closed = False

    def reserve(self, start: int, end: int, *, ahead: bool = True) -> None:
        """Allocate the blocks of ``[start, end)`` -- and up to ``reserve_chunk`` bytes beyond
        when the disk has room (``ahead``) -- so that writes through the mapping there cannot
        fault for want of space; then ``reserved`` covers ``end``.  A metadata update (microseconds on ext4/xfs;
        tmpfs allocates the pages).  Raises OSError (ENOSPC, EDQUOT, EIO...) with ``reserved``
        unchanged; on a nearly full disk only what is needed is taken, so the disk fills up to the
        last page before writes are refused.
        """
        start = page_floor(max(start, 0))
        need = min(self.file_size, page_ceil(end))
        if need <= start:
            self.reserved = max(self.reserved, need)
            return
        until = min(self.file_size, max(need, start + self.reserve_chunk)) if ahead else need
        try:
            os.posix_fallocate(self.fd, start, until - start)
        except OSError as e:
            if e.errno in _NO_FALLOCATE_ERRNOS:
                directory = os.path.dirname(self.path)
                if directory not in _no_fallocate_warned:
                    _no_fallocate_warned.add(directory)
                    log.warning("%s: the filesystem cannot reserve space (%s); files there stay sparse, "
                                "and a full disk may end in SIGBUS", directory, e)
            elif e.errno in NO_SPACE_ERRNOS and until > need:
                os.posix_fallocate(self.fd, start, need - start)
                until = need
            else:
                raise
        self.reserved = max(self.reserved, until)

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

    def release_pages(self, start: int, end: int) -> None:
        """Take the pages of ``[start, end)`` (page-aligned inward) out of this process's page
        tables (MADV_DONTNEED on a shared file mapping): they stay in the page cache -- a dirty
        one is still written back -- and a later read maps them again with a minor fault.
        Nothing when the file was unmapped meanwhile (the clean service, another thread)."""
        start, end = page_ceil(start), page_floor(min(end, self.file_size))
        if end <= start:
            return
        try:
            self.mm.madvise(mmap.MADV_DONTNEED, start, end - start)
        except ValueError:   # closed
            pass

    def destroy(self) -> None:
        self.close()
        _unlink_quietly(self.path)

    def clear(self, start: int, end: int) -> bool:
        """Zero whatever is not zero in ``[start, end)``, page by page; True if anything was.

        A page that reads as zeros is never written: it may be a hole (or an unwritten extent),
        and writing it would need a block -- which a full disk does not have.  A page holding data
        has its block already.
        """
        mm = self.mm
        found = False
        pos = start
        while pos < end:
            stop = min(end, pos + _SCAN_CHUNK)
            if mm[pos:stop] != _ZEROS[:stop - pos]:
                page = pos
                while page < stop:
                    page_end = min(stop, page_floor(page) + OS_PAGE_SIZE)
                    if mm[page:page_end] != _ZEROS[:page_end - page]:
                        mm[page:page_end] = _ZEROS[:page_end - page]
                        found = True
                    page = page_end
            pos = stop
        return found

    def leading_data_end(self) -> int:
        """Where the first hole of the file begins (SEEK_HOLE from 0); the file size when the
        filesystem cannot tell.

        What follows reads as zeros and is never read through the mapping at start-up: on tmpfs
        a read fault on a hole of a shared mapping allocates a page -- memory for nothing, and a
        SIGBUS when the tmpfs is full.  Data is written from the start of a store file on, so
        every record and unit lies below this point (pages only reserved count as holes).
        """
        try:
            return min(os.lseek(self.fd, 0, os.SEEK_HOLE), self.file_size)
        except OSError:
            return self.file_size

    def data_extent(self, pos: int) -> tuple[int, int]:
        """``(start, end)`` of the first stretch at or after ``pos`` that may hold data; holes
        (SEEK_DATA / SEEK_HOLE) read as zeros and are skipped.  ``(file_size, file_size)`` when
        nothing follows; the whole rest when the filesystem cannot tell."""
        size = self.file_size
        try:
            start = os.lseek(self.fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return size, size
            return pos, size
        try:
            end = os.lseek(self.fd, start, os.SEEK_HOLE)
        except OSError:
            end = size
        return min(start, size), min(end, size)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class MappedFile(FixedMapping):
    """A store file mapped read-write; positions are relative to the file start."""

    def __init__(self, path: str, file_size: int, *, create: bool = False,
                 reserve_chunk: int = DEFAULT_RESERVE_CHUNK, random_access: bool = False) -> None:
        try:
            self.file_from_offset = int(os.path.basename(path))
        except ValueError as e:
            raise StoreError(f"store file name is not an offset: {path}") from e
        super().__init__(path, file_size, create=create, size_hint="the configured mapped file size",
                         reserve_chunk=reserve_chunk, reserve_first=OS_PAGE_SIZE, random_access=random_access)
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

    def reserve_to(self, end: int) -> None:
        """:meth:`FixedMapping.reserve` up to ``end`` from where this file is written: below
        the write position everything was written (allocated) already."""
        self.reserve(max(self.reserved, self.wrote_position), end)

    def zero(self, start: int, end: int) -> bool:
        """Zero ``[start, end)`` of the file (dirty tail after recovery); True if anything was."""
        return self.clear(start, min(end, self.file_size))

    def zero_dirty_tail(self, start: int, clean_run: int) -> bool:
        """Zero stale bytes from ``start`` until ``clean_run`` consecutive zero bytes are seen;
        True if any were found.

        Old records beyond a truncation point must not come back to life when a shorter record
        is written over the start of them, so recovery zeroes them; the scan stops after a run of
        zeros longer than any record (the never-written part of a pre-sized file).  Holes count
        as zeros and are skipped unread, so the work follows the data actually on disk, not the
        file size; only pages holding data are written (:meth:`FixedMapping.clear`).
        """
        size = self.file_size
        run = 0
        pos = start
        found = False
        while pos < size and run < clean_run:
            data_start, data_end = self.data_extent(pos)
            run += data_start - pos
            pos = data_start
            while pos < data_end and run < clean_run:
                end = min(data_end, pos + _SCAN_CHUNK)
                if self.clear(pos, end):
                    found = True
                    run = 0
                else:
                    run += end - pos
                pos = end
        return found

    def last_modified(self) -> float:
        try:
            return os.stat(self.path).st_mtime
        except FileNotFoundError:
            return 0.0

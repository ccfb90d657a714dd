"""A directory of consecutive MappedFiles forming one logical byte space (CommitLog or a CQ).

Threading: everything runs on the caller's (event-loop) thread except :meth:`flush`, which
the broker runs from a worker thread. Writers publish how far the data is complete with
:meth:`commit` (one tuple store, no lock: the hot path); ``flush`` captures that position, then
the file list under ``_lock``, syncs outside the lock, then publishes ``flushed_where``. ``close`` waits for a running flush.

Creating and mapping a file (open, ftruncate, mmap of up to 1 GiB) is a blocking call too, so,
as Apache's AllocateMappedFileService, :meth:`prepare_next_file` (run from a worker thread)
creates the file after the last one ahead of need; :meth:`get_last_mapped_file` takes it when
the current file is full.  The prepared file is on disk but not in ``mapped_files`` (offsets and
flushes never see it); ``_prepare_lock`` keeps the worker and an inline creation from making the
same file twice.  ``close`` deletes it; a store left with such an empty next file by a crash
recovers as Apache's does: recovery finds no record in it and keeps it empty (after a full
file) or deletes it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Callable

from pyrmq.store import crash_points
from pyrmq.store.mapped_file import (
    DEFAULT_RESERVE_CHUNK,
    FILE_NAME_DIGITS,
    OS_PAGE_SIZE,
    MappedFile,
    offset_to_file_name,
)
from pyrmq.store.model import StoreError

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FlushPlan:
    """What one flush of a queue syncs: its files with dirty data below ``target``."""

    queue: MappedFileQueue
    target: int
    target_ts: int
    files: list[MappedFile]

    def each_file(self) -> Iterator[MappedFile]:
        """The files to sync, in order (the crash point ``flush.between_files`` between two),
        less those closed since the plan was made (truncated: ``flushed_by`` knows)."""
        for i, mf in enumerate(self.files):
            if i and _CRASH_MID_FLUSH:
                crash_points.reach("flush.between_files")
            if not mf.closed:
                yield mf


_CRASH_MID_FLUSH = crash_points.armed("flush.between_files")


def is_all_zero(path: str) -> bool:
    chunk = 1 << 20
    with open(path, "rb") as f:
        while block := f.read(chunk):
            if block.count(0) != len(block):
                return False
    return True


def drop_unsized_tail(directory: str, names: list[str], file_size: int) -> None:
    """Delete the newest files of ``names`` (sorted) that a crash left shorter than ``file_size``
    and without a non-zero byte, and remove them from ``names``.

    A crash between creating a store file and sizing it leaves such a file; nothing can have been
    written to it (records go through the mapping of a sized file), so the store is what it was a
    moment before the creation.  A short file holding data is not touched: loading it fails.
    """
    while names:
        path = os.path.join(directory, names[-1])
        size = os.path.getsize(path)
        if size >= file_size or not is_all_zero(path):
            return
        log.warning("deleting %s: %d bytes of zeros, not the %d of a store file (a crash while "
                    "creating it)", path, size, file_size)
        os.unlink(path)
        names.pop()


class MappedFileQueue:
    def __init__(self, store_path: str, mapped_file_size: int, reserve_chunk: int = DEFAULT_RESERVE_CHUNK,
                 random_access: bool = False) -> None:
        if mapped_file_size <= 0:
            raise ValueError("mapped file size must be positive")
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.reserve_chunk = reserve_chunk   # how far ahead of the writer file space is reserved
        self.random_access = random_access   # no read-around on faults (MappedFile)
        self.mapped_files: list[MappedFile] = []
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._prepare_lock = threading.Lock()
        self._prepared: MappedFile | None = None   # the next file, created ahead of need
        self.files_created_inline = 0   # files the writer had to create itself (statistics)
        # called (on the writer's thread) when a new file became the last one: the broker's
        # allocator then prepares the file after it
        self.on_new_file: Callable[[], None] | None = None
        # (committed position, store time of the record ending there): one tuple, so the writer
        # publishes both in one store, without the lock, and a flush reads a consistent pair
        self._committed: tuple[int, int] = (0, 0)
        self._flushed_where = 0
        self.flushed_store_timestamp = 0  # store time of the last flushed record (checkpoint)

    # ------------------------------------------------------------------ files

    def load(self) -> None:
        """Map every existing file (sorted by name); sizes must equal the configured size."""
        if not os.path.isdir(self.store_path):
            return
        names = sorted(
            n for n in os.listdir(self.store_path) if len(n) == FILE_NAME_DIGITS and n.isdigit()
        )
        drop_unsized_tail(self.store_path, names, self.mapped_file_size)
        files = []
        try:
            for name in names:
                mf = MappedFile(os.path.join(self.store_path, name), self.mapped_file_size,
                                reserve_chunk=self.reserve_chunk, random_access=self.random_access)
                # like Java: assume full until recovery finds the real end
                mf.wrote_position = mf.flushed_position = self.mapped_file_size
                files.append(mf)
        except BaseException:
            for mf in files:
                mf.close()
            raise
        for prev, nxt in zip(files, files[1:]):
            if nxt.file_from_offset != prev.file_from_offset + self.mapped_file_size:
                for mf in files:
                    mf.close()
                raise StoreError(f"{self.store_path}: files {prev.file_name} and {nxt.file_name} "
                                 "are not consecutive")
        with self._lock:
            self.mapped_files = files

    def first_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[0] if files else None

    def last_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[-1] if files else None

    def get_last_mapped_file(self, start_offset: int = 0) -> MappedFile:
        """The file to write to: the last one, or a new one if there is none or it is full
        (the first file of an empty queue starts at the file boundary below ``start_offset``)."""
        last = self.last_mapped_file()
        if last is not None and not last.is_full():
            return last
        if last is None:
            create_offset = self._first_file_offset(start_offset)
        else:
            create_offset = last.file_from_offset + self.mapped_file_size
        with self._prepare_lock:   # waits only if a worker is creating a file right now
            mf = self._take_prepared(create_offset)
            if mf is None:
                if last is not None:
                    log.debug("%s: creating file %d inline (none prepared)", self.store_path, create_offset)
                self.files_created_inline += 1
                mf = self._new_file(create_offset)
        mf.first_create_in_queue = last is None
        with self._lock:
            self.mapped_files = self.mapped_files + [mf]
        if self.on_new_file is not None:
            self.on_new_file()
        return mf

    def _new_file(self, offset: int) -> MappedFile:
        os.makedirs(self.store_path, exist_ok=True)
        return MappedFile(os.path.join(self.store_path, offset_to_file_name(offset)),
                          self.mapped_file_size, create=True, reserve_chunk=self.reserve_chunk,
                          random_access=self.random_access)

    def _take_prepared(self, offset: int) -> MappedFile | None:
        """The prepared file if it starts at ``offset``; a stale one is deleted (holding _prepare_lock)."""
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared.file_from_offset != offset:
            log.info("%s: dropping prepared file %s (next file is %d)", self.store_path, prepared.file_name, offset)
            prepared.destroy()
            prepared = None
        return prepared

    def next_file_prepared(self) -> bool:
        """True when the file after the last one exists already (or there is no last file)."""
        last = self.last_mapped_file()
        prepared = self._prepared
        return last is None or (prepared is not None
                                and prepared.file_from_offset == last.file_from_offset + self.mapped_file_size)

    def prepare_next_file(self) -> bool:
        """Create and map the file after the last one, ahead of need; True if one was created.

        Blocking (file creation and mmap): call it from a worker thread.
        """
        with self._prepare_lock:
            last = self.last_mapped_file()
            if last is None:
                return False
            return self._prepare_at(last.file_from_offset + self.mapped_file_size)

    def prepare_first_file(self, start_offset: int) -> bool:
        """Create and map the first file of an empty queue, the one holding ``start_offset``, ahead
        of the write that needs it; True if one was created. Blocking: a worker thread."""
        with self._prepare_lock:
            if self.last_mapped_file() is not None:
                return False
            return self._prepare_at(self._first_file_offset(start_offset))

    def _first_file_offset(self, start_offset: int) -> int:
        """Where an empty queue's first file starts: the file boundary at or below ``start_offset``."""
        return start_offset - start_offset % self.mapped_file_size

    def _prepare_at(self, offset: int) -> bool:
        """Make the file at ``offset`` the prepared one (holding _prepare_lock)."""
        if self._prepared is not None and self._prepared.file_from_offset == offset:
            return False
        self._take_prepared(offset)
        self._prepared = self._new_file(offset)
        return True

    def _drop_prepared(self) -> None:
        """Delete the prepared file; called after the file list changed, so a worker preparing
        meanwhile (holding _prepare_lock) has its file dropped here, and a later one sees the new list."""
        with self._prepare_lock:
            prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.destroy()

    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        files = self.mapped_files
        if not files:
            return None
        first = files[0]
        index = (offset - first.file_from_offset) // self.mapped_file_size
        if 0 <= index < len(files):
            mf = files[index]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        return None

    def locate(self, offset: int, size: int) -> tuple[MappedFile, int] | None:
        """The file holding the ``size`` written bytes at ``offset`` and their position in it;
        None when they are not all written (or not in one file)."""
        mf = self.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        return (mf, pos) if pos + size <= mf.wrote_position else None

    def min_offset(self) -> int:
        first = self.first_mapped_file()
        return first.file_from_offset if first is not None else -1

    def max_offset(self) -> int:
        last = self.last_mapped_file()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    def roll_next_file(self, offset: int) -> int:
        return offset + self.mapped_file_size - offset % self.mapped_file_size

    # ------------------------------------------------------------------ positions

    def commit(self, where: int, store_timestamp: int = 0) -> None:
        """Publish that all bytes below ``where`` are completely written (flush target)."""
        self._committed = (where, store_timestamp or self._committed[1])

    @property
    def committed_where(self) -> int:
        return self._committed[0]

    @property
    def flushed_where(self) -> int:
        return self._flushed_where

    def set_positions(self, where: int) -> None:
        """Set committed and flushed positions (recovery)."""
        with self._lock:
            self._committed = (where, self._committed[1])
            self._flushed_where = where

    def flush(self, least_pages: int = 0) -> int:
        """Sync files up to the committed position; returns the flushed position.

        With ``least_pages > 0`` nothing happens unless that many pages are dirty (or a full
        file is waiting). Safe to call from a worker thread while another thread appends.
        """
        with self._flush_lock:
            plan = self.flush_plan(least_pages)
            if plan is None:
                return self._flushed_where
            for mf in plan.each_file():
                mf.sync()
            self._flushed(plan)
            return plan.target

    def may_need_flush(self, least_pages: int) -> bool:
        """False when :meth:`flush_plan` would surely return None: a check without the lock, for
        a round over thousands of queues, most of which wait for more units. The plan itself
        decides under the lock."""
        return self._due(self._committed[0], self._flushed_where, least_pages)

    def _due(self, target: int, flushed: int, least_pages: int) -> bool:
        """Something to sync below ``target``: with ``least_pages``, that many dirty pages, or a
        file filled since ``flushed``."""
        if target <= flushed:
            return False
        if least_pages <= 0:
            return True
        size = self.mapped_file_size
        return target // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE >= least_pages or target // size != flushed // size

    def flush_plan(self, least_pages: int = 0) -> FlushPlan | None:
        """What a flush would sync now (the committed position and the files holding dirty data
        below it), or None when nothing is to be synced (see :meth:`flush`)."""
        with self._lock:
            target, target_ts = self._committed
            flushed = self._flushed_where
            files = self.mapped_files
        if not self._due(target, flushed, least_pages):
            return None
        size = self.mapped_file_size
        todo = [mf for mf in files if mf.file_from_offset + size > flushed and mf.file_from_offset < target]
        return FlushPlan(self, target, target_ts, todo)

    def flushed_by(self, plan: FlushPlan) -> None:
        """Record ``plan`` as done when its files were synced by other means (one ``syncfs`` of
        their file system, after the plan was made). A truncation since then wins."""
        with self._flush_lock:
            if plan.target <= self._committed[0]:
                self._flushed(plan)

    def _flushed(self, plan: FlushPlan) -> None:
        size = self.mapped_file_size
        for mf in plan.files:
            mf.flushed_position = min(size, plan.target - mf.file_from_offset)
        with self._lock:
            if plan.target > self._flushed_where:
                self._flushed_where = plan.target
                if plan.target_ts:
                    self.flushed_store_timestamp = plan.target_ts

    def truncate_dirty_files(self, offset: int, clean_run: int) -> None:
        """Forget everything at or after ``offset``: zero the tail of its file, delete later files."""
        with self._flush_lock:
            self._truncate_dirty_files(offset, clean_run)
        self.set_positions(offset)
        self._drop_prepared()

    def _truncate_dirty_files(self, offset: int, clean_run: int) -> None:
        keep = []
        for mf in self.mapped_files:
            tail = mf.file_from_offset + self.mapped_file_size
            if tail <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                pos = offset - mf.file_from_offset
                if mf.zero_dirty_tail(pos, clean_run):
                    # on disk at once: a power loss must not bring the stale bytes back under a
                    # start that trusts what follows the end to be zeros
                    mf.sync()
                mf.wrote_position = mf.flushed_position = pos
                keep.append(mf)
            else:
                log.info("deleting dirty store file %s (beyond %d)", mf.path, offset)
                mf.destroy()
        with self._lock:
            self.mapped_files = keep

    def delete_last_mapped_file(self) -> None:
        last = self.last_mapped_file()
        if last is not None:
            with self._flush_lock, self._lock:
                self.mapped_files = self.mapped_files[:-1]
            last.destroy()
        self._drop_prepared()

    def delete_first_file(self, mf: MappedFile) -> bool:
        """Drop ``mf`` if it is still the first file and not the last, then close and delete it.

        For the clean service (a worker thread): ``_flush_lock`` keeps a running flush from
        syncing a descriptor closed here. Readers holding a view keep the mapping alive
        (``mf.mapped`` stays True until :meth:`MappedFile.try_unmap` succeeds).
        """
        with self._flush_lock:
            with self._lock:
                files = self.mapped_files
                if len(files) < 2 or files[0] is not mf:
                    return False
                self.mapped_files = files[1:]
            mf.destroy()
        return True

    def close(self) -> None:
        # as Apache's AllocateMappedFileService.shutdown: a cleanly closed store has no empty
        # prepared file (after a crash one may be left; recovery handles it)
        self._drop_prepared()
        with self._flush_lock:
            for mf in self.mapped_files:
                mf.close()

    def destroy(self) -> None:
        with self._flush_lock:
            for mf in self.mapped_files:
                mf.destroy()
            with self._lock:
                self.mapped_files = []
            self._committed = (0, 0)
            self._flushed_where = 0
        self._drop_prepared()
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass

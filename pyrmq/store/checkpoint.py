"""StoreCheckpoint: the three recovery timestamps in a 4096-byte file (store.md §6.1)."""

from __future__ import annotations

import errno
import mmap
import os

from pyrmq.codec.store_formats import (
    CHECKPOINT_4X,
    CHECKPOINT_FILE_SIZE,
    checkpoint_min_timestamp,
)


class StoreCheckpoint:
    """Timestamps live in memory; :meth:`flush` writes them (callable from a worker thread)."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(self.fd).st_size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(self.fd, CHECKPOINT_FILE_SIZE)
            # its page is written through the mapping at every flush: it must have a block, or a
            # full disk ends in SIGBUS (a no-op when it has one, as after any earlier flush)
            try:
                os.posix_fallocate(self.fd, 0, CHECKPOINT_FILE_SIZE)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS):   # no fallocate there: stays sparse
                    raise
            self.mm = mmap.mmap(self.fd, CHECKPOINT_FILE_SIZE)
        except BaseException:
            os.close(self.fd)
            raise
        # bytes 24.. (5.x masterFlushedOffset, confirmPhyOffset) are left untouched
        self.physic_msg_timestamp: int
        self.logics_msg_timestamp: int
        self.index_msg_timestamp: int
        (self.physic_msg_timestamp, self.logics_msg_timestamp,
         self.index_msg_timestamp) = CHECKPOINT_4X.unpack_from(self.mm, 0)
        self.closed = False

    def min_timestamp(self) -> int:
        return checkpoint_min_timestamp(self.physic_msg_timestamp, self.logics_msg_timestamp)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def flush(self) -> None:
        if self.closed:
            return
        CHECKPOINT_4X.pack_into(self.mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                                self.index_msg_timestamp)
        os.fdatasync(self.fd)  # releases the GIL, unlike mmap.flush

    def close(self) -> None:
        if self.closed:
            return
        self.flush()
        self.closed = True
        self.mm.close()
        os.close(self.fd)

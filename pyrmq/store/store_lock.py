"""The store's ``lock`` file: one broker process per store directory, Java brokers included.

Java takes ``FileChannel.tryLock(0, 1)`` on ``<storePathRootDir>/lock``; pyrmq takes the same
byte range, so neither broker can open a store the other has open.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading

from pyrmq.store.model import StoreError

# store roots locked by this process; needed where only POSIX record locks exist (they do not
# conflict inside one process, and closing any descriptor of the file would drop them)
_LOCKED_ROOTS: set[str] = set()
_LOCKED_ROOTS_GUARD = threading.Lock()

_F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_FLOCK = struct.Struct("@hhqqi4x")  # struct flock on Linux (64-bit off_t)


def _lock_first_byte(fd: int) -> None:
    """Exclusive lock on byte range (0, 1), the region Java's FileChannel.tryLock(0, 1) takes.

    Prefer an open-file-description lock: it conflicts with Java's POSIX lock, with a second
    open in this process, and is not dropped when some other descriptor of the file is closed.
    """
    if _F_OFD_SETLK is not None and _FLOCK.size == 32:
        try:
            fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
            return
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)


def _unlock_first_byte(fd: int) -> None:
    if _F_OFD_SETLK is not None and _FLOCK.size == 32:
        try:
            fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, 0, 1, 0))
            return
        except OSError:
            pass  # fall back to the POSIX lock, which is what was taken then
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)


class StoreLock:
    """Held from ``acquire`` to ``release``; ``acquire`` raises StoreError when in use."""

    def __init__(self, root_dir: str, lock_path: str) -> None:
        self.root = os.path.realpath(root_dir)
        self.lock_path = lock_path
        self._fd: int | None = None

    def acquire(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        with _LOCKED_ROOTS_GUARD:
            if self.root in _LOCKED_ROOTS:
                raise StoreError(f"Lock failed, MQ already started ({self.root} is in use)")
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _lock_first_byte(fd)
            except OSError as e:
                os.close(fd)
                raise StoreError(f"Lock failed, MQ already started: another broker holds the store {self.root} "
                                 f"(its lock file {self.lock_path})") from e
            os.pwrite(fd, b"lock", 0)
            _LOCKED_ROOTS.add(self.root)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with _LOCKED_ROOTS_GUARD:
            try:
                _unlock_first_byte(self._fd)
            finally:
                os.close(self._fd)
                _LOCKED_ROOTS.discard(self.root)
        self._fd = None

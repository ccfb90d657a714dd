"""fdatasync handed to a thread of its own, its end signalled through an eventfd.

The SYNC_FLUSH group commit (``pyrmq.broker.flush_service``) syncs the commit log while the
event loop appends the next sends, and waits for the eventfd as for a socket. The syncer is
the C ``pyrmq.store._syncer.Syncer`` when that extension was built: its thread never takes the
GIL, so a sync neither waits for the busy loop to let it start nor to let it return (issue 14).
Otherwise, or with ``PYRMQ_NATIVE=0``, its twin :class:`ThreadSyncer` below, a Python thread,
does the same.

The interface of both: ``start(fd)`` (the file is synced through a duplicate of ``fd``, so
closing ``fd`` meanwhile does no harm), ``fileno()`` readable once done, ``finish()`` (None, or
the sync's OSError), ``synced()`` (True once it ended without error, a look that consumes
nothing: ``finish()`` is still due), ``close()``. One sync at a time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Protocol

from pyrmq.codec.native import load_extension


class FileSyncer(Protocol):
    def start(self, fd: int) -> None: ...
    def finish(self) -> None: ...
    def synced(self) -> bool: ...
    def fileno(self) -> int: ...
    def close(self) -> None: ...


class ThreadSyncer:
    """The Python twin of ``_syncer.Syncer``: the same, on a Python thread (which needs the GIL
    to start each sync and to return from it)."""

    def __init__(self) -> None:
        self._event_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._cond = threading.Condition()
        self._fd = -1          # the duplicate handed to the thread, -1: none
        self._error = 0
        self._stopping = False
        self._busy = False
        self._synced_ok = False   # set by the thread, read by synced() (one attribute: atomic under the GIL)
        self._thread = threading.Thread(target=self._run, name="pyrmq-syncer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        cond = self._cond
        with cond:
            while True:
                while self._fd < 0 and not self._stopping:
                    cond.wait()
                if self._fd < 0:
                    return
                fd = self._fd
                cond.release()
                try:
                    os.fdatasync(fd)
                    error = 0
                except OSError as e:
                    error = e.errno or 0
                finally:
                    os.close(fd)
                    cond.acquire()
                self._fd = -1
                self._error = error
                self._synced_ok = error == 0
                os.eventfd_write(self._event_fd, 1)

    def start(self, fd: int) -> None:
        if self._event_fd < 0:
            raise ValueError("the syncer is closed")
        if self._busy:
            raise RuntimeError("a sync is already under way: finish() it first")
        dup = os.dup(fd)
        self._synced_ok = False
        with self._cond:
            self._fd = dup
            self._error = 0
            self._cond.notify()
        self._busy = True

    def finish(self) -> None:
        if not self._busy or self._event_fd < 0:
            raise RuntimeError("no sync was started")
        try:
            os.eventfd_read(self._event_fd)
        except BlockingIOError:
            raise RuntimeError("the sync is not done yet: wait until fileno() is readable") from None
        self._busy = False
        with self._cond:
            error = self._error
        if error:
            raise OSError(error, os.strerror(error))

    def synced(self) -> bool:
        return self._busy and self._synced_ok

    def fileno(self) -> int:
        if self._event_fd < 0:
            raise ValueError("the syncer is closed")
        return self._event_fd

    def close(self) -> None:
        if self._event_fd < 0:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()
        os.close(self._event_fd)
        self._event_fd = -1


_syncer = load_extension("pyrmq.store._syncer")
_NATIVE_SYNCER: Callable[[], FileSyncer] | None = None if _syncer is None else _syncer.Syncer
NATIVE: bool = _NATIVE_SYNCER is not None


def new_syncer() -> FileSyncer:
    """A syncer with its thread started: the C one when built, else the twin."""
    return ThreadSyncer() if _NATIVE_SYNCER is None else _NATIVE_SYNCER()

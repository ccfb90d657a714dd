"""Crash points: the process kills itself with SIGKILL at a named point, for recovery tests.

``PYRMQ_CRASH_POINT=name[:n]`` arms one point: the ``n``-th time (default 1) the code reaches it,
the process sends itself SIGKILL -- no finally blocks, no flush, no graceful stop, exactly what
``kill -9`` or the OOM killer does at that instant.  The tests in ``tests/robustness`` restart the
store afterwards and check that nothing acknowledged is lost and every derived file is rebuilt.

The variable is read once, at import.  A call site keeps the answer of :func:`armed` in a module
global and tests it before calling :func:`reach`, so an unarmed point costs one global lookup and
a branch on the hot paths (an append, an index insert).  An unknown name fails the import: a
misspelt point would otherwise let a test pass without ever crashing.

The points (see ``POINTS``) live in the store because the store may not import the roles; the
config writer (``config_file.write_atomically``) is in the store too.
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "PYRMQ_CRASH_POINT"

POINTS = {
    "commitlog.appended": "a record is in the commit log (committed position published), not yet dispatched "
                          "to the consume queue and the index",
    "flush.between_files": "a flush synced one file and has more to sync (commit log or consume queue), "
                           "flushed position not yet published",
    "config.tmp_written": "a config file's .tmp is written and fsynced, the .bak and the rename not done",
    "config.renamed": "a config file's .tmp was renamed over it, the directory not yet fsynced",
    "index.item_written": "an index item is written, its hash slot and the index header not yet",
    "file.created.commitlog": "a commit log file exists, not yet sized nor mapped",
    "file.created.consumequeue": "a consume queue file exists, not yet sized nor mapped",
    "file.created.index": "an index file exists, not yet sized nor mapped",
    "timer.unit_appended": "a timer log unit is written, its wheel slot not yet pointed at it",
    "timer.delivered_one": "a due timer message was put to its real topic, the checkpoint's count of the "
                           "slot's delivered messages not yet moved",
    "timer.read_time_moved": "the timer's read time moved past a delivered slot, the slot not yet cleared",
    "timer.flushed_before_checkpoint": "the timer log and wheel are synced, the timer checkpoint not yet written",
}


def _parse(value: str | None) -> tuple[str | None, int]:
    if not value:
        return None, 0
    name, _, nth = value.partition(":")
    if name not in POINTS:
        raise ValueError(f"{ENV}={value!r}: unknown crash point {name!r}; known: {', '.join(sorted(POINTS))}")
    count = int(nth) if nth else 1
    if count < 1:
        raise ValueError(f"{ENV}={value!r}: the count must be at least 1")
    return name, count


_ARMED, _NTH = _parse(os.environ.get(ENV))
_reached = 0
_lock = threading.Lock()   # flushes reach their point from worker threads


def armed(*names: str) -> bool:
    """True when ``PYRMQ_CRASH_POINT`` names one of these points (call once, at import of the
    call site)."""
    for name in names:
        if name not in POINTS:
            raise ValueError(f"unknown crash point {name!r}")
    return _ARMED in names


def reach(name: str) -> None:
    """Count a passage through ``name``; SIGKILL this process at the armed passage."""
    global _reached
    if name != _ARMED:
        return
    with _lock:
        _reached += 1
        if _reached < _NTH:
            return
        # one line on stderr (unbuffered, no logging machinery) so a test can tell this kill
        # from a crash of any other kind
        os.write(2, f"pyrmq: crash point {name} reached ({_reached}), SIGKILL\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)


def file_created(path: str) -> None:
    """``file.created.<kind>`` for a store file just created at ``path``; the kind comes from the
    store layout (``index/<name>``, ``consumequeue/<topic>/<queue>/<name>``, else the commit log,
    whose directory is configurable)."""
    parts = os.path.normpath(path).split(os.sep)
    if "pyrmq-timer" in parts:
        return   # the timer's files have points of their own (timer.*)
    if len(parts) >= 2 and parts[-2] == "index":
        reach("file.created.index")
    elif len(parts) >= 4 and parts[-4] == "consumequeue":
        reach("file.created.consumequeue")
    else:
        reach("file.created.commitlog")

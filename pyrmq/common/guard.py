"""Background services keep running whatever one round of their work raises.

Every periodic service of the roles (flushes, config writes, file preallocation, expiry, disk
checks, delayed delivery, broker registration, the NameServer's scan) runs each round inside
``ServiceGuard.round()``: an exception ends that round only, as an exception in one of Apache's
scheduled runnables is caught and logged there.  A failure that repeats every round is logged
once, then reminded of every ``REMIND_S`` seconds with its count, so a broken disk does not fill
the log; the recovery is logged too.  Cancellation (``trio.Cancelled`` is a BaseException) is
never caught.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

REMIND_S: Final = 60.0


class ServiceGuard:
    """Contains the failures of one background service's rounds."""

    def __init__(self, name: str, log: logging.Logger) -> None:
        self.name = name
        self.log = log
        self.failures = 0          # rounds that raised, in all (statistics, tests)
        self._repeats = 0          # consecutive failing rounds since the last log line
        self._failing_since: float | None = None
        self._reminded_at = 0.0

    @contextmanager
    def round(self) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            self.failed(exc)
        else:
            self.succeeded()

    def failed(self, exc: Exception) -> None:
        self.failures += 1
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = self._reminded_at = now
            self._repeats = 0
            self.log.error("%s failed, it keeps running: %s: %s", self.name, type(exc).__name__, exc,
                           exc_info=exc)
            return
        self._repeats += 1
        if now - self._reminded_at >= REMIND_S:
            self._reminded_at = now
            self.log.error("%s still failing (%d more times in %.0f s): %s: %s", self.name, self._repeats,
                           now - self._failing_since, type(exc).__name__, exc)
            self._repeats = 0

    def succeeded(self) -> None:
        if self._failing_since is not None:
            self.log.warning("%s works again after %.0f s of failures", self.name,
                             time.monotonic() - self._failing_since)
            self._failing_since = None

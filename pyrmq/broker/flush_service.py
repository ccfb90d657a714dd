"""Flushing the store to disk from worker threads.

SYNC_FLUSH: senders await ``wait_flushed`` for the group commit that covers their record -- one
msync for every send that arrived meanwhile -- and are answered FLUSH_DISK_TIMEOUT after
``syncFlushTimeout`` (a deadline on trio's clock).
ASYNC_FLUSH: the commit log is flushed every ``flushIntervalCommitLog`` ms once
``flushCommitLogLeastPages`` pages are dirty, everything at least every
``flushCommitLogThoroughInterval`` ms.  Either way the consume queues are flushed every
``flushIntervalConsumeQueue`` ms (``flushConsumeQueueLeastPages`` /
``flushConsumeQueueThoroughInterval`` alike).  fsync never runs on the event loop.
"""

from __future__ import annotations

import logging
from typing import Callable
import trio

from pyrmq.common.guard import ServiceGuard
from pyrmq.common.offset_waiters import OffsetWaiters
from pyrmq.store.message_store import DefaultMessageStore, FlushDiskType, MessageStoreConfig

log = logging.getLogger(__name__)

# After a failed group commit (EIO, ENOSPC on a file system that allocates at writeback), the
# waiting sends are flushed again this often until their syncFlushTimeout.
FLUSH_RETRY_S = 0.05


class _LeastPages:
    """flush*LeastPages with its thorough interval, as Apache's flush services: a round flushes
    only when that many pages are dirty, except one round per thorough interval flushes all."""

    def __init__(self, least_pages: int, thorough_interval_ms: int) -> None:
        self.least_pages = least_pages
        self.thorough_interval_s = thorough_interval_ms / 1000
        self.last_thorough = -float("inf")   # the first round is thorough

    def now(self) -> int:
        t = trio.current_time()
        if t >= self.last_thorough + self.thorough_interval_s:
            self.last_thorough = t
            return 0
        return self.least_pages


class FlushService:
    def __init__(self, store: DefaultMessageStore, config: MessageStoreConfig) -> None:
        self.store = store
        self.config = config
        self._waiters = OffsetWaiters()
        self._wake = trio.Event()
        self.group_commits = 0

    @property
    def pending_waiters(self) -> int:
        """Sends still waiting for their group commit (a graceful stop waits for none)."""
        return self._waiters.pending

    async def wait_flushed(self, next_offset: int) -> bool:
        """True once the commit log is flushed past ``next_offset``; False after syncFlushTimeout."""
        self._wake.set()
        flushed = await self._waiters.wait(next_offset, self.config.sync_flush_timeout / 1000)
        if not flushed:
            log.warning("sync flush timed out at offset %d", next_offset)
        return flushed

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
                nursery.start_soon(self._group_commit_loop)
            else:
                nursery.start_soon(self._periodic_commit_log_loop)
            nursery.start_soon(self._consume_queue_loop)

    async def _group_commit_loop(self) -> None:
        guard = ServiceGuard("group commit (SYNC_FLUSH)", log)
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            with guard.round():
                await self._commit_waiters()
            # Waiters left means the flush failed: retried until each one's own deadline passes
            # (then it is answered FLUSH_DISK_TIMEOUT and gives up its place).
            if self._waiters.pending:
                await trio.sleep(FLUSH_RETRY_S)
                self._wake.set()

    async def _commit_waiters(self) -> None:
        while self._waiters.pending:
            # Everything queued until now rides on this one flush.
            flushed = await trio.to_thread.run_sync(self.store.flush_commit_log)
            self.group_commits += 1
            self._waiters.release(flushed)
            if self._waiters.pending:
                await trio.sleep(0.001)

    async def _periodic_commit_log_loop(self) -> None:
        cfg = self.config
        await self._periodic_flush("commit log flush", self.store.flush_commit_log, cfg.flush_interval_commit_log,
                                   cfg.flush_commit_log_least_pages, cfg.flush_commit_log_thorough_interval)

    async def _consume_queue_loop(self) -> None:
        cfg = self.config
        await self._periodic_flush("consume queue flush", self.store.flush_consume_queues,
                                   cfg.flush_interval_consume_queue, cfg.flush_consume_queue_least_pages,
                                   cfg.flush_consume_queue_thorough_interval)

    @staticmethod
    async def _periodic_flush(name: str, flush: Callable[[int], object], interval_ms: int, least_pages: int,
                              thorough_interval_ms: int) -> None:
        pages = _LeastPages(least_pages, thorough_interval_ms)
        guard = ServiceGuard(name, log)
        while True:
            await trio.sleep(interval_ms / 1000)
            with guard.round():
                await trio.to_thread.run_sync(flush, pages.now())

    def fail_waiters(self) -> None:
        """Forget every waiter (shutdown; may run in a worker thread, so no event is set here):
        a send still waiting is answered FLUSH_DISK_TIMEOUT at its own deadline."""
        self._waiters.forget_all()

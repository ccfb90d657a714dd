"""Flushing the store to disk from worker threads.

SYNC_FLUSH: senders wait for the group commit that covers their record -- one msync for every
send that arrived meanwhile -- and are answered FLUSH_DISK_TIMEOUT after ``syncFlushTimeout``.
ASYNC_FLUSH: the commit log is flushed every ``flushIntervalCommitLog`` ms.  Either way the
consume queues are flushed every ``flushIntervalConsumeQueue`` ms.  fsync never runs on the
event loop.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Callable

import trio

from pyrmq.store.message_store import DefaultMessageStore, FlushDiskType, MessageStoreConfig

log = logging.getLogger(__name__)


class FlushService:
    def __init__(self, store: DefaultMessageStore, config: MessageStoreConfig) -> None:
        self.store = store
        self.config = config
        self._waiters: deque[tuple[int, float, Callable[[bool], None]]] = deque()
        self._wake = trio.Event()
        self.group_commits = 0

    def wait_for_flush(self, next_offset: int, callback: Callable[[bool], None]) -> None:
        """Call ``callback(True)`` once the commit log is flushed past ``next_offset``."""
        deadline = time.monotonic() + self.config.sync_flush_timeout / 1000
        self._waiters.append((next_offset, deadline, callback))
        self._wake.set()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
                nursery.start_soon(self._group_commit_loop)
            else:
                nursery.start_soon(self._periodic_commit_log_loop)
            nursery.start_soon(self._consume_queue_loop)

    async def _group_commit_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while self._waiters:
                # Everything queued until now rides on this one flush.
                flushed = await trio.to_thread.run_sync(self.store.flush_commit_log)
                self.group_commits += 1
                now = time.monotonic()
                pending = deque()
                while self._waiters:
                    next_offset, deadline, callback = self._waiters.popleft()
                    if flushed >= next_offset:
                        callback(True)
                    elif now >= deadline:
                        log.warning("sync flush timed out at offset %d (flushed %d)", next_offset, flushed)
                        callback(False)
                    else:
                        pending.append((next_offset, deadline, callback))
                self._waiters = pending
                if pending:
                    await trio.sleep(0.001)

    async def _periodic_commit_log_loop(self) -> None:
        interval = self.config.flush_interval_commit_log / 1000
        while True:
            await trio.sleep(interval)
            await trio.to_thread.run_sync(self.store.flush_commit_log)

    async def _consume_queue_loop(self) -> None:
        interval = self.config.flush_interval_consume_queue / 1000
        while True:
            await trio.sleep(interval)
            await trio.to_thread.run_sync(self.store.flush_consume_queues)

    def fail_waiters(self) -> None:
        while self._waiters:
            _, _, callback = self._waiters.popleft()
            callback(False)

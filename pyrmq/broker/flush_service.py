"""Flushing the store to disk from worker threads.

SYNC_FLUSH: a send waits for the group commit that covers its record -- one fdatasync for every
send that arrived meanwhile, run by a syncer's thread (``pyrmq.store.file_syncer``: in C, it never
waits for the GIL the busy loop holds) while the loop appends the next sends -- and is answered
FLUSH_DISK_TIMEOUT after ``syncFlushTimeout`` (a deadline on trio's clock).  A plain send leaves
a ticket (``answer_when_flushed``): no task, no cancel scope, no event of its own; the group
commit answers the tickets it covers together, and as records are appended in order, tickets are
in order of offset and of deadline both, so releasing and expiring them only looks at the head
of one deque.  A send that also waits for something else (a slave, a topic being written) awaits
``wait_flushed`` in a task of its own.
The loop sees a finished sync only when it next polls, after the burst of requests it is
handling; meanwhile each SYNC send asks the syncer (one lock-free look) whether the sync of the
plan's last file has ended, and the first send that finds it so records the plan and answers the
sends it covered, written at once (not after the burst), without waiting for the group commit's
task, which still starts the next sync.
As Apache's GroupCommitService, a flush also runs every ``GROUP_COMMIT_IDLE_S`` while records
are unflushed and nobody waits (sends that did not ask to wait).
ASYNC_FLUSH: the commit log is flushed every ``flushIntervalCommitLog`` ms once
``flushCommitLogLeastPages`` pages are dirty, everything at least every
``flushCommitLogThoroughInterval`` ms.  Either way the consume queues are flushed every
``flushIntervalConsumeQueue`` ms (``flushConsumeQueueLeastPages`` /
``flushConsumeQueueThoroughInterval`` alike), with the full index files; the index file being
written is synced at a clean stop, as in Apache.  fsync never runs on the event loop.
"""

from __future__ import annotations

import functools
import logging
from collections import deque
from dataclasses import dataclass
from typing import Callable
import trio

from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.common.guard import ServiceGuard
from pyrmq.common.offset_waiters import OffsetWaiters
from pyrmq.remoting.channel import Channel
from pyrmq.store.file_syncer import FileSyncer, new_syncer
from pyrmq.store.mapped_file_queue import FlushPlan
from pyrmq.store.message_store import DefaultMessageStore, FlushDiskType, MessageStoreConfig

log = logging.getLogger(__name__)

# After a failed group commit (EIO, ENOSPC on a file system that allocates at writeback), the
# waiting sends are flushed again this often until their syncFlushTimeout.
FLUSH_RETRY_S = 0.05
# A flush at least this often while records are unflushed (Apache's GroupCommitService waits 10 ms).
GROUP_COMMIT_IDLE_S = 0.01


@dataclass(slots=True)
class _Ticket:
    """A send answered once the commit log is flushed past ``next_offset``."""

    next_offset: int
    deadline: float            # trio clock
    channel: Channel
    request: RemotingCommand
    ext: dict[str, str]


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
        self._tickets: deque[_Ticket] = deque()
        self._ticket_added = trio.Event()   # the expiry task sleeps on it while there is none
        self._wake = trio.Event()
        self.group_commits = 0
        self._syncer: FileSyncer | None = None   # the group commit's, while its loop runs
        # The plan whose last file the syncer is syncing: a send may record it once synced.
        self._syncing: FlushPlan | None = None
        self.recorded_by_sends = 0

    @property
    def pending_waiters(self) -> int:
        """Sends still waiting for their group commit (a graceful stop waits for none)."""
        return self._waiters.pending + len(self._tickets)

    def answer_when_flushed(self, channel: Channel, request: RemotingCommand, ext: dict[str, str],
                            next_offset: int) -> RemotingCommand | None:
        """SEND_OK for ``request`` once the commit log is flushed past ``next_offset``: now when it
        is, else None and the group commit answers on ``channel`` (FLUSH_DISK_TIMEOUT after
        syncFlushTimeout). Called on the loop right after the append, so offsets only grow."""
        plan, syncer = self._syncing, self._syncer
        if plan is not None and syncer is not None and syncer.synced():
            self._syncing = None
            self.recorded_by_sends += 1
            self._record(plan, now=True)
        if self._waiters.reached >= next_offset:
            return request.response(ResponseCode.SUCCESS, ext_fields=ext)
        if not self._tickets:
            self._ticket_added.set()
        self._tickets.append(_Ticket(next_offset, trio.current_time() + self.config.sync_flush_timeout / 1000,
                                     channel, request, ext))
        self._wake.set()
        return None

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
                nursery.start_soon(self._ticket_expiry_loop)
            else:
                nursery.start_soon(self._periodic_commit_log_loop)
            nursery.start_soon(self._consume_queue_loop)

    async def _group_commit_loop(self) -> None:
        guard = ServiceGuard("group commit (SYNC_FLUSH)", log)
        store = self.store
        syncer = self._syncer = new_syncer()
        try:
            while True:
                with trio.move_on_after(GROUP_COMMIT_IDLE_S):
                    await self._wake.wait()
                self._wake = trio.Event()
                if not self.pending_waiters and not store.unflushed_bytes():
                    continue   # idle: one comparison every GROUP_COMMIT_IDLE_S
                with guard.round():
                    await self._commit_waiters(syncer)
                # Waiters left means the flush failed: retried until each one's own deadline
                # passes (then it is answered FLUSH_DISK_TIMEOUT and gives up its place).
                if self.pending_waiters:
                    await trio.sleep(FLUSH_RETRY_S)
                    self._wake.set()
        finally:
            self._syncer = None
            syncer.close()   # no sync under way: each is awaited to its end, shielded

    async def _commit_waiters(self, syncer: FileSyncer) -> None:
        while True:
            # Everything appended until now rides on this one flush; what is appended while it
            # runs, on the next one, started at once (as Apache's GroupCommitService).
            before = self.store.flushed_offset
            flushed = await self._sync_commit_log(syncer)
            self.group_commits += 1
            if not self.pending_waiters or flushed <= before:
                return   # all answered, or the flush covered none of them: retried after a pause

    async def _sync_commit_log(self, syncer: FileSyncer) -> int:
        """Sync the commit log's files holding unflushed records, each by ``syncer``'s thread
        while the loop goes on, and answer the sends they cover; returns the flushed offset."""
        store = self.store
        plan = store.commit_log_flush_plan()
        if plan is None:
            return self._answer(store.flushed_offset)
        last = plan.files[-1] if plan.files else None
        for mf in plan.each_file():
            syncer.start(mf.fd)
            if mf is last:
                self._syncing = plan
            try:
                # The thread syncs a duplicate of the file's descriptor: even a cancelled group
                # commit (a stop) waits for that to end, as a worker thread's call would be waited for.
                with trio.CancelScope(shield=True):
                    await trio.lowlevel.wait_readable(syncer.fileno())
            finally:
                self._syncing = None
            syncer.finish()
        # Again when a send recorded it already: recording a plan twice changes nothing.
        return self._record(plan)

    def _record(self, plan: FlushPlan, now: bool = False) -> int:
        """Record ``plan`` as synced and answer the sends it covers (``now``: even on a channel
        whose reader is mid-batch); returns the flushed offset."""
        return self._answer(self.store.commit_log_flushed_by(plan), now)

    def _answer(self, flushed: int, now: bool = False) -> int:
        """Answer the sends the commit log flushed to ``flushed`` covers; returns ``flushed``."""
        self._waiters.release(flushed)
        self._release_tickets(flushed, now)
        return flushed

    def _release_tickets(self, flushed: int, now: bool = False) -> None:
        tickets = self._tickets
        answers = []
        while tickets and tickets[0].next_offset <= flushed:
            t = tickets.popleft()
            answers.append((t.channel, t.request.response(ResponseCode.SUCCESS, ext_fields=t.ext)))
        if answers:
            Channel.send_responses(answers, now=now)

    async def _ticket_expiry_loop(self) -> None:
        """Answer FLUSH_DISK_TIMEOUT to the tickets whose deadline passed (the oldest first)."""
        while True:
            tickets = self._tickets
            if not tickets:
                self._ticket_added = trio.Event()
                await self._ticket_added.wait()
                continue
            await trio.sleep_until(tickets[0].deadline)
            tickets = self._tickets
            now = trio.current_time()
            answers = []
            while tickets and tickets[0].deadline <= now:
                t = tickets.popleft()
                log.warning("sync flush timed out at offset %d", t.next_offset)
                answers.append((t.channel, t.request.response(ResponseCode.FLUSH_DISK_TIMEOUT, ext_fields=t.ext)))
            if answers:
                Channel.send_responses(answers)

    async def _periodic_commit_log_loop(self) -> None:
        cfg = self.config
        await self._periodic_flush("commit log flush", self.store.flush_commit_log, cfg.flush_interval_commit_log,
                                   cfg.flush_commit_log_least_pages, cfg.flush_commit_log_thorough_interval)

    async def _consume_queue_loop(self) -> None:
        cfg = self.config
        await self._periodic_flush("consume queue flush",
                                   functools.partial(self.store.flush_consume_queues, whole_index=False),
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
        a send still waiting is answered FLUSH_DISK_TIMEOUT at its own deadline, a ticket not at all
        (its connection closes with the broker)."""
        self._waiters.forget_all()
        self._tickets = deque()

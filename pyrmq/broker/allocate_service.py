"""Store files created ahead of need, in a worker thread (Apache's AllocateMappedFileService).

Creating and mapping the next commit log file (up to 1 GiB, sparse) or consume queue file is a
blocking call that would otherwise run inside an append on the event loop.  This task asks each
MappedFileQueue to ``prepare_next_file`` from a worker thread:

- the commit log as soon as a new file becomes current (the store calls ``on_new_file``) and at
  every scan, so the next file is ready long before the current one fills;
- a consume queue (and its ConsumeQueueExt) once its last file is more than half full: there are many queues and most
  never need a second file, so preparing one for each would double their open files for nothing.

The scan runs every ``SCAN_INTERVAL_S`` on the loop with O(1) work per queue; file creation never
runs there -- except the retry of a dispatch stalled because a file could not be created
(dispatch.py): dispatch belongs to the loop, so the retry runs there, once a scan, and is an O(1)
check while nothing is stalled.
"""

from __future__ import annotations

import logging

import trio

from pyrmq.common.guard import ServiceGuard
from pyrmq.store.mapped_file_queue import MappedFileQueue
from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

# A consume queue file of the default 300,000 units takes minutes to fill at high rates; one
# look a second is far ahead of need.
SCAN_INTERVAL_S = 1.0
# Prepare a consume queue's next file once its last file is filled past this fraction.
CONSUME_QUEUE_PREPARE_RATIO = 0.5


class AllocateService:
    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store
        self._wake = trio.Event()
        self.prepared_files = 0
        self.failures = 0
        self._failing: set[str] = set()   # queues whose last attempt failed: logged once, not every scan

    def request_scan(self) -> None:
        """Look for files to prepare now (the store calls this when a new file became current)."""
        self._wake.set()

    def queues_to_prepare(self) -> list[MappedFileQueue]:
        """The queues whose next file should be created now (cheap checks, on the loop)."""
        todo = []
        commit_log_queue = self.store.commit_log.mapped_file_queue
        if not commit_log_queue.next_file_prepared():
            todo.append(commit_log_queue)
        for cq in self.store.consume_queues:
            queues = (cq.mapped_file_queue,) if cq.ext is None else (cq.mapped_file_queue, cq.ext.mapped_file_queue)
            for queue in queues:
                last = queue.last_mapped_file()
                if (last is not None and last.wrote_position > last.file_size * CONSUME_QUEUE_PREPARE_RATIO
                        and not queue.next_file_prepared()):
                    todo.append(queue)
        return todo

    def prepare(self, queues: list[MappedFileQueue]) -> int:
        """Create the next file of each queue (blocking: a worker thread); returns how many."""
        created = 0
        for queue in queues:
            try:
                created += queue.prepare_next_file()
            except OSError as exc:   # the append will try again inline and report the error
                self.failures += 1
                if queue.store_path not in self._failing:
                    self._failing.add(queue.store_path)
                    log.warning("preparing the next file of %s failed: %s", queue.store_path, exc)
            else:
                self._failing.discard(queue.store_path)
        return created

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.store.commit_log.mapped_file_queue.on_new_file = self.request_scan
        task_status.started()
        guard = ServiceGuard("mapped file preallocation", log)
        try:
            while True:
                with guard.round():
                    self.store.retry_dispatch()
                    queues = self.queues_to_prepare()
                    if queues:
                        self.prepared_files += await trio.to_thread.run_sync(self.prepare, queues)
                with trio.move_on_after(SCAN_INTERVAL_S):
                    await self._wake.wait()
                self._wake = trio.Event()
        finally:
            self.store.commit_log.mapped_file_queue.on_new_file = None

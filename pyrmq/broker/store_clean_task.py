"""The broker's periodic store clean-up: runs the store's CleanService (file expiry, disk guard)
from a worker thread, and tells it, for deleteOnlyConsumed, which commit-log offset consumer
groups still need.

Timing follows Apache: the disk check first runs 1 s after start, the file deletion a minute
after start (``cleanFilesFirstDelayMs``, pyrmq's own key: Apache's minute is fixed); both then
every ``cleanResourceInterval`` ms.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

import trio

from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager
from pyrmq.codec.system_topics import SCHEDULE_TOPIC, TOPIC_GROUP_SEPARATOR
from pyrmq.store.clean_service import ConsumedBoundary
from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

# Apache's DefaultMessageStore schedules isSpaceFull after 1 s (cleanFilesPeriodically after 60 s:
# MessageStoreConfig.clean_files_first_delay_ms).
DISK_CHECK_FIRST_DELAY_S = 1.0


# how the scheduler's progress is named in the log line
SCHEDULE_READER = "(delayed delivery)"


def _readers(store: DefaultMessageStore, offsets: ConsumerOffsetManager,
             schedule_offsets: dict[int, int]) -> Iterator[tuple[str, str, int, int]]:
    """(group, topic, queue id, next offset) of every committed consumer offset, and of the
    scheduler, whose not yet delivered delayed messages are consumed by nobody else."""
    for key, queues in offsets.offset_table.items():
        topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
        for queue_id, offset in queues.items():
            yield group, topic, queue_id, offset
    for cq in store.consume_queues:
        if cq.topic == SCHEDULE_TOPIC:   # queue id = delay level - 1
            yield SCHEDULE_READER, SCHEDULE_TOPIC, cq.queue_id, schedule_offsets.get(cq.queue_id + 1, 0)


def consumed_boundary(store: DefaultMessageStore, offsets: ConsumerOffsetManager,
                      schedule_offsets: dict[int, int] | None = None) -> ConsumedBoundary | None:
    """The lowest commit-log offset of a message some group (consumerOffset.json) or the delay
    scheduler (delayOffset.json) has not consumed yet, and whose it is; None when all are at the
    end of their queues.

    Runs on the event loop: it reads the offset tables and the consume queues dispatch writes.
    """
    best: ConsumedBoundary | None = None
    for group, topic, queue_id, offset in _readers(store, offsets, schedule_offsets or {}):
        cq = store.find_consume_queue(topic, queue_id)
        if cq is None or offset >= cq.get_max_offset_in_queue():
            continue
        queue_offset = max(offset, cq.get_min_offset_in_queue())
        unit = cq.get_unit(queue_offset)
        if unit is not None and (best is None or unit[0] < best.phy_offset):
            best = ConsumedBoundary(unit[0], group, topic, queue_id, queue_offset)
    return best


class StoreCleanTask:
    def __init__(self, store: DefaultMessageStore, offsets: ConsumerOffsetManager,
                 schedule_offsets: Callable[[], dict[int, int]] = dict) -> None:
        self.store = store
        self.offsets = offsets
        self.schedule_offsets = schedule_offsets   # delay level -> next offset (delayOffset.json)
        self.clean = store.clean_service
        if store.config.delete_only_consumed:
            self.clean.consumed_boundary = self._boundary_from_worker_thread

    def _boundary_from_worker_thread(self) -> ConsumedBoundary | None:
        # the clean round runs in a worker thread; the tables belong to the event loop
        return trio.from_thread.run_sync(self.consumed_boundary)

    def consumed_boundary(self) -> ConsumedBoundary | None:
        return consumed_boundary(self.store, self.offsets, self.schedule_offsets())

    async def run(self) -> None:
        interval_s = self.store.config.clean_resource_interval / 1000
        first_clean_s = self.store.config.clean_files_first_delay_ms / 1000
        started = trio.current_time()
        await trio.sleep(DISK_CHECK_FIRST_DELAY_S)
        while True:
            try:
                await trio.to_thread.run_sync(self.clean.check_disk_space)
            except Exception:   # a failed reading must not take the broker down; next round retries
                log.exception("disk space check failed")
            if trio.current_time() - started >= first_clean_s:
                await trio.to_thread.run_sync(self.clean.run)   # catches and logs its own failures
            await trio.sleep(interval_s)

"""Every ConsumeQueue of the store, keyed by (topic, queueId), with the operations recovery and
clean-up apply to all of them at once."""

from __future__ import annotations

import logging
import os
import re
from typing import Collection, Iterator

from pyrmq.codec.store_formats import CQ_STORE_UNIT_SIZE
from pyrmq.store.consume_queue import ConsumeQueue
from pyrmq.store.consume_queue_ext import ConsumeQueueExt
from pyrmq.store.mapped_file import sync_file_system
from pyrmq.store.model import MessageStoreConfig, StoreError

log = logging.getLogger(__name__)

# Topic names become directory names: nothing outside RocketMQ's charset ever reaches a path.
VALID_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")
# From this many consume queue files due in one flush round, one syncfs replaces their fdatasyncs.
SYNCFS_MIN_FILES = 64


class ConsumeQueueTable:
    def __init__(self, config: MessageStoreConfig) -> None:
        self.config = config
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self.queues.values()))

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        if not VALID_TOPIC.fullmatch(topic) or queue_id < 0:
            raise StoreError(f"refusing a consume queue for topic {topic[:64]!r} queue {queue_id}")
        cfg = self.config
        # as Apache: ext files are opened (and written) only while enableConsumeQueueExt is on
        ext = (ConsumeQueueExt(topic, queue_id, cfg.consume_queue_ext_dir(), cfg.mapped_file_size_consume_queue_ext)
               if cfg.enable_consume_queue_ext else None)
        return ConsumeQueue(topic, queue_id, cfg.consume_queue_dir(), cfg.mapped_file_size_consume_queue, ext)

    def can_take_unit(self, topic: str, queue_id: int) -> bool:
        """True when the queue exists and its next unit fits in reserved space of its last file
        (the put path's O(1) check, inlined: once per message; otherwise the store prepares the
        file before the record is appended)."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return False
        files = cq.mapped_file_queue.mapped_files
        if not files:
            return False
        last = files[-1]
        return last.wrote_position + CQ_STORE_UNIT_SIZE <= last.reserved

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = self.queues[(topic, queue_id)] = self._new(topic, queue_id)
        return cq

    def load(self) -> None:
        """Map the files of every queue directory under ``consumequeue/``."""
        root = self.config.consume_queue_dir()
        if not os.path.isdir(root):
            return
        for topic in sorted(os.listdir(root)):
            topic_dir = os.path.join(root, topic)
            if not os.path.isdir(topic_dir):
                continue
            for qid in sorted(os.listdir(topic_dir)):
                try:
                    queue_id = int(qid)
                except ValueError:
                    continue
                cq = self._new(topic, queue_id)
                cq.load()
                self.queues[(topic, queue_id)] = cq

    def recover(self, careful: Collection[tuple[str, int]] | None = None) -> int:
        """Recover every queue; returns the max (offset + size) over their last units, or -1.

        ``careful``: the (topic, queueId) keys whose tails may be torn (a crash: the queues the
        commit log wrote to after the checkpoint) -- None for all; the others are trusted to be
        valid units then zeros (ConsumeQueue's docstring).
        """
        max_phy = -1
        for key, cq in self.queues.items():
            cq.recover(careful=careful is None or key in careful)
            max_phy = max(max_phy, cq.max_physic_offset)
        return max_phy

    def min_end(self, keys: Collection[tuple[str, int]], default: int) -> int:
        """The least end (offset + size of the last unit) over the queues of ``keys``; a queue
        that does not exist or has no unit counts as ``default``."""
        queues = self.queues
        end = None
        for key in keys:
            cq = queues.get(key)
            q_end = default if cq is None or cq.max_physic_offset < 0 else cq.max_physic_offset
            end = q_end if end is None else min(end, q_end)
        return default if end is None else end

    def estimate_max_physic_offset(self) -> int:
        """The max (offset + size) over the queues' last units, found by binary search without
        changing anything; -1 without units."""
        return max((cq.estimate_max_physic_offset() for cq in self.queues.values()), default=-1)

    def units_read_at_recovery(self) -> int:
        """Consume queue units start-up read, over all queues (statistics)."""
        return sum(cq.units_read_at_recovery for cq in self.queues.values())

    def max_physic_offset(self) -> int:
        return max((cq.max_physic_offset for cq in self.queues.values()), default=-1)

    def truncate_dirty(self, phy_offset: int) -> None:
        for cq in self.queues.values():
            cq.truncate_dirty_logic_files(phy_offset)

    def destroy_all(self) -> None:
        for cq in self.queues.values():
            cq.destroy()
        self.queues.clear()

    def queue_offset_table(self, min_phy_offset: int) -> dict[tuple[str, int], int]:
        """Next queue offset per (topic, queueId) (the commit log's table), after moving each
        queue's min offset to its first record still in the commit log."""
        table: dict[tuple[str, int], int] = {}
        for key, cq in self.queues.items():
            table[key] = cq.get_max_offset_in_queue()
            cq.correct_min_offset(min_phy_offset)
        return table

    def delete_topics(self, topics: set[str]) -> list[tuple[str, int]]:
        """Drop the queues of ``topics``; returns the keys dropped."""
        return self.delete_queues([k for k in self.queues if k[0] in topics])

    def delete_queues(self, keys: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Drop these queues and their files, and a topic directory left empty; the keys dropped."""
        dropped = [k for k in keys if k in self.queues]
        for key in dropped:
            self.queues.pop(key).destroy()
        for topic in {topic for topic, _ in dropped}:
            for root in (self.config.consume_queue_dir(), self.config.consume_queue_ext_dir()):
                try:
                    os.rmdir(os.path.join(root, topic))
                except OSError:
                    pass  # not empty or already gone: nothing of ours left to remove
        return dropped

    def flush(self, least_pages: int = 0) -> None:
        """Sync the queues with ``least_pages`` dirty pages (all with something unsynced for 0).

        Each queue file is synced alone while few are due. A thorough round on a broker with
        thousands of queues would commit the file system's journal once per file, 8,000 times
        for 1,000 topics of 8 queues, stalling the writers that fault pages in meanwhile: from
        ``SYNCFS_MIN_FILES`` files on, one ``syncfs`` of the store's file system syncs them all
        (files on another file system, a mount under the store, are still synced alone).
        """
        queues = [mfq for cq in list(self.queues.values()) for mfq in cq.file_queues()
                  if mfq.may_need_flush(least_pages)]
        plans = [plan for mfq in queues if (plan := mfq.flush_plan(least_pages)) is not None]
        if sum(len(plan.files) for plan in plans) >= SYNCFS_MIN_FILES:
            synced_dev = sync_file_system(self.config.consume_queue_dir())
            if synced_dev is not None:
                for plan in plans:
                    if all(mf.st_dev == synced_dev for mf in plan.files):
                        plan.queue.flushed_by(plan)
                    else:
                        plan.queue.flush(least_pages)
                return
        for plan in plans:   # in file_queues' order: an ext before its queue
            plan.queue.flush(least_pages)

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()

"""Queue locks for orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ): a client owns a queue of
its group until it unlocks or stops renewing for ``rocketmq.broker.rebalance.lockMaxLiveTime``
(60 s; Java clients renew every 20 s)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

LOCK_MAX_LIVE_MS = 60_000

MessageQueueKey = tuple[str, str, int]   # (topic, brokerName, queueId)


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    def __init__(self, lock_max_live_ms: int = LOCK_MAX_LIVE_MS) -> None:
        self.lock_max_live_ms = lock_max_live_ms
        self._table: dict[str, dict[MessageQueueKey, LockEntry]] = {}

    def _expired(self, entry: LockEntry, now_ms: int) -> bool:
        return now_ms - entry.last_update_ms > self.lock_max_live_ms

    def try_lock_batch(self, group: str, mqs: list[MessageQueueKey], client_id: str,
                       now_ms: int | None = None) -> list[MessageQueueKey]:
        """The queues now locked by ``client_id`` (newly or already)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        locks = self._table.setdefault(group, {})
        locked = []
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None or entry.client_id == client_id or self._expired(entry, now_ms):
                if entry is not None and entry.client_id != client_id:
                    log.warning("queue %s of group %s: lock of %s expired, now %s", mq, group,
                                entry.client_id, client_id)
                locks[mq] = LockEntry(client_id, now_ms)
                locked.append(mq)
        return locked

    def unlock_batch(self, group: str, mqs: list[MessageQueueKey], client_id: str) -> None:
        locks = self._table.get(group)
        if not locks:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
        if not locks:
            del self._table[group]

    def lock_owner(self, group: str, mq: MessageQueueKey, now_ms: int | None = None) -> str | None:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        entry = self._table.get(group, {}).get(mq)
        return None if entry is None or self._expired(entry, now_ms) else entry.client_id

"""Tasks waiting for a growing offset to pass theirs: the SYNC_FLUSH group commit waits for the
flushed commit-log offset, a SYNC_MASTER send for the offset a slave acknowledged.

Waiters sit in a heap by offset, so a release wakes exactly those it covers, in O(log n) each.
A waiter that timed out or was cancelled stays in the heap, marked gone, until a release pops it
or until gone ones are half the heap and are pruned: memory stays bounded by the waits of one
timeout even when nothing is released any more (a slave that stopped acknowledging).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import trio


@dataclass(order=True)
class _Waiter:
    next_offset: int
    event: trio.Event = field(compare=False, default_factory=trio.Event)
    generation: int = field(compare=False, default=0)   # which heap it was pushed to (forget_all starts a new one)
    gone: bool = field(compare=False, default=False)


class OffsetWaiters:
    def __init__(self) -> None:
        self._heap: list[_Waiter] = []
        self._gone = 0
        self._generation = 0
        self.reached = 0     # the highest offset released so far

    @property
    def pending(self) -> int:
        """How many waiters are still waiting."""
        return len(self._heap) - self._gone

    async def wait(self, next_offset: int, timeout_s: float) -> bool:
        """True once ``release`` reached ``next_offset``; False after ``timeout_s`` (or when
        ``forget_all`` dropped the waiter first)."""
        if self.reached >= next_offset:
            return True
        waiter = _Waiter(next_offset, generation=self._generation)
        heapq.heappush(self._heap, waiter)
        try:
            with trio.move_on_after(timeout_s):
                await waiter.event.wait()
        finally:
            if not waiter.event.is_set():
                self._abandon(waiter)
        return waiter.event.is_set()

    def release(self, offset: int) -> None:
        """Wake every waiter whose offset is at most ``offset``."""
        self.reached = max(self.reached, offset)
        heap = self._heap
        while heap and heap[0].next_offset <= offset:
            waiter = heapq.heappop(heap)
            if waiter.gone:
                self._gone -= 1
            else:
                waiter.event.set()

    def forget_all(self) -> None:
        """Drop every waiter without waking it (shutdown; safe from a worker thread, as it only
        rebinds): each is answered at its own timeout."""
        self._heap = []
        self._gone = 0
        self._generation += 1

    def _abandon(self, waiter: _Waiter) -> None:
        # not woken, so no release popped it; forget_all may have dropped its heap
        waiter.gone = True
        if waiter.generation != self._generation:
            return
        self._gone += 1
        if self._gone > len(self._heap) // 2:
            self._heap = [w for w in self._heap if not w.gone]
            heapq.heapify(self._heap)
            self._gone = 0

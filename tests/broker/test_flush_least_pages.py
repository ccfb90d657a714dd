"""The periodic flushes honour flush*LeastPages and their thorough intervals (Apache's
FlushRealTimeService / FlushConsumeQueueService), on trio's autojump clock."""

from __future__ import annotations

import trio

from pyrmq.broker.flush_service import FlushService
from pyrmq.store.message_store import MessageStoreConfig


class RecordingStore:
    def __init__(self) -> None:
        self.commit_log: list[tuple[float, int]] = []
        self.consume_queues: list[tuple[float, int]] = []

    def flush_commit_log(self, least_pages: int = 0) -> int:
        self.commit_log.append((trio.current_time(), least_pages))
        return 0

    def flush_consume_queues(self, least_pages: int = 0, *, whole_index: bool = True) -> None:
        # the periodic rounds leave the index file being written to a clean stop
        assert not whole_index
        self.consume_queues.append((trio.current_time(), least_pages))


async def _inline(fn, *args):
    # on the loop instead of a worker thread, so the virtual clock reads exactly
    await trio.lowlevel.checkpoint()
    return fn(*args)


async def test_least_pages_with_a_thorough_round_per_interval(tmp_path, autojump_clock, monkeypatch):
    monkeypatch.setattr(trio.to_thread, "run_sync", _inline)
    config = MessageStoreConfig(str(tmp_path), flush_interval_commit_log=500, flush_commit_log_least_pages=4,
                                flush_commit_log_thorough_interval=10_000, flush_interval_consume_queue=1000,
                                flush_consume_queue_least_pages=2, flush_consume_queue_thorough_interval=60_000)
    store = RecordingStore()
    service = FlushService(store, config)
    with trio.move_on_after(125.2):
        await service.run()
    commit_log_thorough = [round(t - 0.5, 3) for t, pages in store.commit_log if pages == 0]
    assert commit_log_thorough == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120]
    assert {pages for _, pages in store.commit_log} == {0, 4} and len(store.commit_log) == 250
    cq_thorough = [round(t - 1, 3) for t, pages in store.consume_queues if pages == 0]
    assert cq_thorough == [0, 60, 120]
    assert {pages for _, pages in store.consume_queues} == {0, 2}

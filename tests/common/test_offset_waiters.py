"""OffsetWaiters: the waits of SYNC_FLUSH sends (flushed offset) and SYNC_MASTER sends (slave offset)."""

from __future__ import annotations

import trio
import trio.testing

from pyrmq.common.offset_waiters import OffsetWaiters


async def test_a_release_wakes_exactly_the_waiters_it_covers(autojump_clock):
    waiters = OffsetWaiters()
    results: dict[int, bool] = {}

    async def wait(offset: int) -> None:
        results[offset] = await waiters.wait(offset, 10)

    async with trio.open_nursery() as nursery:
        for offset in (30, 10, 20):
            nursery.start_soon(wait, offset)
        await trio.testing.wait_all_tasks_blocked()
        waiters.release(20)
        await trio.testing.wait_all_tasks_blocked()
        assert results == {10: True, 20: True} and waiters.pending == 1
        waiters.release(15)   # going back changes nothing
        await trio.sleep(1)
        assert waiters.pending == 1 and waiters.reached == 20
    assert results == {10: True, 20: True, 30: False}   # timed out at 10 s
    assert trio.current_time() == 10
    assert await waiters.wait(20, 10)                     # already reached: at once


async def test_timed_out_waiters_are_pruned_when_nothing_is_released(autojump_clock):
    waiters = OffsetWaiters()
    async with trio.open_nursery() as nursery:
        for offset in range(1, 1001):
            nursery.start_soon(waiters.wait, offset, 1.0)
    assert waiters.pending == 0
    assert len(waiters._heap) <= 1   # memory bounded: not 1000 dead entries


async def test_cancelled_waiter_gives_up_its_place(autojump_clock):
    waiters = OffsetWaiters()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiters.wait, 5, 100)
        await trio.testing.wait_all_tasks_blocked()
        assert waiters.pending == 1
        nursery.cancel_scope.cancel()
    assert waiters.pending == 0


async def test_forget_all_leaves_the_answer_to_the_timeout(autojump_clock):
    waiters = OffsetWaiters()
    results: list[bool] = []

    async def wait() -> None:
        results.append(await waiters.wait(5, 2))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        await trio.to_thread.run_sync(waiters.forget_all)   # shutdown calls it from a thread
        waiters.release(10)                                 # too late: it was dropped
    assert results == [False] and waiters.pending == 0

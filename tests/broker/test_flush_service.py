"""FlushService.wait_flushed: one group commit for every waiting send, and syncFlushTimeout as a
deadline on trio's clock (the autojump clock runs it instantly); a finished sync recorded by the
next send, before the loop polls."""

from __future__ import annotations

import os
import tempfile
from types import SimpleNamespace

import trio

from pyrmq.broker import flush_service
from pyrmq.broker.flush_service import FlushService
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.store.message_store import FlushDiskType, MessageStoreConfig


class _Plan:
    """A flush plan of one real file (the syncer's thread really syncs it)."""

    def __init__(self, fd: int) -> None:
        self.file = SimpleNamespace(fd=fd, closed=False)
        self.files = [self.file]

    def each_file(self):
        yield self.file


class _Store:
    """A commit log whose flushes report ``flushed`` (what reached the disk), counted."""

    def __init__(self, flushed: int) -> None:
        self.flushed = flushed
        self.calls = 0
        self._file = tempfile.TemporaryFile()

    def commit_log_flush_plan(self) -> _Plan:
        return _Plan(self._file.fileno())

    @property
    def flushed_offset(self) -> int:
        return self.flushed

    def commit_log_flushed_by(self, plan: _Plan) -> int:
        self.calls += 1
        return self.flushed

    def flush_consume_queues(self, least_pages: int = 0) -> None:
        pass

    def unflushed_bytes(self) -> int:
        return 0   # only the waiters ask for flushes here


def _service(store: _Store, timeout_ms: int = 5000) -> FlushService:
    config = MessageStoreConfig(store_path_root_dir="/nonexistent", flush_disk_type=FlushDiskType.SYNC_FLUSH,
                                sync_flush_timeout=timeout_ms)
    return FlushService(store, config)


async def test_waiters_queued_together_share_one_group_commit(nursery):
    store = _Store(flushed=1000)
    service = _service(store)
    results: list[bool] = []

    async def send(offset: int) -> None:
        results.append(await service.wait_flushed(offset))

    with trio.fail_after(5):
        async with trio.open_nursery() as senders:
            for offset in (100, 500, 1000):
                senders.start_soon(send, offset)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(service.run)
    assert results == [True, True, True]
    assert store.calls == 1


async def test_a_flush_that_never_covers_the_record_times_out(nursery, autojump_clock, caplog):
    store = _Store(flushed=10)
    service = _service(store, timeout_ms=3000)
    nursery.start_soon(service.run)
    start = trio.current_time()
    assert await service.wait_flushed(11) is False
    assert trio.current_time() - start == 3.0
    assert "sync flush timed out at offset 11" in caplog.text


async def test_timed_out_waiters_stop_the_group_commit_loop(nursery):
    store = _Store(flushed=10)
    service = _service(store, timeout_ms=50)
    nursery.start_soon(service.run)
    assert await service.wait_flushed(11) is False
    with trio.fail_after(5):
        while service.pending_waiters:     # what a graceful stop waits for
            await trio.sleep(0.01)


async def test_fail_waiters_leaves_the_answer_to_the_deadline(autojump_clock):
    service = _service(_Store(flushed=0), timeout_ms=2000)   # no group-commit loop running
    async with trio.open_nursery() as nursery:
        results: list[bool] = []

        async def send() -> None:
            results.append(await service.wait_flushed(5))

        nursery.start_soon(send)
        await trio.testing.wait_all_tasks_blocked()
        await trio.to_thread.run_sync(service.fail_waiters)   # shutdown calls it from a thread
    assert results == [False] and not service.pending_waiters


class _GatedSyncer:
    """A syncer whose sync ends when the test says so (``end``): its eventfd is written then."""

    def __init__(self) -> None:
        self._event_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.started = self.ended = False

    def start(self, fd: int) -> None:
        self.started, self.ended = True, False

    def end(self) -> None:
        self.ended = True
        os.eventfd_write(self._event_fd, 1)

    def synced(self) -> bool:
        return self.started and self.ended

    def finish(self) -> None:
        os.eventfd_read(self._event_fd)
        self.started = self.ended = False

    def fileno(self) -> int:
        return self._event_fd

    def close(self) -> None:
        os.close(self._event_fd)


class _Peer:
    """What Channel.send_responses uses of a channel: the answers, in order."""

    def __init__(self) -> None:
        self._reading_batch = False
        self.answers: list[RemotingCommand] = []
        self.written = 0   # answers handed to the socket

    def send_response(self, response: RemotingCommand) -> None:
        self.answers.append(response)

    def _write_now(self) -> None:
        self.written = len(self.answers)


async def test_the_next_send_answers_what_a_finished_sync_covers(nursery, monkeypatch):
    """The loop sees a sync's end when it next polls, after the requests it is handling: the send
    handled meanwhile records the plan and answers the sends it covered; the group commit's task
    then records it again (no change) and answers nobody twice."""
    syncer = _GatedSyncer()
    monkeypatch.setattr(flush_service, "new_syncer", lambda: syncer)
    store = _Store(flushed=1000)
    service = _service(store)
    peer = _Peer()
    nursery.start_soon(service.run)
    first = RemotingCommand(code=RequestCode.SEND_MESSAGE, opaque=1, ext_fields={})
    second = RemotingCommand(code=RequestCode.SEND_MESSAGE, opaque=2, ext_fields={})
    with trio.fail_after(5):
        assert service.answer_when_flushed(peer, first, {"msgId": "A"}, 500) is None
        await trio.testing.wait_all_tasks_blocked()
        assert syncer.started and not peer.answers   # the sync runs, its sends wait

        syncer.end()   # no checkpoint until the next send: the loop does not poll meanwhile
        peer._reading_batch = True   # the send is one of a burst its connection's reader handles
        assert service.answer_when_flushed(peer, second, {"msgId": "B"}, 1500) is None
        assert [(a.opaque, a.code, a.ext_fields) for a in peer.answers] == [(1, ResponseCode.SUCCESS, {"msgId": "A"})]
        assert peer.written == 1   # written at once, not after the reader's burst
        assert (service.recorded_by_sends, store.calls) == (1, 1)
        peer._reading_batch = False

        await trio.testing.wait_all_tasks_blocked()   # the task sees the end: finish, record again
        assert not syncer.started and store.calls >= 2
        assert [a.opaque for a in peer.answers] == [1]   # the second send's record is not flushed yet

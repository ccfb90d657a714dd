"""AllocateService: the broker prepares the next commit log file as soon as a file becomes current
and a consume queue's next file once its last one is half full, from a worker thread; appends
then create no file themselves."""

from __future__ import annotations

import threading

import trio

from pyrmq.broker.allocate_service import AllocateService
from tests.store.store_helpers import make_msg, open_store, small_config


async def wait_until(predicate) -> None:
    with trio.fail_after(10):
        while not predicate():
            await trio.sleep(0.01)


async def test_next_files_exist_before_the_append_that_needs_them(tmp_path, monkeypatch):
    store = open_store(small_config(tmp_path / "store"))   # 4 KiB commit log files, 10-unit CQ files
    try:
        async with trio.open_nursery() as nursery:
            await prepare_ahead(nursery, store, monkeypatch)
            nursery.cancel_scope.cancel()
    finally:
        store.shutdown()


async def prepare_ahead(nursery, store, monkeypatch) -> None:
    service = AllocateService(store)
    threads = []
    real_prepare = service.prepare
    monkeypatch.setattr(service, "prepare", lambda queues: threads.append(threading.get_ident())
                        or real_prepare(queues))
    await nursery.start(service.run)
    commit_log = store.commit_log.mapped_file_queue
    store.put_message(make_msg(body=b"first"))
    cq = store.find_consume_queue("TopicTest", 0).mapped_file_queue
    await wait_until(commit_log.next_file_prepared)     # a file became current: its next one
    assert not cq.next_file_prepared()                 # 1 of 10 units: not yet
    for _ in range(5):
        store.put_message(make_msg(body=b"x" * 100))
    service.request_scan()
    await wait_until(cq.next_file_prepared)            # 6 of 10 units
    created_inline = (commit_log.files_created_inline, cq.files_created_inline)
    first_file = commit_log.last_mapped_file()
    for _ in range(10):                                 # rolls both to their next file
        store.put_message(make_msg(body=b"x" * 300))
    assert commit_log.last_mapped_file() is not first_file
    assert len(cq.mapped_files) == 2
    assert (commit_log.files_created_inline, cq.files_created_inline) == created_inline
    assert threads and threading.get_ident() not in threads
    await wait_until(commit_log.next_file_prepared)     # and the one after is on its way
    assert service.prepared_files >= 3

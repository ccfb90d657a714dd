"""MappedFile / MappedFileQueue: naming, sizes, reads as memoryviews, thread-safe flush."""

from __future__ import annotations

import os
import threading

import pytest

from pyrmq.store.mapped_file import MappedFile, offset_to_file_name
from pyrmq.store.mapped_file_queue import MappedFileQueue
from pyrmq.store.model import StoreError


def test_file_names_are_20_digit_offsets():
    assert offset_to_file_name(0) == "00000000000000000000"
    assert offset_to_file_name(1073741824) == "00000000001073741824"


def test_create_select_and_reload(tmp_path):
    q = MappedFileQueue(str(tmp_path / "q"), 1024)
    mf = q.get_last_mapped_file(0)
    assert mf.file_name == "00000000000000000000" and os.path.getsize(mf.path) == 1024
    mf.mm[0:5] = b"hello"
    mf.wrote_position = 5
    view = mf.select(0, 5)
    assert isinstance(view, memoryview) and bytes(view) == b"hello"
    assert mf.select(0, 6) is None and mf.select(3) .tobytes() == b"lo"
    mf.wrote_position = 1024
    mf2 = q.get_last_mapped_file(0)
    assert mf2.file_from_offset == 1024 and mf2.file_name == "00000000000000001024"
    assert q.find_mapped_file_by_offset(1500) is mf2 and q.find_mapped_file_by_offset(2048) is None
    del view
    q.close()
    q2 = MappedFileQueue(str(tmp_path / "q"), 1024)
    q2.load()
    assert [m.file_from_offset for m in q2.mapped_files] == [0, 1024]
    assert bytes(q2.mapped_files[0].view[:5]) == b"hello"
    q2.close()


def test_length_not_matched_is_a_clear_error(tmp_path):
    d = tmp_path / "q"
    d.mkdir()
    # not zeros: a short file of zeros is what a crash while creating it leaves, and is dropped
    (d / offset_to_file_name(0)).write_bytes(b"\1" * 1000)
    q = MappedFileQueue(str(d), 1024)
    with pytest.raises(StoreError, match="length not matched"):
        q.load()


def test_close_with_live_reader_does_not_fail(tmp_path):
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), 4096, create=True)
    mf.wrote_position = 10
    view = mf.select(0, 10)
    mf.close()  # the mapping stays alive for the reader
    assert bytes(view) == bytes(10)


def test_flush_from_a_thread_while_appending(tmp_path):
    q = MappedFileQueue(str(tmp_path / "q"), 8192)
    stop = threading.Event()
    results = []

    def flusher():
        while not stop.is_set():
            results.append(q.flush(0))

    t = threading.Thread(target=flusher)
    t.start()
    try:
        where = 0
        for _ in range(2000):
            mf = q.get_last_mapped_file(where)
            n = min(100, mf.file_size - mf.wrote_position)
            mf.mm[mf.wrote_position:mf.wrote_position + n] = b"x" * n
            mf.wrote_position += n
            where += n
            q.commit(where, where)
    finally:
        stop.set()
        t.join()
    assert q.flush(0) == where == q.flushed_where
    assert results == sorted(results) and all(r <= where for r in results)
    assert q.flushed_store_timestamp == where
    q.close()


def test_flush_least_pages(tmp_path):
    q = MappedFileQueue(str(tmp_path / "q"), 64 * 1024)
    mf = q.get_last_mapped_file(0)
    mf.wrote_position = 4096 * 3
    q.commit(4096 * 3)
    assert q.flush(4) == 0
    q.commit(4096 * 4)
    assert q.flush(4) == 4096 * 4
    q.close()

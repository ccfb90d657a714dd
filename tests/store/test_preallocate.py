"""Next store files created ahead of need (MappedFileQueue.prepare_next_file): the writer takes
the prepared file instead of creating one, stale ones are dropped, a clean close deletes it, and
a store left with an empty prepared file (crash) recovers with every record."""

from __future__ import annotations

import os
import shutil

import pytest

from pyrmq.store.mapped_file_queue import MappedFileQueue
from store_helpers import make_msg, open_store, small_config
from test_recovery import all_messages, crash

FILE_SIZE = 4096


def names(path) -> list[str]:
    return sorted(os.listdir(path))


def fill(queue: MappedFileQueue, nbytes: int) -> None:
    """Write ``nbytes`` of 0x01 through get_last_mapped_file, as an appender does."""
    while nbytes:
        mf = queue.get_last_mapped_file(0)
        n = min(nbytes, mf.file_size - mf.wrote_position)
        mf.mm[mf.wrote_position:mf.wrote_position + n] = b"\x01" * n
        mf.wrote_position += n
        queue.commit(mf.file_from_offset + mf.wrote_position)
        nbytes -= n


def test_writer_takes_the_prepared_file(tmp_path):
    queue = MappedFileQueue(str(tmp_path / "q"), FILE_SIZE)
    fill(queue, 3000)
    assert queue.files_created_inline == 1           # the first file
    assert not queue.next_file_prepared()
    assert queue.prepare_next_file() is True
    assert queue.prepare_next_file() is False         # already there
    assert names(tmp_path / "q") == [f"{0:020d}", f"{FILE_SIZE:020d}"]
    assert queue.max_offset() == 3000 and len(queue.mapped_files) == 1   # invisible until needed
    fill(queue, 2000)
    assert queue.files_created_inline == 1           # the append created nothing
    assert [mf.file_from_offset for mf in queue.mapped_files] == [0, FILE_SIZE]
    assert queue.max_offset() == 5000
    queue.close()


def test_stale_prepared_file_is_dropped(tmp_path):
    queue = MappedFileQueue(str(tmp_path / "q"), FILE_SIZE)
    fill(queue, FILE_SIZE + 100)
    queue.prepare_next_file()
    assert f"{2 * FILE_SIZE:020d}" in names(tmp_path / "q")
    queue.delete_last_mapped_file()                   # as a consume queue truncation does
    assert names(tmp_path / "q") == [f"{0:020d}"]
    queue.prepare_next_file()
    queue.truncate_dirty_files(100, clean_run=FILE_SIZE)
    assert names(tmp_path / "q") == [f"{0:020d}"]
    queue.destroy()
    assert not (tmp_path / "q").exists()


def test_close_deletes_the_prepared_file(tmp_path):
    queue = MappedFileQueue(str(tmp_path / "q"), FILE_SIZE)
    fill(queue, 10)
    queue.prepare_next_file()
    queue.close()
    assert names(tmp_path / "q") == [f"{0:020d}"]


@pytest.mark.parametrize("abnormal", [False, True])
@pytest.mark.parametrize("after_blank", [False, True])
def test_store_with_an_empty_prepared_file_recovers(tmp_path, abnormal, after_blank):
    """``after_blank``: the empty file follows a file closed by a blank record (the case recovery
    keeps it, empty, as the next file to write)."""
    config = small_config(tmp_path / "live")
    store = open_store(config)
    bodies = []
    # 5 messages end in the middle of the first commit log file; enough of them roll it over
    count = 5 if not after_blank else 1
    for i in range(count):
        bodies.append(f"body-{i}".encode())
        store.put_message(make_msg(body=bodies[-1]))
    commit_log = store.commit_log.mapped_file_queue
    if after_blank:
        # fill the first file up to its blank record: the last put starts file 2
        first = commit_log.last_mapped_file()
        while commit_log.last_mapped_file() is first:
            bodies.append(b"x" * 300)
            store.put_message(make_msg(body=bodies[-1]))
        last = commit_log.last_mapped_file()
        assert last.file_from_offset == FILE_SIZE
    assert commit_log.prepare_next_file()
    cq_queue = store.find_consume_queue("TopicTest", 0).mapped_file_queue
    assert cq_queue.prepare_next_file()
    # the state a crash (or Apache's allocator) leaves: an empty next file in both directories
    copy = tmp_path / "copy"
    shutil.copytree(config.store_path_root_dir, copy)
    store.shutdown()
    config2 = small_config(copy)
    if abnormal:
        crash(config2)
    else:
        os.unlink(config2.abort_path())
    assert len(names(config2.commit_log_dir())) == (3 if after_blank else 2)
    if after_blank:
        # file 2 torn to nothing: after the blank record of file 1 come two empty files
        with open(os.path.join(config2.commit_log_dir(), f"{FILE_SIZE:020d}"), "r+b") as f:
            f.write(bytes(FILE_SIZE))
        bodies.pop()
    reopened = open_store(config2)
    try:
        assert [m.body for m in all_messages(reopened)] == bodies
        expected_files = [f"{0:020d}", f"{FILE_SIZE:020d}"] if after_blank else [f"{0:020d}"]
        assert names(config2.commit_log_dir()) == expected_files
        reopened.put_message(make_msg(body=b"after"))
        assert [m.body for m in all_messages(reopened)] == bodies + [b"after"]
    finally:
        reopened.shutdown()

"""DefaultMessageStore facade: put validation, get_message status table, queries, restart, lock."""

from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

import pytest

from pyrmq.codec.message import decode_messages, tags_string_to_tags_code
from pyrmq.store.message_store import (
    DefaultMessageStore,
    GetMessageStatus,
    PutMessageStatus,
    StoreError,
)
from store_helpers import make_msg, open_store, small_config

S = GetMessageStatus


def fill(store, n, topic="TopicTest", queue_id=0, body=b"m", tags="TagA"):
    return [store.put_message(make_msg(topic=topic, queue_id=queue_id, body=body, tags=tags)).append_result
            for _ in range(n)]


# ------------------------------------------------------------------ put


def test_put_validation(store, config):
    assert store.put_message(make_msg(topic="t" * 128)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_message(make_msg(topic="t" * 127)).is_ok()
    # names are checked before any path is built from them
    for bad in ("../escape", "a/b", "", "x\x00"):
        assert store.put_message(make_msg(topic=bad)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert not (Path(config.store_path_root_dir).parent / "escape").exists()
    assert sorted(p.name for p in Path(config.consume_queue_dir()).iterdir()) == ["t" * 127]
    big_props = {"K": "v" * 32767}
    assert store.put_message(make_msg(props=big_props)).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.put_message(make_msg(props={"K": "😀" * 8300})).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.put_message(make_msg(props={"K": "é" * 17000})).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.put_message(make_msg(body=b"x" * (config.max_message_size + 1))).status is PutMessageStatus.MESSAGE_ILLEGAL
    # bigger than a whole (test-sized) commit log file
    assert store.put_message(make_msg(body=b"x" * 5000)).status is PutMessageStatus.MESSAGE_ILLEGAL
    store.shutdown()
    assert store.put_message(make_msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


class Recorder:
    """A dispatcher that records what reaches it."""

    def __init__(self):
        self.calls = []

    def dispatch(self, request):
        self.calls.append((request.topic, request.queue_id, request.queue_offset, request.commit_log_offset))


def test_added_dispatchers_see_every_put_inline(config):
    recorder = Recorder()
    s = DefaultMessageStore(config)
    s.add_dispatcher(recorder)
    s.start()
    try:
        results = fill(s, 2) + fill(s, 1, queue_id=3)
        assert recorder.calls == [("TopicTest", 0, 0, results[0].wrote_offset),
                                  ("TopicTest", 0, 1, results[1].wrote_offset),
                                  ("TopicTest", 3, 0, results[2].wrote_offset)]
        assert s.reput.reput_from_offset == s.get_max_phy_offset()
    finally:
        s.shutdown()


# ------------------------------------------------------------------ get_message status table


def test_no_matched_logic_queue(store):
    r = store.get_message("g", "Nope", 0, 5, 32, None)
    assert (r.status, r.next_begin_offset, r.buffers) == (S.NO_MATCHED_LOGIC_QUEUE, 0, [])


def test_no_message_in_queue(store):
    store.find_consume_queue("Empty", 0, create=True)
    r = store.get_message("g", "Empty", 0, 3, 32, None)
    assert (r.status, r.next_begin_offset, r.max_offset) == (S.NO_MESSAGE_IN_QUEUE, 0, 0)


def test_offset_too_small_overflow_one_and_badly(store):
    results = fill(store, 5)
    store.find_consume_queue("TopicTest", 0).correct_min_offset(results[2].wrote_offset)
    r = store.get_message("g", "TopicTest", 0, 1, 32, None)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (S.OFFSET_TOO_SMALL, 2, 2, 5)
    r = store.get_message("g", "TopicTest", 0, 5, 32, None)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_OVERFLOW_ONE, 5)
    r = store.get_message("g", "TopicTest", 0, 9, 32, None)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_OVERFLOW_BADLY, 5)


def test_found_returns_mmap_views(store):
    results = fill(store, 5, body=b"abc")
    r = store.get_message("g", "TopicTest", 0, 1, 3, None)
    assert r.status is S.FOUND and r.message_count == 3 and r.next_begin_offset == 4
    assert all(isinstance(b, memoryview) for b in r.buffers)
    assert r.buffer_total_size == sum(x.wrote_bytes for x in results[1:4])
    msgs = decode_messages(b"".join(r.buffers))
    assert [m.queue_offset for m in msgs] == [1, 2, 3] and msgs[0].body == b"abc"
    assert not r.suggest_pulling_from_slave


class TagFilter:
    def __init__(self, tag):
        self.code = tags_string_to_tags_code(tag)

    def is_matched_by_consume_queue(self, tags_code):
        return tags_code == self.code

    def is_matched_by_commit_log(self, record):
        return True


class RejectAllInCommitLog(TagFilter):
    def is_matched_by_commit_log(self, record):
        assert isinstance(record, memoryview)
        return False


def test_no_matched_message_and_filtering(store):
    fill(store, 3, tags="A")
    fill(store, 2, tags="B")
    r = store.get_message("g", "TopicTest", 0, 0, 32, TagFilter("C"))
    assert (r.status, r.next_begin_offset, r.message_count) == (S.NO_MATCHED_MESSAGE, 5, 0)
    r = store.get_message("g", "TopicTest", 0, 0, 32, TagFilter("B"))
    assert (r.status, r.next_begin_offset, r.message_count) == (S.FOUND, 5, 2)
    assert [m.tags for m in decode_messages(b"".join(r.buffers))] == ["B", "B"]
    r = store.get_message("g", "TopicTest", 0, 0, 32, RejectAllInCommitLog("A"))
    assert (r.status, r.message_count) == (S.NO_MATCHED_MESSAGE, 0)


def test_message_was_removing(store):
    fill(store, 1)
    cq = store.find_consume_queue("TopicTest", 0)
    cq.put_unit(10**6, 100, 0, 1)  # points past the commit log end
    r = store.get_message("g", "TopicTest", 0, 1, 32, None)
    assert (r.status, r.message_count, r.next_begin_offset) == (S.MESSAGE_WAS_REMOVING, 0, 2)


def test_offset_found_null(tmp_path):
    s = open_store(small_config(tmp_path, mapped_file_size_consume_queue=20 * 4))
    try:
        fill(s, 6)
        cq = s.find_consume_queue("TopicTest", 0)
        # the first CQ file went away while the min offset still points into it
        cq.mapped_file_queue.mapped_files = cq.mapped_file_queue.mapped_files[1:]
        r = s.get_message("g", "TopicTest", 0, 1, 32, None)
        assert (r.status, r.next_begin_offset) == (S.OFFSET_FOUND_NULL, 4)
    finally:
        s.shutdown()


def test_batch_limits_in_memory_and_on_disk(tmp_path):
    s = open_store(small_config(tmp_path / "a", mapped_file_size_commit_log=64 * 1024,
                                max_transfer_count_on_message_in_memory=4))
    try:
        fill(s, 10)
        r = s.get_message("g", "TopicTest", 0, 0, 32, None)
        assert r.message_count == 4 and r.next_begin_offset == 4 and not r.suggest_pulling_from_slave
        r = s.get_message("g", "TopicTest", 0, 0, 2, None)
        assert r.message_count == 2 and r.next_begin_offset == 2
    finally:
        s.shutdown()
    # ratio 0: every record counts as "on disk" -> 8 messages, suggest the slave
    s = open_store(small_config(tmp_path / "b", mapped_file_size_commit_log=64 * 1024,
                                access_message_in_memory_max_ratio=0))
    try:
        fill(s, 20)
        r = s.get_message("g", "TopicTest", 0, 0, 32, None)
        assert r.message_count == 8 and r.next_begin_offset == 8
        assert r.suggest_pulling_from_slave
        assert s.check_in_disk_by_consume_offset("TopicTest", 0, 0)
        # byte limit on disk: 64 KiB
        big = fill(s, 4, queue_id=1, body=b"x" * 30_000)
        r = s.get_message("g", "TopicTest", 1, 0, 32, None)
        assert r.message_count == 2 and r.buffer_total_size == big[0].wrote_bytes * 2
    finally:
        s.shutdown()


def test_in_memory_byte_limit(tmp_path):
    s = open_store(small_config(tmp_path, mapped_file_size_commit_log=64 * 1024,
                                max_transfer_bytes_on_message_in_memory=1000))
    try:
        res = fill(s, 10, body=b"x" * 300)
        r = s.get_message("g", "TopicTest", 0, 0, 32, None)
        assert r.message_count == 1000 // res[0].wrote_bytes
        assert not s.check_in_disk_by_consume_offset("TopicTest", 0, 0)
    finally:
        s.shutdown()


# ------------------------------------------------------------------ queries


def test_queries(store):
    res = fill(store, 3)
    assert store.get_max_offset_in_queue("TopicTest", 0) == 3
    assert store.get_min_offset_in_queue("TopicTest", 0) == 0
    assert store.get_max_offset_in_queue("X", 0) == 0 and store.get_min_offset_in_queue("X", 0) == 0
    assert store.get_earliest_message_time("TopicTest", 0) == res[0].store_timestamp
    assert store.get_earliest_message_time("X", 0) == -1
    assert store.get_message_store_timestamp("TopicTest", 0, 2) == res[2].store_timestamp
    assert store.get_message_store_timestamp("TopicTest", 0, 9) == -1
    assert store.get_offset_in_queue_by_time("TopicTest", 0, res[1].store_timestamp) in (0, 1, 2)
    assert store.get_offset_in_queue_by_time("TopicTest", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("X", 0, 0) == 0
    view = store.select_one_message_by_offset(res[1].wrote_offset)
    assert isinstance(view, memoryview) and len(view) == res[1].wrote_bytes
    msg = store.look_message_by_offset(res[1].wrote_offset)
    assert msg.queue_offset == 1 and msg.msg_id == res[1].msg_id
    assert store.look_message_by_offset(10**9) is None
    assert store.look_message_by_offset(res[1].wrote_offset + 3) is None
    assert not store.check_in_disk_by_consume_offset("TopicTest", 0, 0)
    assert not store.check_in_disk_by_consume_offset("TopicTest", 0, 99)


def test_delete_topics(store, config):
    fill(store, 2, topic="A")
    fill(store, 2, topic="B")
    store.delete_topics({"A"})
    assert store.get_max_offset_in_queue("A", 0) == 0
    assert not os.path.exists(os.path.join(config.consume_queue_dir(), "A"))
    assert store.get_max_offset_in_queue("B", 0) == 2
    assert store.put_message(make_msg(topic="A")).append_result.logics_offset == 0


# ------------------------------------------------------------------ lifecycle


def test_restart_preserves_everything(config):
    s = open_store(config)
    res = fill(s, 30, body=b"x" * 100)  # several commit log and CQ files
    res += fill(s, 7, queue_id=1)
    ids = [r.msg_id for r in res]
    s.flush_commit_log()
    s.flush_consume_queues()
    cp = (s.checkpoint.physic_msg_timestamp, s.checkpoint.logics_msg_timestamp)
    s.shutdown()
    assert not os.path.exists(config.abort_path())
    s = open_store(config)
    try:
        assert s.last_exit_ok
        assert (s.checkpoint.physic_msg_timestamp, s.checkpoint.logics_msg_timestamp) == cp
        assert s.get_max_offset_in_queue("TopicTest", 0) == 30
        assert s.get_max_offset_in_queue("TopicTest", 1) == 7
        assert s.get_max_phy_offset() == res[-1].wrote_offset + res[-1].wrote_bytes
        assert [s.look_message_by_offset(r.wrote_offset).msg_id for r in res] == ids
        got = []
        offset = 0
        while True:
            r = s.get_message("g", "TopicTest", 0, offset, 32, None)
            if r.status is not S.FOUND:
                break
            got += decode_messages(b"".join(r.buffers))
            offset = r.next_begin_offset
        assert [m.queue_offset for m in got] == list(range(30))
        nxt = s.put_message(make_msg()).append_result
        end = res[-1].wrote_offset + res[-1].wrote_bytes
        assert nxt.logics_offset == 30
        assert nxt.wrote_offset == (end if end % 4096 + nxt.wrote_bytes + 8 <= 4096 else end - end % 4096 + 4096)
    finally:
        s.shutdown()


def test_lock_prevents_a_second_store(config):
    s = open_store(config)
    try:
        assert open(config.lock_path(), "rb").read(4) == b"lock"
        with pytest.raises(StoreError, match="Lock failed, MQ already started"):
            DefaultMessageStore(config).load()
        # another process (like a Java broker) cannot lock byte 0..1 either
        code = ("import fcntl,os,sys\nfd=os.open(sys.argv[1],os.O_RDWR)\n"
                "try:\n fcntl.lockf(fd,fcntl.LOCK_EX|fcntl.LOCK_NB,1,0)\nexcept OSError:\n sys.exit(3)\n")
        assert subprocess.run([sys.executable, "-c", code, config.lock_path()]).returncode == 3
        assert s.put_message(make_msg()).is_ok()  # the failed attempt did not drop our lock
    finally:
        s.shutdown()
    s2 = open_store(config)
    s2.shutdown()


def test_length_mismatch_refuses_to_load(config):
    s = open_store(config)
    fill(s, 1)
    s.shutdown()
    path = os.path.join(config.commit_log_dir(), "00000000000000000000")
    os.truncate(path, 1000)
    with pytest.raises(StoreError, match="length not matched"):
        DefaultMessageStore(config).load()
    os.truncate(path, 4096)
    open_store(config).shutdown()  # and the lock was released after the failure

"""What a crash at an awkward moment leaves, and how the store starts from it (the in-process
twins of tests/robustness/test_crash_points.py): a file created but never sized, index files
dropped after an abnormal exit whose records lie before the consume queues' replay start."""

from __future__ import annotations

import os
import struct

import pytest

from pyrmq.store import crash_points
from pyrmq.store.message_store import StoreError
from store_helpers import make_msg, open_store, small_config


def crash(config):
    open(config.abort_path(), "w").close()


def keyed_store(tmp_path, count=40):
    """A cleanly stopped store with ``count`` keyed records over several commit log files."""
    config = small_config(tmp_path / "s", max_index_num=10_000, max_hash_slot_num=512)
    s = open_store(config)
    res = [s.put_message(make_msg(body=f"b{i}".encode() + bytes(300), props={"KEYS": f"key{i}"})).append_result
           for i in range(count)]
    s.shutdown()
    assert len(os.listdir(config.commit_log_dir())) >= 3
    return config, res


def test_abnormal_exit_reindexes_records_before_the_replay_start(tmp_path):
    """The index files newer than the index checkpoint are dropped after a crash (they may be
    torn); a checkpoint that lets the consume queues replay only the newest commit log file must
    not leave the older records unindexed (Apache loses them unless messageIndexSafe)."""
    config, res = keyed_store(tmp_path)
    with open(config.checkpoint_path(), "r+b") as f:
        f.write(struct.pack(">qq", 2**62, 2**62))   # physic, logics: recover from the newest file
    crash(config)
    s = open_store(config)
    try:
        # the store is open before the index is whole: the rebuild runs behind the live pipeline
        assert s.get_max_offset_in_queue("TopicTest", 0) == len(res)
        assert s.index_rebuild is not None and s.index_service.index_files == []
        assert s.dispatched_until() == 0
        late = s.put_message(make_msg(body=b"late", props={"KEYS": "late"}))
        assert late.is_ok()
        assert not s.query_message("TopicTest", "late", 32, 0, 2**63 - 1).buffers   # indexed in its turn
        slices = 0
        while not s.rebuild_index_step(7):   # as the broker calls it between requests
            slices += 1
            last = res[7 * slices - 1]   # the slice ends after its 7th record
            assert s.dispatched_until() == last.wrote_offset + last.wrote_bytes
        assert slices == len(res) // 7 and s.index_rebuild is None
        assert len(s.index_service.index_files) == 1
        for i in range(len(res)):
            found = s.query_message("TopicTest", f"key{i}", 32, 0, 2**63 - 1)
            assert len(found.buffers) == 1, f"key{i} not indexed after the crash"
        assert len(s.query_message("TopicTest", "late", 32, 0, 2**63 - 1).buffers) == 1
        # the index dispatcher is back in the live pipeline: a new key is found at once
        assert s.put_message(make_msg(body=b"later", props={"KEYS": "later"})).is_ok()
        assert len(s.query_message("TopicTest", "later", 32, 0, 2**63 - 1).buffers) == 1
    finally:
        s.shutdown()


def test_a_stop_during_the_index_rebuild_finishes_it(tmp_path):
    """A clean stop promises a whole index (the next start replays nothing for it)."""
    config, res = keyed_store(tmp_path)
    with open(config.checkpoint_path(), "r+b") as f:
        f.write(struct.pack(">qq", 2**62, 2**62))   # physic, logics: recover from the newest file
    crash(config)
    s = open_store(config)
    assert s.index_rebuild is not None
    assert not s.rebuild_index_step(3)
    s.shutdown()
    s = open_store(config)
    try:
        assert s.last_exit_ok and s.index_rebuild is None
        for i in range(len(res)):
            assert len(s.query_message("TopicTest", f"key{i}", 32, 0, 2**63 - 1).buffers) == 1, i
    finally:
        s.shutdown()


@pytest.mark.parametrize("size", [0, 100])
def test_unsized_last_commit_log_file_is_dropped(tmp_path, size):
    config, res = keyed_store(tmp_path)
    end = res[-1].wrote_offset + res[-1].wrote_bytes
    nxt = end - end % 4096 + 4096
    with open(os.path.join(config.commit_log_dir(), f"{nxt:020d}"), "wb") as f:
        f.write(bytes(size))
    crash(config)
    s = open_store(config)
    try:
        assert s.get_max_phy_offset() == end
        assert s.put_message(make_msg()).append_result.logics_offset == len(res)
    finally:
        s.shutdown()


def test_short_file_holding_data_still_refuses_to_load(tmp_path):
    config, res = keyed_store(tmp_path)
    last = sorted(os.listdir(config.commit_log_dir()))[-1]
    os.truncate(os.path.join(config.commit_log_dir(), last), 1000)   # data, then nothing
    with pytest.raises(StoreError, match="length not matched"):
        open_store(config)


def test_unsized_consume_queue_and_index_files_are_dropped(tmp_path):
    config, res = keyed_store(tmp_path)
    queue_dir = os.path.join(config.consume_queue_dir(), "TopicTest", "0")
    last = int(sorted(os.listdir(queue_dir))[-1])
    open(os.path.join(queue_dir, f"{last + 200:020d}"), "wb").close()
    open(os.path.join(config.index_dir(), "99991231235959999"), "wb").close()
    crash(config)
    s = open_store(config)
    try:
        assert s.get_max_offset_in_queue("TopicTest", 0) == len(res)
        assert not os.path.exists(os.path.join(config.index_dir(), "99991231235959999"))
        assert s.rebuild_index_step(None)   # what the broker does in the background
        assert len(s.query_message("TopicTest", "key3", 32, 0, 2**63 - 1).buffers) == 1
    finally:
        s.shutdown()


def test_crash_point_names_are_checked():
    assert not crash_points.armed("commitlog.appended")
    with pytest.raises(ValueError):
        crash_points.armed("commitlog.apended")
    with pytest.raises(ValueError):
        crash_points._parse("flush:2")
    with pytest.raises(ValueError):
        crash_points._parse("flush.between_files:0")
    assert crash_points._parse("flush.between_files:2") == ("flush.between_files", 2)
    assert crash_points._parse("config.renamed") == ("config.renamed", 1)


def test_abort_file_is_made_durable_at_start(tmp_path, monkeypatch):
    """After a power cut that forgot the abort file the next start would recover as after a
    clean stop, trusting consume queues that may have lost unflushed units."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    config = small_config(tmp_path / "s")
    s = open_store(config)
    try:
        assert os.path.realpath(config.abort_path()) in synced
        assert os.path.realpath(config.store_path_root_dir) in synced
    finally:
        s.shutdown()

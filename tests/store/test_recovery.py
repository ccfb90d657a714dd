"""Recovery: clean restart, crash with a torn tail at every byte, CRC corruption, re-dispatch."""

from __future__ import annotations

import os
import shutil
import struct

import pytest

from pyrmq.codec.message import decode_messages
from pyrmq.store.message_store import DefaultMessageStore, GetMessageStatus
from store_helpers import make_msg, open_store, small_config

N = 6


def crash(config):
    """Make the next start see an abnormal exit."""
    open(config.abort_path(), "w").close()


def commit_log_file(config, offset=0):
    return os.path.join(config.commit_log_dir(), f"{offset:020d}")


def zero_from(path, start, end=None):
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        end = size if end is None else end
        f.seek(start)
        f.write(bytes(end - start))


def all_messages(store, topic="TopicTest", queue_id=0):
    out, offset = [], 0
    while True:
        r = store.get_message("g", topic, queue_id, offset, 32, None)
        if r.status is not GetMessageStatus.FOUND:
            return out
        out += decode_messages(b"".join(r.buffers))
        offset = r.next_begin_offset


def assert_a_send_after_recovery_is_kept(config):
    """Recover, send, consume it; and after a clean restart it is still there."""
    s = open_store(config)
    try:
        assert s.put_message(make_msg(topic="Other", body=b"after")).status.name == "PUT_OK"
        assert [m.body for m in all_messages(s, "Other")] == [b"after"]
    finally:
        s.shutdown()
    s = open_store(config)
    try:
        assert [m.body for m in all_messages(s, "Other")] == [b"after"]
    finally:
        s.shutdown()


@pytest.fixture
def pristine(tmp_path):
    """A store with N records in one commit log file, cleanly shut down."""
    config = small_config(tmp_path / "pristine")
    s = open_store(config)
    results = [s.put_message(make_msg(body=f"body-{i}".encode(), props={"UNIQ_KEY": f"U{i}"})).append_result
               for i in range(N)]
    s.shutdown()
    return config, results


def copy_store(pristine_config, dest):
    shutil.copytree(pristine_config.store_path_root_dir, dest)
    return small_config(dest)


def test_torn_last_record_at_every_byte_position(pristine, tmp_path):
    config0, results = pristine
    last = results[-1]
    for p in range(last.wrote_offset, last.wrote_offset + last.wrote_bytes):
        config = copy_store(config0, tmp_path / f"torn{p}")
        zero_from(commit_log_file(config), p)
        crash(config)
        s = open_store(config)
        try:
            assert not s.last_exit_ok
            assert s.get_max_phy_offset() == last.wrote_offset, p
            assert s.get_max_offset_in_queue("TopicTest", 0) == N - 1, p
            assert s.look_message_by_offset(last.wrote_offset) is None
            msgs = all_messages(s)
            assert [m.body for m in msgs] == [f"body-{i}".encode() for i in range(N - 1)], p
            r = s.put_message(make_msg(body=b"again"))
            assert r.append_result.wrote_offset == last.wrote_offset, p
            assert r.append_result.logics_offset == N - 1, p
        finally:
            s.shutdown()
        shutil.rmtree(config.store_path_root_dir)


def test_torn_tail_without_crc_check(pristine, tmp_path):
    config0, results = pristine
    last = results[-1]
    for p in range(last.wrote_offset, last.wrote_offset + last.wrote_bytes, 7):
        config = copy_store(config0, tmp_path / f"torn{p}")
        config.check_crc_on_recover = False
        zero_from(commit_log_file(config), p)
        crash(config)
        s = open_store(config)
        try:
            assert s.get_max_phy_offset() == last.wrote_offset, p
            assert s.get_max_offset_in_queue("TopicTest", 0) == N - 1, p
        finally:
            s.shutdown()
        shutil.rmtree(config.store_path_root_dir)


def test_normal_restart_keeps_everything(pristine, tmp_path):
    config0, results = pristine
    config = copy_store(config0, tmp_path / "clean")
    s = open_store(config)
    try:
        assert s.last_exit_ok
        assert s.get_max_phy_offset() == results[-1].wrote_offset + results[-1].wrote_bytes
        assert len(all_messages(s)) == N
    finally:
        s.shutdown()


def test_crc_corruption_in_the_middle(pristine, tmp_path):
    config0, results = pristine
    bad = results[2]
    for abnormal in (True, False):
        config = copy_store(config0, tmp_path / f"crc{abnormal}")
        path = commit_log_file(config)
        with open(path, "r+b") as f:
            f.seek(bad.wrote_offset + 88)  # first body byte
            b = f.read(1)
            f.seek(bad.wrote_offset + 88)
            f.write(bytes([b[0] ^ 0xFF]))
        if abnormal:
            crash(config)
        s = open_store(config)
        try:
            assert s.get_max_phy_offset() == bad.wrote_offset
            assert s.get_max_offset_in_queue("TopicTest", 0) == 2
            assert [m.body for m in all_messages(s)] == [b"body-0", b"body-1"]
            # the records after the corruption are gone for good: zeroed, not resurrected
            r = s.put_message(make_msg(body=b"x"))
            assert r.append_result.wrote_offset == bad.wrote_offset
        finally:
            s.shutdown()
        s = open_store(config)
        try:
            assert s.get_max_offset_in_queue("TopicTest", 0) == 3
            assert s.get_max_phy_offset() == bad.wrote_offset + r.append_result.wrote_bytes
        finally:
            s.shutdown()


def test_abnormal_recovery_rebuilds_lost_consume_queues(pristine, tmp_path):
    config0, results = pristine
    config = copy_store(config0, tmp_path / "nocq")
    shutil.rmtree(config.consume_queue_dir())
    crash(config)
    s = open_store(config)
    try:
        assert s.get_max_offset_in_queue("TopicTest", 0) == N
        assert [m.body for m in all_messages(s)] == [f"body-{i}".encode() for i in range(N)]
        assert s.put_message(make_msg()).append_result.logics_offset == N
    finally:
        s.shutdown()


def test_abnormal_recovery_rebuilds_a_torn_consume_queue(pristine, tmp_path):
    config0, results = pristine
    config = copy_store(config0, tmp_path / "tornq")
    cq_file = os.path.join(config.consume_queue_dir(), "TopicTest", "0", f"{0:020d}")
    zero_from(cq_file, 20 * 3 + 5)  # units 3.. lost; unit 3 half written
    crash(config)
    s = open_store(config)
    try:
        assert s.get_max_offset_in_queue("TopicTest", 0) == N
        assert len(all_messages(s)) == N
    finally:
        s.shutdown()


def test_commit_log_files_gone_destroys_consume_queues(pristine, tmp_path):
    config0, _ = pristine
    config = copy_store(config0, tmp_path / "nocl")
    shutil.rmtree(config.commit_log_dir())
    s = open_store(config)
    try:
        assert s.get_max_offset_in_queue("TopicTest", 0) == 0
        assert s.get_max_phy_offset() == 0
        assert s.put_message(make_msg()).append_result.logics_offset == 0
    finally:
        s.shutdown()


def test_recovery_across_files_with_blank_records(tmp_path):
    config = small_config(tmp_path / "multi")
    s = open_store(config)
    res = [s.put_message(make_msg(body=bytes(200), queue_id=i % 3)).append_result for i in range(60)]
    s.shutdown()
    assert len(os.listdir(config.commit_log_dir())) >= 4
    for abnormal in (False, True):
        if abnormal:
            crash(config)
        s = open_store(config)
        try:
            assert s.get_max_phy_offset() == res[-1].wrote_offset + res[-1].wrote_bytes
            assert [s.get_max_offset_in_queue("TopicTest", q) for q in range(3)] == [20, 20, 20]
            assert s.commit_log.topic_queue_table == {("TopicTest", q): 20 for q in range(3)}
        finally:
            s.shutdown()
    # torn first record of the newest file: that file empties, earlier files intact
    last_file_start = res[-1].wrote_offset - res[-1].wrote_offset % 4096
    first_in_last = next(r for r in res if r.wrote_offset == last_file_start)
    zero_from(commit_log_file(config, last_file_start), 10)
    crash(config)
    s = open_store(config)
    try:
        assert s.get_max_phy_offset() == last_file_start
        lost = sum(1 for r in res if r.wrote_offset >= first_in_last.wrote_offset)
        assert sum(s.get_max_offset_in_queue("TopicTest", q) for q in range(3)) == 60 - lost
    finally:
        s.shutdown()


def test_checkpoint_written_on_shutdown(pristine):
    config0, results = pristine
    raw = open(config0.checkpoint_path(), "rb").read()
    assert len(raw) == 4096
    physic, logics, index = struct.unpack_from(">qqq", raw)
    assert physic == results[-1].store_timestamp and logics == results[-1].store_timestamp
    assert index == 0 and raw[24:] == bytes(4096 - 24)


def test_abnormal_recovery_from_a_checkpointed_file(tmp_path):
    """A recent checkpoint makes recovery start at the newest file; older data stays as is."""
    config = small_config(tmp_path / "cp")
    s = open_store(config)
    res = [s.put_message(make_msg(body=bytes(300))).append_result for _ in range(40)]
    s.shutdown()
    with open(config.checkpoint_path(), "r+b") as f:
        f.write(struct.pack(">qq", 2**62, 2**62))  # everything is older than the checkpoint
    last_file_start = res[-1].wrote_offset - res[-1].wrote_offset % 4096
    cq_file = os.path.join(config.consume_queue_dir(), "TopicTest", "0")
    # drop the CQ units of the newest commit log file: only re-dispatch can bring them back
    first_lost = next(i for i, r in enumerate(res) if r.wrote_offset >= last_file_start)
    s = open_store(config)
    s.find_consume_queue("TopicTest", 0).truncate_dirty_logic_files(last_file_start)
    assert s.get_max_offset_in_queue("TopicTest", 0) == first_lost
    s.shutdown()
    crash(config)
    s = open_store(config)
    try:
        assert s.get_max_offset_in_queue("TopicTest", 0) == 40
        assert [m.queue_offset for m in all_messages(s)] == list(range(40))
    finally:
        s.shutdown()
    assert os.path.isdir(cq_file)


def test_damage_before_the_checkpointed_file_is_found_before_replay(tmp_path):
    """Abnormal recovery checks the files from the checkpoint's on; the replay starts where the
    consume queues end, earlier. A damaged record in between used to stop the replay, and every
    later send was acknowledged, never consumable, and truncated away at the next clean start."""
    config = small_config(tmp_path / "damaged")
    s = open_store(config)
    res = [s.put_message(make_msg(body=bytes(300))).append_result for _ in range(20)]
    s.shutdown()
    damaged = res[5]
    assert damaged.wrote_offset < 4096 < res[-1].wrote_offset   # more than one commit log file
    s = open_store(config)
    s.find_consume_queue("TopicTest", 0).truncate_dirty_logic_files(res[2].wrote_offset)   # queues end early
    s.shutdown()
    with open(commit_log_file(config), "r+b") as f:
        f.seek(damaged.wrote_offset + 4)
        f.write(b"\x12\x34\x56\x78")                           # its magic code
    with open(config.checkpoint_path(), "r+b") as f:
        f.write(struct.pack(">qq", 2**62, 2**62))                # recovery starts at the newest file
    crash(config)
    s = open_store(config)
    try:
        assert s.get_max_phy_offset() == damaged.wrote_offset   # the valid data ends at the damage
    finally:
        s.shutdown()
    crash(config)
    assert_a_send_after_recovery_is_kept(config)
    s = open_store(config)
    try:
        assert s.get_max_offset_in_queue("TopicTest", 0) == 5
    finally:
        s.shutdown()


def test_schedule_topic_tags_code_hook(config):
    s = open_store(config)
    try:
        s.schedule_tags_code = lambda level, store_ts: store_ts + level * 1000
        r = s.put_message(make_msg(topic="SCHEDULE_TOPIC_XXXX", queue_id=2, props={"DELAY": "3"}))
        unit = s.find_consume_queue("SCHEDULE_TOPIC_XXXX", 2).get_unit(0)
        assert unit[2] == r.append_result.store_timestamp + 3000
    finally:
        s.shutdown()


def test_clean_start_dispatches_records_missing_from_the_consume_queues(pristine, tmp_path):
    """Like Java's reput at start: CQs lagging behind the commit log catch up (store.md §3)."""
    config0, results = pristine
    config = copy_store(config0, tmp_path / "lag")
    cq_file = os.path.join(config.consume_queue_dir(), "TopicTest", "0", f"{0:020d}")
    zero_from(cq_file, 20 * 4)  # the last two units never made it to the queue
    s = open_store(config)
    try:
        assert s.last_exit_ok
        assert s.get_max_offset_in_queue("TopicTest", 0) == N
        assert [m.body for m in all_messages(s)] == [f"body-{i}".encode() for i in range(N)]
        assert s.put_message(make_msg()).append_result.logics_offset == N
    finally:
        s.shutdown()


def test_consume_queue_ending_inside_a_record_does_not_stall_dispatch(pristine, tmp_path):
    """A damaged last unit names an offset inside a record: replay must not start there (it would
    stop as invalid, and every later send would be acknowledged and never consumable)."""
    config0, results = pristine
    config = copy_store(config0, tmp_path / "inside")
    cq_file = os.path.join(config.consume_queue_dir(), "TopicTest", "0", f"{0:020d}")
    last = results[-1]
    with open(cq_file, "r+b") as f:   # the last unit: its size reaches into the middle of the next record
        f.seek(20 * (N - 1))
        f.write(struct.pack(">qiq", last.wrote_offset - results[0].wrote_bytes, results[0].wrote_bytes + 7, 0))
    assert_a_send_after_recovery_is_kept(config)


class _Counter:
    """A dispatcher that counts the records the replay hands it."""

    def __init__(self):
        self.offsets = []

    def dispatch(self, request):
        self.offsets.append(request.commit_log_offset)


def _start_counting(config):
    s = DefaultMessageStore(config)
    counter = _Counter()
    s.add_dispatcher(counter)
    s.start()
    return s, counter


@pytest.mark.parametrize("torn_queue", [None, 1])
def test_crash_replay_starts_where_the_first_queue_ends(tmp_path, torn_queue):
    """After a kill -9 the page cache kept every consume queue unit: the replay starts at the end
    of the queue that ends first, not at the checkpointed file (whose records are all in their
    queues already). A queue torn shorter is replayed from its own end, before that file."""
    config = small_config(tmp_path / "s")
    s = open_store(config)
    res = [s.put_message(make_msg(body=bytes(200), queue_id=i % 3)).append_result for i in range(60)]
    s.shutdown()
    assert len(os.listdir(config.commit_log_dir())) >= 4
    if torn_queue is not None:
        s = open_store(config)
        s.find_consume_queue("TopicTest", torn_queue).truncate_dirty_logic_files(res[10].wrote_offset)
        s.shutdown()
    with open(config.checkpoint_path(), "r+b") as f:
        f.write(struct.pack(">qq", 2**62, 2**62))   # recovery starts at the newest file
    crash(config)
    s, counter = _start_counting(config)
    try:
        if torn_queue is None:
            # queue 0 ends first: only the records of queues 1 and 2 after it are replayed
            assert counter.offsets == [res[58].wrote_offset, res[59].wrote_offset]
        else:
            # queue 1 kept the units of records 1, 4, 7: the replay starts right after record 7
            assert counter.offsets == [r.wrote_offset for r in res[8:]]
        assert [s.get_max_offset_in_queue("TopicTest", q) for q in range(3)] == [20, 20, 20]
        for q in range(3):
            assert [m.queue_offset for m in all_messages(s, queue_id=q)] == list(range(20))
    finally:
        s.shutdown()

"""The one dispatch pipeline: puts, recovery and replicated bytes (``append_data``) all reach the
dispatchers through the reput service, and leave the same consume queues and index behind."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from pyrmq.codec.commit_log_walk import RecordWalker, WalkEnd
from pyrmq.codec.message import BODY_CRC_POSITION, MessageSysFlag, decode_message
from pyrmq.store.message_store import DefaultMessageStore, PutMessageStatus
from store_helpers import make_batch, make_msg, small_config


class Recorder:
    """A dispatcher that records what reaches it (as the broker's hold service is one)."""

    def __init__(self):
        self.calls = []

    def dispatch(self, request):
        self.calls.append((request.topic, request.queue_id, request.queue_offset,
                           request.commit_log_offset, request.size, request.tags_code,
                           request.sys_flag, request.properties_string))


def store_with(config, *dispatchers) -> DefaultMessageStore:
    s = DefaultMessageStore(config)
    for d in dispatchers:
        s.add_dispatcher(d)
    s.start()
    return s


def fill_master(store, n=60, seed=7):
    """Messages over two topics and several queues, some with keys, one batch, one half message."""
    rng = random.Random(seed)
    from pyrmq.codec.message import encode_batch, BatchEntry
    for i in range(n):
        topic = rng.choice(["TopicA", "TopicB"])
        msg = make_msg(topic=topic, queue_id=rng.randrange(3), body=os.urandom(rng.randrange(1, 300)),
                       tags=rng.choice(["TagA", "TagB", None]),
                       props={"KEYS": f"key{i} shared", "UNIQ_KEY": f"U{i:04d}"})
        assert store.put_message(msg).is_ok()
    body = encode_batch([BatchEntry(flag=0, body=b"b%d" % i, properties="TAGS\x01TagB") for i in range(3)])
    assert store.put_messages(make_batch(body, topic="TopicA", queue_id=1)).is_ok()
    half = make_msg(topic="TopicA", queue_id=0, body=b"half",
                    sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE, props={"KEYS": "halfkey"})
    assert store.put_message(half).is_ok()


def commit_log_bytes(store) -> list[tuple[int, bytes]]:
    """(file start offset, written bytes) of every commit log file."""
    return [(mf.file_from_offset, bytes(mf.view[:mf.wrote_position]))
            for mf in store.commit_log.mapped_file_queue.mapped_files]


def cq_files(root: Path) -> dict[str, bytes]:
    base = root / "consumequeue"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


@pytest.fixture
def master(tmp_path):
    recorder = Recorder()
    s = store_with(small_config(tmp_path / "master"), recorder)
    fill_master(s)
    yield s, recorder
    s.shutdown()


def test_append_data_dispatches_exactly_as_puts_do(master, tmp_path):
    store, master_recorder = master
    assert len(store.commit_log.mapped_file_queue.mapped_files) > 3   # blank records in between
    slave_recorder = Recorder()
    slave = store_with(small_config(tmp_path / "slave"), slave_recorder)
    try:
        rng = random.Random(1)
        for start, data in commit_log_bytes(store):
            pos = 0
            while pos < len(data):   # chunks that cut records anywhere, as HA transfers do
                n = rng.randrange(1, 700)
                assert slave.append_data(start + pos, data[pos:pos + n])
                pos += n
        assert slave.get_max_phy_offset() == store.get_max_phy_offset()
        assert slave.reput.reput_from_offset == store.reput.reput_from_offset
        # the send path's O(1) end offset agrees with the file list's
        assert slave.commit_log.committed_offset == slave.get_max_phy_offset()
        assert store.commit_log.committed_offset == store.get_max_phy_offset()
        # every dispatcher saw the same requests in the same order: held pulls, index, queues
        assert slave_recorder.calls == master_recorder.calls
        store.flush_consume_queues()
        slave.flush_consume_queues()
        assert cq_files(Path(slave.config.store_path_root_dir)) == cq_files(Path(store.config.store_path_root_dir))
        for topic, key in [("TopicA", "shared"), ("TopicB", "key7"), ("TopicA", "halfkey"), ("TopicB", "U0003")]:
            mine = store.query_message(topic, key, 64, 0, 2**62)
            theirs = slave.query_message(topic, key, 64, 0, 2**62)
            assert [bytes(b) for b in theirs.buffers] == [bytes(b) for b in mine.buffers]
        for topic in ("TopicA", "TopicB"):
            for qid in range(3):
                assert slave.get_max_offset_in_queue(topic, qid) == store.get_max_offset_in_queue(topic, qid)
    finally:
        slave.shutdown()


def test_append_data_checks_offsets_and_crc(master, tmp_path):
    store, _ = master
    [(start, data), *_] = commit_log_bytes(store)
    slave_recorder = Recorder()
    slave = store_with(small_config(tmp_path / "slave"), slave_recorder)
    try:
        assert not slave.append_data(100, data[:50])        # a first transfer must start a file
        first = next(iter(RecordWalker(data, 0, len(data))))
        assert slave.append_data(0, data[:first.size])
        assert not slave.append_data(0, data[:first.size])  # never over written bytes
        assert not slave.append_data(first.size + 1, b"x")  # never with a gap
        # a second record whose body is damaged: not dispatched, truncated, and asked again
        second_end = first.size + next(iter(RecordWalker(data, first.size, len(data),))).size
        bad = bytearray(data[first.size:second_end])
        bad[BODY_CRC_POSITION] ^= 0xFF
        assert not slave.append_data(first.size, bytes(bad))
        assert slave.get_max_phy_offset() == first.size
        assert len(slave_recorder.calls) == 1
        assert slave.append_data(first.size, data[first.size:second_end])
        assert len(slave_recorder.calls) == 2
    finally:
        slave.shutdown()


def test_a_put_while_the_pipeline_is_behind_dispatches_the_gap_first(master, tmp_path):
    """Replicated bytes not yet dispatched (an incomplete record) never get skipped by a put."""
    store, _ = master
    [(start, data), *_] = commit_log_bytes(store)
    recorder = Recorder()
    other = store_with(small_config(tmp_path / "other"), recorder)
    try:
        first = next(iter(RecordWalker(data, 0, len(data))))
        assert other.append_data(0, data[:first.size])
        assert len(recorder.calls) == 1
        assert other.put_message(make_msg(topic="TopicA", queue_id=0)).is_ok()
        assert [c[3] for c in recorder.calls] == [0, first.size]
    finally:
        other.shutdown()


@pytest.mark.parametrize("abnormal", [False, True])
def test_recovery_replays_through_the_same_dispatchers(master, tmp_path, abnormal):
    store, master_recorder = master
    store.shutdown()
    copy = tmp_path / "copy"
    shutil.copytree(store.config.store_path_root_dir, copy)
    shutil.rmtree(copy / "consumequeue")   # derived data: rebuilt by the replay
    if abnormal:
        (copy / "abort").touch()
    recorder = Recorder()
    again = store_with(small_config(copy), recorder)
    try:
        queued = [c for c in master_recorder.calls
                  if c[6] & MessageSysFlag.TRANSACTION_MASK != MessageSysFlag.TRANSACTION_PREPARED_TYPE]
        # the replay starts at a file the checkpoint (abnormal) or the queues (normal) allow;
        # with the queues gone both replay from the first record
        assert recorder.calls == master_recorder.calls
        assert len(queued) == len(master_recorder.calls) - 1
        assert again.reput.reput_from_offset == again.get_max_phy_offset()
        assert again.commit_log.committed_offset == again.get_max_phy_offset()
        assert cq_files(copy) == cq_files(Path(store.config.store_path_root_dir))
    finally:
        again.shutdown()
    store.load()   # the fixture shuts it down again


def test_a_failing_dispatcher_does_not_lose_the_record(config):
    """The put fails loudly; the next put re-dispatches the record the dispatcher missed."""

    class FailOnce(Recorder):
        failed = False

        def dispatch(self, request):
            if not self.failed:
                self.failed = True
                raise OSError(24, "Too many open files")
            super().dispatch(request)

    flaky = FailOnce()
    s = store_with(config, flaky)
    try:
        with pytest.raises(OSError):
            s.put_message(make_msg(body=b"one"))
        assert s.put_message(make_msg(body=b"two")).status is PutMessageStatus.PUT_OK
        assert [c[2] for c in flaky.calls] == [0, 1]
        assert s.get_max_offset_in_queue("TopicTest", 0) == 2
    finally:
        s.shutdown()


@pytest.mark.parametrize("first", [True, False], ids=["before the queues", "after the queues"])
def test_a_batch_whose_dispatch_stalls_is_dispatched_again_whole(config, first):
    """Each dispatcher takes a batch's records in one call; one that fails halfway stalls the
    pipeline before the batch, and the retry delivers all of it: every unit exactly once."""
    from pyrmq.codec.message import BatchEntry, encode_batch
    from pyrmq.store.model import DispatchError

    class FailOnSecond(Recorder):
        failed = False

        def dispatch(self, request):
            if request.queue_offset == 2 and not self.failed:
                self.failed = True
                raise DispatchError("cannot open it", OSError(24, "Too many open files"))
            super().dispatch(request)

    flaky = FailOnSecond()
    s = DefaultMessageStore(config)
    s.start()
    s.reput.add_dispatcher(flaky, first=first)
    try:
        zero = s.put_message(make_msg(body=b"zero")).append_result
        body = encode_batch([BatchEntry(flag=0, body=b"b%d" % i, properties="TAGS\x01TagB") for i in range(1, 5)])
        assert not s.put_messages(make_batch(body)).is_ok()
        assert s.reput.failure is not None   # stalled before the batch, not within it
        assert s.reput.reput_from_offset == zero.wrote_offset + zero.wrote_bytes
        assert s.retry_dispatch()
        assert s.get_max_offset_in_queue("TopicTest", 0) == 5
        got = s.get_message("g", "TopicTest", 0, 0, 32, None)
        assert [decode_message(bytes(b))[0].body for b in got.buffers] == [b"zero", b"b1", b"b2", b"b3", b"b4"]
        assert [c[2] for c in flaky.calls][-4:] == [1, 2, 3, 4]   # the batch again, from its first record
        assert s.reput.reput_from_offset == s.get_max_phy_offset()
    finally:
        s.shutdown()


def test_walker_stops_and_says_why(master):
    store, _ = master
    files = store.commit_log.mapped_file_queue.mapped_files
    full, last = files[0], files[-1]
    walker = RecordWalker(full.view, 0, full.file_size, file_from_offset=full.file_from_offset)
    n = sum(1 for _ in walker)
    assert n > 0 and walker.end is WalkEnd.END_OF_FILE
    walker = RecordWalker(last.view, 0, last.wrote_position, file_from_offset=last.file_from_offset)
    records = list(walker)
    assert walker.end is WalkEnd.END_OF_DATA and walker.position == last.wrote_position
    cut = records[-1].commit_log_offset - last.file_from_offset + 10
    walker = RecordWalker(last.view, 0, cut, file_from_offset=last.file_from_offset)
    assert len(list(walker)) == len(records) - 1 and walker.end is WalkEnd.INCOMPLETE
    walker = RecordWalker(last.view, 0, last.file_size, file_from_offset=last.file_from_offset)
    assert len(list(walker)) == len(records) and walker.end is WalkEnd.INVALID   # zeros after the data
    # a record at the wrong place (a stale file name) is invalid
    walker = RecordWalker(last.view, 0, last.wrote_position, file_from_offset=last.file_from_offset + 1)
    assert list(walker) == [] and walker.end is WalkEnd.INVALID

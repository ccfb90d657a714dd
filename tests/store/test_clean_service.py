"""File expiry and the disk guard (store.md section 10): injected disk readings, clock and sleep."""

from __future__ import annotations

import logging
import os
import time

import pytest

from pyrmq.store.clean_service import (
    ConsumedBoundary,
    DiskRatios,
    disk_partition_used_ratio,
    is_it_time_to_do,
    setting_as_ratio,
)
from pyrmq.codec.store_formats import ext_undecorate
from pyrmq.store.message_store import GetMessageStatus, PutMessageStatus
from store_helpers import make_msg, open_store, small_config

HOUR_S = 3600
BODY = b"x" * 200   # ~330-byte records: about 12 per 4096-byte commit log file


class Disk:
    """An injected disk: the same used ratio for every path, changed by the test."""

    def __init__(self, ratio: float = 0.30) -> None:
        self.ratio = ratio
        self.paths: list[str] = []

    def __call__(self, path: str) -> float:
        self.paths.append(path)
        return self.ratio


@pytest.fixture
def disk():
    return Disk()


@pytest.fixture
def sleeps():
    return []


def _open(tmp_path, disk, sleeps, **overrides):
    store = open_store(small_config(tmp_path / "store", **overrides))
    clean = store.clean_service
    clean.disk_usage = disk
    clean.sleep = sleeps.append
    return store


@pytest.fixture
def store(tmp_path, disk, sleeps):
    s = _open(tmp_path, disk, sleeps)
    yield s
    s.shutdown()


def _fill(store, count=60, queues=2, keys=False):
    results = []
    for i in range(count):
        props = {"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:04d}"} if keys else None
        r = store.put_message(make_msg(queue_id=i % queues, body=BODY, props=props))
        assert r.is_ok()
        results.append(r.append_result)
    return results


def _files(store):
    return [mf.file_name for mf in store.commit_log.mapped_file_queue.mapped_files]


def _at(hours_later: float, store) -> float:
    """A clock reading ``hours_later`` after now, and deleteWhen set to its hour."""
    now = time.time() + hours_later * HOUR_S
    store.config.delete_when = f"{time.localtime(now).tm_hour:02d}"
    return now


def test_helpers():
    assert is_it_time_to_do("04", 4) and is_it_time_to_do("04;16", 16) and not is_it_time_to_do("04;16", 5)
    assert setting_as_ratio(0.9) == 0.9 and setting_as_ratio(90) == 0.9
    assert DiskRatios(0.951, 0.9, 0.5).describe() == "CL:  0.95 CQ:  0.90 INDEX:  0.50"


def test_disk_partition_used_ratio(tmp_path):
    ratio = disk_partition_used_ratio(str(tmp_path))
    st = os.statvfs(tmp_path)
    used = (st.f_blocks - st.f_bfree) / (st.f_blocks - st.f_bfree + st.f_bavail)
    assert 0 < ratio <= 1 and used <= ratio < used + 0.011   # rounded up to a percent, as Apache
    assert disk_partition_used_ratio(str(tmp_path / "missing")) == -1


def test_expired_files_deleted_at_delete_when_oldest_first_never_the_last(store, sleeps):
    _fill(store)
    names = _files(store)
    assert len(names) >= 5
    clean = store.clean_service
    # not old enough yet
    clean.clock = lambda: _at(0, store)
    assert clean.delete_expired_commit_log_files() == 0
    # old enough, but not the hour of deleteWhen and the disk is not full
    later = time.time() + 73 * HOUR_S
    store.config.delete_when = f"{(time.localtime(later).tm_hour + 1) % 24:02d}"
    clean.clock = lambda: later
    assert clean.delete_expired_commit_log_files() == 0
    assert _files(store) == names
    # the hour has come: every file but the last, oldest first, 100 ms apart
    now = _at(73, store)
    clean.clock = lambda: now
    assert clean.delete_expired_commit_log_files() == len(names) - 1
    assert _files(store) == names[-1:]
    assert sorted(os.listdir(store.config.commit_log_dir())) == names[-1:]
    assert sleeps == [0.1] * (len(names) - 2)
    assert store.get_min_phy_offset() == int(names[-1])
    assert store.put_message(make_msg(body=BODY)).is_ok()


def test_file_age_is_the_last_modified_time(store):
    _fill(store)
    names = _files(store)
    old = time.time() - 73 * HOUR_S
    for name in names[:2]:
        os.utime(os.path.join(store.config.commit_log_dir(), name), (old, old))
    clean = store.clean_service
    clean.clock = lambda: _at(0, store)
    assert clean.delete_expired_commit_log_files() == 2
    assert _files(store) == names[2:]


def test_batch_max(tmp_path, disk, sleeps):
    store = _open(tmp_path, disk, sleeps, delete_file_batch_max=2, delete_commit_log_files_interval=0)
    try:
        _fill(store)
        names = _files(store)
        now = _at(73, store)
        store.clean_service.clock = lambda: now
        assert store.clean_service.delete_expired_commit_log_files() == 2
        assert _files(store) == names[2:] and sleeps == []
    finally:
        store.shutdown()


def test_full_disk_deletes_outside_delete_when_and_forcibly_ignores_age(store, disk):
    _fill(store)
    names = _files(store)
    clean = store.clean_service
    store.config.delete_when = "99"   # never
    clean.clock = time.time
    disk.ratio = 0.80   # above diskMaxUsedSpaceRatio (75 %): expired files may go at any hour
    assert clean.delete_expired_commit_log_files() == 0   # none is 72 hours old
    disk.ratio = 0.86   # above diskSpaceCleanForciblyRatio: age no longer matters
    assert clean.delete_expired_commit_log_files() == len(names) - 1
    assert _files(store) == names[-1:]
    assert not clean.disk_full   # below the warning level writes go on


def test_clean_file_forcibly_disabled(tmp_path, disk, sleeps):
    store = _open(tmp_path, disk, sleeps, clean_file_forcibly_enable=False)
    try:
        _fill(store)
        store.config.delete_when = "99"
        disk.ratio = 0.86
        assert store.clean_service.delete_expired_commit_log_files() == 0
    finally:
        store.shutdown()


def test_disk_max_used_space_ratio_is_clamped(tmp_path, disk, sleeps):
    store = _open(tmp_path, disk, sleeps, disk_max_used_space_ratio=1)   # Apache: at least 10 %
    try:
        _fill(store)
        store.config.delete_when = "99"
        later = time.time() + 73 * HOUR_S
        store.clean_service.clock = lambda: later
        disk.ratio = 0.09
        assert store.clean_service.delete_expired_commit_log_files() == 0
        disk.ratio = 0.11
        assert store.clean_service.delete_expired_commit_log_files() > 0
    finally:
        store.shutdown()


def test_consume_queue_and_index_files_follow_and_min_offsets_move(tmp_path, disk, sleeps):
    store = _open(tmp_path, disk, sleeps, max_index_num=16)
    try:
        results = _fill(store, count=80, keys=True)
        store.retry_dispatch()   # the broker's tick: the keys waiting for their batch are indexed
        cq_dir = os.path.join(store.config.consume_queue_dir(), "TopicTest", "0")
        cq_files_before = sorted(os.listdir(cq_dir))
        index_before = sorted(os.listdir(store.config.index_dir()))
        assert len(cq_files_before) >= 3 and len(index_before) >= 3
        clean = store.clean_service
        now = _at(73, store)
        clean.clock = lambda: now
        clean.run()
        min_phy = store.get_min_phy_offset()
        assert min_phy == int(_files(store)[0]) > 0
        for queue_id in (0, 1):
            expected = min(r.logics_offset for i, r in enumerate(results)
                           if i % 2 == queue_id and r.wrote_offset >= min_phy)
            assert store.get_min_offset_in_queue("TopicTest", queue_id) == expected > 0
            below = store.get_message("g", "TopicTest", queue_id, 0, 32, None)
            assert below.status is GetMessageStatus.OFFSET_TOO_SMALL
            assert below.next_begin_offset == expected
            found = store.get_message("g", "TopicTest", queue_id, expected, 32, None)
            assert found.status is GetMessageStatus.FOUND
        cq = store.find_consume_queue("TopicTest", 0)
        cq_files_after = [mf.file_name for mf in cq.mapped_file_queue.mapped_files]
        assert cq_files_after == sorted(os.listdir(cq_dir))
        assert len(cq_files_after) < len(cq_files_before) and cq_files_after[-1] == cq_files_before[-1]
        # every remaining file but the last still points at records in the commit log
        first_unit_file = cq.mapped_file_queue.mapped_files[0]
        assert first_unit_file.file_from_offset <= cq.min_logic_offset
        index_after = [f.file_name for f in store.index_service.index_files]
        assert index_after == sorted(os.listdir(store.config.index_dir()))
        assert index_after[-1] == index_before[-1] and len(index_after) < len(index_before)
        assert all(f.end_phy_offset >= min_phy for f in store.index_service.index_files[:-1])
        # a key of a deleted message is gone, a recent one is still found
        assert not store.query_message("TopicTest", "k0", 32, 0, 2**62).buffers
        assert len(store.query_message("TopicTest", "k79", 32, 0, 2**62).buffers) == 1
        assert sleeps.count(0.1) >= 2   # deleteConsumeQueueFilesInterval after each queue
    finally:
        store.shutdown()


def test_store_reopens_after_deletion(tmp_path, disk, sleeps):
    store = _open(tmp_path, disk, sleeps)
    _fill(store)
    now = _at(73, store)
    store.clean_service.clock = lambda: now
    store.clean_service.run()
    min_phy = store.get_min_phy_offset()
    min_q0 = store.get_min_offset_in_queue("TopicTest", 0)
    max_q0 = store.get_max_offset_in_queue("TopicTest", 0)
    store.shutdown()
    store = open_store(small_config(tmp_path / "store"))
    try:
        assert store.get_min_phy_offset() == min_phy
        assert store.get_min_offset_in_queue("TopicTest", 0) == min_q0
        assert store.get_max_offset_in_queue("TopicTest", 0) == max_q0
    finally:
        store.shutdown()


def test_disk_guard_refuses_writes_and_accepts_again_without_restart(store, disk):
    clean = store.clean_service
    disk.ratio = 0.91   # above diskSpaceWarningLevelRatio (90 %)
    assert clean.check_disk_space() is True
    r = store.put_message(make_msg())
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert clean.disk_ratios.describe() == "CL:  0.91 CQ:  0.91 INDEX:  0.91"
    disk.ratio = 0.50
    assert clean.check_disk_space() is False
    assert store.put_message(make_msg()).is_ok()


def test_disk_guard_set_by_the_clean_round_too(store, disk):
    disk.ratio = 0.95
    store.config.delete_when = "99"
    store.clean_service.run()
    assert store.put_message(make_msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    disk.ratio = 0.2
    store.clean_service.run()
    assert store.put_message(make_msg()).is_ok()


def test_warning_level_as_a_percent_or_a_ratio(tmp_path, disk, sleeps):
    for value in (0.5, 50):
        store = _open(tmp_path / str(value), disk, sleeps, disk_space_warning_level_ratio=value)
        try:
            disk.ratio = 0.6
            assert store.clean_service.check_disk_space() is True
        finally:
            store.shutdown()


def test_delete_only_consumed_keeps_the_file_of_an_unconsumed_message(tmp_path, disk, sleeps, caplog):
    store = _open(tmp_path, disk, sleeps, delete_only_consumed=True)
    try:
        results = _fill(store)
        names = _files(store)
        # group G has consumed queue 1 up to a message in the third file
        held = next(r for r in results if int(names[2]) <= r.wrote_offset < int(names[3]))
        boundary = ConsumedBoundary(held.wrote_offset, "G", "TopicTest", 1, held.logics_offset)
        store.clean_service.consumed_boundary = lambda: boundary
        now = _at(73, store)
        store.clean_service.clock = lambda: now
        with caplog.at_level(logging.WARNING, logger="pyrmq.store.clean_service"):
            assert store.clean_service.delete_expired_commit_log_files() == 2
            assert store.clean_service.delete_expired_commit_log_files() == 0
        assert _files(store) == names[2:]
        held_logs = [r.getMessage() for r in caplog.records if "deleteOnlyConsumed" in r.getMessage()]
        assert len(held_logs) == 1   # once, not every round
        assert "group G" in held_logs[0] and "TopicTest queue 1" in held_logs[0] and names[2] in held_logs[0]
        # even a full disk does not delete it: the guard refuses writes instead
        disk.ratio = 0.99
        assert store.clean_service.delete_expired_commit_log_files() == 0
        assert store.put_message(make_msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        store.clean_service.consumed_boundary = lambda: None   # everything consumed
        assert store.clean_service.delete_expired_commit_log_files() == len(names) - 3
    finally:
        store.shutdown()


def test_delete_only_consumed_off_ignores_the_boundary(store):
    _fill(store)
    names = _files(store)
    store.clean_service.consumed_boundary = lambda: ConsumedBoundary(0, "G", "TopicTest", 0, 0)
    now = _at(73, store)
    store.clean_service.clock = lambda: now
    assert store.clean_service.delete_expired_commit_log_files() == len(names) - 1


def test_file_read_while_deleted_is_unmapped_later(store):
    _fill(store)
    names = _files(store)
    first = store.commit_log.mapped_file_queue.mapped_files[0]
    pulled = store.get_message("g", "TopicTest", 0, 0, 1, None)   # a view into the first file
    assert pulled.status is GetMessageStatus.FOUND
    clean = store.clean_service
    now = _at(73, store)
    clean.clock = lambda: now
    assert clean.delete_expired_commit_log_files() == len(names) - 1
    assert not os.path.exists(first.path)
    assert clean.hanged_files == [first.path] and first.mapped
    assert bytes(pulled.buffers[0][:4])   # the reader's view still works
    assert first.select(0, 4) is None     # new reads of the deleted file find nothing
    clean.redelete_hanged_files()
    assert clean.hanged_files == [first.path]
    pulled.buffers.clear()
    del pulled
    store.config.redelete_hanged_file_interval = 0
    clean.redelete_hanged_files()
    assert clean.hanged_files == [] and not first.mapped


def test_hanged_file_given_up_after_the_forcible_interval(store, caplog):
    _fill(store)
    pulled = store.get_message("g", "TopicTest", 0, 0, 1, None)
    clean = store.clean_service
    now = _at(73, store)
    clean.clock = lambda: now
    clean.delete_expired_commit_log_files()
    assert len(clean.hanged_files) == 1
    clean.clock = lambda: now + 121
    with caplog.at_level(logging.WARNING, logger="pyrmq.store.clean_service"):
        clean.redelete_hanged_files()
    assert clean.hanged_files == [] and "still has readers" in caplog.text
    assert pulled.buffers


def test_a_failing_step_does_not_stop_the_round(store, caplog, monkeypatch):
    _fill(store)

    def boom():
        raise OSError("disk on fire")

    monkeypatch.setattr(store.clean_service, "delete_expired_commit_log_files", boom)
    with caplog.at_level(logging.ERROR, logger="pyrmq.store.clean_service"):
        store.clean_service.run()
    assert "disk on fire" in caplog.text


def test_a_file_not_dispatched_yet_is_kept(store):
    _fill(store)
    names = _files(store)
    store.reput.reput_from_offset = int(names[2]) + 10   # as a lagging reput (slave) would be
    now = _at(73, store)
    store.clean_service.clock = lambda: now
    assert store.clean_service.delete_expired_commit_log_files() == 2
    assert _files(store) == names[2:]


def test_consume_queue_ext_files_follow_their_queue(tmp_path, disk, sleeps):
    """Apache's correctMinOffset truncates the ext by the first unit's address: ext files wholly
    before it go with the queue files (never the last one)."""
    store = _open(tmp_path, disk, sleeps, enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=100)
    try:
        _fill(store, count=80)
        cq = store.find_consume_queue("TopicTest", 0)
        ext_queue = cq.ext.mapped_file_queue
        before = [mf.file_from_offset for mf in ext_queue.mapped_files]
        assert len(before) > 3
        clean = store.clean_service
        now = _at(73, store)
        clean.clock = lambda: now
        clean.run()
        first_address = cq.get_unit(cq.get_min_offset_in_queue())[2]
        after = [mf.file_from_offset for mf in ext_queue.mapped_files]
        assert len(after) < len(before) and after[-1] == before[-1]
        # the first file left is the first whose end is not before the queue's first ext unit
        assert after[0] <= ext_undecorate(first_address) <= after[0] + 100
        assert sorted(os.listdir(ext_queue.store_path)) == [mf.file_name for mf in ext_queue.mapped_files]
        found = store.get_message("g", "TopicTest", 0, cq.get_min_offset_in_queue(), 32, None)
        assert found.status is GetMessageStatus.FOUND
    finally:
        store.shutdown()

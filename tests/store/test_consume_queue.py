"""ConsumeQueue: units, file roll-over, pre-blank fill, duplicates, truncation, time search."""

from __future__ import annotations

import os
import struct

from pyrmq.codec.store_formats import CQ_UNIT
from pyrmq.store.consume_queue import ConsumeQueue

UNITS_PER_FILE = 5


def new_cq(tmp_path, topic="T", queue_id=0) -> ConsumeQueue:
    cq = ConsumeQueue(topic, queue_id, str(tmp_path / "consumequeue"), 20 * UNITS_PER_FILE)
    cq.load()
    return cq


def reopen(cq: ConsumeQueue, tmp_path) -> ConsumeQueue:
    cq.close()
    again = new_cq(tmp_path, cq.topic, cq.queue_id)
    again.recover()
    return again


def test_units_and_file_roll_over(tmp_path):
    cq = new_cq(tmp_path)
    for i in range(12):
        assert cq.put_unit(1000 + i * 100, 100, -i, i)
    d = tmp_path / "consumequeue" / "T" / "0"
    assert sorted(os.listdir(d)) == ["00000000000000000000", "00000000000000000100",
                                     "00000000000000000200"]
    assert cq.get_max_offset_in_queue() == 12 and cq.get_min_offset_in_queue() == 0
    raw = (d / "00000000000000000100").read_bytes()
    assert raw[:20] == struct.pack(">qiq", 1500, 100, -5)
    assert list(cq.iter_units(3, 4)) == [(1000 + i * 100, 100, -i) for i in range(3, 7)]
    assert len(list(cq.iter_units(0))) == 12
    buf = cq.get_index_buffer(6)
    assert isinstance(buf, memoryview) and len(buf) == 4 * 20  # to the end of that file
    assert cq.get_index_buffer(12) is not None and len(cq.get_index_buffer(12)) == 0
    assert cq.roll_next_file(6) == 10
    assert cq.last_unit() == (2100, 100, -11)
    cq = reopen(cq, tmp_path)
    assert cq.get_max_offset_in_queue() == 12 and cq.max_physic_offset == 2200
    assert cq.put_unit(2200, 50, 0, 12)
    assert cq.get_max_offset_in_queue() == 13
    cq.close()


def test_duplicate_units_are_ignored(tmp_path):
    cq = new_cq(tmp_path)
    for i in range(3):
        cq.put_unit(i * 100, 100, 0, i)
    assert cq.put_unit(100, 100, 0, 1)  # already built
    assert cq.put_unit(250, 10, 0, 1)  # logical position below the write position
    assert cq.get_max_offset_in_queue() == 3
    cq.close()


def test_pre_blank_fill_for_a_recreated_queue(tmp_path):
    cq = new_cq(tmp_path)
    cq.put_unit(5000, 100, 7, 7)  # first unit ever is logical offset 7 (second file)
    d = tmp_path / "consumequeue" / "T" / "0"
    assert sorted(os.listdir(d)) == ["00000000000000000100"]
    raw = (d / "00000000000000000100").read_bytes()
    assert raw[:40] == CQ_UNIT.pack(0, 0x7FFFFFFF, 0) * 2
    assert raw[40:60] == CQ_UNIT.pack(5000, 100, 7)
    assert cq.get_min_offset_in_queue() == 7 and cq.get_max_offset_in_queue() == 8
    assert cq.get_index_buffer(6) is None
    assert cq.get_unit(7) == (5000, 100, 7)
    cq.close()


def test_truncate_dirty_logic_files(tmp_path):
    cq = new_cq(tmp_path)
    for i in range(12):
        cq.put_unit(i * 100, 100, 0, i)
    cq.truncate_dirty_logic_files(650)  # units at 700.. go
    assert cq.get_max_offset_in_queue() == 7
    assert sorted(os.listdir(tmp_path / "consumequeue" / "T" / "0")) == [
        "00000000000000000000", "00000000000000000100"]
    assert cq.max_physic_offset == 700
    # stale units were zeroed: a restart does not bring them back
    cq.put_unit(700, 30, 0, 7)
    cq = reopen(cq, tmp_path)
    assert cq.get_max_offset_in_queue() == 8
    cq.truncate_dirty_logic_files(0)
    assert cq.get_max_offset_in_queue() == 0
    cq.close()


def test_correct_min_offset(tmp_path):
    cq = new_cq(tmp_path)
    for i in range(4):
        cq.put_unit(i * 100, 100, 0, i)
    cq.correct_min_offset(200)
    assert cq.get_min_offset_in_queue() == 2
    # no unit of the first file is still in the commit log: unchanged, as Apache's correctMinOffset
    cq.correct_min_offset(10_000)
    assert cq.get_min_offset_in_queue() == 2
    cq.close()


def test_offset_by_time_binary_search(tmp_path):
    cq = ConsumeQueue("T", 0, str(tmp_path / "cq"), 20 * 1000)
    times = {}
    for i in range(100):
        cq.put_unit(i * 100, 100, 0, i)
        times[i * 100] = 1_000_000 + i * 10  # store time of each record

    def pick(offset, size):
        return times.get(offset, -1)

    search = lambda ts: cq.get_offset_in_queue_by_time(ts, pick, 0)  # noqa: E731
    assert search(1_000_000) == 0
    assert search(1_000_500) == 50
    assert search(1_000_503) == 50  # nearer to the smaller neighbour
    assert search(1_000_507) == 51
    assert search(1_000_505) == 50  # tie goes to the smaller
    assert search(0) == 0
    assert search(10**12) == 99
    assert cq.get_offset_in_queue_by_time(1_000_000, pick, 1000) == 10  # below min phy skipped
    cq.close()

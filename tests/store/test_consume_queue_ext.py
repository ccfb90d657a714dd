"""ConsumeQueueExt (store.md section 4.5): unit layout, addresses, the full-file marker, the
consume queue's tagsCode pointing at it, recovery and truncation kept with the consume queue."""

from __future__ import annotations

import os

import pytest

from pyrmq.codec import store_formats as sf
from pyrmq.codec.message import record_properties_string, tags_string_to_tags_code
from pyrmq.store.consume_queue_ext import ConsumeQueueExt
from pyrmq.store.message_store import GetMessageStatus
from store_helpers import make_msg, open_store, small_config

BITS = bytes(range(1, 15))   # a 112-bit map
UNIT = sf.CQ_EXT_MIN_UNIT_SIZE + len(BITS)   # 34


def test_unit_layout_and_struct_agree():
    data = (b"\x00\x22" + (-7).to_bytes(8, "big", signed=True) + (1_700_000_000_123).to_bytes(8, "big")
            + b"\x00\x0e" + BITS)
    obj = dict(size=34, tags_code=-7, msg_store_time=1_700_000_000_123, bit_map_size=14, filter_bit_map=BITS)
    assert sf.ConsumeQueueExtUnit.parse(data) == sf.ConsumeQueueExtUnit.parse(sf.ConsumeQueueExtUnit.build(obj))
    assert sf.ConsumeQueueExtUnit.build(obj) == data
    assert sf.ConsumeQueueExtUnit.compile().build(obj) == data
    assert sf.CQ_EXT_UNIT_HEAD.pack(34, -7, 1_700_000_000_123, 14) + BITS == data
    assert sf.CQ_EXT_UNIT_HEAD.size == sf.CQ_EXT_MIN_UNIT_SIZE == 20


def test_addresses():
    assert sf.ext_decorate(0) == -(1 << 63)
    assert sf.ext_undecorate(sf.ext_decorate(4096)) == 4096
    assert sf.is_ext_addr(sf.ext_decorate(sf.CQ_EXT_MAX_REAL_OFFSET))
    assert not sf.is_ext_addr(-(1 << 31))   # the lowest sign-extended int32 tags code
    assert sf.is_ext_addr(-(1 << 31) - 1)
    assert sf.ext_undecorate(12345) == 12345 and sf.ext_decorate(sf.ext_decorate(8)) == sf.ext_decorate(8)


def _ext(tmp_path, size=100):
    return ConsumeQueueExt("TopicTest", 0, str(tmp_path / "consumequeue_ext"), size)


def test_put_get_and_full_file_marker(tmp_path):
    ext = _ext(tmp_path)
    a = ext.put(11, 1000, BITS)
    b = ext.put(22, 2000, None)
    # 34 + 20 = 54 written; 100 - 54 - 4 = 42 left, so a 34-byte unit still fits
    c = ext.put(33, 3000, BITS)
    # 88 written: 8 left minus the 4 kept free -- the next unit goes to a new file after a -1
    d = ext.put(44, 4000, BITS)
    assert [sf.ext_undecorate(x) for x in (a, b, c, d)] == [0, 34, 54, 100]
    assert ext.get(a).filter_bit_map == BITS and ext.get(a).tags_code == 11 and ext.get(a).msg_store_time == 1000
    assert ext.get(b).filter_bit_map is None and ext.get(b).size == 20
    assert ext.get(d).tags_code == 44
    assert ext.get_tags_code(c) == 33 and ext.get_tags_code(-5) == -5
    first = tmp_path / "consumequeue_ext" / "TopicTest" / "0" / ("0" * 20)
    raw = first.read_bytes()
    assert len(raw) == 100 and raw[88:90] == b"\xff\xff"
    assert raw[0:34] == sf.ConsumeQueueExtUnit.build(
        dict(size=34, tags_code=11, msg_store_time=1000, bit_map_size=14, filter_bit_map=BITS))
    assert sorted(os.listdir(first.parent)) == ["0" * 20, "0" * 17 + "100"]
    assert ext.get(sf.ext_decorate(88)) is None and ext.get(sf.ext_decorate(5000)) is None
    ext.close()


def test_oversized_unit_is_refused(tmp_path):
    ext = _ext(tmp_path, size=64 * 1024)
    assert ext.put(1, 1, b"\x01" * (sf.CQ_EXT_MAX_UNIT_SIZE - 19)) is None
    assert ext.puts_failed == 1
    ext.close()


def test_recover_walks_the_last_file_or_truncates_at_the_max_address(tmp_path):
    ext = _ext(tmp_path)
    addresses = [ext.put(i, i, BITS) for i in range(5)]   # 0, 34 | -1 at 68 | 100, 134 | -1 | 200
    assert [sf.ext_undecorate(a) for a in addresses] == [0, 34, 100, 134, 200]
    ext.close()
    again = _ext(tmp_path)
    again.load()
    again.recover(None)
    assert again.mapped_file_queue.max_offset() == 234
    assert again.put(9, 9, BITS) == sf.ext_decorate(234)
    again.close()
    third = _ext(tmp_path)
    third.load()
    third.recover(addresses[1])   # the consume queue ends with the second unit
    assert third.mapped_file_queue.max_offset() == 68
    assert len(third.mapped_file_queue.mapped_files) == 1
    raw = (tmp_path / "consumequeue_ext" / "TopicTest" / "0" / ("0" * 20)).read_bytes()
    assert raw[68:] == bytes(32)   # the -1 marker and beyond are gone: the file is written on
    assert third.put(7, 7, None) == sf.ext_decorate(68)   # 20 bytes fit before the 4 kept free
    third.close()


def test_truncate_by_min_address_deletes_whole_files_before_it(tmp_path):
    ext = _ext(tmp_path)
    addresses = [ext.put(i, i, BITS) for i in range(7)]   # two a file: files at 0, 100, 200, 300
    assert [f.file_from_offset for f in ext.mapped_file_queue.mapped_files] == [0, 100, 200, 300]
    assert ext.truncate_by_min_address(addresses[2]) == []   # unit at 100: file 0 ends at 100, kept
    deleted = ext.truncate_by_min_address(addresses[4])   # unit at 200
    assert [f.file_from_offset for f in deleted] == [0]
    assert ext.get(addresses[0]) is None and ext.get(addresses[4]).tags_code == 4
    ext.close()


# ------------------------------------------------------------------ with the store


def _config(tmp_path, **kw):
    return small_config(tmp_path / "store", enable_consume_queue_ext=True,
                        mapped_file_size_consume_queue_ext=4096, **kw)


def test_store_writes_ext_units_and_cq_tags_codes_address_them(tmp_path):
    config = _config(tmp_path)
    store = open_store(config)
    store.set_bit_map_source(lambda r: BITS if r.queue_offset % 2 else None)
    for i in range(6):
        assert store.put_message(make_msg(tags=f"Tag{i % 2}")).is_ok()
    cq = store.find_consume_queue("TopicTest", 0)
    units = list(cq.iter_units(0))
    assert all(sf.is_ext_addr(t) for _, _, t in units)
    assert [cq.real_tags_code(t) for _, _, t in units] == [tags_string_to_tags_code(f"Tag{i % 2}") for i in range(6)]
    bitmaps = [cq.ext.get(t).filter_bit_map for _, _, t in units]
    assert bitmaps == [None, BITS] * 3
    assert os.path.isdir(os.path.join(config.consume_queue_ext_dir(), "TopicTest", "0"))

    class TagFilter:
        def is_matched_by_consume_queue(self, tags_code, ext_unit=None):
            return tags_code == tags_string_to_tags_code("Tag1")

        def is_matched_by_commit_log(self, record):
            return True

    r = store.get_message("g", "TopicTest", 0, 0, 32, TagFilter())
    assert r.status is GetMessageStatus.FOUND and r.message_count == 3
    store.shutdown()

    # a clean restart keeps both, and writing goes on after the last ext unit
    store = open_store(config)
    cq = store.find_consume_queue("TopicTest", 0)
    assert cq.real_tags_code(cq.last_unit()[2]) == tags_string_to_tags_code("Tag1")
    end = cq.ext.mapped_file_queue.max_offset()
    assert store.put_message(make_msg(tags="TagZ")).is_ok()
    assert cq.last_unit()[2] == sf.ext_decorate(end)
    store.delete_topics({"TopicTest"})
    assert not os.path.exists(os.path.join(config.consume_queue_ext_dir(), "TopicTest"))
    store.shutdown()


def test_truncated_commit_log_truncates_the_ext_with_the_queue(tmp_path):
    config = _config(tmp_path)
    store = open_store(config)
    results = [store.put_message(make_msg(body=b"x" * 50)).append_result for _ in range(6)]
    cq = store.find_consume_queue("TopicTest", 0)
    third_unit_address = list(cq.iter_units(0))[2][2]
    store.shutdown()
    # the commit log loses its last three records (a torn tail): queue and ext follow
    cut = results[3].wrote_offset
    path = os.path.join(config.commit_log_dir(), "0" * 20)
    with open(path, "r+b") as f:
        f.seek(cut)
        f.write(b"\x00" * 16)
    store = open_store(config)
    cq = store.find_consume_queue("TopicTest", 0)
    assert cq.get_max_offset_in_queue() == 3
    ext_end = sf.ext_undecorate(third_unit_address) + sf.CQ_EXT_MIN_UNIT_SIZE
    assert cq.ext.mapped_file_queue.max_offset() == ext_end
    assert store.put_message(make_msg()).is_ok()
    assert cq.last_unit()[2] == sf.ext_decorate(ext_end)
    store.shutdown()


def test_ext_off_writes_no_ext_and_keeps_plain_tags_codes(tmp_path):
    config = small_config(tmp_path / "store")
    store = open_store(config)
    assert store.put_message(make_msg(tags="TagA")).is_ok()
    cq = store.find_consume_queue("TopicTest", 0)
    assert cq.ext is None and cq.last_unit()[2] == tags_string_to_tags_code("TagA")
    assert not os.path.exists(config.consume_queue_ext_dir())
    store.shutdown()


@pytest.mark.parametrize("crash", [False, True])
def test_restart_recovers_ext_end(tmp_path, crash):
    config = _config(tmp_path)
    store = open_store(config)
    for _ in range(4):
        assert store.put_message(make_msg()).is_ok()
    cq = store.find_consume_queue("TopicTest", 0)
    end = cq.ext.mapped_file_queue.max_offset()
    # a unit the ext got but the queue never did (a crash between the two writes)
    cq.ext.put(1, 1, BITS)
    store.flush_consume_queues()
    store.flush_commit_log()
    if crash:
        store._close_files()   # as a kill: no clean shutdown, the abort file stays
        store._lock.release()
    else:
        store.shutdown()
    store = open_store(config)
    cq = store.find_consume_queue("TopicTest", 0)
    assert cq.ext.mapped_file_queue.max_offset() == end
    store.shutdown()


def test_ext_addresses_left_by_an_ext_store_pass_the_cq_stage_when_ext_is_off(tmp_path):
    """Apache's getMessage: an ext address whose unit cannot be read is no tags code; the unit goes
    on to the record stage instead of being dropped by a tag filter."""
    config = _config(tmp_path)
    store = open_store(config)
    for tag in ("TagA", "TagB", "TagA"):
        assert store.put_message(make_msg(tags=tag)).is_ok()
    store.shutdown()
    config.enable_consume_queue_ext = False
    store = open_store(config)
    code = tags_string_to_tags_code("TagA")

    class TagFilter:
        def __init__(self):
            self.records = 0

        def is_matched_by_consume_queue(self, tags_code, ext_unit=None):
            return tags_code == code

        def is_matched_by_commit_log(self, record):
            self.records += 1
            return record_properties_string(record).find("TagA") >= 0

    f = TagFilter()
    r = store.get_message("g", "TopicTest", 0, 0, 32, f)
    assert r.status is GetMessageStatus.FOUND and r.message_count == 2 and f.records == 3
    store.shutdown()

"""Tests for pyrmq.codec.store_formats: construct declarations vs struct fast paths."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from construct_helpers import common
from pyrmq.codec import store_formats as sf

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


def test_cq_unit_golden():
    data = struct.pack(">q", 4096) + struct.pack(">i", 200) + struct.pack(">q", -1)
    common(sf.ConsumeQueueUnit, data, dict(commit_log_offset=4096, size=200, tags_code=-1), 20)
    assert sf.CQ_UNIT.pack(4096, 200, -1) == data
    assert sf.CQ_UNIT.size == sf.CQ_STORE_UNIT_SIZE


@given(i64, i32, i64)
def test_cq_unit_agreement(offset, size, tags):
    obj = dict(commit_log_offset=offset, size=size, tags_code=tags)
    data = sf.CQ_UNIT.pack(offset, size, tags)
    assert sf.ConsumeQueueUnit.build(obj) == data
    assert sf.CQ_UNIT.unpack(sf.ConsumeQueueUnit.build(obj)) == (offset, size, tags)


def test_checkpoint_layout():
    data = sf.CHECKPOINT_4X.pack(1, 2, 3) + bytes(4096 - 24)
    obj = dict(physic_msg_timestamp=1, logics_msg_timestamp=2, index_msg_timestamp=3,
               master_flushed_offset=0, confirm_phy_offset=0)
    common(sf.Checkpoint, data, obj, sf.CHECKPOINT_FILE_SIZE)
    assert sf.CHECKPOINT_5X.unpack_from(data) == (1, 2, 3, 0, 0)
    assert sf.checkpoint_min_timestamp(10_000, 5_000) == 2_000
    assert sf.checkpoint_min_timestamp(1_000, 5_000) == 0


@given(i64, i64, i64, i64, i32, i32)
def test_index_header_agreement(a, b, c, d, e, f):
    data = sf.INDEX_HEADER.pack(a, b, c, d, e, f)
    obj = dict(begin_timestamp=a, end_timestamp=b, begin_phy_offset=c, end_phy_offset=d,
               hash_slot_count=e, index_count=f)
    assert sf.IndexHeader.build(obj) == data
    assert sf.IndexHeader.sizeof() == sf.INDEX_HEADER_SIZE == len(data)


@given(i32, i64, i32, i32)
def test_index_item_agreement(a, b, c, d):
    data = sf.INDEX_ITEM.pack(a, b, c, d)
    obj = dict(key_hash=a, commit_log_offset=b, time_diff=c, prev_index=d)
    assert sf.IndexItem.build(obj) == data
    assert sf.IndexItem.sizeof() == sf.INDEX_ITEM_SIZE


def test_index_golden():
    header = sf.INDEX_HEADER.pack(1, 2, 3, 4, 5, 1)
    common(sf.IndexHeader, header, dict(begin_timestamp=1, end_timestamp=2, begin_phy_offset=3,
                                        end_phy_offset=4, hash_slot_count=5, index_count=1), 40)
    common(sf.IndexSlot, struct.pack(">i", 9), dict(item_index=9), 4)
    common(sf.IndexItem, sf.INDEX_ITEM.pack(-7, 100, 3, 2),
           dict(key_hash=-7, commit_log_offset=100, time_diff=3, prev_index=2), 20)
    assert sf.index_file_size() == 420_000_040
    assert sf.index_slot_position(1) == 44
    assert sf.index_item_position(0) == 40 + 5_000_000 * 4

"""StoreCheckpoint: 4096-byte file, three 4.x timestamps, 5.x fields preserved."""

from __future__ import annotations

import struct

from pyrmq.store.checkpoint import StoreCheckpoint


def test_new_checkpoint_is_one_zero_page(tmp_path):
    cp = StoreCheckpoint(str(tmp_path / "checkpoint"))
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (0, 0, 0)
    assert cp.min_timestamp() == 0
    cp.close()
    assert (tmp_path / "checkpoint").read_bytes() == bytes(4096)


def test_round_trip_and_5x_fields_untouched(tmp_path):
    path = tmp_path / "checkpoint"
    path.write_bytes(struct.pack(">qqqqq", 10_000, 20_000, 5_000, 777, 888) + bytes(4096 - 40))
    cp = StoreCheckpoint(str(path))
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (10_000, 20_000, 5_000)
    assert cp.min_timestamp() == 7_000 and cp.min_timestamp_index() == 5_000
    cp.physic_msg_timestamp = 30_000
    cp.flush()
    cp.close()
    assert struct.unpack_from(">qqqqq", path.read_bytes()) == (30_000, 20_000, 5_000, 777, 888)

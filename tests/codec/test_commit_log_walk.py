"""RecordWalker.skip_all -- recovery's scan for the end of valid data -- stops where walking the
records does, for the same reason, whatever the bytes after the last good record are."""

from __future__ import annotations

import pytest

from pyrmq.codec.commit_log_walk import RecordWalker, WalkEnd
from pyrmq.codec.message import encode_message_record_bytes


def _records(count: int) -> bytearray:
    buf = bytearray()
    for i in range(count):
        buf += encode_message_record_bytes(
            queue_offset=i, physical_offset=len(buf), store_timestamp=1, topic="TopicWalk", queue_id=i % 4,
            flag=0, body=b"body %d" % i, properties="TAGS\x01TagA\x02KEYS\x01k", sys_flag=0, born_timestamp=1,
            born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 2))
    return buf


def _damaged(kind: str) -> tuple[bytearray, int]:
    """Five records, the fourth damaged as ``kind``; returns the bytes and where the fourth starts."""
    buf = _records(5)
    fourth = len(_records(3))
    if kind == "body crc":
        body_at = buf.index(b"body 3", fourth)
        buf[body_at] ^= 0xFF
    elif kind == "torn tail":
        del buf[fourth + 40:]
        buf += bytes(200)
    elif kind == "zeros":
        buf[fourth:] = bytes(len(buf) - fourth)
    elif kind == "blank record":
        buf[fourth + 4:fourth + 8] = (0xCBD43194).to_bytes(4, "big", signed=False)
    elif kind == "stale offset":
        buf[fourth:] = _records(5)[len(_records(2)):len(_records(3))] + bytes(8)
    return buf, fourth


@pytest.mark.parametrize("kind", ["none", "body crc", "torn tail", "zeros", "blank record", "stale offset"])
@pytest.mark.parametrize("check_crc", [True, False])
def test_skip_all_stops_where_the_walk_stops(kind, check_crc):
    buf, fourth = _damaged(kind)
    walker = RecordWalker(bytes(buf), 0, len(buf), check_crc=check_crc)
    walked = list(walker)
    skipper = RecordWalker(bytes(buf), 0, len(buf), check_crc=check_crc)
    skipper.skip_all()
    assert (skipper.end, skipper.position) == (walker.end, walker.position)
    if kind == "none" or (kind == "body crc" and not check_crc):
        assert (walker.end, len(walked)) == (WalkEnd.END_OF_DATA, 5)
    else:
        assert (walker.position, len(walked)) == (fourth, 3)
        assert walker.end is (WalkEnd.END_OF_FILE if kind == "blank record" else WalkEnd.INVALID)

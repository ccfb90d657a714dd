"""The timer store's files (pyrmq's own format, docs/MESSAGING.md "Timer messages"): timer log
unit, timing wheel slot and timer checkpoint, all fixed-size and big-endian.

Apache 5 keeps the same three structures (``timerlog/``, ``timerwheel``, ``config/timercheck``)
in its own layouts; pyrmq writes its files under ``pyrmq-timer/`` so that neither broker reads the
other's.  Each layout is declared with construct and mirrored by a ``struct.Struct`` for the per-
message code; tests prove the two agree.

Sans-I/O: no files, no sockets, no trio.
"""

from __future__ import annotations

import struct
import zlib

from construct import Int32sb, Int32ub, Int64sb, Padding, Struct

# --------------------------------------------------------------------------------------------
# Timer log unit: one per message taken into the wheel (or delivered at once because it was due)
# --------------------------------------------------------------------------------------------

TIMER_LOG_MAGIC = 0x544D4C31   # "TML1"
TIMER_FLAG_DELETE = 1   # a recall marker (TIMER_DEL_UNIQKEY): cancels a message of its slot
TIMER_FLAG_IMMEDIATE = 2   # was already due when taken in: delivered at once, not in the wheel

TimerLogUnit = Struct(
    "magic" / Int32ub,
    "flags" / Int32sb,
    "prev_pos" / Int64sb,   # the slot's previous unit (a chain newest -> oldest), -1 at its end
    "deliver_ms" / Int64sb,   # TIMER_OUT_MS: the slot this unit is in
    "enqueue_ms" / Int64sb,   # the wheel's write time when it was taken in (TIMER_ENQUEUE_MS)
    "commit_log_offset" / Int64sb,
    "size" / Int32sb,
    "queue_offset" / Int64sb,   # its unit in the rmq_sys_wheel_timer consume queue
    "crc" / Int32ub,   # crc32 of the bytes before it: a torn or stale unit is not valid
)
TIMER_LOG_UNIT = struct.Struct(">Iiqqqqiq")   # without the crc
TIMER_LOG_UNIT_SIZE = TIMER_LOG_UNIT.size + 4
_CRC = struct.Struct(">I")


def pack_timer_log_unit(flags: int, prev_pos: int, deliver_ms: int, enqueue_ms: int,
                        commit_log_offset: int, size: int, queue_offset: int) -> bytes:
    head = TIMER_LOG_UNIT.pack(TIMER_LOG_MAGIC, flags, prev_pos, deliver_ms, enqueue_ms,
                               commit_log_offset, size, queue_offset)
    return head + _CRC.pack(zlib.crc32(head))


def unpack_timer_log_unit(buf: bytes | memoryview, pos: int = 0) -> tuple[int, int, int, int, int, int, int] | None:
    """``(flags, prev_pos, deliver_ms, enqueue_ms, commit_log_offset, size, queue_offset)``, or
    None when the bytes at ``pos`` are not a whole valid unit (zeros, torn, stale)."""
    end = pos + TIMER_LOG_UNIT.size
    if len(buf) < end + 4:
        return None
    head = buf[pos:end]
    if _CRC.unpack_from(buf, end)[0] != zlib.crc32(head):
        return None
    magic, *fields = TIMER_LOG_UNIT.unpack(head)
    if magic != TIMER_LOG_MAGIC:
        return None
    return tuple(fields)


# --------------------------------------------------------------------------------------------
# Timing wheel slot: the head of the chain of units due in one precision interval
# --------------------------------------------------------------------------------------------

TimerSlot = Struct(
    "time_ms" / Int64sb,   # the slot's time; -1 (or another time) means nothing is pending here
    "last_pos" / Int64sb,   # the newest unit of the chain
    "num" / Int32sb,   # units in the chain
    "reserved" / Int32sb,
)
TIMER_SLOT = struct.Struct(">qqii")
TIMER_SLOT_SIZE = TIMER_SLOT.size
EMPTY_SLOT = TIMER_SLOT.pack(-1, -1, 0, 0)

# --------------------------------------------------------------------------------------------
# Timer checkpoint: one page, updated in place through a mapping
# --------------------------------------------------------------------------------------------

TIMER_CHECKPOINT_MAGIC = 0x544D4331   # "TMC1"
TIMER_CHECKPOINT_SIZE = 4096

TimerCheckpointLayout = Struct(
    "magic" / Int32ub,
    "precision_ms" / Int32sb,   # the wheel's geometry: another one means the wheel is rebuilt
    "slots" / Int64sb,
    # written by the flusher after the log and the wheel were synced: durable together
    "flushed_log_pos" / Int64sb,   # every timer log unit below it is on disk, linked in the wheel
    "flushed_queue_offset" / Int64sb,   # the consume queue units taken in as of flushed_log_pos
    # written by the dequeue side as it goes (kept by the page cache through a kill -9)
    "read_time_ms" / Int64sb,   # every slot before it was delivered
    "delivering_ms" / Int64sb,   # the slot being delivered, -1 when none
    "delivered_in_slot" / Int64sb,   # how many units of that slot were put already
    "log_end" / Int64sb,   # end of the timer log as last written (a power loss shows as less)
    Padding(TIMER_CHECKPOINT_SIZE - 64),
)
TIMER_CHECKPOINT = struct.Struct(">Iiqqqqqqq")
TIMER_CHECKPOINT_OFFSETS = {
    "flushed_log_pos": 16, "flushed_queue_offset": 24, "read_time_ms": 32,
    "delivering_ms": 40, "delivered_in_slot": 48, "log_end": 56,
}
INT64 = struct.Struct(">q")

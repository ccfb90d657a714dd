"""The two frames of classic RocketMQ replication on the HA port (spec/ha.md sections 4 and 5).

A slave sends only its commit log max offset, 8 bytes; a master sends transfers: a 12-byte
header (the commit log offset of the first byte and the body size; size 0 is a heartbeat)
followed by that many raw commit log bytes. No magic, no version, no framing beyond this.

Each layout is declared with construct and mirrored by a ``struct.Struct`` for the per-transfer
code; a test proves the two agree. Sans-I/O: no sockets, no trio.
"""

from __future__ import annotations

import struct

from construct import Int32sb, Int64sb, Struct

SlaveReport = Struct(
    "max_offset" / Int64sb,   # the end of the slave's commit log (its last byte + 1)
)
SLAVE_REPORT = struct.Struct(">q")

TransferHeader = Struct(
    "phy_offset" / Int64sb,   # commit log offset of the first body byte
    "body_size" / Int32sb,    # 0: a heartbeat
)
TRANSFER_HEADER = struct.Struct(">qi")

# The most one transfer may carry. Apache's slave reads into a 4 MiB buffer and a body that does
# not fit can never complete there, so no Apache master sends more (its default batch is 32 KiB);
# a larger size field is garbage and is refused before anything is allocated for it.
MAX_TRANSFER_BODY = 4 * 1024 * 1024

__all__ = ["MAX_TRANSFER_BODY", "SLAVE_REPORT", "SlaveReport", "TRANSFER_HEADER", "TransferHeader"]

"""Classic RocketMQ replication as two sans-I/O state machines: bytes in, events out.

:class:`MasterSession` is the master's view of one slave connection: it takes the slave's
8-byte offset reports, decides where the transfers start and builds their headers.
:class:`SlaveSession` is the slave's view of its master: it cuts the byte stream into
transfers and checks that each continues the slave's commit log.

Neither does any I/O, keeps a clock or logs; pyrmq.ha.master_service and pyrmq.ha.slave_client
are the trio loops around them. Anything that does not follow the protocol raises
:class:`HAProtocolError` and the connection is closed. Memory is bounded by the frames
themselves: a master holds at most 7 bytes of an incomplete report, a slave at most one
transfer of :data:`MAX_TRANSFER_BODY` plus what one receive brought.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.ha_frames import MAX_TRANSFER_BODY, SLAVE_REPORT, TRANSFER_HEADER


class HAProtocolError(ProtocolError):
    """The peer sent something classic replication does not allow; close its connection."""


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()


def transfer_start(request_offset: int, master_max_offset: int, mapped_file_size: int) -> int:
    """Where the master starts sending to a slave whose first report was ``request_offset``.

    A slave with an empty commit log (report 0) gets only the master's last file, from its
    beginning, as in Apache: a new slave does not copy the whole history. Any other slave
    continues from its own end.
    """
    if request_offset == 0:
        return master_max_offset - master_max_offset % mapped_file_size
    return request_offset


class MasterSession:
    """One slave's connection, as its master sees it.

    ``request_offset`` is the slave's first report (None until it arrives) and
    ``next_transfer_from`` the commit log offset of the next byte to send; ``ack_offset`` is the
    slave's last report, what a SYNC_MASTER send waits for.
    """

    def __init__(self, mapped_file_size: int) -> None:
        self.mapped_file_size = mapped_file_size
        self.request_offset: int | None = None
        self.next_transfer_from: int | None = None
        self.ack_offset = -1
        self._pending = b""   # fewer than 8 bytes of a report not complete yet

    def receive_data(self, data: bytes | bytearray, master_max_offset: int) -> int | None:
        """Take bytes the slave sent; returns its latest report when one completed, else None.

        A report below 0, above the master's own end (a slave ahead of its master, whose log
        has bytes this master never wrote), or below an earlier report of the same connection
        is not an offset report: HAProtocolError.
        """
        buf = self._pending + data if self._pending else data
        whole = len(buf) - len(buf) % SLAVE_REPORT.size
        self._pending = bytes(buf[whole:])
        if not whole:
            return None
        for (offset,) in SLAVE_REPORT.iter_unpack(memoryview(buf)[:whole]):
            if offset < 0:
                raise HAProtocolError(f"slave reported a negative offset {offset}")
            if offset > master_max_offset:
                raise HAProtocolError(f"slave reported offset {offset}, ahead of this master's commit log end "
                                      f"{master_max_offset}: its log has bytes this master never wrote")
            if offset < self.ack_offset:
                raise HAProtocolError(f"slave reported offset {offset} after {self.ack_offset}: reports never go back")
            if self.request_offset is None:
                self.request_offset = offset
                self.next_transfer_from = transfer_start(offset, master_max_offset, self.mapped_file_size)
            self.ack_offset = offset
        return self.ack_offset

    def transfer_header(self, body_size: int) -> bytes:
        """The header of a transfer of ``body_size`` bytes from ``next_transfer_from`` (0: a
        heartbeat); the position moves past them."""
        if self.next_transfer_from is None:
            raise RuntimeError("no transfer before the slave's first report")
        header = TRANSFER_HEADER.pack(self.next_transfer_from, body_size)
        self.next_transfer_from += body_size
        return header


@dataclass(frozen=True, slots=True)
class Transfer:
    """Commit log bytes the slave appends at ``phy_offset``."""
    phy_offset: int
    body: bytes


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A transfer of no bytes: the master is alive and would send from ``phy_offset``."""
    phy_offset: int


class SlaveSession:
    """The master's transfers, as a slave whose commit log ends at ``max_offset`` sees them.

    Feed received bytes with :meth:`receive_data`, then call :meth:`next_event` until it returns
    NEED_DATA. Every transfer must start at the slave's end (any offset while its log is empty,
    ``max_offset == 0``, as Apache); the session assumes each Transfer it returns is appended and
    expects the next one right after it.
    """

    def __init__(self, max_offset: int) -> None:
        self.expected_offset = max_offset
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def report(self, max_offset: int) -> bytes:
        """The 8 bytes reporting the slave's commit log end to its master."""
        return SLAVE_REPORT.pack(max_offset)

    def receive_data(self, data: bytes | bytearray) -> None:
        self._buf += data

    def next_event(self) -> Transfer | Heartbeat | _NeedData:
        buf = self._buf
        if len(buf) < TRANSFER_HEADER.size:
            return NEED_DATA
        phy_offset, body_size = TRANSFER_HEADER.unpack_from(buf)
        # checked from the header alone: a bad size is refused before any body is awaited
        if not 0 <= body_size <= MAX_TRANSFER_BODY:
            raise HAProtocolError(f"transfer size {body_size} outside 0..{MAX_TRANSFER_BODY}")
        if phy_offset < 0:
            raise HAProtocolError(f"transfer at negative offset {phy_offset}")
        if self.expected_offset != 0 and phy_offset != self.expected_offset:
            raise HAProtocolError(f"master sent offset {phy_offset} but this slave's commit log ends at "
                                  f"{self.expected_offset}")
        end = TRANSFER_HEADER.size + body_size
        if len(buf) < end:
            return NEED_DATA
        body = bytes(buf[TRANSFER_HEADER.size:end])
        del buf[:end]
        if not body_size:
            return Heartbeat(phy_offset)
        self.expected_offset = phy_offset + body_size
        return Transfer(phy_offset, body)


__all__ = ["HAProtocolError", "Heartbeat", "MasterSession", "NEED_DATA", "SlaveSession", "Transfer",
           "transfer_start"]

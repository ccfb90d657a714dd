"""The HA state machines driven with byte-level frames, each fed whole and one byte at a time."""

from __future__ import annotations

import struct

import pytest
from construct import Container

from pyrmq.codec.ha_frames import MAX_TRANSFER_BODY, SLAVE_REPORT, TRANSFER_HEADER, SlaveReport, TransferHeader
from pyrmq.ha.protocol import NEED_DATA, HAProtocolError, Heartbeat, MasterSession, SlaveSession, Transfer

FILE = 1024   # commit log file size of these cases


def report(offset: int) -> bytes:
    return struct.pack(">q", offset)


def transfer(offset: int, body: bytes) -> bytes:
    return struct.pack(">qi", offset, len(body)) + body


def test_frames_agree_with_their_construct_declarations():
    assert SLAVE_REPORT.pack(123) == SlaveReport.build(Container(max_offset=123))
    assert SLAVE_REPORT.size == SlaveReport.sizeof() == 8
    data = TRANSFER_HEADER.pack(1 << 40, 32768)
    assert data == TransferHeader.build(Container(phy_offset=1 << 40, body_size=32768))
    assert TRANSFER_HEADER.size == TransferHeader.sizeof() == 12
    assert TransferHeader.parse(data).body_size == 32768


def feed_master(session: MasterSession, data: bytes, master_max: int, *, bytewise: bool) -> list[int]:
    acks = []
    chunks = [data[i:i + 1] for i in range(len(data))] if bytewise else [data]
    for chunk in chunks:
        ack = session.receive_data(chunk, master_max)
        if ack is not None:
            acks.append(ack)
    return acks


@pytest.mark.parametrize("bytewise", [False, True])
class TestMasterSession:
    def test_first_report_of_an_empty_slave_starts_at_the_last_file(self, bytewise):
        session = MasterSession(FILE)
        assert feed_master(session, report(0), 2 * FILE + 100, bytewise=bytewise) == [0]
        assert session.request_offset == 0
        assert session.next_transfer_from == 2 * FILE

    def test_a_slave_with_data_continues_from_its_end(self, bytewise):
        session = MasterSession(FILE)
        feed_master(session, report(1500), 2 * FILE + 100, bytewise=bytewise)
        assert session.next_transfer_from == 1500
        assert session.transfer_header(300) == TRANSFER_HEADER.pack(1500, 300)
        assert session.next_transfer_from == 1800
        assert session.transfer_header(0) == TRANSFER_HEADER.pack(1800, 0)   # heartbeat
        assert session.next_transfer_from == 1800

    def test_later_reports_are_acks_and_leave_the_start_alone(self, bytewise):
        session = MasterSession(FILE)
        acks = feed_master(session, report(100) + report(200) + report(300), 1000, bytewise=bytewise)
        assert acks[-1] == 300 and session.ack_offset == 300
        assert session.request_offset == 100 and session.next_transfer_from == 100

    def test_a_slave_ahead_of_its_master_is_refused(self, bytewise):
        session = MasterSession(FILE)
        with pytest.raises(HAProtocolError, match="ahead"):
            feed_master(session, report(5000), 4000, bytewise=bytewise)

    def test_a_negative_offset_is_refused(self, bytewise):
        with pytest.raises(HAProtocolError, match="negative"):
            feed_master(MasterSession(FILE), report(-1), 4000, bytewise=bytewise)

    def test_reports_never_go_back(self, bytewise):
        with pytest.raises(HAProtocolError, match="never go back"):
            feed_master(MasterSession(FILE), report(300) + report(200), 4000, bytewise=bytewise)

    def test_garbage_is_refused_before_it_becomes_an_ack(self, bytewise):
        # ASCII text read as offsets: far beyond any commit log
        with pytest.raises(HAProtocolError):
            feed_master(MasterSession(FILE), b"GET / HTTP/1.1\r\n", 4000, bytewise=bytewise)


def test_master_holds_at_most_seven_bytes_of_a_report():
    session = MasterSession(FILE)
    assert session.receive_data(report(10)[:7], 100) is None
    assert len(session._pending) == 7
    assert session.receive_data(report(10)[7:] + report(20)[:3], 100) == 10
    assert len(session._pending) == 3


def feed_slave(session: SlaveSession, data: bytes, *, bytewise: bool) -> list:
    events = []
    chunks = [data[i:i + 1] for i in range(len(data))] if bytewise else [data]
    for chunk in chunks:
        session.receive_data(chunk)
        while (event := session.next_event()) is not NEED_DATA:
            events.append(event)
    return events


@pytest.mark.parametrize("bytewise", [False, True])
class TestSlaveSession:
    def test_transfers_and_heartbeats(self, bytewise):
        session = SlaveSession(0)
        data = transfer(2048, b"abc") + transfer(2051, b"") + transfer(2051, b"defg")
        events = feed_slave(session, data, bytewise=bytewise)
        assert events == [Transfer(2048, b"abc"), Heartbeat(2051), Transfer(2051, b"defg")]
        assert session.expected_offset == 2055 and session.buffered == 0

    def test_a_truncated_frame_waits_for_the_rest(self, bytewise):
        session = SlaveSession(100)
        data = transfer(100, b"x" * 50)
        assert feed_slave(session, data[:11], bytewise=bytewise) == []          # header cut short
        assert feed_slave(session, data[11:40], bytewise=bytewise) == []        # body cut short
        assert feed_slave(session, data[40:], bytewise=bytewise) == [Transfer(100, b"x" * 50)]

    def test_restart_mid_transfer_resumes_from_the_slave_end(self, bytewise):
        # The slave appended 2 transfers, lost its connection with a third half received,
        # reconnected and reported its end: the master starts there, the slave accepts it.
        body = bytes(range(256)) * 4
        first = SlaveSession(0)
        events = feed_slave(first, transfer(0, body[:300]) + transfer(300, body[300:600])
                            + transfer(600, body[600:])[:100], bytewise=bytewise)
        assert [e.phy_offset for e in events] == [0, 300]
        end = first.expected_offset
        master = MasterSession(FILE)
        master.receive_data(first.report(end), len(body))
        assert master.next_transfer_from == 600
        second = SlaveSession(end)
        header = master.transfer_header(len(body) - 600)
        assert feed_slave(second, header + body[600:], bytewise=bytewise) == [Transfer(600, body[600:])]

    def test_a_transfer_that_does_not_continue_the_log_is_refused(self, bytewise):
        with pytest.raises(HAProtocolError, match="ends at 100"):
            feed_slave(SlaveSession(100), transfer(164, b"x"), bytewise=bytewise)

    def test_a_heartbeat_elsewhere_is_refused_too(self, bytewise):
        # the master thinks the slave stands elsewhere (as Apache, every header is checked)
        with pytest.raises(HAProtocolError, match="ends at 100"):
            feed_slave(SlaveSession(100), transfer(90, b""), bytewise=bytewise)

    def test_an_oversized_size_field_is_refused_from_the_header(self, bytewise):
        header = TRANSFER_HEADER.pack(0, MAX_TRANSFER_BODY + 1)
        with pytest.raises(HAProtocolError, match="size"):
            feed_slave(SlaveSession(0), header, bytewise=bytewise)

    def test_a_negative_size_is_refused(self, bytewise):
        with pytest.raises(HAProtocolError, match="size"):
            feed_slave(SlaveSession(0), TRANSFER_HEADER.pack(0, -5), bytewise=bytewise)

    def test_a_negative_offset_is_refused(self, bytewise):
        with pytest.raises(HAProtocolError, match="negative"):
            feed_slave(SlaveSession(0), TRANSFER_HEADER.pack(-64, 1) + b"x", bytewise=bytewise)


def test_the_largest_transfer_is_accepted():
    body = bytes(MAX_TRANSFER_BODY)
    assert feed_slave(SlaveSession(0), transfer(0, body), bytewise=False) == [Transfer(0, body)]


def test_master_and_slave_wired_through_memory():
    """A master session feeding a slave session: the slave's log becomes the master's."""
    log = bytes(range(251)) * 40    # 10,040 bytes
    batch = 1000
    slave_log = bytearray()
    slave = SlaveSession(0)
    master = MasterSession(len(log) + 1)
    master.receive_data(slave.report(0), len(log))
    while master.next_transfer_from < len(log):
        start = master.next_transfer_from
        chunk = log[start:start + batch]
        slave.receive_data(master.transfer_header(len(chunk)) + chunk)
        while (event := slave.next_event()) is not NEED_DATA:
            slave_log += event.body
        assert master.receive_data(slave.report(len(slave_log)), len(log)) == len(slave_log)
    assert bytes(slave_log) == log and master.ack_offset == len(log)

"""CommitLog appends: byte layout on disk, blank record roll-over, batches, transactions -- each
through the mapping (ASYNC_FLUSH) and written with pwrite (SYNC_FLUSH)."""

from __future__ import annotations

import os
import socket
import struct
import threading
import zlib
from dataclasses import replace

import pytest

from pyrmq.codec.message import (
    BLANK_MAGIC_CODE,
    MAGIC_CODE_V1,
    BatchEntry,
    MessageSysFlag,
    create_offset_msg_id,
    decode_message,
    decode_messages,
    encode_batch,
    string_to_properties,
    tags_string_to_tags_code,
)
from pyrmq.store import commit_log
from pyrmq.store.model import FlushDiskType, GetMessageStatus, PutMessageStatus
from store_helpers import STORE_HOST, make_batch, make_msg, open_store, small_config


@pytest.fixture(params=[FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH], ids=["mapped", "pwrite"])
def config(tmp_path, request):
    """Each test of this module with records written through the mapping and with pwrite."""
    return small_config(tmp_path / "store", flush_disk_type=request.param)


def test_sync_flush_writes_with_pwrite_the_bytes_the_mapping_would(tmp_path, monkeypatch):
    """The same puts leave the same files either way: single records rolling over files, a
    batch, a batch whose records are more than the write buffer holds (written through the
    mapping then), a record refused."""
    monkeypatch.setattr(commit_log, "now_ms", lambda: 1_700_000_000_123)
    stored = {}
    for kind in FlushDiskType:
        store = open_store(small_config(tmp_path / kind.name, flush_disk_type=kind,
                                        mapped_file_size_commit_log=128 * 1024, max_message_size=1024))
        try:
            assert (store.commit_log._write_buffer is None) is (kind is FlushDiskType.ASYNC_FLUSH)
            for i in range(150):
                assert store.put_message(make_msg(body=bytes([i]) * 1000, queue_id=i % 3)).is_ok()
            assert store.put_messages(make_batch(encode_batch([BatchEntry(0, b"b" * 50, "")] * 8))).is_ok()
            # 12 records of 8 KiB properties: more than the write buffer (maxMessageSize + 64 KiB) holds
            big = store.put_messages(make_batch(encode_batch([BatchEntry(0, b"c", "")] * 12),
                                                props="K\x01" + "v" * 8000 + "\x02"))
            assert big.is_ok() and big.append_result.wrote_bytes > 1024 + commit_log.RECORD_OVERHEAD_ALLOWANCE
            too_long = make_msg(body=b"d", props={"P": "v" * 40000})
            assert store.put_message(too_long).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
            assert store.put_message(make_msg(body=b"last")).is_ok()
            end = store.get_max_phy_offset()
        finally:
            store.shutdown()
        directory = small_config(tmp_path / kind.name).commit_log_dir()
        stored[kind] = end, {name: open(os.path.join(directory, name), "rb").read()
                             for name in sorted(os.listdir(directory))}
    assert stored[FlushDiskType.SYNC_FLUSH] == stored[FlushDiskType.ASYNC_FLUSH]
    end, files = stored[FlushDiskType.SYNC_FLUSH]
    assert len(files) >= 3 and end > 2 * 128 * 1024


def test_record_on_disk_matches_documented_offsets(store, config):
    msg = make_msg(body=b"payload", queue_id=2)
    res = store.put_message(msg)
    assert res.is_ok()
    ar = res.append_result
    path = os.path.join(config.commit_log_dir(), "00000000000000000000")
    data = open(path, "rb").read()  # page cache shows mmap writes
    rec = data[: ar.wrote_bytes]
    props = msg.properties_string.encode()
    assert ar.wrote_bytes == 91 + 7 + len("TopicTest") + len(props)
    assert struct.unpack_from(">i", rec, 0)[0] == ar.wrote_bytes
    assert struct.unpack_from(">i", rec, 4)[0] == MAGIC_CODE_V1
    assert struct.unpack_from(">i", rec, 8)[0] == zlib.crc32(b"payload") & 0x7FFFFFFF
    assert struct.unpack_from(">i", rec, 12)[0] == 2
    assert struct.unpack_from(">q", rec, 20)[0] == 0  # queue offset
    assert struct.unpack_from(">q", rec, 28)[0] == 0  # physical offset
    assert rec[48:52] == bytes([192, 168, 1, 7]) and struct.unpack_from(">i", rec, 52)[0] == 50000
    assert struct.unpack_from(">q", rec, 56)[0] == ar.store_timestamp
    assert rec[64:68] == bytes([10, 0, 0, 1]) and struct.unpack_from(">i", rec, 68)[0] == 10911
    assert struct.unpack_from(">i", rec, 84)[0] == 7 and rec[88:95] == b"payload"
    assert rec[95] == 9 and rec[96:105] == b"TopicTest"
    assert struct.unpack_from(">h", rec, 105)[0] == len(props) and rec[107:] == props
    assert ar.msg_id == create_offset_msg_id(bytes([10, 0, 0, 1]), 10911, 0)
    assert data[ar.wrote_bytes:] == bytes(len(data) - ar.wrote_bytes)


def test_roll_over_writes_a_blank_record(store, config):
    offsets = []
    for i in range(40):
        r = store.put_message(make_msg(body=bytes([i]) * 150))
        assert r.is_ok()
        offsets.append((r.append_result.wrote_offset, r.append_result.wrote_bytes))
    files = sorted(os.listdir(config.commit_log_dir()))
    assert files[:3] == ["00000000000000000000", "00000000000000004096", "00000000000000008192"]
    size = offsets[0][1]
    per_file = (4096 - 8) // size  # a record must leave room for the 8-byte blank header
    assert offsets[per_file][0] == 4096
    last_end = per_file * size
    first = open(os.path.join(config.commit_log_dir(), files[0]), "rb").read()
    assert struct.unpack_from(">ii", first, last_end) == (4096 - last_end, BLANK_MAGIC_CODE)
    for off, sz in offsets:  # no record spans files
        assert off // 4096 == (off + sz - 1) // 4096
    cl = store.commit_log
    msgs = [decode_message(cl.get_data(off, sz))[0] for off, sz in offsets]
    assert [m.queue_offset for m in msgs] == list(range(40))
    assert [m.commit_log_offset for m in msgs] == [o for o, _ in offsets]
    assert store.get_max_phy_offset() == offsets[-1][0] + offsets[-1][1]
    assert store.get_min_phy_offset() == 0


def test_blank_rule_boundary(tmp_path):
    from store_helpers import open_store, small_config
    s = open_store(small_config(tmp_path, mapped_file_size_commit_log=1024))
    try:
        base = s.put_message(make_msg(body=b"")).append_result.wrote_bytes
        # record + 8-byte blank header == bytes left: accepted
        r1 = s.put_message(make_msg(body=b"y" * (1024 - 2 * base - 8)))
        assert r1.append_result.wrote_offset == base
        assert r1.append_result.wrote_offset + r1.append_result.wrote_bytes == 1024 - 8
        r2 = s.put_message(make_msg(body=b""))
        assert r2.append_result.wrote_offset == 1024
        assert struct.unpack(">ii", bytes(s.commit_log.get_data(1016, 8))) == (8, BLANK_MAGIC_CODE)
        # one byte more than that: goes to the next file
        r3 = s.put_message(make_msg(body=b"z" * (1024 - 2 * base - 8 + 1)))
        assert r3.append_result.wrote_offset == 2048
        assert struct.unpack(">ii", bytes(s.commit_log.get_data(1024 + base, 8))) == (
            1024 - base, BLANK_MAGIC_CODE)
        assert [m.queue_offset for m in decode_messages(s.commit_log.get_data(0, 1016))] == [0, 1]
    finally:
        s.shutdown()


def test_queue_offsets_per_topic_queue(store):
    for i in range(3):
        assert store.put_message(make_msg(queue_id=0)).append_result.logics_offset == i
    assert store.put_message(make_msg(queue_id=1)).append_result.logics_offset == 0
    assert store.put_message(make_msg(topic="Other")).append_result.logics_offset == 0
    assert store.commit_log.topic_queue_table == {("TopicTest", 0): 3, ("TopicTest", 1): 1, ("Other", 0): 1}


def test_prepared_and_rollback_do_not_advance_or_dispatch(store):
    store.put_message(make_msg())
    for t in (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE):
        r = store.put_message(make_msg(sys_flag=t))
        assert r.is_ok() and r.append_result.logics_offset == 0
        msg = store.look_message_by_offset(r.append_result.wrote_offset)
        assert msg.queue_offset == 0 and MessageSysFlag.transaction_value(msg.sys_flag) == t
    r = store.put_message(make_msg(sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                                   prepared_transaction_offset=77))
    assert r.append_result.logics_offset == 1
    assert store.get_max_offset_in_queue("TopicTest", 0) == 2
    assert store.look_message_by_offset(r.append_result.wrote_offset).prepared_transaction_offset == 77


def test_batch_each_entry_is_a_record(store):
    entries = [BatchEntry(i, f"body{i}".encode(), f"TAGS\x01t{i}\x02UNIQ_KEY\x01U{i}") for i in range(5)]
    store.put_message(make_msg())
    r = store.put_messages(make_batch(encode_batch(entries)))
    assert r.is_ok()
    ar = r.append_result
    assert ar.msg_num == 5 and ar.logics_offset == 1
    ids = ar.msg_id.split(",")
    assert len(ids) == 5
    data = store.commit_log.get_data(ar.wrote_offset, ar.wrote_bytes)
    msgs = decode_messages(data)
    assert [m.queue_offset for m in msgs] == [1, 2, 3, 4, 5]
    assert [m.body for m in msgs] == [e.body for e in entries]
    assert [m.flag for m in msgs] == [0, 1, 2, 3, 4]
    assert ids == [create_offset_msg_id(bytes([10, 0, 0, 1]), 10911, m.commit_log_offset) for m in msgs]
    assert len({m.store_timestamp for m in msgs}) == 1
    assert msgs[0].properties == {"TAGS": "t0", "UNIQ_KEY": "U0", "CLUSTER": "c"}
    # raw stored string: entry props, separator added, then the batch props
    raw = bytes(data[msgs[0].store_size - len("TAGS\x01t0\x02UNIQ_KEY\x01U0\x02CLUSTER\x01c\x02"):msgs[0].store_size])
    assert raw == b"TAGS\x01t0\x02UNIQ_KEY\x01U0\x02CLUSTER\x01c\x02"
    g = store.get_message("g", "TopicTest", 0, 1, 32, None)
    assert g.status is GetMessageStatus.FOUND and g.message_count == 5
    units = list(store.find_consume_queue("TopicTest", 0).iter_units(1))
    assert [u[2] for u in units] == [tags_string_to_tags_code(f"t{i}") for i in range(5)]
    assert store.commit_log.topic_queue_table[("TopicTest", 0)] == 6


def test_batch_never_spans_files(store, config):
    entries = [BatchEntry(0, b"b" * 300, "") for _ in range(6)]
    end = store.put_message(make_msg(body=b"a" * 2500)).append_result.wrote_bytes
    r = store.put_messages(make_batch(encode_batch(entries)))
    assert r.is_ok() and r.append_result.wrote_offset == 4096
    assert [m.body for m in decode_messages(store.commit_log.get_data(4096, r.append_result.wrote_bytes))] == [
        b"b" * 300] * 6
    # the entries that fitted the first file before one did not are behind its blank record
    first = open(os.path.join(config.commit_log_dir(), "00000000000000000000"), "rb").read()
    assert struct.unpack_from(">ii", first, end) == (4096 - end, BLANK_MAGIC_CODE)


@pytest.mark.parametrize("flush_disk_type", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
def test_a_batch_past_the_reserved_space_is_encoded_once(tmp_path, monkeypatch, flush_disk_type):
    """A batch that runs past the file's reserved space (but fits in the file) has the space
    reserved first: it is not sized record by record and encoded again (_writable_file)."""
    store = open_store(small_config(tmp_path / "store", mapped_file_size_commit_log=16 << 20,
                                    flush_disk_type=flush_disk_type))
    try:
        store.put_message(make_msg())   # the first file
        sizes = []
        real = commit_log.CommitLog._writable_file
        monkeypatch.setattr(commit_log.CommitLog, "_writable_file", lambda self, size: sizes.append(size) or real(self, size))
        entries = [BatchEntry(0, bytes([i]) * 1000, f"UNIQ_KEY\x01U{i}") for i in range(64)]
        for _ in range(100):   # 6.7 MB, past the first reservation
            assert store.put_messages(make_batch(encode_batch(entries))).is_ok()
        mf = store.commit_log.mapped_file_queue.last_mapped_file()
        assert sizes == [] and mf.file_from_offset == 0
        assert mf.reserved >= mf.wrote_position > commit_log.COMMIT_LOG_RESERVE_CHUNK
        messages = decode_messages(store.commit_log.get_data(0, store.get_max_phy_offset()))
        assert [m.body for m in messages[1:]] == [e.body for e in entries] * 100
        assert [m.queue_offset for m in messages] == list(range(6401))
    finally:
        store.shutdown()


def test_a_batch_refused_half_written_leaves_no_record(store):
    end = store.put_message(make_msg(body=b"a" * 100)).append_result.wrote_bytes
    # the second entry's properties, with the batch's appended, pass the 32767 bytes a record holds
    entries = [BatchEntry(0, b"first", ""), BatchEntry(0, b"second", "K\x01" + "v" * 32760)]
    assert store.put_messages(make_batch(encode_batch(entries))).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.get_max_phy_offset() == end
    assert bytes(store.commit_log.mapped_file_queue.last_mapped_file().mm[end:end + 8]) == bytes(8)
    r = store.put_message(make_msg(body=b"next"))
    assert r.is_ok() and r.append_result.wrote_offset == end
    assert [m.body for m in decode_messages(store.commit_log.get_data(0, store.get_max_phy_offset()))] == [
        b"a" * 100, b"next"]


def test_batch_rejections(store):
    body = encode_batch([BatchEntry(0, b"x", "")])
    assert store.put_messages(make_batch(body[:-1])).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_messages(make_batch(body, props="DELAY\x012\x02")).status is PutMessageStatus.MESSAGE_ILLEGAL
    b = make_batch(body)
    b.sys_flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE
    assert store.put_messages(b).status is PutMessageStatus.MESSAGE_ILLEGAL
    too_big = encode_batch([BatchEntry(0, b"x" * 3000, "")] * 2)
    assert store.put_messages(make_batch(too_big)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.get_max_phy_offset() == 0


def test_flush_from_thread_during_appends(store):
    stop = threading.Event()
    seen = []

    def flusher():
        while not stop.is_set():
            seen.append(store.flush_commit_log())

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for _ in range(300):
            assert store.put_message(make_msg(body=bytes(50))).is_ok()
    finally:
        stop.set()
        t.join()
    assert store.flush_commit_log() == store.get_max_phy_offset() == store.commit_log.flushed_where
    assert seen == sorted(seen)
    assert store.checkpoint.physic_msg_timestamp > 0


def test_flush_least_pages(tmp_path):
    store = open_store(small_config(tmp_path / "s", mapped_file_size_commit_log=64 * 1024))
    try:
        assert store.put_message(make_msg(body=bytes(100))).is_ok()
        assert store.flush_commit_log(least_pages=4) == 0   # under 4 dirty pages: nothing synced
        assert store.flush_commit_log() == store.get_max_phy_offset()
        while store.get_max_phy_offset() < store.commit_log.flushed_where + 4 * 4096:
            assert store.put_message(make_msg(body=bytes(1000))).is_ok()
        assert store.flush_commit_log(least_pages=4) == store.get_max_phy_offset()
    finally:
        store.shutdown()


def test_properties_kept_verbatim(store):
    r = store.put_message(make_msg(props={"KEYS": "k1 k2", "UNIQ_KEY": "ABC"}))
    m = store.look_message_by_offset(r.append_result.wrote_offset)
    assert m.keys == "k1 k2" and m.tags == "TagA"
    assert m.properties == string_to_properties(make_msg(props={"KEYS": "k1 k2", "UNIQ_KEY": "ABC"}).properties_string)
    assert m.store_host == STORE_HOST


def _mapped_rss_kib(path: str) -> int:
    """Resident KiB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            if line[0] in "0123456789abcdef" and "-" in line.split()[0]:
                inside = line.rstrip().endswith(path)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def test_flushed_pages_far_behind_leave_the_mapping_not_the_file(tmp_path):
    """The commit log pages more than RELEASE_BEHIND behind the flushed end are taken out of the
    process's page tables: the resident size stops growing with what was written, and every
    record still reads back whole (from the page cache)."""
    from pyrmq.store.commit_log import RELEASE_BEHIND, RELEASE_STEP

    config = small_config(tmp_path / "s", mapped_file_size_commit_log=64 * 1024 * 1024)
    store = open_store(config)
    try:
        body = bytes(range(256)) * 16   # 4 KiB
        results = [store.put_message(make_msg(body=body, queue_id=i % 4)).append_result for i in range(12_000)]
        path = os.path.join(config.commit_log_dir(), "00000000000000000000")
        written = results[-1].wrote_offset + results[-1].wrote_bytes
        assert written > 3 * RELEASE_BEHIND
        assert _mapped_rss_kib(path) * 1024 >= written - 4096     # every page written is mapped
        store.flush_commit_log()
        # the last RELEASE_BEHIND stays (and what the writer's faults mapped around its end)
        assert _mapped_rss_kib(path) * 1024 <= RELEASE_BEHIND + RELEASE_STEP
        for q in range(4):
            r = store.get_message("g", "TopicTest", q, 0, 32, None)
            got = [m.body for m in decode_messages(b"".join(r.buffers))]
            assert got and got == [body] * len(got)
        assert [store.get_message("g", "TopicTest", q, 2999, 1, None).status for q in range(4)] == \
            [GetMessageStatus.FOUND] * 4
    finally:
        store.shutdown()
    with open(path, "rb") as f:   # on disk too
        f.seek(results[5].wrote_offset)
        assert decode_message(f.read(results[5].wrote_bytes))[0].body == body



def test_hosts_give_their_flags_msg_ids_and_refusals(store, monkeypatch):
    from pyrmq.store import commit_log

    v6 = store.put_message(replace(make_msg(), born_host=("::1", 40000), store_host=("fe80::2", 10911)))
    assert v6.is_ok()
    [record] = decode_messages(bytes(store.commit_log.get_data(v6.append_result.wrote_offset,
                                                               v6.append_result.wrote_bytes)))
    v6_flags = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    assert record.sys_flag & v6_flags == v6_flags
    assert v6.append_result.msg_id == create_offset_msg_id(socket.inet_pton(socket.AF_INET6, "fe80::2"), 10911,
                                                           v6.append_result.wrote_offset)
    end = store.commit_log.max_offset
    for bad in (replace(make_msg(), born_host=("not-an-ip", 1)), replace(make_msg(), store_host=("10.0.0.1", 2**31))):
        assert store.put_message(bad).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.commit_log.max_offset == end   # nothing written for them
    # the hosts' fields are found once per pair of hosts, and kept for at most MAX_CACHED_HOSTS pairs
    cache = store.commit_log._host_cache
    for n in range(3):
        assert store.put_message(replace(make_msg(), born_host=(f"192.168.1.{n}", 50000))).is_ok()
    assert ("192.168.1.2", STORE_HOST) in cache
    monkeypatch.setattr(commit_log, "MAX_CACHED_HOSTS", len(cache))
    assert store.put_message(replace(make_msg(), born_host=("192.168.2.1", 1))).is_ok()
    assert list(cache) == [("192.168.2.1", STORE_HOST)]

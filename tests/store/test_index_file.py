"""IndexFile and IndexService (store.md §5, §8 step 3): byte layout, slot chains, roll-over, time
windows, reopen, abnormal-recovery deletion, and Apache RocketMQ 4.9.8's own index file."""

from __future__ import annotations

import os
import random
import shutil
import struct
import tarfile
import time
from pathlib import Path

import pytest
from store_helpers import make_batch, make_msg, open_store, small_config

from pyrmq.codec.message import BatchEntry, decode_message, decode_messages, encode_batch
from pyrmq.codec.message_props import java_string_hash
from pyrmq.store.index_file import ITEMS_RESERVE_CHUNK, IndexFile, index_key_hash, topic_key_hash
from pyrmq.store.index_service import index_keys_of

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "store" / "apache-4.9.8-small.tar.gz"
T0 = 1_700_000_000_000

# The spec's layout, spelled out independently of pyrmq.codec.store_formats.
HEADER = struct.Struct(">qqqqii")  # begin ts, end ts, begin phy, end phy, hashSlotCount, indexCount
SLOT = struct.Struct(">i")
ITEM = struct.Struct(">iqii")  # keyHash, phy offset, timeDiff (s), prev index


def index_config(root, **kw):
    values = {"max_hash_slot_num": 16, "max_index_num": 64}
    values.update(kw)
    return small_config(root, **values)


def index_files(config):
    d = config.index_dir()
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def query_bodies(store, topic, key, begin=0, end=2**63 - 1, max_num=64):
    r = store.query_message(topic, key, max_num, begin, end)
    return sorted(decode_message(b)[0].body for b in r.buffers)


def test_key_hash_is_abs_of_java_hash():
    assert index_key_hash("T#k") == abs(java_string_hash("T#k"))
    assert java_string_hash("polygenelubricants") == -2**31  # Integer.MIN_VALUE
    assert index_key_hash("polygenelubricants") == 0
    rnd = random.Random(5)
    keys = ["", "a", "T#" + "x" * 1500, "Topic#\u00e9\u4e2d\U0001f600"]
    keys += ["".join(chr(rnd.randrange(32, 127)) for _ in range(rnd.randrange(60))) for _ in range(300)]
    for k in keys:  # the ASCII fast path agrees with the per-char Java hash
        h = java_string_hash(k)
        assert index_key_hash(k) == (abs(h) if h != -2**31 else 0), k


def _zero_hash_suffix(prefix: str) -> str:
    """Seven characters that bring ``prefix``'s Java hash to 0 (its base-31 digits)."""
    n = (-(java_string_hash(prefix) & 0xFFFFFFFF) * pow(31, 7, 1 << 32)) % (1 << 32)
    digits = []
    for _ in range(7):
        n, d = divmod(n, 31)
        digits.append(chr(d))
    assert n == 0
    return "".join(reversed(digits))


def test_topic_key_hash_agrees_with_the_whole_key_hash():
    rnd = random.Random(6)
    alphabet = "0123456789ABCDEF#-_ \x01\u00e9\u4e2d\U0001f600"
    cases = [("T", ""), ("T", "k"), ("T", "x" * 12), ("T", "x" * 13), ("T", "\u4e2d" * 20),
             ("Topic", "7F00000100AB18B4AAC2" + "0123456789AB"), ("T", "\U0001f600" + "a" * 12),
             ("T", "a" * 11 + "\U0001f600")]
    # hash("T#" + zeros + "polygenelubricants") is Integer.MIN_VALUE: index hash 0
    cases.append(("T", _zero_hash_suffix("T#") + "polygenelubricants"))
    assert java_string_hash("T#" + cases[-1][1]) == -2**31
    for _ in range(2000):
        key = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(40)))
        cases.append(("BenchTopic", key))
    for topic, key in cases:
        assert topic_key_hash(topic, key) == index_key_hash(f"{topic}#{key}"), (topic, key)
    assert topic_key_hash(*cases[8]) == 0


def test_properties_scan_finds_only_whole_names():
    assert index_keys_of("TAGS\x01a\x02WAIT\x01true\x02") == (None, None)
    assert index_keys_of("UNIQ_KEY\x01U1\x02KEYS\x01a b\x02") == ("U1", "a b")
    assert index_keys_of("MY_KEYS\x01x\x02KEYS\x01k\x02XUNIQ_KEY\x01z") == (None, "k")


def test_byte_layout_of_a_hand_made_file(tmp_path):
    slots, items = 8, 4
    path = tmp_path / "20240131235959123"
    f = IndexFile(str(path), slots, items, create=True)
    assert path.stat().st_size == 40 + slots * 4 + items * 20
    h = 13  # slot 13 % 8 = 5
    assert f.put_key(h, 1000, T0)
    assert f.put_key(h + 8, 2000, T0 + 2999)  # same slot, different hash
    assert f.put_key(3, 3000, T0 + 4000)  # another slot
    f.flush()
    data = path.read_bytes()
    assert HEADER.unpack_from(data, 0) == (T0, T0 + 4000, 1000, 3000, 2, 4)
    items_at = 40 + slots * 4
    assert SLOT.unpack_from(data, 40 + 5 * 4) == (2,)
    assert SLOT.unpack_from(data, 40 + 3 * 4) == (3,)
    assert data[items_at:items_at + 20] == bytes(20)  # item 0 never used
    assert ITEM.unpack_from(data, items_at + 1 * 20) == (13, 1000, 0, 0)
    assert ITEM.unpack_from(data, items_at + 2 * 20) == (21, 2000, 2, 1)  # truncated seconds, chain
    assert ITEM.unpack_from(data, items_at + 3 * 20) == (3, 3000, 4, 0)
    assert f.is_write_full() and not f.put_key(1, 4000, T0 + 5000)
    out = []
    f.select_phy_offsets(out, 13, 10, 0, 2**62)
    assert out == [1000]  # the collision (hash 21) is skipped by hash
    f.close()
    g = IndexFile(str(path), slots, items)  # reload reads the header back
    assert (g.begin_timestamp, g.end_phy_offset, g.hash_slot_count, g.index_count) == (T0, 3000, 2, 4)
    g.close()


def test_default_size_file_reserves_its_slots_and_a_chunk_of_items(tmp_path):
    """The slot table (written anywhere) is reserved at creation, the items a chunk ahead: a
    full disk is an OSError, never a SIGBUS; the 420 MB file costs about 21 MB."""
    path = tmp_path / "20240101000000000"
    f = IndexFile(str(path), 5_000_000, 20_000_000, create=True)
    f.put_key(index_key_hash("T#k"), 0, T0)
    f.flush()
    st = path.stat()
    assert st.st_size == 420_000_040
    slots_end = 40 + 5_000_000 * 4
    assert f.reserved >= slots_end + 2 * 20
    assert slots_end <= st.st_blocks * 512 < slots_end + 2 * ITEMS_RESERVE_CHUNK
    f.close()


def test_time_window(tmp_path):
    f = IndexFile(str(tmp_path / "20240101000000000"), 4, 16, create=True)
    for i, dt in enumerate((0, 5000, 10000)):
        f.put_key(7, 100 * i, T0 + dt)
    for begin, end, expected in ((T0 + 4000, T0 + 6000, [100]), (0, 2**62, [200, 100, 0]),
                                 (T0 + 5000, 2**62, [200, 100]), (T0 + 11000, 2**62, [])):
        out = []
        f.select_phy_offsets(out, 7, 32, begin, end)
        assert out == expected, (begin, end)
    out = []
    f.select_phy_offsets(out, 7, 2, 0, 2**62)
    assert out == [200, 100]  # maxNum
    f.close()


def test_damaged_header_count_and_slot_stay_inside_the_file(tmp_path):
    path = tmp_path / "20240101000000000"
    IndexFile(str(path), 4, 16, create=True).close()
    with open(path, "r+b") as raw:
        raw.write(HEADER.pack(T0, T0, 0, 0, 1, 2**31 - 1))           # counts far more items than fit
        raw.write(SLOT.pack(2**31 - 16) * 4)                          # every slot points past the end
    f = IndexFile(str(path), 4, 16)
    try:
        assert f.index_count == 16 and f.is_write_full()
        out = []
        f.select_phy_offsets(out, 7, 32, 0, 2**62)
        assert out == []
    finally:
        f.close()


def test_a_cycle_of_item_links_ends_the_lookup(tmp_path):
    """Items only ever link to older ones; two damaged items pointing at each other must not loop."""
    f = IndexFile(str(tmp_path / "20240101000000000"), 4, 16, create=True)
    try:
        for i in range(3):
            f.put_key(7, 100 * i, T0)
        items = 40 + 4 * SLOT.size
        ITEM.pack_into(f.mm, items + 2 * ITEM.size, 8, 100, 0, 3)   # item 2 -> item 3 (newer)
        ITEM.pack_into(f.mm, items + 3 * ITEM.size, 8, 200, 0, 2)   # item 3 -> item 2
        SLOT.pack_into(f.mm, 40 + 8 % 4 * SLOT.size, 3)
        out = []
        f.select_phy_offsets(out, 8, 32, 0, 2**62)
        assert out == [200, 100]
    finally:
        f.close()


def test_colliding_slots_chain(tmp_path):
    config = index_config(tmp_path / "s", max_hash_slot_num=2)
    s = open_store(config)
    try:
        for i in range(20):
            s.put_message(make_msg(body=f"b{i}".encode(), props={"KEYS": f"k{i % 5} all", "UNIQ_KEY": f"U{i}"}))
        for k in range(5):
            assert query_bodies(s, "TopicTest", f"k{k}") == sorted(f"b{i}".encode() for i in range(k, 20, 5))
        assert query_bodies(s, "TopicTest", "U7") == [b"b7"]
        assert len(query_bodies(s, "TopicTest", "all")) == 20
        assert len(s.query_message("TopicTest", "all", 3, 0, 2**62).buffers) == 3
        assert query_bodies(s, "Other", "k1") == []
        f = s.index_service.index_files[0]
        assert f.index_count == 1 + 20 * 3 and f.hash_slot_count == 2
    finally:
        s.shutdown()


def test_roll_over_and_checkpoint(tmp_path):
    config = index_config(tmp_path / "s", max_index_num=4)  # 3 items per file
    s = open_store(config)
    try:
        results = [s.put_message(make_msg(body=f"b{i}".encode(), props={"UNIQ_KEY": f"U{i}"})).append_result
                   for i in range(7)]
        s.index_service.build_pending()
        files = s.index_service.index_files
        assert len(files) == 3 and len(index_files(config)) == 3
        assert files[0].index_count == 4 and files[1].index_count == 4 and files[2].index_count == 2
        assert files[0].end_phy_offset == results[2].wrote_offset
        # the new file starts where the full one ended; its first item then resets begin
        assert files[1].begin_phy_offset == results[3].wrote_offset
        assert files[2].begin_timestamp == results[6].store_timestamp
        assert s.checkpoint.index_msg_timestamp == 0
        s.flush_consume_queues()
        assert s.checkpoint.index_msg_timestamp == files[1].end_timestamp
        for i in range(7):
            assert query_bodies(s, "TopicTest", f"U{i}") == [f"b{i}".encode()]
        r = s.query_message("TopicTest", "U0", 32, 0, 2**62)
        assert r.index_last_update_phyoffset == results[6].wrote_offset
        assert r.index_last_update_timestamp == results[6].store_timestamp
    finally:
        s.shutdown()


def test_a_batch_of_records_writes_the_bytes_of_record_by_record(tmp_path, monkeypatch):
    """IndexService.build_pending (runs of records in one call) against build_index for each
    record: the same files, through rolling over to a new file in mid-batch and in mid-record,
    with empty KEYS tokens, records without keys, rolled-back ones and one of more than 16 keys."""
    from pyrmq.store import commit_log
    from pyrmq.store.index_file import IndexFile as IndexFileClass

    images = []
    for in_one_call in (True, False):
        clock = iter(range(T0, T0 + 10_000_000, 1_500))
        monkeypatch.setattr(commit_log, "now_ms", lambda clock=clock: next(clock))
        if not in_one_call:
            monkeypatch.setattr(IndexFileClass, "build_records", lambda self, records, start, *names: start)
        s = open_store(index_config(tmp_path / f"s{in_one_call}", max_index_num=7))  # 6 items per file
        try:
            for i in range(12):
                props = {"UNIQ_KEY": f"U{i}", "KEYS": f" a{i}  b{i} "}
                if i == 3:
                    props = {"TAGS": "no keys"}
                elif i == 5:
                    props["KEYS"] = " ".join(f"m{n}" for n in range(17))
                s.put_message(make_msg(body=f"b{i}".encode(), props=props, sys_flag=0xC if i == 7 else 0))
            s.index_service.build_pending()
            assert s.index_service.pending == []
            for i in (0, 4, 11):
                for key in (f"U{i}", f"a{i}", f"b{i}"):
                    assert query_bodies(s, "TopicTest", key) == [f"b{i}".encode()]
            assert query_bodies(s, "TopicTest", "m16") == [b"b5"]
            assert query_bodies(s, "TopicTest", "U7") == []   # rolled back: not indexed
            images.append([f.mm[:] for f in s.index_service.index_files])
        finally:
            s.shutdown()
    assert len(images[0]) == 8   # 9 records x 3 keys + 1 + 17 = 45 items, 6 to a file
    assert images[0] == images[1]


def test_pending_keys_are_indexed_by_a_batch_a_query_and_a_clean_stop(tmp_path):
    from pyrmq.store.index_service import INDEX_BATCH

    config = index_config(tmp_path / "s", max_index_num=4 * INDEX_BATCH)
    s = open_store(config)
    try:
        index = s.index_service
        for i in range(INDEX_BATCH - 1):
            s.put_message(make_msg(body=f"b{i}".encode(), props={"KEYS": f"k{i}"}))
        assert len(index.pending) == INDEX_BATCH - 1 and index.index_files == []
        s.put_message(make_msg(body=b"last", props={"KEYS": "last"}))   # the batch is due
        assert index.pending == [] and index.index_files[0].index_count == INDEX_BATCH + 1
        s.put_message(make_msg(body=b"one", props={"KEYS": "one"}))
        assert len(index.pending) == 1
        assert query_bodies(s, "TopicTest", "one") == [b"one"]   # a query indexes what waits first
        assert index.pending == []
        s.put_message(make_msg(body=b"two", props={"KEYS": "two"}))
        assert s.retry_dispatch() and index.pending == []   # the broker's tick, once a second
        s.put_message(make_msg(body=b"three", props={"KEYS": "three"}))
    finally:
        s.shutdown()
    s = open_store(config)   # a clean stop indexed it: no replay, no rebuild
    try:
        assert s.last_exit_ok and s.index_rebuild is None
        assert query_bodies(s, "TopicTest", "three") == [b"three"]
    finally:
        s.shutdown()



def test_a_batch_sends_records_wait_together_and_a_failed_build_takes_them_back(tmp_path, monkeypatch):
    from pyrmq.store.index_service import INDEX_BATCH, IndexService

    def batch(first):
        entries = [BatchEntry(0, f"b{i}".encode(), f"KEYS\x01k{i}") for i in range(first, first + 10)]
        assert s.put_messages(make_batch(encode_batch(entries))).is_ok()

    s = open_store(index_config(tmp_path / "s", max_index_num=4 * INDEX_BATCH))
    try:
        index = s.index_service
        batch(0)
        batch(10)
        assert [r.queue_offset for r in index.pending] == list(range(20)) and index.index_files == []
        index.add_many(index.pending[12:])   # dispatched again (a later dispatcher failed): not twice
        later = index.pending[10:]
        del index.pending[10:]
        real_build = IndexService.build_pending
        monkeypatch.setattr(IndexService, "build_pending", lambda self: (_ for _ in ()).throw(OSError(24, "EMFILE")))
        index.failing = True   # the build is due at once
        with pytest.raises(OSError):
            index.add_many(later)
        assert [r.queue_offset for r in index.pending] == list(range(10))   # the batch was taken back
        monkeypatch.setattr(IndexService, "build_pending", real_build)
        index.add_many(later)   # its dispatch retried
        assert index.pending == [] and index.index_files[0].index_count == 21
        assert [query_bodies(s, "TopicTest", f"k{i}") for i in (0, 13, 19)] == [[b"b0"], [b"b13"], [b"b19"]]
    finally:
        s.shutdown()


def test_a_stop_that_cannot_index_the_last_records_is_left_unclean(tmp_path, monkeypatch):
    """The next start then rebuilds the index from the commit log: no acknowledged key is lost."""
    from pyrmq.store.index_service import IndexService

    config = index_config(tmp_path / "s")
    s = open_store(config)
    s.put_message(make_msg(body=b"kept", props={"KEYS": "kept"}))
    real_build = IndexService.build_pending
    monkeypatch.setattr(IndexService, "build_pending", lambda self: (_ for _ in ()).throw(OSError(28, "No space")))
    s.shutdown()
    monkeypatch.setattr(IndexService, "build_pending", real_build)
    assert os.path.exists(config.abort_path())
    s = open_store(config)
    try:
        assert not s.last_exit_ok
        assert s.index_rebuild is None or s.rebuild_index_step(None)
        assert query_bodies(s, "TopicTest", "kept") == [b"kept"]
    finally:
        s.shutdown()
    assert not os.path.exists(config.abort_path())


def test_skips_offsets_below_end_and_rollback(tmp_path):
    config = index_config(tmp_path / "s")
    s = open_store(config)
    try:
        s.put_message(make_msg(body=b"a", props={"KEYS": "k"}))
        r = s.put_message(make_msg(body=b"b", props={"KEYS": "k"})).append_result
        index = s.index_service
        index.build_pending()
        count = index.index_files[0].index_count
        index.build_index("TopicTest", 0, T0, 0, None, "k")  # below endPhyOffset: ignored
        index.build_index("TopicTest", r.wrote_offset + 999, T0, 0xC, "U", "k")  # ROLLBACK
        assert index.index_files[0].index_count == count
        index.build_index("TopicTest", r.wrote_offset + 999, T0, 0x4, None, "k")  # PREPARED
        assert index.index_files[0].index_count == count + 1
    finally:
        s.shutdown()


def test_index_disabled(tmp_path):
    config = index_config(tmp_path / "s", message_index_enable=False)
    s = open_store(config)
    try:
        s.put_message(make_msg(props={"KEYS": "k"}))
        assert s.query_message("TopicTest", "k", 32, 0, 2**62).buffers == []
    finally:
        s.shutdown()
    assert index_files(config) == []


def test_reopen_after_clean_shutdown(tmp_path):
    config = index_config(tmp_path / "s")
    s = open_store(config)
    for i in range(5):
        s.put_message(make_msg(body=f"b{i}".encode(), props={"KEYS": "k"}))
    s.shutdown()
    names = index_files(config)
    s = open_store(config)
    try:
        assert index_files(config) == names
        assert query_bodies(s, "TopicTest", "k") == [f"b{i}".encode() for i in range(5)]
        s.put_message(make_msg(body=b"b5", props={"KEYS": "k"}))
        assert index_files(config) == names  # appended to the same file
        assert len(query_bodies(s, "TopicTest", "k")) == 6
    finally:
        s.shutdown()


def test_abnormal_recovery_deletes_newer_files_and_rebuilds(tmp_path):
    config = index_config(tmp_path / "s", max_index_num=4)
    s = open_store(config)
    for i in range(4):  # file 1 full (3 items), file 2 has one
        s.put_message(make_msg(body=f"b{i}".encode(), props={"UNIQ_KEY": f"U{i}"}))
    s.index_service.build_pending()
    s.flush_consume_queues()  # checkpoint indexMsgTimestamp := file 1's end
    # A file is dropped at a crash only when it ends after the checkpoint's time (Apache's rule):
    # the later records must be stored in a later millisecond than file 1's last one.
    time.sleep(0.005)
    for i in range(4, 6):
        s.put_message(make_msg(body=f"b{i}".encode(), props={"UNIQ_KEY": f"U{i}"}))
    s.index_service.build_pending()
    first, second = index_files(config)
    s.shutdown()
    open(config.abort_path(), "w").close()  # the next start sees a crash
    s = open_store(config)
    try:
        assert not s.last_exit_ok
        names = index_files(config)
        assert names == [first]   # the second deleted, then rebuilt behind the live pipeline
        assert s.rebuild_index_step(None)   # what the broker does in the background
        names = index_files(config)
        assert names[0] == first and second not in names
        for i in range(6):
            assert query_bodies(s, "TopicTest", f"U{i}") == [f"b{i}".encode()]
    finally:
        s.shutdown()


# ------------------------------------------------------------------ Apache RocketMQ 4.9.8

apache = pytest.mark.skipif(not FIXTURE.exists(), reason="Apache store fixture missing")


@pytest.fixture
def java_config(tmp_path):
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return small_config(tmp_path / "store", mapped_file_size_commit_log=131072,
                        mapped_file_size_consume_queue=2000, max_hash_slot_num=64, max_index_num=2048)


def java_messages(store):
    out = []
    for q in range(4):
        offset = 0
        while True:
            r = store.get_message("g", "TopicTest", q, offset, 32, None)
            if not r.buffers:
                break
            out += decode_messages(b"".join(r.buffers))
            offset = r.next_begin_offset
    return [m for m in out if m.body.startswith(b"Hello RocketMQ")]


@apache
def test_query_apache_index_by_uniq_key(java_config):
    s = open_store(java_config)
    try:
        assert len(s.index_service.index_files) == 1
        msgs = java_messages(s)
        assert len(msgs) == 1000
        for m in msgs[::37]:
            r = s.query_message("TopicTest", m.properties["UNIQ_KEY"], 32, 0, 2**63 - 1)
            assert [decode_message(b)[0].body for b in r.buffers] == [m.body]
            assert r.index_last_update_phyoffset == 215744
    finally:
        s.shutdown()


@apache
def test_rebuilt_index_matches_apache_bytes(java_config):
    index_dir = Path(java_config.index_dir())
    (java_file,) = index_dir.iterdir()
    java_bytes = java_file.read_bytes()
    shutil.rmtree(index_dir)
    open(java_config.abort_path(), "w").close()  # abnormal start: re-dispatch the commit log
    s = open_store(java_config)
    s.shutdown()
    (ours,) = index_dir.iterdir()
    assert len(ours.name) == 17 and ours.name.isdigit()
    assert ours.read_bytes() == java_bytes

"""Power loss: what the disk holds is what was fsynced, and anything after may be lost or garbage.

A store takes records, flushes its consume queues and checkpoint (the last CQ fsync), takes
more, flushes its commit log (the last commit log fsync: everything up to there could have been
acknowledged under SYNC_FLUSH), and takes more again. The store directory is copied while the
store is open (the copy holds the page cache, unflushed bytes included), and in the copy the
bytes after each file's last fsync are damaged the way a power cut may leave them: cut off,
garbled, every other page lost, or a torn record. The copy then starts as after a crash.

Checked: the commit log ends exactly at the last record that is still whole from the start
(never before the last fsync), every consume queue holds exactly the records of its queue below
that end, at their queue offsets, contiguous, every such record is found by key, and the store
takes new records where the old ones end.

A second test does the same to a real broker killed under SYNC_FLUSH, with its consume queues,
index and checkpoint lost as well: everything acknowledged comes back.
"""

from __future__ import annotations

import os
import random
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
import trio

from pyrmq.codec.message import decode_messages
from pyrmq.remoting.client import RemotingClient
from pyrmq.store.message_store import GetMessageStatus
from tests.robustness.broker_process import BrokerProcess, Traffic, check_store, send_until_dead
from tests.store.store_helpers import make_msg, open_store, small_config

PAGE = 4096
CL_FILE = 64 * 1024
QUEUES = 3
DAMAGES = ("cut", "garble", "lose_every_other_page", "torn_record")


def put(store, i: int):
    """A record with its own key, bodies of varying sizes; returns (append result, queue, body)."""
    queue_id = i % QUEUES
    body = f"rec-{i}-".encode() + bytes([97 + i % 26]) * (50 + (i * 37) % 900)
    result = store.put_message(make_msg(queue_id=queue_id, body=body, props={"KEYS": f"key{i}"}))
    assert result.append_result is not None, result.status
    return result.append_result, queue_id, body


def damage_after(path: Path, start: int, how: str, rng: random.Random) -> None:
    """Damage ``path`` from byte ``start`` on (``start`` may be past its end: nothing to do)."""
    size = path.stat().st_size
    if start >= size:
        return
    with open(path, "r+b") as f:
        if how in ("cut", "torn_record"):
            f.seek(start)
            f.write(bytes(size - start))
        elif how == "garble":
            f.seek(start)
            f.write(rng.randbytes(size - start))
        elif how == "lose_every_other_page":
            # the page holding ``start`` keeps its fsynced part; from the next page on, every
            # second page is lost (zeros, as a sparse file reads)
            first = -(-start // PAGE) * PAGE
            if first > start and rng.random() < 0.5:   # the page of the last fsync: old or new
                f.seek(start)
                f.write(bytes(min(first, size) - start))
            for page in range(first, size, 2 * PAGE):
                f.seek(page)
                f.write(bytes(min(PAGE, size - page)))
        else:
            raise ValueError(how)


def power_cut(root: Path, cl_flushed: int, cq_flushed: dict[tuple[str, int], int], how: str,
              torn_at: int, rng: random.Random) -> None:
    """Apply the damage of ``how`` to the copied store under ``root``."""
    cl_dir = root / "commitlog"
    for name in sorted(os.listdir(cl_dir)):
        file_from = int(name)
        start = torn_at - file_from if how == "torn_record" else cl_flushed - file_from
        if file_from + CL_FILE <= cl_flushed:
            continue
        if how == "cut" and file_from > cl_flushed:
            os.unlink(cl_dir / name)     # never synced: its directory entry may be gone too
            continue
        damage_after(cl_dir / name, max(0, start), how if how != "torn_record" else "cut", rng)
    for (topic, queue_id), flushed in cq_flushed.items():
        queue_dir = root / "consumequeue" / topic / str(queue_id)
        for name in sorted(os.listdir(queue_dir)):
            file_from = int(name)
            size = (queue_dir / name).stat().st_size
            if file_from + size <= flushed:
                continue
            # zeros, never garbage: an unflushed consume queue page reads back old (zero) or new
            mode = "lose_every_other_page" if how == "lose_every_other_page" else "cut"
            damage_after(queue_dir / name, max(0, flushed - file_from), mode, rng)


def intact_prefix_end(original: Path, damaged: Path, records: list) -> int:
    """End of the longest run of records, from the first, whose bytes are unchanged."""
    def contents(root: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in (root / "commitlog").iterdir()}

    before, after = contents(original), contents(damaged)
    end = 0
    for append, _, _ in records:
        name = f"{append.wrote_offset - append.wrote_offset % CL_FILE:020d}"
        span = slice(append.wrote_offset % CL_FILE, append.wrote_offset % CL_FILE + append.wrote_bytes)
        if name not in after or before[name][span] != after[name][span]:
            return end
        end = append.wrote_offset + append.wrote_bytes
    return end


def queue_contents(store, queue_id: int) -> list:
    out, offset = [], 0
    while True:
        r = store.get_message("g", "TopicTest", queue_id, offset, 32, None)
        if r.status is not GetMessageStatus.FOUND:
            return out
        out += decode_messages(b"".join(r.buffers))
        offset = r.next_begin_offset


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("seed", [1, 2])
def test_power_cut_after_the_last_fsync(tmp_path, how, seed):
    rng = random.Random(seed)
    config = small_config(tmp_path / "live", mapped_file_size_commit_log=CL_FILE,
                          mapped_file_size_consume_queue=20 * 64, max_index_num=100_000, max_hash_slot_num=1024)
    store = open_store(config)
    records = [put(store, i) for i in range(300 + seed * 50)]
    store.flush_commit_log()
    store.flush_consume_queues()   # consume queues, index, checkpoint: the last CQ fsync
    cq_flushed = {(cq.topic, cq.queue_id): cq.mapped_file_queue.flushed_where for cq in store.consume_queues}
    records += [put(store, i) for i in range(len(records), len(records) + 200)]
    cl_flushed = store.flush_commit_log()   # the last commit log fsync: all of this was acked
    acked = len(records)
    records += [put(store, i) for i in range(len(records), len(records) + 150 + seed * 40)]
    torn = records[acked + 3][0]
    torn_at = torn.wrote_offset + rng.randrange(1, torn.wrote_bytes)
    damaged = tmp_path / "damaged"
    shutil.copytree(config.store_path_root_dir, damaged)
    store.shutdown()
    power_cut(damaged, cl_flushed, cq_flushed, how, torn_at, rng)
    expected_end = intact_prefix_end(Path(config.store_path_root_dir), damaged, records)
    assert expected_end >= cl_flushed

    copy_config = small_config(damaged, mapped_file_size_commit_log=CL_FILE,
                               mapped_file_size_consume_queue=20 * 64, max_index_num=100_000,
                               max_hash_slot_num=1024)
    assert os.path.exists(copy_config.abort_path())     # the copy was taken from a running store
    s = open_store(copy_config)
    try:
        assert s.get_max_phy_offset() == expected_end, (how, cl_flushed, expected_end)
        kept = [r for r in records if r[0].wrote_offset + r[0].wrote_bytes <= expected_end]
        assert len(kept) >= acked
        by_queue = defaultdict(list)
        for append, queue_id, body in kept:
            by_queue[queue_id].append((append.logics_offset, body))
        for queue_id in range(QUEUES):
            got = [(m.queue_offset, m.body) for m in queue_contents(s, queue_id)]
            assert got == by_queue[queue_id], f"queue {queue_id} after {how}"
        assert s.rebuild_index_step(None)   # what the broker does in the background
        for i in range(0, len(kept), 7):
            found = s.query_message("TopicTest", f"key{i}", 32, 0, 2**63 - 1)
            assert len(found.buffers) == 1, f"key{i} not found after {how}"
        # writing continues right after the recovered end, at the next queue offsets
        again = s.put_message(make_msg(queue_id=0, body=b"after"))
        assert again.append_result.wrote_offset >= expected_end
        assert again.append_result.logics_offset == len(by_queue[0])
    finally:
        s.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["cut", "garble"])
async def test_killed_broker_with_a_power_cut_keeps_every_acknowledged_message(tmp_path, how):
    """A SYNC_FLUSH broker killed mid-traffic; in a copy of its store the commit log is damaged
    after the end of the last acknowledged record, and the consume queues, index files and
    checkpoint are lost (the worst a power cut can do to files the broker had not fsynced: it
    rebuilds them all from the commit log). Every acknowledged message comes back."""
    server = BrokerProcess(tmp_path / "a", mappedFileSizeCommitLog=CL_FILE, mappedFileSizeConsumeQueue=20 * 64)
    traffic = Traffic()
    try:
        server.start(crash_point="commitlog.appended:400")
        async with RemotingClient() as client:
            await server.wait_ready(client)
            await send_until_dead(server, client, traffic)
        assert await server.wait_exit() == -9
    finally:
        server.kill()
    assert traffic.acks
    # the copy, damaged: commit log bytes after the end of the last acknowledged record
    copy = BrokerProcess(tmp_path / "b", mappedFileSizeCommitLog=CL_FILE, mappedFileSizeConsumeQueue=20 * 64)
    shutil.copytree(server.store, copy.store)
    (copy.store / "lock").unlink(missing_ok=True)
    last_acked_end = max(ack_end(copy.store, a) for a in traffic.acks)
    rng = random.Random(7)
    for name in sorted(os.listdir(copy.store / "commitlog")):
        file_from = int(name)
        if file_from + CL_FILE > last_acked_end:
            damage_after(copy.store / "commitlog" / name, max(0, last_acked_end - file_from), how, rng)
    shutil.rmtree(copy.store / "consumequeue")
    shutil.rmtree(copy.store / "index", ignore_errors=True)
    (copy.store / "checkpoint").write_bytes(bytes(4096))
    try:
        copy.start()
        async with RemotingClient() as client:
            with trio.fail_after(60):
                await copy.wait_ready(client)
                counts = await check_store(client, copy.broker_addr, traffic)
        assert counts["acked"] == len(traffic.acks)
        print(f"killed broker, power cut ({how}): {counts}")
        assert copy.stop() == 0
    finally:
        copy.kill()


def ack_end(store: Path, ack) -> int:
    """Commit log offset just after an acknowledged record, read from its consume queue unit."""
    unit_file = None
    queue_dir = store / "consumequeue" / ack.topic / str(ack.queue_id)
    pos = ack.queue_offset * 20
    for name in sorted(os.listdir(queue_dir)):
        if int(name) <= pos:
            unit_file = name
    data = (queue_dir / unit_file).read_bytes()
    rel = pos - int(unit_file)
    offset = int.from_bytes(data[rel:rel + 8], "big")
    size = int.from_bytes(data[rel + 8:rel + 12], "big")
    return offset + size

"""Start-up reads only what recovery needs (issue 7, point 2): with 2,000 consume queues of one
message each, a clean start used to read every queue's last file whole (a 6 MB file each: 25 s
and 8.9 GB of page cache in the issue's report).  The work a start does is asserted here --
consume queue units read and pages touched (page faults) -- never the wall time, which
docs/RELIABILITY.md gives with the command that measured it.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import resource

import pytest

from pyrmq.codec.commit_log_walk import RecordWalker
from pyrmq.codec.message import pickup_store_timestamp
from pyrmq.remoting.client import RemotingClient
from pyrmq.store.checkpoint import StoreCheckpoint
from pyrmq.store.message_store import DefaultMessageStore, MessageStoreConfig
from tests.robustness.store_faults import BrokerProcess, broker_process, scratch_tmpfs
from tests.store.store_helpers import make_msg

__all__ = ["broker_process"]   # the fixture, imported for pytest

QUEUES = 2000
TOPICS = QUEUES // 4
# A binary search over a 300,000-unit file reads about 20 units; a queue scanned unit by unit
# (a crash, written since the checkpoint) reads its units and one more.
UNITS_PER_TRUSTED_QUEUE = 24
# Pages a start may touch per queue: its file's first page, the pages of the search, the
# process's own bookkeeping (about 1.5 measured).  Reading the last file whole was 1,465 pages
# (6 MB) per queue, 90 page faults with the kernel's fault-around of 16 pages.
PAGES_PER_QUEUE = 8
PAGE_FAULTS_BESIDES = 5000   # the rest of the start (commit log, index, imports)


def store_config(root) -> MessageStoreConfig:
    # default consume queue files (300,000 units, 6 MB) as in the report; small commit log files
    # so that a crash replays only the last one
    return MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=256 * 1024,
                              max_hash_slot_num=1000, max_index_num=8000)


def build_store(root, queues: int = QUEUES) -> None:
    store = DefaultMessageStore(store_config(root))
    store.start()
    for i in range(queues):
        assert store.put_message(make_msg(topic=f"TopicScale{i // 4}", queue_id=i % 4, body=b"b%d" % i)).is_ok()
    store.shutdown()


def page_faults() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


def start_counting(root) -> tuple[DefaultMessageStore, int, int]:
    """Open the store; returns it, the consume queue units read and the page faults taken."""
    store = DefaultMessageStore(store_config(root))
    before = page_faults()
    store.start()
    faults = page_faults() - before
    return store, store.consume_queues.units_read_at_recovery(), faults


@pytest.fixture
def scratch(tmp_path):
    """Where the 2,000-queue store goes: a tmpfs if possible (2,000 file creations and first
    writes take 0.4 s there, 6 s on a virtual disk)."""
    with scratch_tmpfs(tmp_path / "scratch", "512m") as path:
        yield path


def test_clean_start_with_2000_queues_reads_a_few_units_each(scratch):
    build_store(scratch / "store")
    store, units, faults = start_counting(scratch / "store")
    try:
        assert len(store.consume_queues.queues) == QUEUES
        assert units <= QUEUES * UNITS_PER_TRUSTED_QUEUE
        assert faults <= QUEUES * PAGES_PER_QUEUE + PAGE_FAULTS_BESIDES
        for i in (0, 1, QUEUES - 1):
            assert store.get_max_offset_in_queue(f"TopicScale{i // 4}", i % 4) == 1
        assert store.put_message(make_msg(topic="TopicScale0", queue_id=0)).append_result.logics_offset == 1
    finally:
        store.shutdown()


def test_crash_start_scans_only_the_queues_written_since_the_checkpoint(scratch):
    root = scratch / "store"
    build_store(root)
    config = store_config(root)
    # a checkpoint taken just after the last commit log file began; then a crash
    store = DefaultMessageStore(config)
    store.start()
    last = store.commit_log.mapped_file_queue.mapped_files[-1]
    checkpointed = pickup_store_timestamp(last.view, 0) + 3000   # + Apache's 3 s correction
    written_since = {(r.topic, r.queue_id) for r in _records(last)}
    store.shutdown()
    checkpoint = StoreCheckpoint(config.checkpoint_path())
    checkpoint.physic_msg_timestamp = checkpoint.logics_msg_timestamp = checkpointed
    checkpoint.close()
    open(config.abort_path(), "w").close()
    assert 0 < len(written_since) < QUEUES // 2

    store, units, faults = start_counting(root)
    try:
        assert not store.last_exit_ok
        careful = len(written_since)
        assert units <= careful * 3 + (QUEUES - careful) * UNITS_PER_TRUSTED_QUEUE
        # a queue scanned with care reads its data and the reserved chunk after it (64 KiB)
        assert faults <= careful * PAGES_PER_QUEUE + QUEUES * PAGES_PER_QUEUE + PAGE_FAULTS_BESIDES
        assert all(cq.get_max_offset_in_queue() == 1 for cq in store.consume_queues)
    finally:
        store.shutdown()


def resident_pages(path) -> int:
    """Pages of ``path`` in the page cache (mincore over a mapping of it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    size = os.path.getsize(path)
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    anchor = ctypes.c_char.from_buffer(mm)
    vec = (ctypes.c_ubyte * pages)()
    try:
        if libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(size), vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return sum(v & 1 for v in vec)
    finally:
        del anchor
        mm.close()


def test_start_leaves_the_consume_queue_files_out_of_the_page_cache(tmp_path):
    """The issue's 8.9 GB of page cache: a fault on a mapping reads read_ahead_kb around it (8 MB
    on the disk here), a whole 6 MB consume queue file for the one unit wanted.  Consume queue
    mappings fault in their page only (MADV_RANDOM)."""
    queues = 200   # a per-queue property; 200 queues build quickly on a real disk
    root = tmp_path / "store"
    build_store(root, queues)
    files = sorted((root / "consumequeue").glob("*/*/*"))
    assert len(files) == queues
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    if sum(map(resident_pages, files)):
        pytest.skip("this filesystem keeps its pages (tmpfs): there is no page cache to measure")
    store = DefaultMessageStore(store_config(root))
    store.start()
    try:
        assert sum(map(resident_pages, files)) <= queues * 2
    finally:
        store.shutdown()


def _records(mf):
    return list(RecordWalker(mf.view, 0, mf.wrote_position, file_from_offset=mf.file_from_offset))


def _page_faults_of(pid: int) -> int:
    # /proc/<pid>/stat: after "(comm)", minflt and majflt are the 8th and 10th fields
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[7]) + int(fields[9])


async def _start_and_count(broker: BrokerProcess) -> int:
    """Page faults the broker process took until it was ready."""
    broker.start()
    async with RemotingClient() as client:
        await broker.wait_ready(client)
        faults = _page_faults_of(broker.proc.pid)
    assert broker.stop() == 0
    return faults


@pytest.mark.slow
async def test_broker_process_starts_on_2000_queues_touching_a_few_pages_each(tmp_path, scratch, broker_process):
    build_store(scratch / "store")
    conf = {"mappedFileSizeCommitLog": 256 * 1024, "maxHashSlotNum": 1000, "maxIndexNum": 8000}
    baseline = await _start_and_count(broker_process(tmp_path / "a", scratch / "empty", **conf))
    with_queues = await _start_and_count(broker_process(tmp_path / "b", scratch / "store", **conf))
    assert with_queues - baseline <= QUEUES * PAGES_PER_QUEUE, (baseline, with_queues)

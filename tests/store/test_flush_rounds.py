"""What the periodic flush of the consume queues and the index syncs: many queue files due at
once are synced by one syncfs of their file system, and the index file being written waits for a
clean stop (recovery after a crash drops and rebuilds it anyway)."""

from __future__ import annotations

import os

import pytest

from pyrmq.store import consume_queue_table, mapped_file
from pyrmq.store.consume_queue_table import SYNCFS_MIN_FILES
from pyrmq.store.index_file import IndexFile
from store_helpers import make_msg, open_store, small_config

pytestmark = pytest.mark.skipif(mapped_file._SYNCFS is None, reason="no syncfs in this libc")


@pytest.fixture
def syncs(monkeypatch):
    """Counts of fdatasync (by file name) and syncfs calls made by the store."""
    counts: dict[str, list] = {"fdatasync": [], "syncfs": []}
    real_fdatasync, real_sync_fs = os.fdatasync, mapped_file.sync_file_system

    def fdatasync(fd):
        counts["fdatasync"].append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fdatasync(fd)

    def sync_file_system(directory):
        counts["syncfs"].append(directory)
        return real_sync_fs(directory)

    monkeypatch.setattr(mapped_file.os, "fdatasync", fdatasync)
    monkeypatch.setattr(consume_queue_table, "sync_file_system", sync_file_system)
    return counts


def fill(store, queues: int) -> None:
    for t in range(queues):
        store.put_message(make_msg(topic=f"T_{t}", body=b"x"))
    store.flush_commit_log()


def cq_syncs(counts) -> list[str]:
    return [p for p in counts["fdatasync"] if f"{os.sep}consumequeue{os.sep}" in p]


def test_many_queues_due_are_synced_by_one_syncfs(tmp_path, syncs):
    store = open_store(small_config(tmp_path))
    try:
        fill(store, SYNCFS_MIN_FILES)
        queues = list(store.consume_queues)
        assert all(cq.mapped_file_queue.flushed_where == 0 for cq in queues)
        syncs["fdatasync"].clear()
        store.flush_consume_queues()
        assert syncs["syncfs"] == [store.config.consume_queue_dir()]
        assert cq_syncs(syncs) == []
        # each queue is recorded flushed to the end of its unit, as a per-file sync would
        assert all(cq.mapped_file_queue.flushed_where == 20 for cq in queues)
        assert all(cq.mapped_file_queue.mapped_files[0].flushed_position == 20 for cq in queues)
    finally:
        store.shutdown()


def test_few_queues_due_are_synced_alone(tmp_path, syncs):
    store = open_store(small_config(tmp_path))
    try:
        fill(store, SYNCFS_MIN_FILES - 1)
        syncs["fdatasync"].clear()
        store.flush_consume_queues()
        assert syncs["syncfs"] == []
        assert len(cq_syncs(syncs)) == SYNCFS_MIN_FILES - 1
        assert all(cq.mapped_file_queue.flushed_where == 20 for cq in store.consume_queues)
    finally:
        store.shutdown()


def test_a_queue_on_another_file_system_is_still_synced_alone(tmp_path, syncs):
    store = open_store(small_config(tmp_path))
    try:
        fill(store, SYNCFS_MIN_FILES)
        elsewhere = store.consume_queues.get("T_3", 0)
        elsewhere.mapped_file_queue.mapped_files[0].st_dev = -1   # as if mounted under the store
        syncs["fdatasync"].clear()
        store.flush_consume_queues()
        assert len(syncs["syncfs"]) == 1
        assert cq_syncs(syncs) == [elsewhere.mapped_file_queue.mapped_files[0].path]
        assert all(cq.mapped_file_queue.flushed_where == 20 for cq in store.consume_queues)
    finally:
        store.shutdown()


def test_the_periodic_flush_leaves_the_index_file_being_written(tmp_path, monkeypatch):
    flushed: list[str] = []
    real = IndexFile.flush
    monkeypatch.setattr(IndexFile, "flush", lambda self: (flushed.append(self.file_name), real(self))[1])
    store = open_store(small_config(tmp_path))
    try:
        store.put_message(make_msg(props={"UNIQ_KEY": "U0"}))
        store.index_service.build_pending()
        live = store.index_service.index_files[-1].file_name
        store.flush_consume_queues(2, whole_index=False)
        assert flushed == []
        store.flush_consume_queues()
        assert flushed == [live]
    finally:
        store.shutdown()

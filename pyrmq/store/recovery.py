"""Startup recovery of the CommitLog and ConsumeQueues (store.md §8, Java 4.9.8 algorithm).

Normal recovery (clean shutdown) scans the last three CommitLog files to find the end of valid
data. Abnormal recovery (``abort`` file present) starts from the newest file whose first record
is older than the checkpoint, re-dispatching every valid record to the consume queues
(duplicates are ignored there). Both stop at the first invalid record and truncate everything
after it; consume-queue units pointing beyond the end are dropped.
"""

from __future__ import annotations

import logging
import struct
from typing import Callable, Iterable

from pyrmq.codec.message import (
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MAGIC_POSITION,
    RecordInfo,
    check_record,
    pickup_store_timestamp,
)
from pyrmq.store.checkpoint import StoreCheckpoint
from pyrmq.store.commit_log import CommitLog
from pyrmq.store.consume_queue import ConsumeQueue
from pyrmq.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")


def recover_consume_queues(queues: Iterable[ConsumeQueue]) -> int:
    """Recover every queue; returns the max (offset + size) over their last units, or -1."""
    max_phy = -1
    for cq in queues:
        cq.recover()
        max_phy = max(max_phy, cq.max_physic_offset)
    return max_phy


def _scan(commit_log: CommitLog, index: int, check_crc: bool,
          on_record: Callable[[RecordInfo], None] | None, pos: int = 0) -> int:
    """Walk records from ``pos`` in file ``index``; returns the offset after the last valid one."""
    files = commit_log.mapped_file_queue.mapped_files
    mf = files[index]
    while True:
        info = check_record(mf.view, pos, mf.file_size, check_crc=check_crc,
                            expected_offset=mf.file_from_offset + pos,
                            parse_properties=on_record is not None)
        if info is None:
            log.info("commit log recovery: end of valid data in %s at %d", mf.file_name, pos)
            break
        if info == 0:  # blank record: the rest of this file is empty
            if index + 1 >= len(files):
                break
            index += 1
            mf = files[index]
            pos = 0
            continue
        assert isinstance(info, RecordInfo)
        if on_record is not None:
            on_record(info)
        pos += info.size
    return mf.file_from_offset + pos


def _finish(commit_log: CommitLog, process_offset: int, max_phy_offset_of_cq: int,
            truncate_cqs: Callable[[int], None], clean_run: int) -> None:
    commit_log.mapped_file_queue.truncate_dirty_files(process_offset, clean_run)
    # (Java tests >=; units ending exactly at the end are intact, so > suffices)
    if max_phy_offset_of_cq > process_offset:
        log.warning("consume queues reach %d beyond the commit log end %d; truncating them",
                    max_phy_offset_of_cq, process_offset)
        truncate_cqs(process_offset)


def recover_normally(commit_log: CommitLog, *, check_crc: bool, max_phy_offset_of_cq: int,
                     truncate_cqs: Callable[[int], None], destroy_cqs: Callable[[], None],
                     clean_run: int) -> int:
    """Recovery after a clean shutdown; returns the commit log end offset."""
    files = commit_log.mapped_file_queue.mapped_files
    if not files:
        commit_log.mapped_file_queue.set_positions(0)
        destroy_cqs()
        return 0
    process_offset = _scan(commit_log, max(0, len(files) - 3), check_crc, None)
    _finish(commit_log, process_offset, max_phy_offset_of_cq, truncate_cqs, clean_run)
    return process_offset


def _matched_recover_start(mf: MappedFile, min_timestamp: int) -> bool:
    (magic,) = _INT32.unpack_from(mf.view, MAGIC_POSITION)
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        return False
    store_timestamp = pickup_store_timestamp(mf.view, 0)
    return store_timestamp != 0 and store_timestamp <= min_timestamp


def recover_abnormally(commit_log: CommitLog, *, check_crc: bool, checkpoint: StoreCheckpoint,
                       dispatch: Callable[[RecordInfo], None], max_phy_offset_of_cq: int,
                       truncate_cqs: Callable[[int], None], destroy_cqs: Callable[[], None],
                       clean_run: int) -> int:
    """Recovery after a crash: re-dispatch from a checkpointed file; returns the end offset."""
    files = commit_log.mapped_file_queue.mapped_files
    if not files:
        commit_log.mapped_file_queue.set_positions(0)
        destroy_cqs()
        return 0
    min_timestamp = checkpoint.min_timestamp()
    index = 0
    for i in range(len(files) - 1, -1, -1):
        if _matched_recover_start(files[i], min_timestamp):
            index = i
            break
    log.info("abnormal recovery starts at commit log file %s", files[index].file_name)
    process_offset = _scan(commit_log, index, check_crc, dispatch)
    _finish(commit_log, process_offset, max_phy_offset_of_cq, truncate_cqs, clean_run)
    return process_offset


def reput(commit_log: CommitLog, from_offset: int, dispatch: Callable[[RecordInfo], None]) -> int:
    """Dispatch every record from ``from_offset`` to the end (store.md §3 catch-up at start).

    Inline dispatch keeps the queues current while running; this covers records appended but
    not dispatched before the last stop (e.g. a Java broker whose reput lagged). Returns the
    offset where it stopped.
    """
    files = commit_log.mapped_file_queue.mapped_files
    if not files:
        return 0
    offset = max(from_offset, commit_log.min_offset)
    if offset >= commit_log.max_offset:
        return offset
    mf = commit_log.mapped_file_queue.find_mapped_file_by_offset(offset)
    if mf is None:
        return offset
    index = files.index(mf)
    # only the written part of each file is scanned: the last file's end is its write position
    return _scan(commit_log, index, False, dispatch, offset - mf.file_from_offset)

"""Startup recovery of the CommitLog (store.md §8, Java 4.9.8 algorithm): where valid data ends,
and from where the dispatch pipeline must replay it.

Normal recovery (clean shutdown) scans the last three CommitLog files to find the end of valid
data; the consume queues are complete up to their own end, so replay starts there. Abnormal
recovery (``abort`` file present) scans from the newest file whose first record is older than
the checkpoint; the queues that scan meets are the only ones whose tails may be torn, so only
they are recovered unit by unit (``recover_cqs``), the rest by a binary search
(consume_queue.py), and replay starts where the first of them ends (consume queues and index
ignore duplicates).
Both stop at the first invalid record and truncate everything after it, consume-queue units
pointing beyond the end included. Recovery dispatches nothing itself: the store hands the
replay start to its :class:`~pyrmq.store.dispatch.ReputService`, the one dispatch path.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Callable

from pyrmq.codec.commit_log_walk import RecordWalker, WalkEnd
from pyrmq.codec.message import (
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MAGIC_POSITION,
    MessageSysFlag,
    RecordInfo,
    check_record,
    pickup_store_timestamp,
)
from pyrmq.store.checkpoint import StoreCheckpoint
from pyrmq.store.commit_log import CommitLog
from pyrmq.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
_TRANSACTION_MASK = MessageSysFlag.TRANSACTION_MASK
_QUEUED_TYPES = MessageSysFlag.QUEUED_TYPES


@dataclass(frozen=True, slots=True)
class Recovered:
    """The commit log end after recovery, and where replay into the dispatchers starts."""

    end_offset: int
    replay_from: int


def _scan(commit_log: CommitLog, index: int, check_crc: bool,
          queues: set[tuple[str, int]] | None = None) -> int:
    """Walk records from the start of file ``index``; returns the offset after the last valid one
    (and adds the (topic, queueId) of every record to ``queues``)."""
    files = commit_log.mapped_file_queue.mapped_files
    while True:
        mf = files[index]
        # no record lies in a hole: those are zeros, and not read (MappedFile.leading_data_end)
        walker = RecordWalker(mf.view, 0, mf.leading_data_end(), file_from_offset=mf.file_from_offset,
                              check_crc=check_crc)
        if queues is None:
            walker.skip_all()
        else:
            for record in walker:
                if record.sys_flag & _TRANSACTION_MASK in _QUEUED_TYPES:   # a half record has no unit
                    queues.add((record.topic, record.queue_id))
        whole_file = walker.end is WalkEnd.END_OF_FILE or walker.position == mf.file_size
        if whole_file and index + 1 < len(files):
            index += 1
            continue
        if not whole_file:
            log.info("commit log recovery: end of valid data in %s at %d", mf.file_name, walker.position)
        return mf.file_from_offset + walker.position


def _scan_start(commit_log: CommitLog, index: int, replay_hint: int) -> int:
    """``index``, or the earlier file the replay will start in (``replay_hint``: how far the
    consume queues got).

    The replay hands every record from its start to the end to the dispatchers.  Bytes recovery
    has not checked may hold a damaged record: the replay would stop there, and every append after
    it would wait behind it -- acknowledged, never consumable, and gone at the next clean start,
    whose scan truncates at that record.  Scanning from the replay's file finds the damage first.
    """
    mfq = commit_log.mapped_file_queue
    first = mfq.mapped_files[0].file_from_offset
    replay_index = (max(replay_hint, first) - first) // mfq.mapped_file_size
    return min(index, replay_index)


def _replay_start(commit_log: CommitLog, offset: int, end_offset: int) -> int:
    """``offset`` if a record starts there (or it is the end); otherwise the start of its file.

    The consume queues say how far dispatch got, but a damaged unit can name any offset: a
    replay started inside a record would stop there as invalid, and every later append would wait
    behind it -- acknowledged, and never consumable.  A file always starts at a record, and
    replaying what was dispatched already is harmless (consume queues and index skip duplicates).
    """
    offset = max(offset, commit_log.min_offset, 0)
    if offset >= end_offset:
        return end_offset
    mf = commit_log.mapped_file_queue.find_mapped_file_by_offset(offset)
    if mf is None:
        return max(commit_log.min_offset, 0)
    pos = offset - mf.file_from_offset
    if pos == 0 or isinstance(check_record(mf.view, pos, mf.file_size, expected_offset=offset), RecordInfo):
        return offset
    log.warning("consume queues end at %d, inside a record: replaying from %s", offset, mf.file_name)
    return mf.file_from_offset


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
                     clean_run: int) -> Recovered:
    """Recovery after a clean shutdown."""
    files = commit_log.mapped_file_queue.mapped_files
    if not files:
        commit_log.mapped_file_queue.set_positions(0)
        destroy_cqs()
        return Recovered(0, 0)
    process_offset = _scan(commit_log, _scan_start(commit_log, max(0, len(files) - 3), max_phy_offset_of_cq), check_crc)
    _finish(commit_log, process_offset, max_phy_offset_of_cq, truncate_cqs, clean_run)
    # records appended but not dispatched before the stop (a Java broker whose reput lagged)
    replay_from = _replay_start(commit_log, min(max_phy_offset_of_cq, process_offset), process_offset)
    return Recovered(process_offset, replay_from)


def _matched_recover_start(mf: MappedFile, min_timestamp: int) -> bool:
    if mf.leading_data_end() == 0:   # nothing written: no record to read
        return False
    (magic,) = _INT32.unpack_from(mf.view, MAGIC_POSITION)
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        return False
    store_timestamp = pickup_store_timestamp(mf.view, 0)
    return store_timestamp != 0 and store_timestamp <= min_timestamp


def recover_abnormally(commit_log: CommitLog, *, check_crc: bool, checkpoint: StoreCheckpoint,
                       estimate_cqs: Callable[[], int], recover_cqs: Callable[[set[tuple[str, int]]], int],
                       queue_ends: Callable[[set[tuple[str, int]], int], int],
                       truncate_cqs: Callable[[int], None], destroy_cqs: Callable[[], None],
                       clean_run: int) -> Recovered:
    """Recovery after a crash: replay from a file the checkpoint says was completely dispatched.

    ``estimate_cqs()`` is the max commit log offset the consume queues reach, read without
    changing them (where the scan must start); ``recover_cqs(queues)`` recovers them -- those in
    ``queues``, written to since the checkpoint, unit by unit -- and returns that max for real;
    ``queue_ends(queues, default)`` is then the least end of those queues (``default`` for one
    without units).
    """
    files = commit_log.mapped_file_queue.mapped_files
    if not files:
        commit_log.mapped_file_queue.set_positions(0)
        destroy_cqs()
        return Recovered(0, 0)
    min_timestamp = checkpoint.min_timestamp()
    index = 0
    for i in range(len(files) - 1, -1, -1):
        if _matched_recover_start(files[i], min_timestamp):
            index = i
            break
    start = files[index].file_from_offset
    index = _scan_start(commit_log, index, min(start, estimate_cqs()))
    log.info("abnormal recovery starts at commit log file %s", files[index].file_name)
    touched: set[tuple[str, int]] = set()
    process_offset = _scan(commit_log, index, check_crc, touched)
    max_phy_offset_of_cq = recover_cqs(touched)
    if touched:
        # a record the scan met is missing from its queue only past that queue's end: the replay
        # starts at the queue that ends first (after a kill -9 the page cache kept every unit,
        # so that is near the end, not the checkpointed file); a queue without units may lack
        # all of its records since the checkpoint; none at all (-1): everything is replayed
        replay_point = min(max_phy_offset_of_cq, queue_ends(touched, start))
    else:
        replay_point = min(start, max_phy_offset_of_cq)
    earlier = _scan_start(commit_log, index, replay_point)
    if earlier < index:   # a queue was torn shorter than its estimate: the replay starts earlier
        process_offset = _scan(commit_log, earlier, check_crc)
    _finish(commit_log, process_offset, max_phy_offset_of_cq, truncate_cqs, clean_run)
    replay_from = _replay_start(commit_log, replay_point, process_offset)
    return Recovered(process_offset, replay_from)

"""File expiry and the disk guard (store.md section 10): Apache's CleanCommitLogService,
CleanConsumeQueueService and isSpaceFull, as synchronous calls.

The broker calls :meth:`CleanService.check_disk_space` and :meth:`CleanService.run` from a
worker thread every ``cleanResourceInterval`` ms (every call here may block: statvfs, stat,
unlink, munmap). The put path only reads :attr:`CleanService.disk_full`.

Commit log files are deleted oldest first, never the last one, and only while the oldest is
deletable (no holes): when it is older than ``fileReservedTime`` hours and either the hour is
one of ``deleteWhen``, the partition is fuller than ``diskMaxUsedSpaceRatio`` or a manual
deletion was asked for; past ``diskSpaceCleanForciblyRatio`` the age no longer matters. Then
consume-queue files whose last unit points below the commit log's new minimum and index files
ending below it go too, and every queue's min offset moves. With ``deleteOnlyConsumed`` (beyond
RocketMQ) a file is kept while some consumer group has not consumed a message in it.

Threads: deletions run beside dispatch and pulls on the event loop. Files leave their lists
before they are closed; readers that picked one up just before get ``None`` (a released view)
like Apache's failed ``hold()``; a mapping still exported by a reader's view cannot be unmapped
yet and is retried later ("hanged" files, Apache's redeleteHangedFile).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from pyrmq.codec.store_formats import CQ_STORE_UNIT_SIZE, CQ_UNIT
from pyrmq.store.mapped_file import FixedMapping, MappedFile

if TYPE_CHECKING:
    from pyrmq.store.consume_queue import ConsumeQueue
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

# Apache clamps diskMaxUsedSpaceRatio (percent) to this range.
DISK_MAX_USED_SPACE_RATIO_MIN = 10
DISK_MAX_USED_SPACE_RATIO_MAX = 95
SECONDS_PER_HOUR = 3600
# Rounds in which a manual deletion request (DELETE_EXPIRED_COMMITLOG) ignores the hour.
MAX_MANUAL_DELETE_FILE_TIMES = 20

# used ratio (0..1) of the partition holding a path; negative when it cannot be read
DiskUsage = Callable[[str], float]


def disk_partition_used_ratio(path: str) -> float:
    """Used fraction of the partition holding ``path``, rounded up to 0.01 as Apache's
    UtilAll.getDiskPartitionSpaceUsedPercent (blocks reserved for root count as not usable);
    -1 when the path does not exist."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if st.f_blocks <= 0 or entire <= 0:
        return -1.0
    return -(-used * 100 // entire) / 100


def setting_as_ratio(value: float) -> float:
    """diskSpaceWarningLevelRatio / diskSpaceCleanForciblyRatio: 4.9.x ratios (0.90) or 5.x
    percents (90)."""
    return value if value <= 1 else value / 100


def is_it_time_to_do(when: str, hour: int) -> bool:
    """Whether ``hour`` is one of the ``;``-separated hours of ``deleteWhen`` (UtilAll.isItTimeToDo)."""
    return any(w.strip().isdigit() and int(w) == hour for w in when.split(";"))


@dataclass(frozen=True)
class ConsumedBoundary:
    """The lowest commit-log offset a consumer group still has to read (deleteOnlyConsumed),
    and who needs it, for the log line."""

    phy_offset: int
    group: str
    topic: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True)
class DiskRatios:
    """Used ratios of the partitions of the commit log, the consume queues and the index."""

    commit_log: float = -1.0
    consume_queue: float = -1.0
    index: float = -1.0

    def describe(self) -> str:
        """As Apache's SendMessageProcessor.diskUtil() puts it in the SERVICE_NOT_AVAILABLE remark."""
        return f"CL: {self.commit_log:5.2f} CQ: {self.consume_queue:5.2f} INDEX: {self.index:5.2f}"


@dataclass
class _HangedFile:
    mapping: FixedMapping
    deleted_at: float  # clock seconds


def delete_expired_consume_queue_files(cq: ConsumeQueue, min_phy_offset: int) -> list[MappedFile]:
    """Delete ``cq``'s oldest files whose last unit points below ``min_phy_offset`` (never the
    last file), then move its min offset (Java ConsumeQueue.deleteExpiredFile)."""
    mfq = cq.mapped_file_queue
    deleted = []
    for mf in mfq.mapped_files[:-1]:
        last = mf.select(mf.file_size - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
        if last is None:
            break
        phy_offset = CQ_UNIT.unpack_from(last)[0]
        last.release()   # a live view would keep the mapping from being unmapped
        if phy_offset >= min_phy_offset or not mfq.delete_first_file(mf):
            break
        log.info("deleted consume queue file %s of %s queue %d (last unit at %d < commit log min %d)",
                 mf.file_name, cq.topic, cq.queue_id, phy_offset, min_phy_offset)
        deleted.append(mf)
    deleted.extend(cq.correct_min_offset(min_phy_offset))   # and the ext files before its first unit
    return deleted


class CleanService:
    """Deletes expired store files and guards the disk; one per store."""

    def __init__(self, store: DefaultMessageStore, *, disk_usage: DiskUsage = disk_partition_used_ratio,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        self.store = store
        self.config = store.config
        self.disk_usage = disk_usage
        self.clock = clock
        self.sleep = sleep
        # set by the broker when deleteOnlyConsumed is on; called from the worker thread
        self.consumed_boundary: Callable[[], ConsumedBoundary | None] | None = None
        self.disk_full = False   # read by the put path: writes are refused while True
        self.clean_immediately = False
        self.manual_delete_times = 0
        self.disk_ratios = DiskRatios()
        self._hanged: list[_HangedFile] = []
        self._last_redelete = 0.0
        self._last_physical_min_offset = 0
        self._last_holder: tuple[object, ...] | None = None

    # ------------------------------------------------------------------ disk guard

    @property
    def warning_ratio(self) -> float:
        return setting_as_ratio(self.config.disk_space_warning_level_ratio)

    @property
    def clean_forcibly_ratio(self) -> float:
        return setting_as_ratio(self.config.disk_space_clean_forcibly_ratio)

    def read_disk_ratios(self) -> DiskRatios:
        cfg = self.config
        self.disk_ratios = DiskRatios(self.disk_usage(cfg.commit_log_dir()),
                                      self.disk_usage(cfg.consume_queue_dir()),
                                      self.disk_usage(cfg.index_dir()))
        return self.disk_ratios

    def _mark_disk(self, full: bool, what: str, ratio: float) -> None:
        if full and not self.disk_full:
            log.error("%s disk maybe full soon: %.2f used > %.2f (diskSpaceWarningLevelRatio), so mark "
                      "disk full: writes are refused until space is freed", what, ratio, self.warning_ratio)
        elif not full and self.disk_full:
            log.info("%s disk space OK again: %.2f used, so mark disk ok: writes are accepted", what, ratio)
        self.disk_full = full

    def mark_disk_full(self, why: str) -> None:
        """No space was left for a write (ENOSPC): refuse writes now, as Apache's
        getAndMakeDiskFull, with fresh readings for the refusals' remark (statvfs, microseconds);
        :meth:`check_disk_space` lifts the mark when the partition has room again."""
        self.read_disk_ratios()
        if not self.disk_full:
            log.error("no space left for a write (%s), so mark disk full: writes are refused until space is freed", why)
        self.disk_full = True

    def check_disk_space(self) -> bool:
        """Mark the store full (writes refused) or OK from the commit log's partition (Apache's
        isSpaceFull, every 10 s); True when full."""
        ratio = self.read_disk_ratios().commit_log
        full = ratio > self.warning_ratio
        self._mark_disk(full, "commit log", ratio)
        return full

    def _is_space_to_delete(self) -> bool:
        """Whether a partition is fuller than diskMaxUsedSpaceRatio (Apache isSpaceToDelete);
        also sets the disk-full mark and ``clean_immediately``."""
        cfg = self.config
        max_ratio = min(max(cfg.disk_max_used_space_ratio, DISK_MAX_USED_SPACE_RATIO_MIN),
                        DISK_MAX_USED_SPACE_RATIO_MAX) / 100
        self.clean_immediately = False
        ratios = self.read_disk_ratios()
        for what, ratio in (("commit log", ratios.commit_log), ("consume queue", ratios.consume_queue)):
            if ratio > self.warning_ratio:
                self._mark_disk(True, what, ratio)
                self.clean_immediately = True
            elif ratio > self.clean_forcibly_ratio:
                self.clean_immediately = True
            else:
                self._mark_disk(False, what, ratio)
            if ratio < 0 or ratio > max_ratio:
                log.info("%s disk maybe full soon (%.2f used > %.2f), so reclaim space", what, ratio, max_ratio)
                return True
        return False

    # ------------------------------------------------------------------ rounds

    def execute_delete_files_manually(self) -> None:
        self.manual_delete_times = MAX_MANUAL_DELETE_FILE_TIMES
        log.info("manual deletion of expired commit log files requested")

    def run(self) -> None:
        """One round: commit log, then consume queues and index (Apache cleanFilesPeriodically)."""
        for step in (self.delete_expired_commit_log_files, self.redelete_hanged_files,
                     self.delete_expired_consume_queue_files):
            try:
                step()
            except Exception:   # as Apache: one failing round must not stop the service
                log.exception("clean service: %s failed", step.__name__)

    def delete_expired_commit_log_files(self) -> int:
        """Delete up to deleteFileBatchMax expired commit log files, oldest first; their count."""
        cfg = self.config
        now = self.clock()
        time_up = is_it_time_to_do(cfg.delete_when, time.localtime(now).tm_hour)
        space_full = self._is_space_to_delete()
        manual = self.manual_delete_times > 0
        if not (time_up or space_full or manual):
            return 0
        if manual:
            self.manual_delete_times -= 1
        clean_at_once = cfg.clean_file_forcibly_enable and self.clean_immediately
        log.info("deleting commit log files older than %d hours: time up %s, space full %s, manual %d, "
                 "clean at once %s", cfg.file_reserved_time, time_up, space_full, self.manual_delete_times,
                 clean_at_once)
        boundary = self._consumed_boundary()
        reserved_s = cfg.file_reserved_time * SECONDS_PER_HOUR
        mfq = self.store.commit_log.mapped_file_queue
        candidates = mfq.mapped_files[:-1]   # never the file being written
        deleted = 0
        for i, mf in enumerate(candidates):
            if not (clean_at_once or now >= mf.last_modified() + reserved_s):
                break   # no holes: the files after it are younger
            if boundary is not None and mf.file_from_offset + mf.file_size > boundary.phy_offset:
                self._log_holder(mf, boundary)
                break
            if mf.file_from_offset + mf.file_size > self.store.dispatched_until():
                break   # not dispatched yet: the reput walks it on the event loop (a lagging slave,
                # the index rebuild after a crash)
            if not mfq.delete_first_file(mf):
                break
            log.info("deleted commit log file %s", mf.file_name)
            self._track(mf, now)
            deleted += 1
            if deleted >= cfg.delete_file_batch_max:
                break
            if cfg.delete_commit_log_files_interval > 0 and i + 1 < len(candidates):
                self.sleep(cfg.delete_commit_log_files_interval / 1000)
        if deleted == 0 and space_full:
            log.warning("disk space will be full soon, but no commit log file could be deleted")
        return deleted

    def delete_expired_consume_queue_files(self) -> int:
        """After the commit log's min offset moved: each queue's files wholly below it, then the
        index files ending below it (Apache CleanConsumeQueueService); the queue files' count."""
        min_offset = self.store.commit_log.min_offset
        if min_offset <= self._last_physical_min_offset:
            return 0
        self._last_physical_min_offset = min_offset
        now = self.clock()
        deleted = 0
        for cq in self.store.consume_queues:   # a snapshot: safe from this worker thread
            files = delete_expired_consume_queue_files(cq, min_offset)
            for mf in files:
                self._track(mf, now)
            deleted += len(files)
            if files and self.config.delete_consume_queue_files_interval > 0:
                self.sleep(self.config.delete_consume_queue_files_interval / 1000)
        index = self.store.index_service
        if index is not None:
            for f in index.delete_expired_files(min_offset):
                self._track(f, now)
        return deleted

    # ------------------------------------------------------------------ helpers

    def _consumed_boundary(self) -> ConsumedBoundary | None:
        if not self.config.delete_only_consumed or self.consumed_boundary is None:
            return None
        return self.consumed_boundary()

    def _log_holder(self, mf: MappedFile, b: ConsumedBoundary) -> None:
        key = (mf.file_name, b.group, b.topic, b.queue_id, b.queue_offset)
        if key != self._last_holder:   # once per holder, not every round
            self._last_holder = key
            log.warning("deleteOnlyConsumed: keeping commit log file %s: consumer group %s has not consumed "
                        "topic %s queue %d from offset %d (commit log offset %d)", mf.file_name, b.group,
                        b.topic, b.queue_id, b.queue_offset, b.phy_offset)

    def _track(self, mapping: FixedMapping, now: float) -> None:
        if mapping.mapped:
            log.warning("%s is deleted but a reader still holds a view of it; unmapping it later", mapping.path)
            self._hanged.append(_HangedFile(mapping, now))

    def redelete_hanged_files(self) -> None:
        """Unmap deleted files whose mapping a reader still held (Apache redeleteHangedFile),
        every redeleteHangedFileInterval ms; after destroyMapedFileIntervalForcibly ms the
        mapping is left to the garbage collector (it goes with the reader's last view)."""
        cfg = self.config
        now = self.clock()
        if not self._hanged or (now - self._last_redelete) * 1000 < cfg.redelete_hanged_file_interval:
            return
        self._last_redelete = now
        still = []
        for h in self._hanged:
            if h.mapping.try_unmap():
                log.info("%s unmapped", h.mapping.path)
            elif (now - h.deleted_at) * 1000 >= cfg.destroy_maped_file_interval_forcibly:
                log.warning("%s still has readers after %d ms; leaving its mapping to the garbage collector",
                            h.mapping.path, cfg.destroy_maped_file_interval_forcibly)
            else:
                still.append(h)
        self._hanged = still

    @property
    def hanged_files(self) -> list[str]:
        return [h.mapping.path for h in self._hanged]

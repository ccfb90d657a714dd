"""IndexService: the list of IndexFiles under ``<root>/index`` (store.md §5, §8 step 3).

Dispatch hands the records that may carry KEYS or UNIQ_KEY to :meth:`add`; they are indexed a
batch at a time (:meth:`build_pending`, one C call for a run of records), before any query, at
the latest a second later (the store's tick), and at a clean stop -- as Apache builds the index
behind the put, in its reput thread. A crash loses nothing by it: the index file being written is
rebuilt from the commit log at the next start (IndexRebuild). When the last file is full a new
one is created whose begin/end start at the full file's end. The full file is
flushed by the next :meth:`flush` (a worker thread, with the consume queues), which then sets the
checkpoint's ``index_msg_timestamp`` to that file's endTimestamp.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyrmq.codec.message_props import MessageConst, MessageSysFlag, property_value
from pyrmq.store.checkpoint import StoreCheckpoint
from pyrmq.codec.store_formats import index_file_size
from pyrmq.codec.index_codec import index_key_list
from pyrmq.store.index_file import IndexFile, topic_key_hash
from pyrmq.store.mapped_file_queue import is_all_zero
from pyrmq.store.model import MessageStoreConfig, StoreError

if TYPE_CHECKING:
    from pyrmq.codec.message import RecordInfo

log = logging.getLogger(__name__)

# Records whose keys wait for one build call at most: the cost of a record's keys is then mostly
# C, and what a failing index file holds back stays bounded (the dispatch stalls beyond it).
INDEX_BATCH = 256

_KEYS = MessageConst.PROPERTY_KEYS + "\x01"
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX + "\x01"
_TRANSACTION_MASK = MessageSysFlag.TRANSACTION_MASK
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


def index_keys_of(properties: str) -> tuple[str | None, str | None]:
    """(UNIQ_KEY, KEYS) of a properties string; both None unless the string mentions a key."""
    if "KEY" not in properties:  # cheap pre-check: both names contain it
        return None, None
    return property_value(properties, _UNIQ_KEY), property_value(properties, _KEYS)


def _file_name(now_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time, as Java's UtilAll.timeMillisToHumanString."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now_ms // 1000)) + f"{now_ms % 1000:03d}"


@dataclass
class QueryOffsetResult:
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


class IndexService:
    def __init__(self, config: MessageStoreConfig, checkpoint: StoreCheckpoint) -> None:
        self.config = config
        self.checkpoint = checkpoint
        self.store_path = config.index_dir()
        self.hash_slot_num = config.max_hash_slot_num
        self.index_num = config.max_index_num
        self.index_files: list[IndexFile] = []
        # appended by dispatch (event loop), drained by flush (worker thread): deque ops are atomic
        self._full_unflushed: deque[IndexFile] = deque()
        self._flush_lock = threading.Lock()
        # records dispatched, keys not indexed yet (event loop only), in commit log order
        self.pending: list[RecordInfo] = []
        self.failing = False   # the last build raised: each record is built at once until one completes

    # ------------------------------------------------------------------ lifecycle

    def load(self, last_exit_ok: bool) -> None:
        """Open every index file; after a crash drop those newer than the checkpoint (§8 step 3)."""
        if not os.path.isdir(self.store_path):
            return
        f_size = index_file_size(self.hash_slot_num, self.index_num)
        for name in sorted(os.listdir(self.store_path)):
            path = os.path.join(self.store_path, name)
            if not os.path.isfile(path):
                continue
            try:
                f = IndexFile(path, self.hash_slot_num, self.index_num)
            except StoreError as e:
                if os.path.getsize(path) < f_size and is_all_zero(path):
                    # created, never sized: a crash during the creation (nothing was indexed in it)
                    log.warning("deleting unsized index file %s", path)
                    os.unlink(path)
                else:
                    log.warning("index file ignored: %s", e)
                continue
            if not last_exit_ok and f.end_timestamp > self.checkpoint.index_msg_timestamp:
                log.info("abnormal exit: deleting index file %s (end %d > checkpoint %d)",
                         name, f.end_timestamp, self.checkpoint.index_msg_timestamp)
                f.destroy()
                continue
            self.index_files.append(f)

    def indexed_until(self, min_phy_offset: int) -> int:
        """The commit log offset from which records are not indexed yet: the last kept file's
        end (a record start; that record is skipped as already indexed), ``min_phy_offset`` when
        no file was kept."""
        files = self.index_files
        return files[-1].end_phy_offset if files else min_phy_offset

    def flush(self, *, last_file: bool = True) -> None:
        """Sync full files not yet synced (then record them in the checkpoint) and, with
        ``last_file``, the file being written.

        The periodic flush leaves that file out, as Apache does (it syncs an index file when the
        file is full): it ends past the checkpoint, so recovery after a crash drops it and indexes
        its records again, and syncing it every round would only write back hash slots scattered
        over the file -- and stall the loop writing into pages under writeback. A clean stop
        syncs it. Blocking; runs in a worker thread. The caller flushes the checkpoint afterwards.
        """
        with self._flush_lock:
            while self._full_unflushed:
                f = self._full_unflushed.popleft()
                f.flush()
                self.checkpoint.index_msg_timestamp = max(self.checkpoint.index_msg_timestamp,
                                                          f.end_timestamp)
            files = self.index_files
            if files and last_file:
                files[-1].flush()

    def close(self) -> None:
        for f in self.index_files:
            f.close()

    def delete_expired_files(self, min_phy_offset: int) -> list[IndexFile]:
        """Delete the oldest files whose endPhyOffset < ``min_phy_offset``, never the newest
        (Java IndexService.deleteExpiredFile); returns them. Blocking: a worker thread.

        Dispatch only appends, so dropping the head in place (one atomic list operation) loses
        nothing; ``_flush_lock`` keeps :meth:`flush` from syncing a closed file.
        """
        files = self.index_files
        count = 0
        while count < len(files) - 1 and files[count].end_phy_offset < min_phy_offset:
            count += 1
        if count == 0:
            return []
        with self._flush_lock:
            expired = files[:count]
            del files[:count]
            for f in expired:
                log.info("deleting index file %s (end phy offset %d < commit log min %d)",
                         f.file_name, f.end_phy_offset, min_phy_offset)
                f.destroy()
        return expired

    # ------------------------------------------------------------------ build

    def _last_file(self) -> IndexFile:
        """The file to add keys to; a new one when the last is full. Raises OSError when it
        cannot be created."""
        files = self.index_files
        if files and not files[-1].is_write_full():
            return files[-1]
        end_phy_offset = end_timestamp = 0
        last_name = ""
        if files:
            prev = files[-1]
            end_phy_offset, end_timestamp, last_name = prev.end_phy_offset, prev.end_timestamp, prev.file_name
        now_ms = int(time.time() * 1000)
        os.makedirs(self.store_path, exist_ok=True)
        name = _file_name(now_ms)
        # two files in one millisecond (tiny test files) must not share a name
        while name <= last_name or os.path.exists(os.path.join(self.store_path, name)):
            now_ms += 1
            name = _file_name(now_ms)
        # an OSError (EMFILE, ENOSPC) goes up: dispatch stalls and builds this record's keys later
        f = IndexFile(os.path.join(self.store_path, name), self.hash_slot_num, self.index_num,
                      create=True, end_phy_offset=end_phy_offset, end_timestamp=end_timestamp)
        if files:
            self._full_unflushed.append(files[-1])
        files.append(f)
        return f

    def _put_key(self, f: IndexFile, topic: str, key: str, phy_offset: int, store_timestamp: int) -> IndexFile:
        key_hash = topic_key_hash(topic, key)
        current = f
        while not current.put_key(key_hash, phy_offset, store_timestamp):
            current = self._last_file()
        return current

    def add(self, record: RecordInfo) -> None:
        """Index ``record``'s keys with the next batch -- at once while the last build failed.
        Raises OSError when the build was due and a file could not be created or reserved: the
        record is then not taken (its dispatch stalls and is retried), the ones before it wait."""
        pending = self.pending
        if not pending or record.commit_log_offset > pending[-1].commit_log_offset:
            pending.append(record)   # (not again when a later dispatcher failed on it)
        if len(pending) >= INDEX_BATCH or self.failing:
            self._build_taking_back((record,))

    def add_many(self, records: Sequence[RecordInfo]) -> None:
        """:meth:`add` for records in commit log order (a batch's): none is taken when it raises.
        (``add`` stays its own loop-free copy: it runs once per single send.)"""
        pending = self.pending
        if pending:
            last = pending[-1].commit_log_offset
            records = [record for record in records if record.commit_log_offset > last]
        pending.extend(records)
        if len(pending) >= INDEX_BATCH or self.failing:
            self._build_taking_back(records)

    def _build_taking_back(self, added: Sequence[RecordInfo]) -> None:
        """Build what is pending; when that raises, the ``added`` records still pending are
        taken back out, so that the dispatch that brought them fails for them."""
        try:
            self.build_pending()
        except OSError:
            pending = self.pending
            for record in reversed(added):
                if pending and pending[-1] is record:
                    pending.pop()
            raise

    def build_pending(self) -> None:
        """Index the pending records: runs of them in one call into the last file, each record
        that call leaves (a file's first item, space to reserve, the next file) through
        :meth:`build_index`. Raises OSError when a file cannot be created or reserved; the
        records not indexed stay pending (keys of the record that failed may be indexed twice)."""
        records = self.pending
        done = 0
        self.failing = True   # until the build completes
        try:
            while done < len(records):
                files = self.index_files
                f = files[-1] if files and not files[-1].is_write_full() else self._last_file()
                done = f.build_records(records, done, _UNIQ_KEY, _KEYS)
                if done < len(records):
                    record = records[done]
                    uniq_key, keys = index_keys_of(record.properties_string)
                    if uniq_key is not None or keys:
                        self.build_index(record.topic, record.commit_log_offset, record.store_timestamp,
                                         record.sys_flag, uniq_key, keys)
                    done += 1
            self.failing = False
        finally:
            del records[:done]

    def build_index(self, topic: str, phy_offset: int, store_timestamp: int, sys_flag: int,
                    uniq_key: str | None, keys: str | None) -> None:
        """Index UNIQ_KEY and each KEYS token of one record (Java IndexService.buildIndex).

        Raises OSError when a file cannot be created or reserved; the record is then dispatched
        again, and keys indexed before the failure are indexed twice (a query lists the offset twice)."""
        files = self.index_files
        f = files[-1] if files and files[-1].index_count < files[-1].index_num else self._last_file()
        if phy_offset < f.end_phy_offset or sys_flag & _TRANSACTION_MASK == _ROLLBACK:
            return
        # (each key one put into the last file; _put_key when that one fills up)
        for k in index_key_list(uniq_key, keys):
            if not f.put_key(topic_key_hash(topic, k), phy_offset, store_timestamp):
                f = self._put_key(f, topic, k, phy_offset, store_timestamp)

    # ------------------------------------------------------------------ query

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """Commit-log offsets indexed under ``topic#key`` within [begin, end], newest file first."""
        result = QueryOffsetResult()
        try:
            self.build_pending()
        except OSError as e:   # the dispatch stalls on it too; the keys indexed so far are found
            log.warning("indexing the latest records before a query failed: %s", e)
        max_num = min(max_num, self.config.max_msgs_num_batch)
        files = list(self.index_files)   # the clean service may drop the oldest meanwhile
        if not files or max_num <= 0:
            return result
        result.index_last_update_timestamp = files[-1].end_timestamp
        result.index_last_update_phyoffset = files[-1].end_phy_offset
        key_hash = topic_key_hash(topic, key)
        out = result.phy_offsets
        for f in reversed(files):
            if f.is_time_matched(begin, end):
                try:
                    f.select_phy_offsets(out, key_hash, max_num, begin, end)
                except ValueError:   # unmapped by the clean service: its records are gone too
                    continue
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return result

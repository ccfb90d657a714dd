"""DefaultMessageStore: the facade the broker uses (put, get, offsets, flush, recovery).

Synchronous. ``put_message`` appends to the CommitLog and dispatches to the ConsumeQueue in
the same call (no reput thread, no re-parse); ``flush_commit_log`` / ``flush_consume_queues``
block on disk syncs and are meant to be run by the broker in a worker thread.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import struct
import threading
from typing import Callable

from pyrmq.codec.message import (
    MessageConst,
    MessageExt,
    MessageFormatError,
    MessageSysFlag,
    RecordInfo,
    decode_message,
    pickup_store_timestamp,
    string_to_properties,
)
from pyrmq.codec.store_formats import CQ_STORE_UNIT_SIZE, CQ_UNIT
from pyrmq.store.checkpoint import StoreCheckpoint
from pyrmq.store.commit_log import AppendError, CommitLog, Dispatch
from pyrmq.store.consume_queue import ConsumeQueue
from pyrmq.store.index_service import IndexService, index_keys_of
from pyrmq.store.model import (
    AppendMessageResult,
    FlushDiskType,
    GetMessageResult,
    GetMessageStatus,
    MessageExtBatch,
    MessageExtBrokerInner,
    MessageFilter,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    StoreError,
)
from pyrmq.store.recovery import (
    recover_abnormally,
    recover_consume_queues,
    recover_normally,
    reput,
)

log = logging.getLogger(__name__)

__all__ = [
    "AppendMessageResult", "DefaultMessageStore", "FlushDiskType", "GetMessageResult",
    "GetMessageStatus", "MessageExtBatch", "MessageExtBrokerInner", "MessageFilter",
    "MessageStoreConfig", "PutMessageResult", "PutMessageStatus", "QueryMessageResult", "StoreError",
]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
MAX_TOPIC_LENGTH = 127  # 4.9.x broker limit (message.md §10)
# Topic names become directory names: nothing outside RocketMQ's charset ever reaches a path.
_VALID_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")
MAX_PROPERTIES_BYTES = 32767
MIN_FILTER_SCAN_BYTES = 16000  # Java scans at least this many CQ bytes per pull

_TRANSACTION_MASK = MessageSysFlag.TRANSACTION_MASK
_DISPATCHED_TYPES = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


# store roots locked by this process; needed where only POSIX record locks exist (they do not
# conflict inside one process, and closing any descriptor of the file would drop them)
_LOCKED_ROOTS: set[str] = set()
_LOCKED_ROOTS_GUARD = threading.Lock()


_F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_FLOCK = struct.Struct("@hhqqi4x")  # struct flock on Linux (64-bit off_t)


def _lock_first_byte(fd: int) -> None:
    """Exclusive lock on byte range (0, 1), the region Java's FileChannel.tryLock(0, 1) takes.

    Prefer an open-file-description lock: it conflicts with Java's POSIX lock, with a second
    open in this process, and is not dropped when some other descriptor of the file is closed.
    """
    if _F_OFD_SETLK is not None and _FLOCK.size == 32:
        try:
            fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
            return
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)


def _unlock_first_byte(fd: int) -> None:
    if _F_OFD_SETLK is not None and _FLOCK.size == 32:
        try:
            fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, 0, 1, 0))
            return
        except OSError:
            pass
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)


class DefaultMessageStore:
    def __init__(self, config: MessageStoreConfig,
                 on_dispatch: Callable[[str, int, int], None] | None = None) -> None:
        self.config = config
        self.on_dispatch = on_dispatch
        # hook for SCHEDULE_TOPIC_XXXX: (delay level, store timestamp) -> CQ tagsCode
        # (the delivery time, message.md §8); None keeps the tag hash until the scheduler lands
        self.schedule_tags_code: Callable[[int, int], int] | None = None
        self._commit_log = CommitLog(config)
        self._consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.checkpoint: StoreCheckpoint | None = None
        self.index_service: IndexService | None = None
        self._lock_fd: int | None = None
        self._root_key: str | None = None
        self._loaded = False
        self._shutdown = True
        self._memory_limit = int(_total_physical_memory() * config.access_message_in_memory_max_ratio / 100)
        self._last_dispatch_timestamp = 0
        self._clean_run = config.max_message_size + 128 * 1024  # longer than any record
        self.last_exit_ok = True

    @property
    def commit_log(self) -> CommitLog:
        return self._commit_log

    # ------------------------------------------------------------------ lifecycle

    def _acquire_lock(self) -> None:
        root = os.path.realpath(self.config.store_path_root_dir)
        os.makedirs(root, exist_ok=True)
        with _LOCKED_ROOTS_GUARD:
            if root in _LOCKED_ROOTS:
                raise StoreError(f"Lock failed, MQ already started ({root} is in use)")
            fd = os.open(self.config.lock_path(), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _lock_first_byte(fd)
            except OSError as e:
                os.close(fd)
                raise StoreError(f"Lock failed, MQ already started ({root}): {e}") from e
            os.pwrite(fd, b"lock", 0)
            _LOCKED_ROOTS.add(root)
        self._lock_fd = fd
        self._root_key = root

    def _release_lock(self) -> None:
        if self._lock_fd is None:
            return
        with _LOCKED_ROOTS_GUARD:
            try:
                _unlock_first_byte(self._lock_fd)
            finally:
                os.close(self._lock_fd)
                _LOCKED_ROOTS.discard(self._root_key)
        self._lock_fd = None

    def load(self) -> bool:
        """Lock the store, load files and recover. Raises StoreError when the directory is unusable."""
        if self._loaded:
            return True
        self._acquire_lock()
        try:
            self._load_and_recover()
        except BaseException:
            self._close_files()
            self._release_lock()
            raise
        self._loaded = True
        self._shutdown = False
        return True

    def _load_and_recover(self) -> None:
        cfg = self.config
        self.last_exit_ok = not os.path.exists(cfg.abort_path())
        log.info("loading store %s (last exit %s)", cfg.store_path_root_dir,
                 "ok" if self.last_exit_ok else "abnormal")
        self._commit_log.load()
        self._load_consume_queues()
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path())
        if cfg.message_index_enable:
            self.index_service = IndexService(cfg, self.checkpoint)
            self.index_service.load(self.last_exit_ok)

        max_phy_cq = recover_consume_queues(self._consume_queues.values())
        kwargs = dict(check_crc=cfg.check_crc_on_recover, max_phy_offset_of_cq=max_phy_cq,
                      truncate_cqs=self._truncate_consume_queues,
                      destroy_cqs=self._destroy_consume_queues, clean_run=self._clean_run)
        if self.last_exit_ok:
            recover_normally(self._commit_log, **kwargs)
        else:
            recover_abnormally(self._commit_log, checkpoint=self.checkpoint,
                               dispatch=self._redispatch, **kwargs)
        max_phy_cq = max((cq.max_physic_offset for cq in self._consume_queues.values()), default=0)
        reput(self._commit_log, max_phy_cq, self._redispatch)
        self._recover_topic_queue_table()
        # from here on a crash must be detected at the next start
        with open(cfg.abort_path(), "w"):
            pass

    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir()
        if not os.path.isdir(root):
            return
        for topic in sorted(os.listdir(root)):
            topic_dir = os.path.join(root, topic)
            if not os.path.isdir(topic_dir):
                continue
            for qid in sorted(os.listdir(topic_dir)):
                try:
                    queue_id = int(qid)
                except ValueError:
                    continue
                cq = self._new_consume_queue(topic, queue_id)
                cq.load()
                self._consume_queues[(topic, queue_id)] = cq

    def _recover_topic_queue_table(self) -> None:
        table: dict[str, int] = {}
        min_phy = self._commit_log.min_offset
        for (topic, queue_id), cq in self._consume_queues.items():
            table[f"{topic}-{queue_id}"] = cq.get_max_offset_in_queue()
            cq.correct_min_offset(min_phy)
        self._commit_log.topic_queue_table = table

    def _truncate_consume_queues(self, phy_offset: int) -> None:
        for cq in self._consume_queues.values():
            cq.truncate_dirty_logic_files(phy_offset)

    def _destroy_consume_queues(self) -> None:
        for cq in self._consume_queues.values():
            cq.destroy()
        self._consume_queues.clear()

    def start(self) -> None:
        """Load (if not yet done) and accept messages."""
        self.load()

    def shutdown(self) -> None:
        """Flush everything, write the checkpoint, delete ``abort``, release the lock."""
        if not self._loaded:
            return
        self._shutdown = True
        try:
            self.flush_commit_log()
            self.flush_consume_queues()
        finally:
            self._close_files()
            try:
                os.unlink(self.config.abort_path())
            except FileNotFoundError:
                pass
            self._release_lock()
            self._loaded = False

    def _close_files(self) -> None:
        self._commit_log.close()
        for cq in self._consume_queues.values():
            cq.close()
        if self.index_service is not None:
            self.index_service.close()
            self.index_service = None
        if self.checkpoint is not None:
            self.checkpoint.close()

    # ------------------------------------------------------------------ put

    def _new_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        if not _VALID_TOPIC.fullmatch(topic) or queue_id < 0:
            raise StoreError(f"refusing a consume queue for topic {topic[:64]!r} queue {queue_id}")
        return ConsumeQueue(topic, queue_id, self.config.consume_queue_dir(),
                            self.config.mapped_file_size_consume_queue)

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        cq = self._consume_queues.get((topic, queue_id))
        if cq is None and create:
            cq = self._consume_queues[(topic, queue_id)] = self._new_consume_queue(topic, queue_id)
        return cq

    def _check(self, msg: MessageExtBrokerInner) -> PutMessageStatus | None:
        if self._shutdown:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if len(msg.topic) > MAX_TOPIC_LENGTH or not _VALID_TOPIC.fullmatch(msg.topic) or msg.queue_id < 0:
            return PutMessageStatus.MESSAGE_ILLEGAL
        # a code point is at most 4 UTF-8 bytes: encode only strings that might be too long
        if len(msg.properties_string) > MAX_PROPERTIES_BYTES // 4 and (
            len(msg.properties_string.encode()) > MAX_PROPERTIES_BYTES
        ):
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        if len(msg.body) > self.config.max_message_size:
            return PutMessageStatus.MESSAGE_ILLEGAL
        return None

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        status = self._check(msg)
        if status is not None:
            return PutMessageResult(status, None)
        try:
            result, dispatch = self._commit_log.append_message(msg)
        except AppendError as e:
            log.warning("put_message to %s rejected: %s", msg.topic, e)
            return PutMessageResult(e.status, None)
        if dispatch is not None:
            self._dispatch(dispatch)
        elif self.index_service is not None:  # PREPARED records are indexed, not queued
            uniq_key, keys = index_keys_of(msg.properties_string)
            if uniq_key is not None or keys:
                self.index_service.build_index(msg.topic, result.wrote_offset, result.store_timestamp,
                                               msg.sys_flag, uniq_key, keys)
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        status = self._check(batch)
        if status is not None:
            return PutMessageResult(status, None)
        if MessageSysFlag.transaction_value(batch.sys_flag) != MessageSysFlag.TRANSACTION_NOT_TYPE:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)
        delay = string_to_properties(batch.properties_string).get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if delay and delay.strip().lstrip("-").isdigit() and int(delay) > 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)
        try:
            result, dispatches = self._commit_log.append_batch(batch)
        except AppendError as e:
            log.warning("put_messages to %s rejected: %s", batch.topic, e)
            return PutMessageResult(e.status, None)
        for d in dispatches:
            self._dispatch(d)
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    def _schedule_tags_code(self, properties: str | dict[str, str], store_timestamp: int,
                            tags_code: int) -> int:
        if self.schedule_tags_code is None:
            return tags_code
        props = string_to_properties(properties) if isinstance(properties, str) else properties
        level = props.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if level is None:
            return tags_code
        try:
            return self.schedule_tags_code(int(level), store_timestamp)
        except ValueError:
            return tags_code

    def _dispatch(self, d: Dispatch) -> None:
        tags_code = d.tags_code
        if d.topic == SCHEDULE_TOPIC:
            tags_code = self._schedule_tags_code(d.properties, d.store_timestamp, tags_code)
        cq = self.find_consume_queue(d.topic, d.queue_id, create=True)
        cq.put_unit(d.commit_log_offset, d.size, tags_code, d.queue_offset)
        self._last_dispatch_timestamp = d.store_timestamp
        index = self.index_service
        if index is not None:
            uniq_key, keys = index_keys_of(d.properties)
            if uniq_key is not None or keys:
                index.build_index(d.topic, d.commit_log_offset, d.store_timestamp, d.sys_flag,
                                  uniq_key, keys)
        if self.checkpoint is not None:
            self.checkpoint.logics_msg_timestamp = d.store_timestamp
        if self.on_dispatch is not None:
            self.on_dispatch(d.topic, d.queue_id, d.queue_offset + 1)

    def _redispatch(self, info: RecordInfo) -> None:
        """Dispatch a record found by abnormal recovery."""
        if self.index_service is not None and (info.uniq_key is not None or info.keys):
            self.index_service.build_index(info.topic, info.commit_log_offset, info.store_timestamp,
                                           info.sys_flag, info.uniq_key, info.keys)
        if info.sys_flag & _TRANSACTION_MASK not in _DISPATCHED_TYPES:
            return
        tags_code = info.tags_code
        if info.topic == SCHEDULE_TOPIC:
            tags_code = self._schedule_tags_code(info.properties, info.store_timestamp, tags_code)
        try:
            cq = self.find_consume_queue(info.topic, info.queue_id, create=True)
        except StoreError as exc:   # a record no broker could have written: keep it out of any path
            log.warning("not dispatching record at %d: %s", info.commit_log_offset, exc)
            return
        cq.put_unit(info.commit_log_offset, info.size, tags_code, info.queue_offset)
        if self.checkpoint is not None:
            self.checkpoint.logics_msg_timestamp = info.store_timestamp

    # ------------------------------------------------------------------ get

    def _in_disk(self, offset_py: int, max_offset_py: int) -> bool:
        return max_offset_py - offset_py > self._memory_limit

    def _batch_full(self, size_py: int, max_msg_nums: int, buffer_total: int, message_total: int,
                    in_disk: bool) -> bool:
        if buffer_total == 0 or message_total == 0:
            return False
        if max_msg_nums <= message_total:
            return True
        cfg = self.config
        if in_disk:
            return (buffer_total + size_py > cfg.max_transfer_bytes_on_message_in_disk
                    or message_total > cfg.max_transfer_count_on_message_in_disk - 1)
        return (buffer_total + size_py > cfg.max_transfer_bytes_on_message_in_memory
                or message_total > cfg.max_transfer_count_on_message_in_memory - 1)

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    message_filter: MessageFilter | None) -> GetMessageResult:
        """Read up to ``max_msg_nums`` records of a queue from ``offset`` (codes.md §4.5)."""
        if self._shutdown:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, offset)
        cq = self._consume_queues.get((topic, queue_id))
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0)
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, offset, min_offset, max_offset)
        if max_offset == 0:
            result.next_begin_offset = 0
        elif offset < min_offset:
            result.status = GetMessageStatus.OFFSET_TOO_SMALL
            result.next_begin_offset = min_offset
        elif offset == max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
        elif offset > max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            result.next_begin_offset = max_offset
        else:
            units = cq.get_index_buffer(offset)
            if units is None:
                result.status = GetMessageStatus.OFFSET_FOUND_NULL
                result.next_begin_offset = cq.roll_next_file(offset)
            else:
                self._scan_units(result, units, offset, max_msg_nums, message_filter)
        return result

    def _scan_units(self, result: GetMessageResult, units: memoryview, offset: int,
                    max_msg_nums: int, message_filter: MessageFilter | None) -> None:
        commit_log = self._commit_log
        max_offset_py = commit_log.max_offset
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        next_phy_file_start = None
        max_phy_pulling = 0
        max_scan = max(MIN_FILTER_SCAN_BYTES, max_msg_nums * CQ_STORE_UNIT_SIZE)
        n = min(len(units), max_scan) // CQ_STORE_UNIT_SIZE
        buffers = result.buffers
        total = 0
        count = 0
        scanned = 0
        for offset_py, size_py, tags_code in CQ_UNIT.iter_unpack(units[: n * CQ_STORE_UNIT_SIZE]):
            max_phy_pulling = offset_py
            if next_phy_file_start is not None and offset_py < next_phy_file_start:
                scanned += 1
                continue
            in_disk = max_offset_py - offset_py > self._memory_limit
            if self._batch_full(size_py, max_msg_nums, total, count, in_disk):
                break
            scanned += 1
            if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags_code):
                if total == 0:
                    status = GetMessageStatus.NO_MATCHED_MESSAGE
                continue
            record = commit_log.get_data(offset_py, size_py)
            if record is None:
                if total == 0:
                    status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = commit_log.roll_next_file(offset_py)
                continue
            if message_filter is not None and not message_filter.is_matched_by_commit_log(record):
                if total == 0:
                    status = GetMessageStatus.NO_MATCHED_MESSAGE
                continue
            buffers.append(record)
            total += size_py
            count += 1
            status = GetMessageStatus.FOUND
            next_phy_file_start = None
        result.status = status
        result.next_begin_offset = offset + scanned
        result.message_count = count
        result.buffer_total_size = total
        result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > self._memory_limit

    # ------------------------------------------------------------------ queries

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._consume_queues.get((topic, queue_id))
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._consume_queues.get((topic, queue_id))
        return cq.get_min_offset_in_queue() if cq is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        cq = self._consume_queues.get((topic, queue_id))
        if cq is None:
            return 0
        return cq.get_offset_in_queue_by_time(timestamp, self._commit_log.pickup_store_timestamp,
                                              self.get_min_phy_offset())

    def _unit_store_time(self, cq: ConsumeQueue, index: int) -> int:
        unit = cq.get_unit(index)
        if unit is None:
            return -1
        return self._commit_log.pickup_store_timestamp(unit[0], unit[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self._consume_queues.get((topic, queue_id))
        if cq is None:
            return -1
        return self._unit_store_time(cq, cq.get_min_offset_in_queue())

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        cq = self._consume_queues.get((topic, queue_id))
        if cq is None:
            return -1
        return self._unit_store_time(cq, consume_queue_offset)

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        cq = self._consume_queues.get((topic, queue_id))
        if cq is None:
            return False
        unit = cq.get_unit(consume_offset)
        if unit is None:
            return False
        return self._in_disk(unit[0], self._commit_log.max_offset)

    def select_one_message_by_offset(self, commit_log_offset: int) -> memoryview | None:
        head = self._commit_log.get_data(commit_log_offset, 8)
        if head is None:
            return None
        size = int.from_bytes(head[:4], "big", signed=True)
        if size <= 8:
            return None
        return self._commit_log.get_data(commit_log_offset, size)

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        record = self.select_one_message_by_offset(commit_log_offset)
        if record is None:
            return None
        try:
            msg, _ = decode_message(record)
        except MessageFormatError:
            return None
        return msg

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int,
                      match: Callable[[memoryview], bool] | None = None) -> QueryMessageResult:
        """Records indexed under ``topic#key`` stored within [begin, end] (Java queryMessage).

        ``match`` filters out hash collisions (the index compares hashes only). Up to three
        rounds, each ending the time window at the oldest record seen, while nothing is found.
        """
        result = QueryMessageResult()
        index = self.index_service
        if index is None:
            return result
        last_query_time = end
        for _ in range(3):
            found = index.query_offset(topic, key, max_num, begin, last_query_time)
            if not found.phy_offsets:
                break
            result.index_last_update_timestamp = found.index_last_update_timestamp
            result.index_last_update_phyoffset = found.index_last_update_phyoffset
            for m, offset in enumerate(sorted(set(found.phy_offsets))):
                record = self.select_one_message_by_offset(offset)
                if record is None:
                    continue
                if m == 0:
                    last_query_time = pickup_store_timestamp(record)
                if match is None or match(record):
                    result.buffers.append(record)
            if result.buffers or last_query_time < begin:
                break
        return result

    def get_max_phy_offset(self) -> int:
        return self._commit_log.max_offset

    def get_min_phy_offset(self) -> int:
        return self._commit_log.min_offset

    # ------------------------------------------------------------------ flush and topics

    def flush_commit_log(self) -> int:
        """Blocking sync of the CommitLog (thread-safe against appends); returns flushed offset."""
        flushed = self._commit_log.flush(0)
        ts = self._commit_log.flushed_store_timestamp
        if ts and self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = ts
        return flushed

    def flush_consume_queues(self) -> None:
        """Blocking sync of every ConsumeQueue, then of the checkpoint."""
        checkpoint = self.checkpoint
        logics_ts = checkpoint.logics_msg_timestamp if checkpoint is not None else 0
        for cq in list(self._consume_queues.values()):
            cq.flush(0)
        index = self.index_service
        if index is not None:
            index.flush()
        if checkpoint is not None:
            checkpoint.logics_msg_timestamp = logics_ts
            checkpoint.flush()

    def delete_topics(self, topics: set[str]) -> None:
        """Drop the consume queues (and queue-offset counters) of ``topics``."""
        for key in [k for k in self._consume_queues if k[0] in topics]:
            cq = self._consume_queues.pop(key)
            cq.destroy()
            self._commit_log.topic_queue_table.pop(f"{key[0]}-{key[1]}", None)
        for topic in topics:
            try:
                os.rmdir(os.path.join(self.config.consume_queue_dir(), topic))
            except OSError:
                pass

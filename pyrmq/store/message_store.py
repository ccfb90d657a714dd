"""DefaultMessageStore: the facade the broker uses (put, get, offsets, flush, recovery).

Synchronous. The jobs live in their own modules: the store lock (:mod:`.store_lock`), the
consume queue table (:mod:`.consume_queue_table`), the dispatch pipeline and its reput service
(:mod:`.dispatch`), recovery (:mod:`.recovery`) and the pull scan (:mod:`.pull_scan`). A put
appends to the CommitLog and hands the records it wrote to the reput service in the same call;
``flush_commit_log`` / ``flush_consume_queues`` block on disk syncs and are meant to be run by
the broker in a worker thread.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable

from pyrmq.codec.commit_log_walk import RecordWalker, WalkEnd
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
from pyrmq.codec.names import is_legal_topic  # 4.9.x: at most 127 characters (message.md §10)
from pyrmq.codec.system_topics import LMQ_PREFIX, SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC
from pyrmq.store import crash_points
from pyrmq.store.checkpoint import StoreCheckpoint
from pyrmq.store.clean_service import CleanService
from pyrmq.store.commit_log import AppendError, CommitLog
from pyrmq.store.config_file import fsync_dir
from pyrmq.store.consume_queue import ConsumeQueue
from pyrmq.store.consume_queue_table import ConsumeQueueTable
from pyrmq.store.dispatch import (
    CommitLogDispatcher,
    ConsumeQueueDispatcher,
    ConsumeQueueExtDispatcher,
    IndexDispatcher,
    IndexRebuild,
    ReputService,
)
from pyrmq.store.index_service import IndexService
from pyrmq.store.mapped_file_queue import FlushPlan
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
    put_status_of,
)
from pyrmq.store.pull_scan import PullScanner
from pyrmq.store.recovery import recover_abnormally, recover_normally
from pyrmq.store.store_lock import StoreLock
from pyrmq.store.store_stats import StoreStats

log = logging.getLogger(__name__)

__all__ = [
    "AppendMessageResult", "DefaultMessageStore", "FlushDiskType", "GetMessageResult",
    "GetMessageStatus", "MessageExtBatch", "MessageExtBrokerInner", "MessageFilter",
    "MessageStoreConfig", "PutMessageResult", "PutMessageStatus", "QueryMessageResult",
    "SCHEDULE_TOPIC", "StoreError",
]

_TRANSACTION_MASK = MessageSysFlag.TRANSACTION_MASK
# records of these transaction types get a consume queue unit (the others are half/rollback)
_QUEUED_TYPES = MessageSysFlag.QUEUED_TYPES
MAX_PROPERTIES_BYTES = 32767
# records per slice of the background index rebuild: a few milliseconds of the event loop
INDEX_REBUILD_SLICE = 1000
_CRASH_APPENDED = crash_points.armed("commitlog.appended")


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


class DefaultMessageStore:
    def __init__(self, config: MessageStoreConfig) -> None:
        self.config = config
        self._commit_log = CommitLog(config)
        self.consume_queues = ConsumeQueueTable(config)
        self.checkpoint: StoreCheckpoint | None = None
        self.index_service: IndexService | None = None
        self.reput = ReputService(self._commit_log)
        # after a crash: the records the index lacks, indexed behind the live pipeline
        self.index_rebuild: IndexRebuild | None = None
        self._cq_dispatcher: ConsumeQueueDispatcher | None = None
        self._lock = StoreLock(config.store_path_root_dir, config.lock_path())
        self._loaded = False
        self._shutdown = True
        self.pull_scanner = PullScanner(
            config, self._commit_log,
            int(_total_physical_memory() * config.access_message_in_memory_max_ratio / 100))
        self._clean_run = config.max_message_size + 128 * 1024  # longer than any record
        self.last_exit_ok = True
        self._last_refusal_logged = -1e9   # monotonic seconds
        # dispatchers the roles add (long-polling wake-ups...), after the store's own
        self._extra_dispatchers: list[CommitLogDispatcher] = []
        # (delay level, store timestamp) -> CQ tagsCode of SCHEDULE_TOPIC_XXXX units
        self._schedule_tags_code: Callable[[int, int], int] | None = None
        # record -> SQL92 filter bitmap for its ext unit (the broker's bitmap calculator)
        self._bit_map_source: Callable[[RecordInfo], bytes | None] | None = None
        # file expiry and the disk guard; the broker runs it periodically (clean_service.py)
        self.clean_service = CleanService(self)
        # put and get counters (StoreStatsService); the broker samples them
        self.stats = StoreStats(int(time.time() * 1000))

    @property
    def commit_log(self) -> CommitLog:
        return self._commit_log

    @property
    def schedule_tags_code(self) -> Callable[[int, int], int] | None:
        return self._schedule_tags_code

    @schedule_tags_code.setter
    def schedule_tags_code(self, hook: Callable[[int, int], int] | None) -> None:
        """The delivery time of a delayed message is its SCHEDULE_TOPIC_XXXX unit's tagsCode
        (message.md §8); the broker's schedule service knows the levels."""
        self._schedule_tags_code = hook
        if self._cq_dispatcher is not None:
            self._cq_dispatcher.schedule_tags_code = hook

    def set_bit_map_source(self, source: Callable[[RecordInfo], bytes | None] | None) -> None:
        """Who computes a record's filter bitmap (enableCalcFilterBitMap); it is stored in the
        record's ConsumeQueueExt unit, so only with enableConsumeQueueExt.  Called at dispatch,
        before the CQ unit is written (Apache runs CommitLogDispatcherCalcBitMap first)."""
        self._bit_map_source = source
        if isinstance(self._cq_dispatcher, ConsumeQueueExtDispatcher):
            self._cq_dispatcher.bit_map_source = source

    def add_dispatcher(self, dispatcher: CommitLogDispatcher) -> None:
        """Feed ``dispatcher`` every record after the consume queue and index dispatchers."""
        self._extra_dispatchers.append(dispatcher)
        self.reput.add_dispatcher(dispatcher)

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> bool:
        """Lock the store, load files and recover. Raises StoreError when the directory is unusable."""
        if self._loaded:
            return True
        self._lock.acquire()
        try:
            self._load_and_recover()
        except BaseException:
            self._close_files()
            self._lock.release()
            raise
        self._loaded = True
        self._shutdown = False
        return True

    def _build_dispatchers(self) -> None:
        reput = self.reput
        for d in list(reput.dispatchers):
            reput.remove_dispatcher(d)
        cq_dispatcher_class = (ConsumeQueueExtDispatcher if self.config.enable_consume_queue_ext
                               else ConsumeQueueDispatcher)
        self._cq_dispatcher = cq_dispatcher_class(self.consume_queues, self.checkpoint)
        if isinstance(self._cq_dispatcher, ConsumeQueueExtDispatcher):
            self._cq_dispatcher.bit_map_source = self._bit_map_source
        self._cq_dispatcher.schedule_tags_code = self._schedule_tags_code
        # the index before the consume queue (Apache has them the other way round): a record
        # with a consume queue unit then went through every store dispatcher, so a restart that
        # replays from the queues' end rebuilds whatever a stalled dispatch left out
        if self.index_service is not None:
            reput.add_dispatcher(IndexDispatcher(self.index_service))
        reput.add_dispatcher(self._cq_dispatcher)
        for d in self._extra_dispatchers:
            reput.add_dispatcher(d)

    def _load_and_recover(self) -> None:
        cfg = self.config
        self.last_exit_ok = not os.path.exists(cfg.abort_path())
        log.info("loading store %s (last exit %s)", cfg.store_path_root_dir,
                 "ok" if self.last_exit_ok else "abnormal")
        self._commit_log.load()
        self.consume_queues.load()
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path())
        if cfg.message_index_enable:
            self.index_service = IndexService(cfg, self.checkpoint)
            self.index_service.load(self.last_exit_ok)
        self._build_dispatchers()

        queues = self.consume_queues
        if self.last_exit_ok:
            # a clean stop leaves every queue as valid units then zeros: no queue is scanned
            recovered = recover_normally(
                self._commit_log, check_crc=cfg.check_crc_on_recover, max_phy_offset_of_cq=queues.recover(()),
                truncate_cqs=queues.truncate_dirty, destroy_cqs=queues.destroy_all, clean_run=self._clean_run)
        else:
            recovered = recover_abnormally(
                self._commit_log, checkpoint=self.checkpoint, check_crc=cfg.check_crc_on_recover,
                estimate_cqs=queues.estimate_max_physic_offset, recover_cqs=queues.recover, queue_ends=queues.min_end,
                truncate_cqs=queues.truncate_dirty,
                destroy_cqs=queues.destroy_all, clean_run=self._clean_run)
        replay_from = recovered.replay_from
        if not self.last_exit_ok and self.index_service is not None:
            # index files written since the index checkpoint were dropped (they may be torn):
            # their records are indexed again, after the broker listens (IndexRebuild)
            min_offset = self._commit_log.min_offset
            indexed_until = max(self.index_service.indexed_until(min_offset), min_offset, 0)
            if indexed_until < replay_from:
                index_dispatcher = next(d for d in self.reput.dispatchers if isinstance(d, IndexDispatcher))
                self.index_rebuild = IndexRebuild(self.reput, index_dispatcher, indexed_until)
                log.info("the message index is rebuilt in the background from commit log offset %d "
                         "(%d bytes)", indexed_until, replay_from - indexed_until)
        # the replay goes through the same pipeline as every put
        self.reput.reput_from_offset = replay_from
        end = self.reput.do_reput()
        if end is not WalkEnd.END_OF_DATA:
            log.error("replay after recovery stopped at %d (%s) before the commit log end %d",
                      self.reput.reput_from_offset, end.value, self._commit_log.max_offset)
        table = self.consume_queues.queue_offset_table(self._commit_log.min_offset)
        self._count_undispatched(table)
        self._commit_log.topic_queue_table = table
        # from here on a crash must be detected at the next start
        # (durably: after a power cut that forgot it, the next start would trust the consume
        # queues as after a clean stop, and a queue that lost unflushed units would stay short)
        fd = os.open(cfg.abort_path(), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(os.path.dirname(cfg.abort_path()) or ".")

    def _count_undispatched(self, table: dict[tuple[str, int], int]) -> None:
        """Next queue offsets past the records a stalled replay left undispatched (a file could
        not be created at start-up): they hold their queue offsets already, and a new record must
        not take one of them.  Reads the records after the stall only -- none when caught up."""
        commit_log = self._commit_log
        offset = self.reput.reput_from_offset
        while offset < commit_log.max_offset:
            mf = commit_log.mapped_file_queue.find_mapped_file_by_offset(offset)
            if mf is None:
                return
            walker = RecordWalker(mf.view, offset - mf.file_from_offset, mf.wrote_position,
                                  file_from_offset=mf.file_from_offset, check_crc=False)
            for record in walker:
                if record.sys_flag & _TRANSACTION_MASK in _QUEUED_TYPES:
                    key = (record.topic, record.queue_id)
                    table[key] = max(table.get(key, 0), record.queue_offset + 1)
            if walker.end is not WalkEnd.END_OF_FILE and walker.position < mf.file_size:
                return
            offset = mf.file_from_offset + mf.file_size

    def start(self) -> None:
        """Load (if not yet done) and accept messages."""
        self.load()

    def dispatched_until(self) -> int:
        """The commit log offset below which every record reached every dispatcher."""
        rebuild = self.index_rebuild
        live = self.reput.reput_from_offset
        return live if rebuild is None else min(live, rebuild.offset)

    def rebuild_index_step(self, budget: int | None = INDEX_REBUILD_SLICE) -> bool:
        """Index up to ``budget`` more of the records a crash left out of the index (every one
        left: None); True when nothing is left.  The broker calls this on the event loop, as
        every dispatch, until it is done; a file that cannot be created leaves ``index_rebuild``
        with a ``failure``, to be retried later."""
        rebuild = self.index_rebuild
        if rebuild is None:
            return True
        if not rebuild.step(budget):
            return False
        self.index_rebuild = None
        log.info("the message index is whole again")
        return True

    def shutdown(self) -> None:
        """Flush everything, write the checkpoint, delete ``abort``, release the lock."""
        if not self._loaded:
            return
        self._shutdown = True
        index_whole = True
        try:
            if self.index_rebuild is not None:
                # a clean stop promises a whole index: the next start does not replay for it
                log.info("finishing the index rebuild before stopping (from commit log offset %d)",
                         self.index_rebuild.offset)
                if not self.rebuild_index_step(None):
                    log.error("the index rebuild failed at stop; the keys of the records from commit log "
                              "offset %d on are not indexed", self.index_rebuild.offset)
                    self.index_rebuild = None
            if self.index_service is not None and self.index_service.pending:
                try:   # a clean stop promises a whole index
                    self.index_service.build_pending()
                except OSError as e:
                    # the stop is left unclean: the next start rebuilds the index from the commit log
                    log.error("indexing the last %d records at stop failed (%s); the next start rebuilds the "
                              "index", len(self.index_service.pending), e)
                    index_whole = False
            self.flush_commit_log()
            self.flush_consume_queues()
        finally:
            self._close_files()
            try:
                if index_whole:
                    os.unlink(self.config.abort_path())
            except FileNotFoundError:
                pass
            self._lock.release()
            self._loaded = False

    def _close_files(self) -> None:
        self._commit_log.close()
        self.consume_queues.close()
        if self.index_service is not None:
            self.index_service.close()
            self.index_service = None
        if self.checkpoint is not None:
            self.checkpoint.close()

    # ------------------------------------------------------------------ put

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        if create:
            return self.consume_queues.find_or_create(topic, queue_id)
        return self.consume_queues.get(topic, queue_id)

    def _check(self, msg: MessageExtBrokerInner) -> PutMessageStatus | None:
        if self._shutdown or self.clean_service.disk_full:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if not is_legal_topic(msg.topic) or msg.queue_id < 0:
            return PutMessageStatus.MESSAGE_ILLEGAL
        # a code point is at most 4 UTF-8 bytes: encode only strings that might be too long
        if len(msg.properties_string) > MAX_PROPERTIES_BYTES // 4 and (
            len(msg.properties_string.encode()) > MAX_PROPERTIES_BYTES
        ):
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        if len(msg.body) > self.config.max_message_size:
            return PutMessageStatus.MESSAGE_ILLEGAL
        return None

    def _writable(self, topic: str, queue_id: int, sys_flag: int, unit_room: bool = False) -> PutMessageStatus | None:
        """None when a record for ``topic``/``queue_id`` can be appended and then dispatched.

        A stalled pipeline (a file could not be created) is retried first and refuses the put
        while it lasts: a record appended behind it could not be acknowledged anyway.  The
        record's consume queue gets its file and room before the append (O(1) when it has them),
        so EMFILE or ENOSPC on a new topic is a refusal, not a record stored and then refused.
        ``unit_room``: the caller found ``can_take_unit`` true for this queue just before, with
        nothing run in between (the send path's first-file gate asks it first).
        """
        reput = self.reput
        queued = sys_flag & _TRANSACTION_MASK in _QUEUED_TYPES
        if reput.failure is None and (unit_room or not queued or self.consume_queues.can_take_unit(topic, queue_id)):
            return None   # the common case, once per message
        if reput.failure is not None and not reput.retry():
            assert reput.failure is not None
            return self._refused(topic, reput.failure.status, reput.failure)
        if not queued or self.consume_queues.can_take_unit(topic, queue_id):
            return None
        try:
            cq = self.consume_queues.find_or_create(topic, queue_id)
            cq.prepare_unit(self._next_queue_offset(topic, queue_id))
        except StoreError:
            return None   # a name _check let through but no queue takes: dispatch skips the record
        except OSError as e:
            return self._refused(topic, put_status_of(e), f"cannot create or reserve its consume queue file: {e}")
        return None

    def first_file_preparation(self, topic: str, queue_id: int, sys_flag: int) -> Callable[[], bool] | None:
        """For a put whose consume queue has no file yet: a blocking call that creates that file
        ahead of the put (for a worker thread; the put then takes it instead of creating it on
        the caller's thread). None when the put needs no new queue file. A failed creation is
        left to the put, which tries again and refuses with the error."""
        if sys_flag & _TRANSACTION_MASK not in _QUEUED_TYPES or self.consume_queues.can_take_unit(topic, queue_id):
            return None
        try:
            cq = self.consume_queues.find_or_create(topic, queue_id)
        except StoreError:
            return None
        if cq.mapped_file_queue.mapped_files:
            return None   # only more room to reserve in its file: the put does it
        cq_offset = self._next_queue_offset(topic, queue_id)

        def prepare() -> bool:
            try:
                return cq.prepare_first_file(cq_offset)
            except OSError:
                return False
        return prepare

    def _next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next record of ``topic``/``queue_id`` gets."""
        return self._commit_log.topic_queue_table.get((topic, queue_id), 0)

    def _refused(self, topic: str, status: PutMessageStatus, why: object) -> PutMessageStatus:
        """A put the store cannot place: logged at most once a second (a full disk refuses every
        send).  No space left marks the disk full at once, as Apache's getAndMakeDiskFull: puts
        are then refused before they try, and the answer names the disk usage (read now, one
        statvfs); the clean service's periodic check lifts the mark once space is freed."""
        now = time.monotonic()
        if now - self._last_refusal_logged >= 1.0:
            self._last_refusal_logged = now
            log.warning("put to %s refused: %s", topic, why)
        if status is PutMessageStatus.SERVICE_NOT_AVAILABLE and not self.clean_service.disk_full:
            self.clean_service.mark_disk_full(str(why))
        return status

    def _not_dispatched(self, topic: str) -> PutMessageResult:
        """The answer for a record that is in the commit log but could not be dispatched: a
        refusal, never PUT_OK (the reput delivers it once the fault clears -- a refused send may
        thus still be consumed once, never an acknowledged one lost)."""
        failure = self.reput.failure
        if failure is None:
            return PutMessageResult(self._refused(topic, PutMessageStatus.UNKNOWN_ERROR, "its dispatch did not complete"))
        return PutMessageResult(self._refused(topic, failure.status, failure))

    def put_message(self, msg: MessageExtBrokerInner, unit_room: bool = False) -> PutMessageResult:
        """Store one message. ``unit_room``: its consume queue was just found able to take the
        unit (``ConsumeQueueTable.can_take_unit``), so the put does not ask again."""
        started = time.monotonic_ns()
        result = self._put_message(msg, unit_room)
        self._count_put(result, started)
        return result

    def _count_put(self, result: PutMessageResult, started_ns: int) -> None:
        append = result.append_result
        if result.status is PutMessageStatus.PUT_OK and append is not None:
            self.stats.on_put(append.msg_num, append.wrote_bytes, (time.monotonic_ns() - started_ns) // 1_000_000)
        else:
            self.stats.on_put_failed()

    def _put_message(self, msg: MessageExtBrokerInner, unit_room: bool) -> PutMessageResult:
        status = self._check(msg) or self._writable(msg.topic, msg.queue_id, msg.sys_flag, unit_room)
        if status is not None:
            return PutMessageResult(status, None)
        begin = self._commit_log.committed_offset
        try:
            result, request = self._commit_log.append_message(msg)
        except AppendError as e:
            return PutMessageResult(self._refused(msg.topic, e.status, e), None)
        if _CRASH_APPENDED:
            crash_points.reach("commitlog.appended")
        if not self.reput.dispatch_appended(begin, (request,)):
            return self._not_dispatched(msg.topic)
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    def put_messages(self, batch: MessageExtBatch, unit_room: bool = False) -> PutMessageResult:
        """Store a batch's messages; ``unit_room`` as for :meth:`put_message` (the room for the
        first unit: the rest is reserved by the append)."""
        started = time.monotonic_ns()
        result = self._put_messages(batch, unit_room)
        self._count_put(result, started)
        return result

    def _put_messages(self, batch: MessageExtBatch, unit_room: bool) -> PutMessageResult:
        status = self._check(batch)
        if status is not None:
            return PutMessageResult(status, None)
        if MessageSysFlag.transaction_value(batch.sys_flag) != MessageSysFlag.TRANSACTION_NOT_TYPE:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)
        delay = string_to_properties(batch.properties_string).get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if delay and delay.strip().lstrip("-").isdigit() and int(delay) > 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, None)
        status = self._writable(batch.topic, batch.queue_id, batch.sys_flag, unit_room)
        if status is not None:
            return PutMessageResult(status, None)
        begin = self._commit_log.committed_offset
        try:
            result, requests = self._commit_log.append_batch(batch)
        except AppendError as e:
            return PutMessageResult(self._refused(batch.topic, e.status, e), None)
        if _CRASH_APPENDED:
            crash_points.reach("commitlog.appended")
        if not self.reput.dispatch_appended(begin, requests):
            return self._not_dispatched(batch.topic)
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    def retry_dispatch(self) -> bool:
        """Retry a stalled dispatch and index the records whose keys wait for their batch (the
        broker calls this every second; on the loop, as every dispatch); True when nothing is
        stalled."""
        index = self.index_service
        if index is not None and index.pending:
            try:
                index.build_pending()
            except OSError as e:   # the dispatch stalls once a batch is due, and logs it then
                log.debug("indexing the pending records failed: %s", e)
        return self.reput.failure is None or self.reput.retry()

    def append_data(self, phy_offset: int, data: bytes | memoryview) -> bool:
        """Append replicated commit log bytes (an HA slave) and dispatch every whole record.

        Records are CRC-checked before they reach a dispatcher; at the first invalid one the
        bytes from there on are truncated and False is returned (the master is asked again
        from the new end). A record cut off at the end of ``data`` waits for the rest.
        """
        if self._shutdown:
            return False
        try:
            self._commit_log.append_data(phy_offset, data)
        except AppendError as e:
            log.warning("replicated bytes refused: %s", e)
            return False
        end = self.reput.do_reput(check_crc=True)
        if end is WalkEnd.INVALID:
            bad = self.reput.reput_from_offset
            log.error("replicated record at %d failed its check; truncating the commit log there", bad)
            self._commit_log.truncate(bad)
            return False
        return True

    # ------------------------------------------------------------------ get

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    message_filter: MessageFilter | None) -> GetMessageResult:
        """Read up to ``max_msg_nums`` records of a queue from ``offset`` (codes.md §4.5)."""
        if self._shutdown:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, offset)
        started = time.monotonic_ns()
        cq = self.consume_queues.get(topic, queue_id)
        if cq is None:
            result = GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0)
        else:
            result = self.pull_scanner.get_message(cq, offset, max_msg_nums, message_filter)
        self.stats.on_get(result.message_count if result.status is GetMessageStatus.FOUND else 0,
                          (time.monotonic_ns() - started) // 1_000_000, result.suggest_pulling_from_slave)
        return result

    def repeat_miss(self, topic: str, queue_id: int, status: GetMessageStatus, min_offset: int,
                    max_offset: int) -> bool:
        """Whether a read of this queue that found nothing -- ``status``, with the queue spanning
        [min_offset, max_offset) -- would find the same nothing now: the queue still has no file
        (NO_MATCHED_LOGIC_QUEUE), or still spans exactly that. Counted as the missed read it
        stands for."""
        if self._shutdown:
            return False
        cq = self.consume_queues.get(topic, queue_id)
        if cq is None:
            same = status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        else:
            same = status is not GetMessageStatus.NO_MATCHED_LOGIC_QUEUE \
                and cq.get_max_offset_in_queue() == max_offset and cq.get_min_offset_in_queue() == min_offset
        if same:
            self.stats.on_get(0, 0)
        return same

    # ------------------------------------------------------------------ queries

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        return cq.get_min_offset_in_queue() if cq is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
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
        cq = self.consume_queues.get(topic, queue_id)
        if cq is None:
            return -1
        return self._unit_store_time(cq, cq.get_min_offset_in_queue())

    def earliest_message_time(self) -> int:
        """The store time of the commit log's first record; -1 while there is none. (Apache 4.9.7
        reads it through an 8 MiB window, so it answers -1 until that much was written.)"""
        record = self.select_one_message_by_offset(self._commit_log.min_offset)
        return -1 if record is None or len(record) < 64 else pickup_store_timestamp(record)

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        if cq is None:
            return -1
        return self._unit_store_time(cq, consume_queue_offset)

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        cq = self.consume_queues.get(topic, queue_id)
        if cq is None:
            return False
        unit = cq.get_unit(consume_offset)
        if unit is None:
            return False
        return self.pull_scanner.in_disk(unit[0], self._commit_log.max_offset)

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

    def unflushed_bytes(self) -> int:
        """Commit log bytes appended but not flushed yet (O(1), on the loop)."""
        commit_log = self._commit_log
        return max(0, commit_log.committed_offset - commit_log.flushed_where)

    @property
    def flushed_offset(self) -> int:
        """Where the commit log is flushed to."""
        return self._commit_log.flushed_where

    def flush_commit_log(self, least_pages: int = 0) -> int:
        """Blocking sync of the CommitLog (thread-safe against appends); returns flushed offset.
        With ``least_pages`` nothing is synced until that many pages are dirty."""
        return self._commit_log_flushed(self._commit_log.flush(least_pages))

    def commit_log_flush_plan(self) -> FlushPlan | None:
        """What a flush of the commit log would sync now (on the loop), for a caller that syncs
        the plan's files itself and reports with :meth:`commit_log_flushed_by` (the SYNC_FLUSH
        group commit, which syncs on a thread that needs no GIL); None: nothing to sync."""
        return self._commit_log.flush_plan()

    def commit_log_flushed_by(self, plan: FlushPlan) -> int:
        """Record ``plan`` as synced; returns the flushed offset (as :meth:`flush_commit_log`)."""
        return self._commit_log_flushed(self._commit_log.flushed_by(plan))

    def _commit_log_flushed(self, flushed: int) -> int:
        ts = self._commit_log.flushed_store_timestamp
        if ts and self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = ts
        return flushed

    def flush_consume_queues(self, least_pages: int = 0, *, whole_index: bool = True) -> None:
        """Blocking sync of every ConsumeQueue (those with ``least_pages`` dirty pages), of the
        full index files (and with ``whole_index`` the one being written), then of the checkpoint."""
        checkpoint = self.checkpoint
        logics_ts = checkpoint.logics_msg_timestamp if checkpoint is not None else 0
        self.consume_queues.flush(least_pages)
        index = self.index_service
        if index is not None:
            index.flush(last_file=whole_index)
        if checkpoint is not None:
            checkpoint.logics_msg_timestamp = logics_ts
            checkpoint.flush()

    def delete_topics(self, topics: set[str]) -> None:
        """Drop the consume queues (and queue-offset counters) of ``topics``."""
        self._forget_queues(self.consume_queues.delete_topics(topics))

    def _forget_queues(self, dropped: list[tuple[str, int]]) -> None:
        table = self._commit_log.topic_queue_table
        for key in dropped:   # (topic, queueId): the offset table's own keys
            table.pop(key, None)

    def clean_unused_topics(self, keep: set[str]) -> list[str]:
        """CLEAN_UNUSED_TOPIC: drop the consume queues of every topic not in ``keep`` (the broker's
        topic configs) but the schedule and transaction-op topics and LMQ queues, as Apache's
        cleanUnusedTopic; the topics dropped."""
        unused = {topic for topic, _ in self.consume_queues.queues
                  if topic not in keep and topic not in (SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC)
                  and not topic.startswith(LMQ_PREFIX)}
        self.delete_topics(unused)
        for topic in sorted(unused):
            log.info("cleanUnusedTopic: %s, topic destroyed", topic)
        return sorted(unused)

    def clean_expired_consume_queues(self) -> list[tuple[str, int]]:
        """CLEAN_EXPIRED_CONSUMEQUEUE: drop the queues (but the schedule topic's) whose last unit
        points before the commit log's first file, as Apache's cleanExpiredConsumerQueue: every
        message they index is gone. A queue without units is kept (it may be new)."""
        min_offset = self._commit_log.min_offset
        expired = [(cq.topic, cq.queue_id) for cq in self.consume_queues
                   if cq.topic != SCHEDULE_TOPIC and 0 <= cq.max_physic_offset <= min_offset]
        dropped = self.consume_queues.delete_queues(expired)
        self._forget_queues(dropped)
        for topic, queue_id in dropped:
            log.info("cleanExpiredConsumerQueue: %s %d consume queue destroyed, minCommitLogOffset %d",
                     topic, queue_id, min_offset)
        return dropped

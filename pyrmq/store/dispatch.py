"""The one dispatch pipeline: every commit log record reaches the dispatchers through the
:class:`ReputService`, whether this broker just appended it, recovery found it at start-up, or a
slave received it from its master (Apache's ``dispatcherList`` fed by ``ReputMessageService``).

Derived structures are dispatchers: the consume queues, the message index, and whatever a role
adds (the broker's long-polling wake-ups; later the SQL92 bitmap and transaction ops). The reput
service owns ``reput_from_offset``, the commit log offset up to which every record has reached
every dispatcher. Appends on this broker take a fast path -- their dispatch requests come from
the append itself, so the bytes are not parsed again -- but only when the pipeline had caught up
with the commit log before the append; otherwise the service walks the stored bytes from
``reput_from_offset``. A dispatcher that fails leaves ``reput_from_offset`` before the record,
so the next append or reput delivers it again (consume queues and the index ignore duplicates).

A dispatcher that cannot take a record because a file cannot be created or reserved (EMFILE,
ENOSPC, EIO) raises :class:`DispatchError`: the pipeline stalls at that record (``failure``
says why) and nothing after it is dispatched, so the consume queues never skip a record and
every record below the highest consume queue unit has been dispatched -- which is what lets
recovery replay from the queues' end after a restart.  ``retry`` walks on from there; the store
refuses puts while the stall lasts and the broker retries every second.
"""

from __future__ import annotations

import logging
from typing import Callable, Protocol, Sequence

from pyrmq.codec.commit_log_walk import RecordWalker, WalkEnd
from pyrmq.codec.message import MessageConst, MessageSysFlag, RecordInfo, consume_queue_units, property_value
from pyrmq.store.checkpoint import StoreCheckpoint
from pyrmq.store.commit_log import CommitLog
from pyrmq.store.consume_queue_table import ConsumeQueueTable
from pyrmq.store.index_service import IndexService
from pyrmq.store.model import DispatchError, StoreError
from pyrmq.codec.system_topics import SCHEDULE_TOPIC

log = logging.getLogger(__name__)

_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL + "\x01"
_TRANSACTION_MASK = MessageSysFlag.TRANSACTION_MASK
_QUEUED_TYPES = MessageSysFlag.QUEUED_TYPES


class CommitLogDispatcher(Protocol):
    def dispatch(self, request: RecordInfo) -> None:
        """Take one record into account; called in commit log order, possibly more than once."""


def _each(dispatch: Callable[[RecordInfo], None]) -> Callable[[Sequence[RecordInfo]], None]:
    """A dispatcher's ``dispatch_many`` when it has none: its ``dispatch`` record by record."""
    def dispatch_many(requests: Sequence[RecordInfo]) -> None:
        for request in requests:
            dispatch(request)
    return dispatch_many


class ConsumeQueueDispatcher:
    """Appends a unit to the record's consume queue (Apache CommitLogDispatcherBuildConsumeQueue)."""

    def __init__(self, queues: ConsumeQueueTable, checkpoint: StoreCheckpoint | None) -> None:
        self.queues = queues
        self.checkpoint = checkpoint
        # SCHEDULE_TOPIC_XXXX units carry the delivery time as tagsCode (message.md §8):
        # (delay level, store timestamp) -> tagsCode, set by the broker's schedule service
        self.schedule_tags_code: Callable[[int, int], int] | None = None

    def _schedule_tags_code(self, request: RecordInfo) -> int:
        level = property_value(request.properties_string, _DELAY)
        if not level or self.schedule_tags_code is None:
            return request.tags_code
        try:
            return self.schedule_tags_code(int(level), request.store_timestamp)
        except ValueError:
            return request.tags_code

    def dispatch(self, request: RecordInfo) -> None:
        # (once per message: the common case is a dict hit and one put, nothing else)
        if request.sys_flag & _TRANSACTION_MASK not in _QUEUED_TYPES:
            return
        topic = request.topic
        cq = self.queues.queues.get((topic, request.queue_id))
        if cq is None:
            try:
                cq = self.queues.find_or_create(topic, request.queue_id)
            except StoreError as exc:   # a record no broker could have written: keep it out of any path
                log.warning("not dispatching record at %d: %s", request.commit_log_offset, exc)
                return
        tags_code = self._schedule_tags_code(request) if topic == SCHEDULE_TOPIC else request.tags_code
        cq.put_unit(request.commit_log_offset, request.size, tags_code, request.queue_offset)   # or DispatchError
        if self.checkpoint is not None:
            self.checkpoint.logics_msg_timestamp = request.store_timestamp

    def dispatch_many(self, requests: Sequence[RecordInfo]) -> None:
        """The records of one batch: their units written at once when they are consecutive units
        of one existing queue (what a batch send appends), else record by record."""
        first = requests[0]
        topic, queue_id = first.topic, first.queue_id
        cq = self.queues.queues.get((topic, queue_id))
        units = None
        if cq is not None and topic != SCHEDULE_TOPIC and first.sys_flag & _TRANSACTION_MASK in _QUEUED_TYPES:
            units = consume_queue_units(requests)   # (None unless one queue's consecutive records)
        last = requests[-1]
        if (units is None or cq is None or not cq.put_units(units, first.queue_offset,
                                                            first.commit_log_offset + first.size,
                                                            last.commit_log_offset + last.size)):
            for request in requests:
                self.dispatch(request)
            return
        if self.checkpoint is not None:
            self.checkpoint.logics_msg_timestamp = requests[-1].store_timestamp


class ConsumeQueueExtDispatcher(ConsumeQueueDispatcher):
    """The consume queue dispatcher with ``enableConsumeQueueExt``: each unit's real tags code,
    store time and filter bitmap go to an ext unit, and the CQ unit's tagsCode addresses it
    (Apache ConsumeQueue.putMessagePositionInfoWrapper).  A separate class, so a store without
    the ext pays nothing for it per message."""

    def dispatch_many(self, requests: Sequence[RecordInfo]) -> None:
        for request in requests:   # each unit with its ext unit
            self.dispatch(request)

    def __init__(self, queues: ConsumeQueueTable, checkpoint: StoreCheckpoint | None) -> None:
        super().__init__(queues, checkpoint)
        # record -> its SQL92 filter bitmap (the broker's CommitLogDispatcherCalcBitMap), or None
        self.bit_map_source: Callable[[RecordInfo], bytes | None] | None = None

    def dispatch(self, request: RecordInfo) -> None:
        if request.sys_flag & _TRANSACTION_MASK not in _QUEUED_TYPES:
            return
        topic = request.topic
        try:
            cq = self.queues.find_or_create(topic, request.queue_id)
        except StoreError as exc:
            log.warning("not dispatching record at %d: %s", request.commit_log_offset, exc)
            return
        if request.commit_log_offset + request.size <= cq.max_physic_offset:
            return   # a duplicate: its ext unit was written with it
        tags_code = self._schedule_tags_code(request) if topic == SCHEDULE_TOPIC else request.tags_code
        ext = cq.ext
        if ext is not None:
            source = self.bit_map_source
            bit_map = source(request) if source is not None else None
            address = ext.put(tags_code, request.store_timestamp, bit_map)
            if address is not None:
                tags_code = address
        cq.put_unit(request.commit_log_offset, request.size, tags_code, request.queue_offset)   # or DispatchError
        if self.checkpoint is not None:
            self.checkpoint.logics_msg_timestamp = request.store_timestamp


class IndexDispatcher:
    """Indexes UNIQ_KEY and KEYS (Apache CommitLogDispatcherBuildIndex), a batch of records at a
    time (IndexService.add); ``build_pending`` indexes what waits."""

    def __init__(self, index: IndexService) -> None:
        self.index = index

    def dispatch(self, request: RecordInfo) -> None:
        if "KEY" in request.properties_string:   # cheap pre-check: both names contain it
            self._index(self.index.add, request)

    def dispatch_many(self, requests: Sequence[RecordInfo]) -> None:
        keyed = [request for request in requests if "KEY" in request.properties_string]
        if keyed:
            self._index(self.index.add_many, keyed)

    def build_pending(self) -> None:
        self._index(self.index.build_pending)

    @staticmethod
    def _index(call: Callable[..., None], *args: RecordInfo | Sequence[RecordInfo]) -> None:
        try:
            call(*args)
        except OSError as e:
            raise DispatchError(f"cannot create or reserve an index file: {e}", e) from e


class ReputService:
    """Feeds every record from ``reput_from_offset`` to the commit log's end to the dispatchers."""

    def __init__(self, commit_log: CommitLog) -> None:
        self.commit_log = commit_log
        self.dispatchers: list[CommitLogDispatcher] = []
        self._dispatch_calls: tuple[Callable[[RecordInfo], None], ...] = ()
        # each dispatcher's dispatch_many (or its dispatch record by record), for a batch's records
        self._dispatch_many_calls: tuple[Callable[[Sequence[RecordInfo]], None], ...] = ()
        self.reput_from_offset = 0
        self.failure: DispatchError | None = None   # why the pipeline is stalled, None when it is not
        self.stalls = 0   # statistics: times a dispatcher could not take a record

    def add_dispatcher(self, dispatcher: CommitLogDispatcher, first: bool = False) -> None:
        self.dispatchers.insert(0 if first else len(self.dispatchers), dispatcher)
        self._dispatchers_changed()

    def remove_dispatcher(self, dispatcher: CommitLogDispatcher) -> None:
        self.dispatchers.remove(dispatcher)
        self._dispatchers_changed()

    def _dispatchers_changed(self) -> None:
        self._dispatch_calls = tuple(d.dispatch for d in self.dispatchers)
        self._dispatch_many_calls = tuple(getattr(d, "dispatch_many", None) or _each(d.dispatch)
                                          for d in self.dispatchers)

    def behind(self) -> int:
        """Bytes of the commit log not dispatched yet."""
        return max(0, self.commit_log.max_offset - self.reput_from_offset)

    def dispatch_appended(self, begin_offset: int, requests: Sequence[RecordInfo]) -> bool:
        """Dispatch the records an append just wrote; ``begin_offset`` is the commit log's end
        before that append. When the pipeline was behind, the stored bytes are walked instead,
        so nothing is skipped and nothing arrives out of order.  True when every one of
        ``requests`` reached every dispatcher (then the put may be acknowledged)."""
        if self.reput_from_offset != begin_offset:
            self.do_reput()
            last = requests[-1]
            return self.reput_from_offset >= last.commit_log_offset + last.size
        try:
            if len(requests) == 1:
                request = requests[0]
                for call in self._dispatch_calls:
                    call(request)
            else:
                # A batch: each dispatcher takes all its records, in the pipeline's order. When
                # one fails, the whole batch is dispatched again (duplicates are ignored); and
                # when the consume queue has a record's unit, every dispatcher before it has
                # every record of the batch, so a restart replaying from the queues' end misses
                # nothing.
                for dispatch_many in self._dispatch_many_calls:
                    dispatch_many(requests)
        except DispatchError as e:
            self._stall(e)
            return False
        last = requests[-1]
        self.reput_from_offset = last.commit_log_offset + last.size
        return True

    def _stall(self, error: DispatchError) -> None:
        self.stalls += 1
        if self.failure is None:   # once per stall, not once per retry
            log.error("dispatch stalled at commit log offset %d: %s; writes are refused until it is "
                      "dispatched (retried every second)", self.reput_from_offset, error)
        self.failure = error

    def retry(self) -> bool:
        """Dispatch on from where a failure stalled the pipeline; True once it caught up."""
        self.do_reput()
        return self.failure is None

    def do_reput(self, check_crc: bool = False, until: int | None = None, budget: int | None = None) -> WalkEnd:
        """Walk and dispatch the stored records from ``reput_from_offset`` to the end, or to
        ``until`` (a record start), at most ``budget`` records.

        Returns why it stopped: END_OF_DATA when caught up, INCOMPLETE when the last record is
        not whole yet (a slave waiting for the rest), a dispatcher could not take it (then
        ``failure`` says why) or the budget ran out, INVALID at a record that is not valid (with
        ``check_crc``, a body whose CRC does not match); ``reput_from_offset`` is then the offset
        of that record.
        """
        try:
            end = self._walk(check_crc, until, budget)
        except DispatchError as e:
            self._stall(e)
            return WalkEnd.INCOMPLETE
        if self.failure is not None:   # the record that failed went through this time
            log.info("dispatch goes on again (commit log offset %d); writes are accepted", self.reput_from_offset)
            self.failure = None
        return end

    def _walk(self, check_crc: bool, until: int | None, budget: int | None) -> WalkEnd:
        commit_log = self.commit_log
        mfq = commit_log.mapped_file_queue
        calls = self._dispatch_calls
        offset = max(self.reput_from_offset, commit_log.min_offset)
        self.reput_from_offset = max(offset, 0)
        end_offset = commit_log.max_offset if until is None else min(until, commit_log.max_offset)
        while offset < end_offset:
            mf = mfq.find_mapped_file_by_offset(offset)
            if mf is None:
                log.error("reput: no commit log file holds offset %d", offset)
                return WalkEnd.INVALID
            walker = RecordWalker(mf.view, offset - mf.file_from_offset,
                                  min(mf.wrote_position, end_offset - mf.file_from_offset),
                                  file_from_offset=mf.file_from_offset, check_crc=check_crc)
            for request in walker:
                for call in calls:
                    call(request)
                self.reput_from_offset = request.commit_log_offset + request.size
                if budget is not None:
                    budget -= 1
                    if budget <= 0 and self.reput_from_offset < end_offset:
                        return WalkEnd.INCOMPLETE
            if self.reput_from_offset >= end_offset:
                return WalkEnd.END_OF_DATA
            end = walker.end
            if end is WalkEnd.END_OF_FILE or (end is WalkEnd.END_OF_DATA and mf.is_full()):
                offset = mf.file_from_offset + mf.file_size
                self.reput_from_offset = offset
                continue
            if end is WalkEnd.INVALID:
                log.error("reput stopped at offset %d: the record there is not valid",
                          self.reput_from_offset)
                return end
            assert end is not None
            return end
        return WalkEnd.END_OF_DATA


class IndexRebuild:
    """Indexes, behind the live pipeline, the records a crash left out of the message index.

    After a crash the index files newer than the checkpoint are dropped (they may be torn), so
    the records from the last kept file's end on must be indexed again.  Replaying them through
    the whole pipeline before the broker listens costs as long as the commit log is (Apache
    replays only from the consume queues' end and so loses their keys).  Instead the index
    dispatcher leaves the live pipeline, this walker feeds it from where the index ends, a
    slice of records at a time, and rejoins it -- first, as before -- once it reaches the live
    pipeline's ``reput_from_offset``; the index is then whole again.  Everything runs on the
    event loop, so a query meanwhile finds the keys indexed so far and nothing half-written.
    """

    def __init__(self, live: ReputService, dispatcher: IndexDispatcher, from_offset: int) -> None:
        self.live = live
        self.dispatcher = dispatcher
        live.remove_dispatcher(dispatcher)
        self.walk = ReputService(live.commit_log)
        self.walk.add_dispatcher(dispatcher)
        self.walk.reput_from_offset = from_offset
        self.done = False

    @property
    def offset(self) -> int:
        """The commit log offset from which records are not indexed yet."""
        return self.walk.reput_from_offset

    @property
    def failure(self) -> DispatchError | None:
        return self.walk.failure

    def step(self, budget: int | None) -> bool:
        """Index up to ``budget`` more records (every one left: None); True once the index has
        caught up and its dispatcher is back in the live pipeline."""
        if self.done:
            return True
        live = self.live
        end = self.walk.do_reput(until=live.reput_from_offset, budget=budget)
        try:   # the slice's keys are in the index before a query can ask for them
            self.dispatcher.build_pending()
        except DispatchError as e:
            self.walk._stall(e)
            return False
        if end is WalkEnd.INVALID:   # the live replay read the same bytes, so it cannot happen
            log.error("index rebuild gives up at commit log offset %d: the keys of the records from "
                      "there to %d are not indexed", self.walk.reput_from_offset, live.reput_from_offset)
        elif self.walk.reput_from_offset < live.reput_from_offset:
            return False
        live.add_dispatcher(self.dispatcher, first=True)
        self.done = True
        return True

"""The transaction check service (Apache's TransactionalMessageCheckService and the check of its
TransactionalMessageServiceImpl): every ``transactionCheckInterval`` it walks the half queue from
its progress, matches the half messages against the op queue (resolved ones are skipped), and
for each half message older than ``transactionTimeOut`` (or its CHECK_IMMUNITY_TIME_IN_SECONDS)
writes it again at the end of the half queue with TRANSACTION_CHECK_TIMES counted up and asks a
live producer of its group (PGROUP) with CHECK_TRANSACTION_STATE; one checked
``transactionCheckMax`` times already goes to TRANS_CHECK_MAX_TIME_TOPIC instead.

Progress is Apache's: the consumer offsets of group CID_RMQ_SYS_TRANS on the half and op queues
(consumerOffset.json), so a store moves between pyrmq and Apache with its pending transactions.
Unlike Apache, a round writes those offsets to disk *before* its checks leave, and a round that
meets two copies of one half message (same UNIQ_KEY: a crash fell between a re-put and that
write) checks only the first: a producer is never asked twice about one transaction in a way
that could make it commit twice.

The round itself (:meth:`TransactionCheckService.check`) is synchronous and reads its time from
an injected clock, so tests drive it without waiting.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from pyrmq.broker.transaction_messages import (
    CHECK_GROUP,
    CHECK_MAX_TIME_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    REMOVE_TAG,
    discarded_half,
    immune_half,
    renewed_half,
)
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import (
    MessageConst,
    MessageExt,
    encode_message_record_bytes,
    property_value,
    record_properties_string,
)
from pyrmq.codec.remoting import make_request
from pyrmq.common.guard import ServiceGuard
from pyrmq.store.message_store import AppendMessageResult, MessageExtBrokerInner, PutMessageStatus

if TYPE_CHECKING:
    from pyrmq.broker.client_manager import ProducerManager
    from pyrmq.broker.config import BrokerConfig
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger("pyrmq.transaction")

# Apache: a queue's round stops after 60 s; op messages are read 32 at a time.
MAX_PROCESS_TIME_MS = 60_000
OP_PULL_NUMS = 32
# The operator's pending count reads at most this many half and op units.
PENDING_SCAN_LIMIT = 100_000
_MS_PER_HOUR = 3_600_000


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Pull:
    """What Apache's bridge getMessage answers: FOUND with messages, NO_NEW_MSG, or OFFSET_ILLEGAL."""

    status: str
    next_begin: int
    messages: list[MessageExt] | None = None


@dataclass
class CheckRequest:
    """One CHECK_TRANSACTION_STATE to send once the round's progress is on disk."""

    group: str
    header: dict[str, str]
    body: bytes


def _java_long(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


class TransactionCheckService:
    def __init__(self, *, config: BrokerConfig, store: DefaultMessageStore, topics: TopicConfigManager,
                 offsets: ConsumerOffsetManager, producers: ProducerManager,
                 clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.producers = producers
        self.clock = clock
        self.checks_sent = 0
        self.discarded = 0

    # --- the background service ------------------------------------------------------------

    async def run(self) -> None:
        guard = ServiceGuard("transaction check", log)
        while True:
            await trio.sleep(self.config.transaction_check_interval / 1000)
            with guard.round():
                await self.run_round()

    async def run_round(self) -> None:
        begin = self.clock()
        offsets_before = self._progress()
        checks = self.check()
        if self._progress() != offsets_before:
            self.offsets.persist_later()
            if self.offsets.persister is not None and not await self.offsets.persister.wait_written():
                log.error("writing the transaction check progress failed; its checks wait for the next round")
                return
        for check in checks:
            self.send_check(check)
        log.info("End to check prepare message, consumed time:%d", self.clock() - begin)

    def _progress(self) -> tuple[int, int]:
        return (self.offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0), self.offsets.query_offset(CHECK_GROUP, OP_TOPIC, 0))

    def send_check(self, check: CheckRequest) -> None:
        channel = self.producers.available_channel(check.group)
        if channel is None:
            log.warning("Check transaction failed, channel is null. groupId=%s", check.group)
            return
        channel.send_oneway(make_request(RequestCode.CHECK_TRANSACTION_STATE, check.header, check.body,
                                         serialize_type=channel.peer_serialize_type))
        self.checks_sent += 1

    # --- one round ---------------------------------------------------------------------------

    def check(self) -> list[CheckRequest]:
        """One round over every half queue; returns the checks to send."""
        topic_config = self.topics.select(HALF_TOPIC) or self.topics.create_in_send_back(HALF_TOPIC, 1)
        checks: list[CheckRequest] = []
        for queue_id in range(topic_config.read_queue_nums):
            self._check_queue(queue_id, checks)
        return checks

    def _check_queue(self, queue_id: int, checks: list[CheckRequest]) -> None:
        cfg = self.config
        timeout = cfg.transaction_time_out
        start = self.clock()
        half_offset = self._fetch_offset(HALF_TOPIC, queue_id)
        op_offset = self._fetch_offset(OP_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            log.error("half queue %d: illegal offset read: %d, op offset: %d, skip this queue", queue_id, half_offset,
                      op_offset)
            return
        done_ops: list[int] = []
        remove_map: dict[int, int] = {}
        pull = self._fill_op_remove_map(remove_map, queue_id, op_offset, half_offset, done_ops)
        null_count = 1
        checked: set[str] = set()
        end_at_start = self.store.get_max_offset_in_queue(HALF_TOPIC, queue_id)
        new_offset = i = half_offset
        while self.clock() - start <= MAX_PROCESS_TIME_MS:
            if i in remove_map:
                done_ops.append(remove_map.pop(i))
            else:
                got = self._pull(HALF_TOPIC, queue_id, i, 1)
                msg = got.messages[0] if got.messages else None
                if msg is None:
                    if null_count > 1 or got.status == "NO_NEW_MSG":
                        break
                    null_count += 1
                    new_offset = i = got.next_begin
                    continue
                uniq = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                if uniq is not None and uniq in checked and i < end_at_start:
                    # An older copy of a half message checked in this round: only after a crash
                    # between a re-put and the write of the progress can one follow the other.
                    # Checking both would let the producer commit both (pyrmq's own rule).
                    new_offset = i = i + 1
                    continue
                if self._need_discard(msg, cfg.transaction_check_max) or self._need_skip(msg):
                    self._discard(msg)
                    new_offset = i = i + 1
                    continue
                if msg.store_timestamp >= start or i >= end_at_start:
                    # stored during this round (a copy this round wrote, too): next round. The
                    # queue's end at the start says so whatever the clock (Apache: store time only).
                    break
                age = self.clock() - msg.born_timestamp
                immunity = timeout
                immunity_text = msg.properties.get(MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
                if immunity_text is not None:
                    seconds = _java_long(immunity_text)
                    immunity = timeout if seconds == -1 else seconds * 1000
                    if age < immunity and self._check_prepare_queue_offset(remove_map, done_ops, msg):
                        new_offset = i = i + 1
                        continue
                elif 0 <= age < immunity:
                    break   # not due yet, nor anything after it
                ops = pull.messages
                need_check = ((ops is None and age > immunity)
                              or (ops is not None and ops[-1].born_timestamp - start > timeout)
                              or age <= -1)
                if not need_check:
                    # maybe resolved by an op not read yet: read the next ops and look again
                    had_ops = ops is not None
                    pull = self._fill_op_remove_map(remove_map, queue_id, pull.next_begin, half_offset, done_ops)
                    if not had_ops and pull.messages is None:
                        break   # no op will come this round (Apache would spin until its time limit)
                    continue
                check = self._put_back_and_check(msg)
                if check is None:
                    break   # the store refused the re-put: this half again next round
                checks.append(check)
                if uniq is not None:
                    checked.add(uniq)
            new_offset = i = i + 1
        if new_offset != half_offset:
            self._commit_offset(HALF_TOPIC, queue_id, new_offset)
        new_op_offset = op_offset
        for done in sorted(done_ops):
            if done != new_op_offset:
                break
            new_op_offset += 1
        if new_op_offset != op_offset:
            self._commit_offset(OP_TOPIC, queue_id, new_op_offset)

    def _fetch_offset(self, topic: str, queue_id: int) -> int:
        offset = self.offsets.query_offset(CHECK_GROUP, topic, queue_id)
        return self.store.get_min_offset_in_queue(topic, queue_id) if offset == -1 else offset

    def _commit_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit_offset(CHECK_GROUP, topic, queue_id, offset)

    def _pull(self, topic: str, queue_id: int, offset: int, nums: int) -> _Pull:
        """Apache's store getMessage as the transaction bridge sees it (no filter)."""
        cq = self.store.find_consume_queue(topic, queue_id)
        if cq is None:
            return _Pull("OFFSET_ILLEGAL", 0)
        low, high = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        if high == 0:
            return _Pull("NO_NEW_MSG", 0)
        if offset < low:
            return _Pull("OFFSET_ILLEGAL", low)
        if offset == high:
            return _Pull("NO_NEW_MSG", offset)
        if offset > high:
            return _Pull("OFFSET_ILLEGAL", low if low == 0 else high)
        found: list[MessageExt] = []
        read = 0
        for commit_log_offset, _size, _tags in cq.iter_units(offset, nums):
            read += 1
            msg = self.store.look_message_by_offset(commit_log_offset)
            if msg is not None:
                found.append(msg)
        if not found:
            return _Pull("OFFSET_ILLEGAL", offset + max(read, 1))
        return _Pull("FOUND", offset + read, found)

    def _fill_op_remove_map(self, remove_map: dict[int, int], queue_id: int, op_from: int, mini_offset: int,
                            done_ops: list[int]) -> _Pull:
        pull = self._pull(OP_TOPIC, queue_id, op_from, OP_PULL_NUMS)
        if pull.status == "OFFSET_ILLEGAL":
            # (no op queue yet -- a broker that never saw a transaction -- is not worth a warning)
            if self.store.find_consume_queue(OP_TOPIC, queue_id) is not None:
                log.warning("The miss op offset=%d in queue=%d is illegal, next begin %d", op_from, queue_id,
                            pull.next_begin)
            self._commit_offset(OP_TOPIC, queue_id, pull.next_begin)
            return pull
        for op in pull.messages or ():
            if op.tags != REMOVE_TAG:
                log.error("Found a illegal tag in op message at %d: %r", op.commit_log_offset, op.tags)
                continue
            half_queue_offset = _java_long(op.body.decode("utf-8", "replace"))
            if half_queue_offset < mini_offset:
                done_ops.append(op.queue_offset)
            else:
                remove_map[half_queue_offset] = op.queue_offset
        return pull

    def _check_prepare_queue_offset(self, remove_map: dict[int, int], done_ops: list[int], msg: MessageExt) -> bool:
        text = msg.properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if text is not None:
            prepared = _java_long(text)
            if prepared == -1:
                return False
            if prepared in remove_map:
                done_ops.append(remove_map.pop(prepared))
                return True
        return self._put(immune_half(msg)) is not None

    @staticmethod
    def _need_discard(msg: MessageExt, check_max: int) -> bool:
        """Counts this check in the message's properties, or says it has had its checks."""
        text = msg.properties.get(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES)
        times = 1
        if text is not None:
            try:
                times = int(text)
            except ValueError:
                times = -1
            if times >= check_max:
                return True
            times += 1
        msg.properties[MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        return False

    def _need_skip(self, msg: MessageExt) -> bool:
        if self.clock() - msg.born_timestamp > self.store.config.file_reserved_time * _MS_PER_HOUR:
            log.info("Half message exceed file reserved time ,so skip it.messageId %s,bornTime %d", msg.msg_id,
                     msg.born_timestamp)
            return True
        return False

    def _discard(self, msg: MessageExt) -> None:
        log.error("half message %s (real topic %s) has been checked too many times, so discard it by moving it to "
                  "system topic %s", msg.msg_id, msg.properties.get(MessageConst.PROPERTY_REAL_TOPIC),
                  CHECK_MAX_TIME_TOPIC)
        self.topics.create_in_send_back(CHECK_MAX_TIME_TOPIC, 1)
        if self._put(discarded_half(msg)) is not None:
            self.discarded += 1

    def _put(self, inner: MessageExtBrokerInner) -> AppendMessageResult | None:
        result = self.store.put_message(inner)
        if result.status is not PutMessageStatus.PUT_OK or result.append_result is None:
            log.error("Put message failed, topic: %s, queueId: %d: %s", inner.topic, inner.queue_id,
                      result.status.name)
            return None
        return result.append_result

    def _put_back_and_check(self, msg: MessageExt) -> CheckRequest | None:
        append = self._put(renewed_half(msg))
        if append is None:
            return None
        msg.queue_offset = append.logics_offset
        msg.commit_log_offset = append.wrote_offset
        props = msg.properties
        uniq = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = {"tranStateTableOffset": str(msg.queue_offset), "commitLogOffset": str(msg.commit_log_offset),
                  "offsetMsgId": msg.msg_id}
        if uniq is not None:
            header["msgId"] = header["transactionId"] = uniq
        try:
            real_queue = int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID, ""))
        except ValueError:
            real_queue = msg.queue_id
        body = encode_message_record_bytes(
            queue_offset=msg.queue_offset, physical_offset=msg.commit_log_offset, store_timestamp=msg.store_timestamp,
            topic=props.get(MessageConst.PROPERTY_REAL_TOPIC, msg.topic), queue_id=real_queue, flag=msg.flag,
            body=msg.body, properties=msg.properties_string, sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
            reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset)
        return CheckRequest(props.get(MessageConst.PROPERTY_PRODUCER_GROUP, ""), header, body)

    # --- the operator's view -----------------------------------------------------------------

    def pending_by_group(self) -> dict[str, int]:
        """Half messages not resolved yet, per producer group (the half queue from the check
        progress on, less those an op resolved); reads at most PENDING_SCAN_LIMIT units."""
        pending: dict[str, int] = {}
        half_cq = self.store.find_consume_queue(HALF_TOPIC, 0)
        if half_cq is None:
            return pending
        resolved: set[int] = set()
        op_cq = self.store.find_consume_queue(OP_TOPIC, 0)
        if op_cq is not None:
            op_from = max(self._fetch_offset(OP_TOPIC, 0), op_cq.get_min_offset_in_queue())
            for commit_log_offset, _size, _tags in op_cq.iter_units(op_from, PENDING_SCAN_LIMIT):
                op = self.store.look_message_by_offset(commit_log_offset)
                if op is not None:
                    resolved.add(_java_long(op.body.decode("utf-8", "replace")))
        half_from = max(self._fetch_offset(HALF_TOPIC, 0), half_cq.get_min_offset_in_queue())
        prepared_key = MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET + "\x01"
        group_key = MessageConst.PROPERTY_PRODUCER_GROUP + "\x01"
        for index, (commit_log_offset, _size, _tags) in zip(itertools.count(half_from),
                                                            half_cq.iter_units(half_from, PENDING_SCAN_LIMIT)):
            if index in resolved:
                continue
            record = self.store.select_one_message_by_offset(commit_log_offset)
            if record is None:
                continue
            props = record_properties_string(record)
            prepared = property_value(props, prepared_key)
            if prepared and _java_long(prepared) in resolved:
                continue
            group = property_value(props, group_key) or ""
            pending[group] = pending.get(group, 0) + 1
        return pending

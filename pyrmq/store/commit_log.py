"""The CommitLog: appends stored message records to mmap'd files (store.md §2).

Appends run on one thread (the broker's event loop); :meth:`CommitLog.flush` may run on a
worker thread at the same time (see :mod:`pyrmq.store.mapped_file_queue`).
"""

from __future__ import annotations

import struct
import logging
import time

from pyrmq.codec.message import (
    BLANK_MAGIC_CODE,
    BLANK_RECORD,
    END_FILE_MIN_BLANK_LENGTH,
    MessageFormatError,
    MessageSysFlag,
    PROPERTY_SEPARATOR,
    RecordInfo,
    create_offset_msg_id,
    split_batch,
    encode_topic_tail,
    host_to_bytes,
    pickup_store_timestamp,
    prepare_record,
    property_value,
    tags_string_to_tags_code,
    write_prepared_record,
)
from pyrmq.codec.message import MessageConst
from pyrmq.store.mapped_file import MappedFile
from pyrmq.store.mapped_file_queue import MappedFileQueue
from pyrmq.store.model import (
    AppendMessageResult,
    MessageExtBatch,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
    put_status_of,
)

log = logging.getLogger(__name__)
_TAGS = MessageConst.PROPERTY_TAGS + "\x01"

# 4.9.8 and 5.x encoders accept a whole record of up to maxMessageSize plus this much
# (topic, properties and the fixed fields around a maximal body)
RECORD_OVERHEAD_ALLOWANCE = 64 * 1024
# Commit log space is reserved this far ahead of the writer (mapped_file.py): one fallocate per
# 4 MiB of records, a metadata update of microseconds on ext4 -- less than the page faults it saves.
COMMIT_LOG_RESERVE_CHUNK = 4 * 1024 * 1024
# Flushed commit log pages this far behind the flushed end leave the broker's page tables (they
# stay in the page cache): every record written passes through the mapping once, and without
# this the resident size grows with everything written since the files were mapped -- a GiB per
# GiB of traffic -- although the consumers at the tail read only the last few MiB.
RELEASE_BEHIND = 16 * 1024 * 1024
# ... in steps of at least this much (one madvise call per step and file)
RELEASE_STEP = 4 * 1024 * 1024
# Hosts whose address bytes are kept (the store's and its clients'); past this many, start over.
MAX_CACHED_HOSTS = 4096

_TRANSACTION_MASK = MessageSysFlag.TRANSACTION_MASK
_NO_QUEUE_OFFSET_TYPES = (
    MessageSysFlag.TRANSACTION_PREPARED_TYPE,
    MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendError(Exception):
    def __init__(self, status: PutMessageStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class CommitLog:
    def __init__(self, config: MessageStoreConfig) -> None:
        self.config = config
        self.mapped_file_queue = MappedFileQueue(config.commit_log_dir(),
                                                 config.mapped_file_size_commit_log, COMMIT_LOG_RESERVE_CHUNK)
        # next queue offset per "topic-queueId" (store.md §2.2), rebuilt from the CQs at start
        self.topic_queue_table: dict[str, int] = {}
        self._max_record_size = min(
            config.max_message_size + RECORD_OVERHEAD_ALLOWANCE,
            config.mapped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH,
        )
        # the address bytes of the store host and of the clients' hosts, by their text
        self._ip_cache: dict[str, bytes] = {}
        self._released_until = 0   # commit log offset below which pages were released

    # ------------------------------------------------------------------ state

    def load(self) -> None:
        self.mapped_file_queue.load()

    @property
    def max_offset(self) -> int:
        return self.mapped_file_queue.max_offset()

    @property
    def committed_offset(self) -> int:
        """The end of completely written data: ``max_offset`` as every append, replicated
        append and truncation publishes it, read in O(1) on the send path."""
        return self.mapped_file_queue.committed_where

    @property
    def min_offset(self) -> int:
        return self.mapped_file_queue.min_offset()

    @property
    def flushed_where(self) -> int:
        return self.mapped_file_queue.flushed_where

    @property
    def flushed_store_timestamp(self) -> int:
        return self.mapped_file_queue.flushed_store_timestamp

    def roll_next_file(self, offset: int) -> int:
        return self.mapped_file_queue.roll_next_file(offset)

    def flush(self, least_pages: int = 0) -> int:
        """Sync appended data to disk; thread-safe against appends. Returns flushed-where.
        Then releases the mapped pages far enough behind (RELEASE_BEHIND)."""
        flushed = self.mapped_file_queue.flush(least_pages)
        self._release_behind(flushed - RELEASE_BEHIND)
        return flushed

    def _release_behind(self, until: int) -> None:
        # two flushes at once (group commit and shutdown) at worst release a range twice: harmless
        start = self._released_until
        if until - start < RELEASE_STEP:
            return
        mfq = self.mapped_file_queue
        size = mfq.mapped_file_size
        for mf in list(mfq.mapped_files):
            file_end = mf.file_from_offset + size
            if file_end <= start or mf.file_from_offset >= until:
                continue
            mf.release_pages(max(start, mf.file_from_offset) - mf.file_from_offset,
                             min(until, file_end) - mf.file_from_offset)
        self._released_until = until

    def close(self) -> None:
        self.mapped_file_queue.close()

    # ------------------------------------------------------------------ reads

    def get_data(self, offset: int, size: int) -> memoryview | None:
        """``size`` bytes of written data at ``offset`` (within one file), or None."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None or size < 0:
            return None
        return mf.select(offset - mf.file_from_offset, size)

    get_message = get_data

    def get_data_to_end_of_file(self, offset: int) -> memoryview | None:
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select(offset - mf.file_from_offset)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset``; -1 when it is not readable."""
        if offset < self.min_offset or size < 64:
            return -1
        view = self.get_data(offset, size)
        if view is None:
            return -1
        return pickup_store_timestamp(view)

    # ------------------------------------------------------------------ appends

    def _ip_bytes(self, host: str) -> bytes:
        ip = self._ip_cache.get(host)
        if ip is None:
            if len(self._ip_cache) >= MAX_CACHED_HOSTS:
                self._ip_cache.clear()
            ip = self._ip_cache[host] = host_to_bytes(host)
        return ip

    def _writable_file(self, size: int) -> MappedFile:
        """The file to write ``size`` bytes to, after closing the current one with a blank
        record, with the space for them reserved (a full disk is a refused put, not a SIGBUS)."""
        mfq = self.mapped_file_queue
        try:
            mf = mfq.get_last_mapped_file(0)
            if mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
                pos = mf.wrote_position
                if pos + BLANK_RECORD.size > mf.reserved:
                    mf.reserve_to(pos + BLANK_RECORD.size)
                max_blank = mf.file_size - pos
                BLANK_RECORD.pack_into(mf.mm, pos, max_blank, BLANK_MAGIC_CODE)
                mf.wrote_position = mf.file_size  # the whole rest is declared written
                mfq.commit(mf.file_from_offset + mf.file_size)
                mf = mfq.get_last_mapped_file(0)
            if mf.wrote_position + size > mf.reserved:
                mf.reserve_to(mf.wrote_position + size)
        except OSError as e:   # logged by the store, at most once a second
            raise AppendError(put_status_of(e), f"cannot create or reserve a commit log file: {e}") from e
        return mf

    def append_message(self, msg: MessageExtBrokerInner) -> tuple[AppendMessageResult, RecordInfo]:
        """Append one record; returns the result and the record's dispatch request."""
        try:
            r = prepare_record(
                topic=msg.topic, queue_id=msg.queue_id, flag=msg.flag, body=msg.body,
                properties=msg.properties_string, sys_flag=msg.sys_flag,
                born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                store_host=msg.store_host, reconsume_times=msg.reconsume_times,
                prepared_transaction_offset=msg.prepared_transaction_offset,
                store_ip=self._ip_bytes(msg.store_host[0]), born_ip=self._ip_bytes(msg.born_host[0]),
            )
        except (MessageFormatError, OSError, ValueError, struct.error) as e:   # struct.error: a field past its range
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, str(e)) from e
        size = r.total_size
        if size > self._max_record_size:
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL,
                              f"message record of {size} bytes exceeds {self._max_record_size}")
        key = f"{msg.topic}-{msg.queue_id}"
        table = self.topic_queue_table
        tran_type = r.sys_flag & _TRANSACTION_MASK
        counts = tran_type not in _NO_QUEUE_OFFSET_TYPES
        queue_offset = table.get(key, 0) if counts else 0

        mf = self._writable_file(size)
        pos = mf.wrote_position
        wrote_offset = mf.file_from_offset + pos
        store_timestamp = now_ms()
        write_prepared_record(mf.mm, pos, r, queue_offset, wrote_offset, store_timestamp)
        mf.wrote_position = pos + size
        self.mapped_file_queue.commit(wrote_offset + size, store_timestamp)
        if counts:
            table[key] = queue_offset + 1
        result = AppendMessageResult(
            wrote_offset=wrote_offset, wrote_bytes=size,
            msg_id=create_offset_msg_id(r.store_ip, r.store_port, wrote_offset),
            store_timestamp=store_timestamp, logics_offset=queue_offset,
        )
        dispatch = RecordInfo(size, msg.topic, msg.queue_id, queue_offset, wrote_offset, r.sys_flag,
                              store_timestamp, msg.tags_code, msg.prepared_transaction_offset,
                              msg.properties_string)
        return result, dispatch

    def append_batch(self, batch: MessageExtBatch) -> tuple[AppendMessageResult, list[RecordInfo]]:
        """Append each batch entry as its own record, consecutive queue offsets (message.md §5)."""
        try:
            entries = split_batch(batch.body)
        except MessageFormatError as e:
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, f"bad batch body: {e}") from e
        if not entries:
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, "empty batch")
        topic_bytes = batch.topic.encode()
        batch_props = batch.properties_string
        prepared = []
        try:
            store_ip = self._ip_bytes(batch.store_host[0])
            born_ip = self._ip_bytes(batch.born_host[0])
            for entry_flag, entry_body, entry_props in entries:
                props = entry_props
                if props and not props.endswith(PROPERTY_SEPARATOR):
                    props += PROPERTY_SEPARATOR
                props += batch_props
                r = prepare_record(
                    topic=batch.topic, queue_id=batch.queue_id, flag=entry_flag, body=entry_body,
                    properties=props, sys_flag=batch.sys_flag,
                    born_timestamp=batch.born_timestamp, born_host=batch.born_host,
                    store_host=batch.store_host, reconsume_times=batch.reconsume_times,
                    prepared_transaction_offset=0, store_ip=store_ip, born_ip=born_ip,
                    tail=encode_topic_tail(topic_bytes, props.encode()),
                )
                tags = property_value(entry_props, _TAGS)
                prepared.append((r, props, tags_string_to_tags_code(tags)))
        except (MessageFormatError, OSError, ValueError, struct.error) as e:   # struct.error: a field past its range
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, str(e)) from e
        total = sum(r.total_size for r, _, _ in prepared)
        if total > self.config.mapped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH or any(
            r.total_size > self._max_record_size for r, _, _ in prepared
        ):
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, f"batch of {total} bytes too large")

        key = f"{batch.topic}-{batch.queue_id}"
        first_queue_offset = self.topic_queue_table.get(key, 0)
        mf = self._writable_file(total)  # the whole batch goes into one file
        pos = mf.wrote_position
        begin = mf.file_from_offset + pos
        store_timestamp = now_ms()
        dispatches = []
        msg_ids = []
        offset = begin
        for i, (r, props, tags_code) in enumerate(prepared):
            size = write_prepared_record(mf.mm, pos, r, first_queue_offset + i, offset, store_timestamp)
            dispatches.append(RecordInfo(size, batch.topic, batch.queue_id, first_queue_offset + i, offset,
                                         r.sys_flag, store_timestamp, tags_code, 0, props))
            msg_ids.append(create_offset_msg_id(store_ip, r.store_port, offset))
            pos += size
            offset += size
        mf.wrote_position = pos
        self.mapped_file_queue.commit(offset, store_timestamp)
        self.topic_queue_table[key] = first_queue_offset + len(prepared)
        result = AppendMessageResult(
            wrote_offset=begin, wrote_bytes=total, msg_id=",".join(msg_ids),
            store_timestamp=store_timestamp, logics_offset=first_queue_offset,
            msg_num=len(prepared),
        )
        return result, dispatches

    # ------------------------------------------------------------------ replicated bytes

    def append_data(self, phy_offset: int, data: bytes | memoryview) -> None:
        """Append raw commit log bytes at ``phy_offset`` (an HA slave copying its master).

        ``phy_offset`` must be this commit log's end -- bytes are never written over nor with a
        gap -- and the data must fit in the file it starts in (a master transfers from one file
        at a time). Records are checked and dispatched by the store's reput service afterwards.
        """
        mfq = self.mapped_file_queue
        size = mfq.mapped_file_size
        if mfq.last_mapped_file() is None:
            if phy_offset % size:
                raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL,
                                  f"the first replicated bytes must start a file, not offset {phy_offset}")
        elif phy_offset != self.max_offset:
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL,
                              f"replicated bytes at {phy_offset} do not continue the commit log end {self.max_offset}")
        try:
            mf = mfq.get_last_mapped_file(phy_offset)
            pos = phy_offset - mf.file_from_offset
            if not 0 <= pos <= mf.file_size - len(data):
                raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL,
                                  f"{len(data)} replicated bytes at {phy_offset} do not fit in file {mf.file_name}")
            if pos + len(data) > mf.reserved:
                mf.reserve_to(pos + len(data))
        except OSError as e:
            log.error("cannot create or reserve a commit log file: %s", e)
            raise AppendError(put_status_of(e), f"cannot create or reserve a commit log file: {e}") from e
        mf.mm[pos:pos + len(data)] = data
        mf.wrote_position = pos + len(data)
        mfq.commit(phy_offset + len(data))

    def truncate(self, offset: int) -> None:
        """Forget every byte at or after ``offset`` (replicated bytes that failed their check)."""
        self.mapped_file_queue.truncate_dirty_files(offset, self.mapped_file_queue.mapped_file_size)

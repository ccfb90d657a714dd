"""The CommitLog: appends stored message records to mmap'd files (store.md §2).

Appends run on one thread (the broker's event loop); :meth:`CommitLog.flush` may run on a
worker thread at the same time (see :mod:`pyrmq.store.mapped_file_queue`).
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import time
from typing import Any

from pyrmq.codec.message import (
    BLANK_MAGIC_CODE,
    BLANK_RECORD,
    END_FILE_MIN_BLANK_LENGTH,
    MessageFormatError,
    MessageSysFlag,
    NO_ROOM,
    PROPERTY_SEPARATOR,
    RecordInfo,
    WriteBuffer,
    batch_record_infos,
    offset_msg_id_prefix,
    encode_record,
    encode_records,
    host_to_bytes,
    pickup_store_timestamp,
    record_length,
    split_batch,
    with_host_flags,
)
from pyrmq.store.mapped_file import MappedFile
from pyrmq.store.mapped_file_queue import FlushPlan, MappedFileQueue
from pyrmq.store.model import (
    AppendMessageResult,
    FlushDiskType,
    MessageExtBatch,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
    put_status_of,
)

log = logging.getLogger(__name__)

# 4.9.8 and 5.x encoders accept a whole record of up to maxMessageSize plus this much
# (topic, properties and the fixed fields around a maximal body)
RECORD_OVERHEAD_ALLOWANCE = 64 * 1024
# Commit log space is reserved this far ahead of the writer (mapped_file.py): one fallocate per
# 4 MiB of records, a metadata update of microseconds on ext4 -- less than the page faults it saves.
COMMIT_LOG_RESERVE_CHUNK = 4 * 1024 * 1024
# Flushed commit log pages this far behind the flushed end leave the broker's page tables (they
# stay in the page cache): every record written passes through the mapping once (ASYNC_FLUSH;
# under SYNC_FLUSH the consumers' reads map the pages), and without
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


# encode_record's arguments from the topic to the queue offset: a record but for where it goes
_RecordFields = tuple[str, str, "bytes | memoryview", int, int, int, int, bytes, int, bytes, int, int, int, int]


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
        # next queue offset per queue (Apache's "topic-queueId" table, store.md §2.2), rebuilt
        # from the CQs at start; keyed (topic, queueId) like the consume queue table: no key
        # string to format and hash per message
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self._max_record_size = min(
            config.max_message_size + RECORD_OVERHEAD_ALLOWANCE,
            config.mapped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH,
        )
        # (born ip, store ip, msgId prefix) by (born host, store host): _host_fields
        self._host_cache: dict[tuple[str, tuple[str, int]], tuple[bytes, bytes, str]] = {}
        self._released_until = 0   # commit log offset below which pages were released
        # SYNC_FLUSH: records are encoded here and written with pwrite, not through the mapping.
        # The group commit's fdatasync runs in a thread while the loop appends, and a store into
        # a mapped page that the flush has just cleaned faults (page_mkwrite) and holds the flush
        # up: on ext4 a round took 6 ms so, 0.5 ms with the same records written by pwrite.
        # ASYNC_FLUSH keeps the mapping (a syscall per record costs more than its rare faults).
        self._write_buffer: memoryview | None = (
            memoryview(bytearray(self._max_record_size)) if config.flush_disk_type is FlushDiskType.SYNC_FLUSH
            else None)

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
        return self._release_behind(self.mapped_file_queue.flush(least_pages))

    def flush_plan(self) -> FlushPlan | None:
        """What a flush would sync now, for a caller that syncs the files itself, then reports
        with :meth:`flushed_by` (the group commit); None when everything is flushed."""
        return self.mapped_file_queue.flush_plan()

    def flushed_by(self, plan: FlushPlan) -> int:
        """Record ``plan``'s files as synced (see :meth:`flush_plan`); returns flushed-where."""
        mfq = self.mapped_file_queue
        mfq.flushed_by(plan)
        return self._release_behind(mfq.flushed_where)

    def _release_behind(self, flushed: int) -> int:
        """Release the mapped pages RELEASE_BEHIND behind ``flushed`` (returned as is)."""
        # two flushes at once (group commit and shutdown) at worst release a range twice: harmless
        until = flushed - RELEASE_BEHIND
        start = self._released_until
        if until - start < RELEASE_STEP:
            return flushed
        mfq = self.mapped_file_queue
        size = mfq.mapped_file_size
        for mf in list(mfq.mapped_files):
            file_end = mf.file_from_offset + size
            if file_end <= start or mf.file_from_offset >= until:
                continue
            mf.release_pages(max(start, mf.file_from_offset) - mf.file_from_offset,
                             min(until, file_end) - mf.file_from_offset)
        self._released_until = until
        return flushed

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

    def _host_fields(self, born_host: str, store_host: tuple[str, int]) -> tuple[bytes, bytes, str]:
        """(born ip, store ip, the store host's part of its records' offset msgIds -- the offset's
        16 digits follow) of a message from ``born_host`` stored by ``store_host``; found once per
        pair of hosts (there are as many as connections)."""
        key = (born_host, store_host)
        fields = self._host_cache.get(key)
        if fields is None:
            store_ip = host_to_bytes(store_host[0])
            if len(self._host_cache) >= MAX_CACHED_HOSTS:
                self._host_cache.clear()
            fields = self._host_cache[key] = (host_to_bytes(born_host), store_ip,
                                              offset_msg_id_prefix(store_ip, store_host[1]))
        return fields

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

    @staticmethod
    def _reserve_ahead(mf: MappedFile, size: int) -> None:
        """Reserve room for ``size`` more bytes of ``mf`` when the file has it. A batch that ran
        past the reserved space would be sized record by record and encoded again: with batches
        of 64 KiB and more, one batch in fifty or so."""
        end = mf.wrote_position + size
        if mf.reserved < end <= mf.file_size - END_FILE_MIN_BLANK_LENGTH:
            try:
                mf.reserve_to(end)
            except OSError as e:
                raise AppendError(put_status_of(e), f"cannot reserve commit log space: {e}") from e

    @staticmethod
    def _room(mf: MappedFile) -> int:
        """Where records written to ``mf`` now must end: its reserved space, and room for the
        blank record that closes a file."""
        return min(mf.reserved, mf.file_size - END_FILE_MIN_BLANK_LENGTH)

    def _hosts(self, msg: MessageExtBrokerInner | MessageExtBatch) -> tuple[bytes, bytes, int, str]:
        """(born ip, store ip, sysFlag with its host bits, offset msgId prefix) of a message."""
        try:
            born_ip, store_ip, msg_id_prefix = self._host_fields(msg.born_host[0], msg.store_host)
        except (OSError, ValueError, struct.error) as e:   # struct.error: a port out of range
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, str(e)) from e
        return born_ip, store_ip, with_host_flags(msg.sys_flag, born_ip, store_ip), msg_id_prefix

    def append_message(self, msg: MessageExtBrokerInner) -> tuple[AppendMessageResult, RecordInfo]:
        """Append one record; returns the result and the record's dispatch request.

        The record is encoded straight into the file (one C call when built; with SYNC_FLUSH into
        a buffer then written with pwrite, see ``__init__``): into the current
        file when it fits there, else -- its size known from that attempt -- into the file
        ``_writable_file`` makes room in. Nothing is written for a record that is refused."""
        born_ip, store_ip, sys_flag, msg_id_prefix = self._hosts(msg)
        key = (msg.topic, msg.queue_id)
        table = self.topic_queue_table
        counts = sys_flag & _TRANSACTION_MASK not in _NO_QUEUE_OFFSET_TYPES
        queue_offset = table.get(key, 0) if counts else 0
        fields: _RecordFields = (msg.topic, msg.properties_string, msg.body, msg.queue_id, msg.flag, sys_flag, msg.born_timestamp,
                  born_ip, msg.born_host[1], store_ip, msg.store_host[1], msg.reconsume_times,
                  msg.prepared_transaction_offset, queue_offset)
        store_timestamp = now_ms()
        max_size = self._max_record_size
        mf = self.mapped_file_queue.last_mapped_file()
        try:
            if mf is None:   # no file yet: a size query
                size = encode_record(NO_ROOM, 0, 0, *fields, 0, store_timestamp)
            else:
                pos = mf.wrote_position
                size = self._encode(mf, pos, min(self._room(mf), pos + max_size), fields, store_timestamp)
            if mf is None or size < 0:   # no room here (or too large): minus its size
                if -size > max_size:
                    raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL,
                                      f"message record of {-size} bytes exceeds {max_size}")
                mf = self._writable_file(-size)
                pos = mf.wrote_position
                size = self._encode(mf, pos, self._room(mf), fields, store_timestamp)
                assert size > 0, "a file made room for a record it has no room for"
        except (ValueError, struct.error) as e:   # struct.error: a field past its range
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, str(e)) from e
        except OSError as e:   # the write (SYNC_FLUSH): EIO
            raise AppendError(put_status_of(e), f"cannot write to the commit log: {e}") from e
        wrote_offset = mf.file_from_offset + pos
        mf.wrote_position = pos + size
        self.mapped_file_queue.commit(wrote_offset + size, store_timestamp)
        if counts:
            table[key] = queue_offset + 1
        result = AppendMessageResult(
            wrote_offset=wrote_offset, wrote_bytes=size,
            msg_id=f"{msg_id_prefix}{wrote_offset:016X}",
            store_timestamp=store_timestamp, logics_offset=queue_offset,
        )
        dispatch = RecordInfo(size, msg.topic, msg.queue_id, queue_offset, wrote_offset, sys_flag,
                              store_timestamp, msg.tags_code, msg.prepared_transaction_offset,
                              msg.properties_string)
        return result, dispatch

    def _encode(self, mf: MappedFile, pos: int, limit: int, fields: _RecordFields, store_timestamp: int) -> int:
        """Encode one record (``fields``: encode_record's from topic to queue offset) at ``pos``
        of ``mf``, ending by ``limit``; its size, or minus its size when it does not fit."""
        buffer = self._write_buffer
        if buffer is None:
            return encode_record(mf.mm, pos, max(pos, limit), *fields, mf.file_from_offset + pos, store_timestamp)
        size = encode_record(buffer, 0, max(0, min(limit - pos, len(buffer))), *fields, mf.file_from_offset + pos,
                             store_timestamp)
        if size > 0:
            self._write_out(mf, pos, buffer[:size])
        return size

    @staticmethod
    def _write_out(mf: MappedFile, pos: int, data: memoryview) -> None:
        """Write ``data`` at ``pos`` of ``mf``'s file (the page cache the mapping shares).
        Raises OSError, also for a short write (nothing counts as written then)."""
        written = os.pwrite(mf.fd, data, pos)
        if written != len(data):
            raise OSError(errno.EIO, f"short write to {mf.path}: {written} of {len(data)} bytes")

    def append_batch(self, batch: MessageExtBatch) -> tuple[AppendMessageResult, list[RecordInfo]]:
        """Append each batch entry as its own record, consecutive queue offsets (message.md §5),
        all in one file: into the current one when they fit there, else into the file
        ``_writable_file`` makes room in."""
        batch_props = batch.properties_string
        try:   # each entry with the properties its record stores: its own, then the batch's
            entries = split_batch(batch.body, suffix=batch_props)
        except MessageFormatError as e:
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, f"bad batch body: {e}") from e
        if not entries:
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, "empty batch")
        born_ip, store_ip, sys_flag, prefix = self._hosts(batch)
        key = (batch.topic, batch.queue_id)
        first_queue_offset = self.topic_queue_table.get(key, 0)
        store_timestamp = now_ms()
        fields = (batch.topic, batch.queue_id, sys_flag, batch.born_timestamp, born_ip, batch.born_host[1],
                  store_ip, batch.store_host[1], batch.reconsume_times)
        mf = self.mapped_file_queue.last_mapped_file()
        if mf is not None:
            # At most this many bytes: the entries' bodies and own properties are in the batch
            # body, and each record adds its fixed fields, the topic and the batch's properties.
            bound = len(batch.body) + len(entries) * record_length(
                sys_flag, 0, len(batch.topic.encode()), len(batch_props.encode()) + len(PROPERTY_SEPARATOR))
            self._reserve_ahead(mf, bound)
        try:
            sizes = None if mf is None else self._write_entries(mf, entries, fields, first_queue_offset,
                                                                 store_timestamp)
            if mf is None or sizes is None:   # no room in the current file: the sizes, then a file with room
                topic, queue_id, host_fields = fields[0], fields[1], fields[2:]
                sizes = [-encode_record(NO_ROOM, 0, 0, topic, props, body, queue_id, flag, *host_fields, 0, 0, 0,
                                        store_timestamp) for flag, body, props in entries]
                total = sum(sizes)
                if total > self.config.mapped_file_size_commit_log - END_FILE_MIN_BLANK_LENGTH or max(
                        sizes) > self._max_record_size:
                    raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, f"batch of {total} bytes too large")
                mf = self._writable_file(total)
                sizes = self._write_entries(mf, entries, fields, first_queue_offset, store_timestamp)
                assert sizes is not None, "a file made room for a batch it has no room for"
        except (ValueError, struct.error) as e:   # struct.error: a field past its range
            raise AppendError(PutMessageStatus.MESSAGE_ILLEGAL, str(e)) from e
        except OSError as e:   # the write (SYNC_FLUSH): EIO
            raise AppendError(put_status_of(e), f"cannot write to the commit log: {e}") from e

        begin = mf.file_from_offset + mf.wrote_position
        wrote = sum(sizes)
        dispatches, msg_ids = batch_record_infos(entries, sizes, batch.topic, batch.queue_id, first_queue_offset,
                                                 begin, sys_flag, store_timestamp, prefix)
        mf.wrote_position += wrote
        self.mapped_file_queue.commit(begin + wrote, store_timestamp)
        self.topic_queue_table[key] = first_queue_offset + len(entries)
        result = AppendMessageResult(
            wrote_offset=begin, wrote_bytes=wrote, msg_id=msg_ids,
            store_timestamp=store_timestamp, logics_offset=first_queue_offset,
            msg_num=len(entries),
        )
        return result, dispatches

    def _write_entries(self, mf: MappedFile, entries: list[tuple[int, bytes, str]], fields: tuple[Any, ...],
                       first_queue_offset: int, store_timestamp: int) -> list[int] | None:
        """Write a batch's records from ``mf``'s end (one C call when built); their sizes, or None
        when one has no room there or is too large (what was written is then cut off: a recovery
        never reads it)."""
        start = mf.wrote_position
        room = self._room(mf)

        def encode(target: WriteBuffer, pos: int, limit: int, base_offset: int) -> list[int] | None:
            return encode_records(target, pos, limit, self._max_record_size, fields[0], entries,
                                  *(*fields[1:], first_queue_offset, base_offset, store_timestamp))

        buffer = self._write_buffer
        if buffer is not None:   # SYNC_FLUSH: see __init__
            limit = max(0, min(room - start, len(buffer)))
            sizes = encode(buffer, 0, limit, mf.file_from_offset + start)
            if sizes is not None:
                self._write_out(mf, start, buffer[:sum(sizes)])
                return sizes
            if limit == room - start:
                return None   # no room in this file
            # more records than the buffer holds: written through the mapping
        sizes = None
        try:
            sizes = encode(mf.mm, start, room, mf.file_from_offset)
        finally:
            if sizes is None and mf.reserved >= start + BLANK_RECORD.size:
                # records past the file's end that no put covers: a zero TOTALSIZE ends a walk there
                BLANK_RECORD.pack_into(mf.mm, start, 0, 0)
        return sizes

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

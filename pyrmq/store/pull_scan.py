"""The pull scan: which stored records answer one pull (Java ``DefaultMessageStore.getMessage``,
store.md §4 / codes.md §4.5).

Reads consume queue units from ``offset``, filters them by tags code (and, with a ConsumeQueueExt,
by the unit's ext unit: its real tags code and SQL92 bitmap), then by the record itself,
and collects memoryview slices of the commit log mapping -- the bytes the pull answer carries to
the socket untouched. Batch limits follow Java: a message count, and a byte/count budget that is
smaller when the records are "on disk" (further behind the end than the memory ratio allows).
"""

from __future__ import annotations

from pyrmq.codec.store_formats import CQ_EXT_MAX_ADDR, CQ_STORE_UNIT_SIZE, CQ_UNIT
from pyrmq.store.commit_log import CommitLog
from pyrmq.store.consume_queue import ConsumeQueue
from pyrmq.store.model import GetMessageResult, GetMessageStatus, MessageFilter, MessageStoreConfig

MIN_FILTER_SCAN_BYTES = 16000  # Java scans at least this many CQ bytes per pull


class PullScanner:
    def __init__(self, config: MessageStoreConfig, commit_log: CommitLog, memory_limit: int) -> None:
        self.config = config
        self.commit_log = commit_log
        # records further than this behind the commit log's end are "on disk" (Java's
        # accessMessageInMemoryMaxRatio of physical memory)
        self.memory_limit = memory_limit

    def in_disk(self, offset_py: int, max_offset_py: int) -> bool:
        return max_offset_py - offset_py > self.memory_limit

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

    def get_message(self, cq: ConsumeQueue, offset: int, max_msg_nums: int,
                    message_filter: MessageFilter | None) -> GetMessageResult:
        """Up to ``max_msg_nums`` records of ``cq`` from queue offset ``offset``."""
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
                self._scan_units(result, units, offset, max_msg_nums, message_filter, cq)
        return result

    def _scan_units(self, result: GetMessageResult, units: memoryview, offset: int,
                    max_msg_nums: int, message_filter: MessageFilter | None, cq: ConsumeQueue) -> None:
        commit_log = self.commit_log
        ext = cq.ext   # None unless enableConsumeQueueExt
        max_offset_py = commit_log.max_offset
        memory_limit = self.memory_limit
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
            in_disk = max_offset_py - offset_py > memory_limit
            if self._batch_full(size_py, max_msg_nums, total, count, in_disk):
                break
            scanned += 1
            if message_filter is not None:
                if tags_code <= CQ_EXT_MAX_ADDR:
                    # an ext address: the real tags code and the bitmap are in the ext unit; one
                    # that cannot be read (ext off now, or gone) is not filtered here (Apache:
                    # tagsCode null), the record stage decides
                    ext_unit = ext.get(tags_code) if ext is not None else None
                    if ext_unit is not None and not message_filter.is_matched_by_consume_queue(
                            ext_unit.tags_code, ext_unit):
                        if total == 0:
                            status = GetMessageStatus.NO_MATCHED_MESSAGE
                        continue
                elif not message_filter.is_matched_by_consume_queue(tags_code):
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
        result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory_limit

"""Values the store exchanges with the broker: config, put/get results, messages to put.

Re-exported by :mod:`pyrmq.store.message_store`; kept apart so the lower store modules
(commit_log, consume_queue, recovery) can use them without importing the facade.
"""

from __future__ import annotations

import enum
import errno
import os
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


@dataclass
class MessageStoreConfig:
    """Store settings; snake_case of Apache RocketMQ's MessageStoreConfig keys."""

    store_path_root_dir: str
    store_path_commit_log: str | None = None  # default <root>/commitlog
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    sync_flush_timeout: int = 5000
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    max_message_size: int = 4 * 1024 * 1024
    check_crc_on_recover: bool = True
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    # file expiry and the disk guard (store.md section 10; pyrmq.store.clean_service)
    delete_when: str = "04"   # hours of day (local time), ';'-separated
    file_reserved_time: int = 72   # hours
    disk_max_used_space_ratio: int = 75   # percent; clamped to 10..95 as Apache
    # 4.9.x reads these two from system properties as ratios (0.90), 5.x from broker.conf as
    # percents (90): a value <= 1 is taken as a ratio, anything above as a percent
    disk_space_warning_level_ratio: float = 90
    disk_space_clean_forcibly_ratio: float = 85
    clean_resource_interval: int = 10_000   # ms
    # beyond RocketMQ: ms from start to the first file deletion round (Apache's fixed minute; a
    # test of expiry need not wait it out)
    clean_files_first_delay_ms: int = 60_000
    delete_commit_log_files_interval: int = 100   # ms between two commit log deletions
    delete_consume_queue_files_interval: int = 100   # ms after each queue that lost files
    destroy_maped_file_interval_forcibly: int = 120_000   # ms (Apache's spelling)
    redelete_hanged_file_interval: int = 120_000   # ms
    delete_file_batch_max: int = 10
    clean_file_forcibly_enable: bool = True
    # beyond RocketMQ: never delete a commit log file some consumer group has not consumed
    delete_only_consumed: bool = False
    # A slave answers a pull whose offset moved with PULL_RETRY_IMMEDIATELY (false, Apache's
    # default: its queues may just lag the master's) or with PULL_OFFSET_MOVED (true).
    offset_check_in_slave: bool = False
    # 5.x timer messages (Apache's MessageStoreConfig timer* keys; pyrmq.store.timer_store)
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 3 * 24 * 3600
    timer_flush_interval_ms: int = 1000
    mapped_file_size_timer_log: int = 100 * 1024 * 1024   # rounded up to whole timer log units
    # ConsumeQueueExt (store.md section 4.5; pyrmq.store.consume_queue_ext): the side units that
    # carry SQL92 filter bitmaps.  The broker sets the bitmap length to its bloom filter's m.
    enable_consume_queue_ext: bool = False
    mapped_file_size_consume_queue_ext: int = 48 * 1024 * 1024
    bit_map_length_consume_queue_ext: int = 64

    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    def consume_queue_ext_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue_ext")

    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    def timer_dir(self) -> str:
        """pyrmq's timer files (not Apache's ``timerwheel``/``timerlog``: another format)."""
        return os.path.join(self.store_path_root_dir, "pyrmq-timer")

    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    def lock_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "lock")


@dataclass
class QueryMessageResult:
    """Records found through the index, and the newest index file's end (QUERY_MESSAGE)."""

    buffers: list[memoryview] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class MessageExtBrokerInner:
    """A message as the broker hands it to the store.

    ``tags_code`` must be ``tags_string_to_tags_code(TAGS)`` (the value recovery recomputes).
    """

    topic: str
    queue_id: int
    flag: int
    body: bytes
    properties_string: str
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int = 0


@dataclass(slots=True)
class MessageExtBatch(MessageExtBrokerInner):
    """``body`` is an encoded batch (message.md §5); ``properties_string`` the batch-level props."""


@dataclass(slots=True)
class AppendMessageResult:
    wrote_offset: int
    wrote_bytes: int
    msg_id: str  # comma-joined offset msgIds for a batch
    store_timestamp: int
    logics_offset: int  # queue offset of the (first) message
    msg_num: int = 1


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append_result: AppendMessageResult | None = None

    def is_ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK


class CqExtUnit(NamedTuple):
    """One ConsumeQueueExt unit as read back; ``filter_bit_map`` is None when it has none.
    (A named tuple: the pull scan builds one per unit, and a tuple is the cheapest to build.)"""

    size: int
    tags_code: int
    msg_store_time: int
    filter_bit_map: bytes | None


class MessageFilter(Protocol):
    def is_matched_by_consume_queue(self, tags_code: int, ext_unit: CqExtUnit | None = None) -> bool:
        """The consume-queue stage: ``tags_code`` is the unit's real tags code; ``ext_unit`` its
        ConsumeQueueExt unit (store time, SQL92 bitmap) when it has one -- the tag path passes
        none, so it pays nothing for the ext."""

    def is_matched_by_commit_log(self, record: memoryview) -> bool: ...


@dataclass(slots=True)
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    buffers: list[memoryview] = field(default_factory=list)
    message_count: int = 0
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False


class StoreError(Exception):
    """The store directory cannot be used (wrong file sizes, already locked, ...)."""


# a partition (or quota) with no room left: Apache's answer to a full disk, not a broken file
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def put_status_of(error: OSError) -> PutMessageStatus:
    """The put status for a store file that could not be created or reserved: no space left is
    SERVICE_NOT_AVAILABLE ("the broker's disk is full"), anything else -- EMFILE, ENFILE, EIO --
    CREATE_MAPPED_FILE_FAILED ("create mapped file failed, server is busy or broken.")."""
    if error.errno in _DISK_FULL_ERRNOS:
        return PutMessageStatus.SERVICE_NOT_AVAILABLE
    return PutMessageStatus.CREATE_MAPPED_FILE_FAILED


class DispatchError(Exception):
    """A dispatcher could not take a record because a file it needs (a consume queue or index
    file, or the room in it) could not be created; the reput service stays before the record and
    delivers it again later."""

    def __init__(self, message: str, cause: OSError) -> None:
        super().__init__(message)
        self.cause = cause

    @property
    def status(self) -> PutMessageStatus:
        return put_status_of(self.cause)

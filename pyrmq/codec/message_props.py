"""Message metadata shared by every encoding: magic codes, sysFlag bits, property strings,
Java string hashes (tag codes) and offset msgIds. See spec/message.md §3, §6-§8.

Sans-I/O: no files, no sockets, no trio.
"""

from __future__ import annotations

import functools
import operator
import re
import socket
import struct

# CRC-32 as zlib computes it, in a fraction of its time: 1 KiB takes zlib-ng's folded carry-less
# multiply about 55 ns, zlib's 380. Every record's BODYCRC (_native.c calls the same function).
from zlib_ng.zlib_ng import crc32 as crc32   # (re-exported)

from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.native import native_function

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

MAGIC_CODE_V1 = -626843481  # 0xDAA320A7 as a signed int32
MAGIC_CODE_V2 = -626843477  # 0xDAA320AB: int16 topic length (5.x, topics > 127 bytes)
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194: end-of-file blank record

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

MAX_TOPIC_LENGTH_V1 = 127  # a V1 record stores the topic length as a signed byte
MAX_PROPERTIES_LENGTH = 32767  # the property length is a signed int16
MAX_BATCH_ENTRIES = 10_000  # default bound on entries decoded from one batch body


class MessageFormatError(ProtocolError, ValueError):
    """Malformed message bytes (truncated, inconsistent lengths, bad magic)."""


class MessageSysFlag:
    """Bits of the int32 sysFlag (message.md §6)."""

    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x2
    TRANSACTION_NOT_TYPE = 0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    BORNHOST_V6_FLAG = 0x10
    STOREHOSTADDRESS_V6_FLAG = 0x20
    NEED_UNWRAP_FLAG = 0x40
    INNER_BATCH_FLAG = 0x80
    COMPRESSION_TYPE_MASK = 0x700
    COMPRESSION_LZ4_TYPE = 0x100
    COMPRESSION_ZSTD_TYPE = 0x200
    COMPRESSION_ZLIB_TYPE = 0x300

    TRANSACTION_MASK = 0xC
    # the transaction types whose records get a consume queue unit (half and rollback ones do not)
    QUEUED_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)

    @staticmethod
    def transaction_value(flag: int) -> int:
        return flag & MessageSysFlag.TRANSACTION_MASK

    @staticmethod
    def reset_transaction_value(flag: int, type_: int) -> int:
        return (flag & ~MessageSysFlag.TRANSACTION_MASK) | type_


class MessageConst:
    """Well-known property names (message.md §3.1)."""

    PROPERTY_KEYS = "KEYS"
    PROPERTY_TAGS = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL = "DELAY"
    PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID = "REAL_QID"
    PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
    PROPERTY_PRODUCER_GROUP = "PGROUP"
    PROPERTY_MIN_OFFSET = "MIN_OFFSET"
    PROPERTY_MAX_OFFSET = "MAX_OFFSET"
    PROPERTY_BUYER_ID = "BUYER_ID"
    PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
    PROPERTY_CORRECTION_FLAG = "CORRECTION_FLAG"
    PROPERTY_MQ2_FLAG = "MQ2_FLAG"
    PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
    PROPERTY_MSG_REGION = "MSG_REGION"
    PROPERTY_TRACE_SWITCH = "TRACE_ON"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    PROPERTY_INSTANCE_ID = "INSTANCE_ID"
    PROPERTY_CORRELATION_ID = "CORRELATION_ID"
    PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    PROPERTY_MESSAGE_TTL = "TTL"
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    PROPERTY_CLUSTER = "CLUSTER"
    PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
    PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
    PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
    # 5.x timer messages (the timing wheel, docs/MESSAGING.md)
    PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
    PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
    PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    KEY_SEPARATOR = " "


# --------------------------------------------------------------------------------------------
# Properties, hashes, ids
# --------------------------------------------------------------------------------------------


def string_to_properties_py(s: str | None) -> dict[str, str]:
    """Java ``string2messageProperties``: empty names or values are dropped, last duplicate wins
    (C when the extension is built: ``string_to_properties``)."""
    result: dict[str, str] = {}
    if not s:
        return result
    for chunk in s.split(PROPERTY_SEPARATOR):
        # the first NAME_VALUE_SEPARATOR must be neither the first nor the last char of the chunk
        p = chunk.find(NAME_VALUE_SEPARATOR)
        if 0 < p < len(chunk) - 1:
            result[chunk[:p]] = chunk[p + 1 :]
    return result


string_to_properties = native_function("string_to_properties", string_to_properties_py)


def property_value_py(properties: str, name: str) -> str | None:
    """Value of property ``name`` (given with its trailing \\x01) in a properties string, without
    parsing the whole string: the same answer as ``string_to_properties`` (the last occurrence
    with a non-empty value wins; an empty one is no value at all, so it does not hide an earlier one).
    ValueError for an empty name. The twin of ``_native.property_value``."""
    if name == "":
        raise ValueError("property_value: empty name")
    end = len(properties)
    while True:
        i = properties.rfind(name, 0, end)
        if i < 0:
            return None
        if i == 0 or properties[i - 1] == PROPERTY_SEPARATOR:
            start = i + len(name)
            stop = properties.find(PROPERTY_SEPARATOR, start)
            if stop < 0:
                stop = len(properties)
            if stop > start:
                return properties[start:stop]
        end = i


property_value = native_function("property_value", property_value_py)


def real_destination(props: dict[str, str]) -> tuple[str, int] | None:
    """REAL_TOPIC and REAL_QID of a parked message (delay level, timer), None when missing or bad."""
    real_topic = props.get(MessageConst.PROPERTY_REAL_TOPIC)
    try:
        real_queue = int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID, ""))
    except ValueError:
        return None
    return (real_topic, real_queue) if real_topic else None


# HashMap defaults: 16 buckets, doubled whenever more than 3/4 of them would be in use.
_HASHMAP_INITIAL_BUCKETS = 16


@functools.lru_cache(maxsize=4096)   # property names repeat message after message
def _spread_hash(name: str) -> int:
    h = java_string_hash(name) & 0xFFFFFFFF
    return h ^ (h >> 16)


def properties_to_string_py(props: dict[str, str], entries_held: int = 0) -> str:
    """Java ``messageProperties2String``: ``name \\x01 value`` pairs joined by ``\\x02`` (no
    trailing separator), in the iteration order of the Java ``HashMap`` the pairs were put into
    (``props``' insertion order) -- so the stored bytes are the ones a Java broker writes.

    ``entries_held``: the most entries that map ever held, when some were removed since (its
    bucket count grew with them).  ``None`` values are skipped. (C when the extension is built:
    ``properties_to_string``.)
    """
    items = [(k, v) for k, v in props.items() if v is not None]
    buckets = _HASHMAP_INITIAL_BUCKETS
    while max(len(props), entries_held) > buckets * 3 // 4:
        buckets *= 2
    mask = buckets - 1
    # Within a bucket Java keeps insertion order (also across resizes): a stable sort by bucket.
    items.sort(key=lambda kv: _spread_hash(kv[0]) & mask)
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in items)


properties_to_string = native_function("properties_to_string", properties_to_string_py,
                                       {"HASHMAP_INITIAL_BUCKETS": _HASHMAP_INITIAL_BUCKETS})


# Powers of 31 modulo 2**32: Java's hash is sum(unit_i * 31**(n-1-i)) mod 2**32, which map/sum
# evaluate in C -- several times faster than a per-character loop (UNIQ_KEY and KEYS are hashed
# for the index on every send).
_POW31 = tuple(pow(31, i, 1 << 32) for i in range(1024))


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()`` over UTF-16 code units, as a signed int32."""
    h: int
    if s.isascii() and len(s) <= len(_POW31):
        h = sum(map(operator.mul, s.encode()[::-1], _POW31)) & 0xFFFFFFFF
    else:
        h = 0
        for (unit,) in struct.iter_unpack(">H", s.encode("utf-16-be", "surrogatepass")):
            h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


@functools.lru_cache(maxsize=4096)   # a topic's tags repeat message after message
def tags_string_to_tags_code(tags: str | None) -> int:
    """ConsumeQueue tagsCode of a TAGS value: its Java hash, 0 when absent or empty."""
    if not tags:
        return 0
    return java_string_hash(tags)


_V4_MAPPED_PREFIX = bytes(10) + b"\xff\xff"


def host_to_bytes(host: str) -> bytes:
    """4 address bytes for IPv4, 16 for IPv6 (a textual address, not a name)."""
    if ":" in host:
        raw = socket.inet_pton(socket.AF_INET6, host)
        # an IPv4 client seen through a dual-stack socket stays IPv4, as in Java (Inet4Address);
        # old C++ clients cannot read IPv6 hosts
        return raw[12:] if raw.startswith(_V4_MAPPED_PREFIX) else raw
    return socket.inet_pton(socket.AF_INET, host)


def bytes_to_host(address: bytes) -> str:
    if len(address) == 4:
        return socket.inet_ntop(socket.AF_INET, address)
    return socket.inet_ntop(socket.AF_INET6, address)


_MSG_ID_V4 = struct.Struct(">4siq")
_MSG_ID_V6 = struct.Struct(">16siq")
_HEX = re.compile(r"[0-9A-Fa-f]*")


def create_offset_msg_id(store_ip: bytes, store_port: int, commit_log_offset: int) -> str:
    """Offset msgId: uppercase hex of ip ‖ int32 port ‖ int64 offset (message.md §7.1)."""
    if len(store_ip) == 4:
        return _MSG_ID_V4.pack(store_ip, store_port, commit_log_offset).hex().upper()
    if len(store_ip) == 16:
        return _MSG_ID_V6.pack(store_ip, store_port, commit_log_offset).hex().upper()
    raise ValueError(f"store ip must be 4 or 16 bytes, got {len(store_ip)}")


def offset_msg_id_prefix(store_ip: bytes, store_port: int) -> str:
    """What :func:`create_offset_msg_id` writes before the offset's 16 hex digits: a store host
    names all its records' msgIds with it (prefix + ``f"{offset:016X}"``, for offsets >= 0)."""
    return create_offset_msg_id(store_ip, store_port, 0)[:-16]


def decode_offset_msg_id(msg_id: str) -> tuple[bytes, int, int]:
    """Inverse of :func:`create_offset_msg_id`: (ip bytes, port, commit-log offset).

    Raises :class:`MessageFormatError` (a ``ValueError``) for anything but 32 or 56 hex digits.
    """
    if len(msg_id) == 32:
        fmt = _MSG_ID_V4
    elif len(msg_id) == 56:
        fmt = _MSG_ID_V6
    else:
        raise MessageFormatError(f"offset msgId must have 32 or 56 hex chars, got {len(msg_id)}")
    # bytes.fromhex alone would skip the spaces in "00 11 ..." and leave too few bytes
    if not _HEX.fullmatch(msg_id):
        raise MessageFormatError(f"offset msgId is not hex: {msg_id!r}")
    ip, port, offset = fmt.unpack(bytes.fromhex(msg_id))
    return ip, port, offset

"""Message encodings: the stored CommitLog record, plus the re-exported metadata and batch API.

The stored record layout is declared once with construct (``MessageRecordV1``,
``MessageRecordV2``); the per-message code uses ``struct.Struct`` objects following the same
field order (``_PREFIX_STRUCTS``) and tests prove both agree. Property strings, hashes and ids
live in :mod:`pyrmq.codec.message_props`, batch bodies in :mod:`pyrmq.codec.message_batch`;
this module re-exports them so callers import one place. See spec/message.md.

Sans-I/O: no files, no sockets, no trio.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence, TypeAlias

if TYPE_CHECKING:
    import mmap

from construct import (
    Bytes,
    Const,
    IfThenElse,
    Int8sb,
    Int16sb,
    Int32sb,
    Int64sb,
    Struct,
    this,
)

from pyrmq.codec.message_batch import (
    BATCH_ENTRY_HEAD,
    BATCH_ENTRY_OVERHEAD,
    BatchEntry,
    BatchEntryFormat,
    decode_batch,
    encode_batch,
    split_batch,
)
from pyrmq.codec.native import native_function
from pyrmq.codec.message_props import (
    BLANK_MAGIC_CODE,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MAX_BATCH_ENTRIES,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH_V1,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    MessageFormatError,
    MessageSysFlag,
    bytes_to_host,
    create_offset_msg_id,
    crc32,
    offset_msg_id_prefix,
    decode_offset_msg_id,
    host_to_bytes,
    java_string_hash,
    properties_to_string,
    property_value,
    string_to_properties,
    tags_string_to_tags_code,
)
from pyrmq.codec.store_formats import CQ_UNIT
from pyrmq.codec.text import INT64_MAX, INT64_MIN

# What records are read from (a file mapping, a view of one, a response body) and written into.
ReadBuffer: TypeAlias = "bytes | bytearray | memoryview | mmap.mmap"
WriteBuffer: TypeAlias = "bytearray | memoryview | mmap.mmap"

# --------------------------------------------------------------------------------------------
# Stored record layout (message.md §2)
# --------------------------------------------------------------------------------------------

def _record_struct(magic: int, topic_length: Any) -> Struct:
    return Struct(
        "total_size" / Int32sb,
        "magic" / Const(magic, Int32sb),
        "body_crc" / Int32sb,
        "queue_id" / Int32sb,
        "flag" / Int32sb,
        "queue_offset" / Int64sb,
        "physical_offset" / Int64sb,
        "sys_flag" / Int32sb,
        "born_timestamp" / Int64sb,
        "born_host" / IfThenElse(this.sys_flag & MessageSysFlag.BORNHOST_V6_FLAG, Bytes(16), Bytes(4)),
        "born_port" / Int32sb,
        "store_timestamp" / Int64sb,
        "store_host" / IfThenElse(
            this.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, Bytes(16), Bytes(4)
        ),
        "store_port" / Int32sb,
        "reconsume_times" / Int32sb,
        "prepared_transaction_offset" / Int64sb,
        "body_length" / Int32sb,
        "body" / Bytes(this.body_length),
        "topic_length" / topic_length,
        "topic" / Bytes(this.topic_length),
        "properties_length" / Int16sb,
        "properties" / Bytes(this.properties_length),
    )


MessageRecordV1 = _record_struct(MAGIC_CODE_V1, Int8sb)
MessageRecordV2 = _record_struct(MAGIC_CODE_V2, Int16sb)

BlankRecord = Struct("max_blank" / Int32sb, "magic" / Const(BLANK_MAGIC_CODE, Int32sb))
BLANK_RECORD = struct.Struct(">ii")
END_FILE_MIN_BLANK_LENGTH = 8  # a file always ends with at least the 8-byte blank header

# The fixed prefix (TOTALSIZE .. BODYLEN) for each (born v6, store v6) combination, derived from
# the same field order as the construct declaration above. Index = sys_flag bits 4..5 >> 4.
_PREFIX_FORMATS = {
    (bv6, sv6): ">iiiiiqqiq{}siq{}siiqi".format(16 if bv6 else 4, 16 if sv6 else 4)
    for bv6 in (False, True)
    for sv6 in (False, True)
}
_PREFIX_STRUCTS: tuple[struct.Struct, ...] = tuple(
    struct.Struct(_PREFIX_FORMATS[(bool(i & 1), bool(i & 2))]) for i in range(4)
)
PREFIX_V4 = _PREFIX_STRUCTS[0]  # 88 bytes: both hosts IPv4

# positions that do not depend on the host sizes
MAGIC_POSITION = 4
BODY_CRC_POSITION = 8
QUEUE_OFFSET_POSITION = 20
PHYSICAL_OFFSET_POSITION = 28
SYSFLAG_POSITION = 36
BORN_HOST_POSITION = 48
_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGIC
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_MAX_TOPIC_LENGTH_V2 = 32767  # a V2 record stores the topic length as a signed int16
_HOSTS_SHIFT = 4  # sys_flag bits 4 (born v6) and 5 (store v6) pick the prefix struct


def _host_bits(sys_flag: int) -> int:
    return (sys_flag >> _HOSTS_SHIFT) & 0x3


def store_timestamp_position(sys_flag: int) -> int:
    """Byte position of STORETIMESTAMP in a record with this sysFlag."""
    return BORN_HOST_POSITION + (20 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8)


def record_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int,
                  magic: int = MAGIC_CODE_V1) -> int:
    """TOTALSIZE of a record (Java ``calMsgLength``)."""
    return (
        _PREFIX_STRUCTS[_host_bits(sys_flag)].size
        + body_length
        + (1 if magic == MAGIC_CODE_V1 else 2)
        + topic_length
        + 2
        + properties_length
    )


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """A record's BODYCRC: Java's UtilAll.crc32, CRC-32 kept to 31 bits."""
    return crc32(body) & 0x7FFFFFFF


# --------------------------------------------------------------------------------------------
# Encoding (hot path)
# --------------------------------------------------------------------------------------------


_HOST_FLAGS = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG


def with_host_flags(sys_flag: int, born_ip: bytes, store_ip: bytes) -> int:
    """``sys_flag`` with its host bits set from the address lengths (16 bytes: IPv6)."""
    sys_flag &= ~_HOST_FLAGS
    if len(born_ip) == 16:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(store_ip) == 16:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    return sys_flag


def encode_record_py(buf: WriteBuffer, pos: int, limit: int, topic: str, properties: str, body: bytes | memoryview,
                     queue_id: int, flag: int, sys_flag: int, born_timestamp: int, born_ip: bytes, born_port: int,
                     store_ip: bytes, store_port: int, reconsume_times: int, prepared_transaction_offset: int,
                     queue_offset: int, physical_offset: int, store_timestamp: int) -> int:
    """Write one record at ``buf[pos:]`` when it fits below ``limit``: returns its size. When it
    does not fit, writes nothing and returns minus its size (``limit == pos``: a size query).

    ``sys_flag``'s host bits must match the lengths of ``born_ip`` and ``store_ip``
    (:func:`with_host_flags`). Raises BufferError for a ``buf`` not writable, ValueError for a
    topic or properties too long for a record (UnicodeEncodeError when not encodable), hosts that
    do not match, or ``pos`` / ``limit`` outside ``buf``; struct.error for a field outside its
    type. Nothing is written when it raises. The twin of ``_native.encode_record``."""
    if memoryview(buf).readonly:
        raise BufferError("Object is not writable.")
    topic_bytes = topic.encode()
    properties_bytes = properties.encode()
    if len(properties_bytes) > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties length {len(properties_bytes)} > {MAX_PROPERTIES_LENGTH}")
    if len(topic_bytes) > _MAX_TOPIC_LENGTH_V2:
        raise ValueError(f"topic length {len(topic_bytes)} does not fit a record")
    bits = _host_bits(sys_flag)
    if len(born_ip) != (16 if bits & 1 else 4) or len(store_ip) != (16 if bits & 2 else 4):
        raise ValueError("encode_record: the host addresses do not match the sysFlag's host bits")
    prefix = _PREFIX_STRUCTS[bits]
    v1 = len(topic_bytes) <= MAX_TOPIC_LENGTH_V1
    topic_length = bytes((len(topic_bytes),)) if v1 else _INT16.pack(len(topic_bytes))
    size = prefix.size + len(body) + len(topic_length) + len(topic_bytes) + 2 + len(properties_bytes)
    if not 0 <= pos <= limit <= len(buf):
        raise ValueError("encode_record: the position or the limit is outside the buffer")
    if size > limit - pos:
        return -size
    record = b"".join((
        prefix.pack(size, MAGIC_CODE_V1 if v1 else MAGIC_CODE_V2, body_crc(body), queue_id, flag, queue_offset,
                    physical_offset, sys_flag, born_timestamp, born_ip, born_port, store_timestamp, store_ip,
                    store_port, reconsume_times, prepared_transaction_offset, len(body)),
        body, topic_length, topic_bytes, _INT16.pack(len(properties_bytes)), properties_bytes))
    buf[pos:pos + size] = record
    return size


encode_record = native_function("encode_record", encode_record_py, {
    "QUEUE_OFFSET_POSITION": QUEUE_OFFSET_POSITION, "PHYSICAL_OFFSET_POSITION": PHYSICAL_OFFSET_POSITION,
    "RECORD_PREFIX_V4_SIZE": PREFIX_V4.size, "MAGIC_CODE_V1": MAGIC_CODE_V1, "MAGIC_CODE_V2": MAGIC_CODE_V2,
    "MAX_TOPIC_LENGTH_V1": MAX_TOPIC_LENGTH_V1, "MAX_PROPERTIES_LENGTH": MAX_PROPERTIES_LENGTH,
    "BORNHOST_V6_FLAG": MessageSysFlag.BORNHOST_V6_FLAG,
    "STOREHOSTADDRESS_V6_FLAG": MessageSysFlag.STOREHOSTADDRESS_V6_FLAG})
def encode_records_py(buf: WriteBuffer, pos: int, room: int, max_size: int, topic: str,
                      entries: list[tuple[int, bytes, str]], queue_id: int, sys_flag: int, born_timestamp: int,
                      born_ip: bytes, born_port: int, store_ip: bytes, store_port: int, reconsume_times: int,
                      first_queue_offset: int, base_offset: int, store_timestamp: int) -> list[int] | None:
    """The records of a batch, one after the other from ``buf[pos:]``, as :func:`encode_record`
    writes them: entry ``i`` ((flag, body, properties) as split_batch gives it, with a suffix)
    with queue offset ``first_queue_offset + i``, physical offset ``base_offset`` plus its
    position, each ending below ``room`` and at most ``max_size`` bytes long. Returns their
    sizes, or None when one did not fit (those before it are written). Raises what
    encode_record raises. The twin of ``_native.encode_records``."""
    sizes = []
    for i, (flag, body, props) in enumerate(entries):
        size = encode_record_py(buf, pos, max(pos, min(room, pos + max_size)), topic, props, body, queue_id, flag,
                                sys_flag, born_timestamp, born_ip, born_port, store_ip, store_port, reconsume_times,
                                0, first_queue_offset + i, base_offset + pos, store_timestamp)
        if size < 0:
            return None
        sizes.append(size)
        pos += size
    return sizes


encode_records = native_function("encode_records", encode_records_py)
# a buffer for size queries: encode_record(NO_ROOM, 0, 0, ...) is minus the record's size
NO_ROOM = bytearray()


def _record_fields(fields: dict[str, Any]) -> tuple[Any, ...]:
    """encode_record's arguments from topic to prepared_transaction_offset, from the named
    fields of a record (hosts as (host, port)): the form the tests and tools write records in."""
    born_ip = host_to_bytes(fields["born_host"][0])
    store_ip = host_to_bytes(fields["store_host"][0])
    return (fields["topic"], fields["properties"], fields["body"], fields["queue_id"], fields["flag"],
            with_host_flags(fields["sys_flag"], born_ip, store_ip), fields["born_timestamp"], born_ip,
            fields["born_host"][1], store_ip, fields["store_host"][1], fields.get("reconsume_times", 0),
            fields.get("prepared_transaction_offset", 0))


def _encode_fields(buf: WriteBuffer, pos: int, limit: int, args: tuple[Any, ...], queue_offset: int,
                   physical_offset: int, store_timestamp: int) -> int:
    try:
        return encode_record(buf, pos, limit, *(*args, queue_offset, physical_offset, store_timestamp))
    except UnicodeEncodeError as e:   # lone surrogates cannot be stored
        raise MessageFormatError(f"topic or properties not encodable: {e}") from e
    except ValueError as e:
        raise MessageFormatError(str(e)) from e


def encode_message_record(buf: WriteBuffer, pos: int, *, queue_offset: int, physical_offset: int,
                          store_timestamp: int, **fields: Any) -> int:
    """Write one stored record into ``buf`` at ``pos`` (CRC, sizes and host flags filled in).

    ``fields``: topic, queue_id, flag, body, properties, sys_flag, born_timestamp, born_host,
    store_host, and optionally reconsume_times and prepared_transaction_offset. Returns the
    number of bytes written; MessageFormatError for a record that cannot be encoded or does not
    fit ``buf``.
    """
    size = _encode_fields(buf, pos, len(buf), _record_fields(fields), queue_offset, physical_offset, store_timestamp)
    if size < 0:
        raise MessageFormatError(f"record of {-size} bytes does not fit at {pos}")
    return size


def encode_message_record_bytes(*, queue_offset: int = 0, physical_offset: int = 0,
                                store_timestamp: int = 0, **fields: Any) -> bytes:
    """Like :func:`encode_message_record` but returns the record as ``bytes`` (tests, tools)."""
    args = _record_fields(fields)
    out = bytearray(-_encode_fields(NO_ROOM, 0, 0, args, queue_offset, physical_offset, store_timestamp))
    _encode_fields(out, 0, len(out), args, queue_offset, physical_offset, store_timestamp)
    return bytes(out)


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class MessageExt:
    """A decoded stored record (Java ``MessageExt``)."""

    store_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def msg_id(self) -> str:
        """Offset msgId built from the store host and the commit-log offset."""
        return create_offset_msg_id(host_to_bytes(self.store_host[0]), self.store_host[1],
                                    self.commit_log_offset)

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(MessageConst.PROPERTY_KEYS)

    @property
    def properties_string(self) -> str:
        return properties_to_string(self.properties)


@dataclass(slots=True)
class RecordInfo:
    """One stored record as the dispatchers see it (Java ``DispatchRequest``).

    Built by the append path from what it just wrote and by the record walker from stored
    bytes, so both feed the same dispatchers. The property string is kept whole: dispatchers
    look up the one or two properties they need (:func:`property_value`) instead of parsing it.
    """

    size: int
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    store_timestamp: int
    tags_code: int
    prepared_transaction_offset: int
    properties_string: str

    @property
    def properties(self) -> dict[str, str]:
        return string_to_properties(self.properties_string)

    @property
    def keys(self) -> str | None:
        return property_value(self.properties_string, _KEYS_NAME)

    @property
    def uniq_key(self) -> str | None:
        return property_value(self.properties_string, _UNIQ_KEY_NAME)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & MessageSysFlag.TRANSACTION_MASK


_KEYS_NAME = MessageConst.PROPERTY_KEYS + NAME_VALUE_SEPARATOR
_UNIQ_KEY_NAME = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR
_TAGS_NAME = MessageConst.PROPERTY_TAGS + NAME_VALUE_SEPARATOR


def batch_record_infos_py(record_type: type[RecordInfo], entries: list[tuple[int, bytes, str]], sizes: list[int],
                          tags_name: str, topic: str, queue_id: int, first_queue_offset: int, begin: int,
                          sys_flag: int, store_timestamp: int, msg_id_prefix: str) -> tuple[list[RecordInfo], str]:
    """The dispatch requests of a batch's records as :func:`encode_records` wrote them from
    commit log offset ``begin`` (entry ``i`` with size ``sizes[i]`` and queue offset
    ``first_queue_offset + i``; its tags code from the ``tags_name`` property of its stored
    properties, as the record walker reads it), and their offset msgIds joined by commas. The
    twin of ``_native.batch_record_infos``, which builds each ``record_type`` without calling it."""
    if not all(INT64_MIN <= n <= INT64_MAX for n in (first_queue_offset, begin)):
        raise OverflowError("batch_record_infos: an offset past 64 bits")
    if len(sizes) != len(entries) or begin < 0 or not msg_id_prefix.isascii() or not tags_name:
        raise ValueError("batch_record_infos: one size per entry, a begin >= 0, an ASCII msgId prefix and a tags name")
    if entries and first_queue_offset > INT64_MAX - (len(entries) - 1):
        raise OverflowError("batch_record_infos: the queue offsets run past 64 bits")
    infos = []
    msg_ids = []
    offset = begin
    for i, ((_, _, props), size) in enumerate(zip(entries, sizes)):
        if not INT64_MIN <= size <= INT64_MAX:
            raise OverflowError("batch_record_infos: a size past 64 bits")
        if size < 0:
            raise ValueError("batch_record_infos: a negative size")
        if offset > INT64_MAX - size:
            raise OverflowError("batch_record_infos: the records end past a 64-bit offset")
        infos.append(record_type(size, topic, queue_id, first_queue_offset + i, offset, sys_flag, store_timestamp,
                                 tags_string_to_tags_code(property_value(props, tags_name)), 0, props))
        msg_ids.append(f"{msg_id_prefix}{offset:016X}")
        offset += size
    return infos, ",".join(msg_ids)


_batch_record_infos = native_function("batch_record_infos", batch_record_infos_py)


def consume_queue_units_py(record_type: type[RecordInfo], records: Sequence[RecordInfo]) -> bytes | None:
    """The consume queue units (CQ_UNIT: commit log offset, size, tags code) of ``records`` one
    after the other, when they are consecutive records of one queue: each a ``record_type``, of
    the first one's topic, queue_id and sys_flag, at its queue offset plus its position. None
    otherwise (or when there are none); struct.error for a field outside the unit's types. The
    twin of ``_native.consume_queue_units``."""
    if not records or type(records[0]) is not record_type:
        return None
    first = records[0]
    first_queue_offset = first.queue_offset
    if type(first_queue_offset) is not int or not INT64_MIN <= first_queue_offset <= INT64_MAX - (len(records) - 1):
        return None
    units = []
    for i, r in enumerate(records):
        if type(r) is not record_type or (i and (r.topic != first.topic or r.queue_id != first.queue_id
                                                 or r.sys_flag != first.sys_flag)):
            return None
        if type(r.queue_offset) is not int or r.queue_offset != first_queue_offset + i:
            return None
        units.append(CQ_UNIT.pack(r.commit_log_offset, r.size, r.tags_code))
    return b"".join(units)


_consume_queue_units = native_function("consume_queue_units", consume_queue_units_py,
                                       {"CQ_UNIT_SIZE": CQ_UNIT.size})


def consume_queue_units(records: Sequence[RecordInfo]) -> bytes | None:
    """The consume queue units of consecutive records of one queue (C when built): see
    :func:`consume_queue_units_py`."""
    return _consume_queue_units(RecordInfo, records)


def batch_record_infos(entries: list[tuple[int, bytes, str]], sizes: list[int], topic: str, queue_id: int,
                       first_queue_offset: int, begin: int, sys_flag: int, store_timestamp: int,
                       msg_id_prefix: str) -> tuple[list[RecordInfo], str]:
    """:class:`RecordInfo` of each record of a batch and the batch's msgIds (C when built): see
    :func:`batch_record_infos_py`."""
    return _batch_record_infos(RecordInfo, entries, sizes, _TAGS_NAME, topic, queue_id, first_queue_offset, begin,
                               sys_flag, store_timestamp, msg_id_prefix)


def _decode_fields(buf: ReadBuffer, pos: int,
                   limit: int) -> tuple[tuple[Any, ...], int, int, int, int, int, int]:
    """Validated field tuple of the record at ``pos``; ``limit`` is the end of readable data."""
    if limit - pos < 8:
        raise MessageFormatError(f"truncated record header at {pos}")
    total_size, magic = _HEAD.unpack_from(buf, pos)
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        raise MessageFormatError(f"bad magic code {magic & 0xFFFFFFFF:#010x} at {pos}")
    if total_size > limit - pos:
        raise MessageFormatError(f"record of {total_size} bytes at {pos} exceeds the data")
    if total_size < PREFIX_V4.size + 3:
        raise MessageFormatError(f"record size {total_size} at {pos} too small")
    (sys_flag,) = _INT32.unpack_from(buf, pos + SYSFLAG_POSITION)
    prefix = _PREFIX_STRUCTS[_host_bits(sys_flag)]
    end = pos + total_size
    p = pos + prefix.size
    if p > end:
        raise MessageFormatError(f"record size {total_size} at {pos} too small for its hosts")
    fields = prefix.unpack_from(buf, pos)
    body_length = fields[16]
    if body_length < 0 or p + body_length > end:
        raise MessageFormatError(f"body length {body_length} at {pos} exceeds the record")
    body_start = p
    p += body_length
    if magic == MAGIC_CODE_V1:
        if p + 1 > end:
            raise MessageFormatError(f"truncated topic length at {pos}")
        topic_length = buf[p]
        if topic_length > 127:  # a signed byte
            topic_length -= 256
        p += 1
    else:
        if p + 2 > end:
            raise MessageFormatError(f"truncated topic length at {pos}")
        (topic_length,) = _INT16.unpack_from(buf, p)
        p += 2
    if topic_length < 0 or p + topic_length + 2 > end:
        raise MessageFormatError(f"topic length {topic_length} at {pos} exceeds the record")
    topic_start = p
    p += topic_length
    (properties_length,) = _INT16.unpack_from(buf, p)
    p += 2
    if properties_length < 0 or p + properties_length != end:
        raise MessageFormatError(
            f"record at {pos}: TOTALSIZE {total_size} does not match its field lengths"
        )
    return fields, body_start, body_length, topic_start, topic_length, p, properties_length


class RecordLayout(NamedTuple):
    """Where the fields of one stored record are, without copying or decoding any of them.

    ``fields`` are the fixed prefix values in declaration order (TOTALSIZE .. BODYLEN; hosts as
    raw 4- or 16-byte addresses); the spans are absolute positions in the buffer. For readers that
    pick a few columns of many records (the Spark data sources): they slice what they need.
    """

    fields: tuple[Any, ...]
    body_start: int
    body_length: int
    topic_start: int
    topic_length: int
    properties_start: int
    properties_length: int


def decode_record_layout(buf: ReadBuffer, pos: int, limit: int) -> RecordLayout:
    """The layout of the record at ``pos`` (``limit``: end of readable data); raises
    :class:`MessageFormatError` as :func:`decode_message` does. No CRC check and no copy."""
    return RecordLayout(*_decode_fields(buf, pos, limit))


def decode_message(buf: ReadBuffer, pos: int = 0) -> tuple[MessageExt, int]:
    """Decode the stored record at ``pos``; returns it and the position after it."""
    fields, body_start, body_length, topic_start, topic_length, prop_start, prop_length = (
        _decode_fields(buf, pos, len(buf))
    )
    (total_size, magic, crc, queue_id, flag, queue_offset, phy_offset, sys_flag, born_ts,
     born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, _) = fields
    mv = memoryview(buf)
    try:
        topic = str(mv[topic_start:topic_start + topic_length], "utf-8")
        props = str(mv[prop_start:prop_start + prop_length], "utf-8")
    except UnicodeDecodeError as e:
        raise MessageFormatError(f"record at {pos}: {e}") from e
    msg = MessageExt(
        store_size=total_size, magic=magic, body_crc=crc, queue_id=queue_id, flag=flag,
        queue_offset=queue_offset, commit_log_offset=phy_offset, sys_flag=sys_flag,
        born_timestamp=born_ts, born_host=(bytes_to_host(born_ip), born_port),
        store_timestamp=store_ts, store_host=(bytes_to_host(store_ip), store_port),
        reconsume_times=reconsume, prepared_transaction_offset=prepared,
        body=bytes(mv[body_start:body_start + body_length]), topic=topic,
        properties=string_to_properties(props),
    )
    return msg, pos + total_size


def decode_messages(buf: ReadBuffer) -> list[MessageExt]:
    """Split a pull/query response body into records, as a client does."""
    out = []
    pos = 0
    n = len(buf)
    while pos < n:
        msg, pos = decode_message(buf, pos)
        out.append(msg)
    return out


def check_record(buf: ReadBuffer, pos: int, limit: int, *, check_crc: bool = True,
                 expected_offset: int | None = None, info: bool = True) -> RecordInfo | int | None:
    """Validate the record at ``pos`` the way recovery does (Java ``checkMessageAndReturnSize``).

    Returns a :class:`RecordInfo` for a valid record (with ``info=False`` its size: the same
    verdict, for a scan that only looks for the end of valid data), ``0`` for a blank
    (end-of-file) record, ``None`` for anything invalid. Stricter than Java, to detect a torn
    tail: PHYSICALOFFSET must equal ``expected_offset`` (when given), the topic must be non-empty
    without NUL bytes, and a non-empty property string must not end with a zero byte (no real
    value ends with U+0000; a tail lost in a crash reads back as zeros).
    """
    if limit - pos < 8:
        return None
    total_size, magic = _HEAD.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return 0
    try:
        fields, body_start, body_length, topic_start, topic_length, prop_start, prop_length = (
            _decode_fields(buf, pos, limit)
        )
    except MessageFormatError:
        return None
    (_, _, crc, queue_id, _, queue_offset, phy_offset, sys_flag, _, _, _, store_ts, _, _, _,
     prepared, _) = fields
    if expected_offset is not None and phy_offset != expected_offset:
        return None
    if check_crc and body_length > 0:
        if body_crc(buf[body_start:body_start + body_length]) != crc:
            return None
    topic_bytes = bytes(buf[topic_start:topic_start + topic_length])
    if not topic_bytes or b"\x00" in topic_bytes:
        return None
    text = ""
    if prop_length:
        if buf[prop_start + prop_length - 1] == 0:
            return None
        try:
            text = str(buf[prop_start:prop_start + prop_length], "utf-8")
        except UnicodeDecodeError:
            return None
    try:
        topic = topic_bytes.decode()
    except UnicodeDecodeError:
        return None
    if not info:
        return int(total_size)
    return RecordInfo(
        size=total_size, topic=topic, queue_id=queue_id, queue_offset=queue_offset,
        commit_log_offset=phy_offset, sys_flag=sys_flag, store_timestamp=store_ts,
        tags_code=tags_string_to_tags_code(property_value(text, _TAGS_NAME)) if text else 0,
        prepared_transaction_offset=prepared, properties_string=text,
    )


def record_properties_string(record: ReadBuffer) -> str:
    """The property string of one whole stored record (already length-checked by the caller's
    store), read without copying or decoding the body: what a tag or SQL92 filter needs."""
    _, _, _, _, _, prop_start, prop_length = _decode_fields(record, 0, len(record))
    return str(memoryview(record)[prop_start:prop_start + prop_length], "utf-8")


def pickup_store_timestamp(buf: ReadBuffer, pos: int = 0) -> int:
    """STORETIMESTAMP of the record at ``pos`` (the caller checked it is a whole record)."""
    (sys_flag,) = _INT32.unpack_from(buf, pos + SYSFLAG_POSITION)
    ts: int
    (ts,) = _INT64.unpack_from(buf, pos + store_timestamp_position(sys_flag))
    return ts


__all__ = [
    "BATCH_ENTRY_HEAD", "BATCH_ENTRY_OVERHEAD", "BLANK_MAGIC_CODE", "BLANK_RECORD", "BatchEntry", "BatchEntryFormat",
    "BlankRecord", "END_FILE_MIN_BLANK_LENGTH", "MAGIC_CODE_V1", "MAGIC_CODE_V2", "MAX_BATCH_ENTRIES",
    "MAX_PROPERTIES_LENGTH", "MAX_TOPIC_LENGTH_V1", "MessageConst", "NO_ROOM",
    "MessageExt", "MessageFormatError", "MessageRecordV1", "MessageRecordV2", "MessageSysFlag",
    "NAME_VALUE_SEPARATOR", "PROPERTY_SEPARATOR", "RecordInfo", "RecordLayout", "body_crc",
    "batch_record_infos", "bytes_to_host", "check_record", "consume_queue_units", "create_offset_msg_id",
    "decode_batch", "decode_message", "split_batch",
    "decode_messages", "decode_offset_msg_id", "decode_record_layout", "encode_batch", "encode_message_record",
    "encode_message_record_bytes", "encode_record", "encode_records", "host_to_bytes", "java_string_hash",
    "offset_msg_id_prefix", "pickup_store_timestamp", "record_properties_string", "properties_to_string", "property_value", "record_length",
    "store_timestamp_position", "string_to_properties", "tags_string_to_tags_code", "with_host_flags",
]

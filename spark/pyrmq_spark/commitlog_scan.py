"""Planning and scanning commit log partitions, without Spark: what the ``rocketmq_commitlog``
source runs on the driver (:func:`plan`) and in each task (:func:`scan`).

A partition is a byte range of one segment file that starts at a record. Large segments are cut
at record boundaries found by a cheap walk over the 8-byte record heads only (TOTALSIZE, MAGIC).
The scan validates every record the way the broker's recovery does (:func:`check_record`, with
PHYSICALOFFSET equal to the record's place), tests the pushed-down filters on the fields that
check already read, and only then decodes the selected columns of a passing record: a body is
sliced (and copied) only when the ``body`` column is selected.

Damage: a record that does not validate is looked past. The scan searches forward for the next
place a valid record starts (its magic, then the full check, whose offset self-reference makes a
false match practically impossible). If one exists the damaged bytes are reported as one
``_corrupt`` row (or counted, with ``corrupt=skip``); if none does, it is a torn or blank tail,
which a crash leaves and recovery would truncate: skipped, never an error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterator

from pyrmq.codec.body_compression import BodyInflateError, inflate_body
from pyrmq.codec.message import (
    BLANK_MAGIC_CODE,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    PREFIX_V4,
    MessageConst,
    MessageFormatError,
    RecordInfo,
    body_crc,
    bytes_to_host,
    check_record,
    decode_record_layout,
    property_value,
    string_to_properties,
)

from pyrmq_spark.predicates import Predicate
from pyrmq_spark.store_files import ReadOnlyMap, SegmentFile

# (name, Spark type, Arrow type name): the source's full schema, in order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("topic", "string"),
    ("queue_id", "int"),
    ("queue_offset", "bigint"),
    ("phy_offset", "bigint"),
    ("store_size", "int"),
    ("body_crc", "int"),
    ("flag", "int"),
    ("sys_flag", "int"),
    ("born_timestamp", "timestamp"),
    ("born_host", "string"),
    ("store_timestamp", "timestamp"),
    ("store_host", "string"),
    ("reconsume_times", "int"),
    ("prepared_transaction_offset", "bigint"),
    ("tags", "string"),
    ("keys", "string"),
    ("uniq_key", "string"),
    ("properties", "map<string,string>"),
    ("body_size", "int"),
    ("body", "binary"),
    ("_corrupt", "string"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
SCHEMA_DDL = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
# Columns the scan can filter on from the validated head, before decoding anything else.
FILTER_COLUMNS = frozenset({"topic", "queue_id", "queue_offset", "phy_offset", "store_timestamp"})

_HEAD = struct.Struct(">ii")
_MAGICS = (struct.pack(">i", MAGIC_CODE_V1), struct.pack(">i", MAGIC_CODE_V2))
_MIN_RECORD = PREFIX_V4.size + 3  # the smallest TOTALSIZE a record can have
# Positions in the prefix tuple of decode_record_layout (the declaration order of message.md §2).
_F_CRC, _F_FLAG, _F_SYS, _F_BORN_TS, _F_BORN_IP, _F_BORN_PORT = 2, 4, 7, 8, 9, 10
_F_STORE_IP, _F_STORE_PORT, _F_RECONSUME = 12, 13, 14

DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024  # Spark's own spark.sql.files.maxPartitionBytes default
BATCH_ROWS = 8192
# Cap on an inflated body, so a crafted record cannot exhaust an executor's memory: four times
# the broker's largest accepted message (maxMessageSize, 4 MiB) covers any real compression ratio.
MAX_INFLATED_BYTES = 64 * 1024 * 1024
BATCH_BYTES = 32 * 1024 * 1024  # a batch of big bodies closes early: an Arrow batch is held whole


@dataclass(frozen=True)
class Split:
    """Records starting in ``[start, end)`` of ``segment`` (positions within the file)."""

    index: int
    segment: SegmentFile
    start: int
    end: int


def _head_walk(buf: Any, limit: int, step: int, base: int) -> list[int]:
    """Record starts about every ``step`` bytes, from TOTALSIZE fields alone; stops at a blank,
    a head that is not a record's, or the data's end (the last partition takes the rest).

    Only a cut is checked as a whole record: so each partition but the first starts at a valid
    record, and damage always lies inside a partition, which reports it.
    """
    cuts = []
    pos = 0
    next_cut = step
    while limit - pos >= 8:
        total_size, magic = _HEAD.unpack_from(buf, pos)
        if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2) or total_size < _MIN_RECORD:
            break
        pos += total_size
        if pos >= next_cut and pos < limit:
            if not isinstance(check_record(buf, pos, limit, check_crc=False, expected_offset=base + pos), RecordInfo):
                break
            cuts.append(pos)
            next_cut = pos + step
    return cuts


def plan(segments: list[SegmentFile], predicate: Predicate, split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[Split]:
    """Partitions for ``segments``: files outside a pushed ``phy_offset`` range are left out,
    files larger than ``split_bytes`` are cut at record starts."""
    low, high = predicate.range_of("phy_offset")
    splits: list[Split] = []
    for seg in segments:
        if seg.size == 0:
            continue
        if (high is not None and seg.from_offset > high) or (low is not None and seg.from_offset + seg.size <= low):
            continue
        starts = [0]
        if seg.size > split_bytes:
            with ReadOnlyMap(seg.path) as m:
                starts += _head_walk(m.buf, seg.size, split_bytes, seg.from_offset)
        ends = starts[1:] + [seg.size]
        for start, end in zip(starts, ends):
            splits.append(Split(len(splits), seg, start, end))
    return splits


@dataclass
class ScanStats:
    """What one partition did: ``records`` walked and validated, ``decoded`` into rows,
    ``corrupt`` damaged ranges (rows or skipped), ``torn_tails`` ends looked past."""

    split: int = 0
    records: int = 0
    decoded: int = 0
    corrupt: int = 0
    torn_tails: int = 0
    extra: dict[str, int] = field(default_factory=dict)


def resync(buf: Any, pos: int, limit: int, base: int) -> tuple[int, bool] | None:
    """The first place after ``pos`` where a valid record (False) or this file's end-of-file
    blank record (True) starts, or None: nothing valid follows (a torn tail)."""
    start = pos + 1
    while True:
        found = [p for p in (buf.find(magic, start + 4, limit) for magic in (*_MAGICS, _BLANK)) if p >= 0]
        if not found:
            return None
        q = min(found) - 4
        start = q + 1
        if q <= pos:
            continue
        total_size, magic = _HEAD.unpack_from(buf, q)
        if magic == BLANK_MAGIC_CODE:
            if total_size == limit - q:  # a blank record declares the rest of the file empty
                return q, True
            continue
        if isinstance(check_record(buf, q, limit, check_crc=False, expected_offset=base + q), RecordInfo):
            return q, False


_BLANK = struct.pack(">i", BLANK_MAGIC_CODE)


class _Columns:
    """Column lists of the batch being built."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.data: dict[str, list[Any]] = {n: [] for n in names}
        self.rows = 0
        self.bytes = 0

    def add(self, row: dict[str, Any]) -> None:
        for name in self.names:
            self.data[name].append(row.get(name))
        self.rows += 1


def _host(raw: bytes, port: int) -> str:
    host = bytes_to_host(bytes(raw))
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _row(buf: Any, pos: int, limit: int, info: RecordInfo, wanted: frozenset[str], decompress: bool,
         verify_crc: bool) -> dict[str, Any]:
    """The selected columns of a validated record; ``_corrupt`` says why when its body fails."""
    layout = decode_record_layout(buf, pos, limit)
    f = layout.fields
    row: dict[str, Any] = {
        "topic": info.topic, "queue_id": info.queue_id, "queue_offset": info.queue_offset,
        "phy_offset": info.commit_log_offset, "store_size": info.size, "sys_flag": info.sys_flag,
        "store_timestamp": info.store_timestamp, "prepared_transaction_offset": info.prepared_transaction_offset,
        "body_crc": f[_F_CRC], "flag": f[_F_FLAG], "born_timestamp": f[_F_BORN_TS],
        "reconsume_times": f[_F_RECONSUME], "body_size": layout.body_length,
    }
    props = info.properties_string
    if "born_host" in wanted:
        row["born_host"] = _host(f[_F_BORN_IP], f[_F_BORN_PORT])
    if "store_host" in wanted:
        row["store_host"] = _host(f[_F_STORE_IP], f[_F_STORE_PORT])
    if "tags" in wanted and props:
        row["tags"] = property_value(props, _TAGS)
    if "keys" in wanted and props:
        row["keys"] = info.keys
    if "uniq_key" in wanted and props:
        row["uniq_key"] = info.uniq_key
    if "properties" in wanted:
        row["properties"] = list(string_to_properties(props).items())
    if "body" in wanted or verify_crc:
        body = memoryview(buf)[layout.body_start:layout.body_start + layout.body_length]
        try:
            if verify_crc and layout.body_length and body_crc(body) != f[_F_CRC]:
                row["_corrupt"] = f"body CRC mismatch at {info.commit_log_offset}"
            if "body" in wanted:
                if decompress:
                    try:
                        row["body"] = inflate_body(body, info.sys_flag, MAX_INFLATED_BYTES)
                    except BodyInflateError as exc:
                        row["_corrupt"] = f"{exc} at {info.commit_log_offset}"
                        row["body"] = bytes(body)
                else:
                    row["body"] = bytes(body)
        finally:
            body.release()
    return row


_TAGS = MessageConst.PROPERTY_TAGS + "\u0001"


def scan(split: Split, wanted: frozenset[str], predicate: Predicate, *, decompress: bool = False,
         verify_crc: bool = True, corrupt_rows: bool = True, stats: ScanStats | None = None,
         ) -> Iterator[_Columns]:
    """Column batches of the records starting in ``split`` that pass ``predicate``."""
    stats = stats if stats is not None else ScanStats()
    stats.split = split.index
    seg = split.segment
    base = seg.from_offset
    checks = [c for c in ("topic", "queue_id", "queue_offset", "store_timestamp", "phy_offset")
              if c in predicate.values or c in predicate.low or c in predicate.high]
    names = tuple(n for n in COLUMN_NAMES if n in wanted)
    with ReadOnlyMap(seg.path) as m:
        buf, limit = m.buf, seg.size
        out = _Columns(names)
        pos = split.start
        while pos < split.end:
            info = check_record(buf, pos, limit, check_crc=False, expected_offset=base + pos)
            if info == 0:
                break  # the end-of-file blank record
            if not isinstance(info, RecordInfo):
                found = resync(buf, pos, limit, base)
                if found is None:
                    stats.torn_tails += 1
                    break
                q, _ = found
                # Partitions are cut at valid records (_head_walk): one that starts at an invalid one
                # met a live writer's race or a changed file; the partition before it reports it.
                if pos != split.start or split.start == 0:
                    stats.corrupt += 1
                    # Damaged bytes have no topic, queue or time: a filter on those excludes them,
                    # as SQL's NULL fails a comparison; a phy_offset bound tests where they start.
                    if corrupt_rows and set(checks) <= {"phy_offset"} and predicate.accepts("phy_offset", base + pos):
                        out.add({"phy_offset": base + pos, "store_size": q - pos,
                                 "_corrupt": f"{q - pos} bytes of invalid records at {base + pos}"})
                pos = q
                continue
            stats.records += 1
            record_pos = pos
            pos += info.size
            if checks and not all(predicate.accepts(c, _value(info, c)) for c in checks):
                continue
            stats.decoded += 1
            try:
                row = _row(buf, record_pos, limit, info, wanted, decompress, verify_crc)
            except MessageFormatError:  # validated a moment ago: only a live writer's race gets here
                continue
            if "_corrupt" in row:
                stats.corrupt += 1
                if not corrupt_rows:
                    continue
            out.add(row)
            out.bytes += info.size
            if out.rows >= BATCH_ROWS or out.bytes >= BATCH_BYTES:
                yield out
                out = _Columns(names)
        if out.rows:
            yield out


def _value(info: RecordInfo, col: str) -> Any:
    if col == "phy_offset":
        return info.commit_log_offset
    value: Any = getattr(info, col)
    return value


def to_arrow(batch: _Columns, schema: Any) -> Any:
    """A pyarrow RecordBatch of ``batch`` with the given pyarrow ``schema``."""

    return arrow_batch(batch.data, schema)


def arrow_schema(names: tuple[str, ...] = COLUMN_NAMES) -> Any:
    """The Arrow schema Spark expects for these columns (timestamps in UTC microseconds), made
    without a SparkSession (the single-process bench)."""
    import pyarrow as pa

    kinds = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "binary": pa.binary(),
             "timestamp": pa.timestamp("us", tz="UTC"), "map<string,string>": pa.map_(pa.string(), pa.string())}
    types = dict(COLUMNS)
    return pa.schema([pa.field(n, kinds[types[n]]) for n in names])


def arrow_batch(data: dict[str, list[Any]], schema: Any) -> Any:
    """A pyarrow RecordBatch of column lists; timestamps are given in epoch milliseconds (the
    store's unit) and converted to the schema's unit."""
    import pyarrow as pa

    arrays = []
    for f in schema:
        values = data[f.name]
        if pa.types.is_timestamp(f.type):
            scale = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[f.type.unit]
            values = [None if v is None else int(v * scale) for v in values]
        arrays.append(pa.array(values, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)

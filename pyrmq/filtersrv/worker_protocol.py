"""The frames a FilterServer and its filter worker processes exchange over the worker's stdin and
stdout: sans-I/O, the same layouts in Python (here) and in the Java worker (FilterWorker.java).

Every frame is a 4-byte big-endian length and a payload. The FilterServer sends one LOAD (which
class to run) and then MATCH frames, one message each; the worker answers every frame with one
REPLY, in order. One reply per message is what lets the parent's deadline name the message that
looped (the first one without a reply): it is rejected, the worker replaced, and the rest of the
batch goes to the new one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import construct as cs

# A reply carries a verdict and a short reason; anything longer is a broken or hostile worker.
MAX_REPLY_BYTES = 64 * 1024
# Requests carry one message (Apache's maxMessageSize is 4 MiB) plus its properties.
MAX_REQUEST_BYTES = 8 * 1024 * 1024

FramePrefix = cs.Struct("length" / cs.Int32ub)

LoadRequest = cs.Struct(
    "op" / cs.Const(b"L"),
    "class_name" / cs.PascalString(cs.Int16ub, "utf8"),
    # Python: the module source; Java: the directory holding the compiled classes.
    "code" / cs.Prefixed(cs.Int32ub, cs.GreedyBytes),
)

MatchRequest = cs.Struct(
    "op" / cs.Const(b"M"),
    "consumer_group" / cs.PascalString(cs.Int16ub, "utf8"),
    "topic" / cs.PascalString(cs.Int16ub, "utf8"),
    "queue_id" / cs.Int32sb,
    "queue_offset" / cs.Int64sb,
    "commit_log_offset" / cs.Int64sb,
    "sys_flag" / cs.Int32sb,
    "born_timestamp" / cs.Int64sb,
    "store_timestamp" / cs.Int64sb,
    "reconsume_times" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "properties" / cs.PascalString(cs.Int32ub, "utf8"),   # RocketMQ's name\x01value\x02 string
    "body" / cs.Prefixed(cs.Int32ub, cs.GreedyBytes),     # uncompressed
)

VERDICT_ACCEPT = ord("Y")
VERDICT_REJECT = ord("N")
VERDICT_ERROR = ord("E")   # the filter raised (or could not be loaded): the message is rejected

Reply = cs.Struct(
    "verdict" / cs.Byte,
    "cpu_ms" / cs.Int64ub,          # the worker's CPU time so far, so the parent can retire it early
    "detail" / cs.PascalString(cs.Int16ub, "utf8"),
)

_PREFIX = struct.Struct(">I")
assert _PREFIX.size == FramePrefix.sizeof()


class WorkerProtocolError(ValueError):
    """A frame that does not follow this protocol."""


@dataclass(frozen=True)
class WorkerReply:
    verdict: int
    cpu_ms: int
    detail: str

    @property
    def accepted(self) -> bool:
        return self.verdict == VERDICT_ACCEPT


def frame(payload: bytes) -> bytes:
    return _PREFIX.pack(len(payload)) + payload


def encode_load(class_name: str, code: bytes) -> bytes:
    return frame(LoadRequest.build({"class_name": class_name, "code": code}))


def encode_match(**fields: object) -> bytes:
    return frame(MatchRequest.build(fields))


def encode_reply(verdict: int, cpu_ms: int, detail: str = "") -> bytes:
    detail_bytes = detail.encode("utf-8", "replace")[:1024]
    return frame(Reply.build({"verdict": verdict, "cpu_ms": cpu_ms,
                              "detail": detail_bytes.decode("utf-8", "ignore")}))


def frame_length(prefix: bytes, limit: int) -> int:
    """The payload length a 4-byte prefix announces, checked against ``limit`` before any read."""
    (length,) = _PREFIX.unpack(prefix)
    if length > limit:
        raise WorkerProtocolError(f"frame of {length} bytes exceeds {limit}")
    return length


def decode_reply(payload: bytes) -> WorkerReply:
    try:
        parsed = Reply.parse(payload)
    except cs.ConstructError as exc:
        raise WorkerProtocolError(f"bad reply: {exc}") from None
    if parsed.verdict not in (VERDICT_ACCEPT, VERDICT_REJECT, VERDICT_ERROR):
        raise WorkerProtocolError(f"bad verdict {parsed.verdict}")
    return WorkerReply(parsed.verdict, parsed.cpu_ms, parsed.detail)


def decode_request(payload: bytes) -> cs.Container:
    """A LOAD or MATCH frame (the worker's side)."""
    try:
        if payload[:1] == b"L":
            return LoadRequest.parse(payload)
        if payload[:1] == b"M":
            return MatchRequest.parse(payload)
    except cs.ConstructError as exc:
        raise WorkerProtocolError(f"bad request: {exc}") from None
    raise WorkerProtocolError(f"unknown request {payload[:1]!r}")

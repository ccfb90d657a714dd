"""A Python filter worker: loads one filter class and answers MATCH frames (worker_protocol.py).

Runs only inside the jail (jail.py). A filter class is a class with ``match(message) -> bool``;
``message`` is a :class:`FilterMessage`. A filter that raises -- MemoryError included, which the
address-space limit turns unbounded allocation into -- rejects that message and the worker goes on.
"""

from __future__ import annotations

import resource
import sys
import traceback
from dataclasses import dataclass, field
from typing import BinaryIO

from pyrmq.codec.message_props import MessageConst, string_to_properties
from pyrmq.filtersrv.worker_protocol import (
    MAX_REQUEST_BYTES,
    VERDICT_ACCEPT,
    VERDICT_ERROR,
    VERDICT_REJECT,
    WorkerProtocolError,
    decode_request,
    encode_reply,
    frame_length,
)

PYTHON_CLASS_PREFIX = "python:"


@dataclass(frozen=True)
class FilterMessage:
    """What a Python filter sees of one message (its ``match`` argument)."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    flag: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    tags: str | None = None      # the TAGS property
    keys: str | None = None      # the KEYS property (space-separated keys)

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)


def _cpu_ms() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return int((usage.ru_utime + usage.ru_stime) * 1000)


def _read_frame(stream: BinaryIO) -> bytes | None:
    prefix = stream.read(4)
    if len(prefix) < 4:
        return None
    length = frame_length(prefix, MAX_REQUEST_BYTES)
    payload = stream.read(length)
    if len(payload) < length:
        return None
    return payload


def load_filter(class_name: str, source: str) -> object:
    """Run the module source and instantiate ``class_name`` (``python:Name``) from it."""
    name = class_name.removeprefix(PYTHON_CLASS_PREFIX)
    namespace: dict[str, object] = {"__name__": "pyrmq_filter_" + name}
    exec(compile(source, f"<filter {name}>", "exec"), namespace)   # noqa: S102 -- inside the jail only
    cls = namespace.get(name)
    if not isinstance(cls, type) or not callable(getattr(cls, "match", None)):
        raise TypeError(f"the source defines no class {name} with a match(message) method")
    return cls()


def serve(stdin: BinaryIO, stdout: BinaryIO) -> int:
    message_filter: object | None = None
    load_error = "no LOAD frame yet"
    while True:
        try:
            payload = _read_frame(stdin)
        except WorkerProtocolError as exc:
            print(f"filter worker: {exc}", file=sys.stderr)
            return 2
        if payload is None:
            return 0
        try:
            request = decode_request(payload)
        except WorkerProtocolError as exc:
            print(f"filter worker: {exc}", file=sys.stderr)
            return 2
        if request.op == b"L":
            try:
                message_filter = load_filter(request.class_name, request.code.decode("utf-8"))
                reply = encode_reply(VERDICT_ACCEPT, _cpu_ms())
            except BaseException as exc:   # a broken class is reported, never fatal to the worker
                message_filter = None
                load_error = f"{type(exc).__name__}: {exc}"
                reply = encode_reply(VERDICT_ERROR, _cpu_ms(), load_error)
        elif message_filter is None:
            reply = encode_reply(VERDICT_ERROR, _cpu_ms(), load_error)
        else:
            properties = string_to_properties(request.properties)
            message = FilterMessage(
                consumer_group=request.consumer_group, topic=request.topic, queue_id=request.queue_id,
                queue_offset=request.queue_offset, commit_log_offset=request.commit_log_offset,
                born_timestamp=request.born_timestamp, store_timestamp=request.store_timestamp,
                reconsume_times=request.reconsume_times, flag=request.flag, body=request.body,
                properties=properties, tags=properties.get(MessageConst.PROPERTY_TAGS),
                keys=properties.get(MessageConst.PROPERTY_KEYS))
            try:
                matched = message_filter.match(message)   # type: ignore[attr-defined]
                reply = encode_reply(VERDICT_ACCEPT if matched is True else VERDICT_REJECT, _cpu_ms())
            except BaseException as exc:   # MemoryError, RecursionError, anything the filter raises
                detail = f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, MemoryError):
                    detail = "".join(traceback.format_exception_only(exc)).strip()
                reply = encode_reply(VERDICT_ERROR, _cpu_ms(), detail)
        stdout.write(reply)
        stdout.flush()

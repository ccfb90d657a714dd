"""Request dispatch by code: the table of processors a role registers, with RocketMQ's answers
for unknown codes (REQUEST_CODE_NOT_SUPPORTED) and failing processors (SYSTEM_ERROR)."""

from __future__ import annotations

import logging
from typing import Callable

from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.deferred import Deferred
from pyrmq.remoting.errors import RequestError

log = logging.getLogger(__name__)

SYSTEM_ERROR = 1
REQUEST_CODE_NOT_SUPPORTED = 3

__all__ = ["REQUEST_CODE_NOT_SUPPORTED", "SYSTEM_ERROR", "Processor", "ProcessorTable", "RequestError"]

# A processor answers now (returns the response), later (returns an awaitable producing the
# response, run by the channel without holding up its reader -- see deferred.py), or never
# (returns None: oneway requests, or a held pull answered by its hold service).
Processor = Callable[[Channel, RemotingCommand], "RemotingCommand | Deferred | None"]


class ProcessorTable:
    def __init__(self, role: str) -> None:
        self.role = role
        self._processors: dict[int, Processor] = {}

    def register(self, code: int, processor: Processor) -> None:
        self._processors[code] = processor

    def codes(self) -> set[int]:
        return set(self._processors)

    def dispatch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred | None:
        processor = self._processors.get(request.code)
        if processor is None:
            return request.response(REQUEST_CODE_NOT_SUPPORTED,
                                    f" request type {request.code} not supported")
        try:
            return processor(channel, request)
        except RequestError as exc:
            return request.response(exc.code, exc.remark)
        except Exception as exc:  # the process keeps serving; the client learns what failed
            log.exception("%s processor for code %d failed (from %s)", self.role, request.code,
                          channel.remote_addr)
            return request.response(SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

"""Request dispatch by code: the table of processors a role registers, with RocketMQ's answers
for unknown codes (REQUEST_CODE_NOT_SUPPORTED) and failing processors (SYSTEM_ERROR)."""

from __future__ import annotations

import logging
from typing import Callable

from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel

log = logging.getLogger(__name__)

SYSTEM_ERROR = 1
REQUEST_CODE_NOT_SUPPORTED = 3

# A processor answers now (returns the response), later (returns None and calls
# channel.send_response itself), or never (oneway requests).
Processor = Callable[[Channel, RemotingCommand], "RemotingCommand | None"]


class RequestError(Exception):
    """A request that cannot be served: answered with ``code`` and ``remark``."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class ProcessorTable:
    def __init__(self, role: str) -> None:
        self.role = role
        self._processors: dict[int, Processor] = {}

    def register(self, code: int, processor: Processor) -> None:
        self._processors[code] = processor

    def codes(self) -> set[int]:
        return set(self._processors)

    def dispatch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
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

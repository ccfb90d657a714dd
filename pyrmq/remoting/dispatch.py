"""Request dispatch by code: the table of processors a role registers, with RocketMQ's answers
for unknown codes (REQUEST_CODE_NOT_SUPPORTED) and failing processors (SYSTEM_ERROR).

A role may add checks that every request passes before its processor is looked up (the
broker's ACL, the NameServer's write allow-list), as Apache's RPC hooks run before its
processors: a check returns to let the request through or raises RequestError, answered like a
processor's."""

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

__all__ = ["REQUEST_CODE_NOT_SUPPORTED", "SYSTEM_ERROR", "Check", "Processor", "ProcessorTable", "RequestError",
           "not_supported"]

# A processor answers now (returns the response), later (returns an awaitable producing the
# response, run by the channel without holding up its reader -- see deferred.py), or never
# (returns None: oneway requests, or a held pull answered by its hold service).
Processor = Callable[[Channel, RemotingCommand], "RemotingCommand | Deferred | None"]
# A check lets a request through by returning and refuses it by raising RequestError.
Check = Callable[[Channel, RemotingCommand], None]


def not_supported(request: RemotingCommand) -> RemotingCommand:
    """REQUEST_CODE_NOT_SUPPORTED with the remark Apache 4.9 gives a code it does not know (its
    leading blank included): the tools print it, and pyrmq presents itself as 4.9.8."""
    return request.response(REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")


class ProcessorTable:
    def __init__(self, role: str) -> None:
        self.role = role
        self._processors: dict[int, Processor] = {}
        self._checks: list[Check] = []

    def register(self, code: int, processor: Processor) -> None:
        self._processors[code] = processor

    def add_check(self, check: Check) -> None:
        self._checks.append(check)

    def codes(self) -> set[int]:
        return set(self._processors)

    def dispatch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred | None:
        try:
            for check in self._checks:
                check(channel, request)
            processor = self._processors.get(request.code)
            if processor is None:
                return not_supported(request)
            return processor(channel, request)
        except RequestError as exc:
            return request.response(exc.code, exc.remark)
        except Exception as exc:  # the process keeps serving; the client learns what failed
            log.exception("%s processing of code %d failed (from %s)", self.role, request.code,
                          channel.remote_addr)
            return request.response(SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

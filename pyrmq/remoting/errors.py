"""The exception a processor (or a deferred answer) raises for a request it cannot serve."""

from __future__ import annotations


class RequestError(Exception):
    """A request that cannot be served: answered with ``code`` and ``remark``."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark

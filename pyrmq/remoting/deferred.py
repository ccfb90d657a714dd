"""Answers that are ready later: a processor may return an awaitable instead of a response.

The channel runs the awaitable as a task in its own nursery and sends what it produces, so the
reader never waits for it (SYNC_FLUSH sends wait for the group commit; SYNC_MASTER sends and
transaction checks will wait for their peers the same way).  A failing awaitable is contained
here, as a failing processor is in dispatch.py: a ``RequestError`` is answered with its code and
remark, anything else is logged and answered SYSTEM_ERROR -- never a dead connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.errors import RequestError

log = logging.getLogger(__name__)

# What a processor returns to answer later; ``None`` from it means "no answer" (oneway).
Deferred = Awaitable[RemotingCommand | None]


async def resolve(request: RemotingCommand, deferred: Deferred, peer: str) -> RemotingCommand | None:
    """The response ``deferred`` produces for ``request``, or SYSTEM_ERROR if it raises."""
    try:
        return await deferred
    except RequestError as exc:
        return request.response(exc.code, exc.remark)
    except Exception as exc:  # one failing answer must not close the connection it rides on
        log.exception("deferred answer to code %d (opaque %d) from %s failed",
                      request.code, request.opaque, peer)
        return request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

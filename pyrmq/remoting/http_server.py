"""A small HTTP/1.1 server on trio for the broker's side doors (the Prometheus ``/metrics``
endpoint; the console): h11 parses, a handler answers.

Bounded like the remoting port: request heads of at most 16 KiB, bodies of at most
``max_body_bytes``, a deadline for each request to arrive and for its answer to leave, a cap on
open connections (the next ones wait in the kernel's backlog). A malformed request gets 400 and
the connection closes; a handler's exception is a 500 and a log line, never the process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable

import h11
import trio

from pyrmq.remoting.transport import PeerStream, TCPListener, accept_loop, open_tcp_listeners

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
REQUEST_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 64
_READ_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    target: str            # path and query, as sent
    headers: dict[str, str]
    body: bytes = b""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class _BadRequest(Exception):
    pass


class HttpServer:
    """Serves ``handler`` on ``host:port`` until cancelled; ``port`` is the bound one once started."""

    def __init__(self, host: str, port: int, handler: Handler, *, role: str = "http",
                 max_body_bytes: int = 64 * 1024) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.role = role
        self.max_body_bytes = max_body_bytes
        self._slots = trio.Semaphore(MAX_CONNECTIONS)

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await open_tcp_listeners(self.port, self.host, role=self.role)
        self.port = listeners[0].port
        log.info("%s listening on %s:%d", self.role, self.host, self.port)
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(self._accept, listener, nursery)
            task_status.started(self.port)

    async def _accept(self, listener: TCPListener, nursery: trio.Nursery) -> None:
        async def handle(peer: PeerStream) -> None:
            async with self._slots:
                await self._connection(peer)
        try:
            await accept_loop(listener, nursery, handle, self.role)
        finally:
            await listener.aclose()

    async def _connection(self, peer: PeerStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        try:
            while True:
                with trio.move_on_after(REQUEST_TIMEOUT_S) as scope:
                    request = await self._read_request(conn, peer)
                if scope.cancelled_caught or request is None:
                    return
                response = await self._answer(request)
                with trio.move_on_after(REQUEST_TIMEOUT_S):
                    await self._send(conn, peer, response)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except _BadRequest as exc:
            log.info("%s: bad request from %s: %s", self.role, peer.remote_addr, exc)
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                with trio.move_on_after(REQUEST_TIMEOUT_S):
                    await self._send(conn, peer, HttpResponse(400, b"bad request\n"))
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError, OSError):
            pass   # the peer went away
        finally:
            await trio.aclose_forcefully(peer)

    async def _read_request(self, conn: h11.Connection, peer: PeerStream) -> HttpRequest | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise _BadRequest(str(exc)) from None
            if event is h11.NEED_DATA:
                data = await peer.receive_some(_READ_CHUNK)
                if not data and conn.their_state is h11.IDLE:
                    return None            # closed between requests
                conn.receive_data(bytes(data))
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.max_body_bytes:
                    raise _BadRequest(f"body over {self.max_body_bytes} bytes")
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
                return HttpRequest(head.method.decode("ascii", "replace"), head.target.decode("latin-1"),
                                   headers, bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _answer(self, request: HttpRequest) -> HttpResponse:
        try:
            return await self.handler(request)
        except Exception:   # a handler's bug is one answer's problem
            log.exception("%s: %s %s failed", self.role, request.method, request.target)
            return HttpResponse(500, b"internal error\n")

    @staticmethod
    async def _send(conn: h11.Connection, peer: PeerStream, response: HttpResponse) -> None:
        headers = [("content-type", response.content_type), ("content-length", str(len(response.body))),
                   *response.headers.items()]
        data = conn.send(h11.Response(status_code=response.status, headers=headers)) or b""
        data += conn.send(h11.Data(data=response.body)) or b""
        data += conn.send(h11.EndOfMessage()) or b""
        await peer.send_buffers([data])

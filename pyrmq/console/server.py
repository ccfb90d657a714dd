"""The console's HTTP side: the single-page app's files (package data, read once, served by a
fixed table: no path of a request ever reaches the file system) and the JSON API's routes on
``pyrmq.remoting.http_server``.

Writes are POSTs with a JSON body (``application/json``, which a cross-site form cannot send
without the browser asking first) of at most ``MAX_BODY_BYTES``; a POST whose ``Origin`` is
another site is refused. With ACL on, every request needs HTTP Basic with an admin account of
plain_acl.yml, and the console's remoting requests for it are signed as that account.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, Final, Mapping
from urllib.parse import parse_qs, urlsplit

import trio

from pyrmq.client.admin import AdminClient
from pyrmq.client.errors import MQClientError
from pyrmq.client.instance import signing_as
from pyrmq.console.api import ConsoleApi
from pyrmq.console.auth import CHALLENGE, AdminSecretLookup, admin_account
from pyrmq.console.views import BadRequest
from pyrmq.remoting.http_server import HttpRequest, HttpResponse, HttpServer

log = logging.getLogger(__name__)

MAX_BODY_BYTES: Final = 16 * 1024     # the largest write is a topic form: a few names and numbers
MAX_QUERY_FIELDS: Final = 16
JSON_TYPE: Final = "application/json; charset=utf-8"
# path -> (package file, content type): everything the browser may fetch besides the API
STATIC_FILES: Final = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/static/console.css": ("console.css", "text/css; charset=utf-8"),
    "/static/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/static/charts.js": ("charts.js", "text/javascript; charset=utf-8"),
}
# The page runs its own files only: no inline script, no other origin, no framing.
SECURITY_HEADERS: Final = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "x-content-type-options": "nosniff", "x-frame-options": "DENY", "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}

Query = Mapping[str, str]
Body = Mapping[str, Any]


def _load_static() -> dict[str, tuple[bytes, str]]:
    folder = resources.files("pyrmq.console") / "static"
    return {path: ((folder / name).read_bytes(), kind) for path, (name, kind) in STATIC_FILES.items()}


def _json(status: int, value: Any) -> HttpResponse:
    return HttpResponse(status, json.dumps(value, separators=(",", ":")).encode(), JSON_TYPE, dict(SECURITY_HEADERS))


class ConsoleServer:
    """Serve with ``await nursery.start(console.serve)``; ``port`` is the bound one once started."""

    def __init__(self, host: str, port: int, namesrv: str | None, *, admin_secret: AdminSecretLookup | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.namesrv = namesrv or None
        # On loopback, only loopback names: a web page whose own name is re-pointed at 127.0.0.1
        # (DNS rebinding) would otherwise be same-origin with the console.
        self.loopback_hosts = _LOOPBACK_HOSTS if _is_loopback(host) else None
        self.admin_secret = admin_secret
        self.ssl_context = ssl_context
        self.static = _load_static()
        self.server = HttpServer(host, port, self._handle, role="console", max_body_bytes=MAX_BODY_BYTES)
        self.api: ConsoleApi | None = None
        # path -> the API call; the API itself is made in serve(), inside the admin client's life
        self._get_routes: dict[str, Callable[[ConsoleApi, Query], Awaitable[dict[str, Any]]]] = {
            "/api/cluster": lambda a, q: a.cluster(),
            "/api/topics": lambda a, q: a.topics(),
            "/api/topic": lambda a, q: a.topic(q.get("topic")),
            "/api/groups": lambda a, q: a.groups(),
            "/api/group": lambda a, q: a.group(q.get("group")),
            "/api/messages/by-id": lambda a, q: a.message_by_id(q),
            "/api/messages/by-key": lambda a, q: a.messages_by_key(q),
            "/api/messages/by-unique-key": lambda a, q: a.messages_by_key(q, unique=True),
            "/api/messages/by-offset": lambda a, q: a.messages_by_offset(q),
            "/api/messages/by-time": lambda a, q: a.messages_by_time(q),
            "/api/dlq": lambda a, q: a.dead_letters(q),
            "/api/live": lambda a, q: a.live(q),
        }
        self._post_routes: dict[str, Callable[[ConsoleApi, Body], Awaitable[dict[str, Any]]]] = {
            "/api/topics": ConsoleApi.save_topic,
            "/api/topics/delete": ConsoleApi.delete_topic,
            "/api/groups/reset-offset": ConsoleApi.reset_offset,
            "/api/dlq/resend": ConsoleApi.resend_dead_letter,
        }

    @property
    def port(self) -> int:
        return self.server.port

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        async with AdminClient(self.namesrv, ssl_context=self.ssl_context) as admin:
            self.api = ConsoleApi(admin)
            await self.server.serve(task_status=task_status)

    async def _handle(self, request: HttpRequest) -> HttpResponse:
        if self.loopback_hosts is not None and _host_name(request.headers.get("host", "")) not in self.loopback_hosts:
            return HttpResponse(403, b"the console on loopback answers to 127.0.0.1, [::1] or localhost only\n",
                                headers=dict(SECURITY_HEADERS))
        account = None
        if self.admin_secret is not None:
            account = admin_account(request.headers.get("authorization"), self.admin_secret)
            if account is None:
                return HttpResponse(401, b"an admin account of plain_acl.yml is required\n",
                                    headers={"www-authenticate": CHALLENGE, **SECURITY_HEADERS})
        path = request.path
        if not path.startswith("/api/"):
            return self._static(request)
        token = signing_as.set(account)
        try:
            return await self._api(request, path)
        finally:
            signing_as.reset(token)

    def _static(self, request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return HttpResponse(405, b"only GET\n", headers={"allow": "GET, HEAD"})
        found = self.static.get(request.path)
        if found is None:
            return HttpResponse(404, b"not found\n", headers=dict(SECURITY_HEADERS))
        body, kind = found
        return HttpResponse(200, b"" if request.method == "HEAD" else body, kind, dict(SECURITY_HEADERS))

    async def _api(self, request: HttpRequest, path: str) -> HttpResponse:
        assert self.api is not None
        try:
            if request.method == "GET" and path in self._get_routes:
                return _json(200, await self._get_routes[path](self.api, _query(request.target)))
            if request.method == "POST" and path in self._post_routes:
                refused = _refuse_post(request)
                if refused is not None:
                    return refused
                return _json(200, await self._post_routes[path](self.api, _json_body(request.body)))
        except BadRequest as exc:
            return _json(400, {"error": str(exc)})
        except MQClientError as exc:
            log.info("console: %s %s: %s", request.method, path, exc)
            return _json(502, {"error": str(exc), "code": exc.code})
        if path in self._get_routes or path in self._post_routes:
            allowed = "GET" if path in self._get_routes else "POST"
            return HttpResponse(405, b"method not allowed\n", headers={"allow": allowed})
        return _json(404, {"error": f"no such endpoint: {path}"})


_LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "::1", "localhost"})


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _host_name(host_header: str) -> str:
    """The name of a Host header, without its port (``[::1]:8080`` -> ``::1``)."""
    return (urlsplit("//" + host_header).hostname or "") if host_header else ""


def _query(target: str) -> dict[str, str]:
    """The query string's fields, first value of each (a bounded number of fields)."""
    query = urlsplit(target).query
    try:
        fields = parse_qs(query, max_num_fields=MAX_QUERY_FIELDS)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return {name: values[0] for name, values in fields.items()}


def _refuse_post(request: HttpRequest) -> HttpResponse | None:
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        return _json(415, {"error": "a write is a POST with a JSON body (Content-Type: application/json)"})
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
        return _json(403, {"error": "cross-site writes are refused"})
    return None


def _json_body(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not JSON") from None
    if not isinstance(value, dict):
        raise BadRequest("the body must be a JSON object")
    return value

"""What a producer and a consumer share (Java's ``MQClientInstance``): the connections, the
NameServer list, the route cache, the heartbeat and route-refresh loop, and the translation of
every remoting failure into the ``MQClientError`` family.

One instance per ``Producer`` / ``PullConsumer``, run as an async context manager inside the
caller's trio loop; it starts one background task (``_periodic``) and stops it on exit."""

from __future__ import annotations

import contextlib
import logging
import math
import ssl
import time
from collections.abc import Callable
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Final, TypeVar

import trio

from pyrmq.client.errors import (
    MESSAGE_ILLEGAL_LOCAL,
    NO_NAME_SERVER_EXCEPTION,
    MQBrokerError,
    MQClientError,
    MQConnectError,
    MQRemotingError,
    MQTimeoutError,
)
from pyrmq.client.ids import local_ip, make_client_id
from pyrmq.client.route import TopicRoute
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.common.acl.signature import sign_ext_fields
from pyrmq.remoting.channel import Channel, ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.transport import split_addr
from pyrmq.remoting.tls_config import TlsConfig
from pyrmq.remoting.tls_context import client_ssl_context

log = logging.getLogger(__name__)

# An ACL 1.0 account: (accessKey, secretKey).
AclCredentials = tuple[str, str]
# The account the requests of the current task are signed with when the instance has none of its
# own: a server acting for several users at once (the console) sets it around each user's calls.
signing_as: ContextVar[AclCredentials | None] = ContextVar("signing_as", default=None)

# Java's defaults: sendMsgTimeout / the admin RPC timeout, pollNameServerInterval,
# heartbeatBrokerInterval.
DEFAULT_TIMEOUT_S: Final = 3.0
ROUTE_REFRESH_S: Final = 30.0
HEARTBEAT_INTERVAL_S: Final = 30.0
# A connection attempt gets this long on top of a request's own timeout (RemotingClient's bound).
CONNECT_ALLOWANCE_S: Final = 3.0
# Unregistering at close is best effort: a broker that is gone must not hold the close up.
UNREGISTER_TIMEOUT_S: Final = 2.0


def parse_namesrv(namesrv: str) -> list[str]:
    """``host:port;host:port`` (Java's namesrvAddr form) into addresses; each must be host:port."""
    addrs = [a.strip() for a in namesrv.split(";") if a.strip()]
    if not addrs:
        raise MQClientError(NO_NAME_SERVER_EXCEPTION, "no NameServer address given")
    for addr in addrs:
        try:
            split_addr(addr)
        except ValueError as exc:
            raise MQClientError(NO_NAME_SERVER_EXCEPTION, f"NameServer address: {exc}") from None
    return addrs


class _ServerRequests:
    """Requests a broker sends to a client (NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO,
    ...): a pull-only client has nothing to do for them, and says so instead of leaving the broker
    to time out."""

    def dispatch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        if request.is_oneway:
            return None
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f"request type {request.code} not supported by the pyrmq pull client")


class ClientInstance:
    """Connections, routes and heartbeats for one producer or consumer."""

    def __init__(self, namesrv: str | None, *, ssl_context: ssl.SSLContext | None = None,
                 instance_name: str | None = None, timeout: float = DEFAULT_TIMEOUT_S,
                 route_refresh_interval: float = ROUTE_REFRESH_S,
                 heartbeat_interval: float = HEARTBEAT_INTERVAL_S,
                 credentials: AclCredentials | None = None, heartbeats: bool = True) -> None:
        """``namesrv=None``: a client that only talks to brokers it is given (``pyrmq dlq -b``);
        ``credentials``: every request is signed as ACL 1.0 clients sign (AclClientRPCHook);
        ``heartbeats=False``: a client of no group (the admin client) does not register with brokers."""
        self.namesrv_addrs = parse_namesrv(namesrv) if namesrv is not None else []
        self.credentials = credentials
        self.heartbeats = heartbeats
        self.ip = local_ip()
        self.client_id = make_client_id(self.ip, instance_name)
        self.timeout = timeout
        self.route_refresh_interval = route_refresh_interval
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_body: Callable[[], dict[str, Any]] = lambda: {"clientID": self.client_id}
        self._ssl_context = ssl_context
        self._namesrv_index = 0
        self._routes: dict[str, tuple[TopicRoute, float]] = {}   # topic -> (route, fetched at, trio clock)
        self._route_locks: dict[str, trio.Lock] = {}
        self._heartbeated: set[str] = set()
        self._heartbeat_lock = trio.Lock()
        self._remoting: RemotingClient | None = None
        self._nursery: trio.Nursery | None = None
        self._stack: contextlib.AsyncExitStack | None = None

    # --- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> ClientInstance:
        async with contextlib.AsyncExitStack() as stack:
            self._remoting = await stack.enter_async_context(
                RemotingClient(_ServerRequests(), ssl_context=self._ssl_context))
            self._nursery = await stack.enter_async_context(trio.open_nursery())
            self._nursery.start_soon(self._periodic)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._stack is not None and self._nursery is not None
        self._nursery.cancel_scope.cancel()
        stack, self._stack = self._stack, None
        # The caller's exception is not handed to the nurseries: it leaves `async with` as it is,
        # not wrapped in an ExceptionGroup (the background tasks are cancelled either way).
        try:
            await stack.aclose()
        finally:
            self._remoting = self._nursery = None

    @property
    def remoting(self) -> RemotingClient:
        if self._remoting is None:
            raise MQClientError(-1, "the client is not started or closed (use it inside `async with`)")
        return self._remoting

    # --- requests -------------------------------------------------------------------------

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return the answer; remoting failures become
        ``MQConnectError`` / ``MQTimeoutError``.  The answer's code is the caller's to check."""
        timeout = self.timeout if timeout is None else timeout
        self._sign(request)
        try:
            # The outer bound also covers connecting (RemotingClient gives that its own 3 s).
            with trio.fail_after(timeout + CONNECT_ALLOWANCE_S):
                return await self.remoting.invoke(addr, request, timeout)
        except RemotingTimeoutError as exc:
            raise MQTimeoutError(f"{addr}: {exc}") from None
        except trio.TooSlowError:
            raise MQTimeoutError(f"{addr}: no connection and answer within {timeout + CONNECT_ALLOWANCE_S:g} s") \
                from None
        except (ChannelClosedError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise MQConnectError(f"{addr}: {type(exc).__name__}: {exc}") from None

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        self._sign(request)
        try:
            with trio.fail_after(CONNECT_ALLOWANCE_S):
                await self.remoting.invoke_oneway(addr, request)
        except trio.TooSlowError:
            raise MQTimeoutError(f"{addr}: no connection within {CONNECT_ALLOWANCE_S:g} s") from None
        except (ChannelClosedError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise MQConnectError(f"{addr}: {type(exc).__name__}: {exc}") from None

    def _sign(self, request: RemotingCommand) -> None:
        credentials = self.credentials or signing_as.get()
        if credentials is not None:
            access_key, secret_key = credentials
            request.ext_fields = sign_ext_fields(request.ext_fields or {}, body_bytes(request) or None,
                                                 access_key, secret_key)

    async def invoke_ok(self, addr: str, request: RemotingCommand, timeout: float | None = None,
                        ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        """``invoke``, raising ``MQBrokerError`` unless the answer's code is in ``ok``."""
        response = await self.invoke(addr, request, timeout)
        if response.code not in ok:
            raise MQBrokerError(response.code, response.remark or "", addr)
        return response

    async def invoke_namesrv(self, request: RemotingCommand) -> RemotingCommand:
        """Ask the NameServers in turn, starting after the last one that answered, until one does."""
        last: MQRemotingError | None = None
        count = len(self.namesrv_addrs)
        if not count:
            raise MQClientError(NO_NAME_SERVER_EXCEPTION, "no NameServer address given")
        for step in range(count):
            index = (self._namesrv_index + step) % count
            try:
                response = await self.invoke(self.namesrv_addrs[index], request)
            except MQRemotingError as exc:
                log.debug("NameServer %s failed: %s", self.namesrv_addrs[index], exc)
                last = exc
                continue
            self._namesrv_index = index
            return response
        assert last is not None
        raise last

    # --- routes ---------------------------------------------------------------------------

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRoute | None:
        """The topic's route, from the cache when it is younger than the refresh interval;
        ``None`` when the NameServer knows no such topic."""
        cached = self._routes.get(topic)
        if cached is not None and not refresh and trio.current_time() - cached[1] < self.route_refresh_interval:
            return cached[0]
        lock = self._route_locks.setdefault(topic, trio.Lock())
        async with lock:
            cached = self._routes.get(topic)
            if cached is not None and trio.current_time() - cached[1] < (0 if refresh else self.route_refresh_interval):
                return cached[0]
            return await self._fetch_route(topic)

    def forget_route(self, topic: str) -> None:
        """Make the next ``route(topic)`` ask the NameServer (after a failure on this route)."""
        cached = self._routes.get(topic)
        if cached is not None:
            self._routes[topic] = (cached[0], -math.inf)

    async def _fetch_route(self, topic: str) -> TopicRoute | None:
        started = trio.current_time()
        response = await self.invoke_namesrv(make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            self._routes.pop(topic, None)
            return None
        if response.code != ResponseCode.SUCCESS or not response.body:
            raise MQBrokerError(response.code, response.remark or "route answer without a body", "namesrv")
        try:
            route = TopicRoute.decode(topic, body_bytes(response))
        except ProtocolError as exc:
            raise MQClientError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        self._routes[topic] = (route, started)
        new = route.all_broker_addrs() - self._heartbeated
        if new and self._nursery is not None and self.heartbeats:
            self._nursery.start_soon(self._heartbeat, sorted(new))
        return route

    def known_broker_addrs(self) -> set[str]:
        return {addr for route, _ in self._routes.values() for addr in route.all_broker_addrs()}

    # --- heartbeats -------------------------------------------------------------------------

    async def heartbeat_all(self) -> None:
        await self._heartbeat(sorted(self.known_broker_addrs()))

    async def _heartbeat(self, addrs: list[str]) -> None:
        # One heartbeat round at a time, its body made when it starts: a round that began before a
        # subscription changed is answered before the next round tells the broker the change (a
        # broker may handle concurrent heartbeats in any order: Apache uses a thread pool).
        async with self._heartbeat_lock:
            body = fastjson.dumps(self.heartbeat_body()).encode()
            for addr in addrs:
                self._heartbeated.add(addr)
                try:
                    await self.invoke_ok(addr, make_request(RequestCode.HEART_BEAT, None, body))
                except MQClientError as exc:
                    log.warning("heartbeat to %s failed: %s", addr, exc)

    async def unregister(self, ext_fields: dict[str, str]) -> None:
        """UNREGISTER_CLIENT to every broker heartbeated, each bounded; failures only logged."""
        for addr in sorted(self._heartbeated):
            request = make_request(RequestCode.UNREGISTER_CLIENT, {"clientID": self.client_id, **ext_fields})
            try:
                await self.invoke_ok(addr, request, UNREGISTER_TIMEOUT_S)
            except MQClientError as exc:
                log.info("unregister at %s failed: %s", addr, exc)

    async def _periodic(self) -> None:
        """Refresh every cached route and heartbeat every broker, each on its own interval."""
        next_route = trio.current_time() + self.route_refresh_interval
        next_heartbeat = trio.current_time() + self.heartbeat_interval
        while True:
            await trio.sleep_until(min(next_route, next_heartbeat))
            now = trio.current_time()
            if now >= next_route:
                next_route = now + self.route_refresh_interval
                for topic in list(self._routes):
                    try:
                        await self.route(topic, refresh=True)
                    except MQClientError as exc:   # keep the route we have; the next round retries
                        log.warning("route refresh for %s failed: %s", topic, exc)
            if now >= next_heartbeat:
                next_heartbeat = now + self.heartbeat_interval
                if self.heartbeats:
                    await self.heartbeat_all()


G = TypeVar("G", bound="GroupClient")


class GroupClient:
    """What ``Producer`` and ``PullConsumer`` share: a ``ClientInstance`` of their own, a group
    they register with every broker by heartbeat, and UNREGISTER_CLIENT when they close."""

    # The UNREGISTER_CLIENT field naming the group: producerGroup or consumerGroup.
    unregister_field: str = ""

    def __init__(self, namesrv: str, group: str, *, timeout: float = DEFAULT_TIMEOUT_S, tls: bool = False,
                 ssl_context: ssl.SSLContext | None = None, instance_name: str | None = None,
                 heartbeat_interval: float = HEARTBEAT_INTERVAL_S,
                 route_refresh_interval: float = ROUTE_REFRESH_S, credentials: AclCredentials | None = None) -> None:
        """``tls=True`` speaks TLS as Apache's client does by default (tls.test.mode: any server
        certificate is accepted); ``ssl_context`` is a context of your own (checking the server
        against a CA, showing a client certificate: ``pyrmq.remoting.tls_context.client_ssl_context``
        builds one from Apache's tls.client.* settings) and implies TLS; ``credentials``, an ACL 1.0
        account (accessKey, secretKey), signs every request (Java's AclClientRPCHook)."""
        if not group:
            raise MQClientError(MESSAGE_ILLEGAL_LOCAL, "the group name is empty")
        if tls and ssl_context is None:
            ssl_context = client_ssl_context(TlsConfig())
        self.instance = ClientInstance(namesrv, ssl_context=ssl_context, instance_name=instance_name, timeout=timeout,
                                       heartbeat_interval=heartbeat_interval,
                                       route_refresh_interval=route_refresh_interval, credentials=credentials)
        self.instance.heartbeat_body = self._heartbeat_body
        self.group = group
        self.timeout = timeout

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    def _heartbeat_body(self) -> dict[str, Any]:
        raise NotImplementedError

    async def __aenter__(self: G) -> G:
        await self.instance.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            # Unregistering is bounded (UNREGISTER_TIMEOUT_S a broker), so it may run shielded
            # when the caller is being cancelled.
            with trio.CancelScope(shield=exc_type is not None and issubclass(exc_type, trio.Cancelled)):
                await self.instance.unregister({self.unregister_field: self.group})
        finally:
            await self.instance.__aexit__(exc_type, exc, tb)


def body_bytes(response: RemotingCommand) -> bytes:
    """The answer's body as one bytes object (decoded frames carry bytes or a memoryview)."""
    body = response.body
    if body is None:
        return b""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    return b"".join(bytes(part) for part in body)


def now_ms() -> int:
    return int(time.time() * 1000)

"""Blocking twins of ``Producer`` and ``PullConsumer`` for code that is not async (a Spark
executor calls plain functions): each object runs its async twin on a trio loop in a thread of
its own, and every method hands its call to that loop and waits for the result.

    from pyrmq.client.sync import Producer
    with Producer("127.0.0.1:9876", group="my_producer") as producer:
        producer.send("TopicTest", b"hello", tags="TagA")

Methods may be called from any thread; calls from several threads run concurrently on the loop
(each as its own trio task).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, TypeVar

import trio

from pyrmq.client import consumer as async_consumer
from pyrmq.client import producer as async_producer
from pyrmq.client.errors import MQClientError
from pyrmq.client.model import MessageQueue, PullResult, SendResult
from pyrmq.client.producer import OutgoingMessage

T = TypeVar("T")
S = TypeVar("S", bound="_SyncClient")

# Starting (no network yet) and stopping (unregistering, each broker bounded by 2 s) take at most
# this long; a loop thread that does not stop by then is left behind as a daemon.
START_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 30.0


class _LoopThread:
    """A daemon thread running ``trio.run`` inside one async client's context until ``stop``."""

    def __init__(self, client: AbstractAsyncContextManager[Any], name: str) -> None:
        self.client = client
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise MQClientError(-1, f"the client loop did not start within {START_TIMEOUT_S:g} s")
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:   # reported to the constructor; the thread just ends
            self._error = exc
        finally:
            self._started.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with self.client:
            self._started.set()
            await self._stop.wait()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        if self._token is None or self._stop is None or self._stop.is_set():
            raise MQClientError(-1, "the client is closed")

        async def bound() -> T:
            return await fn(*args, **kwargs)
        try:
            return trio.from_thread.run(bound, trio_token=self._token)
        except trio.RunFinishedError:
            raise MQClientError(-1, "the client is closed") from None

    def stop(self) -> None:
        if self._token is None or self._stop is None:
            return
        try:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        except trio.RunFinishedError:
            return
        self._thread.join(STOP_TIMEOUT_S)


class _SyncClient:
    _loop: _LoopThread
    client_id: str

    def close(self) -> None:
        """Unregister from the brokers and stop the loop thread; idempotent."""
        self._loop.stop()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class Producer(_SyncClient):
    """``pyrmq.client.Producer`` with blocking methods; same arguments."""

    def __init__(self, namesrv: str, group: str, **kwargs: Any) -> None:
        self._client = async_producer.Producer(namesrv, group, **kwargs)
        self.client_id = self._client.client_id
        self._loop = _LoopThread(self._client, f"pyrmq-producer-{group}")

    def send(self, topic: str, body: bytes, tags: str | None = None, keys: str | None = None,
             properties: Mapping[str, str] | None = None, delay_level: int = 0, *,
             timeout: float | None = None) -> SendResult:
        return self._loop.call(self._client.send, topic, body, tags, keys, properties, delay_level,
                               timeout=timeout)

    def send_batch(self, topic: str, messages: Iterable[OutgoingMessage | bytes], *,
                   timeout: float | None = None) -> SendResult:
        return self._loop.call(self._client.send_batch, topic, list(messages), timeout=timeout)


class PullConsumer(_SyncClient):
    """``pyrmq.client.PullConsumer`` with blocking methods; same arguments."""

    def __init__(self, namesrv: str, group: str, **kwargs: Any) -> None:
        self._client = async_consumer.PullConsumer(namesrv, group, **kwargs)
        self.client_id = self._client.client_id
        self._loop = _LoopThread(self._client, f"pyrmq-consumer-{group}")

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        self._loop.call(self._client.subscribe, topic, expression, expression_type)

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return self._loop.call(self._client.fetch_queues, topic)

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, tag_expression: str = "*",
             timeout: float | None = None, **kwargs: Any) -> PullResult:
        return self._loop.call(self._client.pull, mq, offset, max_nums, tag_expression, timeout, **kwargs)

    def query_offset(self, mq: MessageQueue) -> int:
        return self._loop.call(self._client.query_offset, mq)

    def update_offset(self, mq: MessageQueue, offset: int) -> None:
        self._loop.call(self._client.update_offset, mq, offset)

    def min_offset(self, mq: MessageQueue) -> int:
        return self._loop.call(self._client.min_offset, mq)

    def max_offset(self, mq: MessageQueue) -> int:
        return self._loop.call(self._client.max_offset, mq)

    def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        return self._loop.call(self._client.search_offset, mq, timestamp)

"""One connection speaking remoting frames, shared by the server and the client side.

A reader task decodes every complete frame of each receive before it awaits again; requests go to
the dispatcher (which answers at once, later through an awaitable, or never for oneway),
responses complete the outstanding request with the same opaque.  Outgoing frames are queued as
buffers and written by one writer task, so a burst of responses leaves in a single gather-write
(``PeerStream``).

Deadlines live here, in the I/O loop, on trio's clock: a started frame must be complete within
``frame_timeout`` seconds, and a peer that sends no complete frame for ``idle_timeout`` seconds is
dropped (Apache's ``serverChannelMaxIdleTimeSeconds``).

Memory per peer is bounded here too.  A peer that does not read its answers is throttled first:
its requests are no longer read while more than ``OUTBOUND_HIGH_WATER`` bytes wait for it, or
while it is owed ``MAX_OWED_ANSWERS`` answers (held pulls, answers being prepared).  If it still
does not read, it is disconnected: when a write batch makes no way within ``write_timeout``
seconds, or when what is queued for it passes ``OUTBOUND_LIMIT`` (answers that were already
owed keep arriving while its requests are not read).  Nothing a peer sends can stop the process:
a failure inside the connection's tasks closes that connection with one log line.
"""

from __future__ import annotations

import enum
import itertools
import logging
import math
from collections.abc import Iterable
from typing import Callable, Final, Protocol

import trio

from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.remoting import (
    MAX_FRAME_BYTES,
    FrameDecoder,
    RemotingCommand,
    SerializeType,
    encode_command_buffers,
)
from pyrmq.remoting.deferred import Deferred, resolve
from pyrmq.remoting.transport import Buffer, PeerStream, consume_sent, split_addr

log = logging.getLogger(__name__)

SYSTEM_ERROR: Final = ResponseCode.SYSTEM_ERROR

# Bytes read per receive: large enough for a batch of small frames, small enough to keep the
# decode step short.
RECEIVE_CHUNK: Final = 256 * 1024
# Stop reading from a peer that does not drain its responses once this much is queued for it.
OUTBOUND_HIGH_WATER: Final = 32 * 1024 * 1024
# Drop a peer with this much queued: only answers it was already owed can take it past the high
# water mark, so a reading client never gets here.
OUTBOUND_LIMIT: Final = 256 * 1024 * 1024
# Stop reading from a peer owed this many answers (held pulls, deferred answers).  The official
# clients keep at most 65535 asynchronous requests in flight per connection
# (clientAsyncSemaphoreValue); a consumer has one pull per queue in flight.
MAX_OWED_ANSWERS: Final = 16384
# One gather-write takes at most this much of the queue, so the write deadline measures progress.
WRITE_BATCH_BYTES: Final = 8 * 1024 * 1024
# A write batch that makes no way within this many seconds means the peer stopped reading.
DEFAULT_WRITE_TIMEOUT_S: Final = 30.0


class RemotingTimeoutError(Exception):
    """No response arrived within the timeout."""



class _Stretch(enum.Enum):
    """How a stretch of reads ended (Channel._read_stretch)."""

    END = 0         # the peer closed, failed or broke the protocol: the reader stops
    THROTTLED = 1   # too much is owed to the peer: wait for it to drain, then read on


class _ReadTimes:
    """When the reader last decoded a frame, and since when the partial frame is arriving."""

    __slots__ = ("last_frame_at", "partial_since")

    def __init__(self, now: float) -> None:
        self.last_frame_at = self.partial_since = now


class _BatchWork:
    """Work that handling a reader's batch of requests puts off until the batch's answers are
    written (:func:`after_answers`). One for the process: the event loop runs one reader's batch
    at a time, with no await inside it."""

    __slots__ = ("open", "work")

    def __init__(self) -> None:
        self.open = False
        self.work: list[Callable[[], None]] = []

    def run(self) -> None:
        while self.work:
            work, self.work = self.work, []
            for fn in work:
                try:
                    fn()
                except Exception:   # one piece of put-off work must not keep the others from running
                    log.exception("work put off until a batch's answers were written failed")


_batch_work = _BatchWork()


def after_answers(fn: Callable[[], None]) -> bool:
    """Run ``fn`` once the reader handling the current batch of requests has written their
    answers, and return True; return False when no reader is mid-batch (the caller does the work
    now). A held pull woken by a send is answered so: the sender's answer leaves first, and the
    pull's answer holds every record of the batch (Apache answers woken pulls on its pull
    threads, not on the send's)."""
    if not _batch_work.open:
        return False
    _batch_work.work.append(fn)
    return True


class ChannelClosedError(Exception):
    """The connection closed before the response arrived."""


class Dispatcher(Protocol):
    def dispatch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred | None:
        """Answer ``request`` now (return the response), later (return an awaitable producing it,
        or call ``channel.send_response``), or not at all (``None``)."""


class _PendingResponse:
    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: RemotingCommand | None = None


_opaque_counter = itertools.count(1)


class Channel:
    """A connected peer.  ``send_*`` methods never block the caller on the network."""

    def __init__(self, peer: PeerStream, max_frame_bytes: int = MAX_FRAME_BYTES, *,
                 idle_timeout: float | None = None, frame_timeout: float | None = None,
                 write_timeout: float | None = DEFAULT_WRITE_TIMEOUT_S) -> None:
        self.peer = peer
        self.remote_addr = peer.remote_addr
        try:   # a message's born host (parsed once, not per send)
            self.remote_host_port = split_addr(peer.remote_addr)
        except ValueError:
            self.remote_host_port = ("0.0.0.0", 0)
        self.local_addr = peer.local_addr
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout = idle_timeout      # seconds without a complete frame; None or 0: forever
        self.frame_timeout = frame_timeout    # seconds for a started frame to complete; None or 0: forever
        self.write_timeout = write_timeout    # seconds for a write batch to go out; None or 0: forever
        self.closed = False
        self.attributes: dict[str, object] = {}   # per-connection state of the roles
        self._nursery: trio.Nursery | None = None
        self._outbound: list[Buffer] = []
        self._outbound_bytes = 0
        self._wake_writer = trio.Event()
        # The writer is in a send (what it took must go out before anything else), and the
        # reader is handling the frames of one receive (it writes their answers when done).
        self._writing = False
        self._reading_batch = False
        self._drained = trio.Event()
        self._drain_waiters = 0   # tasks in wait_writable (an Event's statistics() builds an object)
        # Answers owed to the peer by opaque (a count: a hostile peer may reuse opaques).
        self._owed: dict[int, int] = {}
        self._owed_count = 0
        self._pending: dict[int, _PendingResponse] = {}
        self._close_callbacks: list[Callable[[Channel], None]] = []
        self._closed_event = trio.Event()
        # Server-initiated requests use JSON unless the peer spoke ROCKETMQ to us (C++ reads JSON only).
        self.peer_serialize_type = SerializeType.JSON

    def __repr__(self) -> str:
        return f"<Channel {self.remote_addr}{' closed' if self.closed else ''}>"

    # --- writing --------------------------------------------------------------------------

    def send_response(self, response: RemotingCommand) -> None:
        """Queue an answer; an answer owed to the peer (held pull, deferred) is settled."""
        self._settle(response.opaque)
        self._send_response(response)

    @staticmethod
    def send_responses(answers: Iterable[tuple[Channel, RemotingCommand]], *, now: bool = False) -> None:
        """``send_response`` for many answers at once (a group commit's sends): every channel's
        answers are queued first, then written together -- one write per channel, not per answer.
        ``now``: written even on a channel whose reader is mid-batch (with what that batch has
        answered so far), not after the batch."""
        channels: dict[int, Channel] = {}
        for channel, response in answers:
            held, channel._reading_batch = channel._reading_batch, True
            try:
                channel.send_response(response)
            finally:
                channel._reading_batch = held
            channels[id(channel)] = channel
        for channel in channels.values():
            if now or not channel._reading_batch:   # a reader mid-batch writes them after its batch
                channel._write_now()

    def _send_response(self, response: RemotingCommand) -> None:
        try:
            frame = encode_command_buffers(response)
        except Exception as exc:   # a processor's answer that cannot be encoded must not end the reader
            log.error("answer to %s (code %d, opaque %d) cannot be encoded: %s",
                      self.remote_addr, response.code, response.opaque, exc)
            frame = encode_command_buffers(RemotingCommand(
                code=SYSTEM_ERROR, opaque=response.opaque, flag=response.flag, ext_fields={},
                remark=f"the broker could not encode its answer: {type(exc).__name__}",
                serialize_type=response.serialize_type))
        self._queue(frame)

    def _owe(self, opaque: int) -> None:
        self._owed[opaque] = self._owed.get(opaque, 0) + 1
        self._owed_count += 1

    def _settle(self, opaque: int) -> None:
        count = self._owed.get(opaque)
        if count is None:
            return
        if count == 1:
            del self._owed[opaque]
        else:
            self._owed[opaque] = count - 1
        self._owed_count -= 1
        if self._owed_count == MAX_OWED_ANSWERS - 1:
            self._drained.set()   # the reader may be waiting for owed answers to go down
            self._drained = trio.Event()

    def send_oneway(self, request: RemotingCommand) -> None:
        request.flag |= 0x2
        if not request.opaque:
            request.opaque = next(_opaque_counter)
        self._queue(encode_command_buffers(request))

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request on this connection and wait for its response."""
        request.opaque = next(_opaque_counter)
        pending = _PendingResponse()
        self._pending[request.opaque] = pending
        try:
            self._queue(encode_command_buffers(request))
            with trio.move_on_after(timeout):
                await pending.event.wait()
            if pending.response is None:
                if self.closed:
                    raise ChannelClosedError(f"connection to {self.remote_addr} closed")
                raise RemotingTimeoutError(
                    f"no response from {self.remote_addr} within {timeout:.1f}s (code {request.code})")
            return pending.response
        finally:
            self._pending.pop(request.opaque, None)

    def _queue(self, frame: list[Buffer]) -> None:
        if self.closed:
            return
        self._outbound.extend(frame)
        for buffer in frame:
            self._outbound_bytes += len(buffer)
        if self._outbound_bytes > OUTBOUND_LIMIT:
            log.warning("closing connection from %s: it does not read its answers (%d MiB queued)",
                        self.remote_addr, self._outbound_bytes >> 20)
            self.close()
            return
        if not self._reading_batch:   # the reader writes a receive's answers together, after it
            self._write_now()

    def _write_now(self) -> None:
        """Send what is queued (at most one write batch) from the caller's step, without waking
        the writer task: a plain socket with room takes it at once. What it does not take -- all
        of it on TLS, or while the writer is mid-send -- is left to the writer."""
        if self._outbound and not self._writing:
            buffers = self._take_batch()
            try:
                sent = self.peer.try_send(buffers)
            except OSError as exc:
                log.debug("write to %s failed: %s", self.remote_addr, exc)
                self.close()
                return
            rest = consume_sent(buffers, sent or 0)
            del buffers   # release the mmap slices that went out
            if rest:
                self._outbound[:0] = rest
                self._outbound_bytes += sum(len(b) for b in rest)
            if sent and self._drain_waiters and not self._throttled():
                self._drained.set()   # as the writer does after a batch
                self._drained = trio.Event()
        if self._outbound:
            self._wake_writer.set()

    def _throttled(self) -> bool:
        return self._outbound_bytes > OUTBOUND_HIGH_WATER or self._owed_count >= MAX_OWED_ANSWERS

    async def wait_writable(self) -> None:
        """Until the peer has drained its answers below the high-water marks (or is gone)."""
        while self._throttled() and not self.closed:
            self._drain_waiters += 1
            try:
                await self._drained.wait()
            finally:
                self._drain_waiters -= 1

    # --- lifecycle ------------------------------------------------------------------------

    def on_close(self, callback: Callable[[Channel], None]) -> None:
        self._close_callbacks.append(callback)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        # Queued pull answers are memoryviews of mapped store files: while one is referenced its
        # mmap cannot be closed, so the file could never be deleted.  Nobody will send them now.
        self._outbound = []
        self._outbound_bytes = 0
        self._wake_writer.set()
        self._drained.set()
        self._closed_event.set()
        for pending in self._pending.values():
            pending.event.set()
        for callback in self._close_callbacks:
            try:
                callback(self)
            except Exception:  # a role's cleanup must not keep the others from running
                log.exception("close callback failed for %s", self.remote_addr)

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    async def run(self, dispatcher: Dispatcher | None) -> None:
        """Read and write until the peer goes away, sends malformed bytes or misses a deadline.

        Whatever fails inside this connection's tasks ends this connection only."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._writer)
                await self._reader(dispatcher)
                nursery.cancel_scope.cancel()
        except Exception as exc:   # includes groups of several failures of this connection's tasks
            log.error("closing connection from %s after an internal error: %s", self.remote_addr,
                      _describe(exc), exc_info=exc)
        finally:
            self._nursery = None
            self.close()
            with trio.CancelScope(shield=True):
                with trio.move_on_after(1):
                    await trio.aclose_forcefully(self.peer)

    async def _writer(self) -> None:
        while not self.closed:
            await self._wake_writer.wait()
            self._wake_writer = trio.Event()
            if not self._outbound:
                continue
            buffers = self._take_batch()
            if self._outbound:
                self._wake_writer.set()   # more than one batch was queued
            batch_bytes = sum(len(b) for b in buffers)
            with trio.move_on_after(self.write_timeout or math.inf) as write_scope:
                self._writing = True
                try:
                    await self.peer.send_buffers(buffers)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    log.debug("write to %s failed: %s", self.remote_addr, exc)
                    self.close()
                    return
                finally:
                    self._writing = False
            del buffers   # release the mmap slices before the next wait
            if write_scope.cancelled_caught:
                log.warning("closing connection from %s: it does not read its answers (%d bytes not written "
                            "within %g s)", self.remote_addr, batch_bytes, self.write_timeout)
                self.close()
                return
            self._drained.set()
            self._drained = trio.Event()

    def _take_batch(self) -> list[Buffer]:
        """The next buffers to write: about WRITE_BATCH_BYTES, cut between buffers."""
        outbound = self._outbound
        size = count = 0
        while count < len(outbound) and size < WRITE_BATCH_BYTES:
            size += len(outbound[count])
            count += 1
        self._outbound = outbound[count:]
        self._outbound_bytes -= size
        return outbound[:count]

    def _deadline(self, decoder: FrameDecoder, last_frame_at: float, partial_since: float) -> tuple[float, str]:
        """When the reader gives up on the peer, and the log line's reason."""
        deadline, reason = math.inf, ""
        if self.idle_timeout:      # None or 0: no limit (0 disables Netty's IdleStateHandler too)
            deadline, reason = last_frame_at + self.idle_timeout, f"no complete frame for {self.idle_timeout:g} s"
        if decoder.buffered and self.frame_timeout and partial_since + self.frame_timeout < deadline:
            deadline = partial_since + self.frame_timeout
            reason = f"partial frame ({decoder.buffered} bytes) not completed within {self.frame_timeout:g} s"
        return deadline, reason

    async def _reader(self, dispatcher: Dispatcher | None) -> None:
        decoder = FrameDecoder(max_frame_bytes=self.max_frame_bytes)
        times = _ReadTimes(trio.current_time())
        while not self.closed:
            deadline, reason = self._deadline(decoder, times.last_frame_at, times.partial_since)
            if trio.current_time() >= deadline:
                log.warning("closing connection from %s: %s", self.remote_addr, reason)
                return
            # One cancel scope per stretch of reads, not one per read: a scope costs ~10 µs of
            # trio's deadline bookkeeping, as much as serving a small request. The stretch makes
            # the deadline earlier when a read does (a frame started); a later deadline is not
            # applied at once: the scope fires early, and this loop finds the time left.
            outcome = None   # the scope fired: the loop checks the deadline again
            with trio.move_on_at(deadline) as scope:
                outcome = await self._read_stretch(decoder, dispatcher, times, scope)
            if outcome is _Stretch.THROTTLED:
                await self.wait_writable()
                # Time spent waiting for the peer to drain its answers is not held against its
                # frame or idle deadline: we were not reading.
                times.last_frame_at = times.partial_since = trio.current_time()
            elif outcome is _Stretch.END:
                return

    async def _read_stretch(self, decoder: FrameDecoder, dispatcher: Dispatcher | None, times: _ReadTimes,
                            scope: trio.CancelScope) -> _Stretch:
        """Read and handle frames until the peer is gone or broke the protocol (END) or must be
        throttled (THROTTLED); the caller's ``scope`` ends it at the deadline."""
        while not self.closed:
            try:
                data = await self.peer.receive_some(RECEIVE_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                log.debug("read from %s failed: %s", self.remote_addr, exc)
                return _Stretch.END
            if not data:
                if decoder.buffered:
                    log.warning("closing connection from %s: truncated frame (%d bytes left at EOF)",
                                self.remote_addr, decoder.buffered)
                return _Stretch.END
            now = trio.current_time()
            if not decoder.buffered:
                times.partial_since = now
            decoder.receive_data(data)
            self._reading_batch = _batch_work.open = True
            try:
                try:
                    for cmd in decoder.frames():
                        times.last_frame_at = times.partial_since = now   # what is left over started arriving now
                        self._handle(cmd, dispatcher)
                except ProtocolError as exc:
                    log.warning("closing connection from %s: %s", self.remote_addr, exc)
                    return _Stretch.END
                finally:
                    self._reading_batch = _batch_work.open = False
                self._write_now()
            finally:   # however the batch ended: other peers' held pulls are among this work
                _batch_work.run()
            if self._throttled():
                return _Stretch.THROTTLED
            if decoder.buffered and self.frame_timeout:
                # a frame started: its deadline may come before the scope's
                deadline = times.partial_since + self.frame_timeout
                if deadline < scope.deadline:
                    scope.deadline = deadline
        return _Stretch.END

    def _handle(self, cmd: RemotingCommand, dispatcher: Dispatcher | None) -> None:
        if cmd.invalid is not None:
            self._handle_invalid(cmd)
            return
        if cmd.is_response:
            pending = self._pending.get(cmd.opaque)
            if pending is None:
                log.debug("response with unknown opaque %d from %s dropped", cmd.opaque, self.remote_addr)
                return
            pending.response = cmd
            pending.event.set()
            return
        self.peer_serialize_type = cmd.serialize_type
        if dispatcher is None:
            return
        response = dispatcher.dispatch(self, cmd)
        if response is None:
            if not cmd.is_oneway:
                self._owe(cmd.opaque)   # answered later through send_response (a held pull)
            return
        if isinstance(response, RemotingCommand):
            if not cmd.is_oneway:
                self._send_response(response)
            return
        assert self._nursery is not None   # requests are only dispatched from run()
        self._owe(cmd.opaque)
        self._nursery.start_soon(self._answer_when_ready, cmd, response)

    async def _answer_when_ready(self, request: RemotingCommand, deferred: Deferred) -> None:
        try:
            response = await resolve(request, deferred, self.remote_addr)
        finally:
            self._settle(request.opaque)
        if response is not None and not request.is_oneway:
            self._send_response(response)

    def _handle_invalid(self, cmd: RemotingCommand) -> None:
        """A well-formed frame whose text cannot be served: answered, never dispatched."""
        log.warning("refused a frame from %s (code %d, opaque %d): %s", self.remote_addr, cmd.code, cmd.opaque,
                    cmd.invalid)
        answer = cmd.response(SYSTEM_ERROR, f"invalid request: {cmd.invalid}")
        if cmd.is_response:
            pending = self._pending.get(cmd.opaque)
            if pending is not None:
                pending.response = answer
                pending.event.set()
        elif not cmd.is_oneway:
            self._send_response(answer)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"

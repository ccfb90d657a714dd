"""The FilterServer's side of a filter worker process: start it in the jail, load its class, ask
it about one message at a time under a wall-clock deadline, and replace it when it fails.

A worker that does not answer in time (a filter that loops), that dies (SIGXCPU, a crash, an
allocation past its address space), or that breaks the protocol is killed; the message it was
given is rejected and logged, and the next message starts a fresh worker. A worker that has used
half its CPU-time limit is retired before the limit can kill it in the middle of an innocent
message. Nothing here lets a filter's failure reach the FilterServer or the broker.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import trio

from pyrmq.filtersrv.worker_protocol import (
    MAX_REPLY_BYTES,
    VERDICT_ERROR,
    WorkerProtocolError,
    WorkerReply,
    decode_reply,
    encode_load,
    encode_match,
    frame_length,
)

log = logging.getLogger(__name__)

# A worker must answer its LOAD within this: a JVM starts and loads a class in about a second.
LOAD_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class WorkerLimits:
    """Limits of every filter worker (FilterServer settings, fixed at start-up)."""

    match_timeout_s: float = 1.0     # wall clock for one message
    cpu_seconds: int = 30            # RLIMIT_CPU of one worker process
    memory_mb: int = 256             # Python: RLIMIT_AS; Java: the heap (-Xmx)
    jvm_address_space_mb: int = 1024  # the JVM reserves code cache and metaspace beyond its heap


class FilterLoadError(Exception):
    """The class could not be loaded by a worker; the message says why."""


def jail_argv(limits_args: list[str], cwd: str) -> list[str]:
    """The fixed start of every worker's command line: this interpreter and the jail module."""
    return [sys.executable, "-I", "-m", "pyrmq.filtersrv.jail", *limits_args, "--cwd", cwd]


def worker_env() -> dict[str, str]:
    # Nothing of the FilterServer's environment (credentials, paths) reaches filter code.
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


class _Reader:
    """Exact reads from a worker's stdout."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def read_exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = await self.stream.receive_some(max(n - len(self.buffer), 4096))
            if not chunk:
                raise EOFError("worker closed its output")
            self.buffer += chunk
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data


class FilterWorker:
    """One filter class in one worker process, started on demand."""

    def __init__(self, name: str, argv: list[str], class_name: str, code: bytes, limits: WorkerLimits) -> None:
        self.name = name              # for log lines: group/topic/class
        self.argv = argv
        self.class_name = class_name
        self.code = code
        self.limits = limits
        self._process: trio.Process | None = None
        self._reader: _Reader | None = None
        self._lock = trio.Lock()
        self.starts = 0
        self.kills = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def _start(self) -> None:
        self.starts += 1
        process = await trio.lowlevel.open_process(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                   env=worker_env(), start_new_session=True)
        self._process = process
        assert process.stdout is not None
        self._reader = _Reader(process.stdout)
        with trio.move_on_after(LOAD_TIMEOUT_S) as scope:
            reply = await self._exchange(encode_load(self.class_name, self.code))
        if scope.cancelled_caught:
            self.kill()
            raise FilterLoadError(f"the filter worker did not load {self.class_name} within {LOAD_TIMEOUT_S:.0f} s")
        if not reply.accepted:
            self.kill()
            raise FilterLoadError(f"cannot load {self.class_name}: {reply.detail}")

    async def _exchange(self, request: bytes) -> WorkerReply:
        assert self._process is not None and self._process.stdin is not None and self._reader is not None
        await self._process.stdin.send_all(request)
        prefix = await self._reader.read_exactly(4)
        return decode_reply(await self._reader.read_exactly(frame_length(prefix, MAX_REPLY_BYTES)))

    def kill(self) -> None:
        process = self._process
        self._process = None
        self._reader = None
        if process is not None and process.returncode is None:
            self.kills += 1
            try:
                os.killpg(process.pid, 9)   # the JVM's threads and anything a filter forked
            except (ProcessLookupError, PermissionError):
                process.kill()
        if process is not None:
            # reap it without waiting here
            trio.lowlevel.spawn_system_task(_reap, process)

    async def load(self) -> None:
        """Start the worker and load the class now (registration wants to know it loads)."""
        async with self._lock:
            if self._process is None:
                await self._start()

    async def match(self, **message: object) -> WorkerReply:
        """The worker's verdict on one message (see ``match_batch``)."""
        [reply] = await self.match_batch([message])
        return reply

    async def match_batch(self, messages: Sequence[dict[str, object]]) -> list[WorkerReply]:
        """The worker's verdicts on ``messages``, in order; a failure of any kind is an error verdict
        for the message it happened on, and only that one.

        The messages are sent together and answered one at a time, each answer under the
        deadline, so the message a filter loops on is the one whose answer is missing: it is
        rejected, the worker killed, and the rest go to a fresh worker. A worker found dead while
        being asked (it exited after its previous answer, as the Java worker does after an
        OutOfMemoryError) is replaced and asked once more, so a death is never charged to the
        next message."""
        frames = [encode_match(**message) for message in messages]
        replies: list[WorkerReply] = []
        retried_at = -1
        async with self._lock:
            while len(replies) < len(frames):
                try:
                    if self._process is None:
                        await self._start()
                except FilterLoadError as exc:
                    return replies + [WorkerReply(VERDICT_ERROR, 0, str(exc))] * (len(frames) - len(replies))
                except OSError as exc:
                    return replies + [WorkerReply(VERDICT_ERROR, 0, f"cannot start a worker: {exc}")] * (
                        len(frames) - len(replies))
                try:
                    failure = await self._pipeline(frames[len(replies):], replies)
                except trio.Cancelled:   # the pull went away mid-exchange: the worker's state is unknown
                    self.kill()
                    raise
                if failure is None:
                    continue
                returncode = self._process.returncode if self._process is not None else None
                self.kill()
                if retried_at != len(replies) and not isinstance(failure, WorkerProtocolError):
                    retried_at = len(replies)
                    continue
                replies.append(WorkerReply(VERDICT_ERROR, 0, f"worker failed ({failure}; exit status {returncode})"))
        return replies

    async def _pipeline(self, frames: list[bytes], replies: list[WorkerReply]) -> Exception | None:
        """Send ``frames`` and append the replies as they come; stops early (the worker killed or
        retired) or returns the failure that ended the worker."""
        process, reader = self._process, self._reader
        assert process is not None and process.stdin is not None and reader is not None
        stdin = process.stdin

        async def send() -> None:
            try:
                await stdin.send_all(b"".join(frames))
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                pass   # the worker is gone: the reader sees it

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            try:
                for _ in frames:
                    with trio.move_on_after(self.limits.match_timeout_s) as scope:
                        prefix = await reader.read_exactly(4)
                        reply = decode_reply(await reader.read_exactly(frame_length(prefix, MAX_REPLY_BYTES)))
                    if scope.cancelled_caught:
                        self.kill()
                        replies.append(WorkerReply(VERDICT_ERROR, 0, f"no answer within "
                                                   f"{self.limits.match_timeout_s:g} s; worker killed"))
                        break
                    replies.append(reply)
                    if reply.cpu_ms * 2 >= self.limits.cpu_seconds * 1000:
                        log.info("filter worker %s used %d ms CPU: retired", self.name, reply.cpu_ms)
                        self.kill()
                        break
            except (EOFError, OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                    WorkerProtocolError) as exc:
                nursery.cancel_scope.cancel()
                return exc
            nursery.cancel_scope.cancel()
        return None

    def close(self) -> None:
        self.kill()


async def _reap(process: trio.Process) -> None:
    try:
        with trio.move_on_after(5):
            await process.wait()
    finally:
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                await trio.aclose_forcefully(stream)

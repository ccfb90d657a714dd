"""Config JSON files written off the event loop, many changes to one write.

A role's tables (topics, subscription groups, offsets, the NameServer's KV config) change on the
event loop; writing them synchronously there (temp file, fsync, rename) stalls every connection
for the length of an fsync, once per change.  Callers instead ``mark_dirty(path, encode)``; one
background task encodes the latest state on the loop (the only thread that mutates the tables)
and hands the text to a worker thread for ``write_atomically``.  Changes arriving while a write
is in flight, or within ``coalesce_s`` of the last one, share the next write.

Durability: ``when_written(callback)`` and ``wait_written()`` report when everything marked so far
is on disk (an UPDATE_AND_CREATE_TOPIC is answered then -- ``answer_when_written`` -- as Apache
answers after its persist, and so is a send that auto-created its topic); somebody waiting cuts
the coalescing pause short, so waiters are served by back-to-back writes (a group commit), while
changes nobody waits for still gather for ``coalesce_s``;
when the task is cancelled (graceful stop) it writes whatever is still pending.  A crash at any
moment leaves each file with its old or its new content, never a torn one (``write_atomically``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable

import trio

from pyrmq.codec.codes import ResponseCode
from pyrmq.store.config_file import write_atomically

log = logging.getLogger(__name__)

# At most about two writes a second per burst: 1,500 topics auto-created in a few seconds become a
# handful of topics.json writes, while a single change is still written at once.
COALESCE_S = 0.5
# When an answer waits for the next write, changes arriving within this pause still share it
# (concurrent senders auto-creating topics): a group commit, short next to an fsync's latency.
GATHER_S = 0.01
# After a failed write (disk full, permissions) try again this much later.
RETRY_S = 1.0

Encode = Callable[[], str]
Write = Callable[[Path, str], None]


class ConfigPersister:
    """Coalescing writer of config files; ``run`` is the background task (one per role)."""

    def __init__(self, *, coalesce_s: float = COALESCE_S, write: Write = write_atomically) -> None:
        self.coalesce_s = coalesce_s
        self._write = write
        self._pending: dict[Path, Encode] = {}
        self._wake = trio.Event()
        self._waited_for = trio.Event()   # set by when_written: end the coalescing pause
        # generations: every mark up to ``_written`` is on disk
        self._marked = 0
        self._written = 0
        self._waiters: list[tuple[int, Callable[[bool], None]]] = []
        self.writes = 0
        self.failures = 0
        self._failing: dict[Path, int] = {}   # files whose last write failed: consecutive failures

    def mark_dirty(self, path: str | os.PathLike, encode: Encode) -> None:
        """Schedule ``path`` to be rewritten with ``encode()`` (called later, on the loop)."""
        self._pending[Path(path)] = encode
        self._marked += 1
        self._wake.set()

    def when_written(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(True)`` once everything marked until now is on disk (False on failure)."""
        if self._written >= self._marked:
            callback(True)
        else:
            self._waiters.append((self._marked, callback))
            self._waited_for.set()

    async def wait_written(self) -> bool:
        """Wait until everything marked until now is written; False if that write failed."""
        results: list[bool] = []
        done = trio.Event()

        def on_written(ok: bool) -> None:
            results.append(ok)
            done.set()

        self.when_written(on_written)
        await done.wait()
        return results[0]

    async def answer_when_written(self, request: Any, what: str) -> Any:
        """The answer to a config change once it is on disk, as Apache answers after its persist:
        SUCCESS, or SYSTEM_ERROR naming ``what`` if the write failed.  A processor returns this
        awaitable (a deferred answer); ``request`` is a RemotingCommand, duck-typed because this
        layer does not import the network.
        """
        if await self.wait_written():
            return request.response(ResponseCode.SUCCESS)
        return request.response(ResponseCode.SYSTEM_ERROR, f"persisting {what} failed, see the server log")

    def statistics(self) -> dict[str, int]:
        return {"pending": len(self._pending), "writes": self.writes, "failures": self.failures}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                if not await self._write_pending():
                    await trio.sleep(RETRY_S)
                    self._wake.set()
                    continue
                # later changes gather for a while and share the next write -- unless an answer
                # waits for them: then the next write starts at once with whatever is marked
                if not self._waiters:
                    self._waited_for = trio.Event()
                    with trio.move_on_after(self.coalesce_s):
                        await self._waited_for.wait()
                await trio.sleep(min(GATHER_S, self.coalesce_s))
        finally:
            with trio.CancelScope(shield=True):
                await self._write_pending()

    async def _write_pending(self) -> bool:
        """Encode every pending file here, write them in a worker thread; False if one failed."""
        if not self._pending:
            return True
        target = self._marked
        batch, self._pending = self._pending, {}
        texts = []
        encode_failed = []
        for path, encode in batch.items():
            try:
                texts.append((path, encode()))
            except Exception as exc:   # a table that cannot be encoded must not stop the other files
                self._note_failure(path, exc)
                encode_failed.append(path)
        # shielded: a cancellation (graceful stop) must not drop the batch taken from _pending
        with trio.CancelScope(shield=True):
            failed = await trio.to_thread.run_sync(self._write_all, texts)
        self.writes += len(texts) - len(failed)
        failed += encode_failed
        for path in failed:
            self._pending.setdefault(path, batch[path])    # a newer mark wins
        self.failures += len(failed)
        if not failed:
            self._written = max(self._written, target)
        done = [cb for gen, cb in self._waiters if gen <= target]
        self._waiters = [(gen, cb) for gen, cb in self._waiters if gen > target]
        for callback in done:
            callback(not failed)
        return not failed

    def _write_all(self, texts: list[tuple[Path, str]]) -> list[Path]:
        failed = []
        for path, text in texts:
            try:
                self._write(path, text)
            except Exception as exc:   # disk full, EIO, text that cannot be encoded: retried later
                self._note_failure(path, exc)
                failed.append(path)
            else:
                if self._failing.pop(path, None) is not None:
                    log.warning("writing %s works again", path)
        return failed

    def _note_failure(self, path: Path, exc: Exception) -> None:
        """Log a file's failure once; it is retried every RETRY_S without a line each time."""
        if path not in self._failing:
            log.error("writing %s failed, will retry every %g s: %s: %s", path, RETRY_S, type(exc).__name__, exc)
        self._failing[path] = self._failing.get(path, 0) + 1


class PersistedConfig:
    """A config file kept by a role: ``encode`` gives its content; changes call ``persist_later``.

    Without a persister attached (tools, unit tests) ``persist_later`` writes at once.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.persister: ConfigPersister | None = None

    def encode(self, pretty: bool = False) -> str:
        raise NotImplementedError

    def _file_text(self) -> str:
        return self.encode(pretty=True)

    def persist(self) -> None:
        """Write now, in the calling thread (load, shutdown)."""
        write_atomically(self.path, self._file_text())

    def persist_later(self) -> None:
        if self.persister is None:
            self.persist()
        else:
            self.persister.mark_dirty(self.path, self._file_text)

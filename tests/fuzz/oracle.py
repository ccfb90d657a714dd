"""The property every fuzz target is held to, whatever drives it (Hypothesis, atheris, replay).

A target has two halves.  ``decode(data)`` runs the project's decoder over arbitrary bytes: it
may refuse them, but only with the project's own error family (``ProtocolError`` and its
subclasses for the codec, ``StoreError`` for the store).  ``reencode(value)`` then does with what
was accepted what the broker would do next -- encode it into a response, a config file, a stored
record -- and checks what came back; it may not raise at all, since what a decoder accepts a
peer will see echoed.  Both halves together must stay within a memory bound proportional to the
input (traced by ``tracemalloc``: Python allocations, not the pages of a mapped file).

:func:`check` raises :class:`Violation` when the property fails; everything else is silent.
"""

from __future__ import annotations

import hashlib
import random
import traceback
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pyrmq.codec.errors import ProtocolError
from pyrmq.store.model import StoreError

# What a decoder may raise: the connection is closed / the store refuses to start, with a message.
ALLOWED_ERRORS: tuple[type[BaseException], ...] = (ProtocolError, StoreError)

# Peak traced bytes per input: 64 bytes per input byte covers Python's object overhead for the
# densest JSON ("[[],[],..." is ~20 bytes of list per input byte), plus 1 MiB for what does not
# grow with the input (a store's small index and queue files, interpreter caches).
MEMORY_PER_INPUT_BYTE = 64
MEMORY_SLACK_BYTES = 1024 * 1024


def memory_bound(size: int, slack: int = MEMORY_SLACK_BYTES) -> int:
    return MEMORY_PER_INPUT_BYTE * size + slack


class Target(Protocol):
    name: str
    max_len: int   # inputs longer than this are cut (libFuzzer's -max_len)

    def decode(self, data: bytes) -> Any: ...

    def reencode(self, value: Any) -> None: ...

    def seeds(self) -> list[bytes]: ...

    def mutate(self, data: bytes, rng: random.Random, others: Sequence[bytes]) -> bytes:
        """A structure-aware mutation of ``data`` (``others``: inputs to splice from)."""


@dataclass
class Violation(Exception):
    """The property failed for one input."""

    target: str
    kind: str          # "escaped" (a foreign exception), "reencode" (accepted but not re-encodable), "memory"
    detail: str
    data: bytes
    cause: BaseException | None = None

    def __str__(self) -> str:
        return f"{self.target}: {self.kind}: {self.detail} (input of {len(self.data)} bytes, sha1 {self.digest()})"

    def digest(self) -> str:
        return hashlib.sha1(self.data).hexdigest()[:12]

    def signature(self) -> str:
        """What makes two findings the same bug: the kind, the exception type and the innermost
        project frame it came from."""
        if self.cause is None:
            return f"{self.target}:{self.kind}"
        frames = [f for f in traceback.extract_tb(self.cause.__traceback__) if not f.filename.endswith("oracle.py")]
        inner = next((f for f in reversed(frames) if "/pyrmq/" in f.filename), frames[-1] if frames else None)
        where = f"{inner.filename.rsplit('/', 1)[-1]}:{inner.name}:{inner.lineno}" if inner else "?"
        return f"{self.target}:{self.kind}:{type(self.cause).__name__}:{where}"


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 300 else text[:300] + "..."


def check(target: Target, data: bytes) -> None:
    """Run ``target`` over ``data``; raise :class:`Violation` if the property fails."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(1)
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        _run(target, data)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if started:
            tracemalloc.stop()
    # a target working on fixed-size structures (store files) says how much it needs whatever the input
    bound = memory_bound(len(data), getattr(target, "memory_slack", MEMORY_SLACK_BYTES))
    if peak > bound:
        raise Violation(target.name, "memory", f"peak {peak} bytes > bound {bound}", data)


def _run(target: Target, data: bytes) -> None:
    try:
        value = target.decode(data)
    except ALLOWED_ERRORS:
        return
    except Exception as exc:   # noqa: B902 -- any other type is the finding
        raise Violation(target.name, "escaped", _describe(exc), data, exc) from exc
    try:
        target.reencode(value)
    except Exception as exc:
        raise Violation(target.name, "reencode", _describe(exc), data, exc) from exc


def expect(condition: bool, what: Callable[[], str] | str) -> None:
    """An assertion of a target's ``reencode`` that survives ``python -O``."""
    if not condition:
        raise AssertionError(what() if callable(what) else what)


def expect_equal(actual: Any, expected: Any, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: {actual!r:.300} != {expected!r:.300}")

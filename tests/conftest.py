"""Suite-wide: pytest-timeout's limit (pyproject.toml) for trio tests too.

Its SIGALRM would raise wherever the main thread is, inside trio's run loop as often as not, and
leave trio's state broken for the next test. A trio test instead runs under a watchdog in its own
trio.run: when the limit passes, the test and its fixtures are cancelled and the test fails with
pytest-timeout's message.
"""

import functools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from hypothesis import settings

# Hypothesis fails an example that runs longer than 200 ms by default: a timed assertion, which a
# busy 2-core CI machine trips now and then (a GC pause, a first import). pytest-timeout bounds
# the tests instead.
settings.register_profile("pyrmq", deadline=None)
settings.load_profile("pyrmq")

_LIMIT = pytest.StashKey[float]()
_WATCHED = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)   # after pytest-trio's trio_mode has marked the async tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # pytest-trio ignores run= for Hypothesis tests; those keep pytest-timeout's own timer.
        if item.get_closest_marker("trio") is None or hasattr(getattr(item, "obj", None), "hypothesis"):
            continue
        item.stash[_WATCHED] = True
        item.add_marker(pytest.mark.trio(run=functools.partial(_run_with_limit, item)), append=False)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    if not item.stash.get(_WATCHED, False):
        return None   # pytest-timeout's own timer
    item.stash[_LIMIT] = settings.timeout
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    return True if item.stash.get(_WATCHED, False) else None


def _run_with_limit(item: pytest.Item, afn: Callable[[], Awaitable[Any]], **run_kwargs: Any) -> Any:
    limit = item.stash.get(_LIMIT, None)
    if limit is None:
        return trio.run(afn, **run_kwargs)

    async def limited() -> Any:
        done = threading.Event()
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watchdog, limit, done, scope)
                try:
                    return await afn()
                finally:
                    done.set()
        pytest.fail(f"Timeout (>{limit}s) from pytest-timeout (trio watchdog in tests/conftest.py)", pytrace=False)

    return trio.run(limited, **run_kwargs)


async def _watchdog(limit: float, done: threading.Event, scope: trio.CancelScope) -> None:
    # Real seconds, in a worker thread: under autojump_clock every trio deadline is virtual.
    if not await trio.to_thread.run_sync(done.wait, limit, abandon_on_cancel=True):
        scope.cancel()

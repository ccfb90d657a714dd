"""ConfigPersister: bursts of changes become few writes, done in a worker thread; waiters learn
when their change is on disk; a cancelled persister writes what is pending; a killed writer
leaves the old or the new file, never a torn one."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import trio

from pyrmq.codec import fastjson
from pyrmq.common.persister import ConfigPersister, PersistedConfig
from pyrmq.store.config_file import write_atomically


class Recorder:
    """A write function that records (path, text, thread) and can be told to fail."""

    def __init__(self) -> None:
        self.calls: list[tuple[Path, str, int]] = []
        self.fail = False

    def __call__(self, path: Path, text: str) -> None:
        if self.fail:
            raise OSError(28, "No space left on device")
        self.calls.append((path, text, threading.get_ident()))


async def test_burst_is_one_write_in_a_worker_thread(nursery, autojump_clock):
    write = Recorder()
    persister = ConfigPersister(write=write)
    await nursery.start(persister.run)
    state = {"n": 0}
    for i in range(100):
        state["n"] = i
        persister.mark_dirty("/cfg/topics.json", lambda: str(state["n"]))
    await persister.wait_written()
    assert [(p, t) for p, t, _ in write.calls] == [(Path("/cfg/topics.json"), "99")]
    assert write.calls[0][2] != threading.get_ident()
    # changes during the coalescing pause share the next write
    for i in range(100, 200):
        state["n"] = i
        persister.mark_dirty("/cfg/topics.json", lambda: str(state["n"]))
    await persister.wait_written()
    assert [t for _, t, _ in write.calls] == ["99", "199"]
    assert persister.statistics() == {"pending": 0, "writes": 2, "failures": 0}


async def test_when_written_reports_after_the_write_and_failures(nursery, autojump_clock):
    write = Recorder()
    persister = ConfigPersister(write=write)
    answers: list[bool] = []
    persister.when_written(answers.append)      # nothing pending: at once
    assert answers == [True]
    await nursery.start(persister.run)
    write.fail = True
    persister.mark_dirty("/cfg/kvConfig.json", lambda: "{}")
    answered = trio.Event()

    def on_answer(ok: bool) -> None:
        answers.append(ok)
        answered.set()

    persister.when_written(on_answer)
    assert answers == [True]
    await answered.wait()
    assert answers == [True, False] and persister.failures == 1
    write.fail = False
    await persister.wait_written()             # retried until it succeeds
    assert [t for _, t, _ in write.calls] == ["{}"]


async def test_cancelled_persister_writes_what_is_pending(autojump_clock):
    write = Recorder()
    persister = ConfigPersister(write=write, coalesce_s=60)
    async with trio.open_nursery() as nursery:
        await nursery.start(persister.run)
        persister.mark_dirty("/cfg/a.json", lambda: "1")
        await persister.wait_written()
        persister.mark_dirty("/cfg/a.json", lambda: "2")    # waits out the coalescing pause
        persister.mark_dirty("/cfg/b.json", lambda: "3")
        await trio.sleep(1)
        assert [t for _, t, _ in write.calls] == ["1"]
        nursery.cancel_scope.cancel()
    assert sorted(t for _, t, _ in write.calls) == ["1", "2", "3"]


def test_without_a_persister_changes_are_written_at_once(tmp_path):
    class Config(PersistedConfig):
        def encode(self, pretty: bool = False) -> str:
            return '{"a":1}'

    config = Config(tmp_path / "x.json")
    config.persist_later()
    assert (tmp_path / "x.json").read_text() == '{"a":1}'


_KILLED_WRITER = """
import sys
from pyrmq.store.config_file import write_atomically
path = sys.argv[1]
for i in range(1, 1_000_000):
    write_atomically(path, '{"version":%d,"pad":"%s"}' % (i, "x" * 200_000))
    print(i, flush=True)
"""


@pytest.mark.parametrize("kill_after", [1, 3, 7])
def test_killed_writer_leaves_a_whole_file(tmp_path, kill_after):
    path = tmp_path / "topics.json"
    write_atomically(path, '{"version":0,"pad":""}')
    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(kill_after):
            last = int(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    data = fastjson.loads(path.read_text())
    assert data["version"] >= last
    assert data["pad"] == ("x" * 200_000 if data["version"] else "")


async def test_cancel_right_after_a_change_still_writes_it():
    """The persister wakes for the change and is cancelled before its write starts."""
    write = Recorder()
    persister = ConfigPersister(write=write)
    async with trio.open_nursery() as nursery:
        await nursery.start(persister.run)
        persister.mark_dirty("/cfg/a.json", lambda: "1")
        nursery.cancel_scope.cancel()
    assert [t for _, t, _ in write.calls] == ["1"]


async def test_answer_when_written_names_the_file_that_failed(nursery, autojump_clock):
    class Request:
        def response(self, code: int, remark: str | None = None) -> tuple[int, str | None]:
            return code, remark

    write = Recorder()
    persister = ConfigPersister(write=write)
    await nursery.start(persister.run)
    persister.mark_dirty("/cfg/topics.json", lambda: "{}")
    assert await persister.answer_when_written(Request(), "topics.json") == (0, None)
    write.fail = True
    persister.mark_dirty("/cfg/topics.json", lambda: "{}")
    assert await persister.answer_when_written(Request(), "topics.json") == (
        1, "persisting topics.json failed, see the server log")


async def test_a_waiter_ends_the_coalescing_pause(nursery, autojump_clock):
    """Changes nobody waits for gather for coalesce_s; an answer waiting for its change (a send
    that created its topic) gets the next write at once, with what arrived meanwhile."""
    write = Recorder()
    persister = ConfigPersister(write=write, coalesce_s=60)
    await nursery.start(persister.run)
    persister.mark_dirty("/cfg/topics.json", lambda: "1")
    await persister.wait_written()
    persister.mark_dirty("/cfg/topics.json", lambda: "2")
    await trio.sleep(1)
    assert [t for _, t, _ in write.calls] == ["1"]          # no waiter: still gathering
    start = trio.current_time()
    persister.mark_dirty("/cfg/topics.json", lambda: "3")
    await persister.wait_written()
    assert trio.current_time() - start < 1
    assert [t for _, t, _ in write.calls] == ["1", "3"]

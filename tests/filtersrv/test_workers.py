"""Filter worker processes: a Python filter class in the jail, under the parent's deadline."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from pyrmq.codec.message_props import properties_to_string
from pyrmq.filtersrv.workers import FilterWorker, WorkerLimits, jail_argv

FILTER = b'''
import os, socket

class Probe:
    def match(self, message):
        seq = int(message.properties["seq"])
        action = message.properties.get("action", "")
        if action == "loop":
            while True:
                pass
        if action == "alloc":
            hoard = []
            while True:
                hoard.append(bytearray(16 * 1024 * 1024))
        if action == "raise":
            raise RuntimeError("filter bug")
        if action == "connect":
            socket.create_connection(("127.0.0.1", 9), timeout=1)
        if action == "write":
            with open("/tmp/pyrmq-filter-escape-" + str(seq), "w") as f:
                f.write("x")
        if action == "write-cwd":
            with open("escape", "w") as f:
                f.write("x")
        return seq % 2 == 0 and message.topic == "T" and message.body == b"body-" + str(seq).encode()
'''


def message(seq: int, action: str = "") -> dict[str, object]:
    props = {"seq": str(seq), "TAGS": "A"}
    if action:
        props["action"] = action
    return dict(consumer_group="G", topic="T", queue_id=0, queue_offset=seq, commit_log_offset=seq * 100,
                sys_flag=0, born_timestamp=1, store_timestamp=2, reconsume_times=0, flag=0,
                properties=properties_to_string(props), body=f"body-{seq}".encode())


@pytest.fixture
def cwd():
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cwd"
        path.mkdir(mode=0o555)
        Path(d).chmod(0o755)
        yield str(path)


def python_worker(cwd: str, source: bytes = FILTER, **limits: object) -> FilterWorker:
    settings = WorkerLimits(**{"match_timeout_s": 1.0, "cpu_seconds": 20, "memory_mb": 256, **limits})
    argv = [*jail_argv(["--cpu-seconds", str(settings.cpu_seconds), "--address-space-mb", str(settings.memory_mb)],
                       cwd), "python"]
    return FilterWorker("test", argv, "python:Probe", source, settings)


async def test_accepts_and_rejects_by_the_class(cwd):
    worker = python_worker(cwd)
    try:
        verdicts = [(await worker.match(**message(i))).accepted for i in range(6)]
    finally:
        worker.close()
    assert verdicts == [True, False, True, False, True, False]
    assert worker.starts == 1


@pytest.mark.parametrize("action, detail", [
    ("loop", "no answer within"),          # wall clock: killed by the parent
    ("alloc", "MemoryError"),              # address space limit
    ("raise", "RuntimeError: filter bug"),
    ("connect", "Network is unreachable"),  # empty network namespace
    ("write", "Error"),                    # nobody, RLIMIT_FSIZE 0
    ("write-cwd", "Error"),                # the fresh working directory is read-only
])
async def test_a_failing_filter_rejects_only_that_message(cwd, action, detail):
    worker = python_worker(cwd, match_timeout_s=1.0)
    try:
        before = await worker.match(**message(0))
        bad = await worker.match(**message(2, action))
        after = await worker.match(**message(4))
    finally:
        worker.close()
    assert before.accepted and after.accepted
    assert not bad.accepted and detail in bad.detail, bad
    assert not list(Path("/tmp").glob("pyrmq-filter-escape-*"))


async def test_a_class_that_does_not_load_is_reported(cwd):
    worker = python_worker(cwd, source=b"class Other:\n    pass\n")
    try:
        reply = await worker.match(**message(0))
    finally:
        worker.close()
    assert not reply.accepted and "no class Probe" in reply.detail


async def test_a_worker_past_half_its_cpu_limit_is_retired(cwd):
    spin = b"import time\nclass Probe:\n    def match(self, m):\n        t = time.process_time()\n" \
           b"        while time.process_time() - t < 0.7:\n            pass\n        return True\n"
    worker = python_worker(cwd, source=spin, cpu_seconds=1, match_timeout_s=5)
    try:
        replies = [await worker.match(**message(i)) for i in range(3)]
    finally:
        worker.close()
    assert all(r.accepted for r in replies)
    assert worker.starts == 3   # retired after each message: none hit SIGXCPU mid-message


async def test_a_batch_is_answered_message_by_message(cwd):
    worker = python_worker(cwd, match_timeout_s=1.0)
    actions = ["", "loop", "", "alloc", "", "raise", "", "connect", ""]
    try:
        replies = await worker.match_batch([message(2 * i, action) for i, action in enumerate(actions)])
    finally:
        worker.close()
    assert [r.accepted for r in replies] == [action == "" for action in actions]
    assert "no answer within" in replies[1].detail and "MemoryError" in replies[3].detail
    assert worker.starts == 2   # only the loop cost a worker

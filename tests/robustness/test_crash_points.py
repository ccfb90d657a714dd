"""Crash points (``PYRMQ_CRASH_POINT``): a real SYNC_FLUSH broker process is killed with SIGKILL
by itself at a named point while senders run, then restarted on the same store.

After each restart: every message acknowledged SEND_OK is pullable at the queue offset its answer
gave, with its exact body; every queue is contiguous from 0; nothing is stored twice; QUERY_MESSAGE
finds every acknowledged message by its key (the index was rebuilt); every config JSON file and
its ``.bak`` parse; and the next send to each queue lands right after the last message.

Tiny files make every point come up within a second of traffic: 64 KiB commit log files, consume
queue files of 50 units, index files of 120 items.
"""

from __future__ import annotations

import pytest
import trio

from pyrmq.remoting.client import RemotingClient
from tests.robustness.broker_process import (
    BrokerProcess,
    Traffic,
    check_config_files,
    check_store,
    check_writes_continue,
    send_until_dead,
)

pytestmark = pytest.mark.slow

SMALL_FILES = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 50 * 20,
               "maxHashSlotNum": 64, "maxIndexNum": 120, "flushIntervalConsumeQueue": 200}

# point -> the passage that kills: late enough that traffic, files and config writes are under way
CRASHES = {
    "commitlog.appended": "commitlog.appended:300",
    "flush.between_files": "flush.between_files:3",
    # the 1st write is usually the start's, the 2nd and 3rd those of the two topics the first
    # sends create (within a millisecond of each other); the 8th comes after topics created under
    # acknowledged traffic (worker 0 makes one every 25 sends), so acks exist before the crash
    # whatever the answers' timing -- and a slow start, whose config writes do not all fall in
    # one coalescing window, still reaches "ready" first (one CI run crashed while starting at
    # the 5th)
    "config.tmp_written": "config.tmp_written:8",
    "config.renamed": "config.renamed:8",
    "index.item_written": "index.item_written:500",
    "file.created.commitlog": "file.created.commitlog:3",
    "file.created.consumequeue": "file.created.consumequeue:12",
    "file.created.index": "file.created.index:3",
}


@pytest.mark.parametrize("point", sorted(CRASHES))
async def test_crash_point_loses_nothing_acknowledged(tmp_path, point):
    server = BrokerProcess(tmp_path, **SMALL_FILES)
    traffic = Traffic()
    try:
        server.start(crash_point=CRASHES[point])
        async with RemotingClient() as client:
            await server.wait_ready(client)
            await send_until_dead(server, client, traffic)
        code = await server.wait_exit()
        assert code == -9 and server.crashed_at(point), f"exit {code}, not the crash point:\n{server.log_tail()}"
        assert traffic.acks, "nothing was acknowledged before the crash"
        assert not check_config_files(server.store)

        server.start()
        async with RemotingClient() as client:
            with trio.fail_after(60):
                await server.wait_ready(client)
                counts = await check_store(client, server.broker_addr, traffic)
                await check_writes_continue(client, server.broker_addr, traffic)
        assert counts["acked"] > 0
        print(f"{point}: {counts}, {traffic.failures} failed sends")
        assert server.stop() == 0
        assert not check_config_files(server.store)
    finally:
        server.kill()

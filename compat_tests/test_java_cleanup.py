"""Expired commit log files are deleted, consume queue min offsets move, and consumers behind the
new minimum are moved to it (CleanCommitLogService / CleanConsumeQueueService, store.md §10).

Both servers get the same broker.conf: 64 KiB commit log files, 50-unit consume queue files,
``fileReservedTime=0`` (every file is expired at once) and ``deleteWhen`` naming every hour, so
deletion does not depend on the clock or on how full this machine's disk is. Both delete every
``cleanResourceInterval`` (1 s here) every commit log file but the last: Apache from a minute after
start (fixed), pyrmq from ``cleanFilesFirstDelayMs`` after start (its own key, Apache ignores it),
so the pyrmq run need not wait out Apache's minute.

The late consumer's rebalance runs every second (``rocketmq.client.rebalance.waitInterval``,
20 s by default): a pull answered PULL_OFFSET_MOVED makes the client drop the queue, store the
new offset 10 s later and take the queue up again at its next rebalance.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from compat_tests.checks import assert_received_exactly, assert_sent_ok, decode_offset_msg_id
from compat_tests.servers import remoting_call

pytestmark = [pytest.mark.compat, pytest.mark.slow]

COMMIT_LOG_FILE_SIZE = 64 * 1024
CONSUME_QUEUE_FILE_SIZE = 50 * 20
QUEUES = 4
BODY_SIZE = 1000
# ~1.2 KB records, ~53 a file: seven full files and a last one about a quarter full. The room
# left in the last file matters: Apache appends an OFFSET_MOVED_EVENT message for every pull
# answered PULL_OFFSET_MOVED, and a roll to a new file would let it delete one more file.
COUNT = 385
MIN_ROOM_IN_LAST_FILE = 16 * 1024
# Apache starts cleaning a minute after start; then the rounds are 1 s apart.
CLEAN_WAIT_S = 180
# pyrmq's first round, ms after start: a round while the producer still writes deletes no more than
# the later ones, the end state is the same
PYRMQ_FIRST_CLEAN_MS = 5000
REBALANCE_EVERY_1_S = {"rocketmq.client.rebalance.waitInterval": "1000"}

GET_MIN_OFFSET = 31
PULL_MESSAGE = 11
PULL_OFFSET_MOVED = 21
FLAG_SUBSCRIPTION = 0x4


@pytest.fixture(scope="module")
def cleaning_server(module_server_factory):
    return module_server_factory(
        mappedFileSizeCommitLog=str(COMMIT_LOG_FILE_SIZE),
        mappedFileSizeConsumeQueue=str(CONSUME_QUEUE_FILE_SIZE),
        fileReservedTime="0",
        deleteWhen=";".join(f"{h:02d}" for h in range(24)),
        cleanResourceInterval="1000",
        cleanFilesFirstDelayMs=str(PYRMQ_FIRST_CLEAN_MS),
    )


def _min_offsets(server, topic: str) -> dict[int, int]:
    addr = (server.config.host, server.config.ports.listen)
    out = {}
    for q in range(QUEUES):
        header, _ = remoting_call(addr, GET_MIN_OFFSET, {"topic": topic, "queueId": str(q)})
        assert header["code"] == 0, header
        out[q] = int(header["extFields"]["offset"])
    return out


def _pull_raw(server, topic: str, group: str, queue_id: int, offset: int) -> dict:
    header, _ = remoting_call((server.config.host, server.config.ports.listen), PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(FLAG_SUBSCRIPTION), "commitOffset": "0",
        "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"},
        timeout=10.0)
    return header


@pytest.mark.compat_exclude("pyrmq", "client5")
@pytest.mark.compat_exclude("apache", "client5")
@pytest.mark.compat_exclude("pyrmq-split", "client5")
def test_expired_files_deleted_and_consumers_moved_to_the_new_minimum(cleaning_server, java_client, names):
    """Produce over eight commit log files; wait until every queue's min offset moved; then it is
    exactly the first message in the last commit log file (per queue), a pull from 0 is answered
    PULL_OFFSET_MOVED with that offset, and a new CONSUME_FROM_FIRST_OFFSET group receives
    exactly the messages from there on. (Client 4 only: this is about the broker's store.)"""
    server = cleaning_server
    produced = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync",
                               count=COUNT, body_size=BODY_SIZE, create_topic=QUEUES)
    assert_sent_ok(produced.sent, COUNT, server)
    phy = {e["body"]: decode_offset_msg_id(e["offsetMsgId"])[2] for e in produced.sent}
    last_phy = max(phy.values())
    last_file_start = last_phy - last_phy % COMMIT_LOG_FILE_SIZE
    assert last_file_start >= 5 * COMMIT_LOG_FILE_SIZE, last_file_start
    room = last_file_start + COMMIT_LOG_FILE_SIZE - (last_phy + BODY_SIZE + 400)
    assert room >= MIN_ROOM_IN_LAST_FILE, f"retune COUNT: {room} bytes left in the last file"

    kept = [e for e in produced.sent if phy[e["body"]] >= last_file_start]
    expected_min = {q: min((e["queueOffset"] for e in kept if e["queueId"] == q), default=None)
                    for q in range(QUEUES)}
    assert all(v is not None and v > 0 for v in expected_min.values()), expected_min

    deadline = time.monotonic() + CLEAN_WAIT_S
    while True:
        mins = _min_offsets(server, names.topic)
        if mins == expected_min:
            break
        assert time.monotonic() < deadline, (f"min offsets {mins}, expected {expected_min}\n"
                                             f"{server.log_tail()}")
        time.sleep(1)
    time.sleep(3)   # a few more rounds: nothing else goes
    assert _min_offsets(server, names.topic) == expected_min

    for q in range(QUEUES):
        header = _pull_raw(server, names.topic, names.another_group("raw"), q, 0)
        assert header["code"] == PULL_OFFSET_MOVED, header
        ext = header["extFields"]
        assert int(ext["nextBeginOffset"]) == expected_min[q], ext
        assert int(ext["minOffset"]) == expected_min[q], ext

    consumed = java_client.run("consume", system_properties=REBALANCE_EVERY_1_S, namesrv=server.namesrv_addr,
                               topic=names.topic, group=names.another_group("late"), count=len(kept), idle_ms=2000,
                               timeout_ms=110_000, deadline_ms=140_000)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(kept, consumed.received)
    per_queue: dict[int, list[int]] = defaultdict(list)
    for e in consumed.received:
        per_queue[e["queueId"]].append(e["queueOffset"])
    for q, offsets in per_queue.items():
        top = max(e["queueOffset"] for e in produced.sent if e["queueId"] == q)
        assert sorted(offsets) == list(range(expected_min[q], top + 1)), q

"""Nothing acknowledged is lost when file descriptors run out (issue 7, point 3).

A send is answered SEND_OK only once its record is in the commit log and dispatched to its
consume queue and the index; a file that cannot be created (EMFILE here) is a refusal with
Apache's code, and a record stored before its dispatch failed is dispatched once the fault clears
-- by the broker's retry, or by recovery after a restart.  Before, a send to a new topic under
EMFILE was answered SEND_OK while its consume queue file could not be created, and the message
never became consumable, not even after a restart.

The store tests lower RLIMIT_NOFILE of this process for a moment (the next open fails); the
process test lowers a running broker's limit from outside (prlimit) and raises it again.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator

import pytest
import trio

from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.message import decode_messages
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.client import RemotingClient
from pyrmq.store.message_store import GetMessageStatus, PutMessageStatus
from tests.broker.rmq import send
from tests.robustness.store_faults import (
    SMALL_FILES,
    BrokerProcess,
    broker_process,
    index_batch_of_one,
    is_store_refusal,
    pull_queue,
)
from tests.store.store_helpers import make_msg, open_store, small_config

__all__ = ["broker_process", "index_batch_of_one"]   # the fixtures, imported for pytest

EMFILE_REFUSAL = PutMessageStatus.CREATE_MAPPED_FILE_FAILED


@contextlib.contextmanager
def descriptors_exhausted(pid: int = 0) -> Iterator[None]:
    """RLIMIT_NOFILE of ``pid`` (0: this process) lowered to its lowest free descriptor number:
    the next open() fails with EMFILE.  Restored at the end."""
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free_fd(pid), hard))
    try:
        yield
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))


def lowest_free_fd(pid: int = 0) -> int:
    if pid == 0:
        fd = os.open(os.devnull, os.O_RDONLY)
        os.close(fd)
        return fd
    used = {int(name) for name in os.listdir(f"/proc/{pid}/fd")}
    return min(set(range(len(used) + 1)) - used)


def store_config(tmp_path, **overrides):
    # files large enough that the sends below need no new commit log file
    values = dict(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=20 * 1000)
    values.update(overrides)
    return small_config(tmp_path / "store", **values)


def keyed(topic: str, n: int):
    return make_msg(topic=topic, body=f"{topic}-{n}".encode(), props={"UNIQ_KEY": f"{topic}-U{n}"})


def bodies(store, topic: str) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        r = store.get_message("g", topic, 0, offset, 32, None)
        if r.status is not GetMessageStatus.FOUND:
            return out
        out += [m.body for m in decode_messages(b"".join(r.buffers))]
        offset = r.next_begin_offset


def test_new_topic_without_descriptors_is_refused_before_it_is_stored(tmp_path):
    store = open_store(store_config(tmp_path))
    try:
        assert store.put_message(keyed("TopicOld", 0)).is_ok()
        end = store.get_max_phy_offset()
        with descriptors_exhausted():
            result = store.put_message(keyed("TopicNew", 0))
            assert result.status is EMFILE_REFUSAL
            assert store.get_max_phy_offset() == end          # refused before the append
            assert store.put_message(keyed("TopicOld", 1)).is_ok()   # a queue with its file goes on
        assert store.put_message(keyed("TopicNew", 1)).is_ok()
        assert bodies(store, "TopicNew") == [b"TopicNew-1"]
        assert bodies(store, "TopicOld") == [b"TopicOld-0", b"TopicOld-1"]
    finally:
        store.shutdown()


def _stall_on_an_index_file(store) -> int:
    """Fill the index file (3 items), then store a record whose index file cannot be created:
    the put is refused, the record is in the commit log but in no consume queue; returns the
    commit log end before it."""
    for n in range(3):
        assert store.put_message(keyed("TopicT", n)).is_ok()
    end = store.get_max_phy_offset()
    with descriptors_exhausted():
        assert store.put_message(keyed("TopicT", 3)).status is EMFILE_REFUSAL
        assert store.get_max_phy_offset() > end                # stored...
        assert store.get_max_offset_in_queue("TopicT", 0) == 3   # ...not dispatched
        assert store.reput.failure is not None
        # the pipeline is stalled: every put is refused, nothing more is stored
        stored = store.get_max_phy_offset()
        assert store.put_message(keyed("TopicT", 4)).status is EMFILE_REFUSAL
        assert store.put_message(keyed("TopicOther", 0)).status is EMFILE_REFUSAL
        assert store.get_max_phy_offset() == stored
        assert store.retry_dispatch() is False
    return end


def test_a_dispatch_that_failed_is_retried_once_descriptors_are_back(tmp_path, index_batch_of_one):
    store = open_store(store_config(tmp_path, max_index_num=4))
    try:
        _stall_on_an_index_file(store)
        assert store.retry_dispatch() is True                  # the broker does this every second
        assert store.reput.failure is None
        # the refused record was stored: it is consumed once (at least once, nothing acked lost)
        assert bodies(store, "TopicT") == [b"TopicT-0", b"TopicT-1", b"TopicT-2", b"TopicT-3"]
        assert store.put_message(keyed("TopicT", 5)).is_ok()
        assert len(store.query_message("TopicT", "TopicT-U3", 32, 0, 2**62).buffers) == 1
    finally:
        store.shutdown()


def test_keys_waiting_for_their_batch_stall_the_pipeline_once_their_index_file_fails(tmp_path):
    """With the index built a batch at a time, the records whose keys wait are acknowledged; the
    build that cannot create the next index file (a query, the broker's tick, or a due batch)
    makes the next put's dispatch stall, as an inline failure did, and nothing is lost."""
    store = open_store(store_config(tmp_path, max_index_num=4))   # 3 keys per index file
    try:
        for n in range(5):
            assert store.put_message(keyed("TopicT", n)).is_ok()
            if n == 1:   # the first file is created for the first two; three keys wait for their batch
                store.retry_dispatch()
        assert len(store.index_service.pending) == 3
        with descriptors_exhausted():
            # the query's build needs the second file: its keys wait, the query finds the first three
            assert len(store.query_message("TopicT", "TopicT-U2", 32, 0, 2**62).buffers) == 1
            assert store.index_service.failing and len(store.index_service.pending) == 2
            stored = store.get_max_phy_offset()
            assert store.put_message(keyed("TopicT", 5)).status is EMFILE_REFUSAL   # its dispatch stalled
            assert store.reput.failure is not None and store.get_max_phy_offset() > stored
            assert store.retry_dispatch() is False
        assert store.retry_dispatch() is True
        assert not store.index_service.failing
        assert bodies(store, "TopicT") == [f"TopicT-{n}".encode() for n in range(6)]
        for n in range(6):   # every key once, the refused (and stored) record's too
            assert len(store.query_message("TopicT", f"TopicT-U{n}", 32, 0, 2**62).buffers) == 1
    finally:
        store.shutdown()


@pytest.mark.parametrize("crash", [False, True])
def test_restart_dispatches_what_the_consume_queues_lack(tmp_path, crash, index_batch_of_one):
    config = store_config(tmp_path, max_index_num=4)
    store = open_store(config)
    _stall_on_an_index_file(store)
    store.shutdown()   # stopped while stalled
    if crash:
        open(config.abort_path(), "w").close()
    store = open_store(config)
    try:
        assert store.reput.failure is None
        assert bodies(store, "TopicT") == [b"TopicT-0", b"TopicT-1", b"TopicT-2", b"TopicT-3"]
        assert store.rebuild_index_step(None)   # after a crash: what the broker does in the background
        assert len(store.query_message("TopicT", "TopicT-U3", 32, 0, 2**62).buffers) == 1
        assert store.put_message(keyed("TopicT", 4)).is_ok()
    finally:
        store.shutdown()


# ---------------------------------------------------------------------------- a broker process

TOPIC_NOT_WRITTEN = (ResponseCode.SYSTEM_ERROR, "persisting topics.json failed, see the server log")
TOPICS_BEFORE_EXHAUSTION = 12   # descriptors left free: the first new topics still get their files
NEW_TOPICS = 60


async def send_new_topics(client: RemotingClient, broker: BrokerProcess, acked: dict[str, list[bytes]],
                          refused: dict[str, list[bytes]], first: int, count: int) -> list[RemotingCommand]:
    refusals = []
    for i in range(first, first + count):
        topic = f"TopicFd{i}"
        body = f"{topic}-{len(acked.get(topic, [])) + len(refused.get(topic, []))}".encode()
        resp = await send(client, broker.broker_addr, topic, body)
        if resp.code == ResponseCode.SUCCESS:
            acked.setdefault(topic, []).append(body)
        else:
            # the store's refusal, or the topic config's: a send that auto-creates its topic is
            # answered once topics.json is written, and writing it needs a descriptor too (the
            # message is then stored, and consumed once the fault clears)
            assert is_store_refusal(resp) or (resp.code, resp.remark) == TOPIC_NOT_WRITTEN, (resp.code, resp.remark)
            refused.setdefault(topic, []).append(body)
            refusals.append(resp)
    return refusals


async def check_acked_are_pulled(client: RemotingClient, broker: BrokerProcess, acked: dict[str, list[bytes]],
                                 refused: dict[str, list[bytes]]) -> None:
    for topic, sent in acked.items():
        pulled = [body for _, body in await pull_queue(client, broker.broker_addr, topic, 0)]
        assert [b for b in pulled if b in sent] == sent, f"acknowledged messages of {topic} lost"
        assert all(b in sent or b in refused.get(topic, []) for b in pulled), topic


@pytest.mark.slow
async def test_broker_out_of_descriptors_refuses_and_loses_nothing(tmp_path, broker_process):
    # index files of 20 items: some index roll-overs happen while descriptors are out (a
    # record stored, then its dispatch stalled), besides the consume queue files of new topics
    broker = broker_process(tmp_path, tmp_path / "store", **{**SMALL_FILES, "maxIndexNum": 20})
    broker.start()
    acked: dict[str, list[bytes]] = {}
    refused: dict[str, list[bytes]] = {}
    async with RemotingClient() as client:
        await broker.wait_ready(client)
        await send_new_topics(client, broker, acked, refused, 0, 1)   # the connection, and one topic
        soft, hard = resource.prlimit(broker.proc.pid, resource.RLIMIT_NOFILE)
        limit = lowest_free_fd(broker.proc.pid) + TOPICS_BEFORE_EXHAUSTION
        resource.prlimit(broker.proc.pid, resource.RLIMIT_NOFILE, (limit, hard))
        try:
            refusals = await send_new_topics(client, broker, acked, refused, 1, NEW_TOPICS)
            assert broker.alive(), broker.log_tail()
        finally:
            resource.prlimit(broker.proc.pid, resource.RLIMIT_NOFILE, (soft, hard))
        await trio.sleep(1.5)   # the broker retries a stalled dispatch every second
        await check_acked_are_pulled(client, broker, acked, refused)
        assert refusals, "no send was refused: the descriptors never ran out"
        assert len(acked) > 1
        # the topics refused before are accepted now
        assert not await send_new_topics(client, broker, acked, refused, 1, NEW_TOPICS)
        await check_acked_are_pulled(client, broker, acked, refused)

        # out again, and stopped while out: the restart dispatches whatever the queues lack
        resource.prlimit(broker.proc.pid, resource.RLIMIT_NOFILE, (lowest_free_fd(broker.proc.pid), hard))
        assert await send_new_topics(client, broker, acked, refused, NEW_TOPICS + 1, 10)
        for topic in list(acked)[:20]:
            await send_new_topics(client, broker, acked, refused, int(topic[len("TopicFd"):]), 1)
    assert broker.stop() == 0, broker.log_tail()
    broker.start()
    async with RemotingClient() as client:
        await broker.wait_ready(client)
        await check_acked_are_pulled(client, broker, acked, refused)
    assert broker.stop() == 0

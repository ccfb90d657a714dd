"""A full disk is a refusal, never a crash (issue 7, point 2): a broker process whose store is on
an 8 MB tmpfs is sent messages until the disk is full.  Writes are refused with Apache's code
and remark, the process stays up, what was stored is still pulled, other clients are served, and
writes are accepted again once space is freed -- also after a restart on the full disk.

Before space was reserved ahead of writes, the first write to a page of a sparse file with no
room left killed the broker with SIGBUS (and killed it again at every restart).
"""

from __future__ import annotations

import subprocess
from collections import defaultdict

import pytest
import trio

from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import decode_messages
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.remoting.client import RemotingClient
from pyrmq.store.message_store import GetMessageStatus, PutMessageStatus
from tests.broker.rmq import send
from tests.robustness.store_faults import (
    SMALL_FILES,
    BrokerProcess,
    broker_process,
    fill_file,
    index_batch_of_one,
    is_store_refusal,
    pull_queue,
    tmpfs,
)
from tests.store.store_helpers import make_msg, open_store, small_config

__all__ = ["broker_process", "index_batch_of_one"]   # the fixtures, imported for pytest

TOPIC = "TopicDiskFull"
QUEUES = 4
BODY_SIZE = 8 * 1024
# an 8 MB tmpfs fits about 900 messages of 8 KiB: far more sends than that means no refusal came
MAX_SENDS = 3000
# the broker's disk check runs every cleanResourceInterval ms; freed space is seen within that
FREED_SPACE_SEEN_S = 20

# Consume queue files of 100 units and index files of 400 items: the disk fills while commit log,
# consume queue and index files are all being created, so each of them meets the full disk.
SMALL = {**SMALL_FILES, "mappedFileSizeConsumeQueue": 100 * 20, "maxIndexNum": 400}
# Consume queue files of the default 6 MB, on an 8 MB disk: sparse but for a reserved chunk.  A
# start must not read their holes through the mapping (on tmpfs that allocates a page, and a
# full one answers SIGBUS).
DEFAULT_CQ = {**SMALL_FILES, "mappedFileSizeConsumeQueue": 300_000 * 20, "maxIndexNum": 400}


class Sent:
    """Acknowledged messages per queue as (queue offset, body), and the bodies refused."""

    def __init__(self) -> None:
        self.acked: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.refused: set[bytes] = set()


def body(n: int) -> bytes:
    head = f"m{n:06d}-".encode()
    return head + b"." * (BODY_SIZE - len(head))


async def send_one(client: RemotingClient, broker: BrokerProcess, sent: Sent, n: int) -> RemotingCommand:
    queue_id = n % QUEUES
    resp = await send(client, broker.broker_addr, TOPIC, body(n), queue_id=queue_id)
    if resp.code == ResponseCode.SUCCESS:
        sent.acked[queue_id].append((int((resp.ext_fields or {})["queueOffset"]), body(n)))
    else:
        assert is_store_refusal(resp), (resp.code, resp.remark)
        sent.refused.add(body(n))
    return resp


async def send_until_refused(client: RemotingClient, broker: BrokerProcess, sent: Sent,
                             first: int) -> tuple[RemotingCommand, int]:
    """Send numbered messages round-robin over the queues; returns the refusal and the next number."""
    for n in range(first, first + MAX_SENDS):
        resp = await send_one(client, broker, sent, n)
        if resp.code != ResponseCode.SUCCESS:
            return resp, n + 1
    pytest.fail(f"{MAX_SENDS} sends of {BODY_SIZE} bytes on an 8 MB disk and none was refused")


async def check_everything_acked_is_pulled(client: RemotingClient, broker: BrokerProcess, sent: Sent) -> None:
    """Every acknowledged message at its offset; anything else pulled was a refused send that
    had reached the commit log (dispatched once the fault cleared: at least once, never lost)."""
    for queue_id in range(QUEUES):
        pulled = dict(await pull_queue(client, broker.broker_addr, TOPIC, queue_id))
        for offset, acked_body in sent.acked[queue_id]:
            assert pulled.get(offset) == acked_body, f"queue {queue_id} offset {offset}"
        acked = {b for _, b in sent.acked[queue_id]}
        assert all(b in acked or b in sent.refused for b in pulled.values())


async def check_refused_and_alive(client: RemotingClient, broker: BrokerProcess, sent: Sent, n: int) -> None:
    for i in range(20):
        resp = await send_one(client, broker, sent, n + i)
        assert resp.code != ResponseCode.SUCCESS
    assert broker.alive(), broker.log_tail()


async def check_other_clients_served(broker: BrokerProcess) -> None:
    async with RemotingClient() as other:
        route = await other.invoke(broker.namesrv_addr, make_request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), timeout=5)
        assert route.code == ResponseCode.SUCCESS
        assert (await pull_queue(other, broker.broker_addr, TOPIC, 0))[:1]


async def send_once_space_is_freed(client: RemotingClient, broker: BrokerProcess, sent: Sent, n: int) -> None:
    with trio.fail_after(FREED_SPACE_SEEN_S):
        while (await send_one(client, broker, sent, n)).code != ResponseCode.SUCCESS:
            n += 1
            await trio.sleep(0.1)


def keyed(n: int):
    return make_msg(topic="TopicT", body=b"T%d" % n, props={"UNIQ_KEY": f"U{n}"})


def queue_bodies(store) -> list[bytes]:
    r = store.get_message("g", "TopicT", 0, 0, 32, None)
    return [m.body for m in decode_messages(b"".join(r.buffers))] if r.status is GetMessageStatus.FOUND else []


def test_a_start_on_a_full_disk_serves_reads_and_dispatches_once_space_is_freed(tmp_path, index_batch_of_one):
    """The index directory on a one-page tmpfs: the second index file cannot be reserved.  The
    record that needed it is stored but refused; the store stops and starts with it undispatched
    (recovery needs no space), serves what was stored, keeps that record's queue offset, and
    dispatches it once there is room."""
    config = small_config(tmp_path / "store", max_index_num=4)   # 3 keys per index file
    with tmpfs(tmp_path / "store" / "index", "4k") as index_dir:
        store = open_store(config)
        for n in range(3):
            assert store.put_message(keyed(n)).is_ok()
        assert store.put_message(keyed(3)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        store.shutdown()

        store = open_store(config)   # the replay of record 3 stalls again
        try:
            assert store.reput.failure is not None
            assert queue_bodies(store) == [b"T0", b"T1", b"T2"]
            assert store.put_message(keyed(4)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            assert store.clean_service.disk_full   # marked at the first ENOSPC, as Apache
            subprocess.run(["mount", "-o", "remount,size=1m", str(index_dir)], check=True)
            assert not store.clean_service.check_disk_space()   # the broker checks periodically
            assert store.retry_dispatch()                        # and retries every second
            result = store.put_message(keyed(5))
            assert result.is_ok() and result.append_result.logics_offset == 4   # 3 is record 3's
            assert queue_bodies(store) == [b"T0", b"T1", b"T2", b"T3", b"T5"]
        finally:
            store.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("files", [SMALL, DEFAULT_CQ], ids=["small-files", "default-consume-queue-files"])
async def test_full_disk_refuses_writes_serves_reads_and_recovers(tmp_path, broker_process, files):
    with tmpfs(tmp_path / "disk", "8m") as disk:
        fill_file(disk / "filler-1", 2 * 1024 * 1024)
        fill_file(disk / "filler-2", 1024 * 1024)
        # the disk is checked every 200 ms; files are never deleted to make room here (Apache's
        # cleanFileForciblyEnable would drop the oldest commit log files past 85 %)
        broker = broker_process(tmp_path, disk / "store", cleanResourceInterval=200,
                                cleanFileForciblyEnable="false", **files)
        broker.start()
        sent = Sent()
        async with RemotingClient() as client:
            await broker.wait_ready(client)
            refusal, n = await send_until_refused(client, broker, sent, 0)
            assert is_store_refusal(refusal), (refusal.code, refusal.remark)
            assert sum(map(len, sent.acked.values())) > 300
            await check_refused_and_alive(client, broker, sent, n)
            await check_everything_acked_is_pulled(client, broker, sent)
            await check_other_clients_served(broker)

            (disk / "filler-1").unlink()
            await send_once_space_is_freed(client, broker, sent, n + 100)
            await check_everything_acked_is_pulled(client, broker, sent)

            refusal, n = await send_until_refused(client, broker, sent, n + 200)
            assert is_store_refusal(refusal), (refusal.code, refusal.remark)

        # a restart on the full disk: recovery needs no space, reads are served, writes refused
        assert broker.stop() == 0, broker.log_tail()
        fill_file(disk / "filler-3")   # a clean stop deletes the prepared next file: fill that too
        broker.start()
        async with RemotingClient() as client:
            await broker.wait_ready(client)
            await check_everything_acked_is_pulled(client, broker, sent)
            await check_refused_and_alive(client, broker, sent, n)
            await check_other_clients_served(broker)
            (disk / "filler-3").unlink()
            (disk / "filler-2").unlink()
            await send_once_space_is_freed(client, broker, sent, n + 100)
            await check_everything_acked_is_pulled(client, broker, sent)
        assert broker.stop() == 0, broker.log_tail()
        assert "Bus error" not in broker.log.read_text(errors="replace")

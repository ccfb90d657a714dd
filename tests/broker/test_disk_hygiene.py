"""Disk hygiene through a real broker: writes refused while the disk is full (and accepted again
without a restart), pulls below a moved minimum answered PULL_OFFSET_MOVED, GET_MIN_OFFSET, and
deleteOnlyConsumed fed from the consumer offsets."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import trio

from pyrmq.broker import store_clean_task
from pyrmq.broker.store_clean_task import consumed_boundary
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import decode_offset_msg_id
from pyrmq.codec.remoting import make_request
from tests.broker.rmq import pull, send

HOUR_S = 3600
BODY = b"x" * 200


class Disk:
    def __init__(self, ratio: float = 0.30) -> None:
        self.ratio = ratio

    def __call__(self, path: str) -> float:
        return self.ratio


@pytest.fixture
def broker_overrides():
    # 4 KiB commit log files and 10-unit consume queue files: a few dozen messages span many
    return {"mappedFileSizeCommitLog": "4096", "mappedFileSizeConsumeQueue": "200",
            "maxHashSlotNum": "64", "maxIndexNum": "32", "cleanResourceInterval": "100"}


def _expire_everything(clean) -> None:
    """A clock 73 hours ahead whose hour is the deleteWhen hour: every file but the last is expired."""
    now = time.time() + 73 * HOUR_S
    clean.config.delete_when = f"{time.localtime(now).tm_hour:02d}"
    clean.clock = lambda: now


async def _send_many(cluster, topic: str, count: int) -> list:
    out = []
    for i in range(count):
        resp = await send(cluster.client, cluster.broker_addr, topic, BODY + str(i).encode(), queue_id=i % 2)
        assert resp.code == 0, resp.remark
        out.append(resp)
    return out


async def _min_offset(cluster, topic: str, queue_id: int) -> int:
    resp = await cluster.client.invoke(cluster.broker_addr, make_request(
        RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": str(queue_id)}))
    return int(resp.ext_fields["offset"])


async def test_full_disk_refuses_sends_then_accepts_again_without_restart(cluster):
    with trio.fail_after(10):
        disk = Disk(0.93)
        cluster.broker.store.clean_service.disk_usage = disk
        resp = await _send_until(cluster, ResponseCode.SERVICE_NOT_AVAILABLE)   # the periodic check ran
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE == 14
        assert "the broker's disk is full [CL:  0.93 CQ:  0.93 INDEX:  0.93]" in resp.remark
        info = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
        table = fastjson.loads(info.body.decode())["table"]
        assert (table["commitLogDiskRatio"], table["consumeQueueDiskRatio"]) == ("0.93", "0.93")
        disk.ratio = 0.40
        resp = await _send_until(cluster, ResponseCode.SUCCESS)
        assert resp.code == 0, resp.remark


async def _send_until(cluster, code: int):
    """Send until the broker answers ``code`` (the disk check runs every cleanResourceInterval)."""
    while True:
        resp = await send(cluster.client, cluster.broker_addr, "TopicD", b"x")
        if resp.code == code:
            return resp
        await trio.sleep(0.05)


async def test_pull_below_the_moved_minimum_is_offset_moved(cluster):
    with trio.fail_after(20):
        sent = await _send_many(cluster, "TopicC", 60)
        store = cluster.broker.store
        clean = store.clean_service
        clean.disk_usage = Disk()
        _expire_everything(clean)
        assert await _min_offset(cluster, "TopicC", 0) == 0
        await trio.to_thread.run_sync(clean.run)
        min_phy = store.get_min_phy_offset()
        assert min_phy > 0 and len(store.commit_log.mapped_file_queue.mapped_files) == 1
        for queue_id in (0, 1):
            expected = min(int(r.ext_fields["queueOffset"]) for i, r in enumerate(sent)
                           if i % 2 == queue_id and _phy(r) >= min_phy)
            assert await _min_offset(cluster, "TopicC", queue_id) == expected > 0
            resp, _ = await pull(cluster.client, cluster.broker_addr, "TopicC", queue_id, 0)
            assert resp.code == ResponseCode.PULL_OFFSET_MOVED == 21
            assert resp.ext_fields["nextBeginOffset"] == str(expected)
            assert resp.ext_fields["minOffset"] == str(expected)
            resp, messages = await pull(cluster.client, cluster.broker_addr, "TopicC", queue_id, expected)
            assert resp.code == 0
            assert [m.queue_offset for m in messages] == list(range(expected, 30))


def _phy(resp) -> int:
    return decode_offset_msg_id(resp.ext_fields["msgId"])[2]


@pytest.mark.parametrize("broker_overrides", [{
    "mappedFileSizeCommitLog": "4096", "mappedFileSizeConsumeQueue": "200", "maxHashSlotNum": "64",
    "maxIndexNum": "32", "deleteOnlyConsumed": "true"}])
async def test_delete_only_consumed_keeps_what_a_group_has_not_consumed(cluster, caplog):
    with trio.fail_after(20):
        sent = await _send_many(cluster, "TopicK", 60)
        broker = cluster.broker
        store = broker.store
        # group G consumed queue 0 up to offset 12 and queue 1 completely
        broker.consumer_offset_manager.commit_offset("G", "TopicK", 0, 12)
        broker.consumer_offset_manager.commit_offset("G", "TopicK", 1, 30)
        boundary = consumed_boundary(store, broker.consumer_offset_manager)
        held = next(r for r in sent if r.ext_fields["queueId"] == "0" and r.ext_fields["queueOffset"] == "12")
        assert (boundary.group, boundary.topic, boundary.queue_id, boundary.queue_offset) == ("G", "TopicK", 0, 12)
        assert boundary.phy_offset == _phy(held)
        clean = store.clean_service
        clean.disk_usage = Disk()
        _expire_everything(clean)
        files_before = [mf.file_from_offset for mf in store.commit_log.mapped_file_queue.mapped_files]
        with caplog.at_level(logging.WARNING, logger="pyrmq.store.clean_service"):
            await trio.to_thread.run_sync(clean.run)   # asks the event loop for the boundary
        files_after = [mf.file_from_offset for mf in store.commit_log.mapped_file_queue.mapped_files]
        holding = max(f for f in files_before if f <= boundary.phy_offset)
        assert files_after[0] == holding and len(files_after) < len(files_before)
        assert "consumer group G has not consumed topic TopicK queue 0 from offset 12" in caplog.text
        resp, messages = await pull(cluster.client, cluster.broker_addr, "TopicK", 0, 12)
        assert resp.code == 0 and messages[0].queue_offset == 12
        # the group moves on: the file can go
        broker.consumer_offset_manager.commit_offset("G", "TopicK", 0, 30)
        assert consumed_boundary(store, broker.consumer_offset_manager) is None
        await trio.to_thread.run_sync(clean.run)
        assert len(store.commit_log.mapped_file_queue.mapped_files) == 1


@pytest.mark.parametrize("broker_overrides", [{
    "mappedFileSizeCommitLog": "4096", "mappedFileSizeConsumeQueue": "200", "maxHashSlotNum": "64",
    "maxIndexNum": "32", "cleanResourceInterval": "100", "cleanFilesFirstDelayMs": "0"}])
async def test_periodic_task_deletes_after_the_first_delay(cluster):
    with trio.fail_after(20):
        await _send_many(cluster, "TopicP", 40)
        clean = cluster.broker.store.clean_service
        clean.disk_usage = Disk(0.80)   # above diskMaxUsedSpaceRatio: no need to wait for deleteWhen
        clean.clock = lambda: time.time() + 73 * HOUR_S
        mfq = cluster.broker.store.commit_log.mapped_file_queue
        while len(mfq.mapped_files) > 1:
            await trio.sleep(0.05)
        # the consume queue files follow in the same round, after the commit log's; until their
        # first file is gone its min offset stays (Apache's correctMinOffset), so wait for it
        while await _min_offset(cluster, "TopicP", 0) == 0:
            await trio.sleep(0.05)
        cq = cluster.broker.store.find_consume_queue("TopicP", 0)
        first_unit = cq.get_unit(cq.get_min_offset_in_queue())
        assert first_unit is not None and first_unit[0] >= cluster.broker.store.get_min_phy_offset()


@pytest.mark.parametrize("broker_overrides", [{
    "mappedFileSizeCommitLog": "4096", "mappedFileSizeConsumeQueue": "200", "deleteOnlyConsumed": "true"}])
async def test_delete_only_consumed_keeps_undelivered_delayed_messages(cluster):
    with trio.fail_after(20):
        resp = await send(cluster.client, cluster.broker_addr, "TopicL", BODY, extra={"DELAY": "18"})   # 2 h
        assert resp.code == 0
        await _send_many(cluster, "TopicM", 40)   # no group has offsets for these: nothing holds them
        task = cluster.broker.store_clean_task
        boundary = task.consumed_boundary()
        assert (boundary.group, boundary.topic, boundary.queue_id, boundary.queue_offset) == (
            store_clean_task.SCHEDULE_READER, "SCHEDULE_TOPIC_XXXX", 17, 0)
        assert boundary.phy_offset == _phy(resp)
        clean = cluster.broker.store.clean_service
        clean.disk_usage = Disk()
        _expire_everything(clean)
        await trio.to_thread.run_sync(clean.run)
        assert cluster.broker.store.get_min_phy_offset() == 0   # the delayed message is in the first file


async def test_clean_expired_consume_queues_and_unused_topics(cluster):
    """mqadmin cleanExpiredCQ drops the queues whose messages are all in deleted commit log files;
    cleanUnusedTopic drops the queues of topics the broker no longer has; deleteExpiredCommitLog
    lets the clean service delete expired files whatever the hour. Each answers SUCCESS."""
    inv = cluster.client.invoke
    store = cluster.broker.store
    with trio.fail_after(20):
        await _send_many(cluster, "TopicOld", 2)       # queues 0 and 1, both in the first file
        await _send_many(cluster, "TopicNew", 60)      # many files
        clean = store.clean_service
        clean.disk_usage = Disk()
        _expire_everything(clean)
        clean.config.delete_when = "99"                # not the hour: only a manual request deletes
        await trio.to_thread.run_sync(clean.run)
        assert len(store.commit_log.mapped_file_queue.mapped_files) > 1
        resp = await inv(cluster.broker_addr, make_request(RequestCode.DELETE_EXPIRED_COMMITLOG))
        assert resp.code == 0
        await trio.to_thread.run_sync(clean.run)
        assert len(store.commit_log.mapped_file_queue.mapped_files) == 1

        resp = await inv(cluster.broker_addr, make_request(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE))
        assert resp.code == 0
        queues = store.consume_queues
        assert queues.get("TopicOld", 0) is None and queues.get("TopicOld", 1) is None
        assert not (Path(store.config.consume_queue_dir()) / "TopicOld").exists()
        assert queues.get("TopicNew", 0) is not None and queues.get("TopicNew", 1) is not None

        cluster.broker.topic_config_manager.table.pop("TopicNew")   # as if deleted from another tool
        resp = await inv(cluster.broker_addr, make_request(RequestCode.CLEAN_UNUSED_TOPIC))
        assert resp.code == 0
        assert queues.get("TopicNew", 0) is None and not (Path(store.config.consume_queue_dir()) / "TopicNew").exists()
        # queue offsets restart: the topic is gone from the commit log's queue table too
        assert "TopicNew-0" not in store.commit_log.topic_queue_table

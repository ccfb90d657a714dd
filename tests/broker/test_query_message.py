"""QUERY_MESSAGE (12) through a real broker (codes.md §4.12): by KEYS token and by UNIQ_KEY,
over a tiny index (colliding slots, several files), exact bodies, 22 when nothing matches."""

from __future__ import annotations

import logging
import struct

import pytest
import trio

from pyrmq.broker.config import build_config
from pyrmq.broker.controller import BrokerController

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import decode_messages, decode_offset_msg_id
from pyrmq.codec.remoting import make_request
from tests.broker.conftest import broker_properties
from tests.broker.rmq import send

LONG_MAX = 2**63 - 1


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {"maxHashSlotNum": "4", "maxIndexNum": "16"}  # collisions and roll-over


def query(cluster, topic, key, *, max_num=32, begin=0, end=LONG_MAX, unique=False, addr=None):
    header = {"topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": str(begin),
              "endTimestamp": str(end)}
    if unique:
        header["_UNIQUE_KEY_QUERY"] = "true"
    return cluster.client.invoke(addr or cluster.broker_addr, make_request(RequestCode.QUERY_MESSAGE, header),
                                 timeout=10)


async def test_query_by_key_and_unique_key(cluster):
    with trio.fail_after(20):
        for i in range(8):
            resp = await send(cluster.client, cluster.broker_addr, "TopicQ", f"body {i}".encode(),
                              keys=f"k{i} common", queue_id=i % 2, extra={"UNIQ_KEY": f"UQ{i:04d}"})
            assert resp.code == 0, resp.remark
        resp = await send(cluster.client, cluster.broker_addr, "TopicOther", b"other", keys="k1 common",
                          extra={"UNIQ_KEY": "UQ0001"})
        assert resp.code == 0
        last_offset = resp.ext_fields["msgId"]

        for i in range(8):
            r = await query(cluster, "TopicQ", f"k{i}")
            assert r.code == 0, r.remark
            assert [m.body for m in decode_messages(r.body)] == [f"body {i}".encode()]
            assert int(r.ext_fields["indexLastUpdateTimestamp"]) > 0
            r = await query(cluster, "TopicQ", f"UQ{i:04d}", max_num=0, unique=True)  # maxNum := 32
            assert r.code == 0, r.remark
            assert [m.body for m in decode_messages(r.body)] == [f"body {i}".encode()]
        # the keys went over more than one file (the first query indexed them: they wait for a batch)
        assert len(cluster.broker.store.index_service.index_files) > 1

        r = await query(cluster, "TopicQ", "common")
        assert sorted(m.body for m in decode_messages(r.body)) == [f"body {i}".encode() for i in range(8)]
        assert all(m.topic == "TopicQ" for m in decode_messages(r.body))
        r = await query(cluster, "TopicQ", "common", max_num=3)
        assert len(decode_messages(r.body)) == 3
        r = await query(cluster, "TopicOther", "k1")
        assert [m.body for m in decode_messages(r.body)] == [b"other"]
        assert r.ext_fields["indexLastUpdatePhyoffset"] == str(decode_offset_msg_id(last_offset)[2])

        for r in (await query(cluster, "TopicQ", "absent"),
                  await query(cluster, "TopicQ", "UQ0001"),  # a UNIQ_KEY is not a KEYS token
                  await query(cluster, "TopicQ", "k1", end=1),  # outside the time window
                  await query(cluster, "Nope", "k1")):
            assert r.code == 22
            assert r.remark == "can not find message, maybe time range not correct"
            assert not r.body
            assert "indexLastUpdatePhyoffset" in r.ext_fields

        r = await cluster.client.invoke(cluster.broker_addr, make_request(
            RequestCode.QUERY_MESSAGE, {"topic": "TopicQ", "key": "k1"}), timeout=10)
        assert r.code == 1 and "maxNum" in r.remark


# one index file (dropped after the crash), several commit log files (recovery replays the newest)
@pytest.mark.parametrize("broker_overrides", [{"maxHashSlotNum": "64", "maxIndexNum": "1000",
                                               "mappedFileSizeCommitLog": str(64 * 1024)}])
async def test_keys_stored_before_a_crash_are_found_after_the_restart(cluster, nursery, tmp_path, broker_overrides,
                                                                      caplog):
    """After a crash the index files newer than the index checkpoint are dropped (they may be
    torn); the restarted broker listens at once and indexes those records again in the
    background, so every key is found again (Apache loses them)."""
    def body(i: int) -> bytes:
        return f"body {i} ".encode().ljust(4000, b"x")

    with trio.fail_after(20):
        for i in range(40):
            resp = await send(cluster.client, cluster.broker_addr, "TopicQ", body(i), keys=f"k{i}")
            assert resp.code == 0, resp.remark
    cluster.broker.stop()
    await cluster.broker.wait_stopped()
    store_config = cluster.broker.store_config
    # the checkpoint as long after the sends (recovery replays the newest commit log file only)
    with open(store_config.checkpoint_path(), "r+b") as f:
        f.write(struct.pack(">qq", 2**62, 2**62))   # physicMsgTimestamp, logicsMsgTimestamp
    open(store_config.abort_path(), "w").close()   # the next start sees a crash
    loaded = build_config(broker_properties(tmp_path, int(cluster.namesrv.port), **broker_overrides))
    broker = BrokerController(loaded)
    with caplog.at_level(logging.INFO, logger="pyrmq.store.message_store"):
        await nursery.start(broker.run)
        try:
            assert not broker.store.last_exit_ok
            assert "rebuilt in the background" in caplog.text
            with trio.fail_after(20):
                while broker.store.index_rebuild is not None:
                    await trio.sleep(0.01)
                for i in range(40):
                    r = await query(cluster, "TopicQ", f"k{i}", addr=loaded.broker.broker_addr)
                    assert r.code == 0, (i, r.remark)
                    assert [m.body for m in decode_messages(r.body)] == [body(i)]
            assert "the message index is whole again" in caplog.text
        finally:
            broker.stop()
            await broker.wait_stopped()

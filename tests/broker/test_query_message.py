"""QUERY_MESSAGE (12) through a real broker (codes.md §4.12): by KEYS token and by UNIQ_KEY,
over a tiny index (colliding slots, several files), exact bodies, 22 when nothing matches."""

from __future__ import annotations

import pytest
import trio

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import decode_messages, decode_offset_msg_id
from pyrmq.codec.remoting import make_request
from tests.broker.rmq import send

LONG_MAX = 2**63 - 1


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {"maxHashSlotNum": "4", "maxIndexNum": "16"}  # collisions and roll-over


def query(cluster, topic, key, *, max_num=32, begin=0, end=LONG_MAX, unique=False):
    header = {"topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": str(begin),
              "endTimestamp": str(end)}
    if unique:
        header["_UNIQUE_KEY_QUERY"] = "true"
    return cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.QUERY_MESSAGE, header), timeout=10)


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
        assert len(cluster.broker.store.index_service.index_files) > 1

        for i in range(8):
            r = await query(cluster, "TopicQ", f"k{i}")
            assert r.code == 0, r.remark
            assert [m.body for m in decode_messages(r.body)] == [f"body {i}".encode()]
            assert int(r.ext_fields["indexLastUpdateTimestamp"]) > 0
            r = await query(cluster, "TopicQ", f"UQ{i:04d}", max_num=0, unique=True)  # maxNum := 32
            assert r.code == 0, r.remark
            assert [m.body for m in decode_messages(r.body)] == [f"body {i}".encode()]

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

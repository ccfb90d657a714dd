"""Message contents at the edges with the Java clients: many (unicode) properties, bodies of
exactly the maximum size, compressed bodies (stored flags checked byte for byte)."""

from __future__ import annotations

import hashlib
import zlib

import pytest

from compat_tests.checks import assert_received_exactly, assert_sent_ok, view_stored_message

pytestmark = pytest.mark.compat

MAX_BODY = 4 * 1024 * 1024  # the client's default maxMessageSize, 4194304


def expected_properties(i: int, n: int = 50) -> dict[str, str]:
    """What Bodies.properties(i, n) in the runner sets."""
    return {("ключ_" if j % 5 == 0 else "p") + str(j): f"värde {i}:{j} = 值-ключ-🎉-" + "ß" * (j % 7)
            for j in range(n)}


def test_fifty_unicode_properties_arrive_intact(server, java_client, names):
    count = 5
    run = java_client.run("props", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          count=count, props=50)
    assert_sent_ok(run.sent, count, server)
    assert_received_exactly(run.sent, run.received)
    for r in run.received:
        wanted = expected_properties(int(r["seq"]))
        got = {k: r["props"].get(k) for k in wanted}
        assert got == wanted, {k: (got[k], v) for k, v in wanted.items() if got[k] != v}
        # Nothing else that is not a known system property either.
        system = {"KEYS", "TAGS", "UNIQ_KEY", "WAIT", "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME",
                  "seq", "CLUSTER"}
        assert set(r["props"]) - set(wanted) <= system, sorted(set(r["props"]) - set(wanted) - system)


def test_max_size_bodies(server, java_client, names):
    """Bodies of exactly 4194304 bytes (the client's maxMessageSize, which the broker's
    maxMessageSize also bounds). Random bytes with compression off: stored as sent (sysFlag 0)
    and consumed byte-identical. Random bytes with the client's default compression: zlib makes
    them a little larger than 4 MiB and the broker refuses the message, MESSAGE_ILLEGAL (13) --
    the frame itself (over 4 MiB) is read, the body limit is what fails. A repetitive 4 MiB text
    body compresses: stored compressed with the client's flag, consumed byte-identical."""
    plan = ["random/off", "random/on", "text/on"]
    run = java_client.run("bigbody", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          size=MAX_BODY, plan=",".join(plan), timeout_ms=60_000)
    sent = {e["plan"]: e for e in run.sent}
    failed = {e["plan"]: e for e in run.of("send_failed")}
    assert sorted(sent) == ["random/off", "text/on"] and sorted(failed) == ["random/on"], (sent, failed)
    assert failed["random/on"]["code"] == 13, failed
    assert {e["status"] for e in sent.values()} == {"SEND_OK"}
    received = run.received
    assert sorted((e["sha256"], e["length"]) for e in received) == \
        sorted((e["sha256"], MAX_BODY) for e in sent.values())
    stored = {p: view_stored_message(e["offsetMsgId"]) for p, e in sent.items()}
    raw = stored["random/off"]
    assert raw["sysFlag"] == 0 and len(raw["body"]) == MAX_BODY
    assert hashlib.sha256(raw["body"]).hexdigest() == sent["random/off"]["sha256"]
    assert raw["bodyCRC"] == zlib.crc32(raw["body"]) & 0x7FFFFFFF
    text = stored["text/on"]
    assert text["sysFlag"] == COMPRESSED_FLAG[java_client.flavor], hex(text["sysFlag"])
    assert hashlib.sha256(zlib.decompress(text["body"])).hexdigest() == sent["text/on"]["sha256"]
    assert len(text["body"]) < MAX_BODY // 10


# sysFlag a producer sets on a zlib-compressed body: the COMPRESSED bit and the compression type
# ZLIB (0x300). rocketmq-client 4.9.8 already has the compression types of 5.x (its
# DefaultMQProducerImpl reads rocketmq.message.compressType, default ZLIB), so both set 0x301;
# only older 4.x clients set the bare 0x1 (spec message.md section 6).
COMPRESSED_FLAG = {"client4": 0x301, "client5": 0x301}


def test_compressed_bodies_read_by_every_client(server, java_client, java_clients, names):
    """10 000-byte bodies (over the 4 KiB threshold) are zlib-compressed by the producer. The
    broker stores body and sysFlag as sent (checked on the raw record: VIEW_MESSAGE_BY_ID sent by
    hand), and a push consumer of each client version reads the original bodies."""
    count = 8
    produced = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync",
                               count=count, body_size=10_000, tags="TagA,TagB")
    assert_sent_ok(produced.sent, count, server)
    for e in produced.sent:
        assert len(e["body"]) == 10_000
        raw = view_stored_message(e["offsetMsgId"])
        assert raw["sysFlag"] == COMPRESSED_FLAG[java_client.flavor], hex(raw["sysFlag"])
        assert zlib.decompress(raw["body"]).decode() == e["body"]
        assert len(raw["body"]) < 1000 and raw["bodyCRC"] == zlib.crc32(raw["body"]) & 0x7FFFFFFF
    for flavor, client in java_clients.items():
        consumed = client.run("consume", namesrv=server.namesrv_addr, topic=names.topic,
                              group=names.another_group(flavor), count=count, idle_ms=500)
        assert consumed.summary["complete"], consumed.describe()
        assert_received_exactly(produced.sent, consumed.received)
        # Pulled records carry the stored flag too; whether the decoder then clears the
        # COMPRESSED bit after inflating differs between client versions, the type bits stay.
        assert {e["sysFlag"] | 0x1 for e in consumed.received} == {COMPRESSED_FLAG[java_client.flavor]}

"""Assertions shared by the scenarios: what was sent against what came back, exactly."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable

from compat_tests.servers import Server, remoting_call

# Request and response codes (spec/codes.md).
QUERY_CONSUMER_OFFSET = 14
UPDATE_CONSUMER_OFFSET = 15
QUERY_NOT_FOUND = 22


def decode_offset_msg_id(offset_msg_id: str) -> tuple[str, int, int]:
    """(store host, store port, commit log offset) of an IPv4 offsetMsgId (32 hex digits)."""
    assert len(offset_msg_id) == 32, offset_msg_id
    raw = bytes.fromhex(offset_msg_id)
    host = ".".join(str(b) for b in raw[:4])
    return host, int.from_bytes(raw[4:8], "big"), int.from_bytes(raw[8:16], "big")


def consumer_offset(addr: tuple[str, int], group: str, topic: str, queue_id: int) -> int | None:
    """QUERY_CONSUMER_OFFSET straight to the broker at ``addr``; None when it has no offset for
    the group and queue."""
    header, _ = remoting_call(addr, QUERY_CONSUMER_OFFSET,
                              {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)})
    if header.get("code") == QUERY_NOT_FOUND:
        return None
    assert header.get("code") == 0, f"{addr}: QUERY_CONSUMER_OFFSET {header}"
    return int(header["extFields"]["offset"])


def wait_consumer_offsets_at(addr: tuple[str, int], group: str, topic: str, expected: dict[int, int],
                             timeout: float = 10.0, check: Callable[[], object] = lambda: None,
                             describe: Callable[[], str] = lambda: "") -> float:
    """Until the broker at ``addr`` holds exactly ``expected`` (queue id -> offset) for the
    group; returns the seconds it took. ``check`` runs before each look (a dead broker fails at
    once), ``describe`` adds to the failure (a log tail)."""
    start = time.monotonic()
    have: dict[int, int | None] = {}
    while time.monotonic() < start + timeout:
        check()
        have = {q: consumer_offset(addr, group, topic, q) for q in expected}
        if have == expected:
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"{addr}: offsets of {group} are {have}, expected {expected}\n{describe()}")


def seed_group_offset(server: Server, group: str, topic: str) -> None:
    """seed_group_offset_at for a Server."""
    seed_group_offset_at((server.config.host, server.config.ports.listen), group, topic)


def seed_group_offset_at(addr: tuple[str, int], group: str, topic: str) -> None:
    """Commit offset 0 of queue 0 for a group that has consumed nothing yet, synchronously.

    A consumer commits all its queues at once at shutdown (oneway UPDATE_CONSUMER_OFFSET frames).
    Apache 4.9.7 handles them on several threads, and the first commits of a topic and group race
    to create its offset table (ConsumerOffsetManager.commitOffset, unsynchronized; fixed in 5.x,
    apache/rocketmq#9149): one queue's offset can be lost, and its messages come again. Seeding
    the table first takes that race out of a scenario; on any broker, offset 0 is where a new
    group starts anyway."""
    header, _ = remoting_call(addr, UPDATE_CONSUMER_OFFSET,
                              {"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "0"})
    assert header["code"] == 0, f"{addr}: UPDATE_CONSUMER_OFFSET {header}"


def wait_committed_offsets(server: Server, group: str, topic: str, expected: dict[int, int],
                           timeout: float = 10.0) -> None:
    """Until ``server`` holds exactly ``expected`` for the group. Clients commit with a oneway
    UPDATE_CONSUMER_OFFSET (at shutdown too), so their process can exit before the broker has
    read it: a scenario that stops the broker next must wait for the commit to land first."""
    wait_consumer_offsets_at((server.config.host, server.config.ports.listen), group, topic, expected, timeout)


def assert_sent_ok(sent: list[dict], count: int, server: Server) -> None:
    """Every message acknowledged SEND_OK once, unique ids, dense queue offsets, our broker's ids."""
    assert len(sent) == count, f"{len(sent)} sent events for {count} messages"
    assert sorted(e["i"] for e in sent) == list(range(count))
    bad = [e for e in sent if e["status"] != "SEND_OK"]
    assert not bad, f"not SEND_OK: {bad[:3]}"
    msg_ids = [e["msgId"] for e in sent]
    assert len(set(msg_ids)) == count, "duplicate msgId"
    per_queue: dict[int, list[int]] = defaultdict(list)
    for e in sent:
        per_queue[e["queueId"]].append(e["queueOffset"])
    for queue_id, offsets in per_queue.items():
        # A fresh topic: each queue's offsets are 0..n-1, each given once.
        assert sorted(offsets) == list(range(len(offsets))), f"queue {queue_id}: offsets {sorted(offsets)}"
    for e in sent:
        host, port, _ = decode_offset_msg_id(e["offsetMsgId"])
        assert f"{host}:{port}" == server.broker_addr, f"offsetMsgId {e['offsetMsgId']} is not our broker's"
    commit_log_offsets = [decode_offset_msg_id(e["offsetMsgId"])[2] for e in sent]
    assert len(set(commit_log_offsets)) == count, "two messages at one commit log offset"


def assert_received_exactly(sent: list[dict], received: list[dict], check_msg_id: bool = True) -> None:
    """The received messages are the sent ones: same bodies once each, same ids, tags, keys, place."""
    counts = Counter(e["body"] for e in received)
    dup = {b: n for b, n in counts.items() if n > 1}
    assert not dup, f"received more than once: {dup}"
    sent_bodies = {e["body"] for e in sent}
    missing = sorted(sent_bodies - counts.keys())
    extra = sorted(counts.keys() - sent_bodies)
    assert not missing and not extra, f"missing {missing[:10]} ({len(missing)}), extra {extra[:10]} ({len(extra)})"
    by_body = {e["body"]: e for e in received}
    for s in sent:
        r = by_body[s["body"]]
        assert r["tags"] == s["tags"], (s, r)
        assert r["keys"] == s["keys"], (s, r)
        assert r["seq"] == str(s["i"]), (s, r)
        if s["status"] == "ONEWAY":
            continue
        if check_msg_id:
            assert r["msgId"] == s["msgId"], (s, r)
        assert (r["queueId"], r["queueOffset"]) == (s["queueId"], s["queueOffset"]), (s, r)
        assert r["commitLogOffset"] == decode_offset_msg_id(s["offsetMsgId"])[2], (s, r)


def assert_two_consumers_split(run, server: Server, count: int) -> None:
    """A run of two consumers of one group over a 4-queue topic (a ``balanced`` event, ``recv``
    events with the consumer index ``c``): every message sent once, disjoint non-empty queue sets
    covering all four, each consumer received exactly from its own queues."""
    assert run.summary["complete"], run.describe()
    assert_sent_ok(run.sent, count, server)
    assert_received_exactly(run.sent, run.received)
    (balanced,) = run.of("balanced")
    assignment = [set(q) for q in balanced["assignment"]]
    assert all(assignment) and not (assignment[0] & assignment[1])
    assert assignment[0] | assignment[1] == {0, 1, 2, 3}
    for c in (0, 1):
        mine = [e for e in run.received if e["c"] == c]
        assert mine, f"consumer {c} received nothing"
        assert {e["queueId"] for e in mine} == assignment[c]


def assert_dense_queues(received: list[dict]) -> None:
    """Per queue, the received offsets are exactly 0..n-1 (a fresh topic read from the start)."""
    per_queue: dict[int, list[int]] = defaultdict(list)
    for e in received:
        per_queue[e["queueId"]].append(e["queueOffset"])
    for queue_id, offsets in per_queue.items():
        assert sorted(offsets) == list(range(len(offsets))), f"queue {queue_id}: offsets {sorted(offsets)}"


def queue_order(events: list[dict]) -> dict[int, list[str]]:
    """Bodies per queue in queue-offset order."""
    per_queue: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for e in events:
        per_queue[e["queueId"]].append((e["queueOffset"], e["body"]))
    return {q: [b for _, b in sorted(v)] for q, v in per_queue.items()}


# ------------------------------------------------------------------------------------- raw records

VIEW_MESSAGE_BY_ID = 33


def parse_stored_record(raw: bytes) -> dict:
    """The fields of one stored message record (spec message.md section 2), as the broker keeps
    it: sysFlag and body exactly as written (a compressed body stays compressed)."""
    import struct

    total, magic, body_crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = \
        struct.unpack_from(">iiiiiqqiq", raw, 0)
    pos = 48 + (20 if sys_flag & 0x10 else 8)
    (store_ts,) = struct.unpack_from(">q", raw, pos)
    pos += 8 + (20 if sys_flag & 0x20 else 8)
    reconsume, prepared = struct.unpack_from(">iq", raw, pos)
    pos += 12
    (body_len,) = struct.unpack_from(">i", raw, pos)
    pos += 4
    body = raw[pos:pos + body_len]
    pos += body_len
    if magic == -626843477:  # V2: int16 topic length
        (topic_len,) = struct.unpack_from(">h", raw, pos)
        pos += 2
    else:
        topic_len = raw[pos]
        pos += 1
    topic = raw[pos:pos + topic_len].decode()
    pos += topic_len
    (props_len,) = struct.unpack_from(">h", raw, pos)
    props = raw[pos + 2:pos + 2 + props_len].decode()
    assert total == len(raw), f"record length {total}, got {len(raw)} bytes"
    return {"totalSize": total, "magic": magic, "bodyCRC": body_crc, "queueId": queue_id, "flag": flag,
            "queueOffset": queue_offset, "commitLogOffset": phys, "sysFlag": sys_flag,
            "bornTimestamp": born_ts, "storeTimestamp": store_ts, "reconsumeTimes": reconsume,
            "preparedTransactionOffset": prepared, "body": body, "topic": topic, "properties": props}


def view_stored_message(offset_msg_id: str) -> dict:
    """VIEW_MESSAGE_BY_ID sent by hand to the broker named in the offsetMsgId: the stored record,
    undecoded (the Java client's decoder would decompress the body and clear the flag)."""
    from compat_tests.servers import remoting_call

    host, port, offset = decode_offset_msg_id(offset_msg_id)
    header, body = remoting_call((host, port), VIEW_MESSAGE_BY_ID, {"offset": str(offset)}, timeout=10.0)
    assert header.get("code") == 0, header
    return parse_stored_record(body)

"""Assertions shared by the scenarios: what was sent against what came back, exactly."""

from __future__ import annotations

from collections import Counter, defaultdict

from compat_tests.servers import Server


def decode_offset_msg_id(offset_msg_id: str) -> tuple[str, int, int]:
    """(store host, store port, commit log offset) of an IPv4 offsetMsgId (32 hex digits)."""
    assert len(offset_msg_id) == 32, offset_msg_id
    raw = bytes.fromhex(offset_msg_id)
    host = ".".join(str(b) for b in raw[:4])
    return host, int.from_bytes(raw[4:8], "big"), int.from_bytes(raw[8:16], "big")


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

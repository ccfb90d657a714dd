"""The codec fuzz targets: each decoder over arbitrary bytes, then what the broker does next with
what it accepted (see oracle.py for the property).

Every ``reencode`` encodes the decoded value the way pyrmq would send or store it and decodes
that again: the second decode must give the same value (after the first one normalised it), so a
decoder cannot accept what its encoder cannot write back.  The store's recovery target lives in
store_target.py.
"""

from __future__ import annotations

import json
import random
import re
import struct
from collections.abc import Sequence
from typing import Any

from pyrmq.codec import admin_bodies, fastjson, namesrv_bodies
from pyrmq.codec.commit_log_walk import RecordWalker
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.message import (
    MessageExt,
    check_record,
    decode_batch,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    encode_batch,
    encode_message_record_bytes,
    properties_to_string,
    property_value,
    string_to_properties,
    tags_string_to_tags_code,
)
from pyrmq.codec.message_props import create_offset_msg_id, java_string_hash
from pyrmq.codec.remoting import (
    FrameDecoder,
    RemotingCommand,
    SerializeType,
    decode_json_header,
    decode_rocketmq_header,
    encode_command,
    encode_json_header,
    encode_rocketmq_header,
)
from pyrmq.codec.ha_frames import SLAVE_REPORT, TRANSFER_HEADER
from pyrmq.ha.protocol import NEED_DATA, MasterSession, SlaveSession, Transfer
from tests.fuzz import mutate, seeds
from tests.fuzz.oracle import Target, expect, expect_equal

INT32 = range(-2**31, 2**31)


class BaseTarget:
    """Defaults: blind byte mutations."""

    name: str
    max_len: int

    def mutate(self, data: bytes, rng: random.Random, others: Sequence[bytes]) -> bytes:
        return mutate.mutate_bytes(data, rng, others)


class JsonTextTarget(BaseTarget):
    """Half the mutations are structured edits of the JSON document."""

    def mutate(self, data: bytes, rng: random.Random, others: Sequence[bytes]) -> bytes:
        if rng.random() < 0.5:
            return mutate.mutate_json_text(data, rng)
        return mutate.mutate_bytes(data, rng, others)


def _fields(cmd: RemotingCommand) -> tuple[Any, ...]:
    body = cmd.body
    # an extFields block whose entries are all empty decodes as {}, and is written back as none
    return (cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields or None, cmd.language, cmd.version,
            cmd.serialize_type, bytes(body) if isinstance(body, (bytes, memoryview)) else body)


def _expect_java_ints(cmd: RemotingCommand) -> None:
    # Java's RemotingCommand holds them as int: a peer cannot have meant a wider value.
    for name in ("code", "opaque", "flag", "version"):
        expect(getattr(cmd, name) in INT32, lambda name=name: f"{name} {getattr(cmd, name)} outside int32")


def _refused(cmd: RemotingCommand) -> bool:
    """A well-formed frame whose text cannot be served is answered SYSTEM_ERROR and never
    dispatched (channel.py): then that answer, not the command, is what must encode."""
    if cmd.invalid is None:
        return False
    encode_command(cmd.response(1, f"invalid request: {cmd.invalid}"))
    return True


def decode_frames(data: bytes, chunk: int | None = None) -> tuple[list[RemotingCommand], ProtocolError | None]:
    """Every frame in ``data`` fed whole (or ``chunk`` bytes at a time), and the error that ended it."""
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    pieces = [data] if chunk is None else [data[i:i + chunk] for i in range(0, len(data), chunk)]
    try:
        for piece in pieces:
            decoder.receive_data(piece)
            out.extend(decoder.frames())
    except ProtocolError as exc:
        return out, exc
    return out, None


class FrameTarget(BaseTarget):
    """FrameDecoder fed whole and in small pieces (they must agree); each frame re-encoded."""

    name = "frame"
    max_len = 16384

    def decode(self, data: bytes) -> tuple[bytes, list[RemotingCommand], ProtocolError | None]:
        frames, error = decode_frames(data)
        if error is not None and not frames:
            raise error
        return data, frames, error

    def reencode(self, value: tuple[bytes, list[RemotingCommand], ProtocolError | None]) -> None:
        data, frames, error = value
        # a byte or a few at a time for small inputs; larger pieces keep long ones quick
        chunk = 1 + len(data) % 13 if len(data) <= 1024 else 64 + len(data) % 1024
        frames2, error2 = decode_frames(data, chunk)
        expect([_fields(f) for f in frames2] == [_fields(f) for f in frames],
               f"fed {chunk} bytes at a time the frames differ")
        expect((error2 is None) == (error is None), f"fed {chunk} bytes at a time: {error2!r} vs {error!r}")
        for cmd in frames:
            _expect_java_ints(cmd)
            if _refused(cmd):
                continue
            again, err = decode_frames(encode_command(cmd))
            expect(err is None and len(again) == 1, f"re-encoded frame does not decode: {err!r}")
            expect_equal(_fields(again[0]), _fields(cmd), "re-encoded frame")

    def mutate(self, data: bytes, rng: random.Random, others: Sequence[bytes]) -> bytes:
        return mutate.mutate_frame(data, rng, others) if rng.random() < 0.8 else mutate.mutate_bytes(data, rng, others)

    def seeds(self) -> list[bytes]:
        frames = [f.data for f in seeds.frames()]
        return frames + [frames[0] + frames[1], frames[5][:20]]


class JsonHeaderTarget(JsonTextTarget):
    name = "json_header"
    max_len = 8192

    def decode(self, data: bytes) -> tuple[bytes, RemotingCommand]:
        return data, decode_json_header(data)

    def reencode(self, value: tuple[bytes, RemotingCommand]) -> None:
        data, cmd = value
        _expect_java_ints(cmd)
        _expect_ascii_numbers(data)
        if _refused(cmd):
            return
        again = decode_json_header(encode_json_header(cmd))
        expect_equal(_fields(again), _fields(cmd), "re-encoded header")

    def seeds(self) -> list[bytes]:
        return [f.header for f in seeds.frames() if f.serialize_type == SerializeType.JSON]


_JAVA_INT_TEXT = re.compile(r"[+-]?[0-9]{1,10}", re.ASCII)


def _expect_ascii_numbers(header: bytes) -> None:
    """A numeric member written as a string was accepted: it must be what Java's Integer.parseInt
    takes (ASCII digits), not "١٢" or "１２", which Python's int() also reads."""
    try:
        members = json.loads(header)
    except (ValueError, RecursionError):
        return
    for name in ("code", "opaque", "flag", "version"):
        text = members.get(name)
        if isinstance(text, str):
            expect(bool(_JAVA_INT_TEXT.fullmatch(text)), f"member {name} {text[:20]!r} accepted as a number")


class RocketMQHeaderTarget(BaseTarget):
    name = "rocketmq_header"
    max_len = 8192

    def decode(self, data: bytes) -> RemotingCommand:
        return decode_rocketmq_header(data)

    def reencode(self, cmd: RemotingCommand) -> None:
        again = decode_rocketmq_header(encode_rocketmq_header(cmd))
        expect_equal(_fields(again), _fields(cmd), "re-encoded header")
        # what a JSON peer would get echoed (server-initiated requests are JSON)
        encode_json_header(cmd)

    def mutate(self, data: bytes, rng: random.Random, others: Sequence[bytes]) -> bytes:
        if rng.random() < 0.5:
            return mutate.mutate_rocketmq_header(data, rng)
        return mutate.mutate_bytes(data, rng, others)

    def seeds(self) -> list[bytes]:
        return [f.header for f in seeds.frames() if f.serialize_type == SerializeType.ROCKETMQ]


_HOST_FLAGS = 0x30   # sysFlag bits that follow the host addresses: re-encoding normalises them


def _message_view(msg: MessageExt) -> tuple[Any, ...]:
    return (msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset, msg.sys_flag & ~_HOST_FLAGS,
            msg.born_timestamp, msg.born_host[1], msg.store_timestamp, msg.store_host[1], msg.reconsume_times,
            msg.prepared_transaction_offset, msg.body, msg.topic, msg.properties)


class MessageTarget(BaseTarget):
    """Stored records as a pull answer's body carries them; each re-stored and read back."""

    name = "message"
    max_len = 16384

    def decode(self, data: bytes) -> list[MessageExt]:
        return decode_messages(data)

    def reencode(self, messages: list[MessageExt]) -> None:
        for msg in messages:
            msg.msg_id   # noqa: B018 -- what a pull answer's reader computes
            record = encode_message_record_bytes(
                topic=msg.topic, queue_id=msg.queue_id, flag=msg.flag, body=msg.body,
                properties=properties_to_string(msg.properties), sys_flag=msg.sys_flag,
                born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
                reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset,
                queue_offset=msg.queue_offset, physical_offset=msg.commit_log_offset,
                store_timestamp=msg.store_timestamp)
            again, end = decode_message(record)
            expect(end == len(record), "re-encoded record has trailing bytes")
            expect_equal(_message_view(again), _message_view(msg), "re-stored record")

    def seeds(self) -> list[bytes]:
        bodies = [f.body for f in seeds.frames() if f.name.startswith("broker_pull_found")]
        one = decode_message(bodies[0])[1]
        return bodies + [bodies[0][:one], seeds.apache_commit_log_head(4096)]


class BatchTarget(BaseTarget):
    name = "batch"
    max_len = 8192

    def decode(self, data: bytes) -> list[Any]:
        return decode_batch(data)

    def reencode(self, entries: list[Any]) -> None:
        expect(decode_batch(encode_batch(entries)) == entries, "batch does not round-trip")

    def seeds(self) -> list[bytes]:
        return [seeds.frame("client_send_batch_json").body]


_WELL_KNOWN = ("TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "REAL_TOPIC")


class PropertiesTarget(BaseTarget):
    """A property string (any text) parsed, written back, and looked up the dispatchers' way."""

    name = "properties"
    max_len = 4096

    def decode(self, data: bytes) -> tuple[str, dict[str, str]]:
        text = data.decode("utf-8", "replace")
        return text, string_to_properties(text)

    def reencode(self, value: tuple[str, dict[str, str]]) -> None:
        text, props = value
        written = properties_to_string(props)
        written.encode("utf-8")
        expect(string_to_properties(written) == props, "properties do not round-trip")
        for name in (*props, *_WELL_KNOWN):
            # the dispatchers' shortcut (tags code, index keys) must read what a full parse reads
            found = property_value(text, name + "\x01")
            expect((found or None) == props.get(name),
                   lambda name=name, found=found: f"property_value({name!r}) = {found!r}, parsed {props.get(name)!r}")
            java_string_hash(name)
        tags_string_to_tags_code(props.get("TAGS"))

    def seeds(self) -> list[bytes]:
        out = []
        for f in seeds.frames():
            if f.name.startswith("broker_pull_found"):
                out.extend(properties_to_string(m.properties).encode() for m in decode_messages(f.body)[:4])
        return out + [b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01FD00", b"\x01\x02\x01"]


class OffsetMsgIdTarget(BaseTarget):
    """An offset msgId (VIEW_MESSAGE_BY_ID, QUERY_MESSAGE answers) parsed and rebuilt."""

    name = "offset_msg_id"
    max_len = 128

    def decode(self, data: bytes) -> tuple[str, tuple[bytes, int, int]]:
        text = data.decode("utf-8", "replace")
        return text, decode_offset_msg_id(text)

    def reencode(self, value: tuple[str, tuple[bytes, int, int]]) -> None:
        text, (ip, port, offset) = value
        expect(create_offset_msg_id(ip, port, offset) == text.upper(), "msgId does not round-trip")

    def seeds(self) -> list[bytes]:
        body = seeds.frame("broker_pull_found_json").body
        msg = decode_message(body)[0]
        return [msg.msg_id.encode(), msg.msg_id.lower().encode(), b"0" * 56]


def _without_null_members(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_null_members(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_null_members(v) for v in value]
    return value


class FastjsonTarget(JsonTextTarget):
    """fastjson text (bodies, config files): read, written compact and pretty, read back."""

    name = "fastjson"
    max_len = 8192

    def decode(self, data: bytes) -> Any:
        return fastjson.loads(data)

    def reencode(self, value: Any) -> None:
        written = _without_null_members(value)   # fastjson leaves null members out
        for text in (fastjson.dumps(value), fastjson.dumps_pretty(value)):
            text.encode("utf-8")
            again = fastjson.loads(text)
            expect_equal(again, written, "written back and read again")

    def seeds(self) -> list[bytes]:
        return seeds.json_documents() + [b'{0:"a",{"b":1}:[1.5,-2]}', b"{'a':1}"]


BODY_CLASSES: tuple[type[admin_bodies.Body], ...] = (
    admin_bodies.TopicStatsTable, admin_bodies.ConsumeStats, admin_bodies.ResetOffsetBody,
    admin_bodies.ConsumerConnection, admin_bodies.KVTable, admin_bodies.ConsumerIdList,
    admin_bodies.LockBatchResult, namesrv_bodies.ClusterInfo, namesrv_bodies.TopicList,
)


def _example_bodies() -> list[admin_bodies.Body]:
    mq = admin_bodies.MessageQueue("TopicTest", "broker-a", 3)
    sub = admin_bodies.Subscription("TopicTest", "TagA || TagB", ("TagA", "TagB"), (2598919, 2598920), 17)
    return [
        admin_bodies.TopicStatsTable({mq: admin_bodies.TopicOffset(0, 250, 1700000000000)}),
        admin_bodies.ConsumeStats({mq: admin_bodies.OffsetWrapper(250, 200, 1700000000000)}, 1.5),
        admin_bodies.ResetOffsetBody({mq: 12}),
        admin_bodies.ConsumerConnection((admin_bodies.Connection("c1@1", "127.0.0.1:5000", "JAVA", 409),),
                                        {"TopicTest": sub}),
        admin_bodies.KVTable({"brokerVersion": "409", "msgPutTotalTodayNow": "7"}),
        admin_bodies.ConsumerIdList(("192.0.2.2@1234#5",)),
        admin_bodies.LockBatchResult((mq,)),
        namesrv_bodies.ClusterInfo({"broker-a": namesrv_bodies.BrokerData("DefaultCluster", "broker-a",
                                                                          {0: "127.0.0.1:10911"})},
                                   {"DefaultCluster": ("broker-a",)}),
        namesrv_bodies.TopicList(("TopicTest", "BatchTest"), "127.0.0.1:10911"),
    ]


class AdminBodyTarget(BaseTarget):
    """One typed admin body (the first byte picks which) decoded, encoded and decoded again."""

    name = "admin_body"
    max_len = 8192

    def decode(self, data: bytes) -> admin_bodies.Body:
        if not data:
            raise ProtocolError("empty")
        return BODY_CLASSES[data[0] % len(BODY_CLASSES)].decode(data[1:])

    def reencode(self, body: admin_bodies.Body) -> None:
        again = type(body).decode(body.encode())
        expect_equal(again, body, "re-encoded body")

    def mutate(self, data: bytes, rng: random.Random, others: Sequence[bytes]) -> bytes:
        if data and rng.random() < 0.5:
            return data[:1] + mutate.mutate_json_text(data[1:], rng)
        return mutate.mutate_bytes(data, rng, others)

    def seeds(self) -> list[bytes]:
        return [bytes([BODY_CLASSES.index(type(b))]) + b.encode() for b in _example_bodies()]


_OFFSET = struct.Struct(">q")
_PHYSICAL_OFFSET_AT = 28


class CommitLogWalkTarget(BaseTarget):
    """RecordWalker over arbitrary bytes placed where their first record says it was stored."""

    name = "commit_log_walk"
    max_len = 16384

    def decode(self, data: bytes) -> tuple[bytes, int, list[Any], list[Any]]:
        base = _OFFSET.unpack_from(data, _PHYSICAL_OFFSET_AT)[0] if len(data) >= 36 else 0
        walks = []
        for check_crc in (True, False):
            walker = RecordWalker(data, 0, len(data), file_from_offset=base, check_crc=check_crc)
            infos = list(walker)
            expect(walker.end is not None and 0 <= walker.position <= len(data), "walker lost its place")
            skipper = RecordWalker(data, 0, len(data), file_from_offset=base, check_crc=check_crc)
            skipper.skip_all()
            expect((skipper.end, skipper.position) == (walker.end, walker.position),
                   "skip_all stopped elsewhere than the walk")
            walks.append(infos)
        check_record(data, 0, len(data))
        return data, base, walks[0], walks[1]

    def reencode(self, value: tuple[bytes, int, list[Any], list[Any]]) -> None:
        data, base, with_crc, without_crc = value
        expect(without_crc[:len(with_crc)] == with_crc, "the CRC-checked walk is not a prefix of the other")
        pos = 0
        for info in without_crc:
            msg, end = decode_message(data, pos)   # what a walker accepts, a reader must read
            expect(end - pos == info.size and msg.topic == info.topic and msg.queue_id == info.queue_id
                   and msg.queue_offset == info.queue_offset and msg.commit_log_offset == base + pos,
                   "walker and decoder disagree")
            expect(info.properties == msg.properties, "walker and decoder read different properties")
            expect(info.tags_code == tags_string_to_tags_code(msg.tags), "tags code differs from the TAGS property")
            info.topic.encode("utf-8")
            pos = end

    def seeds(self) -> list[bytes]:
        head = seeds.apache_commit_log_head(16384)
        one = decode_message(head)[1]
        return [head, head[:one], head[one:one * 3], seeds.frame("broker_pull_found_json").body]


def _slave_events(data: bytes, expected: int, chunk: int | None) -> tuple[list[Any], ProtocolError | None]:
    session = SlaveSession(expected)
    events: list[Any] = []
    pieces = [data] if chunk is None else [data[i:i + chunk] for i in range(0, len(data), chunk)]
    try:
        for piece in pieces:
            session.receive_data(piece)
            while (event := session.next_event()) is not NEED_DATA:
                events.append(event)
            expect(session.buffered <= TRANSFER_HEADER.size + len(data), "slave buffers more than it received")
    except ProtocolError as exc:
        return events, exc
    return events, None


class HAFramesTarget(BaseTarget):
    """The HA port's two directions: the first byte picks the side and the slave's end.  Master
    side: the bytes as a slave's reports; slave side: the bytes as a master's transfers, fed whole
    and 3 bytes at a time (they must agree), the transfers re-framed and decoded again."""

    name = "ha_frames"
    max_len = 4096
    MASTER_MAX_OFFSET = 1 << 20

    def decode(self, data: bytes) -> Any:
        if not data:
            return ("none",)
        side, rest = data[0], data[1:]
        if side % 2 == 0:
            session = MasterSession(64 * 1024)
            acks = []
            try:
                for i in range(0, len(rest), 5):
                    ack = session.receive_data(rest[i:i + 5], self.MASTER_MAX_OFFSET)
                    if ack is not None:
                        expect(0 <= ack <= self.MASTER_MAX_OFFSET, f"ack {ack} out of range")
                        acks.append(ack)
            except ProtocolError:
                pass
            expect(len(session._pending) < SLAVE_REPORT.size, "master holds a whole report unread")
            return ("master", acks)
        expected = (side // 2) * 64   # 0 (an empty slave) or some end
        whole = _slave_events(rest, expected, None)
        pieces = _slave_events(rest, expected, 3)
        expect_equal(whole[0], pieces[0], "whole and piecewise events differ")
        expect((whole[1] is None) == (pieces[1] is None), "whole and piecewise errors differ")
        return ("slave", expected, whole[0])

    def reencode(self, value: Any) -> None:
        if value[0] != "slave":
            return
        _, expected, events = value
        data = b"".join(TRANSFER_HEADER.pack(e.phy_offset, len(e.body) if isinstance(e, Transfer) else 0)
                        + (e.body if isinstance(e, Transfer) else b"") for e in events)
        again, error = _slave_events(data, expected, None)
        expect(error is None, f"re-framed transfers refused: {error}")
        expect_equal(again, events, "re-framed transfers decode differently")

    def seeds(self) -> list[bytes]:
        transfers = TRANSFER_HEADER.pack(0, 5) + b"hello" + TRANSFER_HEADER.pack(5, 0) + TRANSFER_HEADER.pack(5, 2) + b"ok"
        return [b"\x00" + SLAVE_REPORT.pack(0) + SLAVE_REPORT.pack(4096), b"\x01" + transfers,
                b"\x03" + TRANSFER_HEADER.pack(64, 3) + b"abc"]


CODEC_TARGETS: tuple[Target, ...] = (
    FrameTarget(), JsonHeaderTarget(), RocketMQHeaderTarget(), MessageTarget(), BatchTarget(),
    PropertiesTarget(), OffsetMsgIdTarget(), FastjsonTarget(), AdminBodyTarget(), CommitLogWalkTarget(), HAFramesTarget(),
)


def all_targets() -> dict[str, Target]:
    """Every target by name, the store's recovery included (a fresh one: it owns a work dir)."""
    from tests.fuzz.store_target import StoreTarget

    return {t.name: t for t in (*CODEC_TARGETS, StoreTarget())}

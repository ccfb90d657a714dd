"""Frames captured from the real Java client 4.9.8 and Apache RocketMQ 4.9.8 servers
(tests/fixtures/frames/README.md): each decodes whole and byte by byte, re-encodes to the same
header, and its body parses with our body codecs."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from pyrmq.codec import fastjson
from pyrmq.codec.message import decode_batch, decode_messages, string_to_properties
from pyrmq.codec.remoting import NEED_DATA, FrameDecoder, SerializeType, encode_command

FRAMES = Path(__file__).resolve().parents[1] / "fixtures" / "frames"
ALL = sorted(p.name for p in FRAMES.glob("*.bin"))


def load(name: str) -> bytes:
    return (FRAMES / name).read_bytes()


def decode(data: bytes, step: int | None = None):
    decoder = FrameDecoder()
    frames = []
    step = step or len(data)
    for i in range(0, len(data), step):
        decoder.receive_data(data[i:i + step])
        frames.extend(decoder.frames())
    assert decoder.next_frame() is NEED_DATA and decoder.buffered == 0
    return frames


def test_fixtures_present():
    assert len(ALL) >= 40


@pytest.mark.parametrize("name", ALL)
def test_decodes_whole_and_byte_by_byte(name):
    data = load(name)
    [whole] = decode(data)
    assert decode(data, 1) == [whole]
    assert whole.serialize_type is (SerializeType.ROCKETMQ if name.endswith("_rocketmq.bin") else SerializeType.JSON)
    assert whole.language == "JAVA" and whole.version == 409
    is_request = name.startswith(("client_", "broker_register_broker", "broker_notify"))
    assert (whole.flag & 1) == (0 if is_request else 1)


@pytest.mark.parametrize("name", ALL)
def test_reencodes_to_the_same_header(name):
    data = load(name)
    [cmd] = decode(data)
    again = encode_command(cmd)
    if cmd.serialize_type is SerializeType.ROCKETMQ:
        assert again == data    # field order preserved: byte-identical
        return

    def split(frame: bytes) -> tuple[dict, bytes]:
        header_len = struct.unpack(">I", frame[4:8])[0] & 0xFFFFFF
        return json.loads(frame[8:8 + header_len]), frame[8 + header_len:]

    # Java writes extFields in HashMap order; the JSON value and the body must agree.
    assert split(again) == split(data)


def test_route_body_is_fastjson_with_quoted_keys_for_version_409():
    [cmd] = decode(load("namesrv_route_response_json.bin"))
    route = fastjson.loads(cmd.body)
    assert route["brokerDatas"][0]["brokerName"] == "broker-a"
    assert list(route["brokerDatas"][0]["brokerAddrs"]) == ["0"]
    assert route["queueDatas"][0]["writeQueueNums"] == 4


def test_pull_found_body_is_stored_records():
    [cmd] = decode(load("broker_pull_found_json.bin"))
    assert cmd.remark == "FOUND" and cmd.ext_fields["nextBeginOffset"] == "32"
    messages = decode_messages(cmd.body)
    assert len(messages) == 32
    assert all(m.body.startswith(b"Hello RocketMQ ") and m.topic == "TopicTest" for m in messages)
    assert [m.queue_offset for m in messages] == list(range(32))
    assert all(m.properties["TAGS"] == "TagA" and m.properties["CLUSTER"] == "DefaultCluster" for m in messages)
    assert all("WAIT" not in m.properties for m in messages)   # the 4.9.8 broker strips WAIT


def test_batch_body_entries():
    [cmd] = decode(load("client_send_batch_json.bin"))
    entries = decode_batch(cmd.body)
    assert [e.body for e in entries] == [b"Hello world 0", b"Hello world 1", b"Hello world 2"]
    assert [string_to_properties(e.properties)["KEYS"] for e in entries] == ["OrderID001", "OrderID002", "OrderID003"]
    assert cmd.ext_fields["m"] == "true" and cmd.ext_fields["i"] == "WAIT\x01true"


def test_heartbeat_and_register_bodies_parse():
    [hb] = decode(load("client_heartbeat_json.bin"))
    data = fastjson.loads(hb.body)
    assert data["consumerDataSet"][0]["groupName"] == "please_rename_unique_group_name_4"
    [reg] = decode(load("broker_register_broker_json.bin"))
    body = fastjson.loads(reg.body)
    assert "TBW102" in body["topicConfigSerializeWrapper"]["topicConfigTable"]

"""Tests for pyrmq.codec.message: golden vectors, layout, fast path vs construct."""

from __future__ import annotations

import struct
import zlib

import pytest
from construct import ConstError
from hypothesis import given, settings
from hypothesis import strategies as st

from construct_helpers import common
from pyrmq.codec import message as m
from pyrmq.codec.message import (
    BLANK_MAGIC_CODE,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    BatchEntry,
    MessageConst,
    MessageFormatError,
    MessageSysFlag,
    check_record,
    create_offset_msg_id,
    decode_batch,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    encode_batch,
    encode_message_record,
    encode_message_record_bytes,
    java_string_hash,
    properties_to_string,
    string_to_properties,
    tags_string_to_tags_code,
)

# ------------------------------------------------------------------ constants and helpers


def test_magic_codes_are_the_documented_unsigned_values():
    assert MAGIC_CODE_V1 & 0xFFFFFFFF == 0xDAA320A7
    assert MAGIC_CODE_V2 & 0xFFFFFFFF == 0xDAA320AB
    assert BLANK_MAGIC_CODE & 0xFFFFFFFF == 0xCBD43194


def test_sys_flag_transaction_helpers():
    f = MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.TRANSACTION_PREPARED_TYPE
    assert MessageSysFlag.transaction_value(f) == MessageSysFlag.TRANSACTION_PREPARED_TYPE
    g = MessageSysFlag.reset_transaction_value(f, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
    assert g == MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.TRANSACTION_COMMIT_TYPE
    assert MessageSysFlag.reset_transaction_value(0xFF, 0) == 0xF3


def test_message_const_names():
    assert MessageConst.PROPERTY_TAGS == "TAGS"
    assert MessageConst.PROPERTY_WAIT_STORE_MSG_OK == "WAIT"
    assert MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY"
    assert MessageConst.PROPERTY_REAL_QUEUE_ID == "REAL_QID"
    assert MessageConst.PROPERTY_TRACE_SWITCH == "TRACE_ON"
    assert MessageConst.PROPERTY_PRODUCER_GROUP == "PGROUP"


@pytest.mark.parametrize(
    "text, code",
    [("TagA", 2598919), ("中文", 646394), ("😀", 1772899), ("TopicTest#KEY1", -1656969516), ("", 0)],
)
def test_java_string_hash_vectors(text, code):
    assert java_string_hash(text) == code


def test_tags_code():
    assert tags_string_to_tags_code(None) == 0
    assert tags_string_to_tags_code("") == 0
    assert tags_string_to_tags_code("TagA") == 2598919
    assert -(2**31) <= tags_string_to_tags_code("x" * 1000) < 2**31


@pytest.mark.parametrize(
    "s, expected",
    [
        ("", {}),
        ("a\x01b\x02", {"a": "b"}),
        ("a\x01b", {"a": "b"}),  # last chunk without separator
        ("a\x01b\x02c\x01d\x02", {"a": "b", "c": "d"}),
        ("\x01b\x02", {}),  # empty name dropped
        ("a\x01\x02", {}),  # empty value dropped
        ("ab\x02", {}),  # no name/value separator
        ("a\x01b\x01c\x02", {"a": "b\x01c"}),  # first separator splits
        ("a\x01b\x02a\x01c\x02", {"a": "c"}),  # last duplicate wins
        ("\x02\x02a\x01b", {"a": "b"}),
        ("\x01\x01b\x02", {}),  # separator at chunk start
        ("ab\x02c\x01d", {"c": "d"}),  # Java finds the separator in a later chunk: dropped chunk
    ],
)
def test_string_to_properties_java_rule(s, expected):
    assert string_to_properties(s) == expected


def test_properties_to_string():
    assert properties_to_string({}) == ""
    # Java messageProperties2String: no trailing separator, Java HashMap iteration order
    assert properties_to_string({"a": "1", "b": "2"}) == "a\x011\x02b\x012"
    assert properties_to_string({"b": "2", "a": "1"}) == "a\x011\x02b\x012"   # buckets 1 and 2
    assert properties_to_string({"a": None, "b": "2"}) == "b\x012"  # type: ignore[dict-item]


def test_properties_order_is_the_java_brokers():
    # From the Apache 4.9.8 broker's stored record (tests/fixtures/frames/broker_pull_found_json.bin):
    # client string UNIQ_KEY, WAIT, TAGS; the broker added CLUSTER and dropped WAIT.
    props = {"UNIQ_KEY": "FD00", "WAIT": "true", "TAGS": "TagA", "CLUSTER": "DefaultCluster"}
    del props["WAIT"]
    assert properties_to_string(props, 4) == "UNIQ_KEY\x01FD00\x02CLUSTER\x01DefaultCluster\x02TAGS\x01TagA"
    many = {f"k{i}": str(i) for i in range(13)}   # 13 entries: the Java map has grown to 32 buckets
    assert properties_to_string(many).split("\x02")[:3] == ["k0\x010", "k1\x011", "k2\x012"]


@given(st.dictionaries(
    st.text(alphabet=st.characters(blacklist_characters="\x01\x02"), min_size=1),
    st.text(alphabet=st.characters(blacklist_characters="\x01\x02"), min_size=1),
))
def test_properties_round_trip(props):
    assert string_to_properties(properties_to_string(props)) == props


def test_offset_msg_id_example_from_spec():
    msg_id = create_offset_msg_id(bytes([10, 0, 0, 1]), 10911, 0x1A2B)
    assert msg_id == "0A00000100002A9F0000000000001A2B"
    assert decode_offset_msg_id(msg_id) == (bytes([10, 0, 0, 1]), 10911, 0x1A2B)
    assert decode_offset_msg_id(msg_id.lower()) == (bytes([10, 0, 0, 1]), 10911, 0x1A2B)


def test_offset_msg_id_ipv6():
    ip = bytes(range(16))
    msg_id = create_offset_msg_id(ip, 1, 2)
    assert len(msg_id) == 56
    assert decode_offset_msg_id(msg_id) == (ip, 1, 2)


@pytest.mark.parametrize("bad", ["", "00", "Z" * 32, "0" * 33, "0" * 55, " " * 32, "0A 00 00 01" + "0" * 21, "٠" * 32])
def test_offset_msg_id_bad_input(bad):
    with pytest.raises(MessageFormatError):   # a ValueError and a ProtocolError
        decode_offset_msg_id(bad)


# ------------------------------------------------------------------ stored record

FIELDS = dict(
    topic="TopicTest", queue_id=3, flag=7, body=b"Hello RocketMQ", properties="TAGS\x01TagA\x02",
    sys_flag=0, born_timestamp=1700000000000, born_host=("192.168.0.2", 50123),
    store_host=("10.0.0.1", 10911), queue_offset=42, physical_offset=4096,
    store_timestamp=1700000000123, reconsume_times=1, prepared_transaction_offset=0,
)


def hand_built_record(f=FIELDS) -> bytes:
    """A V1/IPv4 record assembled field by field at the offsets documented in message.md §2."""
    body = f["body"]
    topic = f["topic"].encode()
    props = f["properties"].encode()
    total = 91 + len(body) + len(topic) + len(props)
    buf = bytearray(total)
    struct.pack_into(">i", buf, 0, total)
    struct.pack_into(">I", buf, 4, 0xDAA320A7)
    struct.pack_into(">i", buf, 8, zlib.crc32(body) & 0x7FFFFFFF)
    struct.pack_into(">i", buf, 12, f["queue_id"])
    struct.pack_into(">i", buf, 16, f["flag"])
    struct.pack_into(">q", buf, 20, f["queue_offset"])
    struct.pack_into(">q", buf, 28, f["physical_offset"])
    struct.pack_into(">i", buf, 36, f["sys_flag"])
    struct.pack_into(">q", buf, 40, f["born_timestamp"])
    buf[48:52] = bytes(int(x) for x in f["born_host"][0].split("."))
    struct.pack_into(">i", buf, 52, f["born_host"][1])
    struct.pack_into(">q", buf, 56, f["store_timestamp"])
    buf[64:68] = bytes(int(x) for x in f["store_host"][0].split("."))
    struct.pack_into(">i", buf, 68, f["store_host"][1])
    struct.pack_into(">i", buf, 72, f["reconsume_times"])
    struct.pack_into(">q", buf, 76, f["prepared_transaction_offset"])
    struct.pack_into(">i", buf, 84, len(body))
    buf[88:88 + len(body)] = body
    p = 88 + len(body)
    buf[p] = len(topic)
    buf[p + 1:p + 1 + len(topic)] = topic
    p += 1 + len(topic)
    struct.pack_into(">h", buf, p, len(props))
    buf[p + 2:] = props
    return bytes(buf)


def test_record_is_byte_exact_with_the_documented_layout():
    data = encode_message_record_bytes(**FIELDS)
    assert data == hand_built_record()
    assert len(data) == 91 + len(FIELDS["body"]) + len(FIELDS["topic"]) + len(FIELDS["properties"])


def test_unencodable_properties_are_a_format_error():
    with pytest.raises(MessageFormatError):
        encode_message_record_bytes(**dict(FIELDS, properties="A\x01\ud800"))


def test_encode_into_buffer_at_position():
    buf = bytearray(1000)
    n = encode_message_record(buf, 100, **FIELDS)
    assert buf[100:100 + n] == hand_built_record()
    assert buf[:100] == bytes(100) and buf[100 + n:] == bytes(1000 - 100 - n)
    with pytest.raises(MessageFormatError):
        encode_message_record(bytearray(50), 0, **FIELDS)


def test_record_construct_common():
    data = hand_built_record()
    obj = dict(
        total_size=len(data), magic=MAGIC_CODE_V1, body_crc=zlib.crc32(FIELDS["body"]) & 0x7FFFFFFF,
        queue_id=3, flag=7, queue_offset=42, physical_offset=4096, sys_flag=0,
        born_timestamp=1700000000000, born_host=bytes([192, 168, 0, 2]), born_port=50123,
        store_timestamp=1700000000123, store_host=bytes([10, 0, 0, 1]), store_port=10911,
        reconsume_times=1, prepared_transaction_offset=0, body_length=len(FIELDS["body"]),
        body=FIELDS["body"], topic_length=9, topic=b"TopicTest", properties_length=10,
        properties=b"TAGS\x01TagA\x02",
    )
    common(m.MessageRecordV1, data, obj)
    with pytest.raises(ConstError):
        m.MessageRecordV2.parse(data)


def test_decode_message_fields():
    data = hand_built_record()
    msg, nxt = decode_message(data)
    assert nxt == len(data)
    assert msg.topic == "TopicTest" and msg.body == b"Hello RocketMQ"
    assert msg.born_host == ("192.168.0.2", 50123) and msg.store_host == ("10.0.0.1", 10911)
    assert msg.queue_offset == 42 and msg.commit_log_offset == 4096
    assert msg.store_timestamp == 1700000000123 and msg.reconsume_times == 1
    assert msg.tags == "TagA" and msg.keys is None
    assert msg.msg_id == create_offset_msg_id(bytes([10, 0, 0, 1]), 10911, 4096)
    assert msg.store_size == len(data) and msg.magic == MAGIC_CODE_V1


def test_v2_magic_for_long_topics_and_ipv6_hosts():
    f = dict(FIELDS, topic="%RETRY%" + "g" * 200, born_host=("::1", 1), store_host=("fe80::2", 2))
    data = encode_message_record_bytes(**f)
    assert struct.unpack_from(">i", data, 4)[0] == MAGIC_CODE_V2
    msg, _ = decode_message(data)
    assert msg.topic == f["topic"]
    assert msg.born_host == ("::1", 1) and msg.store_host == ("fe80::2", 2)
    assert msg.sys_flag & (MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG) == 0x30
    assert m.MessageRecordV2.parse(data).topic == f["topic"].encode()
    assert len(data) == m.record_length(msg.sys_flag, len(f["body"]), len(f["topic"]),
                                        len(f["properties"]), MAGIC_CODE_V2)
    assert len(msg.msg_id) == 56


def test_decode_messages_splits_a_pull_body():
    recs = [encode_message_record_bytes(**dict(FIELDS, queue_offset=i, body=bytes([i]) * i))
            for i in range(5)]
    msgs = decode_messages(b"".join(recs))
    assert [x.queue_offset for x in msgs] == list(range(5))
    assert [x.body for x in msgs] == [bytes([i]) * i for i in range(5)]


def test_decode_rejects_truncation_at_every_length():
    data = hand_built_record()
    for n in range(len(data)):
        with pytest.raises(MessageFormatError):
            decode_messages(data[:n] if n else b"\x00")
    assert check_record(data, 0, len(data)) is not None


def test_decode_rejects_inconsistent_lengths():
    data = bytearray(hand_built_record())
    struct.pack_into(">i", data, 84, 10**6)  # body length beyond the record
    with pytest.raises(MessageFormatError):
        decode_message(bytes(data))
    data = bytearray(hand_built_record())
    struct.pack_into(">i", data, 0, len(data) + 1)  # TOTALSIZE beyond the data
    with pytest.raises(MessageFormatError):
        decode_message(bytes(data) + b"\x00")
    data = bytearray(hand_built_record())
    struct.pack_into(">i", data, 4, 12345)
    with pytest.raises(MessageFormatError):
        decode_message(bytes(data))


def test_check_record_detects_crc_and_blank_and_offset():
    data = hand_built_record()
    info = check_record(data, 0, len(data), expected_offset=4096)
    assert info.tags_code == 2598919 and info.size == len(data) and info.queue_offset == 42
    assert check_record(data, 0, len(data), expected_offset=0) is None
    bad = bytearray(data)
    bad[90] ^= 0xFF  # inside the body
    assert check_record(bytes(bad), 0, len(bad)) is None
    assert check_record(bytes(bad), 0, len(bad), check_crc=False) is not None
    blank = struct.pack(">ii", 100, BLANK_MAGIC_CODE)
    assert check_record(blank, 0, 8) == 0


def test_check_record_rejects_every_zeroed_suffix():
    data = hand_built_record()
    for p in range(len(data)):
        torn = data[:p] + bytes(len(data) - p)
        assert check_record(torn, 0, len(torn), check_crc=True) is None, p


# ------------------------------------------------------------------ fast path vs construct

hosts_v4 = st.tuples(st.binary(min_size=4, max_size=4), st.integers(0, 65535))
hosts_v6 = st.tuples(st.binary(min_size=16, max_size=16), st.integers(0, 65535))
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def records(draw):
    born = draw(st.one_of(hosts_v4, hosts_v6))
    store = draw(st.one_of(hosts_v4, hosts_v6))
    sys_flag = draw(st.integers(0, 0x70F)) & ~0x30
    sys_flag |= (0x10 if len(born[0]) == 16 else 0) | (0x20 if len(store[0]) == 16 else 0)
    v2 = draw(st.booleans())
    topic = draw(st.binary(min_size=1, max_size=300 if v2 else 127))
    body = draw(st.binary(max_size=200))
    props = draw(st.binary(max_size=100))
    magic = MAGIC_CODE_V2 if v2 else MAGIC_CODE_V1
    total = m.record_length(sys_flag, len(body), len(topic), len(props), magic)
    return dict(
        total_size=total, magic=magic, body_crc=draw(i32), queue_id=draw(i32), flag=draw(i32),
        queue_offset=draw(i64), physical_offset=draw(i64), sys_flag=sys_flag,
        born_timestamp=draw(i64), born_host=born[0], born_port=born[1],
        store_timestamp=draw(i64), store_host=store[0], store_port=store[1],
        reconsume_times=draw(i32), prepared_transaction_offset=draw(i64),
        body_length=len(body), body=body, topic_length=len(topic), topic=topic,
        properties_length=len(props), properties=props,
    )


COMPILED = {m.MessageRecordV1: m.MessageRecordV1.compile(), m.MessageRecordV2: m.MessageRecordV2.compile()}


def fmt_for(obj):
    return m.MessageRecordV1 if obj["magic"] == MAGIC_CODE_V1 else m.MessageRecordV2


@settings(max_examples=150)
@given(records())
def test_construct_built_record_parses_with_struct_fast_path(obj):
    data = fmt_for(obj).build(obj)
    assert len(data) == obj["total_size"]
    fields, body_start, body_len, topic_start, topic_len, prop_start, prop_len = m._decode_fields(
        data, 0, len(data))
    prefix_names = ["total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset",
                    "physical_offset", "sys_flag", "born_timestamp", "born_host", "born_port",
                    "store_timestamp", "store_host", "store_port", "reconsume_times",
                    "prepared_transaction_offset", "body_length"]
    assert dict(zip(prefix_names, fields)) == {k: obj[k] for k in prefix_names}
    assert data[body_start:body_start + body_len] == obj["body"]
    assert data[topic_start:topic_start + topic_len] == obj["topic"]
    assert data[prop_start:prop_start + prop_len] == obj["properties"]


hosts_text = st.one_of(
    st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
    st.tuples(st.ip_addresses(v=6).map(str), st.integers(0, 65535)),
)


@settings(max_examples=150)
@given(
    topic=st.text(alphabet="abcXYZ%|_-0123456789", min_size=1, max_size=250),
    body=st.binary(max_size=300),
    props=st.dictionaries(st.text("KEYSTAGabc", min_size=1, max_size=5),
                          st.text(st.characters(blacklist_characters="\x01\x02",
                                                blacklist_categories=("Cs",)), min_size=1,
                                  max_size=20), max_size=4),
    born=hosts_text, store=hosts_text, sys_flag=st.integers(0, 0x70F),
    queue_id=i32, flag=i32, queue_offset=i64, physical_offset=i64, born_ts=i64, store_ts=i64,
    reconsume=i32, prepared=i64,
)
def test_struct_fast_path_record_parses_with_construct(topic, body, props, born, store, sys_flag,
                                                       queue_id, flag, queue_offset,
                                                       physical_offset, born_ts, store_ts,
                                                       reconsume, prepared):
    prop_str = properties_to_string(props)
    data = encode_message_record_bytes(
        topic=topic, queue_id=queue_id, flag=flag, body=body, properties=prop_str,
        sys_flag=sys_flag, born_timestamp=born_ts, born_host=born, store_host=store,
        queue_offset=queue_offset, physical_offset=physical_offset, store_timestamp=store_ts,
        reconsume_times=reconsume, prepared_transaction_offset=prepared,
    )
    magic = struct.unpack_from(">i", data, 4)[0]
    assert magic == (MAGIC_CODE_V1 if len(topic) <= 127 else MAGIC_CODE_V2)
    fmt = m.MessageRecordV1 if magic == MAGIC_CODE_V1 else m.MessageRecordV2
    parsed = fmt.parse(data)
    assert parsed.total_size == len(data)
    assert parsed.body == body and parsed.topic == topic.encode()
    assert parsed.properties == prop_str.encode()
    assert parsed.body_crc == zlib.crc32(body) & 0x7FFFFFFF
    assert (parsed.queue_id, parsed.flag, parsed.queue_offset, parsed.physical_offset) == (
        queue_id, flag, queue_offset, physical_offset)
    assert parsed.born_port == born[1] and parsed.store_port == store[1]
    assert m.bytes_to_host(parsed.born_host) == m.bytes_to_host(m.host_to_bytes(born[0]))
    assert COMPILED[fmt].parse(data) == parsed
    assert fmt.build(parsed) == data
    msg, _ = decode_message(data)
    assert msg.properties == props and msg.topic == topic and msg.body == body
    assert msg.store_timestamp == store_ts == m.pickup_store_timestamp(data)


# ------------------------------------------------------------------ batch


def test_batch_entry_golden():
    data = encode_batch([BatchEntry(5, b"ab", "K\x01v\x02")])
    expected = struct.pack(">iiiii", 20 + 2 + 2 + 4, 0, 0, 5, 2) + b"ab" + struct.pack(">h", 4) + b"K\x01v\x02"
    assert data == expected
    common(m.BatchEntryFormat, data, dict(total_size=28, magic=0, body_crc=0, flag=5,
                                          body_length=2, body=b"ab", properties_length=4,
                                          properties=b"K\x01v\x02"))
    assert decode_batch(data) == [BatchEntry(5, b"ab", "K\x01v\x02")]
    assert decode_batch(memoryview(data)) == [BatchEntry(5, b"ab", "K\x01v\x02")]


@given(st.lists(st.builds(BatchEntry, i32, st.binary(max_size=50), st.text(max_size=20)), max_size=8))
def test_batch_round_trip_and_construct_agreement(entries):
    data = encode_batch(entries)
    assert decode_batch(data) == entries
    pos = 0
    for e in entries:
        parsed = m.BatchEntryFormat.parse(data[pos:])
        assert (parsed.flag, parsed.body, parsed.properties.decode()) == (e.flag, e.body, e.properties)
        pos += parsed.total_size
    assert pos == len(data)


def test_batch_rejects_truncation_and_bad_lengths():
    data = encode_batch([BatchEntry(1, b"hello", "a\x01b\x02"), BatchEntry(2, b"x", "")])
    for n in range(1, len(data)):
        if n == 31:  # exactly the first entry
            assert len(decode_batch(data[:n])) == 1
            continue
        with pytest.raises(MessageFormatError):
            decode_batch(data[:n])
    bad = bytearray(data)
    struct.pack_into(">i", bad, 16, 2**31 - 1)  # body length
    with pytest.raises(MessageFormatError):
        decode_batch(bytes(bad))
    bad = bytearray(data)
    struct.pack_into(">i", bad, 0, -5)
    with pytest.raises(MessageFormatError):
        decode_batch(bytes(bad))
    with pytest.raises(MessageFormatError):
        decode_batch(encode_batch([BatchEntry(0, b"", "")] * 3), max_entries=2)


def test_message_format_error_is_in_the_protocol_error_family():
    from pyrmq.codec.errors import ProtocolError

    assert issubclass(MessageFormatError, ProtocolError)
    assert issubclass(MessageFormatError, ValueError)


def test_check_record_accepts_java_498_property_strings():
    # 4.9.8's messageProperties2String drops the trailing separator
    data = encode_message_record_bytes(**dict(FIELDS, properties="TAGS\x01TagA\x02KEYS\x01k"))
    info = check_record(data, 0, len(data))
    assert info.properties == {"TAGS": "TagA", "KEYS": "k"} and info.keys == "k"
    assert info.properties_string == "TAGS\x01TagA\x02KEYS\x01k"
    assert info.tags_code == tags_string_to_tags_code("TagA")
    empty = encode_message_record_bytes(**dict(FIELDS, properties=""))
    assert check_record(empty, 0, len(empty)).properties == {}


def test_ipv4_mapped_hosts_are_stored_as_ipv4():
    data = encode_message_record_bytes(**dict(FIELDS, born_host=("::ffff:192.168.0.2", 50123)))
    assert data == hand_built_record()


def test_property_value_agrees_with_full_parse():
    from pyrmq.codec.message import property_value
    s = "KEYS\x01a b\x02XTAGS\x01no\x02TAGS\x01T1\x02UNIQ_KEY\x01U\x02TAGS\x01T2"
    assert property_value(s, "TAGS\x01") == string_to_properties(s)["TAGS"] == "T2"   # last one wins
    assert property_value(s, "KEYS\x01") == "a b"
    assert property_value(s, "UNIQ_KEY\x01") == "U"
    assert property_value(s, "DELAY\x01") is None
    assert property_value("XTAGS\x01no", "TAGS\x01") is None   # a longer name is not the property
    # an empty value is no value (Java's string2messageProperties skips it): it hides nothing
    s = "TAGS\x01a\x02KEYS\x01k\x02TAGS\x01"
    assert property_value(s, "TAGS\x01") == string_to_properties(s)["TAGS"] == "a"
    assert property_value("TAGS\x01", "TAGS\x01") is None


@settings(max_examples=200, deadline=None)
@given(ip=st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16)),
       port=st.integers(0, 65535), offset=st.integers(0, 2**63 - 1))
def test_offset_msg_id_is_its_store_hosts_prefix_and_the_offset(ip, port, offset):
    assert m.offset_msg_id_prefix(ip, port) + f"{offset:016X}" == create_offset_msg_id(ip, port, offset)

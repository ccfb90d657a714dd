"""Frame and header codec: golden cases, byte-at-a-time feeding, bad input, round trips."""

from __future__ import annotations

import json
import re
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyrmq.codec import remoting
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.remoting import (
    NEED_DATA,
    FramePrefix,
    FrameDecoder,
    RemotingCommand,
    RocketMQHeader,
    SerializeType,
    decode_json_header,
    decode_rocketmq_header,
    encode_command,
    encode_command_buffers,
    encode_rocketmq_header,
)

# The Java 4.9.8 request of spec/remoting.md §5.1 (verified there), framed.
JAVA_ROUTE_REQUEST_HEADER = (b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
                             b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}')
GO_ROUTE_REQUEST_HEADER = (b'{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"",'
                           b'"extFields":{"topic":"TopicTest"}}')
CPP_PULL_HEADER = (b'{"code":11,"extFields":{"AccessKey":"","queueId":0,"maxMsgNums":32,"sysFlag":2,'
                   b'"topic":"T"},"flag":0,"language":"CPP","opaque":1,"remark":"","version":333}\n')


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def decode_all(data: bytes, chunk: int | None = None) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    out = []
    step = chunk or len(data) or 1
    for i in range(0, len(data), step):
        decoder.receive_data(data[i:i + step])
        out.extend(decoder.frames())
    assert decoder.next_frame() is NEED_DATA
    return out


GOLDEN = [
    (frame(JAVA_ROUTE_REQUEST_HEADER),
     RemotingCommand(code=105, opaque=7, flag=0, ext_fields={"topic": "TopicTest"}, language="JAVA", version=409)),
    (frame(GO_ROUTE_REQUEST_HEADER),
     RemotingCommand(code=105, opaque=1, flag=0, remark="", ext_fields={"topic": "TopicTest"}, language="GO",
                     version=317)),
    # C++: numbers in extFields become their text, trailing newline accepted.
    (frame(CPP_PULL_HEADER),
     RemotingCommand(code=11, opaque=1, remark="", language="CPP", version=333,
                     ext_fields={"AccessKey": "", "queueId": "0", "maxMsgNums": "32", "sysFlag": "2", "topic": "T"})),
    (frame(b'{"code":0,"flag":1,"language":"JAVA","opaque":7,"version":409}', b"\x00body"),
     RemotingCommand(code=0, opaque=7, flag=1, language="JAVA", version=409, body=b"\x00body")),
]


@pytest.mark.parametrize("data,expected", GOLDEN)
@pytest.mark.parametrize("chunk", [None, 1, 3])
def test_golden_frames(data, expected, chunk):
    [cmd] = decode_all(data, chunk)
    assert cmd == expected


@pytest.mark.parametrize("data,expected", GOLDEN)
def test_golden_frames_with_trailing_bytes(data, expected):
    decoder = FrameDecoder()
    decoder.receive_data(data + data[:5])
    assert decoder.next_frame() == expected
    assert decoder.next_frame() is NEED_DATA
    assert decoder.buffered == 5


def test_many_frames_in_one_receive():
    data = b"".join(g[0] for g in GOLDEN) * 10
    assert decode_all(data) == [g[1] for g in GOLDEN] * 10


def _frame_by_frame(data: bytes) -> tuple[list[RemotingCommand], str | None]:
    """``data`` decoded by ``next_frame`` alone, one frame at a time: the commands, and the
    refusal that ends them (None when the rest is a partial frame)."""
    decoder = FrameDecoder(max_frame_bytes=4096)
    decoder.receive_data(data)
    out = []
    try:
        while (cmd := decoder.next_frame()) is not NEED_DATA:
            out.append(cmd)
    except ProtocolError as exc:
        return out, str(exc)
    return out, None


_MIXED = [
    encode_command(RemotingCommand(code=310, opaque=1, ext_fields={"a": "g", "b": "T"}, body=b"x" * 50,
                                   serialize_type=SerializeType.ROCKETMQ, language="GO", version=317)),
    GOLDEN[0][0],
    encode_command(RemotingCommand(code=11, opaque=2, remark="r", serialize_type=SerializeType.ROCKETMQ)),
    encode_command(RemotingCommand(code=0, opaque=3, flag=1, serialize_type=SerializeType.ROCKETMQ)),
    frame(struct.pack(">hBhiii", 1, 0, 1, 1, 0, 0) + struct.pack(">i", 3) + b"\x00\x09x", serialize_type=1),
    frame(b"{}", serialize_type=2),
]


@given(picks=st.lists(st.integers(0, len(_MIXED) - 1), max_size=8),
       cuts=st.lists(st.integers(min_value=1, max_value=800), max_size=6), tail=st.integers(0, 40))
def test_frames_in_runs_decode_as_frame_by_frame(picks, cuts, tail):
    # frames() decodes runs of ROCKETMQ frames in one call each; in any chunks, what it yields and
    # the refusal it stops at are next_frame's, one frame at a time
    data = b"".join(_MIXED[i] for i in picks)
    data += _MIXED[0][:tail]
    expected, refusal = _frame_by_frame(data)
    decoder = FrameDecoder(max_frame_bytes=4096)
    out: list[RemotingCommand] = []
    fed = 0
    try:
        for cut in sorted({min(c, len(data)) for c in cuts} | {len(data)}):
            decoder.receive_data(data[fed:cut])
            fed = cut
            out.extend(decoder.frames())
    except ProtocolError as exc:
        assert str(exc) == refusal
    else:
        assert refusal is None
    assert out == expected


BIG_BODY = bytes(range(256)) * (remoting.JOIN_ONCE_BYTES // 256 + 3)


@given(cuts=st.lists(st.integers(min_value=1, max_value=len(BIG_BODY) + 300), max_size=12),
       tail=st.integers(min_value=0, max_value=3))
def test_large_frames_joined_once_in_any_chunks(cuts, tail):
    # a frame past JOIN_ONCE_BYTES is kept as its chunks and joined when whole; the frames after
    # it, whole or cut, come out as if fed at once
    big = frame(JAVA_ROUTE_REQUEST_HEADER, BIG_BODY)
    small, expected = GOLDEN[3]
    data = big + small + small[:tail]
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    fed = 0
    for cut in sorted({min(c, len(data)) for c in cuts} | {len(data)}):
        decoder.receive_data(data[fed:cut])
        fed = cut
        out.extend(decoder.frames())
        decoded = (len(big) if out else 0) + (len(small) if len(out) > 1 else 0)
        assert decoder.buffered == fed - decoded
    assert [c.body for c in out] == [BIG_BODY, expected.body]
    assert out[1] == expected
    assert decoder.buffered == tail


def test_rocketmq_header_layout_matches_spec():
    cmd = RemotingCommand(code=310, opaque=9, flag=0, remark="hi", ext_fields={"b": "T"},
                          language="JAVA", version=409, serialize_type=SerializeType.ROCKETMQ)
    header = encode_rocketmq_header(cmd)
    # 21-byte fixed part, remark, map: {keyLen:int16 key valLen:int32 val}
    assert header == (struct.pack(">hBhii", 310, 0, 409, 9, 0) + struct.pack(">i", 2) + b"hi"
                      + struct.pack(">i", 2 + 1 + 4 + 1) + struct.pack(">h", 1) + b"b" + struct.pack(">i", 1) + b"T")
    parsed = RocketMQHeader.parse(header)
    assert (parsed.code, parsed.opaque, parsed.remark) == (310, 9, "hi")
    assert [(e.key, e.value) for e in parsed.ext] == [("b", "T")]
    assert RocketMQHeader.build(dict(code=310, language=0, version=409, opaque=9, flag=0, remark="hi",
                                     ext=[dict(key="b", value="T")])) == header
    assert decode_rocketmq_header(header) == cmd


def test_frame_prefix_declaration_agrees_with_encoder():
    data = encode_command(RemotingCommand(code=34, opaque=1, body=b"xyz"))
    prefix = FramePrefix.parse(data[:8])
    assert prefix.length == len(data) - 4
    assert prefix.header_word >> 24 == 0
    assert FramePrefix.compile().parse(data[:8]) == prefix


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_buffer_body_is_passed_through_and_frames_like_the_joined_body(serialize_type):
    records = [memoryview(b"record-one"), memoryview(b""), memoryview(b"record-two!")]

    def answer(body):
        return RemotingCommand(code=0, opaque=9, flag=1, remark="FOUND", ext_fields={"maxOffset": "3"},
                               body=body, serialize_type=serialize_type)

    buffers = encode_command_buffers(answer(records))
    assert len(buffers) == 3 and buffers[1] is records[0] and buffers[2] is records[2]   # not copied
    assert b"".join(buffers) == encode_command(answer(b"record-onerecord-two!"))
    [back] = decode_all(b"".join(buffers))
    assert back.body == b"record-onerecord-two!"
    assert encode_command_buffers(answer(None)) == [encode_command(answer(b""))]


def test_rocketmq_null_remark_and_empty_values():
    header = struct.pack(">hBhii", 11, 9, 317, 1, 0) + struct.pack(">i", 0) + struct.pack(">i", 2 + 1 + 4) \
        + struct.pack(">h", 1) + b"k" + struct.pack(">i", 0)
    cmd = decode_rocketmq_header(header)
    assert cmd.remark is None
    assert cmd.language == "GO"
    assert cmd.ext_fields == {}   # zero-length value decodes to null in Java and is dropped


text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@given(code=st.integers(-32768, 32767), opaque=st.integers(-2**31, 2**31 - 1), flag=st.sampled_from([0, 1, 2, 3]),
       remark=st.one_of(st.none(), text.filter(bool)),
       ext=st.one_of(st.none(), st.dictionaries(text.filter(bool), text.filter(bool), max_size=5)),
       body=st.one_of(st.none(), st.binary(min_size=1, max_size=100)),
       serialize_type=st.sampled_from(list(SerializeType)))
def test_round_trip(code, opaque, flag, remark, ext, body, serialize_type):
    cmd = RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body,
                          serialize_type=serialize_type)
    [back] = decode_all(encode_command(cmd))
    if serialize_type is SerializeType.ROCKETMQ and ext == {}:
        ext = None   # an empty map is not distinguishable from none in the binary header
    assert back == RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body,
                                   serialize_type=serialize_type)


def test_json_encoder_writes_fastjson_layout():
    cmd = RemotingCommand(code=17, opaque=7, flag=1, remark="No topic route info in name server for the topic: X")
    header = encode_command(cmd)[8:]
    assert header == (b'{"code":17,"flag":1,"language":"JAVA","opaque":7,"remark":"No topic route info in name '
                      b'server for the topic: X","serializeTypeCurrentRPC":"JSON","version":409}')
    assert json.loads(encode_command(RemotingCommand(code=0, ext_fields={"a": "\x01"}))[8:])["extFields"] == {"a": "\x01"}


BAD = [
    ("frame over the limit", struct.pack(">I", 16 * 1024 * 1024) + b"\x00" * 8),
    ("header longer than frame", struct.pack(">II", 10, 100) + b"{}" * 3),
    ("unknown serialize type", struct.pack(">II", 6, (7 << 24) | 2) + b"{}"),
    ("malformed json", frame(b'{"code":')),
    ("json not an object", frame(b'[1,2]')),
    ("json code not int", frame(b'{"code":"x"}')),
    ("json extFields not object", frame(b'{"code":1,"extFields":[1]}')),
    ("binary header too short", frame(b"\x00" * 10, serialize_type=1)),
    ("binary remark overruns", frame(struct.pack(">hBhiii", 1, 0, 1, 1, 0, 1000) + b"\x00\x00\x00\x00", serialize_type=1)),
    ("binary ext overruns", frame(struct.pack(">hBhiii", 1, 0, 1, 1, 0, 0) + struct.pack(">i", 50) + b"\x00" * 4,
                                  serialize_type=1)),
    ("binary key overruns", frame(struct.pack(">hBhiii", 1, 0, 1, 1, 0, 0) + struct.pack(">i", 3) + b"\x00\x09x",
                                  serialize_type=1)),
    ("length shorter than header word", struct.pack(">I", 2) + b"\x00\x00"),
]


@pytest.mark.parametrize("name,data", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_protocol_error(name, data):
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        for i in range(len(data)):
            decoder.receive_data(data[i:i + 1])
            list(decoder.frames())


def test_oversized_frame_rejected_before_its_bytes_arrive():
    decoder = FrameDecoder(max_frame_bytes=1024)
    decoder.receive_data(struct.pack(">I", 2000))
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decoder.next_frame()


def test_json_language_as_number():
    assert decode_json_header(b'{"code":1,"language":9,"opaque":1,"flag":0,"version":1}').language == "GO"


@pytest.mark.parametrize(("preface", "said"), [
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "TLS client on a plain remoting port (tls.server.mode=disabled)"),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/2 (gRPC) client on a remoting port: use a remoting client; "
                                                "the 5.x proxy's gRPC protocol is not supported"),
    (b"GET /metrics HTTP/1.1\r\n", "HTTP client on a remoting port"),
])
def test_other_protocols_are_named_not_taken_for_huge_frames(preface, said):
    decoder = FrameDecoder()
    decoder.receive_data(preface[:4])   # the first four bytes are enough to tell
    with pytest.raises(ProtocolError, match=re.escape(said)):
        decoder.next_frame()


def test_an_unknown_huge_length_is_still_the_frame_limit():
    decoder = FrameDecoder()
    decoder.receive_data(b"\x7f\x00\x00\x00\x00\x00\x00\x00")
    with pytest.raises(ProtocolError, match="exceeds the limit of"):
        decoder.next_frame()


def _decoded(decode, data: bytes):
    """What a header decode gives (the command's fields), or the refusal."""
    try:
        cmd = decode(data)
    except ProtocolError as exc:
        return ("refused", str(exc)[:0])   # both refuse; the wording may name another parser's reason
    return (cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, cmd.language, cmd.version, cmd.invalid)


_JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=8),
                          st.floats(allow_nan=True, allow_infinity=True))
_HEADER_MEMBERS = st.fixed_dictionaries({}, optional={
    "code": st.one_of(st.integers(-2**40, 2**40), st.text(max_size=12)),
    "opaque": st.integers(-2**40, 2**40), "flag": st.integers(0, 3), "version": st.integers(0, 500),
    "language": st.one_of(st.sampled_from(["JAVA", "GO", "CPP"]), st.integers(-1, 20), _JSON_SCALARS),
    "remark": st.one_of(st.none(), st.text(max_size=16), st.integers()),
    "extFields": st.one_of(st.none(), st.dictionaries(st.text(max_size=6), st.one_of(st.text(max_size=16),
                                                                                     _JSON_SCALARS), max_size=6)),
})


@given(members=_HEADER_MEMBERS, escape=st.booleans())
def test_fast_json_header_path_agrees_with_the_json_module_path(members, escape):
    # orjson decodes most headers; anything it refuses or gives another type for goes through the
    # json module: both must give the same command, or both refuse.
    data = json.dumps(members, ensure_ascii=escape).encode("utf-8", "surrogatepass")
    assert _decoded(decode_json_header, data) == _decoded(remoting._decode_json_header_slow, data)


@pytest.mark.parametrize("data", [
    b'{"code":10,"opaque":4,"extFields":{"topic":"T\\ud800"}}',    # lone surrogate: decoded, marked invalid
    b'{"code":10,"extFields":{"x":"\xed\xa0\x80"}}',                # surrogate in UTF-8: refused
    b'{"code":NaN}', b'{"code":10,"extFields":{"n":12345678901234567890123}}', b'\xef\xbb\xbf{"code":1}',
    b'{"code":10,"language":99999999999999999999999}', b'{"code":10,"extFields":{"a":1.5,"b":true,"c":null}}',
    JAVA_ROUTE_REQUEST_HEADER, GO_ROUTE_REQUEST_HEADER, CPP_PULL_HEADER,
])
def test_fast_json_header_path_agrees_on_the_cases_orjson_leaves_to_json(data):
    assert _decoded(decode_json_header, data) == _decoded(remoting._decode_json_header_slow, data)

"""The codec boundary's text and number rules (codec/text.py) and their use by the decoders."""

from __future__ import annotations

import struct

import pytest

from pyrmq.codec import fastjson
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.remoting import MAX_HEADER_BYTES, FrameDecoder, decode_json_header
from pyrmq.codec.text import is_encodable, may_hold_surrogate, parse_java_int


@pytest.mark.parametrize("text,bits,value", [("0", 32, 0), ("-2147483648", 32, -(1 << 31)), ("+7", 32, 7),
                                             ("9223372036854775807", 64, (1 << 63) - 1), ("-12", 64, -12),
                                             # the digits-only fast path's edges
                                             ("999999999", 32, 999_999_999), ("2147483647", 32, (1 << 31) - 1),
                                             ("007", 32, 7), ("999999999999999999", 64, 10**18 - 1),
                                             ("1764300000000", 64, 1_764_300_000_000)])
def test_java_numbers(text, bits, value):
    assert parse_java_int(text, bits=bits) == value


@pytest.mark.parametrize("text,bits", [("2147483648", 32), ("9223372036854775808", 64), ("\u0661\u0662", 64),
                                       ("1_000", 64), (" 1", 64), ("1 ", 64), ("", 64), ("-", 64), ("1e3", 64),
                                       ("9" * 5000, 64), ("\uff11", 64), ("\u00b2", 32),
                                       ("4294967296", 32), ("99999999999999999999", 64)])
def test_not_java_numbers(text, bits):
    with pytest.raises(ValueError):
        parse_java_int(text, bits=bits)


def test_encodable():
    assert is_encodable("plain") and is_encodable("\u00e9\U0001f600")
    assert not is_encodable("a\ud800") and not is_encodable("\udfff")


@pytest.mark.parametrize("text,maybe", [
    ('{"i":"KEYS\\u0001k\\u0002TAGS\\u0001A"}', False),    # the Java client's separators
    ('{"t":"\\ud800"}', True), ('{"t":"\\uDFFF"}', True), ('{"t":"\\uDbff"}', True),
    ('{"t":"\\ud7ff\\ue000"}', False), ('{"t":"plain"}', False),
])
def test_may_hold_surrogate_looks_for_surrogate_escapes_only(text, maybe):
    assert may_hold_surrogate(text) is maybe


def test_json_header_with_a_lone_surrogate_is_decoded_as_invalid_not_dispatchable():
    cmd = decode_json_header(b'{"code":10,"opaque":4,"extFields":{"i":"a\\u0001b","topic":"T\\uD800"}}')
    assert (cmd.code, cmd.opaque) == (10, 4)
    assert cmd.invalid is not None and "'topic'" in cmd.invalid
    assert cmd.ext_fields == {}     # nothing unencodable is kept
    pair = decode_json_header(b'{"code":10,"opaque":4,"extFields":{"topic":"\\ud83d\\ude00"}}')
    assert pair.invalid is None and pair.ext_fields == {"topic": "\U0001f600"}


@pytest.mark.parametrize("header", [
    b'{"code":10,"extFields":{"x":"\xed\xa0\x80"}}',            # surrogate encoded in UTF-8
    b'{"code":' + b"[" * 50_000 + b"]" * 50_000 + b"}",          # nesting
    '{"code":"\u0663"}'.encode(),                                 # other scripts' digits
    b'{"code":2147483648}', b'{"code":10,"opaque":-2147483649}', b'{"code":true}',
    b'{"code":"' + b"1" * 100 + b'"}',
])
def test_malformed_json_headers(header):
    with pytest.raises(ProtocolError):
        decode_json_header(header)


def test_header_size_is_bounded_before_decoding():
    header_len = MAX_HEADER_BYTES + 1
    decoder = FrameDecoder()
    decoder.receive_data(struct.pack(">II", 4 + header_len, header_len))
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decoder.next_frame()     # refused from the length words, before the bytes arrive


def test_fastjson_bodies_refuse_lone_surrogates_and_foreign_digits():
    with pytest.raises(ProtocolError, match="surrogate"):
        fastjson.loads(b'{"groupName":"g\\udc00"}')
    with pytest.raises(ProtocolError, match="surrogate"):
        fastjson.loads(b"{1:'x',\"k\":\"\\ud800\"}")          # the lenient parser's path too
    with pytest.raises(ProtocolError):
        fastjson.loads("{1:\u0661}".encode())
    assert fastjson.loads(b'{"k":"\\ud83d\\ude00"}') == {"k": "\U0001f600"}

"""Remoting frames and both header encodings (JSON, type 0; ROCKETMQ binary, type 1).

Sans-I/O, in the shape of h11: ``FrameDecoder.receive_data(bytes)`` buffers,
``FrameDecoder.next_frame()`` returns a ``RemotingCommand`` or ``NEED_DATA``; ``encode_command``
returns the bytes of one frame, ``encode_command_buffers`` the same frame as the header bytes
plus the body buffers untouched (a pull answer's mmap slices go to the socket uncopied).  Every
length field is checked against what was actually received and against the configured limit
before anything is sliced or allocated.  See spec/remoting.md sections 2-8.
"""

from __future__ import annotations

import enum
import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import construct as cs
import orjson

from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.native import native_function
from pyrmq.codec.text import INT32_MAX, INT32_MIN, is_encodable, may_hold_surrogate, parse_java_int

# Same default as RocketMQ's com.rocketmq.remoting.frameMaxLength: the whole frame, length word
# included, may not exceed 16 MiB.
MAX_FRAME_BYTES: Final = 16 * 1024 * 1024

# A header (either encoding) may not exceed this.  The largest real one is a send's, bounded by
# its properties (Apache refuses more than 32 KiB of them); PUT_KV_CONFIG carries its value here.
# Bounds the objects one header decode can allocate, whatever the frame limit is.
MAX_HEADER_BYTES: Final = 1024 * 1024
# What the frame's second word holds of a header's length (its low 24 bits): the most one can encode.
MAX_HEADER_LENGTH: Final = 0xFFFFFF

# The ROCKETMQ binary header carries at most this many extFields entries; real headers have < 30.
# Bounds the work done for one header, whatever its declared lengths say.
MAX_EXT_FIELDS: Final = 1024

# MQVersion ordinal of 4.9.8: what we put in every response (clients gate SQL92 on >= 232).
CURRENT_VERSION: Final = 409

RPC_TYPE_RESPONSE: Final = 0x1
RPC_ONEWAY: Final = 0x2


class SerializeType(enum.IntEnum):
    JSON = 0
    ROCKETMQ = 1


class LanguageCode(enum.IntEnum):
    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


_LANGUAGE_BY_NAME: Final = {lc.name: lc for lc in LanguageCode}
_LANGUAGE_NAME_BY_CODE: Final = {int(lc): lc.name for lc in LanguageCode}


@dataclass(slots=True)
class RemotingCommand:
    """One logical remoting command (request or response); ``body`` travels outside the header."""

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    # A sequence of buffers (memoryviews of mapped files) is sent as is, see encode_command_buffers.
    body: bytes | memoryview | Sequence[bytes | memoryview] | None = None
    language: str = "JAVA"
    version: int = CURRENT_VERSION
    serialize_type: SerializeType = SerializeType.JSON
    # Set by the decoder for a well-formed frame whose content cannot be served (text that is not
    # valid Unicode): the channel answers it with SYSTEM_ERROR and this remark, no processor runs.
    invalid: str | None = None

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def field(self, name: str) -> str | None:
        if self.ext_fields is None:
            return None
        return self.ext_fields.get(name)

    def response(self, code: int, remark: str | None = None,
                 ext_fields: dict[str, str] | None = None,
                 body: bytes | memoryview | Sequence[bytes | memoryview] | None = None) -> RemotingCommand:
        """The response to this request: same opaque and serialize type, our language/version."""
        return RemotingCommand(code=code, opaque=self.opaque, flag=RPC_TYPE_RESPONSE, remark=remark,
                               ext_fields={} if ext_fields is None else ext_fields, body=body,
                               serialize_type=self.serialize_type)


def make_request(code: int, ext_fields: dict[str, str] | None = None, body: bytes | None = None,
                 oneway: bool = False, serialize_type: SerializeType = SerializeType.JSON,
                 ) -> RemotingCommand:
    return RemotingCommand(code=code, flag=RPC_ONEWAY if oneway else 0, ext_fields=ext_fields,
                           body=body, serialize_type=serialize_type)


# ---------------------------------------------------------------------------------------------
# Declarations.  The per-frame code uses the struct.Struct objects derived from these layouts;
# tests/codec/test_remoting.py proves both agree.

FramePrefix = cs.Struct(
    "length" / cs.Int32ub,          # bytes that follow this field: 4 + H + B
    "header_word" / cs.Int32ub,     # serialize type << 24 | H
)

RocketMQHeaderFixed = cs.Struct(
    "code" / cs.Int16sb,
    "language" / cs.Int8ub,
    "version" / cs.Int16sb,
    "opaque" / cs.Int32sb,
    "flag" / cs.Int32sb,
)

ExtFieldEntry = cs.Struct(
    "key" / cs.PascalString(cs.Int16ub, "utf8"),
    "value" / cs.PascalString(cs.Int32ub, "utf8"),
)

RocketMQHeader = cs.Struct(
    "code" / cs.Int16sb,
    "language" / cs.Int8ub,
    "version" / cs.Int16sb,
    "opaque" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "remark" / cs.PascalString(cs.Int32ub, "utf8"),
    "ext" / cs.Prefixed(cs.Int32ub, cs.GreedyRange(ExtFieldEntry)),
)

_PREFIX = struct.Struct(">II")
_BIN_FIXED = struct.Struct(">hBhii")
_INT32 = struct.Struct(">I")
_INT16 = struct.Struct(">H")
_PREFIX_SIZE: Final = _PREFIX.size
_BIN_FIXED_SIZE: Final = _BIN_FIXED.size


# ---------------------------------------------------------------------------------------------
# JSON header


def _json_ext_value(value: object) -> str:
    # fastjson fills Map<String,String> from JSON numbers and booleans by their text (C++ clients
    # send numbers); anything else is a malformed header.
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise ProtocolError(f"extFields value of type {type(value).__name__}")


def _int_member(obj: dict[str, Any], key: str, default: int | None = None) -> int:
    # Java reads these members into int fields: a JSON integer in range, or a string fastjson
    # converts (ASCII digits only, see text.parse_java_int).
    value = obj.get(key, default)
    if type(value) is int:
        if INT32_MIN <= value <= INT32_MAX:
            return value
    elif isinstance(value, str):
        try:
            return parse_java_int(value, bits=32)
        except ValueError:
            pass
    raise ProtocolError(f"JSON header member {key!r} is not a 32-bit integer")


def decode_json_header(data: bytes | memoryview) -> RemotingCommand:
    """A JSON header.  Most headers take the fast path: orjson (strict RFC 8259 and UTF-8, no lone
    surrogates, so the surrogate walk is not needed) yielding string extFields and a string
    language.  Anything else -- what orjson refuses (NaN, lone surrogates, bad UTF-8, nesting)
    and the C++ client's numbers -- is decoded by the json module, whose rules the rest of this
    function defines; orjson accepts a subset of what json accepts, with the same values for it
    (but for integers past 64 bits, which never reach the fast path's fields as integers)."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _decode_json_header_slow(data)
    if type(obj) is not dict:
        return _decode_json_header_slow(data)
    language = obj.get("language", "JAVA")
    remark = obj.get("remark")
    ext = obj.get("extFields")
    if (type(language) is not str or (remark is not None and type(remark) is not str)
            or (ext is not None and (type(ext) is not dict
                                     or not all(type(v) is str for v in ext.values())))):
        return _decode_json_header_slow(data)
    return RemotingCommand(
        code=_int_member(obj, "code"), opaque=_int_member(obj, "opaque", 0),
        flag=_int_member(obj, "flag", 0), remark=remark, ext_fields=ext, language=language,
        version=_int_member(obj, "version", 0), serialize_type=SerializeType.JSON)


def _decode_json_header_slow(data: bytes | memoryview) -> RemotingCommand:
    try:
        # Decoded strictly first: json.loads(bytes) would let UTF-8-encoded surrogates through.
        text = str(data, "utf-8")
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"malformed JSON header: {exc}") from None
    except RecursionError:
        # json's C scanner counts its nesting against the recursion limit; a header is two deep.
        raise ProtocolError("malformed JSON header: nesting too deep") from None
    if not isinstance(obj, dict):
        raise ProtocolError("JSON header is not an object")
    language = obj.get("language", "JAVA")
    if isinstance(language, int) and not isinstance(language, bool):
        try:
            language = LanguageCode(language).name
        except ValueError:
            language = "OTHER"
    elif not isinstance(language, str):
        raise ProtocolError("JSON header member 'language' is neither a name nor a number")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise ProtocolError("JSON header member 'remark' is not a string")
    raw_ext = obj.get("extFields")
    ext: dict[str, str] | None
    if raw_ext is None:
        ext = None
    elif isinstance(raw_ext, dict):
        # Java and Go send strings only; C++ sends some numbers, converted as fastjson does.
        ext = raw_ext
        for value in raw_ext.values():
            if type(value) is not str:
                ext = {k: _json_ext_value(v) for k, v in raw_ext.items() if v is not None}
                break
    else:
        raise ProtocolError("JSON header member 'extFields' is not an object")
    cmd = RemotingCommand(
        code=_int_member(obj, "code"), opaque=_int_member(obj, "opaque", 0),
        flag=_int_member(obj, "flag", 0), remark=remark, ext_fields=ext, language=language,
        version=_int_member(obj, "version", 0), serialize_type=SerializeType.JSON)
    if may_hold_surrogate(text):
        cmd.invalid = _unencodable_member(cmd)
    return cmd


def _unencodable_member(cmd: RemotingCommand) -> str | None:
    """Why the header's text cannot be served, or None.  A lone surrogate is valid JSON and a
    valid Java string, but it can never be written back as UTF-8 (responses, config files, the
    commit log), so the request is refused before any processor keeps it."""
    if not is_encodable(cmd.language):
        cmd.language = "OTHER"
        return "the language member is not valid Unicode text (lone UTF-16 surrogate)"
    if cmd.remark is not None and not is_encodable(cmd.remark):
        cmd.remark = None
        return "the remark is not valid Unicode text (lone UTF-16 surrogate)"
    for key, value in (cmd.ext_fields or {}).items():
        if not is_encodable(key) or not is_encodable(value):
            cmd.ext_fields = {}
            return (f"the header field {key.encode('ascii', 'backslashreplace').decode('ascii')[:64]!r} "
                    "is not valid Unicode text (lone UTF-16 surrogate)")
    return None


_quote = json.encoder.encode_basestring   # the C escaper; non-ASCII stays raw, as fastjson writes it


def encode_json_header(cmd: RemotingCommand) -> bytes:
    # fastjson's layout: members sorted, compact, null members omitted, every extFields value a
    # string (C++ and Go clients only read string values).  Built by hand: this runs per response.
    parts = [f'{{"code":{int(cmd.code)}']
    if cmd.ext_fields is not None:
        parts.append(',"extFields":{')
        parts.append(",".join(f"{_quote(k)}:{_quote(v)}" for k, v in cmd.ext_fields.items() if v is not None))
        parts.append("}")
    parts.append(f',"flag":{int(cmd.flag)},"language":{_quote(cmd.language)},"opaque":{int(cmd.opaque)}')
    if cmd.remark is not None:
        parts.append(f',"remark":{_quote(cmd.remark)}')
    parts.append(f',"serializeTypeCurrentRPC":"JSON","version":{int(cmd.version)}}}')
    return "".join(parts).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# ROCKETMQ binary header


# The extFields of a ROCKETMQ binary header: C when the extension is built (pyrmq.codec.native),
# these twins otherwise.


def decode_ext_fields_py(data: bytes | memoryview, max_fields: int) -> dict[str, str]:
    """The extFields of a ROCKETMQ header: (uint16 key length, key, uint32 value length, value)
    until the end of ``data``, UTF-8. Empty keys and values are dropped (Java reads them as null),
    the last duplicate is kept. Every length is checked before it is used: ValueError when one
    overruns ``data`` or more than ``max_fields`` entries are kept, UnicodeDecodeError for text
    that is not UTF-8."""
    view = memoryview(data)
    end = len(view)
    pos = 0
    ext: dict[str, str] = {}
    while pos < end:
        if len(ext) >= max_fields:
            raise ValueError(f"more than {max_fields} extFields entries")
        if end - pos < 2:
            raise ValueError("truncated extFields key length")
        (key_len,) = _INT16.unpack_from(view, pos)
        pos += 2
        if end - pos < key_len + 4:
            raise ValueError("extFields key overruns the header")
        key_at = pos
        pos += key_len
        (val_len,) = _INT32.unpack_from(view, pos)
        pos += 4
        if val_len > end - pos:
            raise ValueError("extFields value overruns the header")
        key = str(view[key_at:key_at + key_len], "utf-8")
        value = str(view[pos:pos + val_len], "utf-8")
        pos += val_len
        if key and value:
            ext[key] = value
    return ext


def encode_ext_fields_py(ext: dict[str, str]) -> bytes:
    """The extFields part of a ROCKETMQ header, its uint32 length first: every entry whose key
    and value are not None. ValueError for a key longer than 65,535 bytes, UnicodeEncodeError
    for text UTF-8 cannot hold (a lone surrogate)."""
    parts: list[bytes] = []
    for key, value in ext.items():
        if key is None or value is None:
            continue
        kb = key.encode("utf-8")
        vb = value.encode("utf-8")
        if len(kb) > 0xFFFF:
            raise ValueError("extFields key longer than 65535 bytes")
        parts += (_INT16.pack(len(kb)), kb, _INT32.pack(len(vb)), vb)
    body = b"".join(parts)
    return _INT32.pack(len(body)) + body


decode_ext_fields = native_function("decode_ext_fields", decode_ext_fields_py)
encode_ext_fields = native_function("encode_ext_fields", encode_ext_fields_py)


def decode_rocketmq_header_py(data: bytes | memoryview, max_fields: int) -> tuple[
        int, int, int, int, int, str | None, dict[str, str] | None]:
    """The members of a ROCKETMQ binary header: (code, language, version, opaque, flag, remark,
    ext). The remark is None when empty, the extFields None when their length is 0. ValueError
    when a length does not fit the header (the extFields' must be exactly what is left),
    UnicodeDecodeError for text that is not UTF-8. The twin of ``_native.decode_rocketmq_header``."""
    view = memoryview(data)
    size = len(view)
    if size < _BIN_FIXED_SIZE + 8:
        raise ValueError(f"ROCKETMQ header of {size} bytes is shorter than its fixed part")
    code, language, version, opaque, flag = _BIN_FIXED.unpack_from(view, 0)
    pos = _BIN_FIXED_SIZE
    (remark_len,) = _INT32.unpack_from(view, pos)
    pos += 4
    if remark_len > size - pos - 4:
        raise ValueError(f"remark length {remark_len} exceeds the header")
    remark = str(view[pos:pos + remark_len], "utf-8") if remark_len else None
    pos += remark_len
    (ext_len,) = _INT32.unpack_from(view, pos)
    pos += 4
    if ext_len != size - pos:
        raise ValueError(f"extFields length {ext_len} does not match the header ({size - pos} left)")
    ext = decode_ext_fields(view[pos:], max_fields) if ext_len else None
    return code, language, version, opaque, flag, remark, ext


_decode_rocketmq_header = native_function("decode_rocketmq_header", decode_rocketmq_header_py,
                                          {"ROCKETMQ_FIXED_SIZE": _BIN_FIXED_SIZE})


def decode_rocketmq_header(data: bytes | memoryview) -> RemotingCommand:
    try:
        code, language, version, opaque, flag, remark, ext = _decode_rocketmq_header(data, MAX_EXT_FIELDS)
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"ROCKETMQ header text is not UTF-8: {exc}") from None
    except ValueError as exc:   # a length past the header, or too many extFields entries
        raise ProtocolError(str(exc)) from None
    return rocketmq_command(code, language, version, opaque, flag, remark, ext)


def rocketmq_command(code: int, language: int, version: int, opaque: int, flag: int, remark: str | None,
                     ext: dict[str, str] | None, body: bytes | None = None) -> RemotingCommand:
    """The command of a decoded ROCKETMQ header's members (``language`` as its code) and body."""
    return RemotingCommand(code, opaque, flag, remark, ext, body, _LANGUAGE_NAME_BY_CODE.get(language, "OTHER"),
                           version, SerializeType.ROCKETMQ)


# One decoded frame of decode_frames: the header's members as decode_rocketmq_header returns them,
# then the body (None when empty).
WireFrame = tuple[int, int, int, int, int, str | None, dict[str, str] | None, bytes | None]


def decode_frames_py(buffer: bytes | bytearray | memoryview, pos: int, max_frame_bytes: int, max_header_bytes: int,
                     max_fields: int) -> tuple[list[WireFrame], int]:
    """The complete frames with a ROCKETMQ header in ``buffer`` from ``pos``, and where the next
    frame starts. Stops before the first one that is not whole, has a JSON header or breaks a
    rule (a frame longer than ``max_frame_bytes`` with its length word, a length word below 4, a
    header longer than the frame or than ``max_header_bytes``, a header that does not decode):
    ``FrameDecoder.next_frame`` takes that one, and says what is wrong with it. The twin of
    ``_native.decode_frames``."""
    if pos < 0:
        raise ValueError("a negative position")
    frames: list[WireFrame] = []
    view = memoryview(buffer)
    size = len(view)
    try:
        while size - pos >= _PREFIX_SIZE:
            length, header_word = _PREFIX.unpack_from(view, pos)
            header_len = header_word & 0x00FFFFFF
            if (length + 4 > max_frame_bytes or length < 4 or header_word >> 24 != SerializeType.ROCKETMQ
                    or header_len > length - 4 or header_len > max_header_bytes or size - pos < 4 + length):
                break
            header_start = pos + _PREFIX_SIZE
            body_start, end = header_start + header_len, pos + 4 + length
            try:
                members = decode_rocketmq_header_py(view[header_start:body_start], max_fields)
            except ValueError:   # UnicodeDecodeError is one
                break
            frames.append((*members, bytes(view[body_start:end]) if end > body_start else None))
            pos = end
    finally:
        view.release()
    return frames, pos


_decode_frames = native_function("decode_frames", decode_frames_py,
                                 {"ROCKETMQ_FIXED_SIZE": _BIN_FIXED_SIZE, "FRAME_PREFIX_SIZE": _PREFIX_SIZE,
                                  "ROCKETMQ_SERIALIZE_TYPE": SerializeType.ROCKETMQ})


def encode_rocketmq_frame_head_py(code: int, language: int, version: int, opaque: int, flag: int,
                                  remark: str | None, ext: dict[str, str], body_len: int) -> bytes:
    """The start of a frame with a ROCKETMQ header, up to its body of ``body_len`` bytes: the
    length words, the fixed part, the remark (None or empty: none) and the extFields.
    struct.error for a member outside its type, ValueError for a header or a frame too long for
    its length word. The twin of ``_native.encode_rocketmq_frame_head``."""
    fixed = _BIN_FIXED.pack(code, language, version, opaque, flag)
    remark_bytes = remark.encode("utf-8") if remark else b""
    header = b"".join((fixed, _INT32.pack(len(remark_bytes)), remark_bytes, encode_ext_fields(ext)))
    if len(header) > MAX_HEADER_LENGTH or body_len < 0 or 4 + len(header) + body_len > 0xFFFFFFFF:
        raise ValueError("the header or the frame is too long for its length word")
    return _PREFIX.pack(4 + len(header) + body_len, (SerializeType.ROCKETMQ << 24) | len(header)) + header


_encode_rocketmq_frame_head = native_function(
    "encode_rocketmq_frame_head", encode_rocketmq_frame_head_py,
    {"ROCKETMQ_FIXED_SIZE": _BIN_FIXED_SIZE, "FRAME_PREFIX_SIZE": _PREFIX_SIZE, "MAX_HEADER_LENGTH": MAX_HEADER_LENGTH,
     "ROCKETMQ_SERIALIZE_TYPE": SerializeType.ROCKETMQ})


def _rocketmq_frame_head(cmd: RemotingCommand, body_len: int) -> bytes:
    return _encode_rocketmq_frame_head(cmd.code, _LANGUAGE_BY_NAME.get(cmd.language, LanguageCode.OTHER),
                                       cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields or {},
                                       body_len)


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    return _rocketmq_frame_head(cmd, 0)[_PREFIX_SIZE:]


# ---------------------------------------------------------------------------------------------
# Frames


def encode_command_buffers(cmd: RemotingCommand) -> list[bytes | bytearray | memoryview]:
    """One frame carrying ``cmd``: the length words and header in one bytes, then the body
    buffers untouched (h11's ``send_with_data_passthrough`` shape).  A body may be a sequence of
    buffers -- a pull answer's memoryviews of the mapped commit log; only ``len()`` is taken of
    them, they are never joined or copied here."""
    body = cmd.body
    body_buffers: list[bytes | bytearray | memoryview]
    if body is None:
        body_buffers = []
    elif isinstance(body, (bytes, bytearray, memoryview)):
        body_buffers = [body] if len(body) else []
    else:
        body_buffers = [buffer for buffer in body if len(buffer)]
    body_len = sum(len(buffer) for buffer in body_buffers)
    if cmd.serialize_type is SerializeType.ROCKETMQ:
        return [_rocketmq_frame_head(cmd, body_len), *body_buffers]
    header = encode_json_header(cmd)
    prefix = _PREFIX.pack(4 + len(header) + body_len, (int(cmd.serialize_type) << 24) | len(header))
    return [prefix + header, *body_buffers]


def encode_command(cmd: RemotingCommand) -> bytes:
    """The bytes of one frame carrying ``cmd`` in its own serialize type."""
    head, *body = encode_command_buffers(cmd)
    assert isinstance(head, bytes)   # the length words and header are always built here
    return b"".join((head, *body)) if body else head


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()


# What other protocols send first, read as a remoting frame length, is far beyond any frame limit.
_TLS_RECORD_HANDSHAKE = 0x16
_HTTP_METHODS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC")


def foreign_protocol(head: bytes) -> str | None:
    """What a connection that starts with ``head`` (4 bytes) speaks instead of remoting, said so a
    user can act on it; None when it is not recognised."""
    if head[:1] == bytes([_TLS_RECORD_HANDSHAKE]) and head[1:2] == b"\x03":
        return ("TLS client on a plain remoting port (tls.server.mode=disabled): enable TLS on the server "
                "(permissive or enforcing) or turn it off in the client")
    if head == b"PRI ":
        return ("HTTP/2 (gRPC) client on a remoting port: use a remoting client; the 5.x proxy's gRPC "
                "protocol is not supported")
    if head in _HTTP_METHODS:
        return "HTTP client on a remoting port: it speaks RocketMQ's remoting protocol, not HTTP"
    return None


# Frames at least this large are received as a list of chunks joined once (FrameDecoder._chunks).
JOIN_ONCE_BYTES = 256 * 1024


@dataclass
class FrameDecoder:
    """Incremental frame decoder: bytes in, ``RemotingCommand`` out (or ``NEED_DATA``).

    After a ``ProtocolError`` the decoder is unusable; the caller closes the connection.
    """

    max_frame_bytes: int = MAX_FRAME_BYTES
    _buffer: bytearray = field(default_factory=bytearray)
    _pos: int = 0
    # The chunks of a large frame, kept as they came and joined once when it is whole: grown chunk
    # by chunk, the buffer would be copied over and over (a 1.5 MiB registration body: ~8 times).
    # Never a buffer of the announced size: a peer's memory is what it sent, not what it claims.
    _chunks: list[bytes] | None = None
    _chunked: int = 0
    _frame_size: int = 0

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        chunks = self._chunks
        if chunks is not None:
            chunks.append(data if isinstance(data, bytes) else bytes(data))
            self._chunked += len(data)
            if self._chunked >= self._frame_size:
                self._buffer, self._pos = bytearray().join(chunks), 0
                self._chunks = None
            return
        if self._pos:
            # Drop what was consumed before growing, so the buffer never holds dead frames.
            del self._buffer[:self._pos]
            self._pos = 0
        self._buffer += data

    @property
    def buffered(self) -> int:
        return self._chunked if self._chunks is not None else len(self._buffer) - self._pos

    def next_frame(self) -> RemotingCommand | _NeedData:
        buf = self._buffer
        pos = self._pos
        available = len(buf) - pos
        if available < _PREFIX_SIZE:
            if available >= 4:
                self._check_length(_INT32.unpack_from(buf, pos)[0], buf, pos)
            return NEED_DATA
        length, header_word = _PREFIX.unpack_from(buf, pos)
        self._check_length(length, buf, pos)
        serialize_code = header_word >> 24
        header_len = header_word & 0x00FFFFFF
        if header_len > length - 4:
            raise ProtocolError(f"header length {header_len} larger than the frame ({length - 4})")
        if serialize_code not in (0, 1):
            raise ProtocolError(f"unknown serialize type {serialize_code}")
        if header_len > MAX_HEADER_BYTES:
            raise ProtocolError(f"header of {header_len} bytes exceeds the limit of {MAX_HEADER_BYTES}")
        if available < 4 + length:
            if 4 + length >= JOIN_ONCE_BYTES:
                self._chunks, self._chunked, self._frame_size = [bytes(buf[pos:])], available, 4 + length
                self._buffer, self._pos = bytearray(), 0
            return NEED_DATA
        view = memoryview(buf)
        try:
            header_start = pos + _PREFIX_SIZE
            header_end = header_start + header_len
            if serialize_code == 0:
                cmd = decode_json_header(view[header_start:header_end])
            else:
                cmd = decode_rocketmq_header(view[header_start:header_end])
            body_end = pos + 4 + length
            if body_end > header_end:
                cmd.body = bytes(view[header_end:body_end])
        finally:
            view.release()
        self._pos = pos + 4 + length
        return cmd

    def frames(self) -> Iterator[RemotingCommand]:
        """Every complete frame buffered so far. The ROCKETMQ frames are decoded in runs, by one
        call each (``decode_frames``); ``next_frame`` takes the frame a run stops at (a JSON
        header, a partial frame, a broken one) before the next run."""
        while True:
            decoded, self._pos = _decode_frames(self._buffer, self._pos, self.max_frame_bytes, MAX_HEADER_BYTES,
                                                MAX_EXT_FIELDS)
            for members in decoded:
                yield rocketmq_command(*members)
            cmd = self.next_frame()
            if isinstance(cmd, _NeedData):
                return
            yield cmd

    def _check_length(self, length: int, buf: bytearray, pos: int) -> None:
        if length + 4 > self.max_frame_bytes:
            foreign = foreign_protocol(bytes(buf[pos:pos + 4]))
            if foreign is not None:
                raise ProtocolError(foreign)
            raise ProtocolError(f"frame of {length + 4} bytes exceeds the limit of {self.max_frame_bytes}")
        if length < 4:
            raise ProtocolError(f"frame length {length} is shorter than the header-length word")

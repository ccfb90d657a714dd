"""Mutations of real frames, driven by a ``random.Random`` (Hypothesis hands one in through
``st.randoms()``, the network fuzzer seeds its own).

Blind byte edits (bit flips, interesting values, splices, length-word edits) find the framing
bugs; the structured edits keep the frame well formed and aim at the decoders behind it: a JSON
string turned into a lone surrogate, a numeric field written with non-ASCII or 5,000 digits, a
value nested 100,000 deep, a ROCKETMQ header whose inner lengths lie, a text field with invalid
UTF-8.  A mutated frame gets its two outer length words fixed most of the time, so it reaches
the header decoder and the processors instead of dying at the frame layer.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable, Sequence

_PREFIX = struct.Struct(">II")
_BIN_FIXED = struct.Struct(">hBhii")
_INT16 = struct.Struct(">H")
_INT32 = struct.Struct(">I")

INTERESTING_INTS = (0, 1, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x00FFFFFF, 0x01000000,
                    16 * 1024 * 1024 - 4, 16 * 1024 * 1024, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)

# Python strings that JSON writes as escapes a codec must refuse, or that strain a reader.
NASTY_STRINGS = ("\ud800", "\udfff", "a\udc80b", "\ud83d", "\ud83d\ude00", "\x00", "\x01\x02", "",
                 "%RETRY%", "x" * 5000, "é€𝄞", "\u202e", "../../etc", "TBW102", "SCHEDULE_TOPIC_XXXX")

# Raw JSON text for numeric fields: non-ASCII digits (Arabic-Indic, fullwidth, Devanagari),
# lengths past Python's int parsing limit, values past int32/int64, and non-numbers.
NUMERIC_FRAGMENTS = ('"١٢"', '"１２"', '"१०"', '"' + "9" * 5000 + '"', "9" * 5000, "2147483648",
                     "-2147483649", "9223372036854775808", '"-0"', '"+1"', '" 1"', '"1_0"', "1e999",
                     "-1e999", "NaN", "Infinity", "1.5", "true", "null", "[]", "{}", '""', '"0x10"')

# Bytes no UTF-8 decoder should turn into text that cannot be written back.
BAD_UTF8 = (b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc0\x80", b"\xff", b"\x80", b"\xf4\x90\x80\x80", b"\xe2\x82")


def nested(rng: random.Random) -> str:
    depth = rng.choice((65, 100, 1000, 5000, 100_000))
    if rng.random() < 0.5:
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


# ---------------------------------------------------------------------------------------------
# Blind byte edits


def flip_bits(data: bytearray, rng: random.Random) -> None:
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)


def set_interesting_int(data: bytearray, rng: random.Random) -> None:
    width = rng.choice((1, 2, 4))
    if len(data) < width:
        return
    value = rng.choice(INTERESTING_INTS) & ((1 << (8 * width)) - 1)
    pos = rng.randrange(len(data) - width + 1)
    data[pos:pos + width] = value.to_bytes(width, "big")


def edit_length_words(data: bytearray, rng: random.Random) -> None:
    """The frame length or the header-length word set to a boundary value (or off by a little)."""
    if len(data) < 8:
        return
    length, word = _PREFIX.unpack_from(data)
    if rng.random() < 0.5:
        length = rng.choice((0, 3, 4, length - 1, length + 1, word & 0xFFFFFF, 16 * 1024 * 1024 - 4,
                             16 * 1024 * 1024 - 3, 0xFFFFFFFF)) & 0xFFFFFFFF
    else:
        header_len = rng.choice((0, 1, (word & 0xFFFFFF) + 1, (word & 0xFFFFFF) - 1, length - 4, length,
                                 0xFFFFFF)) & 0xFFFFFF
        word = (rng.choice((word >> 24, 0, 1, 2, 0xFF)) << 24) | header_len
    data[:8] = _PREFIX.pack(length, word)


def delete_range(data: bytearray, rng: random.Random) -> None:
    start = rng.randrange(len(data))
    del data[start:start + rng.randint(1, 64)]


def duplicate_range(data: bytearray, rng: random.Random) -> None:
    start = rng.randrange(len(data))
    piece = data[start:start + rng.randint(1, 64)]
    pos = rng.randrange(len(data) + 1)
    data[pos:pos] = piece


def insert_bad_utf8(data: bytearray, rng: random.Random) -> None:
    pos = rng.randrange(len(data) + 1)
    data[pos:pos] = rng.choice(BAD_UTF8)


BLIND: tuple[Callable[[bytearray, random.Random], None], ...] = (
    flip_bits, set_interesting_int, edit_length_words, delete_range, duplicate_range, insert_bad_utf8)


def splice(data: bytes, other: bytes, rng: random.Random) -> bytes:
    """The head of one input and the tail of another."""
    return data[:rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1):]


# ---------------------------------------------------------------------------------------------
# Structured edits of JSON text (headers and bodies)

_RAW = "\x00raw{}\x00"


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out.extend(_paths(child, (*prefix, i)))
    return out


def _replace(value: object, path: tuple[object, ...], new: object) -> object:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: _replace(v, rest, new) if k == head else v for k, v in value.items()}
    assert isinstance(value, list) and isinstance(head, int)
    return [_replace(v, rest, new) if i == head else v for i, v in enumerate(value)]


def mutate_json_text(text: bytes, rng: random.Random) -> bytes:
    """One structured edit of a JSON document: a value or key becomes a nasty string, a numeric
    fragment or deep nesting; re-serialised with lone surrogates as ``\\uD800`` escapes."""
    try:
        return _mutate_json_doc(json.loads(text), rng)
    except (ValueError, RecursionError):   # not JSON, or too deep already for these helpers
        return text


def _mutate_json_doc(doc: object, rng: random.Random) -> bytes:
    raws: list[str] = []

    def raw(fragment: str) -> str:
        raws.append(fragment)
        return _RAW.format(len(raws) - 1)

    path = rng.choice(_paths(doc))
    choice = rng.random()
    if choice < 0.35:
        new: object = rng.choice(NASTY_STRINGS)
    elif choice < 0.7:
        new = raw(rng.choice(NUMERIC_FRAGMENTS))
    elif choice < 0.8:
        new = raw(nested(rng))
    else:   # a key rather than a value
        parent = path[:-1]
        holder = doc
        for step in parent:
            holder = holder[step]   # type: ignore[index]
        if isinstance(holder, dict) and path:
            renamed = {(rng.choice(NASTY_STRINGS) if k == path[-1] else k): v for k, v in holder.items()}
            doc = _replace(doc, parent, renamed)
        new = None
        path = ()
    if path:
        doc = _replace(doc, path, new)
    out = json.dumps(doc, ensure_ascii=rng.random() < 0.8, separators=(",", ":"))
    for i, fragment in enumerate(raws):
        out = out.replace(json.dumps(_RAW.format(i)), fragment)
    return out.encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------------------------
# Structured edits of a ROCKETMQ binary header


def _parse_rocketmq_header(header: bytes) -> tuple[bytes, bytes, list[tuple[bytes, bytes]]] | None:
    """(fixed part, remark, ext entries) of a well-formed header, or None."""
    try:
        pos = _BIN_FIXED.size
        (remark_len,) = _INT32.unpack_from(header, pos)
        remark = header[pos + 4:pos + 4 + remark_len]
        pos += 4 + remark_len
        (ext_len,) = _INT32.unpack_from(header, pos)
        pos += 4
        entries = []
        end = pos + ext_len
        while pos < end:
            (key_len,) = _INT16.unpack_from(header, pos)
            key = header[pos + 2:pos + 2 + key_len]
            pos += 2 + key_len
            (val_len,) = _INT32.unpack_from(header, pos)
            entries.append((key, header[pos + 4:pos + 4 + val_len]))
            pos += 4 + val_len
        return header[:_BIN_FIXED.size], remark, entries
    except struct.error:
        return None


def _build_rocketmq_header(fixed: bytes, remark: bytes, entries: Sequence[tuple[bytes, bytes]],
                           lie: Callable[[int], int] = lambda n: n) -> bytes:
    ext = b"".join(_INT16.pack(lie(len(k)) & 0xFFFF) + k + _INT32.pack(lie(len(v)) & 0xFFFFFFFF) + v
                   for k, v in entries)
    return fixed + _INT32.pack(len(remark)) + remark + _INT32.pack(len(ext)) + ext


def mutate_rocketmq_header(header: bytes, rng: random.Random) -> bytes:
    parsed = _parse_rocketmq_header(header)
    if parsed is None:
        return header
    fixed, remark, entries = parsed
    choice = rng.random()
    if choice < 0.4 and entries:     # a value: non-ASCII digits, huge, invalid UTF-8
        i = rng.randrange(len(entries))
        value = rng.choice((*[f.strip('"').encode() for f in NUMERIC_FRAGMENTS],
                            *(entries[i][1][:3] + b + entries[i][1][3:] for b in BAD_UTF8)))
        entries[i] = (entries[i][0], value)
    elif choice < 0.55:
        remark = rng.choice((b"\xed\xa0\x80", b"x" * 20000, b"\xff", "١٢".encode()))
    elif choice < 0.7 and entries:   # an inner length lies
        delta = rng.choice((-1, 1, 0x7FFF, -0x7FFF))
        return _build_rocketmq_header(fixed, remark, entries, lambda n: n + delta)
    elif choice < 0.8:   # many entries (past MAX_EXT_FIELDS), the header kept under ~64 KiB
        entries = entries * min(rng.choice((2, 100, 2000)), 65536 // (len(header) + 1) + 1)
    else:
        fixed = _BIN_FIXED.pack(*(rng.choice((-1, 0, 0x7FFF, -0x8000)) if i != 1 else rng.randrange(256)
                                  for i in range(2)), 0, rng.randrange(-2**31, 2**31), rng.choice((0, 1, 2, 3)))
    return _build_rocketmq_header(fixed, remark, entries)


# ---------------------------------------------------------------------------------------------
# Whole frames


def split_frame(frame: bytes) -> tuple[int, bytes, bytes] | None:
    if len(frame) < 8:
        return None
    _, word = _PREFIX.unpack_from(frame)
    header_len = word & 0xFFFFFF
    return word >> 24, frame[8:8 + header_len], frame[8 + header_len:]


def join_frame(serialize_type: int, header: bytes, body: bytes) -> bytes:
    return _PREFIX.pack(4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def mutate_frame(frame: bytes, rng: random.Random, others: Sequence[bytes] = ()) -> bytes:
    """One mutated frame: structured edits of its header or body, blind edits, a splice."""
    parts = split_frame(frame)
    if parts is None:
        return frame
    serialize_type, header, body = parts
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        choice = rng.random()
        if choice < 0.45:
            header = (mutate_json_text(header, rng) if serialize_type == 0
                      else mutate_rocketmq_header(header, rng))
        elif choice < 0.55 and body[:1] in (b"{", b"["):
            body = mutate_json_text(body, rng)
        elif choice < 0.65 and others:
            other = split_frame(rng.choice(others))
            if other is not None:
                body = splice(body, other[2], rng)
        else:
            in_header = rng.random() < 0.7 or not body
            target = bytearray(header if in_header else body)
            if target:   # the length words are edited below, on the whole frame
                rng.choice(BLIND[:2] + BLIND[3:])(target, rng)
            if in_header:
                header = bytes(target)
            else:
                body = bytes(target)
    out = join_frame(serialize_type, header, body)
    if rng.random() < 0.15:           # leave the outer words wrong: the frame decoder's turn
        data = bytearray(out)
        edit_length_words(data, rng)
        out = bytes(data)
    return out


def mutate_bytes(data: bytes, rng: random.Random, others: Sequence[bytes] = ()) -> bytes:
    """Blind edits for inputs without frame structure (records, bodies, store files)."""
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4))):
        if not out:
            out += bytes([rng.randrange(256)])
            continue
        if others and rng.random() < 0.1:
            out = bytearray(splice(bytes(out), rng.choice(others), rng))
            continue
        rng.choice(BLIND)(out, rng)
    return bytes(out)

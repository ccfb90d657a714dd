"""pyrmq.codec._native against its Python twins (pyrmq.codec.native): the same values, the same
bytes written, the same refusals. Under CI=true the extension must have been built: a broker
silently running the slow twins is a failure there, not a skip."""

from __future__ import annotations

import gc
import os
import random
from dataclasses import dataclass, fields, make_dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrmq.codec import index_codec, message, message_batch, message_props, native, remoting, send_header, text
from pyrmq.codec.message_batch import BatchEntry, encode_batch
from pyrmq.codec.message_props import MessageFormatError, java_string_hash
from pyrmq.codec.store_formats import CQ_UNIT, INDEX_HEADER, INDEX_HEADER_SIZE, INDEX_ITEM, INDEX_ITEM_SIZE, INDEX_SLOT
from pyrmq.namesrv import route_info

try:
    from pyrmq.codec import _native
except ImportError:
    _native = None   # type: ignore[assignment]


def test_the_extension_is_built_and_bound():
    if _native is None:
        if os.environ.get("CI") == "true":
            pytest.fail("pyrmq.codec._native was not built (CI=true: pip install -e . must compile it)",
                        pytrace=False)
        pytest.skip("pyrmq.codec._native not built (no C compiler): the Python twins run")
    if os.environ.get("PYRMQ_NATIVE", "1") != "0":
        assert native.NATIVE
        assert index_codec.topic_key_hash is _native.topic_key_hash
        assert index_codec.index_put is _native.index_put
        assert index_codec.index_build_records is _native.index_build_records
        assert remoting.decode_ext_fields is _native.decode_ext_fields
        assert remoting.encode_ext_fields is _native.encode_ext_fields
        assert remoting._decode_rocketmq_header is _native.decode_rocketmq_header
        assert remoting._decode_frames is _native.decode_frames
        assert remoting._encode_rocketmq_frame_head is _native.encode_rocketmq_frame_head
        assert message_batch._split_batch is _native.split_batch
        assert message_props.string_to_properties is _native.string_to_properties
        assert message_props.property_value is _native.property_value
        assert message.encode_record is _native.encode_record
        assert message.encode_records is _native.encode_records
        assert message._batch_record_infos is _native.batch_record_infos
        assert message._consume_queue_units is _native.consume_queue_units
        assert text.parse_java_int is _native.parse_java_int
        assert message_props.properties_to_string is _native.properties_to_string
        assert send_header.plain_send_fields is _native.plain_send_fields
        assert route_info._merge_queue_datas is _native.merge_queue_datas


needs_native = pytest.mark.skipif(_native is None, reason="pyrmq.codec._native not built")

# Java strings hold UTF-16 units: past the BMP a character is a surrogate pair, and a lone
# surrogate (a broken Java string) is one unit.
_chars = st.one_of(st.characters(max_codepoint=0x7F), st.characters(),
                   st.sampled_from(["\ud800", "\udfff", "\U0001f600", "\uffff", "#"]))


@needs_native
@settings(max_examples=500, deadline=None)
@given(topic=st.text(_chars, max_size=30), key=st.text(_chars, max_size=60))
def test_topic_key_hash_matches_the_twin(topic, key):
    expected = index_codec.topic_key_hash_py(topic, key)
    assert _native.topic_key_hash(topic, key) == expected
    h = java_string_hash(f"{topic}#{key}")
    assert expected == (abs(h) if h != -2**31 else 0)


@needs_native
def test_topic_key_hash_of_integer_min_value_is_zero():
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE; a prefix whose hash is 0 keeps it so
    n = (-(java_string_hash("T#") & 0xFFFFFFFF) * pow(31, 7, 1 << 32)) % (1 << 32)
    digits = []
    for _ in range(7):
        n, d = divmod(n, 31)
        digits.append(chr(d))
    key = "".join(reversed(digits)) + "polygenelubricants"
    assert java_string_hash("T#" + key) == -2**31
    assert _native.topic_key_hash("T", key) == index_codec.topic_key_hash_py("T", key) == 0


@needs_native
def test_topic_key_hash_refuses_what_is_not_two_strings():
    with pytest.raises(TypeError):
        _native.topic_key_hash("T", b"k")
    with pytest.raises(TypeError):
        _native.topic_key_hash("T")


def _index_image(slots: int, items: int) -> bytearray:
    return bytearray(INDEX_HEADER_SIZE + slots * 4 + items * INDEX_ITEM_SIZE)


@needs_native
@pytest.mark.parametrize("seed", range(20))
def test_index_put_writes_the_twins_bytes(seed):
    rnd = random.Random(seed)
    slots, items = rnd.choice([(1, 40), (3, 60), (7, 200), (64, 300)])
    a, b = _index_image(slots, items), _index_image(slots, items)
    # a damaged slot table (values past the count, negative) must be read alike
    for s in range(slots):
        if rnd.random() < 0.3:
            v = rnd.choice([-5, 0, 1, items + 10, 2**31 - 1])
            INDEX_SLOT.pack_into(a, INDEX_HEADER_SIZE + 4 * s, v)
            INDEX_SLOT.pack_into(b, INDEX_HEADER_SIZE + 4 * s, v)
    count_a = count_b = rnd.randrange(1, 4)
    hsc_a = hsc_b = rnd.randrange(0, 3)
    begin_ts = rnd.randrange(0, 2**41)
    for _ in range(items - count_a):
        key_hash = rnd.choice([0, 2**31 - 1, rnd.randrange(2**31)])
        phy = rnd.randrange(2**63)
        diff = rnd.randrange(2**31)
        end_ts = rnd.randrange(-2**63, 2**63)
        args = (slots, count_a, key_hash, phy, diff, begin_ts, end_ts, rnd.randrange(2**40), phy, hsc_a)
        hsc_a = _native.index_put(a, *args)
        hsc_b = index_codec.index_put_py(b, *args)
        assert hsc_a == hsc_b
        assert a == b
        count_a += 1
        count_b += 1
    header = INDEX_HEADER.unpack_from(a, 0)
    assert header[4:] == (hsc_a, count_a)
    last = INDEX_ITEM.unpack_from(a, INDEX_HEADER_SIZE + slots * 4 + (count_a - 1) * INDEX_ITEM_SIZE)
    assert last[1] == header[3]


@needs_native
def test_index_put_refuses_an_item_past_the_file_alike():
    for put in (_native.index_put, index_codec.index_put_py):
        image = _index_image(4, 3)
        before = bytes(image)
        with pytest.raises(ValueError, match="past the end"):
            put(image, 4, 3, 17, 0, 0, 0, 0, 0, 0, 0)
        assert image == before   # nothing written


_key_text = st.text(st.one_of(_chars, st.just(" ")), max_size=20)


@st.composite
def _index_records(draw):
    """Records as the index sees them: offsets mostly rising (some behind the file's end), some
    rolled back, keys in UNIQ_KEY and KEYS (empty tokens, names repeated or inside values)."""
    records, offset = [], draw(st.integers(0, 50))
    for _ in range(draw(st.integers(0, 8))):
        offset += draw(st.integers(-30, 200))
        pairs = draw(st.lists(st.tuples(st.sampled_from(["UNIQ_KEY", "KEYS", "TAGS", "xKEYS", "UNIQ_KEYS"]),
                                        _key_text), max_size=4))
        props = "\x02".join(f"{name}\x01{value}" for name, value in pairs)
        if draw(st.booleans()):
            props += "\x02KEYS\x01" + " ".join(f"k{n}" for n in range(draw(st.integers(0, 20))))
        records.append(message.RecordInfo(100, draw(st.text(_chars, max_size=6)), 0, 0, offset,
                                          draw(st.sampled_from([0, 0, 0x4, 0x8, 0xC])),
                                          draw(st.integers(-5, 2**42)), 0, 0, props))
    return records


@needs_native
@settings(max_examples=400, deadline=None)
@given(records=_index_records(), slots=st.sampled_from([1, 3, 64]), items=st.integers(2, 40),
       count=st.integers(0, 30), limit=st.integers(-2, 45), start=st.integers(-1, 9), hsc=st.integers(0, 3),
       begin_ts=st.sampled_from([0, -1, 1_700_000_000_000]), end_phy=st.integers(0, 300),
       damaged_slot=st.integers(-5, 2**31 - 1))
def test_index_build_records_writes_the_twins_bytes(records, slots, items, count, limit, start, hsc, begin_ts,
                                                    end_phy, damaged_slot):
    a, b = _index_image(slots, items), _index_image(slots, items)
    for image in (a, b):   # a slot past the count (or negative) is read as empty alike
        INDEX_SLOT.pack_into(image, INDEX_HEADER_SIZE, damaged_slot)
    args = (slots, limit, records, start, "UNIQ_KEY\x01", "KEYS\x01", count, hsc, begin_ts, 5, end_phy, 9)
    try:
        got = _native.index_build_records(a, *args)
    except ValueError as e:   # an item past the end of the image
        with pytest.raises(ValueError, match=str(e)):
            index_codec.index_build_records_py(b, *args)
    else:
        assert got == index_codec.index_build_records_py(b, *args)
    assert a == b


@needs_native
def test_index_build_records_refuses_alike():
    record = message.RecordInfo(100, "T", 0, 0, 10, 0, 1, 0, 0, "KEYS\x01k")
    for build in (_native.index_build_records, index_codec.index_build_records_py):
        image = _index_image(4, 8)
        for records, uniq, keys in (((record,), "UNIQ_KEY\x01", "KEYS\x01"), ([record], "", "KEYS\x01"),
                                    ([record], "UNIQ_KEY\x01", 5)):
            with pytest.raises(TypeError):
                build(image, 4, 8, records, 0, uniq, keys, 2, 0, 0, 0, 0, 0)
        assert image == _index_image(4, 8)


@needs_native
def test_index_put_refuses_fields_out_of_range_and_read_only_buffers():
    image = _index_image(4, 8)
    with pytest.raises(ValueError):
        _native.index_put(image, 0, 1, 17, 0, 0, 0, 0, 0, 0, 0)      # no slots
    with pytest.raises(ValueError):
        _native.index_put(image, 4, 1, -1, 0, 0, 0, 0, 0, 0, 0)      # negative hash
    with pytest.raises(ValueError):
        _native.index_put(image, 4, 1, 17, 0, 2**31, 0, 0, 0, 0, 0)  # time diff past int32
    with pytest.raises(OverflowError):
        _native.index_put(image, 4, 1, 17, 2**63, 0, 0, 0, 0, 0, 0)  # offset past int64
    with pytest.raises(BufferError):   # the Python twin's pack_into: TypeError
        _native.index_put(bytes(image), 4, 1, 17, 0, 0, 0, 0, 0, 0, 0)
    assert image == _index_image(4, 8)


# ---- the extFields of a ROCKETMQ header

_text = st.text(st.one_of(st.characters(max_codepoint=0x7F), st.characters(blacklist_categories=("Cs",))),
                max_size=40)


def _outcome(fn, *args):
    """What ``fn`` returns, or the type and text of what it raises."""
    try:
        return ("ok", fn(*args))
    except (ValueError, TypeError) as exc:
        return (type(exc).__name__, str(exc))


def _damaged(data: bytes, flips: list[tuple[int, int]], cuts: list[int]) -> bytes:
    """``data`` with some bytes overwritten (lengths, flags, text) and cut short."""
    out = bytearray(data)
    for at, byte in flips:
        if out:
            out[at % len(out)] = byte
    for cut in cuts:
        out = out[:cut] if cut < len(out) else out
    return bytes(out)


def _assert_alike(c_function, twin, data: bytes, *args) -> None:
    """The C function and its twin return or refuse alike, on bytes and on a view into a buffer."""
    expected = _outcome(twin, data, *args)
    assert _outcome(c_function, data, *args) == expected
    assert _outcome(c_function, memoryview(b"xx" + data)[2:], *args) == expected


@needs_native
@settings(max_examples=300, deadline=None)
@given(ext=st.dictionaries(_text, st.one_of(_text, st.none()), max_size=12))
def test_encode_ext_fields_matches_the_twin(ext):
    encoded = _native.encode_ext_fields(ext)
    assert encoded == remoting.encode_ext_fields_py(ext)
    kept = {k: v for k, v in ext.items() if k and v}
    assert _native.decode_ext_fields(encoded[4:], 1024) == kept


@needs_native
def test_encode_ext_fields_refuses_alike():
    for ext in ({"k": "\ud800"}, {"\udfff": "v"}, {"k" * 65536: "v"}):
        assert _outcome(_native.encode_ext_fields, ext)[0] == _outcome(remoting.encode_ext_fields_py, ext)[0] != "ok"


# ---- a ROCKETMQ binary header

_headers = st.builds(
    lambda code, language, version, opaque, flag, remark, ext: remoting.encode_rocketmq_header(
        remoting.RemotingCommand(code=code, language=language, version=version, opaque=opaque, flag=flag,
                                 remark=remark, ext_fields=ext)),
    st.integers(-2**15, 2**15 - 1), st.sampled_from(["JAVA", "GO", "CPP", "OTHER"]), st.integers(-2**15, 2**15 - 1),
    st.integers(-2**31, 2**31 - 1), st.integers(-2**31, 2**31 - 1), st.one_of(st.none(), _text),
    st.dictionaries(_text, _text, max_size=6))


@needs_native
@settings(max_examples=300, deadline=None)
@given(header=_headers)
def test_decode_rocketmq_header_matches_the_twin(header):
    decoded = _native.decode_rocketmq_header(header, 64)
    assert decoded == remoting.decode_rocketmq_header_py(header, 64)
    assert decoded[:5] == remoting._BIN_FIXED.unpack_from(header, 0)


_frame_heads = st.tuples(
    st.integers(-2**15, 2**15 - 1), st.integers(0, 255), st.integers(-2**15, 2**15 - 1),
    st.integers(-2**31, 2**31 - 1), st.integers(-2**31, 2**31 - 1), st.one_of(st.none(), _text),
    st.dictionaries(_text, st.one_of(_text, st.none()), max_size=6), st.integers(0, 2**31))


@needs_native
@settings(max_examples=300, deadline=None)
@given(members=_frame_heads)
def test_encode_rocketmq_frame_head_matches_the_twin(members):
    head = _native.encode_rocketmq_frame_head(*members)
    assert head == remoting.encode_rocketmq_frame_head_py(*members)
    length, word = remoting._PREFIX.unpack_from(head)
    assert word >> 24 == remoting.SerializeType.ROCKETMQ and word & 0xFFFFFF == len(head) - 8
    assert length == 4 + len(head) - 8 + members[7]
    code, language, version, opaque, flag, remark, ext = _native.decode_rocketmq_header(head[8:], 64)
    assert (code, language, version, opaque, flag) == members[:5]
    assert remark == (members[5] or None)
    written = {k: v for k, v in members[6].items() if v is not None}   # a None value is left out
    assert ext == ({k: v for k, v in written.items() if k and v} if written else None)   # empty: dropped when read


@needs_native
@pytest.mark.parametrize("change", [
    {0: 2**15}, {0: -2**15 - 1}, {1: 256}, {1: -1}, {2: 2**15}, {3: 2**31}, {4: -2**31 - 1},   # past their types
    {5: "\ud800"}, {6: {"k": "\udfff"}}, {6: {"k" * 65536: "v"}},                                # not encodable
    {7: -1}, {7: 2**32}, {7: 2**63 - 1}, {5: "r" * (remoting.MAX_HEADER_LENGTH + 1)},          # past the length words
])
def test_encode_rocketmq_frame_head_refuses_alike(change):
    members = [310, 0, 409, 7, 0, None, {"a": "b"}, 10]
    for at, value in change.items():
        members[at] = value
    native_outcome = _outcome_of_any(_native.encode_rocketmq_frame_head, *members)
    assert native_outcome == _outcome_of_any(remoting.encode_rocketmq_frame_head_py, *members)
    assert native_outcome[0] != "ok"


def _outcome_of_any(fn, *args):
    """The type of what ``fn`` raises (its text is the packer's own), or "ok"."""
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return (type(exc).__name__,)
    return ("ok",)


# the decoders of a header's parts, each with what it decodes when the input is valid
_HEADER_DECODERS = [
    pytest.param("decode_ext_fields", remoting.decode_ext_fields_py,
                 st.dictionaries(_text, _text, max_size=6).map(lambda ext: remoting.encode_ext_fields_py(ext)[4:]),
                 id="ext_fields"),
    pytest.param("decode_rocketmq_header", remoting.decode_rocketmq_header_py, _headers, id="rocketmq_header"),
]


@needs_native
@pytest.mark.parametrize("name, twin, valid", _HEADER_DECODERS)
@settings(max_examples=1000, deadline=None)
@given(draw=st.data(), cuts=st.lists(st.integers(0, 300), max_size=3),
       flips=st.lists(st.tuples(st.integers(0, 300), st.integers(0, 255)), max_size=4),
       max_fields=st.integers(0, 8))
def test_header_decoders_match_their_twins_on_damaged_input(name, twin, valid, draw, cuts, flips, max_fields):
    data = _damaged(draw.draw(valid), flips, cuts)
    _assert_alike(getattr(_native, name), twin, data, max_fields)


@needs_native
@pytest.mark.parametrize("name, twin, valid", _HEADER_DECODERS)
@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=64))
def test_header_decoders_match_their_twins_on_random_bytes(name, twin, valid, data):
    _assert_alike(getattr(_native, name), twin, data, 4)


# ---- runs of frames

_wire_frames = st.lists(st.builds(
    lambda code, opaque, remark, ext, body, serialize_type: remoting.encode_command(remoting.RemotingCommand(
        code=code, opaque=opaque, remark=remark, ext_fields=ext, body=body, serialize_type=serialize_type)),
    st.integers(-2**15, 2**15 - 1), st.integers(-2**31, 2**31 - 1), st.one_of(st.none(), _text),
    st.dictionaries(_text, _text, max_size=4), st.binary(max_size=40),
    st.sampled_from([remoting.SerializeType.ROCKETMQ] * 3 + [remoting.SerializeType.JSON])), max_size=5)


@needs_native
@settings(max_examples=1000, deadline=None)
@given(frames=_wire_frames, cuts=st.lists(st.integers(0, 600), max_size=2),
       flips=st.lists(st.tuples(st.integers(0, 600), st.integers(0, 255)), max_size=3),
       pos=st.integers(0, 80), max_frame_bytes=st.sampled_from([16, 120, 2**24]),
       max_header_bytes=st.sampled_from([20, 100, 2**20]), max_fields=st.integers(0, 4))
def test_decode_frames_matches_the_twin(frames, cuts, flips, pos, max_frame_bytes, max_header_bytes, max_fields):
    data = _damaged(b"".join(frames), flips, cuts)
    pos = min(pos, len(data)) if pos % 3 else 0
    args = (pos, max_frame_bytes, max_header_bytes, max_fields)
    expected = _outcome(remoting.decode_frames_py, data, *args)
    assert _outcome(_native.decode_frames, data, *args) == expected
    assert _outcome(_native.decode_frames, bytearray(data), *args) == expected
    if not flips and not cuts and pos == 0 and max_frame_bytes == 2**24 and max_header_bytes == 2**20 \
            and max_fields == 4:   # intact: every ROCKETMQ frame up to the first JSON one
        leading = next((k for k, f in enumerate(frames) if f[4] != remoting.SerializeType.ROCKETMQ), len(frames))
        decoded, end = expected[1]
        assert (len(decoded), end) == (leading, sum(len(f) for f in frames[:leading]))


@needs_native
def test_decode_frames_refuses_a_negative_position_alike():
    for fn in (_native.decode_frames, remoting.decode_frames_py):
        assert _outcome(fn, b"", -1, 100, 100, 4) == ("ValueError", "a negative position")


# ---- the body of a SEND_BATCH_MESSAGE

_entries = st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.binary(max_size=40), _text), max_size=5)


@needs_native
@settings(max_examples=1000, deadline=None)
@given(entries=_entries, cuts=st.lists(st.integers(0, 400), max_size=2),
       flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=4),
       max_entries=st.integers(0, 6), suffix=st.one_of(st.none(), _text, st.sampled_from(["", "\x02", "W\x01t"])))
def test_split_batch_matches_the_twin_on_damaged_input(entries, cuts, flips, max_entries, suffix):
    data = encode_batch([BatchEntry(*e) for e in entries])
    if max_entries >= len(entries):
        assert _native.split_batch(data, max_entries) == entries
        assert _native.split_batch(data, max_entries, None) == entries
        # with a suffix, what Apache's batch encoder stores: a separator only between two
        # non-empty parts, and not after one the entry's properties already end with
        if suffix is not None:
            assert _native.split_batch(data, max_entries, suffix) == [
                (flag, body, props + suffix if not (props and suffix) or props.endswith("\x02")
                 else props + "\x02" + suffix) for flag, body, props in entries]
    _assert_alike(_native.split_batch, message_batch.split_batch_py, _damaged(data, flips, cuts), max_entries, suffix)


@needs_native
@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=80))
def test_split_batch_matches_the_twin_on_random_bytes(data):
    _assert_alike(_native.split_batch, message_batch.split_batch_py, data, 3)


def test_a_malformed_batch_is_a_message_format_error():
    with pytest.raises(MessageFormatError, match="truncated batch entry at 0"):
        message_batch.decode_batch(b"\x00" * 10)
    bad_text = encode_batch([BatchEntry(0, b"b", "ok")])[:-2] + b"\xff\xfe"
    with pytest.raises(MessageFormatError, match="properties are not UTF-8"):
        message_batch.decode_batch(bad_text)


# ---- a message's properties string

_props_chars = st.one_of(st.sampled_from(["\x01", "\x02", "a", "K", "\u00e9", "\U0001f600", "\ud800"]),
                         st.characters())


@needs_native
@settings(max_examples=1000, deadline=None)
@given(s=st.one_of(st.none(), st.text(_props_chars, max_size=60)))
def test_string_to_properties_matches_the_twin(s):
    assert _native.string_to_properties(s) == message_props.string_to_properties_py(s)


@needs_native
def test_string_to_properties_keeps_javas_rules():
    s = "A\x011\x02\x01x\x02B\x01\x02C\x01\x01\x02A\x012\x02D\x01v\x01w\x02"
    assert _native.string_to_properties(s) == message_props.string_to_properties_py(s) == {
        "A": "2", "C": "\x01", "D": "v\x01w"}
    with pytest.raises(TypeError):
        _native.string_to_properties(b"A\x011")


@needs_native
@settings(max_examples=1000, deadline=None)
@given(s=st.text(_props_chars, max_size=60), name=st.text(st.sampled_from(["a", "K", "\u00e9", "\U0001f600"]),
                                                            min_size=1, max_size=3))
def test_property_value_matches_the_twin_and_the_parse(s, name):
    value = _native.property_value(s, name + "\x01")
    assert value == message_props.property_value_py(s, name + "\x01")
    if "\ud800" not in s:   # the parse needs no encoding; a lone surrogate only matters to writers
        assert value == message_props.string_to_properties_py(s).get(name)


@needs_native
def test_property_value_refuses_alike():
    for args in (("A\x011", ""), (b"A\x011", "A\x01"), ("A\x011", None)):
        assert _outcome(_native.property_value, *args)[0] == _outcome(message_props.property_value_py, *args)[0]
        assert _outcome(_native.property_value, *args)[0] != "ok"


# ---- a CommitLog record


_V4_IP, _V6_IP = bytes([10, 0, 0, 1]), bytes(range(16))
_INT32 = st.one_of(st.integers(-2**31, 2**31 - 1), st.sampled_from([-2**31 - 1, 2**31]))
_INT64 = st.one_of(st.integers(-2**63, 2**63 - 1), st.sampled_from([-2**63 - 1, 2**63, 2**70]))


def _record_args(topic, props, body, born_v6, store_v6, ints):
    """encode_record's arguments from topic on, ``ints``: queue_id, flag, sys_flag's other bits,
    born_timestamp, born_port, store_port, reconsume_times, prepared_transaction_offset,
    queue_offset, physical_offset, store_timestamp."""
    queue_id, flag, sys_flag, born_ts, born_port, store_port, reconsume, prepared, qo, po, ts = ints
    sys_flag = message.with_host_flags(sys_flag, _V6_IP if born_v6 else _V4_IP, _V6_IP if store_v6 else _V4_IP)
    return (topic, props, body, queue_id, flag, sys_flag, born_ts, _V6_IP if born_v6 else _V4_IP, born_port,
            _V6_IP if store_v6 else _V4_IP, store_port, reconsume, prepared, qo, po, ts)


@needs_native
@settings(max_examples=400, deadline=None)
@given(topic=st.one_of(st.text(_chars, max_size=20), st.text(st.characters(max_codepoint=0x7F), min_size=120,
                                                              max_size=200)),
       body=st.binary(max_size=300), props=st.text(_chars, max_size=40),
       born_v6=st.booleans(), store_v6=st.booleans(), pos=st.integers(-2, 60), room=st.integers(-2, 700),
       ints=st.tuples(_INT32, _INT32, _INT32, _INT64, _INT32, _INT32, _INT32, _INT64, _INT64, _INT64, _INT64))
def test_encode_record_writes_the_twins_bytes(topic, body, props, born_v6, store_v6, pos, room, ints):
    args = _record_args(topic, props, body, born_v6, store_v6, ints)
    a, b = bytearray(b"\xaa" * 500), bytearray(b"\xaa" * 500)
    limit = pos + room
    outcome = _outcome_of_any(_native.encode_record, a, pos, limit, *args)
    assert outcome == _outcome_of_any(message.encode_record_py, b, pos, limit, *args)
    assert a == b   # the same bytes, or nothing written by either
    if outcome != ("ok",):
        return
    size = _native.encode_record(bytearray(a), pos, limit, *args)
    assert _native.encode_record(message.NO_ROOM, 0, 0, *args) == -abs(size)   # a size query
    if size < 0:
        assert a == bytearray(b"\xaa" * 500)
        return
    ext, decoded_size = message.decode_message(bytes(a[pos:pos + size]))
    assert decoded_size == size <= limit - pos
    assert (ext.topic, ext.body, ext.queue_id, ext.flag, ext.sys_flag, ext.born_timestamp, ext.reconsume_times,
            ext.prepared_transaction_offset, ext.queue_offset, ext.commit_log_offset, ext.store_timestamp) == (
        topic, body, *args[3:7], *args[11:])
    assert message.check_record(a, pos, pos + size, info=False) in (size, None)   # CRC and lengths as recovery reads them


@needs_native
@settings(max_examples=300, deadline=None)
@given(records=st.lists(st.tuples(st.integers(-2**31, 2**31), st.binary(max_size=80), st.text(_chars, max_size=30)),
                        max_size=6),
       topic=st.text(_chars, max_size=8), v6=st.booleans(),
       pos=st.integers(-1, 40), room=st.one_of(st.integers(0, 900), st.just(900)),
       max_size=st.one_of(st.integers(0, 300), st.just(10**6)), first=st.integers(0, 2**63 - 1),
       base=st.integers(-2**63, 2**63 - 1))
def test_encode_records_writes_the_twins_bytes(records, topic, v6, pos, room, max_size, first, base):
    entries = list(records)
    ip = _V6_IP if v6 else _V4_IP
    shared = (3, message.with_host_flags(0, ip, _V4_IP), 1_700_000_000_000, ip, 5555, _V4_IP, 10911, 0)
    a, b = bytearray(b"\xaa" * 900), bytearray(b"\xaa" * 900)
    args = (pos, room, max_size, topic, entries, *shared, first, base, 77)
    outcome = _outcome_of_any(_native.encode_records, a, *args)
    assert outcome == _outcome_of_any(message.encode_records_py, b, *args)
    assert a == b   # the same records written (or those before one that did not fit)
    if outcome == ("ok",):
        sizes = _native.encode_records(bytearray(a), *args)
        assert sizes == message.encode_records_py(bytearray(b), *args)
        if sizes:
            assert [(m.body, m.flag, m.queue_offset) for m in message.decode_messages(bytes(a[pos:pos + sum(sizes)]))] == [
                (body, flag, first + i) for i, (flag, body, _) in enumerate(entries)]


_record_info_args = st.tuples(
    st.lists(st.tuples(st.just(0), st.just(b""), st.one_of(
        st.text(_chars, max_size=30),
        st.builds(lambda a, tags, b: f"{a}TAGS\x01{tags}\x02{b}", st.text(_chars, max_size=8),
                  st.text(_chars, max_size=12), st.text(_chars, max_size=8)))), max_size=6),
    st.lists(st.one_of(st.integers(0, 2**31 - 1), st.integers(-3, 3)), min_size=6, max_size=6),
    st.text(_chars, max_size=8), st.integers(-2**31, 2**31 - 1),
    st.one_of(st.integers(0, 2**40), st.integers(2**63 - 8, 2**63 + 2), st.integers(-2**63 - 2, 2)),
    st.one_of(st.integers(0, 2**40), st.integers(2**63 - 2**33, 2**63 + 2), st.integers(-2**63 - 2, 2)),
    st.integers(0, 0xFF), st.integers(0, 2**45), st.sampled_from(["7F00000100002A9F", "", "C0A80001\u00e9"]))


@needs_native
@settings(max_examples=500, deadline=None)
@given(args=_record_info_args, one_size_short=st.booleans())
def test_batch_record_infos_matches_the_twin(args, one_size_short):
    entries, sizes, topic, queue_id, first, begin, sys_flag, store_timestamp, prefix = args
    sizes = sizes[:len(entries) - (1 if one_size_short and entries else 0)]
    call = (message.RecordInfo, entries, sizes, "TAGS\x01", topic, queue_id, first, begin, sys_flag,
            store_timestamp, prefix)
    expected = _outcome_of_any(message.batch_record_infos_py, *call)
    assert _outcome_of_any(_native.batch_record_infos, *call) == expected
    if expected == ("ok",):
        infos, msg_ids = _native.batch_record_infos(*call)
        assert (infos, msg_ids) == message.batch_record_infos_py(*call)
        assert all(type(info) is message.RecordInfo for info in infos)


@needs_native
def test_batch_record_infos_builds_whole_record_infos():
    entries = [(0, b"a", "TAGS\x01TagA\x02KEYS\x01k1"), (0, b"b", "UNIQ_KEY\x01u"), (0, b"c", "TAGS\x01\u00e9\U0001f600")]
    infos, msg_ids = message.batch_record_infos(entries, [100, 120, 90], "T", 3, 7, 4096, 0, 1_700_000_000_000,
                                                "7F00000100002A9F")
    assert infos == [
        message.RecordInfo(100, "T", 3, 7, 4096, 0, 1_700_000_000_000, java_string_hash("TagA"), 0, entries[0][2]),
        message.RecordInfo(120, "T", 3, 8, 4196, 0, 1_700_000_000_000, 0, 0, entries[1][2]),
        message.RecordInfo(90, "T", 3, 9, 4316, 0, 1_700_000_000_000, java_string_hash("\u00e9\U0001f600"), 0,
                           entries[2][2])]
    assert msg_ids == "7F00000100002A9F0000000000001000,7F00000100002A9F0000000000001064,7F00000100002A9F00000000000010DC"
    assert (infos[0].keys, infos[1].uniq_key, infos[2].transaction_type) == ("k1", "u", 0)
    infos[0].size = 1   # an ordinary instance: writable, collectable
    del infos
    gc.collect()


def _record_infos(n, topic, queue_id, sys_flag, first, offset, size, changes):
    infos = [message.RecordInfo(size, topic, queue_id, first + i, offset + i * size, sys_flag, 1, -i, 0, "")
             for i in range(n)]
    for at, field, value in changes:   # another queue, a gap, a field past its type, another class
        if infos:
            if field == "class":
                infos[at % n] = _RecordInfoLike(*[getattr(infos[at % n], f) for f in _RECORD_INFO_FIELDS])
            else:
                setattr(infos[at % n], field, value)
    return infos


_RECORD_INFO_FIELDS = tuple(f.name for f in fields(message.RecordInfo))
# a class with RecordInfo's slots that is not RecordInfo
_RecordInfoLike = make_dataclass("_RecordInfoLike", _RECORD_INFO_FIELDS, slots=True)


@needs_native
@settings(max_examples=500, deadline=None)
@given(n=st.integers(0, 5), topic=st.sampled_from(["T", "%RETRY%g"]), queue_id=st.integers(0, 3),
       sys_flag=st.sampled_from([0, 4, 8]), first=st.one_of(st.integers(0, 2**40), st.just(2**63 - 3)),
       offset=st.integers(0, 2**50), size=st.integers(0, 2**31 - 1),
       changes=st.lists(st.tuples(st.integers(0, 4), st.sampled_from(
           ["topic", "queue_id", "sys_flag", "queue_offset", "size", "commit_log_offset", "tags_code", "class"]),
           st.one_of(st.integers(-2**64, 2**64), st.sampled_from(["T", "U"]))), max_size=2))
def test_consume_queue_units_match_the_twin(n, topic, queue_id, sys_flag, first, offset, size, changes):
    infos = _record_infos(n, topic, queue_id, sys_flag, first, offset, size, changes)
    for records in (infos, tuple(infos)):
        expected = _outcome_of_any(message.consume_queue_units_py, message.RecordInfo, records)
        assert _outcome_of_any(_native.consume_queue_units, message.RecordInfo, records) == expected
        if expected == ("ok",):
            units = _native.consume_queue_units(message.RecordInfo, records)
            assert units == message.consume_queue_units_py(message.RecordInfo, records)
    if not changes and n and first + n - 1 < 2**63:   # one queue's consecutive records: their units, in order
        assert message.consume_queue_units(infos) == b"".join(
            CQ_UNIT.pack(offset + i * size, size, -i) for i in range(n))


@needs_native
def test_batch_record_infos_refuses_a_class_without_the_slots():
    class NoSlots:
        pass

    @dataclass(slots=True)
    class TooFew:
        size: int

    for cls in (NoSlots, TooFew, 3):
        with pytest.raises(TypeError):
            _native.batch_record_infos(cls, [(0, b"", "")], [1], "TAGS\x01", "T", 0, 0, 0, 0, 0, "")


@needs_native
def test_encode_record_refuses_alike():
    ok = _record_args("T", "A\x01b", b"x" * 10, False, False, (0,) * 11)
    for encode in (_native.encode_record, message.encode_record_py):
        buf = bytearray(300)
        for pos, limit in ((-1, 10), (20, 10), (0, 301), (2**70, 2**71)):
            with pytest.raises(ValueError, match="outside the buffer"):
                encode(buf, pos, limit, *ok)
        with pytest.raises(ValueError, match="host bits"):
            encode(buf, 0, 300, *ok[:5], ok[5] | 0x10, *ok[6:])
        with pytest.raises(ValueError, match="properties length"):
            encode(buf, 0, 300, "T", "p" * 32768, *ok[2:])
        with pytest.raises(ValueError, match="topic length"):
            encode(buf, 0, 300, "t" * 32768, *ok[1:])
        with pytest.raises(UnicodeEncodeError):
            encode(buf, 0, 300, "T\ud800", *ok[1:])
        with pytest.raises(BufferError):
            encode(bytes(300), 0, 300, *ok)
        assert buf == bytearray(300)   # nothing written
        assert encode(buf, 5, 5 + 104, *ok) == -105   # one byte short: nothing written
        assert buf == bytearray(300)
        assert encode(buf, 5, 5 + 105, *ok) == 105


@needs_native
@settings(max_examples=500, deadline=None)
@given(props=st.dictionaries(st.text(_props_chars, max_size=12), st.one_of(st.text(_props_chars, max_size=12), st.none()),
                             max_size=40),
       entries_held=st.integers(-1, 200))
def test_properties_to_string_matches_the_twin(props, entries_held):
    assert _native.properties_to_string(props, entries_held) == message_props.properties_to_string_py(props, entries_held)
    assert _native.properties_to_string(props) == message_props.properties_to_string_py(props)


@needs_native
def test_properties_to_string_orders_as_a_java_hashmap():
    # the names a Java producer sends, in the order a Java broker 4.9.x stores them
    props = {"KEYS": "k1", "UNIQ_KEY": "7F0000011F9C18B4AAC2", "CLUSTER": "DefaultCluster", "WAIT": "true",
             "TAGS": "TagA"}
    expected = message_props.properties_to_string_py(props)
    assert _native.properties_to_string(props) == expected
    many = {f"p{i}": str(i) for i in range(300)}   # resized buckets, ties kept in insertion order
    assert _native.properties_to_string(many, 500) == message_props.properties_to_string_py(many, 500)
    with pytest.raises(TypeError):
        _native.properties_to_string({"a": 1})


# ---- Java's parseInt / parseLong

_NUMBERS = st.one_of(
    st.integers(-2**64, 2**64).map(str),
    st.integers(0, 2**64).map(lambda n: "+" + str(n)),
    st.sampled_from(["", "+", "-", "-0", "007", "2147483647", "2147483648", "-2147483648", "-2147483649",
                     "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
                     "00000000000000000001", "1_000", " 1", "1 ", "\u0661", "１", "12a", "0x10", "--1", "+-1"]),
    st.text(st.sampled_from("0123456789+-_ a\u0661"), max_size=24),
)


@needs_native
@settings(max_examples=1000, deadline=None)
@given(value=_NUMBERS, bits=st.sampled_from([32, 64, 16]))
def test_parse_java_int_matches_the_twin(value, bits):
    expected = _outcome(text.parse_java_int_py, value, bits)
    assert _outcome(_native.parse_java_int, value, bits) == expected
    assert _outcome(lambda v: _native.parse_java_int(v, bits=bits), value) == expected
    if bits == 64:
        assert _outcome(_native.parse_java_int, value) == expected


@needs_native
def test_parse_java_int_reads_what_java_reads():
    assert _native.parse_java_int("-2147483648", bits=32) == -2**31
    assert _native.parse_java_int("+0042", 32) == 42
    assert _native.parse_java_int("-9223372036854775808") == -2**63
    for bad in ("2147483648", "", "1.0", "٣"):
        with pytest.raises(ValueError):
            _native.parse_java_int(bad, bits=32)
    for call in (lambda: _native.parse_java_int(7), lambda: _native.parse_java_int("1", 32, 3),
                 lambda: _native.parse_java_int("1", width=32), lambda: _native.parse_java_int("1", bits="32")):
        with pytest.raises(TypeError):
            call()


# ---- a plain send's header

_V2_NAMES = ("a", "b", "e", "f", "g", "h", "i", "j", "m")
_PROPERTY_NAMES = ("CLUSTER", "WAIT", "TAGS", "TRAN_MSG", "DELAY", "TIMER_DELIVER_MS")
_send_numbers = st.one_of(st.integers(-2**31, 2**31 - 1).map(str), _NUMBERS)
_send_property_names = st.sampled_from(["KEYS", "UNIQ_KEY", "TAGS", "WAIT", "CLUSTER", "TRAN_MSG", "DELAY",
                                        "TIMER_DELIVER_MS", "TIMER_OUT_MS", "a", "\u00e9"])
_send_property_values = st.one_of(st.sampled_from(["true", "false", "TagA", "", "FALSE"]), st.text(_chars, max_size=8))


@st.composite
def _send_headers(draw):
    """A send header as the Java client sends it, with any field missing, empty, not a number,
    not a str, or of another flavour."""
    props = draw(st.dictionaries(_send_property_names, _send_property_values, max_size=6))
    header = {"a": draw(st.sampled_from(["pg", "", "\u00e9"])), "b": draw(st.sampled_from(["T", "", "%RETRY%g"])),
              "c": "TBW102", "d": "4", "e": draw(_send_numbers), "f": draw(_send_numbers), "g": draw(_send_numbers),
              "h": draw(_send_numbers), "i": draw(st.one_of(st.just(message_props.properties_to_string_py(props)),
                                                            st.text(_props_chars, max_size=30))),
              "j": draw(st.one_of(_send_numbers, st.just(""))),
              "m": draw(st.sampled_from(["false", "true", "TRUE", "True", "", "tru\u00e9", "yes"]))}
    for name in draw(st.lists(st.sampled_from(sorted(header)), max_size=3)):
        if draw(st.booleans()):
            header.pop(name, None)
        else:
            header[name] = draw(st.sampled_from([None, 7, b"x"]))
    return header


@needs_native
@settings(max_examples=2000, deadline=None)
@given(header=_send_headers(), cluster=st.sampled_from(["DefaultCluster", "", "\U0001f600"]))
def test_plain_send_fields_matches_the_twin(header, cluster):
    expected = send_header.plain_send_fields_py(header, _V2_NAMES, _PROPERTY_NAMES, cluster)
    assert _native.plain_send_fields(header, _V2_NAMES, _PROPERTY_NAMES, cluster) == expected
    if expected is not None:
        assert type(expected[6]) is bool


@needs_native
def test_plain_send_fields_reads_what_the_java_client_sends():
    props = {"KEYS": "k1", "UNIQ_KEY": "7F0000011F9C18B4AAC2", "WAIT": "true", "TAGS": "TagA"}
    header = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
              "i": message_props.properties_to_string_py(props), "j": "0", "k": "false", "m": "false"}
    stored = message_props.properties_to_string_py({**props, "CLUSTER": "C"})   # sized with WAIT in
    stored = stored.replace("WAIT\x01true\x02", "").replace("\x02WAIT\x01true", "")
    expected = ("T", 3, 0, 1700000000000, 0, stored, True, 0, java_string_hash("TagA"))
    for plain in (_native.plain_send_fields, send_header.plain_send_fields_py):
        assert plain(header, _V2_NAMES, _PROPERTY_NAMES, "C") == expected
        # a batch, a half, a delayed or timer message, a missing or bad field: the general path's
        for changed in ({"m": "TRUE"}, {"i": header["i"] + "\x02TRAN_MSG\x01true"}, {"i": "DELAY\x013"},
                        {"i": "TIMER_DELIVER_MS\x011"}, {"e": "x"}, {"g": "9223372036854775808"}, {"a": ""},
                        {"h": None}):
            assert plain({**header, **changed}, _V2_NAMES, _PROPERTY_NAMES, "C") is None
        assert plain({**header, "j": "x"}, _V2_NAMES, _PROPERTY_NAMES, "C")[7] == 0
        assert plain({**header, "i": "WAIT\x01false"}, _V2_NAMES, _PROPERTY_NAMES, "C")[5:7] == ("CLUSTER\x01C", False)
    for args in ((header, _V2_NAMES[:8], _PROPERTY_NAMES, "C"), (header, _V2_NAMES, _PROPERTY_NAMES[:2], "C"),
                 (list(header), _V2_NAMES, _PROPERTY_NAMES, "C"), (header, _V2_NAMES, _PROPERTY_NAMES, None)):
        with pytest.raises(TypeError):
            _native.plain_send_fields(*args)

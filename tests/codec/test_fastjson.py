"""fastjson-compatible bodies: the verified examples of spec/remoting.md and store.md."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyrmq.codec import fastjson
from pyrmq.codec.errors import ProtocolError


def test_integer_keys_unquoted():
    route = {"brokerDatas": [{"brokerAddrs": {0: "192.168.0.10:10911", 1: "192.168.0.11:10911"},
                              "brokerName": "broker-a", "cluster": "DefaultCluster"}],
             "filterServerTable": {},
             "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0,
                             "writeQueueNums": 4}]}
    assert fastjson.dumps(route) == (
        '{"brokerDatas":[{"brokerAddrs":{0:"192.168.0.10:10911",1:"192.168.0.11:10911"},"brokerName":"broker-a",'
        '"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
        '"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
    assert fastjson.loads(fastjson.dumps(route)) == route


def test_object_keys_and_doubles():
    text = ('{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
            '{"brokerOffset":10,"consumerOffset":5,"lastTimestamp":1700000000000}}}')
    parsed = fastjson.loads(text)
    key = fastjson.ObjectKey.of({"brokerName": "broker-a", "queueId": 0, "topic": "TopicTest"})
    assert parsed["offsetTable"][key]["consumerOffset"] == 5
    assert fastjson.dumps(parsed) == text


def test_consumer_offset_file_pretty_layout():
    text = '{\n\t"offsetTable":{\n\t\t"%RETRY%group_a@group_a":{0:0\n\t\t},\n\t\t"TopicTest@group_a":{0:250,1:249\n\t\t}\n\t}\n}'
    parsed = fastjson.loads(text)
    assert parsed == {"offsetTable": {"%RETRY%group_a@group_a": {0: 0}, "TopicTest@group_a": {0: 250, 1: 249}}}
    assert fastjson.dumps_pretty(parsed) == text


def test_null_members_omitted_and_keys_sorted():
    assert fastjson.dumps({"b": 1, "a": None, "c": [1, None]}) == '{"b":1,"c":[1,null]}'


@pytest.mark.parametrize("bad", ['{"a":', '{0 1}', '[1,', '{"a":1}}', '"\\x"', "{" * 100 + "}" * 100, '{"a":tru}'])
def test_malformed_bodies(bad):
    with pytest.raises(ProtocolError):
        fastjson.loads(bad)


@pytest.mark.parametrize("bad", [
    '{"a":"\\ud800"}', '{"\\udc00":1}', '["\\ud83d"]', "[" * 990 + "]" * 990, '{"a":NaN}', '{"a":-Infinity}',
    '{"a":1e999}', "{0:1e999}", "{0:\u0661\u0662}", "{0:1_0}", "{0:nan}", "{0:" + "9" * 50 + "}",
    '{{"a":1,0:2}:3}', '{{"topic":[1]}:2}', "{true:1}", "{null:1}",
])
def test_refuses_what_could_not_be_written_back(bad):
    """Lone surrogates, nesting past MAX_DEPTH through either parser, non-finite or non-ASCII numbers,
    keys that would come back different."""
    with pytest.raises(ProtocolError):
        fastjson.loads(bad)


def test_escaped_surrogate_pairs_and_null_object_key_members():
    assert fastjson.loads('["\\ud83d\\ude00"]') == ["\U0001F600"]
    key = fastjson.ObjectKey.of({"brokerName": "b", "queueId": 0})
    assert fastjson.loads('{{"brokerName":"b","queueId":0,"topic":null}:1}') == {key: 1}
    assert fastjson.loads("[" * 64 + "]" * 64) and fastjson.loads("{0:" * 64 + "1" + "}" * 64)


@pytest.mark.parametrize("value, expected", [(5, 5), ("-12", -12), ("9223372036854775807", 2**63 - 1)])
def test_int_member(value, expected):
    assert fastjson.int_member(value) == expected


@pytest.mark.parametrize("value", [True, 1.5, "1.5", " 1", "+1", "1_0", "\u0661", "9223372036854775808", 2**63, None])
def test_int_member_refuses(value):
    with pytest.raises(ValueError):
        fastjson.int_member(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5), children, max_size=4)
    | st.dictionaries(st.integers(0, 100), children, max_size=4),
    max_leaves=20)


def _drop_none_members(value):
    if isinstance(value, dict):
        return {k: _drop_none_members(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none_members(v) for v in value]
    return value


@given(json_values)
def test_round_trip(value):
    assert fastjson.loads(fastjson.dumps(value)) == _drop_none_members(value)
    assert fastjson.loads(fastjson.dumps_pretty(value)) == _drop_none_members(value)


def _outcome(parse, text):
    try:
        return "ok", parse(text)
    except ProtocolError:
        return "refused", None


standard_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=30)


@given(standard_values, st.sampled_from(["str", "bytes", "memoryview"]))
def test_orjson_path_reads_what_the_json_module_reads(value, form):
    import json
    text = json.dumps(value)
    data = {"str": text, "bytes": text.encode(), "memoryview": memoryview(text.encode())}[form]
    assert _outcome(fastjson.loads, data) == _outcome(fastjson._loads_slow, data)


@pytest.mark.parametrize("text", [
    "[" * 64 + "]" * 64, "[" * 65 + "]" * 65, "[" * 66 + "]" * 66, "[" * 65 + "1" + "]" * 65,
    '{"a":' * 64 + "{}" + "}" * 64, '{"a":' * 65 + "1" + "}" * 65, "99999999999999999999999",
    "[18446744073709551615, -9223372036854775808]", "1e400", '"\\ud800"', "\ufeff[1]", "[1.0, 2]",
    '{"a": NaN}', '{"a": 1, "a": 2}', " [ ] ", "[1,]",
])
def test_orjson_path_edges(text):
    for data in (text, text.encode()):
        assert _outcome(fastjson.loads, data) == _outcome(fastjson._loads_slow, data)

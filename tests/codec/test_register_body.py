"""RegisterBrokerBody: the typed one-pass decode and the generic parse agree on every body the
typed one takes, and leave every other body to the generic parse."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrmq.codec import fastjson
from pyrmq.codec.register_body import RegisterBody, decode_register_body, register_body_of_json


def generic(data: bytes) -> RegisterBody:
    return register_body_of_json(fastjson.loads(data))


def plain(body: RegisterBody | None):
    """The body as plain values: each topic as (name, read, write, perm, sysFlag), with types."""
    if body is None:
        return None
    topics = None if body.topics is None else [
        [(value, type(value)) for value in msgspec.structs.astuple(topic)] for topic in body.topics]
    return body.data_version, topics, body.filter_servers


def broker_body(topics: int) -> dict:
    """The shape a 4.9.x broker sends (fastjson: every TopicConfig member, the DataVersion)."""
    table = {f"Topic{i}": {"order": False, "perm": 6, "readQueueNums": 8, "topicFilterType": "SINGLE_TAG",
                           "topicName": f"Topic{i}", "topicSysFlag": i % 2, "writeQueueNums": 4}
             for i in range(topics)}
    return {"filterServerList": ["10.0.0.1:40001"], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 12, "timestamp": 1732780800123}, "topicConfigTable": table}}


def test_a_brokers_body_in_one_typed_pass():
    data = json.dumps(broker_body(3), separators=(",", ":")).encode()
    body = decode_register_body(data)
    assert body is not None
    assert (body.data_version, body.filter_servers) == ({"counter": 12, "timestamp": 1732780800123},
                                                        ["10.0.0.1:40001"])
    assert [msgspec.structs.astuple(t) for t in body.topics] == \
        [("Topic0", 8, 4, 6, 0), ("Topic1", 8, 4, 6, 1), ("Topic2", 8, 4, 6, 0)]
    assert plain(body) == plain(generic(data))


@pytest.mark.parametrize("text", [
    # members the typed pass does not take as they are: the generic parse's rules apply
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":"8"}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","perm":6.0}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","perm":true}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","perm":null}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":7}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":6}}}}',
    b'{"filterServerList":[1]}',
    b'{"topicConfigSerializeWrapper":[]}',
    b'[]',
    b'{topicConfigSerializeWrapper:{}}',   # fastjson's unquoted keys
    b'{"filterServerList":["\xff"]}',
])
def test_other_bodies_are_left_to_the_generic_parse(text):
    assert decode_register_body(text) is None


@pytest.mark.parametrize("text", [
    b'{}', b'{"topicConfigSerializeWrapper":null,"filterServerList":null}',
    b'{"topicConfigSerializeWrapper":{}}', b'{"topicConfigSerializeWrapper":{"topicConfigTable":{}}}',
    b'{"topicConfigSerializeWrapper":{"dataVersion":null,"topicConfigTable":null}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T"}}},"more":[[[{}]]]}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","perm":99999999999999999999}}}}',
    b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1e3,"big":99999999999999999999}}}',
])
def test_absent_null_and_odd_members_as_the_generic_parse(text):
    assert plain(decode_register_body(text)) == plain(generic(text))


scalars = st.one_of(st.integers(-2**70, 2**70), st.booleans(), st.none(), st.text(max_size=4),
                    st.floats(allow_nan=False, allow_infinity=False))
members = st.one_of(scalars, st.integers(0, 64), st.integers(0, 64), st.integers(0, 64))
topic_config = st.fixed_dictionaries(
    {}, optional={"topicName": st.one_of(st.text(min_size=1, max_size=8), scalars), "readQueueNums": members,
                  "writeQueueNums": members, "perm": members, "topicSysFlag": members,
                  "topicFilterType": st.just("SINGLE_TAG"), "order": st.booleans(), "attributes": st.just({})})
data_version = st.one_of(st.none(), st.fixed_dictionaries({"counter": st.one_of(st.integers(0, 2**63), scalars),
                                                          "timestamp": st.integers(0, 2**45)}))
bodies = st.fixed_dictionaries({}, optional={
    "topicConfigSerializeWrapper": st.one_of(st.none(), st.fixed_dictionaries({}, optional={
        "dataVersion": data_version,
        "topicConfigTable": st.one_of(st.none(), st.dictionaries(st.text(max_size=6), topic_config, max_size=5)),
        "topicQueueMappingInfoMap": st.just({})})),
    "filterServerList": st.one_of(st.none(), st.lists(st.one_of(st.text(max_size=8), scalars), max_size=3))})


@settings(max_examples=400, deadline=None)
@given(bodies)
def test_the_typed_pass_agrees_with_the_generic_parse(obj):
    data = json.dumps(obj).encode()
    try:
        expected = generic(data)
    except (AttributeError, KeyError, TypeError):   # refused by the processor: SYSTEM_ERROR
        assert decode_register_body(data) is None
        return
    typed = decode_register_body(data)
    if typed is not None:   # the same values and types: 8 stays an int (True == 1, 8.0 == 8)
        assert plain(typed) == plain(expected)

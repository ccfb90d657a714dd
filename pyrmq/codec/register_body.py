"""RegisterBrokerBody: what a broker sends with REGISTER_BROKER every 30 s -- its data version,
its whole topic table and its filter servers -- reduced to what the NameServer keeps of it.

A broker with 10,000 topics sends 1.4 MiB of JSON. Parsed into generic dicts (orjson, then the
walk that proves the tree is what the json module would have made, then a Python loop over the
topic configs) that cost about 40 ms of the NameServer's loop, three times Apache's whole
registration. :func:`decode_register_body` reads the usual shape in one pass with msgspec into
typed structs that keep only the five members a route needs; anything it does not take as
typed -- numbers as strings, floats, nulls, a non-object, bytes that are not UTF-8 -- returns
None, and the caller parses the body generically (fastjson) and takes it with
:func:`register_body_of_json`, whose rules (defaults, ``int()`` of the members, errors) are the
ones both paths share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from pyrmq.codec import fastjson
from pyrmq.codec.errors import ProtocolError

# Java TopicConfig's defaults for members a body leaves out (perm: PermName.PERM_READ | PERM_WRITE).
DEFAULT_QUEUE_NUMS = 0
DEFAULT_PERM = 6
DEFAULT_TOPIC_SYS_FLAG = 0


class RegisteredTopic(msgspec.Struct, rename="camel", gc=False):
    """A topic's queues as registered: the members of its TopicConfig a route needs. Decoded,
    the numbers are ints; built from a generic parse, they are the members as sent (the route
    table converts them with int(), as before)."""

    topic_name: str
    read_queue_nums: Any = DEFAULT_QUEUE_NUMS
    write_queue_nums: Any = DEFAULT_QUEUE_NUMS
    perm: Any = DEFAULT_PERM
    topic_sys_flag: Any = DEFAULT_TOPIC_SYS_FLAG


class _TypedTopic(RegisteredTopic, rename="camel", gc=False):
    """What the typed pass takes: every member of the type Java writes."""

    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = DEFAULT_PERM
    topic_sys_flag: int = DEFAULT_TOPIC_SYS_FLAG


@dataclass(slots=True)
class RegisterBody:
    data_version: Any                 # the DataVersion object as sent (compared, echoed back)
    topics: list[RegisteredTopic] | None     # None: the body has no topic table
    filter_servers: list[Any]


def topic_rows(topic_config_table: Any) -> list[RegisteredTopic]:
    """The topics of a generically parsed ``topicConfigTable`` (a dict of TopicConfig objects)."""
    return [RegisteredTopic(config["topicName"], config.get("readQueueNums", DEFAULT_QUEUE_NUMS),
                            config.get("writeQueueNums", DEFAULT_QUEUE_NUMS), config.get("perm", DEFAULT_PERM),
                            config.get("topicSysFlag", DEFAULT_TOPIC_SYS_FLAG))
            for config in topic_config_table.values()]


def register_body_of_json(body: Any) -> RegisterBody:
    """A generically parsed body (fastjson.loads, or the compressed form decoded to the same
    shape); raises AttributeError / KeyError / TypeError on members of the wrong type."""
    wrapper = body.get("topicConfigSerializeWrapper") or {}
    table = wrapper.get("topicConfigTable")
    return RegisterBody(wrapper.get("dataVersion"), None if table is None else topic_rows(table),
                        body.get("filterServerList") or [])


class _Wrapper(msgspec.Struct):
    topicConfigTable: dict[str, _TypedTopic] | None = None
    dataVersion: msgspec.Raw = msgspec.Raw(b"null")   # parsed by fastjson: its values exactly


class _Body(msgspec.Struct):
    topicConfigSerializeWrapper: _Wrapper | None = None
    filterServerList: list[str] | None = None


_DECODER = msgspec.json.Decoder(_Body)


def decode_register_body(data: bytes | memoryview) -> RegisterBody | None:
    """The body in one typed pass, or None when it needs the generic parser (see the module)."""
    try:
        body = _DECODER.decode(data)
    except (msgspec.DecodeError, ValueError, RecursionError):   # bad UTF-8 raises UnicodeDecodeError
        return None
    wrapper = body.topicConfigSerializeWrapper
    if wrapper is None:
        return RegisterBody(None, None, body.filterServerList or [])
    try:
        data_version = fastjson.loads(wrapper.dataVersion)
    except ProtocolError:
        return None
    table = wrapper.topicConfigTable
    return RegisterBody(data_version, None if table is None else list(table.values()), body.filterServerList or [])

"""A plain send's header read in one call: what SEND_MESSAGE (10) and SEND_MESSAGE_V2 (310) carry
for a message that is neither a batch, a transaction half, delayed nor a timer message -- almost
every send -- checked and turned into what its record needs.

The broker's send processor calls :func:`plain_send_fields` first and takes its general path
(spec/codes.md section 3.3, every case and every refusal) when it answers None. The answer is
the general path's for the same header, so the function decides nothing the general path would
decide otherwise; it only does the plain case's work without the interpreter's steps between
(issue 14). The C function ``_native.plain_send_fields`` does it when the extension is built;
:func:`plain_send_fields_py` is its twin and reference.

Sans-I/O: no files, no sockets, no trio.
"""

from __future__ import annotations

from pyrmq.codec.message_props import (
    properties_to_string,
    string_to_properties,
    tags_string_to_tags_code,
)
from pyrmq.codec.native import native_function
from pyrmq.codec.text import parse_java_int

# The send header's fields the function reads, in the order of its ``names`` argument.
SEND_HEADER_FIELDS = ("producer_group", "topic", "queue_id", "sys_flag", "born_timestamp", "flag", "properties",
                      "reconsume_times", "batch")

# (topic, queueId, sysFlag, bornTimestamp, flag, properties string as stored, wait store,
#  reconsumeTimes, tags code)
PlainSend = tuple[str, int, int, int, int, str, bool, int, int]


def plain_send_fields_py(header: dict[str, str], names: tuple[str, ...], property_names: tuple[str, ...],
                         cluster: str) -> PlainSend | None:
    """The fields of a plain send whose header is ``header``; None when it is not plain.

    ``names``: the header's names of SEND_HEADER_FIELDS (one flavour of the send header).
    ``property_names``: the CLUSTER, WAIT and TAGS property names, then the names whose presence
    makes a message not plain. None as well when a required field (every one but properties,
    reconsumeTimes and batch) is missing, empty or not a number of its Java type, or when a field
    is not a str (None counts as missing). As in the Java broker, the stored properties gain
    CLUSTER = ``cluster`` and lose WAIT (``wait store``: WAIT is not "false"), in the order of the
    map that held WAIT; a reconsumeTimes that is not a number counts as 0."""
    values = [header.get(name) for name in names]
    if any(value is not None and not isinstance(value, str) for value in values):
        return None
    producer_group, topic, queue_id, sys_flag, born_timestamp, flag, properties, reconsume_times, batch = values
    if not (producer_group and topic and queue_id and sys_flag and born_timestamp and flag):
        return None
    try:
        numbers = (parse_java_int(queue_id, bits=32), parse_java_int(sys_flag, bits=32),
                   parse_java_int(born_timestamp), parse_java_int(flag, bits=32))
    except ValueError:
        return None
    try:
        reconsume = parse_java_int(reconsume_times, bits=32) if reconsume_times else 0
    except ValueError:
        reconsume = 0
    if batch is not None and (not batch.isascii() or batch.lower() == "true"):
        return None
    props = string_to_properties(properties)
    cluster_name, wait_name, tags_name, *not_plain = property_names
    if not props.keys().isdisjoint(not_plain):
        return None
    props[cluster_name] = cluster
    entries_held = len(props)
    wait = props.pop(wait_name, None)
    return (topic, *numbers, properties_to_string(props, entries_held), wait != "false", reconsume,
            tags_string_to_tags_code(props.get(tags_name)))


plain_send_fields = native_function("plain_send_fields", plain_send_fields_py,
                                    {"SEND_HEADER_FIELD_COUNT": len(SEND_HEADER_FIELDS)})

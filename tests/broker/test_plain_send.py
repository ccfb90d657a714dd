"""A plain send read in one call (codec.send_header.plain_send_fields) hands the store the record
the send processor's general path builds for the same request, and every other send still takes
the general path."""

from __future__ import annotations

import random
import time

import pytest

from pyrmq.broker import send_processor
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import properties_to_string
from pyrmq.codec.remoting import make_request


class _Producer:
    remote_host_port = ("127.0.0.1", 40000)
    closed = False


def _send(header_changes: dict[str, str | None], props: dict[str, str], v1: bool = False):
    header = {"a": "test_pg", "b": "TopicPlain", "c": "TBW102", "d": "4", "e": "1", "f": "0",
              "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
              "k": "false", "m": "false"}
    for name, value in header_changes.items():
        if value is None:
            header.pop(name)
        else:
            header[name] = value
    if v1:
        names = dict(zip("abcdefghijkm", ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums",
                                           "queueId", "sysFlag", "bornTimestamp", "flag", "properties",
                                           "reconsumeTimes", "unitMode", "batch")))
        header = {names[name]: value for name, value in header.items()}
    code = RequestCode.SEND_MESSAGE if v1 else RequestCode.SEND_MESSAGE_V2
    return make_request(code, header, b"plain body")


_KEYS = {"KEYS": "k1 k2", "UNIQ_KEY": "7F0000011F9C18B4AAC2000000000001", "WAIT": "true", "TAGS": "TagA"}
# 11 properties + WAIT + CLUSTER: the Java map that held WAIT had 32 buckets, the stored one 16
_MANY = {**{f"user{i}": str(i) for i in range(11)}, "WAIT": "true"}
SENDS = [
    pytest.param({}, _KEYS, False, id="java-client"),
    pytest.param({}, _KEYS, True, id="v1-names"),
    pytest.param({}, {**_KEYS, "WAIT": "false"}, False, id="wait-false"),
    pytest.param({}, {"UNIQ_KEY": "U1"}, False, id="no-wait-no-tags"),
    pytest.param({}, _MANY, False, id="map-resized-with-wait"),
    pytest.param({"i": None, "j": None, "m": None}, {}, False, id="no-properties"),
    pytest.param({"j": "x"}, _KEYS, False, id="reconsume-not-a-number"),
    pytest.param({"j": "3", "h": "-7", "f": "1"}, _KEYS, False, id="flags-and-reconsume"),
    pytest.param({"e": "-1"}, _KEYS, False, id="any-queue"),
    pytest.param({}, {**_KEYS, "TIMER_OUT_MS": "1"}, False, id="timer-message-already-in"),
]


@pytest.mark.parametrize("changes, props, v1", SENDS)
async def test_a_plain_send_stores_what_the_general_path_stores(cluster, monkeypatch, changes, props, v1):
    processor = cluster.broker.send_processor
    records = []

    def capture(request, channel, record, topic, queue_id, wait_store, more_ext):
        records.append((record, topic, queue_id, wait_store, more_ext))
        return request.response(ResponseCode.SUCCESS)
    monkeypatch.setattr(processor, "_store", capture)
    request = _send(changes, props, v1)
    plain = send_processor.plain_send_fields
    taken = []
    monkeypatch.setattr(send_processor, "plain_send_fields", lambda *args: taken.append(plain(*args)) or taken[-1])
    random.seed(5)
    assert processor.process(_Producer(), request).code == ResponseCode.SUCCESS
    monkeypatch.setattr(send_processor, "plain_send_fields", lambda *args: None)
    random.seed(5)
    assert processor.process(_Producer(), request).code == ResponseCode.SUCCESS
    assert taken[0] is not None, "a plain send took the general path"
    assert records[0] == records[1]


@pytest.mark.parametrize("changes, props", [
    ({"m": "true"}, {}),
    ({}, {"TRAN_MSG": "true", "PGROUP": "test_pg"}),
    ({}, {"DELAY": "3"}),
    ({}, {"TIMER_DELAY_SEC": "5"}),
    ({"g": "x"}, {}),
    ({"a": None}, {}),
])
def test_other_sends_take_the_general_path(changes, props):
    request = _send(changes, props)
    names = send_processor._V2_KEYS.plain
    assert send_processor.plain_send_fields(request.ext_fields, names, send_processor._PLAIN_PROPERTY_NAMES,
                                            "DefaultCluster") is None

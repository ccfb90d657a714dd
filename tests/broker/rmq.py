"""A minimal RocketMQ client over pyrmq.remoting, for the broker tests (requests as Java sends them)."""

from __future__ import annotations

import time
import uuid

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import decode_messages, properties_to_string
from pyrmq.codec.remoting import RemotingCommand, SerializeType, encode_command, make_request
from pyrmq.remoting.client import RemotingClient


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, *, tags: str | None = None,
               keys: str | None = None, queue_id: int = 0, extra: dict[str, str] | None = None,
               serialize_type: SerializeType = SerializeType.JSON, code: int = RequestCode.SEND_MESSAGE_V2,
               batch: bool = False, sys_flag: int = 0) -> RemotingCommand:
    # Like the Java client: a batch's own properties carry no UNIQ_KEY (each entry has its own).
    props = {"WAIT": "true"} if batch else {"UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true"}
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = keys
    props.update(extra or {})
    header = {"a": "test_pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": str(sys_flag),
              "g": str(int(time.time() * 1000)), "h": "7", "i": properties_to_string(props), "j": "0", "k": "false"}
    if batch:
        header["m"] = "true"
    return await client.invoke(addr, make_request(code, header, body, serialize_type=serialize_type), timeout=10)


def send_frame(topic: str, queue_id: int, opaque: int, body: bytes | None = None) -> bytes:
    """A SEND_MESSAGE_V2 frame as the Java client writes it, for raw connections (pipelining)."""
    props = {"WAIT": "true", "UNIQ_KEY": f"RAW{opaque:029X}"}
    header = {"a": "test_pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
              "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
              "k": "false"}
    request = make_request(RequestCode.SEND_MESSAGE_V2, header, f"body-{opaque}".encode() if body is None else body)
    request.opaque = opaque
    return encode_command(request)


def pull_request(topic: str, queue_id: int, offset: int, *, group: str = "test_cg", sys_flag: int = 0x4,
                 subscription: str = "*", suspend_ms: int = 0, max_nums: int = 32,
                 commit_offset: int = 0) -> RemotingCommand:
    return make_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag), "commitOffset": str(commit_offset),
        "suspendTimeoutMillis": str(suspend_ms), "subscription": subscription, "subVersion": "0",
        "expressionType": "TAG"})


async def pull(client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int, **kwargs):
    response = await client.invoke(addr, pull_request(topic, queue_id, offset, **kwargs), timeout=30)
    messages = decode_messages(response.body) if response.code == 0 and response.body else []
    return response, messages

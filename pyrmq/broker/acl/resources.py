"""What a request needs under ACL: the topics and groups it touches, with the permission each
needs, and whether only an admin account may send it -- Apache 4.9.7's
``PlainAccessValidator.parse`` and ``Permission.ADMIN_CODE``.

A group is named by its retry topic (``%RETRY%group``), so a request on a retry topic needs the
group's permission. Differences from Apache 4.9.7, both closing a hole rather than opening one:
SEND_BATCH_MESSAGE (320) needs PUB on its topic like SEND_MESSAGE_V2 (Apache checks only the
signature of a batch), and LITE_PULL_MESSAGE (361, the 5.x clients' pull; Apache 4.9 does not
know it) needs SUB like PULL_MESSAGE. And the ACL admin codes (50-54, ``admin.py``) need an admin
account, where Apache lets any account with a valid signature rewrite the ACL.
"""

from __future__ import annotations

from pyrmq.broker.acl.plain_config import PUB, SUB
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.java_order import hash_map_order
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.errors import RequestError
from pyrmq.remoting.headers import required_int, required_str
from pyrmq.codec.system_topics import RETRY_GROUP_TOPIC_PREFIX

__all__ = ["ADMIN_CODES", "AclDenied", "java_hash_order", "needed_resources"]


# Apache's Permission.ADMIN_CODE (only accounts with admin: true may send these), and the ACL
# admin codes, which Apache leaves to any signed account.
ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
    RequestCode.DELETE_ACL_CONFIG,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
})


class AclDenied(Exception):
    """A request the ACL refuses; the message is Apache's AclException message."""


def _retry(group: str | None) -> str | None:
    return None if group is None else RETRY_GROUP_TOPIC_PREFIX + group


def _send(request: RemotingCommand, topic_field: str, group_field: str) -> list[tuple[str | None, int]]:
    topic = request.field(topic_field)
    if topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return [(_retry(request.field(group_field)), SUB)]
    return [(topic, PUB)]


def _heart_beat(request: RemotingCommand) -> list[tuple[str | None, int]]:
    body = request.body if isinstance(request.body, (bytes, bytearray, memoryview)) else b""
    try:
        data = fastjson.loads(body)
    except ProtocolError as exc:
        raise AclDenied(f"heartbeat body: {exc}") from None
    if not isinstance(data, dict):
        raise AclDenied("heartbeat body is not a HeartbeatData object")
    needed: list[tuple[str | None, int]] = []
    for consumer in data.get("consumerDataSet") or []:
        if not isinstance(consumer, dict):
            raise AclDenied("heartbeat body: a consumerDataSet entry is not an object")
        group = consumer.get("groupName")
        needed.append((_retry(group) if isinstance(group, str) else None, SUB))
        for subscription in consumer.get("subscriptionDataSet") or []:
            topic = subscription.get("topic") if isinstance(subscription, dict) else None
            needed.append((topic if isinstance(topic, str) else None, SUB))
    return needed


def _update_consumer_offset(request: RemotingCommand) -> list[tuple[str | None, int]]:
    # Apache decodes the whole header first: every @CFNotNull field must be there.
    group = required_str(request, "consumerGroup")
    topic = required_str(request, "topic")
    required_int(request, "queueId")
    required_int(request, "commitOffset")
    return [(_retry(group), SUB), (topic, SUB)]


def _unregister_client(request: RemotingCommand) -> list[tuple[str | None, int]]:
    required_str(request, "clientID")
    return [(_retry(request.field("consumerGroup")), SUB)]


_PARSERS = {
    RequestCode.SEND_MESSAGE: lambda r: _send(r, "topic", "group"),
    RequestCode.SEND_MESSAGE_V2: lambda r: _send(r, "b", "a"),
    RequestCode.SEND_BATCH_MESSAGE: lambda r: _send(r, "b", "a"),
    RequestCode.CONSUMER_SEND_MSG_BACK: lambda r: [(_retry(r.field("group")), SUB)],
    RequestCode.PULL_MESSAGE: lambda r: [(r.field("topic"), SUB), (_retry(r.field("consumerGroup")), SUB)],
    RequestCode.LITE_PULL_MESSAGE: lambda r: [(r.field("topic"), SUB), (_retry(r.field("consumerGroup")), SUB)],
    RequestCode.QUERY_MESSAGE: lambda r: [(r.field("topic"), SUB)],
    RequestCode.HEART_BEAT: _heart_beat,
    RequestCode.UNREGISTER_CLIENT: _unregister_client,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: lambda r: [(_retry(required_str(r, "consumerGroup")), SUB)],
    RequestCode.UPDATE_CONSUMER_OFFSET: _update_consumer_offset,
}


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """Resource -> needed permission, in the order Apache's HashMap would check them (so a
    request refused for two resources names the same one Apache names)."""
    parser = _PARSERS.get(request.code)
    if parser is None:
        return {}
    try:
        pairs = parser(request)
    except RequestError as exc:   # a required header field missing or not a number
        raise AclDenied(exc.remark) from None
    needed: dict[str, int] = {}
    for resource, perm in pairs:
        if resource is not None:
            needed[resource] = perm
    return {name: needed[name] for name in java_hash_order(list(needed))}


def java_hash_order(keys: list[str]) -> list[str]:
    """The iteration order of a java.util.HashMap into which ``keys`` were put in this order."""
    return hash_map_order(keys)

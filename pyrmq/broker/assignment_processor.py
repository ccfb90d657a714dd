"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401): server-side rebalancing for 5.x
remoting clients, and the answer pyrmq gives to POP consumption.

A 5.x ``DefaultMQPushConsumer`` with ``setClientRebalance(false)`` does not allocate queues itself:
every rebalance it asks one broker of the topic for its own share (QUERY_ASSIGNMENT, JSON body
``{topic, consumerGroup, clientId, strategyName, messageModel}``) and pulls or pops what comes
back, by the mode of each assignment. pyrmq answers as Apache 5.3 does with its defaults
(``serverLoadBalancerEnable=true``, ``defaultMessageRequestMode=PULL``):

- the topic's readable queues over every broker of its route (asked of the NameServer; the local
  topic table when no NameServer answers), sorted as Java sorts MessageQueue;
- CLUSTERING: the client's share of them by the named strategy among the group's client ids
  (heartbeat table), ``AVG`` or ``AVG_BY_CIRCLE``; an unknown strategy or group is a ``null``
  assignment set, which tells the client to keep what it holds; BROADCASTING: every queue;
- every assignment in mode PULL.

POP is not implemented: SET_MESSAGE_REQUEST_MODE accepts PULL (kept per topic and group, in
memory) and refuses POP, and the POP request codes are refused, where Apache 5.3 would serve them.
Both refusals are Apache 4.9's answer to a code it does not know (REQUEST_CODE_NOT_SUPPORTED,
"request type N not supported"), which mqadmin 5.x prints as is (setConsumeMode, exportPopRecord);
the broker's log says why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pyrmq.broker.topic_config import RETRY_GROUP_TOPIC_PREFIX, is_readable
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable, RequestError, not_supported

if TYPE_CHECKING:
    from pyrmq.broker.client_manager import ConsumerManager
    from pyrmq.broker.offsets_and_groups import SubscriptionGroupManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.remoting.client import RemotingClient

log = logging.getLogger(__name__)

QUERY_ASSIGNMENT = 400
SET_MESSAGE_REQUEST_MODE = 401
# The pop consumer's request codes (5.x): POP_MESSAGE, ACK_MESSAGE, PEEK_MESSAGE,
# CHANGE_MESSAGE_INVISIBLETIME, NOTIFICATION, POLLING_INFO, POP_ROLLBACK, BATCH_ACK_MESSAGE.
POP_REQUEST_CODES = (200050, 200051, 200052, 200053, 200054, 200055, 200056, 200151)
ROUTE_TIMEOUT_S = 3.0

Queue = tuple[str, str, int]   # (topic, brokerName, queueId): MessageQueue's compareTo order


def allocate_averagely(cid: str, queues: list[Queue], cids: list[str]) -> list[Queue]:
    """Consecutive blocks, the first ``len(queues) % len(cids)`` clients one queue more (AVG)."""
    if cid not in cids or not queues:
        return []
    index, n, m = cids.index(cid), len(queues), len(cids)
    extra = n % m
    size = 1 if n <= m else n // m + (1 if index < extra else 0)
    start = index * size if index < extra else index * size + extra
    return [queues[(start + i) % n] for i in range(min(size, n - start))]


def allocate_by_circle(cid: str, queues: list[Queue], cids: list[str]) -> list[Queue]:
    """Every ``len(cids)``-th queue from the client's own index (AVG_BY_CIRCLE)."""
    if cid not in cids:
        return []
    index = cids.index(cid)
    return queues[index::len(cids)]


STRATEGIES: dict[str, Callable[[str, list[Queue], list[str]], list[Queue]]] = {
    "AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_by_circle}


def _body(request: RemotingCommand) -> dict[str, Any]:
    try:
        obj = fastjson.loads(request.body or b"")
    except (ProtocolError, ValueError) as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"bad request body: {exc}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("topic"), str):
        raise RequestError(ResponseCode.SYSTEM_ERROR, "bad request body: no topic")
    return obj


class QueryAssignmentProcessor:
    def __init__(self, *, broker_name: str, topics: TopicConfigManager, groups: SubscriptionGroupManager,
                 consumers: ConsumerManager, namesrv_addrs: Callable[[], list[str]]) -> None:
        self.broker_name = broker_name
        self.topics = topics
        self.groups = groups
        self.consumers = consumers
        self.namesrv_addrs = namesrv_addrs
        # set by the controller once its client exists: the route comes from the NameServer
        self.client: RemotingClient | None = None
        # (topic, group) -> mode set by SET_MESSAGE_REQUEST_MODE (only PULL is accepted)
        self.modes: dict[tuple[str, str], str] = {}
        # peers told (in the log) why their POP requests are refused: once each, not per request
        self._pop_warned: set[str] = set()

    def register(self, table: ProcessorTable) -> None:
        table.register(QUERY_ASSIGNMENT, self.query_assignment)
        table.register(SET_MESSAGE_REQUEST_MODE, self.set_message_request_mode)
        for code in POP_REQUEST_CODES:
            table.register(code, self.pop_not_supported)

    def pop_not_supported(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if channel.remote_addr not in self._pop_warned and len(self._pop_warned) < 1024:
            self._pop_warned.add(channel.remote_addr)
            log.warning("request code %d from %s: POP consumption is not supported by pyrmq; consume in PULL "
                        "mode (push or pull consumer)", request.code, channel.remote_addr)
        return not_supported(request)

    def local_queues(self, topic: str) -> list[Queue] | None:
        config = self.topics.select(topic)
        if config is None or not is_readable(config.perm):
            return None
        return [(topic, self.broker_name, q) for q in range(config.read_queue_nums)]

    async def route_queues(self, topic: str) -> list[Queue] | None:
        """Readable queues of every broker in the topic's route (Apache's getTopicSubscribeInfo)."""
        client = self.client
        for addr in self.namesrv_addrs() if client is not None else ():
            try:
                response = await client.invoke(addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  {"topic": topic}), ROUTE_TIMEOUT_S)
            except Exception as exc:   # a NameServer down: try the next one, then the local table
                log.debug("route of %s from %s failed: %s", topic, addr, exc)
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            if response.code != ResponseCode.SUCCESS:
                continue
            try:
                route = fastjson.loads(response.body or b"")
                datas = route.get("queueDatas") or []
                return sorted((topic, str(d["brokerName"]), q) for d in datas if is_readable(int(d.get("perm", 0)))
                              for q in range(int(d.get("readQueueNums", 0))))
            except (ProtocolError, ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("route of %s from %s unreadable: %s", topic, addr, exc)
        return self.local_queues(topic)

    def query_assignment(self, channel: Channel, request: RemotingCommand) -> Awaitable[RemotingCommand]:
        return self._query_assignment(request, _body(request))

    async def _query_assignment(self, request: RemotingCommand, body: dict[str, Any]) -> RemotingCommand:
        topic = body["topic"]
        group = str(body.get("consumerGroup") or "")
        queues = await self.route_queues(topic)
        assigned: list[Queue] | None = None
        if queues is None:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("QUERY_ASSIGNMENT: group %s, topic %s does not exist", group, topic)
        elif body.get("messageModel") == "BROADCASTING":
            assigned = queues
        else:
            info = self.consumers.groups.get(group)
            strategy = STRATEGIES.get(str(body.get("strategyName")))
            if info is None or strategy is None:
                log.warning("QUERY_ASSIGNMENT: no assignment for group %s topic %s (strategy %s, group known: %s)",
                            group, topic, body.get("strategyName"), info is not None)
            else:
                assigned = strategy(str(body.get("clientId")), queues, sorted(info.client_ids()))
        # fastjson writes a null set as no member at all
        answer: dict[str, Any] = {}
        if assigned is not None:
            answer["messageQueueAssignments"] = [
                {"messageQueue": {"brokerName": b, "queueId": q, "topic": t}, "mode": "PULL"} for t, b, q in assigned]
        response = request.response(ResponseCode.SUCCESS)
        response.body = json.dumps(answer, separators=(",", ":")).encode()
        return response

    def set_message_request_mode(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        body = _body(request)
        topic = body["topic"]
        group = str(body.get("consumerGroup") or "")
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return request.response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.topics.select(topic) is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if self.groups.find(group) is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
        mode = str(body.get("mode") or "PULL")
        if mode != "PULL":
            log.warning("SET_MESSAGE_REQUEST_MODE: mode %s of group %s, topic %s is not supported by pyrmq; "
                        "only PULL", mode, group, topic)
            return not_supported(request)
        self.modes[(topic, group)] = mode
        return request.response(ResponseCode.SUCCESS)

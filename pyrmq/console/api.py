"""The console's JSON API: one method per endpoint, each a few admin-client calls (the request
codes mqadmin sends), answering plain JSON values. ``ConsoleApi`` knows nothing of HTTP; the
server routes to it and turns ``BadRequest`` and ``MQClientError`` into answers."""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

from pyrmq.client.admin import PERM_READ_ONLY, PERM_READ_WRITE, AdminClient, dlq_topic, retry_topic
from pyrmq.client.errors import MQClientError
from pyrmq.client.route import MASTER_ID
from pyrmq.codec.system_topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    REPLY_TOPIC_POSTFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_system_topic,
)
from pyrmq.console.views import (
    BadRequest,
    consume_queues_json,
    group_arg,
    int_arg,
    message_json,
    runtime_figures,
    text_arg,
    topic_arg,
    topic_offsets_json,
)

log = logging.getLogger(__name__)

MAX_QUEUE_NUMS = 1024        # a console form is for people; bigger changes go through mqadmin
MAX_LISTED_MESSAGES = 256
# Groups every broker creates and topics it keeps for itself: listed, but marked, on the pages.
SYSTEM_GROUPS = frozenset({"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                           "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS"})


def is_console_reserved(topic: str) -> bool:
    """Topics the console lists as the broker's own and will not create, change or delete: the
    broker's system topics (one definition, pyrmq.codec.system_topics), and the retry, dead-letter
    and reply topics the broker makes for groups and clusters."""
    return (is_system_topic(topic) or topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
            or topic.endswith("_" + REPLY_TOPIC_POSTFIX))


def _sum_messages(rows: list[dict[str, Any]]) -> int:
    return sum(r["maxOffset"] - r["minOffset"] for r in rows)


class ConsoleApi:
    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin

    # --- cluster ----------------------------------------------------------------------------

    async def cluster(self) -> dict[str, Any]:
        info = await self.admin.cluster_info()
        cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
        brokers = []
        for name, data in sorted(info.broker_addr_table.items()):
            for broker_id, addr in sorted(data.broker_addrs.items()):
                row: dict[str, Any] = {"cluster": cluster_of.get(name, data.cluster), "brokerName": name,
                                       "brokerId": broker_id, "addr": addr,
                                       "role": "MASTER" if broker_id == MASTER_ID else "SLAVE"}
                try:
                    row.update(runtime_figures(await self.admin.broker_runtime_info(addr)))
                except MQClientError as exc:
                    row["error"] = str(exc)
                brokers.append(row)
        return {"brokers": brokers}

    # --- topics -----------------------------------------------------------------------------

    async def topics(self) -> dict[str, Any]:
        rows = []
        for topic in await self.admin.topic_list():
            route = await self.admin.route(topic)
            if route is None:
                continue
            queues = []
            for queue_data in sorted(route.queue_datas, key=lambda q: q.broker_name):
                addr = route.master_addr(queue_data.broker_name)
                if addr is not None:
                    queues += topic_offsets_json(queue_data.broker_name, await self.admin.topic_stats(addr, topic))
            rows.append({"topic": topic, "system": is_console_reserved(topic),
                         "brokers": [q.broker_name for q in route.queue_datas],
                         "readQueueNums": sum(q.read_queue_nums for q in route.queue_datas),
                         "writeQueueNums": sum(q.write_queue_nums for q in route.queue_datas),
                         "perm": min((q.perm for q in route.queue_datas), default=0),
                         "maxOffset": sum(q["maxOffset"] for q in queues), "messages": _sum_messages(queues)})
        return {"topics": rows}

    async def topic(self, name: Any) -> dict[str, Any]:
        """One topic: each queue's offsets, and each consuming group's position and lag in it."""
        topic = topic_arg(name)
        addrs = await self.admin.master_addrs(topic)
        if not addrs:
            raise BadRequest(f"topic {topic} does not exist")
        queues: list[dict[str, Any]] = []
        consumers: list[dict[str, Any]] = []
        for broker_name, addr in sorted(addrs.items()):
            queues += topic_offsets_json(broker_name, await self.admin.topic_stats(addr, topic))
            for group in await self.admin.topic_consumers(addr, topic):
                rows = [r for r in consume_queues_json(await self.admin.consume_stats(addr, group, topic))
                        if r["topic"] == topic]
                consumers.append({"group": group, "brokerName": broker_name, "lag": sum(r["lag"] for r in rows),
                                  "queues": rows})
        return {"topic": topic, "queues": queues, "consumers": consumers}

    async def save_topic(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create a topic on every master, or change the queue counts on the brokers that have it."""
        topic = topic_arg(body.get("topic"))
        if is_console_reserved(topic):
            raise BadRequest(f"{topic} is a system topic")
        write = int_arg(body.get("writeQueueNums"), "writeQueueNums", 1, MAX_QUEUE_NUMS)
        read = int_arg(body.get("readQueueNums", write), "readQueueNums", 1, MAX_QUEUE_NUMS)
        perm = int_arg(body.get("perm", PERM_READ_WRITE), "perm", 2, 7)
        addrs = await self.admin.master_addrs(topic) or await self.admin.all_master_addrs()
        for addr in addrs.values():
            await self.admin.create_or_update_topic(addr, topic, read, write, perm)
        return {"topic": topic, "brokers": sorted(addrs), "readQueueNums": read, "writeQueueNums": write,
                "perm": perm}

    async def delete_topic(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """EQueue's drained-first deletion: the topic becomes read-only (perm 4, no more sends), and
        is deleted only once every group that consumes it has reached the max offsets; until then
        the answer lists what is left, and the topic stays read-only."""
        topic = topic_arg(body.get("topic"))
        if is_console_reserved(topic):
            raise BadRequest(f"{topic} is a system topic")
        route = await self.admin.route(topic)
        if route is None:
            raise BadRequest(f"topic {topic} does not exist")
        addrs = await self.admin.master_addrs(topic)
        for queue_data in route.queue_datas:
            addr = addrs.get(queue_data.broker_name)
            if addr is not None and queue_data.perm != PERM_READ_ONLY:
                await self.admin.create_or_update_topic(addr, topic, queue_data.read_queue_nums,
                                                        queue_data.write_queue_nums, PERM_READ_ONLY)
        remaining = []
        for _, addr in sorted(addrs.items()):
            for group in await self.admin.topic_consumers(addr, topic):
                stats = await self.admin.consume_stats(addr, group, topic)
                remaining += [{"group": group, **row} for row in consume_queues_json(stats)
                              if row["topic"] == topic and row["lag"] > 0]
        if remaining:
            return {"topic": topic, "deleted": False, "perm": PERM_READ_ONLY, "remaining": remaining}
        await self.admin.delete_topic(topic, sorted(addrs.values()))
        return {"topic": topic, "deleted": True, "perm": PERM_READ_ONLY, "remaining": []}

    # --- consumer groups --------------------------------------------------------------------

    async def groups(self) -> dict[str, Any]:
        masters = await self.admin.all_master_addrs()
        names: dict[str, list[str]] = {}
        for broker_name, addr in masters.items():
            for group in await self.admin.subscription_groups(addr):
                names.setdefault(group, []).append(broker_name)
        rows = []
        for group, brokers in sorted(names.items()):
            lag, tps, members = 0, 0.0, 0
            for addr in (masters[name] for name in brokers):
                stats = await self.admin.consume_stats(addr, group)
                lag += stats.total_diff()
                tps += stats.consume_tps
                connection = await self.admin.consumer_connections(addr, group)
                members = max(members, len(connection.connection_set) if connection else 0)
            rows.append({"group": group, "system": group in SYSTEM_GROUPS, "brokers": brokers, "lag": lag,
                         "consumeTps": tps, "members": members})
        return {"groups": rows}

    async def group(self, name: Any) -> dict[str, Any]:
        group = group_arg(name)
        masters = await self.admin.all_master_addrs()
        members: list[dict[str, Any]] = []
        subscriptions: dict[str, str] = {}
        queues: list[dict[str, Any]] = []
        tps = 0.0
        model = None
        for addr in masters.values():
            connection = await self.admin.consumer_connections(addr, group)
            if connection is not None:
                model = connection.message_model
                seen = {m["clientId"] for m in members}
                members += [{"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language,
                             "version": c.version} for c in connection.connection_set if c.client_id not in seen]
                subscriptions.update({t: s.sub_string for t, s in connection.subscription_table.items()})
            stats = await self.admin.consume_stats(addr, group)
            tps += stats.consume_tps
            queues += consume_queues_json(stats)
        retry = dlq = 0
        for addr in masters.values():
            retry += _sum_messages(topic_offsets_json("", await self.admin.topic_stats(addr, retry_topic(group))))
            dlq += _sum_messages(topic_offsets_json("", await self.admin.topic_stats(addr, dlq_topic(group))))
        return {"group": group, "messageModel": model, "members": members, "subscriptions": subscriptions,
                "consumeTps": tps, "lag": sum(q["lag"] for q in queues), "queues": queues,
                "retryMessages": retry, "dlqMessages": dlq}

    async def reset_offset(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """mqadmin resetOffsetByTime: ``timestamp`` in ms since the epoch, -1 for the queue ends."""
        group = group_arg(body.get("group"))
        topic = topic_arg(body.get("topic"))
        timestamp = int_arg(body.get("timestamp"), "timestamp", -1, 2**63 - 1)
        force = body.get("force", True)
        if not isinstance(force, bool):
            raise BadRequest("force must be true or false")
        offsets = await self.admin.reset_offset_by_time(topic, group, timestamp, force)
        return {"group": group, "topic": topic, "timestamp": timestamp,
                "offsets": [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset}
                            for mq, offset in sorted(offsets.items(), key=lambda i: (i[0].broker_name, i[0].queue_id))]}

    # --- messages ---------------------------------------------------------------------------

    async def message_by_id(self, query: Mapping[str, str]) -> dict[str, Any]:
        msg_id = text_arg(query.get("msgId"), "msgId", 64)
        return {"messages": [message_json(await self.admin.view_message_by_id(msg_id))]}

    async def messages_by_key(self, query: Mapping[str, str], unique: bool = False) -> dict[str, Any]:
        topic = topic_arg(query.get("topic"))
        key = text_arg(query.get("key"), "key", 255)
        found = await self.admin.query_message(topic, key, unique=unique, max_num=MAX_LISTED_MESSAGES)
        return {"messages": [message_json(m) for m in found]}

    async def messages_by_offset(self, query: Mapping[str, str]) -> dict[str, Any]:
        topic = topic_arg(query.get("topic"))
        broker_name = text_arg(query.get("brokerName"), "brokerName", 255)
        queue_id = int_arg(query.get("queueId"), "queueId", 0, 65535)
        offset = int_arg(query.get("offset"), "offset", 0, 2**63 - 1)
        count = int_arg(query.get("count", "16"), "count", 1, MAX_LISTED_MESSAGES)
        addr = (await self.admin.master_addrs(topic)).get(broker_name)
        if addr is None:
            raise BadRequest(f"broker {broker_name} has no topic {topic}")
        batch = await self.admin.read_queue(addr, topic, queue_id, offset, offset + count, count)
        return {"messages": [message_json(m, broker_name) for m in batch]}

    async def messages_by_time(self, query: Mapping[str, str]) -> dict[str, Any]:
        topic = topic_arg(query.get("topic"))
        begin = int_arg(query.get("begin"), "begin", 0, 2**63 - 1)
        end = int_arg(query.get("end", str(int(time.time() * 1000))), "end", begin, 2**63 - 1)
        found = await self.admin.messages_by_time(topic, begin, end, MAX_LISTED_MESSAGES)
        return {"messages": [message_json(m) for m in found]}

    async def dead_letters(self, query: Mapping[str, str]) -> dict[str, Any]:
        group = group_arg(query.get("group"))
        found = []
        for broker_name, addr in (await self.admin.all_master_addrs()).items():
            found += [message_json(m, broker_name) for m in await self.admin.dead_letters(addr, group,
                                                                                          MAX_LISTED_MESSAGES)]
        return {"group": group, "messages": found}

    async def resend_dead_letter(self, body: Mapping[str, Any]) -> dict[str, Any]:
        group = group_arg(body.get("group"))
        msg_id = text_arg(body.get("msgId"), "msgId", 64)
        broker_name = text_arg(body.get("brokerName"), "brokerName", 255)
        addr = (await self.admin.all_master_addrs()).get(broker_name)
        if addr is None:
            raise BadRequest(f"no master for broker {broker_name}")
        resent = await self.admin.resend_dead_letter(addr, group, msg_id)
        return {"msgId": resent.msg_id, "topic": resent.topic, "newMsgId": resent.new_msg_id}

    # --- live figures -----------------------------------------------------------------------

    async def live(self, query: Mapping[str, str]) -> dict[str, Any]:
        """What the charts poll: each master's put/get TPS and, for the named group (optional),
        its lag and consume TPS, stamped with the time they were read."""
        brokers = {}
        for broker_name, addr in (await self.admin.all_master_addrs()).items():
            brokers[broker_name] = runtime_figures(await self.admin.broker_runtime_info(addr))
            brokers[broker_name].pop("info")
        answer: dict[str, Any] = {"time": int(time.time() * 1000), "brokers": brokers}
        if query.get("group"):
            group = group_arg(query.get("group"))
            lag, tps = 0, 0.0
            for addr in (await self.admin.all_master_addrs()).values():
                stats = await self.admin.consume_stats(addr, group)
                lag += stats.total_diff()
                tps += stats.consume_tps
            answer["group"] = {"group": group, "lag": lag, "consumeTps": tps}
        return answer

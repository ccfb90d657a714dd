"""Consumer administration used by mqadmin and DefaultMQAdminExt: GET_CONSUME_STATS (208),
QUERY_CONSUME_TIME_SPAN (303), CLONE_GROUP_OFFSET (314), GET_CONSUMER_CONNECTION_LIST (203),
INVOKE_BROKER_TO_RESET_OFFSET (222) -> RESET_CONSUMER_CLIENT_OFFSET (220) to every client of the
group (spec/codes.md sections 5 and 6)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyrmq.broker.client_manager import connections
from pyrmq.broker.offsets_and_groups import required_group
from pyrmq.codec.admin_bodies import (
    ConsumeStats,
    ConsumerConnection,
    MessageQueue,
    OffsetWrapper,
    QueryConsumeTimeSpanBody,
    QueueTimeSpan,
    ResetOffsetBody,
)
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.headers import optional_bool, optional_str, required_int, required_str
from pyrmq.store.commit_log import now_ms

if TYPE_CHECKING:
    from pyrmq.broker.broker_stats import BrokerStatsManager
    from pyrmq.broker.client_manager import ConsumerManager
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

INVOKE_BROKER_TO_RESET_OFFSET = 222
RESET_CONSUMER_CLIENT_OFFSET = 220
# Clients older than V3_0_7_SNAPSHOT cannot reset offsets on request.
MIN_RESET_CLIENT_VERSION = 28


def group_queue_offsets(store: DefaultMessageStore, offsets: ConsumerOffsetManager, broker_name: str, group: str,
                        topic: str, queue_count: int) -> dict[MessageQueue, OffsetWrapper]:
    """A group's position in the first ``queue_count`` queues of a topic, against their ends (with
    the store time of the last message it consumed), as GET_CONSUME_STATS and
    GET_BROKER_CONSUME_STATS report it."""
    table = {}
    for queue_id in range(queue_count):
        broker_offset = max(0, store.get_max_offset_in_queue(topic, queue_id))
        consumer_offset = max(0, offsets.query_offset(group, topic, queue_id))
        last = 0
        if consumer_offset > 0:
            last = max(0, store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1))
        table[MessageQueue(topic, broker_name, queue_id)] = OffsetWrapper(broker_offset, consumer_offset, last)
    return table


def register_consumer_admin_processors(table: ProcessorTable, *, broker_name: str, store: DefaultMessageStore,
                                       topics: TopicConfigManager, offsets: ConsumerOffsetManager,
                                       consumers: ConsumerManager, stats: BrokerStatsManager) -> None:
    """Register the consume-stats, connection and offset-reset processors over the services they use."""

    def consume_stats(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = required_group(request)
        topic = optional_str(request, "topic")
        offset_table: dict[MessageQueue, OffsetWrapper] = {}
        consume_tps = 0.0
        for name in [topic] if topic else offsets.topics_of_group(group):
            config = topics.select(name)
            if config is None or not consumers.subscribes(group, name):
                continue
            offset_table.update(group_queue_offsets(store, offsets, broker_name, group, name, config.read_queue_nums))
            consume_tps += stats.group_get_tps(group, name)
        return request.response(ResponseCode.SUCCESS, body=ConsumeStats(offset_table, consume_tps).encode())

    def connection_list(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = required_group(request)
        info = consumers.groups.get(group)
        if info is None or not info.channels:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group not online")
        body = ConsumerConnection(
            connections(info.channels),
            {t: s.to_body() for t, s in info.subscriptions.items()},
            info.consume_type, info.message_model, info.consume_from_where)
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    def reset_offset(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = required_str(request, "topic")
        group = required_group(request, "group")
        timestamp = required_int(request, "timestamp")
        is_force = optional_bool(request, "isForce")
        config = topics.select(topic)
        if config is None:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        offset_table = {}
        for queue_id in range(config.write_queue_nums):
            consumer_offset = offsets.query_offset(group, topic, queue_id)
            if consumer_offset == -1:
                return request.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if timestamp == -1:
                target = store.get_max_offset_in_queue(topic, queue_id)
            else:
                target = store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
            target = max(0, target)
            offset_table[MessageQueue(topic, broker_name, queue_id)] = (
                target if is_force or target < consumer_offset else consumer_offset)
        info = consumers.groups.get(group)
        if info is None or not info.channels:
            # mqadmin falls back to rewriting the stored offsets when it gets this code.
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                    f"Consumer not online, so can not reset offset, Group: {group} "
                                    f"Topic: {topic} Timestamp: {timestamp}")
        body = ResetOffsetBody(offset_table).encode()
        header = {"topic": topic, "group": group, "timestamp": str(timestamp)}
        for client_channel, client in info.channels.items():
            if client.version < MIN_RESET_CLIENT_VERSION:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"the client does not support this feature. version={client.version}")
            client_channel.send_oneway(make_request(RESET_CONSUMER_CLIENT_OFFSET, dict(header), body,
                                                    serialize_type=client_channel.peer_serialize_type))
        return request.response(ResponseCode.SUCCESS, body=body)

    def consume_time_span(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = required_str(request, "topic")
        group = required_group(request, "group")
        config = topics.select(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        spans = []
        for queue_id in range(config.write_queue_nums):
            min_time = store.get_earliest_message_time(topic, queue_id)
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            max_time = store.get_message_store_timestamp(topic, queue_id, max_offset - 1)
            consumer_offset = offsets.query_offset(group, topic, queue_id)
            consume_time = (store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
                            if consumer_offset > 0 else min_time)
            delay = 0
            if consumer_offset < max_offset:   # how long the next message to consume has waited
                delay = now_ms() - store.get_message_store_timestamp(topic, queue_id, consumer_offset)
            spans.append(QueueTimeSpan(MessageQueue(topic, broker_name, queue_id), min_time, max_time,
                                       consume_time, delay))
        return request.response(ResponseCode.SUCCESS, body=QueryConsumeTimeSpanBody(tuple(spans)).encode())

    def clone_group_offset(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """mqadmin cloneGroupOffset: the destination group starts where the source group is."""
        src = required_group(request, "srcGroup")
        dest = required_group(request, "destGroup")
        topic = optional_str(request, "topic")
        offline = optional_bool(request, "offline")
        for name in [topic] if topic else offsets.topics_of_group(src):
            if topics.select(name) is None:
                log.warning("[cloneGroupOffset] topic config not exist, %s", name)
                continue
            if not offline and not consumers.subscribes(src, name):
                log.warning("[cloneGroupOffset] the consumer group[%s], topic[%s] not exist", src, name)
                continue
            offsets.clone_offset(src, dest, name)
        return request.response(ResponseCode.SUCCESS)

    table.register(RequestCode.GET_CONSUME_STATS, consume_stats)
    table.register(RequestCode.CLONE_GROUP_OFFSET, clone_group_offset)
    table.register(RequestCode.QUERY_CONSUME_TIME_SPAN, consume_time_span)
    table.register(RequestCode.GET_CONSUMER_CONNECTION_LIST, connection_list)
    table.register(INVOKE_BROKER_TO_RESET_OFFSET, reset_offset)

"""Client bookkeeping requests: HEART_BEAT (34), UNREGISTER_CLIENT (35),
GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from pyrmq.broker.client_manager import (
    _CONSUME_FROM,
    _CONSUME_TYPES,
    _MESSAGE_MODELS,
    ClientChannelInfo,
    SubscriptionData,
    enum_name,
)
from pyrmq.broker.offsets_and_groups import checked_group, required_group
from pyrmq.broker.topic_config import PERM_READ, PERM_WRITE, retry_topic
from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import ConsumerIdList, LockBatchResult, MessageQueue
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable, RequestError
from pyrmq.remoting.headers import optional_str, required_int, required_str

if TYPE_CHECKING:
    from pyrmq.broker.client_manager import ConsumerManager, ProducerManager
    from pyrmq.broker.config import BrokerConfig
    from pyrmq.broker.consumer_filter import ConsumerFilterManager
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager, SubscriptionGroupManager
    from pyrmq.broker.rebalance_lock import RebalanceLockManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)


def register_client_processors(table: ProcessorTable, *, config: BrokerConfig, consumers: ConsumerManager,
                               producers: ProducerManager, groups: SubscriptionGroupManager,
                               offsets: ConsumerOffsetManager, topics: TopicConfigManager,
                               locks: RebalanceLockManager, store: DefaultMessageStore,
                               filters: ConsumerFilterManager) -> None:
    """Register the client bookkeeping processors over the services they use."""

    def heart_beat(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            data = fastjson.loads(request.body or b"{}")
        except ProtocolError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"malformed heartbeat body: {exc}") from None
        if not isinstance(data, dict):
            raise RequestError(ResponseCode.SYSTEM_ERROR, "heartbeat body is not an object")
        client_id = str(data.get("clientID") or "")
        now_ms = int(time.time() * 1000)

        def client_info() -> ClientChannelInfo:
            return ClientChannelInfo(channel, client_id, request.language, request.version, now_ms)

        for consumer in data.get("consumerDataSet") or []:
            group = checked_group(str(consumer.get("groupName") or ""))
            group_config = groups.find(group)
            if group_config is None:
                continue
            topics.create_in_send_back(
                retry_topic(group), max(1, group_config.retry_queue_nums), PERM_READ | PERM_WRITE)
            subscriptions = [SubscriptionData.from_json(s) for s in consumer.get("subscriptionDataSet") or []
                             if isinstance(s, dict)]
            consumers.register_consumer(
                group, client_info(),
                enum_name(consumer.get("consumeType"), _CONSUME_TYPES, "CONSUME_PASSIVELY"),
                enum_name(consumer.get("messageModel"), _MESSAGE_MODELS, "CLUSTERING"),
                enum_name(consumer.get("consumeFromWhere"), _CONSUME_FROM, "CONSUME_FROM_LAST_OFFSET"),
                subscriptions,
                group_config.notify_consumer_ids_changed_enable and config.notify_consumer_ids_changed_enable)
            # every heartbeat, as Apache's REGISTER event: SQL92 filters (re)registered, others dead
            filters.register_group(group, [(s.topic, s.sub_string, s.expression_type, s.sub_version)
                                           for s in subscriptions])
        for producer in data.get("producerDataSet") or []:
            producers.register_producer(checked_group(str(producer.get("groupName") or "")), client_info())
        return request.response(ResponseCode.SUCCESS)

    def unregister_client(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        required_str(request, "clientID")
        producer_group = optional_str(request, "producerGroup")
        if producer_group:
            producers.unregister_producer(producer_group, channel)
        consumer_group = optional_str(request, "consumerGroup")
        if consumer_group:
            group_config = groups.table.get(consumer_group)
            notify = group_config is None or group_config.notify_consumer_ids_changed_enable
            consumers.unregister_consumer(consumer_group, channel, notify)
        return request.response(ResponseCode.SUCCESS)

    def consumer_list(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = required_group(request)
        info = consumers.groups.get(group)
        ids = info.client_ids() if info is not None else []
        if not ids:
            return request.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return request.response(ResponseCode.SUCCESS, body=ConsumerIdList(tuple(ids)).encode())

    def query_consumer_offset(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = required_group(request)
        topic = required_str(request, "topic")
        queue_id = required_int(request, "queueId")
        offset = offsets.query_offset(group, topic, queue_id)
        if offset >= 0:
            return request.response(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})
        # A new group on a queue whose first message is still in memory starts at 0 (Java rule),
        # so it does not miss messages sent before it first pulled.
        min_offset = store.get_min_offset_in_queue(topic, queue_id)
        if min_offset <= 0 and not store.check_in_disk_by_consume_offset(topic, queue_id, 0):
            return request.response(ResponseCode.SUCCESS, ext_fields={"offset": "0"})
        return request.response(ResponseCode.QUERY_NOT_FOUND,
                                "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    def update_consumer_offset(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        offsets.commit_offset(required_group(request), required_str(request, "topic"),
                              required_int(request, "queueId"), required_int(request, "commitOffset"))
        return request.response(ResponseCode.SUCCESS)

    def _lock_body(request: RemotingCommand) -> tuple[str, str, list, list]:
        try:
            body = fastjson.loads(request.body or b"{}")
            mqs = [(str(mq["topic"]), str(mq["brokerName"]), int(mq["queueId"])) for mq in body.get("mqSet") or []]
            return checked_group(str(body["consumerGroup"])), str(body["clientId"]), mqs, body.get("mqSet") or []
        except (ProtocolError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"malformed lock body: {exc}") from None

    def lock_batch(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group, client_id, mqs, _ = _lock_body(request)
        locked = locks.try_lock_batch(group, mqs, client_id)
        body = LockBatchResult(tuple(MessageQueue(t, b, q) for t, b, q in locked))
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    def unlock_batch(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group, client_id, mqs, _ = _lock_body(request)
        locks.unlock_batch(group, mqs, client_id)
        return request.response(ResponseCode.SUCCESS)

    table.register(RequestCode.LOCK_BATCH_MQ, lock_batch)
    table.register(RequestCode.UNLOCK_BATCH_MQ, unlock_batch)
    table.register(RequestCode.HEART_BEAT, heart_beat)
    table.register(RequestCode.UNREGISTER_CLIENT, unregister_client)
    table.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, consumer_list)
    table.register(RequestCode.QUERY_CONSUMER_OFFSET, query_consumer_offset)
    table.register(RequestCode.UPDATE_CONSUMER_OFFSET, update_consumer_offset)

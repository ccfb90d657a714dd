"""Who uses what, for mqadmin and the dashboard: GET_PRODUCER_CONNECTION_LIST (204,
``mqadmin producerConnection``), QUERY_TOPIC_CONSUME_BY_WHO (300, the message track of
``queryMsgById`` and ``topicStatus``'s consumers) and GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305),
answered with Apache 4.9.7's bodies and remarks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrmq.broker.client_manager import connections
from pyrmq.broker.topic_config import REPLY_TOPIC_POSTFIX, SYSTEM_TOPICS
from pyrmq.codec.admin_bodies import GroupList, ProducerConnection
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.namesrv_bodies import TopicList
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.headers import required_str

if TYPE_CHECKING:
    from pyrmq.broker.client_manager import ConsumerManager, ProducerManager
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager


def register_usage_admin_processors(table: ProcessorTable, *, cluster_name: str, broker_name: str,
                                    producers: ProducerManager, consumers: ConsumerManager,
                                    offsets: ConsumerOffsetManager) -> None:
    # What Apache's TopicConfigManager adds to TopicValidator's system set at start.
    system_topics = sorted(SYSTEM_TOPICS | {cluster_name, broker_name, f"{cluster_name}_{REPLY_TOPIC_POSTFIX}"})

    def producer_connections(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = required_str(request, "producerGroup")
        channels = producers.groups.get(group)
        if channels is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = ProducerConnection(connections(channels))
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    def consumed_by(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = required_str(request, "topic")
        # Online groups subscribed to the topic, and groups that ever committed an offset on it.
        groups = {name for name, info in consumers.groups.items() if topic in info.subscriptions}
        groups.update(offsets.groups_of_topic(topic))
        return request.response(ResponseCode.SUCCESS, body=GroupList(tuple(sorted(groups))).encode())

    def system_topic_list(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=TopicList(tuple(system_topics)).encode())

    table.register(RequestCode.GET_PRODUCER_CONNECTION_LIST, producer_connections)
    table.register(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, consumed_by)
    table.register(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, system_topic_list)

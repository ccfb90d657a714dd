"""Queue offset queries and topic administration: GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32), VIEW_MESSAGE_BY_ID (33),
QUERY_MESSAGE (12),
UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_BROKER_CONFIG (26), GET_TOPIC_STATS_INFO (202), and the store
clean-ups CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316), DELETE_EXPIRED_COMMITLOG (329).
A slave refuses the topic writes as Apache's validateSlave does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from pyrmq.broker.config import BrokerRole
from pyrmq.broker.reported_config import reported_properties
from pyrmq.broker.group_admin_processor import master_only
from pyrmq.broker.topic_config import TopicConfig, is_system_topic, validate_topic
from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import MessageQueue, TopicOffset, TopicStatsTable
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import MessageConst, RecordInfo, check_record
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.deferred import Deferred
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.headers import optional_bool, optional_int, required_int, required_str

if TYPE_CHECKING:
    from pyrmq.broker.config import LoadedConfig
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.common.persister import ConfigPersister
    from pyrmq.store.message_store import DefaultMessageStore

# GET_BROKER_RUNTIME_INFO key (pyrmq's own): JSON object producer group -> pending half messages
TRANSACTION_PENDING_KEY = "pyrmqTransactionHalfPending"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"  # Java MixAll.UNIQUE_MSG_QUERY_FLAG
QUERY_NOT_FOUND_REMARK = "can not find message, maybe time range not correct"


def register_admin_processors(table: ProcessorTable, *, loaded_config: LoadedConfig, store: DefaultMessageStore,
                              topics: TopicConfigManager, offsets: ConsumerOffsetManager,
                              persister: ConfigPersister,
                              on_topic_deleted: Callable[[str], None] = lambda topic: None) -> None:
    """Register the offset-query and topic-administration processors over the services they use;
    ``on_topic_deleted`` is told of each topic DELETE_TOPIC_IN_BROKER removed."""
    broker = loaded_config.broker
    is_slave = broker.broker_role is BrokerRole.SLAVE

    def queue_offset_query(method, key: str):
        def process(channel: Channel, request: RemotingCommand) -> RemotingCommand:
            value = method(required_str(request, "topic"), required_int(request, "queueId"))
            return request.response(ResponseCode.SUCCESS, ext_fields={key: str(value)})
        return process

    def search_offset(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        offset = store.get_offset_in_queue_by_time(required_str(request, "topic"), required_int(request, "queueId"),
                                                   required_int(request, "timestamp"))
        return request.response(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    def view_message_by_id(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        offset = required_int(request, "offset")
        record = store.select_one_message_by_offset(offset)
        if record is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return request.response(ResponseCode.SUCCESS, body=bytes(record))

    def query_message(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = required_str(request, "topic")
        key = required_str(request, "key")
        max_num = required_int(request, "maxNum")
        begin = required_int(request, "beginTimestamp")
        end = required_int(request, "endTimestamp")
        unique = (request.ext_fields or {}).get(UNIQUE_MSG_QUERY_FLAG) == "true"
        if unique:
            max_num = store.config.default_query_max_num

        def match(record: memoryview) -> bool:
            """The real topic and key: the index compares hashes only (store.md §5.4)."""
            info = check_record(record, 0, len(record), check_crc=False)
            if not isinstance(info, RecordInfo) or info.topic != topic:
                return False
            if unique:
                return info.uniq_key == key
            return info.keys is not None and key in info.keys.split(MessageConst.KEY_SEPARATOR)

        result = store.query_message(topic, key, max_num, begin, end, match)
        header = {"indexLastUpdateTimestamp": str(result.index_last_update_timestamp),
                  "indexLastUpdatePhyoffset": str(result.index_last_update_phyoffset)}
        if not result.buffers:
            return request.response(ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK, ext_fields=header)
        return request.response(ResponseCode.SUCCESS, ext_fields=header,
                                body=b"".join(result.buffers))

    def update_and_create_topic(channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        topic = required_str(request, "topic")
        remark = validate_topic(topic)
        if remark is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark)
        if is_system_topic(topic):
            return request.response(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        read = required_int(request, "readQueueNums")
        write = required_int(request, "writeQueueNums")
        if not (0 <= read <= 65535 and 0 <= write <= 65535):
            return request.response(ResponseCode.SYSTEM_ERROR, "queue nums must be between 0 and 65535")
        config = TopicConfig(topic, read, write, required_int(request, "perm"),
                             required_str(request, "topicFilterType"),
                             optional_int(request, "topicSysFlag", 0) or 0, optional_bool(request, "order"))
        topics.update(config)
        return persister.answer_when_written(request, topics.path.name)

    def delete_topic(channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        topic = required_str(request, "topic")
        if is_system_topic(topic):
            return request.response(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        topics.delete(topic)
        offsets.remove_topic(topic)
        store.delete_topics({topic})
        on_topic_deleted(topic)
        return persister.answer_when_written(request, topics.path.name)

    # mqadmin cleanUnusedTopic / cleanExpiredCQ / deleteExpiredCommitLog: SUCCESS whatever was found,
    # as Apache; what went is logged.
    def clean_unused_topic(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        store.clean_unused_topics(set(topics.table))
        return request.response(ResponseCode.SUCCESS)

    def clean_expired_consume_queue(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        store.clean_expired_consume_queues()
        return request.response(ResponseCode.SUCCESS)

    def delete_expired_commit_log(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        # the clean service's next rounds delete expired files whatever the hour (deleteWhen)
        store.clean_service.execute_delete_files_manually()
        return request.response(ResponseCode.SUCCESS)

    def topic_stats(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = required_str(request, "topic")
        config = topics.select(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        offset_table = {}
        for queue_id in range(config.write_queue_nums):
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            last = store.get_message_store_timestamp(topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            offset_table[MessageQueue(topic, broker.broker_name, queue_id)] = TopicOffset(
                store.get_min_offset_in_queue(topic, queue_id), max_offset, max(0, last))
        return request.response(ResponseCode.SUCCESS, body=TopicStatsTable(offset_table).encode())

    def topic_config(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_CONFIG (351): what the 5.x admin asks before examineTopicStats and
        examineConsumeStats (mqadmin 5.x topicStatus, rocketmq-dashboard 2.x). Apache 4.9.7 does
        not know it (those tools then fail on it); pyrmq answers as Apache 5.3 does, without a
        static-topic mapping (pyrmq has none)."""
        topic = required_str(request, "topic")
        config = topics.select(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return request.response(ResponseCode.SUCCESS, body=fastjson.dumps({"attributes": {}, **config.to_json()}).encode())

    def all_topic_config(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=topics.encode().encode())

    def broker_config(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in sorted(reported_properties(loaded_config).items()))
        return request.response(ResponseCode.SUCCESS,
                                ext_fields={"version": fastjson.dumps(topics.data_version.to_json())},
                                body=text.encode())

    table.register(RequestCode.GET_MAX_OFFSET, queue_offset_query(store.get_max_offset_in_queue, "offset"))
    table.register(RequestCode.GET_MIN_OFFSET, queue_offset_query(store.get_min_offset_in_queue, "offset"))
    table.register(RequestCode.GET_EARLIEST_MSG_STORETIME,
                   queue_offset_query(store.get_earliest_message_time, "timestamp"))
    table.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, search_offset)
    table.register(RequestCode.VIEW_MESSAGE_BY_ID, view_message_by_id)
    table.register(RequestCode.QUERY_MESSAGE, query_message)
    table.register(RequestCode.UPDATE_AND_CREATE_TOPIC, master_only(is_slave, update_and_create_topic))
    table.register(RequestCode.DELETE_TOPIC_IN_BROKER, master_only(is_slave, delete_topic))
    table.register(RequestCode.GET_ALL_TOPIC_CONFIG, all_topic_config)
    table.register(RequestCode.GET_TOPIC_CONFIG, topic_config)
    table.register(RequestCode.GET_TOPIC_STATS_INFO, topic_stats)
    table.register(RequestCode.CLEAN_UNUSED_TOPIC, clean_unused_topic)
    table.register(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, clean_expired_consume_queue)
    table.register(RequestCode.DELETE_EXPIRED_COMMITLOG, delete_expired_commit_log)
    table.register(RequestCode.GET_BROKER_CONFIG, broker_config)

"""Looking inside the broker for mqadmin: QUERY_CONSUME_QUEUE (321, ``mqadmin queryCq``: the
consume queue units of one queue) and GET_ALL_PRODUCER_INFO (328, ``mqadmin producer``: every
producer connection), with Apache 4.9.7's bodies and remarks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import ConsumeQueueData, ProducerInfo, ProducerTableInfo, QueryConsumeQueueResponseBody
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.codec.store_formats import CQ_STORE_UNIT_SIZE, CQ_UNIT, is_ext_addr
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.headers import optional_str, required_int, required_str

if TYPE_CHECKING:
    from pyrmq.broker.client_manager import ConsumerManager, ProducerManager
    from pyrmq.store.consume_queue import ConsumeQueue
    from pyrmq.store.message_store import DefaultMessageStore

__all__ = ["QUERY_CONSUME_QUEUE", "GET_ALL_PRODUCER_INFO", "register_inspect_processors"]

QUERY_CONSUME_QUEUE = 321
GET_ALL_PRODUCER_INFO = 328


def _unit(cq: ConsumeQueue, physic_offset: int, physic_size: int, tags_code: int) -> ConsumeQueueData:
    if cq.ext is None or not is_ext_addr(tags_code):
        return ConsumeQueueData(physic_offset, physic_size, tags_code)
    ext = cq.ext.get(tags_code)
    if ext is None:
        return ConsumeQueueData(physic_offset, physic_size, tags_code, msg=f"Cq extend not exist!addr: {tags_code}")
    extend = fastjson.dumps({"msgStoreTime": ext.msg_store_time, "size": ext.size, "tagsCode": ext.tags_code})
    return ConsumeQueueData(physic_offset, physic_size, tags_code, extend_data_json=extend)


def register_inspect_processors(table: ProcessorTable, *, store: DefaultMessageStore, consumers: ConsumerManager,
                                producers: ProducerManager) -> None:

    def query_consume_queue(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = required_str(request, "topic")
        queue_id = required_int(request, "queueId")
        index = required_int(request, "index")
        count = required_int(request, "count")
        group = optional_str(request, "consumerGroup")
        cq = store.find_consume_queue(topic, queue_id)
        if cq is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        subscription = filter_data = None
        if group is not None:
            found = consumers.find_subscription(group, topic)
            # Apache shows the group's SQL92 filter data here; a tag subscription has none
            filter_data = f"{group}@{topic} is not online!" if found is None else "null"
            subscription = None if found is None else found.to_body()
        buf = cq.get_index_buffer(index) if index >= 0 else None
        if buf is None:   # Apache answers SUCCESS without a body (mqadmin queryCq then fails)
            return request.response(ResponseCode.SUCCESS, f"Index {index} of {queue_id}@{topic} is not exist!")
        units = len(buf) // CQ_STORE_UNIT_SIZE
        if count >= 0:
            units = min(units, count)
        data = tuple(_unit(cq, *CQ_UNIT.unpack_from(buf, i * CQ_STORE_UNIT_SIZE)) for i in range(units))
        body = QueryConsumeQueueResponseBody(cq.get_max_offset_in_queue(), cq.get_min_offset_in_queue(), data,
                                             subscription, filter_data)
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    def all_producer_info(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        data = {group: tuple(ProducerInfo(info.client_id, f"/{ch.remote_addr}", info.language, info.version,
                                          info.last_update_ms) for ch, info in channels.items())
                for group, channels in producers.groups.items()}
        return request.response(ResponseCode.SUCCESS, body=ProducerTableInfo(data).encode())

    table.register(QUERY_CONSUME_QUEUE, query_consume_queue)
    table.register(GET_ALL_PRODUCER_INFO, all_producer_info)

"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325): the reply half of request/reply.

A requester (``DefaultMQProducer.request()``) sends a message carrying its client id in
``REPLY_TO_CLIENT``; a consumer answers with a reply message (``MSG_TYPE=reply``) to
``<cluster>_REPLY_TOPIC``, which arrives here. The broker hands the reply straight to the
requester's connection with PUSH_REPLY_MESSAGE_TO_CLIENT (326) and, unless
``storeReplyMessageEnable=false``, also stores it, as Apache 4.9.x does (spec/codes.md 3.4):

- the push comes first and its outcome is the answer's code: SUCCESS, or SYSTEM_ERROR with a
  remark naming the client when it is not connected, refuses or does not answer in time;
- the store comes second and fills msgId / queueId / queueOffset (``"0"`` / 0 without it);
- the stored properties are the replier's string as sent (no CLUSTER added); the pushed ones
  carry ``PUSH_REPLY_TIME`` in addition.

The push waits for the requester's answer, so the processor answers later (a Deferred): the
connection's reader goes on meanwhile.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from pyrmq.broker.send_processor import (
    _V1_KEYS,
    _V2_KEYS,
    SendMessageProcessor,
    _Keys,
    required_send_fields,
)
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import (
    MessageConst,
    properties_to_string,
    string_to_properties,
    tags_string_to_tags_code,
)
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.remoting.channel import Channel, ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.deferred import Deferred
from pyrmq.store.message_store import MessageExtBrokerInner, PutMessageStatus

if TYPE_CHECKING:
    from pyrmq.broker.client_manager import ConsumerManager, ProducerManager

log = logging.getLogger(__name__)

# How long the push waits for the requester's answer (Apache's Broker2Client.callClient).
PUSH_REPLY_TIMEOUT_S = 10.0
# Stored with any of these the reply counts as stored (the Java broker's "putOk" statuses).
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
           PutMessageStatus.SLAVE_NOT_AVAILABLE)
# The send header fields the push repeats (under their V1 names: ReplyMessageRequestHeader).
_PUSHED_FIELDS = ("producer_group", "topic", "default_topic", "default_topic_queue_nums", "queue_id", "sys_flag",
                  "born_timestamp", "flag", "reconsume_times", "unit_mode")


class ReplyMessageProcessor:
    """Pushes replies to the requesting client and stores them; shares the send path's checks."""

    def __init__(self, *, send: SendMessageProcessor, producers: ProducerManager, consumers: ConsumerManager,
                 store_reply: bool) -> None:
        self.send = send
        self.producers = producers
        self.consumers = consumers
        self.store_reply = store_reply

    def find_client(self, client_id: str) -> Channel | None:
        """The connection of the client with ``client_id``: its producer heartbeat first (a
        requester is a producer), then its consumer heartbeat (one client instance, one id)."""
        for channels in self.producers.groups.values():
            for channel, info in channels.items():
                if info.client_id == client_id and not channel.closed:
                    return channel
        for group in self.consumers.groups.values():
            for channel, info in group.channels.items():
                if info.client_id == client_id and not channel.closed:
                    return channel
        return None

    def process(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        keys = _V2_KEYS if request.code == RequestCode.SEND_REPLY_MESSAGE_V2 else _V1_KEYS
        header = request.ext_fields or {}
        topic, queue_id, sys_flag, born_timestamp, flag = required_send_fields(header, keys)
        topic_config = self.send._check(request, header, keys, topic, queue_id)
        if isinstance(topic_config, RemotingCommand):
            return topic_config
        if queue_id < 0:
            queue_id = random.randrange(max(1, topic_config.write_queue_nums))
        return self._push_and_store(channel, request, header, keys, topic, queue_id, sys_flag, born_timestamp, flag)

    async def _push_and_store(self, channel: Channel, request: RemotingCommand, header: dict[str, str], keys: _Keys,
                              topic: str, queue_id: int, sys_flag: int, born_timestamp: int,
                              flag: int) -> RemotingCommand:
        properties_string = header.get(keys.properties) or ""
        properties = string_to_properties(properties_string)
        body = bytes(request.body) if request.body is not None else b""
        remark = await self._push(channel, request, header, keys, properties, body)
        ext = {"msgId": "0", "queueId": str(queue_id), "queueOffset": "0", **self.send._response_fields}
        if self.store_reply:
            born_host = channel.remote_host_port
            reconsume = header.get(keys.reconsume_times)
            inner = MessageExtBrokerInner(
                topic=topic, queue_id=queue_id, flag=flag, body=body, properties_string=properties_string,
                sys_flag=sys_flag, born_timestamp=born_timestamp, born_host=born_host,
                store_host=self.send.store_host, reconsume_times=int(reconsume) if reconsume and reconsume.isdigit() else 0,
                tags_code=tags_string_to_tags_code(properties.get(MessageConst.PROPERTY_TAGS)))
            result = self.send.store.put_message(inner)
            if result.status in _STORED and result.append_result is not None:
                append = result.append_result
                self.send.stats.on_put(topic, append.msg_num, append.wrote_bytes)
                ext.update(msgId=append.msg_id, queueOffset=str(append.logics_offset))
            else:
                log.warning("storing a reply to %s failed: %s", topic, result.status.name)
        if remark is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark, ext_fields=ext)
        return request.response(ResponseCode.SUCCESS, ext_fields=ext)

    async def _push(self, channel: Channel, request: RemotingCommand, header: dict[str, str], keys: _Keys,
                    properties: dict[str, str], body: bytes) -> str | None:
        """PUSH_REPLY_MESSAGE_TO_CLIENT to the requester; None when it took the reply, else the remark."""
        client_id = properties.get(MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if client_id is None:
            log.warning("a reply without %s cannot be delivered", MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT)
            return f"reply message properties[{MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
        target = self.find_client(client_id)
        if target is None:
            remark = f"push reply message fail, channel of <{client_id}> not found."
            log.warning(remark)
            return remark
        pushed = dict(properties)
        pushed[MessageConst.PROPERTY_PUSH_REPLY_TIME] = str(int(time.time() * 1000))
        fields = {getattr(_V1_KEYS, attr): header[getattr(keys, attr)] for attr in _PUSHED_FIELDS
                  if header.get(getattr(keys, attr)) is not None}
        fields["properties"] = properties_to_string(pushed)
        fields["bornHost"] = channel.remote_addr
        fields["storeHost"] = "{}:{}".format(*self.send.store_host)
        fields["storeTimestamp"] = str(int(time.time() * 1000))
        push = make_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, fields, body=body,
                            serialize_type=target.peer_serialize_type)
        try:
            answer = await target.invoke(push, PUSH_REPLY_TIMEOUT_S)
        except (ChannelClosedError, RemotingTimeoutError) as exc:
            log.warning("push reply message to <%s> failed: %s", client_id, exc)
            return f"push reply message to {client_id}fail."
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> answered %d: %s", client_id, answer.code, answer.remark)
            return f"push reply message to {client_id}fail."
        return None


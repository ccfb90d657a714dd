"""Admin requests the broker relays to live consumers: CONSUME_MESSAGE_DIRECTLY (309) -- the
dashboard's "resend" of a dead letter and ``mqadmin consumeMessage``-style redelivery -- and
GET_CONSUMER_RUNNING_INFO (307) to one client, as Apache's callConsumer: the client is found by
group and client id, the request's fields (plus ``brokerName``, and for 309 the stored record read
by the offset in ``msgId``) go to it as a new request, and its answer comes back as ours.
INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, mqadmin getConsumerStatus) asks every client of the
group (or the one named) for its offsets of a topic, as Apache's Broker2Client.getConsumeStatus."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyrmq.broker.offsets_and_groups import required_group
from pyrmq.codec.admin_bodies import GetConsumerStatusBody
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.message import decode_offset_msg_id
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.remoting.channel import Channel, ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.deferred import Deferred
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.headers import optional_str, required_str

if TYPE_CHECKING:
    from pyrmq.broker.client_manager import ConsumerManager
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

GET_CONSUMER_STATUS_FROM_CLIENT = 221
INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
GET_CONSUMER_RUNNING_INFO = 307
CONSUME_MESSAGE_DIRECTLY = 309
CONSUME_MSG_TIMEOUT = 207
# Clients older than V3_1_8_SNAPSHOT (ordinal 77) cannot answer these calls.
MIN_CALL_CLIENT_VERSION = 77
CALL_CLIENT_TIMEOUT_S = 10.0   # Apache's Broker2Client.callClient waits 10 s
# Clients older than V3_0_7_SNAPSHOT (ordinal 28) cannot report their offsets; each is asked for 5 s.
MIN_STATUS_CLIENT_VERSION = 28
STATUS_CLIENT_TIMEOUT_S = 5.0


def register_consumer_call_processors(table: ProcessorTable, *, broker_name: str, store: DefaultMessageStore,
                                      consumers: ConsumerManager) -> None:
    """Register the relayed admin calls over the consumer registry and the store."""

    def call_consumer(code: int, request: RemotingCommand, body: bytes | None) -> RemotingCommand | Deferred:
        group = required_group(request)
        client_id = optional_str(request, "clientId") or ""
        info = consumers.groups.get(group)
        found = next(((ch, c) for ch, c in (info.channels.items() if info else ()) if c.client_id == client_id), None)
        if found is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        channel, client = found
        if client.version < MIN_CALL_CLIENT_VERSION:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"The Consumer <{client_id}> Version <{client.version}> too low to finish, "
                                    "please upgrade it to V3_1_8_SNAPSHOT")
        relayed = make_request(code, dict(request.ext_fields or {}), body,
                               serialize_type=channel.peer_serialize_type)

        async def relay() -> RemotingCommand:
            try:
                answer = await channel.invoke(relayed, CALL_CLIENT_TIMEOUT_S)
            except RemotingTimeoutError as exc:
                return request.response(CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}")
            except ChannelClosedError as exc:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
            return request.response(answer.code, answer.remark, dict(answer.ext_fields or {}), answer.body)
        return relay()

    def consume_message_directly(channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        fields = request.ext_fields = dict(request.ext_fields or {})
        fields["brokerName"] = broker_name
        body = None
        try:
            _, _, offset = decode_offset_msg_id(required_str(request, "msgId"))
        except ValueError:
            offset = None    # Apache relays without a body when the id does not decode
        if offset is not None:
            record = store.select_one_message_by_offset(offset)
            body = bytes(record) if record is not None else None
        return call_consumer(CONSUME_MESSAGE_DIRECTLY, request, body)

    def consumer_running_info(channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        return call_consumer(GET_CONSUMER_RUNNING_INFO, request, None)

    def consumer_status(channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        topic = required_str(request, "topic")
        group = required_group(request, "group")
        origin = optional_str(request, "clientAddr") or ""
        info = consumers.groups.get(group)
        if info is None or not info.channels:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"No Any Consumer online in the consumer group: [{group}]")
        asked = []
        for client_channel, client in info.channels.items():
            if client.version < MIN_STATUS_CLIENT_VERSION:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"the client does not support this feature. version={client.version}")
            if not origin or origin == client.client_id:
                asked.append((client_channel, client.client_id))

        async def gather() -> RemotingCommand:
            table = {}
            for client_channel, client_id in asked:   # one after the other, as Apache
                ask = make_request(GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": topic, "group": group},
                                   serialize_type=client_channel.peer_serialize_type)
                try:
                    answer = await client_channel.invoke(ask, STATUS_CLIENT_TIMEOUT_S)
                    if answer.code == ResponseCode.SUCCESS and answer.body:
                        table[client_id] = GetConsumerStatusBody.decode(answer.body).message_queue_table
                except (RemotingTimeoutError, ChannelClosedError, ProtocolError) as exc:
                    log.error("[get-consumer-status] get consumer status exception. topic=%s, group=%s, error=%s",
                              topic, group, exc)
            return request.response(ResponseCode.SUCCESS, body=GetConsumerStatusBody(consumer_table=table).encode())
        return gather()

    table.register(INVOKE_BROKER_TO_GET_CONSUMER_STATUS, consumer_status)
    table.register(CONSUME_MESSAGE_DIRECTLY, consume_message_directly)
    table.register(GET_CONSUMER_RUNNING_INFO, consumer_running_info)

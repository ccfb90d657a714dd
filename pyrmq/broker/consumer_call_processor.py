"""Admin requests the broker relays to one live consumer: CONSUME_MESSAGE_DIRECTLY (309) -- the
dashboard's "resend" of a dead letter and ``mqadmin consumeMessage``-style redelivery -- and
GET_CONSUMER_RUNNING_INFO (307). As Apache's callConsumer: the client is found by group and client
id, the request's fields (plus ``brokerName``, and for 309 the stored record read by the offset in
``msgId``) go to it as a new request, and its answer comes back as ours."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrmq.broker.offsets_and_groups import required_group
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.message import decode_offset_msg_id
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.remoting.channel import Channel, ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.deferred import Deferred
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.headers import optional_str, required_str

if TYPE_CHECKING:
    from pyrmq.broker.client_manager import ConsumerManager
    from pyrmq.store.message_store import DefaultMessageStore

GET_CONSUMER_RUNNING_INFO = 307
CONSUME_MESSAGE_DIRECTLY = 309
CONSUME_MSG_TIMEOUT = 207
# Clients older than V3_1_8_SNAPSHOT (ordinal 77) cannot answer these calls.
MIN_CALL_CLIENT_VERSION = 77
CALL_CLIENT_TIMEOUT_S = 10.0   # Apache's Broker2Client.callClient waits 10 s


def register_consumer_call_processors(table: ProcessorTable, *, broker_name: str, store: DefaultMessageStore,
                                      consumers: ConsumerManager) -> None:
    """Register the two relayed admin calls over the consumer registry and the store."""

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

    table.register(CONSUME_MESSAGE_DIRECTLY, consume_message_directly)
    table.register(GET_CONSUMER_RUNNING_INFO, consumer_running_info)

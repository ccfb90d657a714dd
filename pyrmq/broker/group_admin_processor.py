"""Subscription-group administration and the master's config tables for its slaves:
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), DELETE_SUBSCRIPTIONGROUP (207),
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45).

The three GET_ALL_* bodies are the files' own fastjson text (subscriptionGroup.json,
consumerOffset.json, delayOffset.json without pretty-printing), as Apache's managers ``encode()``
them; a slave's config sync (``slave_sync``) reads them.  A slave refuses the group writes with
Apache's validateSlave code and remark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from pyrmq.broker.offsets_and_groups import SubscriptionGroupConfig, checked_group, required_group
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.deferred import Deferred
from pyrmq.remoting.dispatch import ProcessorTable, RequestError
from pyrmq.remoting.headers import optional_bool

Processor = Callable[[Channel, RemotingCommand], "RemotingCommand | Deferred"]

if TYPE_CHECKING:
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager, SubscriptionGroupManager
    from pyrmq.broker.schedule_service import DelayOffsetTable
    from pyrmq.common.persister import ConfigPersister

# Apache AdminBrokerProcessor.validateSlave: topic and group writes go to the master.
SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."


def master_only(is_slave: bool, process: Processor) -> Processor:
    """``process`` on a master; on a slave the refusal of a topic or subscription-group write
    (Apache's validateSlave: SYSTEM_ERROR and its remark)."""
    if not is_slave:
        return process
    return lambda channel, request: request.response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)


def decode_group_config(body: bytes | None) -> SubscriptionGroupConfig | None:
    """The SubscriptionGroupConfig of an UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body (None: no body,
    as Apache then changes nothing); a body that is not one is refused with SYSTEM_ERROR."""
    if not body:
        return None
    try:
        obj = fastjson.loads(body)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        config = SubscriptionGroupConfig.from_json(obj)
    except (ProtocolError, ValueError, KeyError, TypeError) as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"bad SubscriptionGroupConfig body: {exc}") from None
    checked_group(config.group_name)
    return config


def register_group_admin_processors(table: ProcessorTable, *, is_slave: bool, groups: SubscriptionGroupManager,
                                    offsets: ConsumerOffsetManager, delay_offsets: DelayOffsetTable,
                                    persister: ConfigPersister,
                                    on_group_deleted: Callable[[str], None] = lambda group: None) -> None:
    """Register the group-administration and config-table processors over the managers they use;
    ``on_group_deleted`` is told of each group DELETE_SUBSCRIPTIONGROUP removed."""

    def table_body(request: RemotingCommand, text: str) -> RemotingCommand:
        # Apache answers SYSTEM_ERROR "No ... in this broker" for an empty encoding, which its
        # managers never produce (an empty table still encodes as {"offsetTable":{}}).
        return request.response(ResponseCode.SUCCESS, body=text.encode())

    def update_group(channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        config = decode_group_config(request.body)
        if config is None:
            return request.response(ResponseCode.SUCCESS)
        groups.update(config)
        return persister.answer_when_written(request, groups.path.name)

    def delete_group(channel: Channel, request: RemotingCommand) -> RemotingCommand | Deferred:
        group = required_group(request, "groupName")
        if groups.table.pop(group, None) is not None:
            groups.data_version.next_version()
            groups.persist_later()
        if optional_bool(request, "removeOffset"):
            offsets.remove_group(group)
        on_group_deleted(group)
        return persister.answer_when_written(request, groups.path.name)

    table.register(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, master_only(is_slave, update_group))
    table.register(RequestCode.DELETE_SUBSCRIPTIONGROUP, master_only(is_slave, delete_group))
    table.register(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, lambda ch, req: table_body(req, groups.encode()))
    table.register(RequestCode.GET_ALL_CONSUMER_OFFSET, lambda ch, req: table_body(req, offsets.encode()))
    table.register(RequestCode.GET_ALL_DELAY_OFFSET, lambda ch, req: table_body(req, delay_offsets.encode()))

"""CHECK_CLIENT_CONFIG (46): a Java push consumer asks, before it starts, whether the broker can
serve its subscription -- answered as Apache's ClientManageProcessor.checkClientConfig: a tag
subscription is fine; SQL92 needs ``enablePropertyFilter`` (else 1, and the consumer does not
start) and an expression that compiles (else 23 with the parser's message)."""

from __future__ import annotations

import logging

from pyrmq.broker.config import BrokerConfig
from pyrmq.broker.consumer_filter import SQL92, is_tag_type
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.filter import FilterParseError, compile_expression
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable

log = logging.getLogger(__name__)


def register_check_client_config(table: ProcessorTable, config: BrokerConfig) -> None:
    def check_client_config(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            body = fastjson.loads(request.body) if request.body else None
        except ProtocolError:
            body = None   # Apache decodes to null and answers SUCCESS
        subscription = body.get("subscriptionData") if isinstance(body, dict) else None
        if not isinstance(subscription, dict):
            return request.response(ResponseCode.SUCCESS)
        expression_type = str(subscription.get("expressionType") or "TAG")
        if is_tag_type(expression_type):
            return request.response(ResponseCode.SUCCESS)
        if not config.enable_property_filter:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"The broker does not support consumer to filter message by {expression_type}")
        try:
            if expression_type != SQL92:
                raise FilterParseError(f"Unsupported expression type: {expression_type}")
            compile_expression(str(subscription.get("subString") or ""))
        except FilterParseError as exc:
            log.warning("client %s@%s: SQL92 expression does not compile: %s", body.get("clientId"),
                        body.get("group"), exc.message)
            return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, exc.message)
        return request.response(ResponseCode.SUCCESS)

    table.register(RequestCode.CHECK_CLIENT_CONFIG, check_client_config)

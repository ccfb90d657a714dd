"""The one exception family of pyrmq.client: every failure a caller sees is an ``MQClientError``.

``code`` is the broker's ResponseCode when a broker or NameServer refused a request
(``MQBrokerError``), or one of Java's ``ClientErrorCode`` values for failures on this side
(no route, no connection, no answer in time), so code that handles Java client errors reads the
same here."""

from __future__ import annotations

from typing import Final

# Java's org.apache.rocketmq.client.exception ClientErrorCode values.
CONNECT_BROKER_EXCEPTION: Final = 10001
ACCESS_BROKER_TIMEOUT: Final = 10002
BROKER_NOT_EXIST_EXCEPTION: Final = 10003
NO_NAME_SERVER_EXCEPTION: Final = 10004
NOT_FOUND_TOPIC_EXCEPTION: Final = 10005
# Not a Java value: a message the client refuses to send (size, empty body, bad topic name).
MESSAGE_ILLEGAL_LOCAL: Final = 10013


class MQClientError(Exception):
    """A request that failed; ``code`` says why (a ResponseCode or a ClientErrorCode)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(f"CODE: {code} DESC: {remark}")
        self.code = code
        self.remark = remark


class MQBrokerError(MQClientError):
    """A broker (or NameServer) answered with an error code; ``addr`` is who answered."""

    def __init__(self, code: int, remark: str, addr: str) -> None:
        super().__init__(code, remark)
        self.addr = addr

    def __str__(self) -> str:
        return f"CODE: {self.code} DESC: {self.remark} BROKER: {self.addr}"


class MQRemotingError(MQClientError):
    """The request did not get an answer: connection refused or lost, or no answer in time."""


class MQConnectError(MQRemotingError):
    """Could not connect to the address, or the connection closed before the answer came."""

    def __init__(self, remark: str) -> None:
        super().__init__(CONNECT_BROKER_EXCEPTION, remark)


class MQTimeoutError(MQRemotingError):
    """No answer within the request's timeout."""

    def __init__(self, remark: str) -> None:
        super().__init__(ACCESS_BROKER_TIMEOUT, remark)

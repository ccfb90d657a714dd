"""pyrmq.client: a RocketMQ remoting client in Python (producer and pull consumer), trio-based,
with blocking twins in :mod:`pyrmq.client.sync`.  Works against pyrmq and Apache RocketMQ 4.9.x /
5.x brokers over the remoting protocol.  docs/CLIENT.md describes the API."""

from pyrmq.client.consumer import PullConsumer
from pyrmq.client.errors import (
    MQBrokerError,
    MQClientError,
    MQConnectError,
    MQRemotingError,
    MQTimeoutError,
)
from pyrmq.client.model import Message, MessageQueue, PullResult, PullStatus, SendResult, SendStatus
from pyrmq.client.producer import OutgoingMessage, Producer

__all__ = [
    "Message", "MessageQueue", "MQBrokerError", "MQClientError", "MQConnectError", "MQRemotingError",
    "MQTimeoutError", "OutgoingMessage", "Producer", "PullConsumer", "PullResult", "PullStatus", "SendResult",
    "SendStatus",
]

"""pyrmq: a RocketMQ-compatible message broker (NameServer + Broker) written in Python on trio."""

__version__ = "0.1.0"

"""Compatibility suite: the official RocketMQ Java clients against pyrmq and Apache RocketMQ."""

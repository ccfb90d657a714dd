"""The rules for topic and group names (Java's ``TopicValidator`` / ``Validators.checkGroup``), in
the codec so that every side checks the same way: the broker on requests, the console and the
client before they send. Each check answers None for a legal name, else the remark Java gives."""

from __future__ import annotations

import re

VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
TOPIC_MAX_LENGTH = 127     # TopicValidator.TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = 255     # Validators.CHARACTER_MAX_LENGTH


def validate_topic(topic: str | None) -> str | None:
    """None if ``topic`` is a legal name, else the remark Java answers with (code SYSTEM_ERROR)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if not VALID_NAME.fullmatch(topic):
        return f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
    return None


def validate_group(group: str | None) -> str | None:
    """None if ``group`` is a legal consumer/producer group name, else a remark for the client."""
    if not group or not group.strip():
        return "The specified group is blank."
    if len(group) > GROUP_MAX_LENGTH:
        return f"The specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if not VALID_NAME.fullmatch(group):
        return f"The specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None

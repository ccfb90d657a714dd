"""The rules for topic and group names (Java's ``TopicValidator`` / ``Validators.checkGroup``), in
the codec so that every side checks the same way: the broker on requests, the console and the
client before they send. Each check answers None for a legal name, else the remark Java gives."""

from __future__ import annotations

import re

VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
TOPIC_MAX_LENGTH = 127     # TopicValidator.TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = 255     # Validators.CHARACTER_MAX_LENGTH


# Names found legal, so that checking a topic again (twice per send: the broker, then the store)
# is a set lookup; forgotten all at once past this many.
_LEGAL_TOPICS: set[str] = set()
MAX_REMEMBERED_TOPICS = 65536


def is_legal_topic(topic: str) -> bool:
    """``validate_topic(topic) is None``, remembered."""
    return topic in _LEGAL_TOPICS or validate_topic(topic) is None


def validate_topic(topic: str | None) -> str | None:
    """None if ``topic`` is a legal name, else the remark Java answers with (code SYSTEM_ERROR)."""
    if topic in _LEGAL_TOPICS:
        return None
    remark = _topic_remark(topic)
    if remark is None and topic is not None:
        if len(_LEGAL_TOPICS) >= MAX_REMEMBERED_TOPICS:
            _LEGAL_TOPICS.clear()
        _LEGAL_TOPICS.add(topic)
    return remark


def _topic_remark(topic: str | None) -> str | None:
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

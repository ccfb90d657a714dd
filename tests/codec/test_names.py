"""Topic and group names: Java's rules, and the remembered legal topics of the send path."""

from __future__ import annotations

import pytest

from pyrmq.codec import names
from pyrmq.codec.names import is_legal_topic, validate_group, validate_topic


@pytest.mark.parametrize("topic, remark", [
    ("TopicTest", None),
    ("%RETRY%group_1|x-y", None),
    ("t" * 127, None),
    ("t" * 128, "The specified topic is longer than topic max length 127."),
    ("", "The specified topic is blank."),
    ("   ", "The specified topic is blank."),
    (None, "The specified topic is blank."),
    ("a b", "The specified topic[a b] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    ("tópico", "The specified topic[tópico] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
])
def test_topic_rules_and_their_remarks(topic, remark):
    for _ in range(2):   # the second time from the remembered names, when legal
        assert validate_topic(topic) == remark
        if topic is not None:
            assert is_legal_topic(topic) is (remark is None)


def test_only_legal_topics_are_remembered_and_their_number_is_bounded(monkeypatch):
    monkeypatch.setattr(names, "_LEGAL_TOPICS", set())
    monkeypatch.setattr(names, "MAX_REMEMBERED_TOPICS", 3)
    for topic in ("a b", "t" * 128, "A", "B", "C"):
        validate_topic(topic)
    assert names._LEGAL_TOPICS == {"A", "B", "C"}
    assert is_legal_topic("D") and names._LEGAL_TOPICS == {"D"}   # forgotten at once past the bound
    assert not is_legal_topic("x y") and names._LEGAL_TOPICS == {"D"}


def test_group_rules():
    assert validate_group("please_rename_unique_group_name") is None
    assert validate_group("g" * 256) == "The specified group is longer than group max length 255."
    assert validate_group("g h").startswith("The specified group[g h] contains illegal characters")

"""ConsumerFilterManager (spec filter.md 3.4, 3.6): registration by version, dead/re-alive,
cleaning after filterDataCleanTimeSpan, and the load rules of consumerFilter.json."""

import json

from pyrmq.broker.consumer_filter import ConsumerFilterManager
from pyrmq.filter.bloom import BloomFilter

BLOOM = BloomFilter.from_config(20, 32)


def manager(tmp_path, now, bloom=BLOOM, span=1000):
    return ConsumerFilterManager(tmp_path / "consumerFilter.json", bloom, lambda: span, clock=lambda: now[0])


def test_register_versions_dead_and_clean(tmp_path):
    now = [1_700_000_000_000]
    m = manager(tmp_path, now)
    m.register_group("group_a", [("TopicTest", "a > 5", "SQL92", 10), ("TopicTag", "TagA", "TAG", 10)])
    data = m.get("TopicTest", "group_a")
    assert data.bloom_filter_data.bit_pos == (85, 53, 80)   # the spec's vector for group_a#TopicTest
    assert m.get("TopicTag", "group_a") is None
    assert not m.register("TopicTest", "group_a", "a > 9", "SQL92", 9)      # older version ignored
    assert m.get("TopicTest", "group_a").expression.text == "a > 5"
    assert m.register("TopicTest", "group_a", "a > 5", "SQL92", 11)         # same text: version moves on
    assert m.get("TopicTest", "group_a") is data and data.client_version == 11
    m.unregister("group_a")
    assert data.dead and m.live_filters("TopicTest") == []
    assert m.register("TopicTest", "group_a", "a > 5", "SQL92", 11)         # same version re-alives
    assert not data.dead
    now[0] += 5
    m.register_group("group_a", [])                                          # no longer subscribed
    assert data.dead_time == now[0]
    now[0] += 999
    json.loads(m.encode())
    assert m.get("TopicTest", "group_a") is not None                         # dead for < 1000 ms: kept
    now[0] += 1
    assert json.loads(m.encode()) == {"filterDataByTopic": {}}


def test_load_marks_entries_dead_and_ignores_other_bloom_sizes(tmp_path):
    now = [1_700_000_100_000]
    m = manager(tmp_path, now)
    m.register_group("group_a", [("TopicTest", "a > 5", "SQL92", 1)])
    m.persist()
    loaded = manager(tmp_path, now)
    loaded.load()
    data = loaded.get("TopicTest", "group_a")
    assert data.expression.matches({"a": "6"})
    # every loaded filter is taken as dead since 30 s ago (not before its birth) until a heartbeat
    assert data.dead and data.dead_time == data.born_time and loaded.live_filters("TopicTest") == []
    now[0] += 60_000
    later = manager(tmp_path, now)
    later.load()
    assert later.get("TopicTest", "group_a").dead_time == now[0] - 30_000
    assert later.register("TopicTest", "group_a", "a > 5", "SQL92", 1)       # the heartbeat re-alives it
    assert [d.group for d in later.live_filters("TopicTest")] == ["group_a"]
    other = manager(tmp_path, now, bloom=BloomFilter.from_config(10, 64))
    other.load()
    assert other.filter_data_by_topic == {}

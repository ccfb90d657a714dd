"""The bitmap path with the broker's real pieces: ConsumerFilterManager (heartbeat registration,
dead and re-alive), BitMapCalculator over its filters, the store's ConsumeQueueExt and the pull's
ExpressionMessageFilter -- the records skipped at the consume queue are exactly the ones that do
not match, including records stored while the group was away."""

from __future__ import annotations

from pyrmq.broker.consumer_filter import ConsumerFilterManager
from pyrmq.broker.filter_bitmap import BitMapCalculator
from pyrmq.broker.pull_processor import ExpressionMessageFilter
from pyrmq.filter.bloom import BloomFilter
from tests.broker.test_filter_bitmap import count_reads, pull_all
from tests.store.store_helpers import make_msg, open_store, small_config

BLOOM = BloomFilter.from_config(20, 32)


def test_skips_only_non_matching_records_also_those_stored_while_the_group_was_away(tmp_path, monkeypatch):
    now = [1_000]
    manager = ConsumerFilterManager(tmp_path / "consumerFilter.json", BLOOM, lambda: 86_400_000, clock=lambda: now[0])
    store = open_store(small_config(tmp_path / "store", enable_consume_queue_ext=True,
                                    mapped_file_size_commit_log=1024 * 1024, mapped_file_size_consume_queue=20 * 1000,
                                    mapped_file_size_consume_queue_ext=64 * 1024))
    try:
        store.set_bit_map_source(BitMapCalculator(BLOOM, manager.bitmap_filters).bit_map)
        manager.register_group("G", [("TopicTest", "a = 3", "SQL92", 1)])
        manager.register_group("H", [("TopicTest", "a = 5", "SQL92", 1)])
        for i in range(100):
            if i == 50:
                manager.unregister("G")   # the group's consumers left: its filter is dead
            assert store.put_message(make_msg(body=f"m{i}".encode(), props={"a": str(i % 10)})).is_ok()
        manager.register_group("G", [("TopicTest", "a = 3", "SQL92", 1)])   # back, same filter
        data = manager.get("TopicTest", "G")
        assert not data.dead and data.born_time == 1_000
        reads = count_reads(store, monkeypatch)
        with_bitmap = pull_all(store, ExpressionMessageFilter(data, BLOOM))
        assert with_bitmap == [f"m{i}".encode() for i in range(3, 100, 10)]
        assert len(reads) == 10
        reads.clear()
        assert pull_all(store, ExpressionMessageFilter(data)) == with_bitmap and len(reads) == 100
    finally:
        store.shutdown()

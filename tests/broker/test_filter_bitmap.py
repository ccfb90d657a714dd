"""SQL92 bloom bitmaps (filter.md section 3.5): computed at dispatch into the ConsumeQueueExt unit,
used by the pull scan to skip units without reading the commit log.

The SQL92 language and the ConsumerFilterManager come from another part of issue 10; these tests
use a small stand-in filter (property equality) with the same seams: ``bloom_filter_data``,
``compiled_expression.matches(props)``, ``born_time``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyrmq.broker.allocate_service import AllocateService
from pyrmq.broker.filter_bitmap import BitMapCalculator, bitmap_says_no
from pyrmq.codec.message import decode_messages, record_properties_string, string_to_properties
from pyrmq.codec.store_formats import is_ext_addr
from pyrmq.filter.bloom import BloomFilter, BloomFilterData
from pyrmq.store.message_store import GetMessageStatus
from tests.store.store_helpers import make_msg, open_store, small_config

BLOOM = BloomFilter.from_config(20, 32)


@dataclass(frozen=True)
class PropertyEquals:
    name: str
    value: str

    def matches(self, props):
        return props.get(self.name) == self.value


@dataclass
class StandInFilter:
    group: str
    topic: str
    compiled_expression: PropertyEquals
    born_time: int
    bloom_filter_data: BloomFilterData | None


def stand_in(group, name, value, born_time=0):
    return StandInFilter(group, "TopicTest", PropertyEquals(name, value), born_time, BLOOM.generate(f"{group}#TopicTest"))


class ExpressionFilter:
    """The pull side: the bitmap first (when ``use_bitmap``), then the record's properties."""

    def __init__(self, f: StandInFilter, use_bitmap: bool = True):
        self.f = f
        self.use_bitmap = use_bitmap

    def is_matched_by_consume_queue(self, tags_code, ext_unit=None):
        if not self.use_bitmap:
            return True
        return not bitmap_says_no(BLOOM, self.f.bloom_filter_data, self.f.born_time, ext_unit)

    def is_matched_by_commit_log(self, record):
        return self.f.compiled_expression.matches(string_to_properties(record_properties_string(record)))


def _store(tmp_path, filters):
    config = small_config(tmp_path / "store", enable_consume_queue_ext=True, mapped_file_size_commit_log=1024 * 1024,
                          mapped_file_size_consume_queue=20 * 1000, mapped_file_size_consume_queue_ext=64 * 1024)
    store = open_store(config)
    by_topic = {"TopicTest": filters}
    store.set_bit_map_source(BitMapCalculator(BLOOM, lambda topic: by_topic.get(topic, ())).bit_map)
    return store


def count_reads(store, monkeypatch):
    reads = []
    real = store.commit_log.get_data
    monkeypatch.setattr(store.commit_log, "get_data", lambda offset, size: reads.append(offset) or real(offset, size))
    return reads


def pull_all(store, message_filter):
    offset, bodies = 0, []
    while True:
        r = store.get_message("g", "TopicTest", 0, offset, 32, message_filter)
        bodies += [m.body for buf in r.buffers for m in decode_messages(buf)]
        if r.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE):
            return bodies
        offset = r.next_begin_offset


def test_dispatch_stores_the_or_of_matching_filters_bits(tmp_path):
    a, b = stand_in("group_a", "color", "red"), stand_in("CID_SQL", "size", "L")
    store = _store(tmp_path, [a, b])
    try:
        for props in ({"color": "red"}, {"size": "L"}, {"color": "red", "size": "L"}, {}):
            assert store.put_message(make_msg(props=props)).is_ok()
        store.put_message(make_msg(topic="Other"))
        cq = store.find_consume_queue("TopicTest", 0)
        maps = [cq.ext.get(t).filter_bit_map for _, _, t in cq.iter_units(0)]
        expected = []
        for data in ([a.bloom_filter_data], [b.bloom_filter_data], [a.bloom_filter_data, b.bloom_filter_data], []):
            bits = BLOOM.new_bits()
            for d in data:
                BLOOM.hash_to(d, bits)
            expected.append(bytes(bits))
        assert maps == expected
        assert maps[0] == bytes([0, 0, 0, 0, 0, 0, 32, 0, 0, 0, 33, 0, 0, 0])   # bits 53, 80, 85
        # no filter watches topic Other: its ext unit has no bitmap
        other = store.find_consume_queue("Other", 0)
        assert other.ext.get(other.last_unit()[2]).filter_bit_map is None
    finally:
        store.shutdown()


def test_pull_skips_non_matching_units_without_reading_the_commit_log(tmp_path, monkeypatch):
    hit = stand_in("group_a", "k", "hit")
    other = stand_in("CID_SQL", "k", "other")
    store = _store(tmp_path, [hit, other])
    try:
        for i in range(500):
            value = "hit" if i % 10 == 3 else "other" if i % 10 == 5 else "none"
            assert store.put_message(make_msg(body=f"m{i}".encode(), props={"k": value})).is_ok()
        reads = count_reads(store, monkeypatch)
        with_bitmap = pull_all(store, ExpressionFilter(hit))
        reads_with_bitmap = len(reads)
        reads.clear()
        without = pull_all(store, ExpressionFilter(hit, use_bitmap=False))
        assert with_bitmap == without == [f"m{i}".encode() for i in range(3, 500, 10)]
        assert len(reads) == 500
        # the 50 matching records, plus any other whose bitmap happens to hold all three bits
        # (only "other" sets bits here, and its positions differ from group_a's)
        assert reads_with_bitmap == 50
    finally:
        store.shutdown()


def test_records_older_than_the_filter_or_foreign_bloom_data_are_not_skipped(tmp_path, monkeypatch):
    f = stand_in("group_a", "k", "hit")
    store = _store(tmp_path, [f])
    try:
        for i in range(20):
            assert store.put_message(make_msg(body=f"m{i}".encode(), props={"k": "x"})).is_ok()
        cq = store.find_consume_queue("TopicTest", 0)
        store_times = [cq.ext.get(t).msg_store_time for _, _, t in cq.iter_units(0)]
        reads = count_reads(store, monkeypatch)
        # born after every record: bitmaps written before the filter existed prove nothing
        late = StandInFilter("group_a", "TopicTest", f.compiled_expression, max(store_times), f.bloom_filter_data)
        assert pull_all(store, ExpressionFilter(late)) == [] and len(reads) == 20
        reads.clear()
        # bloom data of another size (an old consumerFilter.json) is not used for skipping
        foreign = StandInFilter("group_a", "TopicTest", f.compiled_expression, 0,
                                BloomFilter.from_config(10, 128).generate("group_a#TopicTest"))
        assert pull_all(store, ExpressionFilter(foreign)) == [] and len(reads) == 20
        reads.clear()
        assert pull_all(store, ExpressionFilter(f)) == [] and len(reads) == 0
    finally:
        store.shutdown()


def test_calculator_skips_invalid_filters_and_survives_a_failing_expression(tmp_path):
    class Boom:
        def matches(self, props):
            raise RuntimeError("evaluation failed")

    good = stand_in("group_a", "k", "v")
    broken = StandInFilter("g2", "TopicTest", Boom(), 0, BLOOM.generate("g2#TopicTest"))
    foreign = StandInFilter("g3", "TopicTest", PropertyEquals("k", "v"), 0, BloomFilterData(616, (1, 2, 3, 4)))
    store = _store(tmp_path, [broken, foreign, good])
    try:
        assert store.put_message(make_msg(props={"k": "v"})).is_ok()
        cq = store.find_consume_queue("TopicTest", 0)
        unit = cq.ext.get(cq.last_unit()[2])
        assert BLOOM.is_hit(good.bloom_filter_data, unit.filter_bit_map)
        assert sum(bin(x).count("1") for x in unit.filter_bit_map) == 3
    finally:
        store.shutdown()


def test_without_ext_no_bitmap_source_is_called(tmp_path):
    calls = []
    store = open_store(small_config(tmp_path / "store"))
    try:
        store.set_bit_map_source(lambda r: calls.append(r) or b"\x00" * 14)
        assert store.put_message(make_msg()).is_ok()
        assert calls == []
        assert not is_ext_addr(store.find_consume_queue("TopicTest", 0).last_unit()[2])
    finally:
        store.shutdown()


def test_allocator_prepares_the_next_ext_file(tmp_path):
    store = _store(tmp_path, [])
    try:
        cq = store.find_consume_queue("TopicTest", 0, create=True)
        assert store.put_message(make_msg()).is_ok()
        ext_queue = cq.ext.mapped_file_queue
        ext_queue.last_mapped_file().wrote_position = ext_queue.mapped_file_size * 3 // 4
        assert ext_queue in AllocateService(store).queues_to_prepare()
    finally:
        store.shutdown()

"""Apache's BloomFilter, bit for bit: sizes, murmur3 positions, bitmap bit order, JSON.

The vectors were printed by Apache RocketMQ 4.9.7's own ``BloomFilter``/``BitsArray`` (rocketmq-filter
jar with Guava 32) for these keys; spec/filter.md section 3.5 gives the first two.
"""

import pytest

from pyrmq.filter.bloom import BloomFilter, BloomFilterData, murmur3_x64_128_as_long

DEFAULT = BloomFilter.from_config(20, 32)

# key, Guava murmur3_128().hashString(key, UTF_8).asLong(), calcBitPositions with f=20 %, n=32
VECTORS = [
    ("", 0, (0, 0, 0)),
    ("a", -8839064797231613815, (94, 99, 7)),
    ("group_a#TopicTest", -7372972007783954848, (85, 53, 80)),
    ("CID_SQL#TopicTest", -9133735402591880069, (25, 65, 99)),
    ("0123456789abcdef", 5467490433528156583, (11, 47, 60)),           # exactly one block, no tail
    ("0123456789abcdefX", -3608559037187041545, (60, 79, 75)),         # one block, 1-byte tail
    ("gr\u00fcppe_\u4e2d#Topic\U0001F600", -7037722339542074184, (41, 26, 100)),  # multi-byte UTF-8
    ("%RETRY%CID_x#TopicTestLongerThanThirtyTwoBytes", 645753141577544173, (67, 100, 21)),
]


def test_default_sizes_are_apaches():
    assert (DEFAULT.k, DEFAULT.m, DEFAULT.byte_len) == (3, 112, 14)


def test_other_sizes():
    other = BloomFilter.from_config(10, 128)
    assert (other.k, other.m) == (4, 616)
    assert other.calc_bit_positions("group_a#TopicTest") == (365, 53, 472, 36)


@pytest.mark.parametrize(("key", "h64", "positions"), VECTORS)
def test_vectors(key, h64, positions):
    assert murmur3_x64_128_as_long(key.encode("utf-8")) == h64
    assert DEFAULT.calc_bit_positions(key) == positions
    assert DEFAULT.generate(key) == BloomFilterData(112, positions)


@pytest.mark.parametrize(("f", "n"), [(0, 32), (100, 32), (20, 0)])
def test_bad_config_refused(f, n):
    with pytest.raises(ValueError):
        BloomFilter.from_config(f, n)


def test_bitmap_bit_order_matches_bits_array():
    bits = DEFAULT.new_bits()
    a = DEFAULT.generate("group_a#TopicTest")
    b = DEFAULT.generate("CID_SQL#TopicTest")
    DEFAULT.hash_to(a, bits)
    DEFAULT.hash_to(b, bits)
    # Apache's BitsArray.bytes() after hashTo of the same two keys.
    assert list(bits) == [0, 0, 0, 2, 0, 0, 32, 0, 2, 0, 33, 0, 8, 0]
    assert DEFAULT.is_hit(a, bits) and DEFAULT.is_hit(b, bits)


def test_is_hit_needs_every_bit():
    data = DEFAULT.generate("group_a#TopicTest")
    bits = DEFAULT.new_bits()
    assert not DEFAULT.is_hit(data, bits)
    for p in data.bit_pos[:-1]:
        bits[p // 8] |= 1 << (p % 8)
    assert not DEFAULT.is_hit(data, bits)
    DEFAULT.hash_to(data, bits)
    assert DEFAULT.is_hit(data, bytes(bits))


def test_validity_and_size_checks():
    data = DEFAULT.generate("group_a#TopicTest")
    assert DEFAULT.is_valid(data)
    assert not DEFAULT.is_valid(None)
    assert not DEFAULT.is_valid(BloomFilterData(616, data.bit_pos))
    assert not DEFAULT.is_valid(BloomFilterData(112, data.bit_pos[:2]))
    with pytest.raises(ValueError):
        DEFAULT.is_hit(BloomFilterData(616, data.bit_pos), DEFAULT.new_bits())
    with pytest.raises(ValueError):
        DEFAULT.hash_to(data, bytearray(13))


def test_json_round_trip():
    data = DEFAULT.generate("group_a#TopicTest")
    assert data.to_json() == {"bitNum": 112, "bitPos": [85, 53, 80]}
    assert BloomFilterData.from_json({"bitNum": 112, "bitPos": [85, 53, 80]}) == data


@pytest.mark.parametrize("obj", [{}, {"bitNum": "112", "bitPos": [1]}, {"bitNum": 112, "bitPos": "abc"},
                                 {"bitNum": 112, "bitPos": [1.5]}, {"bitNum": 112}])
def test_json_refuses_other_shapes(obj):
    with pytest.raises(ValueError):
        BloomFilterData.from_json(obj)

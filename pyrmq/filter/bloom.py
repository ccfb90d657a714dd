"""The bloom filter behind SQL92 bitmaps (spec/filter.md section 3.5), pure and I/O-free.

Every consumer group that filters a topic by SQL92 gets ``k`` bit positions out of an ``m``-bit
map, derived from ``"<group>#<topic>"``.  At dispatch the broker ORs the positions of every
filter that matches a message into that message's bitmap (kept in the ConsumeQueueExt unit);
at pull time a unit whose bitmap lacks any of the group's bits cannot match and is skipped
without reading the commit log.  The positions, the sizes and the bit order must be Apache
RocketMQ's exactly: the bitmaps live in store files that Apache reads, and the positions travel
in ``consumerFilter.json``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

_MASK64: Final = (1 << 64) - 1
_MASK32: Final = (1 << 32) - 1

# MurmurHash3 x64_128 constants (Austin Appleby's reference; Guava's murmur3_128 is the same hash).
_C1: Final = 0x87C37B91114253D5
_C2: Final = 0x4CF5AD432745937F
_BLOCK: Final = 16


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    k ^= k >> 33
    return k


def _mix_k1(k1: int) -> int:
    return (_rotl64((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64


def _mix_k2(k2: int) -> int:
    return (_rotl64((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64


def murmur3_x64_128_as_long(data: bytes, seed: int = 0) -> int:
    """The first 8 bytes of MurmurHash3_x64_128(data) as a signed int64 (Guava's ``asLong()``).

    Pure Python: it runs once per filter registration, never per message, so a C extension
    would buy nothing on the hot path.
    """
    h1 = h2 = seed & _MASK64
    length = len(data)
    end = length - length % _BLOCK
    for off in range(0, end, _BLOCK):
        h1 ^= _mix_k1(int.from_bytes(data[off:off + 8], "little"))
        h1 = (_rotl64(h1, 27) + h2) & _MASK64
        h1 = (h1 * 5 + 0x52DCE729) & _MASK64
        h2 ^= _mix_k2(int.from_bytes(data[off + 8:off + 16], "little"))
        h2 = (_rotl64(h2, 31) + h1) & _MASK64
        h2 = (h2 * 5 + 0x38495AB5) & _MASK64
    tail = data[end:]
    if len(tail) > 8:
        h2 ^= _mix_k2(int.from_bytes(tail[8:], "little"))
    if tail:
        h1 ^= _mix_k1(int.from_bytes(tail[:8], "little"))
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _MASK64
    return h1 - (1 << 64) if h1 >> 63 else h1


def _int32(x: int) -> int:
    """Java's ``(int)`` narrowing: keep the low 32 bits, signed."""
    x &= _MASK32
    return x - (1 << 32) if x >> 31 else x


@dataclass(frozen=True)
class BloomFilterData:
    """One filter's place in the bitmap: the map size it was made for and its ``k`` positions."""

    bit_num: int
    bit_pos: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        """The object Apache writes for ``bloomFilterData`` (``{"bitNum":112,"bitPos":[..]}``)."""
        return {"bitNum": self.bit_num, "bitPos": list(self.bit_pos)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BloomFilterData:
        """Read the JSON object back; raises ValueError on anything that is not that shape."""
        bit_num = obj.get("bitNum")
        bit_pos = obj.get("bitPos")
        if type(bit_num) is not int or not isinstance(bit_pos, Sequence) or isinstance(bit_pos, (str, bytes)):
            raise ValueError(f"not bloom filter data: {obj!r}")
        if any(type(p) is not int for p in bit_pos):
            raise ValueError(f"bloom filter positions must be integers: {bit_pos!r}")
        return cls(bit_num, tuple(bit_pos))


@dataclass(frozen=True)
class BloomFilter:
    """Apache's BloomFilter: ``k`` hash functions over ``m`` bits, from an error rate and a count."""

    f: int
    n: int
    k: int
    m: int

    @classmethod
    def from_config(cls, max_error_rate_percent: int, expect_consumer_num: int) -> BloomFilter:
        """Sizes from broker config ``maxErrorRateOfBloomFilter`` and ``expectConsumerNumUseFilter``.

        k = ceil(log_0.5(f)), m = ceil(n * log2(1/f) * log2(e)) rounded up to whole bytes, as
        Apache computes them (defaults 20 %, 32 consumers give k = 3, m = 112).
        """
        if not 1 <= max_error_rate_percent < 100:
            raise ValueError("maxErrorRateOfBloomFilter must be at least 1 and less than 100")
        if expect_consumer_num < 1:
            raise ValueError("expectConsumerNumUseFilter must be greater than 0")
        rate = max_error_rate_percent / 100.0
        # Same expressions and order as Apache so the doubles (and so the ceilings) agree.
        k = math.ceil(math.log(rate) / math.log(0.5))
        m = math.ceil(expect_consumer_num * (math.log(1 / rate) / math.log(2)) * (math.log(math.e) / math.log(2)))
        m = 8 * math.ceil(m / 8.0)
        return cls(max_error_rate_percent, expect_consumer_num, k, m)

    @property
    def byte_len(self) -> int:
        """Bytes of one bitmap (m is a multiple of 8)."""
        return self.m // 8

    def calc_bit_positions(self, key: str) -> tuple[int, ...]:
        """The ``k`` positions of ``key`` (Kirsch-Mitzenmacher double hashing, Java int arithmetic)."""
        h64 = murmur3_x64_128_as_long(key.encode("utf-8"))
        h1 = _int32(h64)
        h2 = _int32(h64 >> 32)
        positions = []
        for i in range(1, self.k + 1):
            combined = _int32(h1 + i * h2)
            if combined < 0:
                combined = ~combined
            positions.append(combined % self.m)
        return tuple(positions)

    def generate(self, key: str) -> BloomFilterData:
        """Bloom data for ``key`` (a filter's ``"<group>#<topic>"``)."""
        return BloomFilterData(self.m, self.calc_bit_positions(key))

    def is_valid(self, data: BloomFilterData | None) -> bool:
        """Whether ``data`` was made for this filter's size (else it must not touch a bitmap)."""
        return data is not None and data.bit_num == self.m and len(data.bit_pos) == self.k

    def new_bits(self) -> bytearray:
        """An empty ``m``-bit map."""
        return bytearray(self.byte_len)

    def _check(self, data: BloomFilterData, bits: bytes | bytearray | memoryview) -> None:
        if not self.is_valid(data):
            raise ValueError(f"bloom filter data {data} does not belong to a filter of k={self.k}, m={self.m}")
        if len(bits) * 8 != self.m:
            raise ValueError(f"bitmap of {len(bits) * 8} bits, the bloom filter has {self.m}")

    def hash_to(self, data: BloomFilterData, bits: bytearray) -> None:
        """Set the positions of ``data`` in ``bits`` (bit p is byte p // 8, mask 1 << p % 8)."""
        self._check(data, bits)
        for p in data.bit_pos:
            bits[p >> 3] |= 1 << (p & 7)

    def is_hit(self, data: BloomFilterData, bits: bytes | bytearray | memoryview) -> bool:
        """Whether all positions of ``data`` are set in ``bits`` (False means: certainly no match)."""
        self._check(data, bits)
        return all(bits[p >> 3] & (1 << (p & 7)) for p in data.bit_pos)

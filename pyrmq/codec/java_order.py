"""The iteration order of Java hash maps and sets of strings.

Apache's NameServer and broker answer some lists in the order a java.util.HashMap or
ConcurrentHashMap iterates, and mqadmin prints them in that order: a client compares outputs line
by line, so pyrmq answers in the same order. A Java hash table iterates bucket by bucket (the
String hashCode spread as ``h ^ (h >>> 16)``, masked by the table's power-of-two capacity) and,
within a bucket, in insertion order.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyrmq.codec.message_props import java_string_hash

__all__ = ["hash_map_order"]

DEFAULT_CAPACITY = 16   # java.util.HashMap's default; it doubles past a load factor of 0.75


def _spread(key: str) -> int:
    h = java_string_hash(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


def hash_map_order(keys: Iterable[str], capacity: int = DEFAULT_CAPACITY) -> list[str]:
    """``keys`` (in insertion order) as a Java hash map created with ``capacity`` buckets (a power
    of two) iterates them once they are all in; the table doubles as Java's does."""
    ordered = list(keys)
    while len(ordered) > capacity * 3 // 4:
        capacity *= 2
    mask = capacity - 1
    return sorted(ordered, key=lambda key: _spread(key) & mask)   # stable: insertion order within a bucket

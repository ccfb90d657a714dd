"""Remote address patterns as Apache RocketMQ's ACL writes them (``globalWhiteRemoteAddresses``,
an account's ``whiteRemoteAddress``), also used by the NameServer's write allow-list.

The forms Apache 4.9 accepts (``RemoteAddressStrategyFactory``):

- blank: matches nothing; ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: matches every address
- one address: ``192.168.0.1``, ``2001:db8::1``
- a set: ``192.168.0.1,192.168.0.2`` or ``192.168.0.{1,2,3}`` (the last group in braces)
- ranges: ``192.168.0.*``, ``192.168.*.*``, ``192.168.0.1-10``, ``2001:db8::1-ff``, ``2001:db8::*``

A pattern that does not parse is an ``AddressPatternError`` naming it, so a broken file is
refused as a whole. One deliberate difference: Apache looks only at the groups up to the first
wildcard and ignores the rest (``10.10.1-5.7`` also admits ``10.10.3.99``); here every group of a
range pattern must match, so a pattern never admits more than it says.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Protocol

__all__ = ["AddressPattern", "AddressPatternError", "parse_address_pattern", "remote_host"]

_ANY_FORMS = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})
_IPV4_GROUPS, _IPV4_MAX = 4, 255
_IPV6_GROUPS, _IPV6_MAX = 8, 0xFFFF


class AddressPatternError(ValueError):
    """A white address pattern that cannot be used; the message quotes it."""


class AddressPattern(Protocol):
    def matches(self, host: str) -> bool:
        """Whether the peer host (as ``remote_host`` returns it) is admitted."""
        ...


def remote_host(remote_addr: str) -> str:
    """The host of a channel's ``host:port`` (``[v6]:port`` for IPv6), without the port; an
    IPv4-mapped IPv6 address (a dual-stack listener) as the IPv4 address it carries."""
    host = remote_addr.rsplit(":", 1)[0] if ":" in remote_addr else remote_addr
    host = host.removeprefix("[").removesuffix("]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


@functools.lru_cache(maxsize=4096)   # a broker sees the same few peers over and over
def _canonical(host: str) -> str | None:
    """One spelling per address: IPv4 dotted, IPv6 fully expanded; None for a non-address."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        return str(address.ipv4_mapped) if address.ipv4_mapped is not None else address.exploded
    return str(address)


@dataclass(frozen=True)
class NoAddress:
    """A blank pattern: no address is white."""

    def matches(self, host: str) -> bool:
        return False


@dataclass(frozen=True)
class AnyAddress:
    def matches(self, host: str) -> bool:
        return True


@dataclass(frozen=True)
class AddressSet:
    """One address or a set of them, compared in canonical form."""

    members: frozenset[str]

    def matches(self, host: str) -> bool:
        return _canonical(host) in self.members


@dataclass(frozen=True)
class AddressRange:
    """Per group an inclusive (low, high) range: 4 for IPv4, 8 for IPv6."""

    groups: tuple[tuple[int, int], ...]

    def matches(self, host: str) -> bool:
        values = _group_values(host)
        if values is None or len(values) != len(self.groups):
            return False
        return all(low <= value <= high for value, (low, high) in zip(values, self.groups))


@functools.lru_cache(maxsize=4096)
def _group_values(host: str) -> tuple[int, ...] | None:
    canonical = _canonical(host)
    if canonical is None:
        return None
    if ":" in canonical:
        return tuple(int(g, 16) for g in canonical.split(":"))
    return tuple(int(g) for g in canonical.split("."))


def parse_address_pattern(text: str | None) -> AddressPattern:
    """The pattern for one ``whiteRemoteAddress`` / ``globalWhiteRemoteAddresses`` entry."""
    if text is None or not text.strip():
        return NoAddress()
    if text in _ANY_FORMS:
        return AnyAddress()
    if text.endswith("}"):
        brace = text.find("{")
        if brace < 0 or not text[:brace].endswith((".", ":")):
            raise AddressPatternError(f"address pattern {text!r}: braces must hold the last group, as 192.168.0.{{1,2}}")
        return _address_set(text, [text[:brace] + item for item in text[brace + 1:-1].split(",") if item])
    if "," in text:
        return _address_set(text, [item for item in text.split(",") if item])
    if "*" in text or "-" in text:
        return _address_range(text)
    return _address_set(text, [text])


def _address_set(text: str, items: list[str]) -> AddressSet:
    members = set()
    for item in items:
        canonical = _canonical(item)
        if canonical is None:
            raise AddressPatternError(f"address pattern {text!r}: {item!r} is not an IP address")
        members.add(canonical)
    if not members:
        raise AddressPatternError(f"address pattern {text!r} names no address")
    return AddressSet(frozenset(members))


def _address_range(text: str) -> AddressRange:
    if ":" in text:
        head, sep, tail = text.partition("::")
        left = head.split(":") if head else []
        right = tail.split(":") if tail else []
        if sep:
            missing = _IPV6_GROUPS - len(left) - len(right)
            if missing < 1:
                raise AddressPatternError(f"address pattern {text!r}: too many groups around '::'")
            parts = left + ["0"] * missing + right
        else:
            parts = left
        return AddressRange(_groups(text, parts, _IPV6_GROUPS, _IPV6_MAX, 16))
    return AddressRange(_groups(text, text.split("."), _IPV4_GROUPS, _IPV4_MAX, 10))


_DIGITS = {10: re.compile(r"[0-9]{1,3}"), 16: re.compile(r"[0-9a-fA-F]{1,4}")}


def _groups(text: str, parts: list[str], count: int, top: int, base: int) -> tuple[tuple[int, int], ...]:
    if len(parts) != count:
        raise AddressPatternError(f"address pattern {text!r}: expected {count} groups, found {len(parts)}")

    def number(digits: str) -> int:
        if not _DIGITS[base].fullmatch(digits):
            raise AddressPatternError(f"address pattern {text!r}: bad group {part!r}")
        return int(digits, base)

    groups = []
    for part in parts:
        if part == "*":
            low, high = 0, top
        elif "-" in part:
            first, _, last = part.partition("-")
            low, high = number(first), number(last)
        else:
            low = high = number(part)
        if not low <= high <= top:
            raise AddressPatternError(f"address pattern {text!r}: group {part!r} is not an ascending range "
                                      f"within 0-{top if base == 10 else 'ffff'}")
        groups.append((low, high))
    return tuple(groups)

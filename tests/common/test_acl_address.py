"""Apache's white remote address patterns."""

from __future__ import annotations

import pytest

from pyrmq.common.acl.address import AddressPatternError, parse_address_pattern, remote_host

CASES = [
    # pattern, admitted, refused
    ("*", ["1.2.3.4", "::1"], []),
    ("*.*.*.*", ["10.0.0.1"], []),
    ("", [], ["127.0.0.1"]),
    (None, [], ["127.0.0.1"]),
    ("192.168.0.1", ["192.168.0.1"], ["192.168.0.2", "192.168.0.10"]),
    ("192.168.0.1,192.168.0.2", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
    ("192.168.1.{1,2,3}", ["192.168.1.1", "192.168.1.3"], ["192.168.1.4", "192.168.2.1"]),
    ("10.10.103.*", ["10.10.103.0", "10.10.103.255"], ["10.10.104.1", "110.10.103.1"]),
    ("192.168.*.*", ["192.168.7.9"], ["192.169.0.1"]),
    ("192.168.0.1-10", ["192.168.0.1", "192.168.0.10"], ["192.168.0.11", "192.168.0.0"]),
    ("10.10.1-5.*", ["10.10.3.99"], ["10.10.6.1"]),
    ("10.10.1-5.7", ["10.10.3.7"], ["10.10.3.99"]),          # Apache ignores the 7; we do not
    ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["::2", "127.0.0.1"]),
    ("2001:db8::1-ff", ["2001:db8::1", "2001:db8::ff"], ["2001:db8::100", "2001:db9::1"]),
    ("2001:db8::*", ["2001:db8::abcd"], ["2001:db8::1:0"]),
    ("2::ac5:78:1-200:*", ["2::ac5:78:150:1"], ["2::ac5:78:201:1"]),
    ("2001:db8::{1,2}", ["2001:db8::2"], ["2001:db8::3"]),
]


@pytest.mark.parametrize(("pattern", "admitted", "refused"), CASES)
def test_pattern_matches(pattern, admitted, refused):
    parsed = parse_address_pattern(pattern)
    for host in admitted:
        assert parsed.matches(host), (pattern, host)
    for host in refused:
        assert not parsed.matches(host), (pattern, host)


@pytest.mark.parametrize("pattern", ["10.0.0", "10.0.0.256", "10.0.0.5-1", "10.0.0.-5", "10.0.*", "abc",
                                     "10.0.0.{1,x}", "10.0.0.1,foo", "10.0.0.1_0-3", "1:2:3:4:5:6:7:8::*"])
def test_bad_patterns_are_refused(pattern):
    with pytest.raises(AddressPatternError):
        parse_address_pattern(pattern)


def test_remote_host():
    assert remote_host("127.0.0.1:5000") == "127.0.0.1"
    assert remote_host("[::1]:5000") == "::1"
    assert remote_host("[::ffff:10.1.2.3]:5000") == "10.1.2.3"

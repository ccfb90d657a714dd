"""inflate_body: the one inflation of compressed message bodies (pyrmq.client, FilterServer filters,
the Spark store readers)."""

from __future__ import annotations

import zlib

import lz4.frame
import pytest
import zstandard

from pyrmq.codec.body_compression import BodyInflateError, inflate_body


def test_inflate_by_sys_flag():
    body = b"x" * 5000
    assert inflate_body(zlib.compress(body), 0x1, 1 << 20) == body          # pre-4.9.7: zlib, bit 0 only
    assert inflate_body(zlib.compress(body), 0x301, 1 << 20) == body
    assert inflate_body(lz4.frame.compress(body), 0x101, 1 << 20) == body
    assert inflate_body(zstandard.ZstdCompressor().compress(body), 0x201, 1 << 20) == body
    assert inflate_body(memoryview(body), 0x0, 1 << 20) == body              # not compressed: bytes back
    assert inflate_body(body, 0x300, 1 << 20) == body                       # type bits without the flag


@pytest.mark.parametrize("data, sys_flag", [
    (b"not zlib", 0x301),
    (b"not lz4", 0x101),
    (b"zstd", 0x201),
    (b"x", 0x401),                                      # type 4 names no codec
    (zlib.compress(bytes(600))[:-6], 0x301),            # truncated streams, though under the limit
    (lz4.frame.compress(bytes(600))[:-6], 0x101),
    (zstandard.ZstdCompressor().compress(bytes(600))[:-3], 0x201),
    (zstandard.ZstdCompressor().compress(bytes(4096)), 0x201),
    (zlib.compress(bytes(4096)), 0x301),               # past the limit below
    (lz4.frame.compress(bytes(4096)), 0x101),
])
def test_refused(data, sys_flag):
    with pytest.raises(BodyInflateError):
        inflate_body(data, sys_flag, 1024)

"""Inflating a compressed message body by its sysFlag, for every reader that hands bodies on as
the producer gave them (pyrmq.client, the FilterServer's filters, the Spark store readers).

COMPRESSED_FLAG marks a compressed body; sysFlag bits 8-10 name the codec (LZ4 frame, zstd
frame, zlib; 0 is the pre-4.9.7 zlib-only form, which 5.x clients still read as zlib). The output
is bounded: a body that inflates past ``limit`` is refused while inflating, never allocated whole,
and a truncated stream is refused rather than handed on short.
"""

from __future__ import annotations

import io
import zlib

import lz4.frame
import zstandard

from pyrmq.codec.message import MessageSysFlag


class BodyInflateError(ValueError):
    """A compressed body that cannot be given back: corrupt, truncated, too large, or an unknown codec."""


def is_compressed(sys_flag: int) -> bool:
    return bool(sys_flag & MessageSysFlag.COMPRESSED_FLAG)


def inflate_body(body: bytes | memoryview, sys_flag: int, limit: int) -> bytes:
    """``body`` as the producer gave it (as bytes, unchanged when not compressed); BodyInflateError otherwise."""
    if not is_compressed(sys_flag):
        return bytes(body)
    kind = sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK
    try:
        if kind in (0, MessageSysFlag.COMPRESSION_ZLIB_TYPE):
            return _inflate_zlib(body, limit)
        if kind == MessageSysFlag.COMPRESSION_LZ4_TYPE:
            return _inflate_lz4(body, limit)
        if kind == MessageSysFlag.COMPRESSION_ZSTD_TYPE:
            return _inflate_zstd(body, limit)
    except BodyInflateError:
        raise
    except (zlib.error, RuntimeError, zstandard.ZstdError) as exc:  # lz4.frame raises RuntimeError
        raise BodyInflateError(f"compressed body cannot be inflated: {exc}") from None
    raise BodyInflateError(f"unsupported body compression type {kind >> 8} (sysFlag {sys_flag:#x})")


def _inflate_zlib(body: bytes | memoryview, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    out = inflater.decompress(body, limit)
    if inflater.unconsumed_tail:
        raise BodyInflateError("compressed body inflates past the limit")
    if not inflater.eof:
        raise BodyInflateError("compressed body is truncated")
    return out


def _inflate_lz4(body: bytes | memoryview, limit: int) -> bytes:
    inflater = lz4.frame.LZ4FrameDecompressor()
    out: bytes = inflater.decompress(bytes(body), limit)
    if not inflater.eof:
        # Either output was cut at the limit or the frame ends early: neither is the producer's body.
        raise BodyInflateError("compressed body inflates past the limit or is truncated")
    return out


def _inflate_zstd(body: bytes | memoryview, limit: int) -> bytes:
    data = bytes(body)
    # Bounded first, with a stream reader: ZstdDecompressor.decompress allocates whatever content
    # size the frame header claims, and decompressobj has no output cap. The reader cannot tell a
    # truncated frame from a whole one, so a frame known to fit is inflated again by decompressobj,
    # whose eof can (zstd bodies are rare: only 5.x clients set compressType=ZSTD).
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=False) as reader:
        if len(reader.read(limit + 1)) > limit:
            raise BodyInflateError("compressed body inflates past the limit")
    inflater = zstandard.ZstdDecompressor().decompressobj()
    out: bytes = inflater.decompress(data)
    if not inflater.eof:
        raise BodyInflateError("compressed body is truncated")
    return out

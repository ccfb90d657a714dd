"""Inflating compressed message bodies by their sysFlag bits (message.md §6).

A 4.x Java producer deflates bodies of 4 KiB or more with zlib and sets COMPRESSED_FLAG; 5.x
clients also write the codec into bits 8-10 (LZ4 frame, zstd frame, zlib). Type 0 with the flag
is the pre-5.x zlib form.
"""

from __future__ import annotations

import zlib

from pyrmq.codec.message import MessageSysFlag

# Cap on an inflated body, so a crafted record cannot exhaust a Spark executor's memory. Four
# times the broker's largest accepted message (maxMessageSize, 4 MiB) leaves room for any real
# compression ratio of a legal body.
MAX_INFLATED_BYTES = 64 * 1024 * 1024


class BodyError(ValueError):
    """A body that claims to be compressed and does not inflate."""


def is_compressed(sys_flag: int) -> bool:
    return bool(sys_flag & MessageSysFlag.COMPRESSED_FLAG)


def inflate(body: bytes | memoryview, sys_flag: int) -> bytes:
    """The uncompressed body; ``body`` itself (as bytes) when the flag is not set."""
    if not is_compressed(sys_flag):
        return bytes(body)
    kind = sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK
    try:
        if kind in (0, MessageSysFlag.COMPRESSION_ZLIB_TYPE):
            d = zlib.decompressobj()
            out = d.decompress(body, MAX_INFLATED_BYTES)
            if d.unconsumed_tail or not d.eof:
                raise BodyError("zlib body is truncated or inflates past the limit")
            return out
        if kind == MessageSysFlag.COMPRESSION_LZ4_TYPE:
            import lz4.frame
            data: bytes = lz4.frame.LZ4FrameDecompressor().decompress(body, MAX_INFLATED_BYTES)
            return data
        if kind == MessageSysFlag.COMPRESSION_ZSTD_TYPE:
            import zstandard
            zd = zstandard.ZstdDecompressor().decompressobj()
            zout: bytes = zd.decompress(bytes(body))
            if len(zout) > MAX_INFLATED_BYTES:
                raise BodyError("zstd body inflates past the limit")
            return zout
    except BodyError:
        raise
    except Exception as exc:  # each codec has its own error family; all mean "does not inflate"
        raise BodyError(f"body does not inflate: {exc}") from exc
    raise BodyError(f"unknown compression type {kind >> 8}")

"""Inflating a compressed message body by its sysFlag, for every reader that hands bodies on as
the producer gave them (pyrmq.client, the FilterServer's filters).

COMPRESSED_FLAG marks a compressed body; sysFlag bits 8-10 name the codec (0 is the pre-4.9.7
zlib-only form). The output is bounded: a body that inflates past ``limit`` is refused, never
allocated.
"""

from __future__ import annotations

import zlib

import lz4.frame

from pyrmq.codec.message import MessageSysFlag


class BodyInflateError(ValueError):
    """A compressed body that cannot be given back: corrupt, too large, or an unknown codec."""


def inflate_body(body: bytes, sys_flag: int, limit: int) -> bytes:
    """``body`` as the producer gave it (unchanged when not compressed); BodyInflateError otherwise."""
    if not sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        return body
    kind = sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK
    try:
        if kind in (0, MessageSysFlag.COMPRESSION_ZLIB_TYPE):
            inflater = zlib.decompressobj()
            out = inflater.decompress(body, limit)
            if inflater.unconsumed_tail:
                raise BodyInflateError("compressed body inflates past the limit")
            return out
        if kind == MessageSysFlag.COMPRESSION_LZ4_TYPE:
            frame: bytes = lz4.frame.decompress(body)
            if len(frame) > limit:
                raise BodyInflateError("compressed body inflates past the limit")
            return frame
    except (zlib.error, RuntimeError) as exc:
        raise BodyInflateError(f"compressed body cannot be inflated: {exc}") from None
    raise BodyInflateError(f"unsupported body compression type {kind >> 8} (sysFlag {sys_flag:#x})")

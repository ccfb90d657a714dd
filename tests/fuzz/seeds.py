"""Seed inputs for the fuzz targets, cut from the captured fixtures (tests/fixtures): real frames
of the Apache 4.9.8 Java client and servers, and the store an Apache 4.9.8 broker wrote."""

from __future__ import annotations

import functools
import struct
import tarfile
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FRAMES_DIR = FIXTURES / "frames"
APACHE_STORE = FIXTURES / "store" / "apache-4.9.8-small.tar.gz"

_PREFIX = struct.Struct(">II")


@dataclass(frozen=True)
class Frame:
    name: str
    data: bytes        # the whole frame, length word included

    @property
    def serialize_type(self) -> int:
        return _PREFIX.unpack_from(self.data)[1] >> 24

    @property
    def header(self) -> bytes:
        _, word = _PREFIX.unpack_from(self.data)
        return self.data[8:8 + (word & 0xFFFFFF)]

    @property
    def body(self) -> bytes:
        _, word = _PREFIX.unpack_from(self.data)
        return self.data[8 + (word & 0xFFFFFF):]


@functools.cache
def frames() -> tuple[Frame, ...]:
    return tuple(Frame(p.stem, p.read_bytes()) for p in sorted(FRAMES_DIR.glob("*.bin")))


def frame(name: str) -> Frame:
    return next(f for f in frames() if f.name == name)


def request_frames() -> list[Frame]:
    """What clients and brokers send to a server: the network fuzzer's seeds."""
    return [f for f in frames() if f.name.startswith("client_") or f.name.startswith("broker_register_broker")]


@functools.cache
def apache_store_files() -> dict[str, bytes]:
    """Path inside the store root (``commitlog/00000000000000000000``...) -> bytes."""
    out: dict[str, bytes] = {}
    with tarfile.open(APACHE_STORE) as tar:
        for member in tar.getmembers():
            if member.isfile():
                extracted = tar.extractfile(member)
                assert extracted is not None
                out[member.name.removeprefix("store/")] = extracted.read()
    return out


def apache_commit_log_head(size: int) -> bytes:
    return apache_store_files()["commitlog/00000000000000000000"][:size]


def json_documents() -> list[bytes]:
    """fastjson text as Java writes it: JSON bodies of the frames and the config files."""
    bodies = [f.body for f in frames() if f.body[:1] == b"{"]
    configs = [data for path, data in apache_store_files().items() if path.startswith("config/")]
    return bodies + configs

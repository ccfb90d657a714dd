"""Remoting frames with a JSON header over a plain socket that stays open: the lightweight clients
of the idle and namesrv rows (many requests per connection, several in flight), where
compat_tests.servers.remoting_call (one connection per call) would measure connection set-up."""

from __future__ import annotations

import json
import socket
import struct

from compat_tests.servers import PROBE_CLIENT_VERSION

# The same bound as the probe's: nothing these rows ask for comes near it.
MAX_FRAME_BYTES = 16 * 1024 * 1024


def request_frame(code: int, ext_fields: dict[str, str], opaque: int, body: bytes = b"") -> bytes:
    header = json.dumps({"code": code, "extFields": ext_fields, "flag": 0, "language": "JAVA",
                         "opaque": opaque, "serializeTypeCurrentRPC": "JSON",
                         "version": PROBE_CLIENT_VERSION}).encode()
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


PULL_MESSAGE = 11


def pull_frame(group: str, topic: str, queue_id: int, offset: int, opaque: int, *, sys_flag: int,
               suspend_ms: int = 0, sub_version: int = 0, max_nums: int = 32) -> bytes:
    """PULL_MESSAGE of ``max_nums`` messages with the subscription ``*`` (TAG) in the request."""
    return request_frame(PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag), "commitOffset": "0",
        "suspendTimeoutMillis": str(suspend_ms), "subscription": "*", "subVersion": str(sub_version),
        "expressionType": "TAG"}, opaque)


class FrameReader:
    """Reads whole response frames from a blocking socket: (header dict, body bytes)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def _fill(self, n: int) -> None:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self.buf += chunk

    def next_frame(self) -> tuple[dict, bytes]:
        self._fill(4)
        (total,) = struct.unpack_from(">I", self.buf)
        if not 4 <= total <= MAX_FRAME_BYTES:
            raise ConnectionError(f"implausible frame length {total}")
        self._fill(4 + total)
        (mark,) = struct.unpack_from(">I", self.buf, 4)
        header_len = mark & 0xFFFFFF
        if mark >> 24 != 0:
            raise ConnectionError(f"response header is not JSON (serialize type {mark >> 24})")
        header = json.loads(bytes(self.buf[8:8 + header_len]))
        body = bytes(self.buf[8 + header_len:4 + total])
        del self.buf[:4 + total]
        return header, body

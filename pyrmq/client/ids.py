"""Identifiers a Java client makes: the client id (``ip@pid#nanotime``, how brokers and mqadmin
tell clients apart) and the message UNIQ_KEY (``MessageClientIDSetter``: ip, pid, a per-process
random, milliseconds since the start of the month, a counter), from which brokers and tools read
the approximate send time."""

from __future__ import annotations

import datetime
import itertools
import os
import random
import socket
import struct
import threading
import time

from pyrmq.codec.message import host_to_bytes

_COUNTER_LOCK = threading.Lock()
_COUNTER = itertools.count()


def local_ip() -> str:
    """The address this host reaches the network from (no packet is sent: a UDP connect only picks
    the route), loopback when there is none; Java's RemotingUtil prefers a non-loopback address too."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("192.0.2.1", 9))   # TEST-NET-1: never routed anywhere real
            ip: str = sock.getsockname()[0]
            return ip
    except OSError:
        return "127.0.0.1"


def make_client_id(ip: str, instance_name: str | None = None) -> str:
    """``ip@instance``; the default instance is ``pid#nanotime`` as Java 4.9's changeInstanceNameToPID."""
    return f"{ip}@{instance_name or f'{os.getpid()}#{time.monotonic_ns()}'}"


class UniqIdGenerator:
    """Makes UNIQ_KEY values in Java's layout: 4 or 16 address bytes, 2 pid bytes, 4 bytes that
    Java fills with its class loader's hash (random here), 4 bytes of milliseconds since the start
    of the local month, 2 counter bytes; upper-case hex."""

    def __init__(self, ip: str) -> None:
        fixed = host_to_bytes(ip) + struct.pack(">HI", os.getpid() & 0xFFFF, random.getrandbits(32))
        self._prefix = fixed.hex().upper()
        self._month_start_ms, self._next_month_ms = _month_bounds(time.time())

    def next_id(self) -> str:
        now_ms = int(time.time() * 1000)
        with _COUNTER_LOCK:
            if now_ms >= self._next_month_ms:
                self._month_start_ms, self._next_month_ms = _month_bounds(now_ms / 1000)
            counter = next(_COUNTER) & 0xFFFF
        diff = max(0, now_ms - self._month_start_ms) & 0xFFFFFFFF
        return self._prefix + struct.pack(">IH", diff, counter).hex().upper()


def _month_bounds(now_s: float) -> tuple[int, int]:
    """Milliseconds of the start of this local month and of the next one."""
    start = datetime.datetime.fromtimestamp(now_s).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (start + datetime.timedelta(days=32)).replace(day=1)
    return int(start.timestamp() * 1000), int(following.timestamp() * 1000)

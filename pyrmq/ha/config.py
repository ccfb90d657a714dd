"""The replication settings both sides read (broker.conf keys; Apache keeps them in its
MessageStoreConfig, under the same names)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HAConfig:
    """The replication settings of broker.conf (Apache's MessageStoreConfig keys), in ms and bytes."""
    listen_address: str
    listen_port: int
    send_heartbeat_interval: int = 5000
    housekeeping_interval: int = 20_000
    transfer_batch_size: int = 32 * 1024
    slave_fallbehind_max: int = 256 * 1024 * 1024

"""An in-process NameServer + Broker on free loopback ports with a temporary store."""

from __future__ import annotations

import random
import socket
from dataclasses import dataclass

import pytest

from pyrmq.broker.config import build_config
from pyrmq.broker.controller import BrokerController
from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController
from pyrmq.remoting.client import RemotingClient


def free_port(span: int = 1) -> int:
    """A port p such that p-2 .. p+span are free now (the broker also binds p-2). Drawn below the
    kernel's ephemeral range (32768-60999), where a client connection cannot take it between this
    check and the server's bind."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        try:
            socks = []
            for p in range(port - 2, port + span + 1):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no free port range")


@dataclass
class Cluster:
    namesrv: NamesrvController
    broker: BrokerController
    client: RemotingClient
    namesrv_addr: str
    broker_addr: str


def broker_properties(tmp_path, namesrv_port: int, **overrides) -> dict[str, str]:
    props = {"brokerName": "broker-a", "listenPort": str(free_port()), "brokerIP1": "127.0.0.1",
             "bindAddress": "127.0.0.1", "storePathRootDir": str(tmp_path / "store"),
             "mappedFileSizeCommitLog": str(1024 * 1024), "mappedFileSizeConsumeQueue": str(20 * 1000),
             "namesrvAddr": f"127.0.0.1:{namesrv_port}"}
    props.update({k: str(v) for k, v in overrides.items()})
    return props


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {}


@pytest.fixture
async def cluster(nursery, tmp_path, broker_overrides):
    namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                              kv_config_path=str(tmp_path / "kv.json")))
    await nursery.start(namesrv.run)
    loaded = build_config(broker_properties(tmp_path, namesrv.port, **broker_overrides))
    broker = BrokerController(loaded)
    await nursery.start(broker.run)
    async with RemotingClient() as client:
        yield Cluster(namesrv, broker, client, f"127.0.0.1:{namesrv.port}", loaded.broker.broker_addr)
    broker.stop()
    # Bounded by pytest-timeout's real seconds, not a trio deadline: under autojump_clock one would
    # expire at once while the stop waits on its worker threads (persist, flush).
    await broker.wait_stopped()
    namesrv.server.close()

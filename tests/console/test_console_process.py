"""`pyrmq standalone` with consolePort: the real process serves the console on loopback, and the
console finds its broker through the standalone's NameServer."""

from __future__ import annotations

import json
import urllib.request

import trio

from pyrmq.remoting.client import RemotingClient
from tests.broker.conftest import free_port
from tests.test_process import standalone   # noqa: F401  (the fixture)


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


async def test_standalone_serves_the_console_on_loopback(standalone):   # noqa: F811
    port = free_port()
    server = standalone(consolePort=port)
    server.start()
    async with RemotingClient() as client:
        await server.wait_ready(client)
    status, page = await trio.to_thread.run_sync(_get, f"http://127.0.0.1:{port}/")
    assert status == 200 and b"<title>pyrmq console</title>" in page
    status, body = await trio.to_thread.run_sync(_get, f"http://127.0.0.1:{port}/api/cluster")
    [broker] = json.loads(body)["brokers"]
    assert (broker["brokerName"], broker["addr"], broker["role"]) == ("broker-a", server.broker_addr, "MASTER")
    assert "console listening on 127.0.0.1:%d" % port in server.log.read_text()
    assert server.stop() == 0

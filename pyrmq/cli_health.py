"""``pyrmq health [--broker HOST:PORT] [--namesrv HOST:PORT]``: is the server up and answering?

Asks over the remoting protocol, as a client would: a broker for its runtime info
(GET_BROKER_RUNTIME_INFO, what ``mqadmin brokerStatus`` asks), a NameServer for the cluster info
(GET_BROKER_CLUSTER_INFO, what ``mqadmin clusterList`` asks). Exit 0 when every one asked answers
SUCCESS within the timeout, 1 otherwise with one line per failure: the container image's
HEALTHCHECK, and a probe for any supervisor. Works against Apache RocketMQ servers too.
"""

from __future__ import annotations

import trio

from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.channel import ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.client import RemotingClient

DEFAULT_TIMEOUT_S = 3.0


async def _ask(client: RemotingClient, role: str, addr: str, code: int, timeout: float) -> str | None:
    try:
        response = await client.invoke(addr, make_request(code), timeout=timeout)
    except (OSError, RemotingTimeoutError, ChannelClosedError) as exc:
        return f"{role} {addr}: {exc or type(exc).__name__}"
    if response.code != ResponseCode.SUCCESS:
        return f"{role} {addr}: answered {response.code} {response.remark or ''}".rstrip()
    return None


async def check(broker: str | None, namesrv: str | None, timeout: float = DEFAULT_TIMEOUT_S) -> list[str]:
    """The failures (empty when healthy) of the servers given."""
    asks = [(role, addr, code) for role, addr, code in (("broker", broker, RequestCode.GET_BROKER_RUNTIME_INFO),
                                                        ("namesrv", namesrv, RequestCode.GET_BROKER_CLUSTER_INFO))
            if addr]
    failures: list[str] = []
    async with RemotingClient() as client:
        for role, addr, code in asks:
            failure = await _ask(client, role, addr, code, timeout)
            if failure:
                failures.append(failure)
    return failures


def run(broker: str | None, namesrv: str | None, timeout: float = DEFAULT_TIMEOUT_S) -> list[str]:
    return trio.run(check, broker, namesrv, timeout)

"""``pyrmq transactions -b HOST:PORT``: the operator's view of a broker's pending transactions.

Asks the broker for its runtime info (GET_BROKER_RUNTIME_INFO, as ``mqadmin brokerStatus``) and
prints the half messages not yet committed nor rolled back, per producer group, from pyrmq's
``pyrmqTransactionHalfPending`` key. A broker without that key (Apache) is said so.
"""

from __future__ import annotations

import json

import trio

from pyrmq.broker.admin_processor import TRANSACTION_PENDING_KEY
from pyrmq.codec.admin_bodies import KVTable
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient

TIMEOUT_S = 10.0


async def fetch_pending(addr: str) -> dict[str, int] | None:
    """Producer group -> pending half messages; None when the broker does not report them."""
    async with RemotingClient() as client:
        response = await client.invoke(addr, make_request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=TIMEOUT_S)
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"GET_BROKER_RUNTIME_INFO answered {response.code}: {response.remark}")
    table = KVTable.decode(bytes(response.body or b"{}")).table
    raw = table.get(TRANSACTION_PENDING_KEY)
    return None if raw is None else {str(k): int(v) for k, v in json.loads(raw).items()}


def format_pending(pending: dict[str, int] | None) -> str:
    if pending is None:
        return "the broker does not report pending transactions (not pyrmq?)\n"
    lines = [f"{'producer group':40} pending half messages"]
    lines += [f"{group:40} {count}" for group, count in sorted(pending.items())]
    lines.append(f"{'total':40} {sum(pending.values())}")
    return "\n".join(lines) + "\n"


def run(addr: str) -> str:
    return format_pending(trio.run(fetch_pending, addr))

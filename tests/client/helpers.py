"""Test helpers for pyrmq.client: topics made on the broker and waited for in the NameServer, and
a broker check that watches (and may refuse) the requests the client sends."""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import RequestError


async def create_topic(cluster, topic: str, queues: int = 4, broker_addr: str | None = None) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker (the cluster's, or ``broker_addr``), then wait until
    the NameServer routes it there."""
    broker_addr = broker_addr or cluster.broker_addr
    resp = await cluster.client.invoke(broker_addr, make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}))
    assert resp.code == 0, resp.remark
    with trio.fail_after(5):
        while True:
            route = await cluster.client.invoke(cluster.namesrv_addr, make_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
            if route.code == 0 and broker_addr.encode() in route.body:
                return
            await trio.sleep(0.02)


@dataclass
class Watch:
    """Records every request of ``codes`` the broker gets; refuses the first ``refuse`` of them
    with ``refuse_code`` (a broker under flow control answers SYSTEM_BUSY this way)."""

    codes: frozenset[int]
    refuse: int = 0
    refuse_code: int = 2
    seen: list[RemotingCommand] = field(default_factory=list)

    def __call__(self, channel: Channel, request: RemotingCommand) -> None:
        if request.code not in self.codes:
            return
        self.seen.append(request)
        if self.refuse > 0:
            self.refuse -= 1
            raise RequestError(self.refuse_code, "[REJECTREQUEST]system busy, start flow control for a while")


def watch(cluster, *codes: int, refuse: int = 0, refuse_code: int = 2) -> Watch:
    w = Watch(frozenset(codes), refuse, refuse_code)
    cluster.broker.processors.add_check(w)
    return w

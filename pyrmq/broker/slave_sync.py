"""A slave's copy of its master's config tables (Apache's SlaveSynchronize).

Every ``SYNC_INTERVAL_S`` after a first wait of ``FIRST_DELAY_S`` a SLAVE asks the master it
learnt from its NameServer registration (``registration.master_addr``; none, or its own
address, means no round) for four tables over remoting and applies them as Apache does:

| request | applied |
|---|---|
| GET_ALL_TOPIC_CONFIG (21) | topics replaced, only when the body's dataVersion differs from the slave's |
| GET_ALL_CONSUMER_OFFSET (43) | merged: each ``topic@group`` of the master replaces the slave's |
| GET_ALL_DELAY_OFFSET (45) | delayOffset.json replaced |
| GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) | groups replaced, only when the dataVersion differs |

Each table is written through the broker's config persister (off the event loop).  Each of the
four runs under its own ServiceGuard, so a master that cannot answer one (an older broker, a
body that does not parse) leaves the others going and is logged once, as Apache logs each sync's
exception and carries on.

One more read, pyrmq's own: the master's GET_BROKER_RUNTIME_INFO ``commitLogMaxOffset``, so that
the slave's runtime info can show how far it is behind (``masterOffset``; Apache 4.9.x reports no
HA figure in runtime info, see docs/HA.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from pyrmq.broker.offsets_and_groups import SubscriptionGroupConfig
from pyrmq.broker.topic_config import TopicConfig
from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import KVTable
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.common.guard import ServiceGuard
from pyrmq.remoting.client import RemotingClient

if TYPE_CHECKING:
    from pyrmq.broker.config_table import VersionedConfigTable
    from pyrmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

FIRST_DELAY_S = 3.0
SYNC_INTERVAL_S = 10.0
# Apache's BrokerOuterAPI waits 3 s for each of these answers.
REQUEST_TIMEOUT_S = 3.0


class SyncError(Exception):
    """The master refused a request or sent a body that is not the table asked for."""


def _object(body: bytes | None, what: str) -> dict[str, Any]:
    obj = fastjson.loads(body or b"")
    if not isinstance(obj, dict):
        raise SyncError(f"{what}: the body is not a JSON object")
    return obj


def _version(obj: dict[str, Any]) -> tuple[int, int]:
    version = obj.get("dataVersion")
    if not isinstance(version, dict):
        raise SyncError("no dataVersion in the body")
    return fastjson.int_member(version.get("counter", 0)), fastjson.int_member(version.get("timestamp", 0))


class SlaveSynchronize:
    """The sync service of one SLAVE broker; ``run`` is its task (started by the controller)."""

    def __init__(self, ctl: BrokerController) -> None:
        self.ctl = ctl
        self.rounds = 0                 # rounds that asked a master (statistics, tests)
        self.master_offset = -1         # the master's commitLogMaxOffset at the last round; -1: unknown
        self._guards = {name: ServiceGuard(f"slave config sync ({name}) from the master", log)
                        for name in ("topics", "consumer offsets", "delay offsets", "subscription groups",
                                     "master offset")}

    def master(self) -> str | None:
        """The master to copy from now, or None (not learnt yet, or it is this broker)."""
        addr = self.ctl.registration.master_addr
        if not addr or addr == self.ctl.config.broker_addr:
            return None
        return addr

    async def run(self, client: RemotingClient) -> None:
        await trio.sleep(FIRST_DELAY_S)
        while True:
            await self.sync_all(client)
            await trio.sleep(SYNC_INTERVAL_S)

    async def sync_all(self, client: RemotingClient) -> None:
        master = self.master()
        if master is None:
            return
        self.rounds += 1
        steps = (("topics", self._sync_topics), ("consumer offsets", self._sync_consumer_offsets),
                 ("delay offsets", self._sync_delay_offsets), ("subscription groups", self._sync_groups),
                 ("master offset", self._sync_master_offset))
        for name, step in steps:
            with self._guards[name].round():
                await step(client, master)

    async def _ask(self, client: RemotingClient, master: str, code: int) -> RemotingCommand:
        response = await client.invoke(master, make_request(code), REQUEST_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise SyncError(f"request {code} answered {response.code} {response.remark or ''}".rstrip())
        return response

    def _replace_if_newer(self, manager: VersionedConfigTable[Any], obj: dict[str, Any], member: str,
                          entry_from_json: Any) -> bool:
        """Apache's rule for topics and groups: a different dataVersion replaces the whole table."""
        counter, timestamp = _version(obj)
        mine = manager.data_version
        if (mine.counter, mine.timestamp) == (counter, timestamp):
            return False
        table = obj.get(member)
        if not isinstance(table, dict):
            raise SyncError(f"no {member} in the body")
        entries = {str(name): entry_from_json(entry) for name, entry in table.items()}
        manager.table.clear()
        manager.table.update(entries)
        mine.counter, mine.timestamp = counter, timestamp
        manager.persist_later()
        return True

    async def _sync_topics(self, client: RemotingClient, master: str) -> None:
        response = await self._ask(client, master, RequestCode.GET_ALL_TOPIC_CONFIG)
        obj = _object(response.body, "GET_ALL_TOPIC_CONFIG")
        if self._replace_if_newer(self.ctl.topic_config_manager, obj, "topicConfigTable", TopicConfig.from_json):
            log.info("topic config updated from master %s", master)

    async def _sync_groups(self, client: RemotingClient, master: str) -> None:
        response = await self._ask(client, master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        obj = _object(response.body, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG")
        if self._replace_if_newer(self.ctl.subscription_group_manager, obj, "subscriptionGroupTable",
                                  SubscriptionGroupConfig.from_json):
            log.info("subscription groups updated from master %s", master)

    async def _sync_consumer_offsets(self, client: RemotingClient, master: str) -> None:
        response = await self._ask(client, master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        offsets = self.ctl.consumer_offset_manager
        table = offsets.parse_table(_object(response.body, "GET_ALL_CONSUMER_OFFSET").get("offsetTable") or {})
        offsets.offset_table.update(table)
        offsets.persist_later()

    async def _sync_delay_offsets(self, client: RemotingClient, master: str) -> None:
        request = make_request(RequestCode.GET_ALL_DELAY_OFFSET)
        response = await client.invoke(master, request, REQUEST_TIMEOUT_S)
        # Apache 4.9.7 (and before) answers this request with the table but leaves the code at
        # SYSTEM_ERROR with no remark (fixed in 4.9.8); the table is taken from either.
        if response.code != ResponseCode.SUCCESS and not (
                response.code == ResponseCode.SYSTEM_ERROR and response.remark is None and response.body):
            raise SyncError(f"request {request.code} answered {response.code} {response.remark or ''}".rstrip())
        delay = self.ctl.schedule_service.offsets
        delay.offset_table = delay.parse_table(_object(response.body, "GET_ALL_DELAY_OFFSET").get("offsetTable") or {})
        delay.persist_later()

    async def _sync_master_offset(self, client: RemotingClient, master: str) -> None:
        response = await self._ask(client, master, RequestCode.GET_BROKER_RUNTIME_INFO)
        table = KVTable.decode(response.body or b"").table
        self.master_offset = fastjson.int_member(table.get("commitLogMaxOffset", "-1"))

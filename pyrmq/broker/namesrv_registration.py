"""Keeping every configured NameServer informed (Java BrokerOuterAPI.registerBrokerAll):
REGISTER_BROKER every ``registerNameServerPeriod`` (clamped to 10-60 s) and at once after a
topic change; UNREGISTER_BROKER at shutdown."""

from __future__ import annotations

import logging
import zlib
from typing import TYPE_CHECKING

import trio

from pyrmq.broker.topic_config import is_readable, is_writeable
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.java_order import hash_map_order
from pyrmq.codec.remoting import make_request
from pyrmq.common.guard import ServiceGuard
from pyrmq.remoting.channel import ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.client import RemotingClient

if TYPE_CHECKING:
    from pyrmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

REGISTER_TIMEOUT_S = 6.0
# Apache's TopicConfigManager table: new ConcurrentHashMap(1024), which sizes itself to 2048 buckets.
TOPIC_CONFIG_TABLE_CAPACITY = 2048


class NamesrvRegistration:
    def __init__(self, ctl: BrokerController) -> None:
        self.ctl = ctl
        self._wake = trio.Event()
        self.registrations = 0
        self.master_addr: str | None = None
        # the last body with what it was made of: with 1,000 topics encoding it takes the loop
        # about 0.1 s, and most registrations (every 30 s) send the same body again
        self._body_cache: tuple[tuple[object, ...], bytes] | None = None
        self.bodies_encoded = 0

    def request_register_all(self) -> None:
        self._wake.set()

    def _header(self) -> dict[str, str]:
        config = self.ctl.config
        return {"brokerAddr": config.broker_addr, "brokerId": str(config.broker_id),
                "brokerName": config.broker_name, "clusterName": config.broker_cluster_name,
                "haServerAddr": f"{config.broker_ip2}:{self.ha_port}", "compressed": "false"}

    @property
    def ha_port(self) -> int:
        """The HA port as bound (haListenPort 0 with listenPort 0 takes any free port)."""
        ha_service = getattr(self.ctl, "ha_service", None)
        return ha_service.port if ha_service is not None else self.ctl.config.ha_listen_port

    def _body(self) -> bytes:
        """The REGISTER_BROKER body, encoded again only when what it holds may have changed:
        every change of a topic config moves the table's data version."""
        topics = self.ctl.topic_config_manager
        version = topics.data_version
        made_of = (version.counter, version.timestamp, self.ctl.config.broker_permission,
                   tuple(self.ctl.filter_server_manager.addresses()))
        cached = self._body_cache
        if cached is not None and cached[0] == made_of:
            return cached[1]
        body = self._encode_body()
        self._body_cache = (made_of, body)
        return body

    def _encode_body(self) -> bytes:
        self.bodies_encoded += 1
        topics = self.ctl.topic_config_manager
        # in the order of Apache's topicConfigTable (a ConcurrentHashMap(1024): 2048 buckets),
        # which is the order the NameServer first learns the topics in
        table = {n: topics.table[n].to_json() for n in hash_map_order(topics.table, TOPIC_CONFIG_TABLE_CAPACITY)}
        permission = self.ctl.config.broker_permission
        if not (is_readable(permission) and is_writeable(permission)):
            # Apache: a broker that is not readable and writable registers every topic with its
            # permission, so clients stop sending (or pulling) there
            table = {n: {**c, "perm": permission} for n, c in table.items()}
        # the FilterServers registered with this broker: routes carry them as filterServerTable
        body = {"filterServerList": self.ctl.filter_server_manager.addresses(),
                "topicConfigSerializeWrapper": {"dataVersion": topics.data_version.to_json(),
                                                "topicConfigTable": table}}
        return fastjson.dumps(body).encode()

    async def register_all(self, client: RemotingClient) -> None:
        body = self._body()
        header = self._header()
        header["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)

        async def register(addr: str) -> None:
            try:
                response = await client.invoke(addr, make_request(RequestCode.REGISTER_BROKER, dict(header), body),
                                               REGISTER_TIMEOUT_S)
            except (OSError, trio.TooSlowError, RemotingTimeoutError, ChannelClosedError, ValueError) as exc:
                log.warning("register to NameServer %s failed: %s", addr, exc)
                return
            if response.code != ResponseCode.SUCCESS:
                log.warning("NameServer %s refused registration: %s %s", addr, response.code, response.remark)
                return
            self.registrations += 1
            # A slave learns its master here (Apache: the config sync's masterAddr and, unless
            # haMasterAddress is set, the HA client's haServerAddr).
            ext = response.ext_fields or {}
            if self.ctl.is_slave:
                self.master_addr = ext.get("masterAddr") or None
            ha_client = getattr(self.ctl, "ha_client", None)
            if ha_client is not None:
                ha_client.update_master_address(ext.get("haServerAddr"))

        async with trio.open_nursery() as nursery:
            for addr in self.ctl.config.namesrv_addrs:
                nursery.start_soon(register, addr)

    async def unregister_all(self, client: RemotingClient) -> None:
        header = {k: v for k, v in self._header().items() if k in
                  ("brokerAddr", "brokerId", "brokerName", "clusterName")}
        for addr in self.ctl.config.namesrv_addrs:
            with trio.move_on_after(2):
                try:
                    await client.invoke(addr, make_request(RequestCode.UNREGISTER_BROKER, dict(header)), 2.0)
                except (OSError, trio.TooSlowError, RemotingTimeoutError, ChannelClosedError, ValueError) as exc:
                    log.info("unregister from NameServer %s failed: %s", addr, exc)

    async def run(self, client: RemotingClient, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        period = min(max(self.ctl.config.register_name_server_period, 10_000), 60_000) / 1000
        guard = ServiceGuard("NameServer registration", log)
        with guard.round():
            await self.register_all(client)
        task_status.started()
        while True:
            with trio.move_on_after(period):
                await self._wake.wait()
            self._wake = trio.Event()
            with guard.round():
                await self.register_all(client)

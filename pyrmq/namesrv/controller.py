"""The NameServer role: its config, routing tables, KV store, remoting server and expiry scan."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import trio

from pyrmq.common.guard import ServiceGuard
from pyrmq.common.persister import ConfigPersister
from pyrmq.namesrv.kv_config import KVConfigManager
from pyrmq.namesrv.processor import build_processors
from pyrmq.namesrv.route_info import RouteInfoManager
from pyrmq.namesrv.write_guard import WriteGuard, parse_allow_list
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.server import RemotingServer
from pyrmq.remoting.tls import tls_listener_wrapper
from pyrmq.remoting.tls_config import TlsConfig, is_tls_key, tls_config_from_properties

log = logging.getLogger(__name__)

# Java scans for silent brokers every 10 s after a 5 s initial delay.
SCAN_INITIAL_DELAY_S = 5.0
SCAN_INTERVAL_S = 10.0


@dataclass
class NamesrvConfig:
    listen_port: int = 9876
    bind_address: str = "0.0.0.0"
    kv_config_path: str = field(default_factory=lambda: os.path.join(Path.home(), "namesrv", "kvConfig.json"))
    order_message_enable: bool = False
    # Where Apache would write its config (the -c file, else ~/namesrv/namesrv.properties);
    # reported by GET_NAMESRV_CONFIG, never written: pyrmq keeps runtime changes in memory.
    config_store_path: str = field(
        default_factory=lambda: os.path.join(Path.home(), "namesrv", "namesrv.properties"))
    # The broker.conf keys of the same meaning (serverChannelMaxIdleTimeSeconds,
    # partialFrameTimeoutSeconds); standalone passes the broker's values.
    server_channel_max_idle_time_seconds: int = 120
    partial_frame_timeout_seconds: int = 30
    server_channel_write_timeout_seconds: int = 30
    # pyrmq's own: Apache white address patterns separated by ';'. When set, only peers matching
    # one may send the codes that change routes or KV config (write_guard.py); empty: anyone.
    write_allowed_addresses: str = ""
    # tls.* keys (Apache's system property names), from namesrv.conf or the broker's config.
    tls: TlsConfig = field(default_factory=TlsConfig)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> NamesrvConfig:
        """namesrv.conf with Apache's keys (those pyrmq knows; others are a warning).
        Raises ``ValueError`` (``TlsConfigError`` for the TLS keys)."""
        config = cls(tls=tls_config_from_properties(props, "namesrv.conf"))
        for key, raw in props.items():
            name = _PROPERTY_FIELDS.get(key)
            if name is None:
                if not is_tls_key(key) and key not in APACHE_ONLY_DEFAULTS and key != "rocketmqHome":
                    log.warning("namesrv.conf: unknown key %s ignored", key)
                continue
            current = getattr(config, name)
            try:
                value: object = (raw.strip().lower() == "true" if isinstance(current, bool)
                                 else int(raw) if isinstance(current, int) else raw.strip())
            except ValueError:
                raise ValueError(f"namesrv.conf: bad value {raw!r} for {key}") from None
            setattr(config, name, value)
        return config

    def as_properties(self) -> dict[str, str]:
        """Apache's key set (NamesrvConfig and NettyServerConfig) plus pyrmq's own keys."""
        return {**APACHE_ONLY_DEFAULTS, "rocketmqHome": os.environ.get("ROCKETMQ_HOME", ""),
                "configStorePath": self.config_store_path,
                "listenPort": str(self.listen_port), "kvConfigPath": self.kv_config_path,
                "writeAllowedAddresses": self.write_allowed_addresses,
                "orderMessageEnable": str(self.order_message_enable).lower(),
                "serverChannelMaxIdleTimeSeconds": str(self.server_channel_max_idle_time_seconds),
                "partialFrameTimeoutSeconds": str(self.partial_frame_timeout_seconds),
                "serverChannelWriteTimeoutSeconds": str(self.server_channel_write_timeout_seconds)}


# Apache 4.9.7 NameServer settings pyrmq does not use, with Apache's defaults.
APACHE_ONLY_DEFAULTS = {
    "productEnvName": "center", "clusterTest": "false",
    "serverWorkerThreads": "8", "serverCallbackExecutorThreads": "0", "serverSelectorThreads": "3",
    "serverOnewaySemaphoreValue": "256", "serverAsyncSemaphoreValue": "64", "serverSocketSndBufSize": "0",
    "serverSocketRcvBufSize": "0", "writeBufferHighWaterMark": "0", "writeBufferLowWaterMark": "0",
    "serverSocketBacklog": "1024", "serverPooledByteBufAllocatorEnable": "true", "useEpollNativeSelector": "false",
}
_PROPERTY_FIELDS = {"listenPort": "listen_port", "kvConfigPath": "kv_config_path",
                    "configStorePath": "config_store_path",
                    "orderMessageEnable": "order_message_enable",
                    "serverChannelMaxIdleTimeSeconds": "server_channel_max_idle_time_seconds",
                    "partialFrameTimeoutSeconds": "partial_frame_timeout_seconds",
                    "serverChannelWriteTimeoutSeconds": "server_channel_write_timeout_seconds",
                    "writeAllowedAddresses": "write_allowed_addresses"}


class NamesrvController:
    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config
        self.route_info = RouteInfoManager()
        self.kv_config = KVConfigManager(config.kv_config_path)
        self.config_persister = ConfigPersister()
        self.kv_config.persister = self.config_persister
        processors = build_processors(config=config, routes=self.route_info, kv=self.kv_config,
                                      persister=self.config_persister)
        self.write_guard: WriteGuard | None = None
        if config.write_allowed_addresses.strip():
            self.write_guard = WriteGuard(parse_allow_list([config.write_allowed_addresses]))
            processors.add_check(self.write_guard.check)
        self.server = RemotingServer(processors, config.bind_address, config.listen_port,
                                     name="namesrv", on_channel=self._on_channel,
                                     idle_timeout=config.server_channel_max_idle_time_seconds,
                                     frame_timeout=config.partial_frame_timeout_seconds,
                                     write_timeout=config.server_channel_write_timeout_seconds,
                                     wrap_listener=tls_listener_wrapper(
                                         config.tls, config.server_channel_max_idle_time_seconds, "namesrv"))

    def _on_channel(self, channel: Channel) -> None:
        channel.on_close(self.route_info.on_channel_destroy)

    @property
    def port(self) -> int:
        return self.server.port

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.kv_config.load()
        async with trio.open_nursery() as nursery:
            # when cancelled it still writes what is pending (graceful stop)
            await nursery.start(self.config_persister.run)
            await nursery.start(self.server.serve)
            nursery.start_soon(self._scan_loop)
            log.info("NameServer ready on port %d", self.port)
            task_status.started(self.port)

    async def _scan_loop(self) -> None:
        await trio.sleep(SCAN_INITIAL_DELAY_S)
        guard = ServiceGuard("inactive broker scan", log)
        while True:
            with guard.round():
                for channel in self.route_info.scan_not_active_brokers():
                    if isinstance(channel, Channel):
                        channel.close()
            await trio.sleep(SCAN_INTERVAL_S)

"""The broker's FilterServers (``filterServerNums``): starts them, keeps them running, tracks their
registrations (REGISTER_FILTER_SERVER, 301) and reports them to the NameServers.

Apache's FilterServerManager ran ``sh <rocketmqHome>/bin/startfsrv.sh`` built from configuration
that UPDATE_BROKER_CONFIG could change -- CVE-2023-33246. Here a FilterServer is this interpreter
running ``-m pyrmq filtersrv`` with an argument list fixed when the broker starts: no shell, no
program or path taken from a request or from anything changeable at runtime. Every value passed
is read from broker.conf once, in ``__init__``. A FilterServer that exits is started again at the
next check (every 10 s); one silent for 30 s, or whose connection closed, leaves the list.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

import trio

from pyrmq.broker.config import BrokerConfig
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.common.guard import ServiceGuard
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.headers import required_str

log = logging.getLogger(__name__)

CHECK_PERIOD_S = 10.0
IDLE_DROP_S = 30.0          # Apache's FilterServerManager: FILTER_SERVER_MAX_IDLE_TIME_MILLS
STOP_GRACE_S = 3.0


@dataclass
class _Registered:
    channel: Channel
    last_update: float      # time.monotonic()


@dataclass
class _Slot:
    port: int = 0
    process: trio.Process | None = None
    starts: int = 0


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.replace(",", ";").split(";") if item.strip()]


class FilterServerManager:
    def __init__(self, config: BrokerConfig, on_change: Callable[[], None]) -> None:
        self.broker_name = config.broker_name
        self.broker_id = config.broker_id
        self.on_change = on_change
        self.table: dict[str, _Registered] = {}
        self.slots = [_Slot() for _ in range(max(config.filter_server_nums, 0))]
        # Everything the processes are started with, captured now (start-up configuration only).
        self._local_host = "127.0.0.1" if config.bind_address in ("0.0.0.0", "::", "") else config.bind_address
        self._local_hosts = {config.broker_ip1, config.broker_ip2, self._local_host}
        options = ["--host", config.broker_ip1, "--bind", config.bind_address,
                   "--match-timeout-ms", str(config.filter_match_timeout_millis),
                   "--worker-cpu-seconds", str(config.filter_worker_cpu_seconds),
                   "--worker-memory-mb", str(config.filter_worker_memory_mb)]
        if config.filter_class_upload_enable:
            options.append("--upload-enable")
        for group in _split(config.filter_class_upload_groups):
            options += ["--upload-group", group]
        if config.filter_class_dir:
            options += ["--class-dir", os.path.abspath(config.filter_class_dir)]
        if config.filter_java_classpath:
            options += ["--java-classpath", ":".join(os.path.abspath(p) for p in config.filter_java_classpath.split(":")
                                                     if p)]
        self._options = tuple(options)
        self._executable = sys.executable

    # --- REGISTER_FILTER_SERVER -----------------------------------------------------------

    def process_register(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        addr = required_str(request, "filterServerAddr")
        peer_host = channel.remote_addr.rpartition(":")[0].strip("[]")
        if not (peer_host in self._local_hosts or _is_loopback(peer_host)):
            # Routes send consumers' class sources and pulls to the listed FilterServers: only the
            # ones this broker started (on its own host) may be listed.
            log.warning("REGISTER_FILTER_SERVER of %s from %s refused: not this host", addr, channel.remote_addr)
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"a FilterServer registers from the broker's own host, not {peer_host}")
        known = self.table.get(addr)
        self.table[addr] = _Registered(channel, time.monotonic())
        if known is None or known.channel is not channel:
            log.info("FilterServer %s registered (from %s)", addr, channel.remote_addr)
            channel.on_close(lambda ch: self._drop_channel(ch))
            self.on_change()
        return request.response(ResponseCode.SUCCESS, None,
                                {"brokerName": self.broker_name, "brokerId": str(self.broker_id)})

    def _drop_channel(self, channel: Channel) -> None:
        gone = [addr for addr, info in self.table.items() if info.channel is channel]
        for addr in gone:
            del self.table[addr]
            log.info("FilterServer %s left (connection closed)", addr)
        if gone:
            self.on_change()

    def drop_idle(self, now: float | None = None) -> list[str]:
        now = time.monotonic() if now is None else now
        idle = [addr for addr, info in self.table.items() if now - info.last_update > IDLE_DROP_S]
        for addr in idle:
            info = self.table.pop(addr)
            log.warning("FilterServer %s silent for %.0f s: dropped", addr, now - info.last_update)
            info.channel.close()
        if idle:
            self.on_change()
        return idle

    def addresses(self) -> list[str]:
        """The filterServerList of REGISTER_BROKER."""
        return sorted(self.table)

    # --- the processes --------------------------------------------------------------------

    def argv(self, broker_port: int, slot: _Slot) -> list[str]:
        return [self._executable, "-m", "pyrmq", "filtersrv", "--broker", f"{self._local_host}:{broker_port}",
                "--port", str(slot.port), *self._options, "--parent-pid", str(os.getpid())]

    def pids(self) -> list[int]:
        return [slot.process.pid for slot in self.slots if slot.process is not None and slot.process.returncode is None]

    async def _start(self, broker_port: int, slot: _Slot) -> None:
        if slot.process is not None:
            log.warning("FilterServer on port %d exited with status %s: starting it again", slot.port,
                        slot.process.returncode)
            await slot.process.wait()   # reaped already by poll(); no pipes to close
        if slot.starts % 3 == 2:   # it keeps failing on this port: take another
            slot.port = 0
        if not slot.port:
            slot.port = free_port(self._local_host)
        slot.starts += 1
        slot.process = await trio.lowlevel.open_process(self.argv(broker_port, slot), stdin=subprocess.DEVNULL)
        log.info("FilterServer started: pid %d, port %d", slot.process.pid, slot.port)

    async def run(self, broker_port: int) -> None:
        """Start the FilterServers, restart those that exit, drop silent ones; stop them on cancel."""
        guard = ServiceGuard("FilterServer supervision", log)
        try:
            while True:
                with guard.round():
                    for slot in self.slots:
                        if slot.process is None or slot.process.poll() is not None:
                            await self._start(broker_port, slot)
                    self.drop_idle()
                await trio.sleep(CHECK_PERIOD_S)
        finally:
            with trio.CancelScope(shield=True):
                await self.stop_all()

    async def stop_all(self) -> None:
        running = [slot.process for slot in self.slots if slot.process is not None and slot.process.returncode is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        with trio.move_on_after(STOP_GRACE_S):
            for process in running:
                await process.wait()
        for process in running:
            if process.returncode is None:
                process.kill()
                await process.wait()

"""A FilterServer's settings: all fixed when the process starts (command line), none changeable
at runtime. The broker that starts its FilterServers passes the values it read from broker.conf
at its own start (broker/filter_server_manager.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyrmq.filtersrv.workers import WorkerLimits

# The group a FilterServer pulls with (Apache's FiltersrvController: MixAll.FILTERSRV_CONSUMER_GROUP).
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"


@dataclass
class FiltersrvConfig:
    broker_addr: str                       # host:port of the broker this FilterServer serves
    listen_port: int = 0                   # 0: any free port
    bind_address: str = "0.0.0.0"
    host: str = "127.0.0.1"                # the address registered with the broker (clients connect to it)
    # Uploaded classes (REGISTER_MESSAGE_FILTER_CLASS with source): off unless enabled, and then only
    # for the listed consumer groups.
    upload_enable: bool = False
    upload_groups: frozenset[str] = frozenset()
    # Operator-deployed classes: <Name>.py (clients name them python:<Name>) and
    # <fully.qualified.Name>.java files in this directory, read once at start-up.
    class_dir: str = ""
    # The jars Java filter classes compile and run against (rocketmq-common), ':'-separated.
    java_classpath: list[str] = field(default_factory=list)
    limits: WorkerLimits = field(default_factory=WorkerLimits)
    # Started by a broker: exit when that process is gone.
    parent_pid: int | None = None

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.listen_port}"

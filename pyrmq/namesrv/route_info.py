"""The NameServer's routing tables (Java RouteInfoManager): which brokers live, which topics they
serve, and the rules for registering, expiring and unregistering brokers (spec/codes.md section 7).

Plain data and synchronous methods; the processors and the expiry scan call them from the event
loop, so no locking is needed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pyrmq.codec import namesrv_bodies
from pyrmq.codec.java_order import hash_map_order

log = logging.getLogger(__name__)

MASTER_ID = 0
TOPIC_QUEUE_TABLE_CAPACITY = 1024   # Apache's RouteInfoManager: new HashMap<>(1024)
# A broker that has not re-registered for this long is dropped (Java BROKER_CHANNEL_EXPIRED_TIME).
BROKER_CHANNEL_EXPIRED_MS = 120_000

PERM_READ = 4
PERM_WRITE = 2


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "perm": self.perm,
                "readQueueNums": self.read_queue_nums, "topicSysFlag": self.topic_sys_flag,
                "writeQueueNums": self.write_queue_nums}


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_body(self) -> namesrv_bodies.BrokerData:
        return namesrv_bodies.BrokerData(self.cluster, self.broker_name, dict(self.broker_addrs))

    def to_json(self, standard: bool = False) -> dict[str, Any]:
        obj = self.to_body().to_json()
        if standard:   # standard JSON quotes the broker ids
            obj["brokerAddrs"] = {str(k): v for k, v in self.broker_addrs.items()}
        return obj


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    data_version: dict[str, Any]
    channel: object | None
    ha_server_addr: str


@dataclass(slots=True)
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


def _now_ms() -> int:
    return int(time.time() * 1000)


class RouteInfoManager:
    def __init__(self) -> None:
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # --- registration ---------------------------------------------------------------------

    def register_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str, data_version: dict[str, Any] | None,
                        topic_config_table: dict[str, dict[str, Any]] | None,
                        filter_server_list: list[str], channel: object | None,
                        now_ms: int | None = None) -> RegisterBrokerResult:
        now_ms = _now_ms() if now_ms is None else now_ms
        result = RegisterBrokerResult()
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)

        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster, broker_name)
            self.broker_addr_table[broker_name] = broker_data
        # The same address under another id means a slave became master (or back): replace it.
        for other_id in [i for i, a in broker_data.broker_addrs.items()
                         if a == broker_addr and i != broker_id]:
            del broker_data.broker_addrs[other_id]
        old_addr = broker_data.broker_addrs.get(broker_id)
        broker_data.broker_addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None

        if topic_config_table is not None and broker_id == MASTER_ID:
            if register_first or self._topic_config_changed(broker_addr, data_version):
                for topic_config in topic_config_table.values():
                    self._create_and_update_queue_data(broker_name, topic_config)

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            now_ms, data_version or {}, channel, ha_server_addr)
        if previous is None:
            log.info("new broker registered: %s %s (id %d, cluster %s)", broker_name, broker_addr,
                     broker_id, cluster)

        if filter_server_list:
            self.filter_server_table[broker_addr] = list(filter_server_list)
        else:
            self.filter_server_table.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = broker_data.broker_addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def _topic_config_changed(self, broker_addr: str, data_version: dict[str, Any] | None) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != (data_version or {})

    def _create_and_update_queue_data(self, broker_name: str, topic_config: dict[str, Any]) -> None:
        topic = topic_config["topicName"]
        queue_data = QueueData(broker_name, int(topic_config.get("readQueueNums", 0)),
                               int(topic_config.get("writeQueueNums", 0)),
                               int(topic_config.get("perm", 6)), int(topic_config.get("topicSysFlag", 0)))
        queues = self.topic_queue_table.setdefault(topic, {})
        if queues.get(broker_name) != queue_data:
            if broker_name in queues:
                log.info("topic %s queue data of %s changed", topic, broker_name)
            queues[broker_name] = queue_data

    def is_data_version_changed(self, broker_addr: str, data_version: dict[str, Any]) -> bool:
        return self._topic_config_changed(broker_addr, data_version)

    def update_broker_timestamp(self, broker_addr: str, now_ms: int | None = None) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = _now_ms() if now_ms is None else now_ms

    def broker_data_version(self, broker_addr: str) -> dict[str, Any] | None:
        live = self.broker_live_table.get(broker_addr)
        return None if live is None else live.data_version

    # --- removal --------------------------------------------------------------------------

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        log.info("broker unregistered: %s %s (id %d)", broker_name, broker_addr, broker_id)
        broker_data = self.broker_addr_table.get(broker_name)
        remove_name = False
        if broker_data is not None:
            broker_data.broker_addrs.pop(broker_id, None)
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_name = True
        if remove_name:
            self._remove_broker_name(broker_name, cluster)

    def on_channel_destroy(self, channel: object) -> None:
        """A connection closed: forget the broker that registered through it, if any."""
        for broker_addr, live in list(self.broker_live_table.items()):
            if live.channel is channel:
                self._destroy_broker(broker_addr, "connection closed")

    def scan_not_active_brokers(self, now_ms: int | None = None) -> list[object]:
        """Drop brokers silent for too long; returns their channels so the caller closes them."""
        now_ms = _now_ms() if now_ms is None else now_ms
        channels = []
        for broker_addr, live in list(self.broker_live_table.items()):
            if live.last_update_ms + BROKER_CHANNEL_EXPIRED_MS < now_ms:
                self._destroy_broker(broker_addr, f"no registration for {BROKER_CHANNEL_EXPIRED_MS} ms")
                if live.channel is not None:
                    channels.append(live.channel)
        return channels

    def _destroy_broker(self, broker_addr: str, why: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        log.warning("broker %s removed: %s", broker_addr, why)
        for broker_name, broker_data in list(self.broker_addr_table.items()):
            for broker_id in [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]:
                del broker_data.broker_addrs[broker_id]
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                self._remove_broker_name(broker_name, None)

    def _remove_broker_name(self, broker_name: str, cluster: str | None) -> None:
        for name, brokers in list(self.cluster_addr_table.items()):
            if cluster is not None and name != cluster:
                continue
            brokers.discard(broker_name)
            if not brokers:
                del self.cluster_addr_table[name]
        for topic, queues in list(self.topic_queue_table.items()):
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    def delete_topic(self, topic: str) -> None:
        self.topic_queue_table.pop(topic, None)

    # --- queries --------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str, standard: bool) -> dict[str, Any] | None:
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        broker_datas = []
        filter_server_table: dict[str, list[str]] = {}
        for broker_name in queues:
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            broker_datas.append(broker_data.to_json(standard))
            for addr in broker_data.broker_addrs.values():
                servers = self.filter_server_table.get(addr)
                if servers:
                    filter_server_table[addr] = servers
        if not broker_datas:
            return None
        return {"brokerDatas": broker_datas, "filterServerTable": filter_server_table,
                "queueDatas": [q.to_json() for q in queues.values()]}

    def cluster_info(self) -> namesrv_bodies.ClusterInfo:
        return namesrv_bodies.ClusterInfo(
            {n: b.to_body() for n, b in self.broker_addr_table.items()},
            {c: tuple(sorted(names)) for c, names in self.cluster_addr_table.items()})

    def all_topics(self) -> list[str]:
        # Apache's topicQueueTable is a HashMap(1024); mqadmin topicList prints in its order
        return hash_map_order(self.topic_queue_table, TOPIC_QUEUE_TABLE_CAPACITY)

    def topics_by_sys_flag(self, pick: Callable[[int], bool]) -> list[str]:
        """Topics whose first queue data's topicSysFlag passes ``pick`` (the unit-topic lists), in
        the table's order as Apache's."""
        picked = []
        for topic in hash_map_order(self.topic_queue_table, TOPIC_QUEUE_TABLE_CAPACITY):
            first = next(iter(self.topic_queue_table[topic].values()), None)
            if first is not None and pick(first.topic_sys_flag):
                picked.append(topic)
        return picked

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return [t for t, queues in self.topic_queue_table.items() if names & queues.keys()]

    def system_topic_list(self) -> namesrv_bodies.TopicList:
        topics: list[str] = []
        broker_addr = None
        for cluster, names in self.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(names)
        for broker_data in self.broker_addr_table.values():
            if broker_data.broker_addrs:
                broker_addr = next(iter(broker_data.broker_addrs.values()))
                break
        return namesrv_bodies.TopicList(tuple(topics), broker_addr or None)

    def change_write_perm(self, broker_name: str, wipe: bool) -> int:
        count = 0
        for queues in self.topic_queue_table.values():
            queue_data = queues.get(broker_name)
            if queue_data is None:
                continue
            if wipe:
                queue_data.perm &= ~PERM_WRITE
            else:
                queue_data.perm |= PERM_WRITE | PERM_READ
            count += 1
        return count

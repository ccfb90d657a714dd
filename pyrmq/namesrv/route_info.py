"""The NameServer's routing tables (Java RouteInfoManager): which brokers live, which topics they
serve, and the rules for registering, expiring and unregistering brokers (spec/codes.md section 7).

Plain data and synchronous methods; the processors and the expiry scan call them from the event
loop, so no locking is needed.

Route queries are the NameServer's hot path (every client asks for each of its topics every 30 s):
a route is assembled from JSON fragments kept with the table -- one per broker (BrokerData) and
one per distinct queue data, which is interned (a broker's topics mostly share one) -- instead of
being built as objects and encoded on every query.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pyrmq.codec import fastjson, namesrv_bodies
from pyrmq.codec.java_order import hash_map_order
from pyrmq.codec.native import native_function
from pyrmq.codec.register_body import RegisteredTopic

log = logging.getLogger(__name__)

MASTER_ID = 0
TOPIC_QUEUE_TABLE_CAPACITY = 1024   # Apache's RouteInfoManager: new HashMap<>(1024)
# A broker that has not re-registered for this long is dropped (Java BROKER_CHANNEL_EXPIRED_TIME).
BROKER_CHANNEL_EXPIRED_MS = 120_000

PERM_READ = 4
PERM_WRITE = 2
# Route bodies kept (one per distinct inner dict of the topic table and JSON form queried); past
# this many the cache starts over.
MAX_CACHED_ROUTES = 1024
# Distinct queue data kept interned; past this many (a flood of odd registrations) the table
# starts over -- the routes keep the objects they hold.
MAX_INTERNED_QUEUE_DATAS = 100_000


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's queues of a topic. Immutable and interned: a change replaces the object."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int
    json: str = field(init=False, compare=False, repr=False)   # its fastjson text in a route

    def __post_init__(self) -> None:
        object.__setattr__(self, "json", fastjson.dumps(self.to_json()))

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "perm": self.perm,
                "readQueueNums": self.read_queue_nums, "topicSysFlag": self.topic_sys_flag,
                "writeQueueNums": self.write_queue_nums}


def merge_queue_datas_py(table: dict[str, dict[str, QueueData]], broker_name: str, rows: list[RegisteredTopic],
                         interned: dict[Any, QueueData], make: Callable[..., QueueData]) -> list[str]:
    """Point each row's topic in ``table`` at its queue data for ``broker_name``: the interned one
    of the row's members, or ``make(*key)`` for a new combination. The inner dicts are shared
    (never changed in place): a topic whose entry is already equal keeps its dict, the others get
    the copy with the entry set -- one copy per distinct (dict, queue data) in the call, which the
    topics that shared the old dict share again. Returns the topics whose entry changed. The twin
    of ``_native.merge_queue_datas``."""
    changed = []
    # (id(old dict), id(queue data)) -> (old dict, queue data, new dict): holding both keeps the ids theirs
    memo: dict[tuple[int, int], tuple[object, QueueData, dict[str, QueueData]]] = {}
    for row in rows:
        key = (broker_name, row.read_queue_nums, row.write_queue_nums, row.perm, row.topic_sys_flag)
        queue_data = interned.get(key)
        if queue_data is None:
            queue_data = make(*key)
        topic = row.topic_name
        old = table.get(topic)
        if old is not None:
            current = old.get(broker_name)
            if current is not None:
                if current is queue_data or current == queue_data:
                    continue
                changed.append(topic)
        step = (id(old), id(queue_data))
        made = memo.get(step)
        if made is None:
            new = {} if old is None else dict(old)
            new[broker_name] = queue_data
            made = memo[step] = (old, queue_data, new)
        table[topic] = made[2]
    return changed


_merge_queue_datas = native_function("merge_queue_datas", merge_queue_datas_py)


@dataclass(slots=True)
class BrokerData:
    """A broker name's addresses by broker id; changed only through set_addr / drop_id, which
    keep its route fragments current."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    _json: dict[bool, str] = field(default_factory=dict, compare=False, repr=False)

    def set_addr(self, broker_id: int, addr: str) -> None:
        self.broker_addrs[broker_id] = addr
        self._json.clear()

    def drop_id(self, broker_id: int) -> None:
        if self.broker_addrs.pop(broker_id, None) is not None:
            self._json.clear()

    def to_body(self) -> namesrv_bodies.BrokerData:
        return namesrv_bodies.BrokerData(self.cluster, self.broker_name, dict(self.broker_addrs))

    def to_json(self, standard: bool = False) -> dict[str, Any]:
        obj = self.to_body().to_json()
        if standard:   # standard JSON quotes the broker ids
            obj["brokerAddrs"] = {str(k): v for k, v in self.broker_addrs.items()}
        return obj

    def json(self, standard: bool) -> str:
        """Its fastjson text in a route (``standard``: broker ids quoted)."""
        text = self._json.get(standard)
        if text is None:
            text = self._json[standard] = fastjson.dumps(self.to_json(standard))
        return text


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
        # topic -> {broker name -> queue data}. The inner dicts are shared by the topics with the
        # same brokers and queue data (a cluster's topics mostly are) and replaced, never changed
        # in place: a registration of 10,000 topics then makes one dict, not 10,000 insertions
        # into 10,000 dicts scattered over memory.
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}
        self._queue_datas: dict[tuple[str, Any, Any, Any, Any], QueueData] = {}
        # (id(a topic's inner dict), standard) -> (that dict, its route body). A route is a
        # function of the inner dict, the broker datas and the filter servers alone (no topic
        # name in it): the topics sharing a dict share the body. Emptied by every change of
        # those (_routes_changed).
        self._route_bodies: dict[tuple[int, bool], tuple[dict[str, QueueData], bytes]] = {}

    def _routes_changed(self) -> None:
        """Every change of the broker datas, the filter servers or the topic table comes here:
        the cached route bodies go."""
        self._route_bodies.clear()

    # --- registration ---------------------------------------------------------------------

    def register_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str, data_version: dict[str, Any] | None,
                        topics: list[RegisteredTopic] | None,
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
        addrs_before = dict(broker_data.broker_addrs)
        # The same address under another id means a slave became master (or back): replace it.
        for other_id in [i for i, a in broker_data.broker_addrs.items()
                         if a == broker_addr and i != broker_id]:
            broker_data.drop_id(other_id)
        old_addr = broker_data.broker_addrs.get(broker_id)
        if old_addr != broker_addr:
            broker_data.set_addr(broker_id, broker_addr)
        register_first = register_first or old_addr is None
        if broker_data.broker_addrs != addrs_before:
            self._routes_changed()

        if topics is not None and broker_id == MASTER_ID:
            if register_first or self._topic_config_changed(broker_addr, data_version):
                self._update_queue_datas(broker_name, topics)

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            now_ms, data_version or {}, channel, ha_server_addr)
        if previous is None:
            log.info("new broker registered: %s %s (id %d, cluster %s)", broker_name, broker_addr,
                     broker_id, cluster)

        filter_servers = list(filter_server_list) if filter_server_list else None
        if filter_servers != self.filter_server_table.get(broker_addr):
            self._routes_changed()
            if filter_servers:
                self.filter_server_table[broker_addr] = filter_servers
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

    def _queue_data(self, broker_name: str, read_queue_nums: Any, write_queue_nums: Any, perm: Any,
                    topic_sys_flag: Any) -> QueueData:
        """The interned queue data of these members, as registered (converted with int() as Java
        parses them only when the combination is new; then interned under both forms)."""
        key = (broker_name, read_queue_nums, write_queue_nums, perm, topic_sys_flag)
        queue_data = self._queue_datas.get(key)
        if queue_data is None:
            if len(self._queue_datas) >= MAX_INTERNED_QUEUE_DATAS:
                self._queue_datas.clear()
            converted = QueueData(broker_name, int(read_queue_nums), int(write_queue_nums), int(perm),
                                  int(topic_sys_flag))
            queue_data = self._queue_datas.setdefault(
                (broker_name, converted.read_queue_nums, converted.write_queue_nums, converted.perm,
                 converted.topic_sys_flag), converted)
            self._queue_datas[key] = queue_data
        return queue_data

    def _update_queue_datas(self, broker_name: str, topics: list[RegisteredTopic]) -> None:
        """Each topic's queue data of ``broker_name`` from its registered topic configs (10,000
        of them every 30 s from a big broker: the loop is in C when the extension is built)."""
        self._routes_changed()
        for topic in _merge_queue_datas(self.topic_queue_table, broker_name, topics, self._queue_datas,
                                        self._queue_data):
            log.info("topic %s queue data of %s changed", topic, broker_name)

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
        self._routes_changed()
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        log.info("broker unregistered: %s %s (id %d)", broker_name, broker_addr, broker_id)
        broker_data = self.broker_addr_table.get(broker_name)
        remove_name = False
        if broker_data is not None:
            broker_data.drop_id(broker_id)
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
        self._routes_changed()
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        log.warning("broker %s removed: %s", broker_addr, why)
        for broker_name, broker_data in list(self.broker_addr_table.items()):
            for broker_id in [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]:
                broker_data.drop_id(broker_id)
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                self._remove_broker_name(broker_name, None)

    def _remove_broker_name(self, broker_name: str, cluster: str | None) -> None:
        self._routes_changed()
        for name, brokers in list(self.cluster_addr_table.items()):
            if cluster is not None and name != cluster:
                continue
            brokers.discard(broker_name)
            if not brokers:
                del self.cluster_addr_table[name]
        self._rewrite_entries(broker_name, lambda queues, _: {
            name: q for name, q in queues.items() if name != broker_name})

    def delete_topic(self, topic: str) -> None:
        self.topic_queue_table.pop(topic, None)
        self._routes_changed()

    # --- queries --------------------------------------------------------------------------

    def topic_route_body(self, topic: str, standard: bool, order_topic_conf: str | None = None) -> bytes | None:
        """GET_ROUTEINFO_BY_TOPIC's body (TopicRouteData in fastjson, or standard JSON), None when
        no live broker serves ``topic``."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        if order_topic_conf is not None:
            return self._route_body(queues, standard, order_topic_conf)
        key = (id(queues), standard)
        cached = self._route_bodies.get(key)
        if cached is not None and cached[0] is queues:
            return cached[1]
        body = self._route_body(queues, standard, None)
        if body is not None:
            if len(self._route_bodies) >= MAX_CACHED_ROUTES:
                self._route_bodies.clear()
            self._route_bodies[key] = (queues, body)
        return body

    def _route_body(self, queues: dict[str, QueueData], standard: bool, order_topic_conf: str | None) -> bytes | None:
        """A route built from the tables: the fragments joined in the member order fastjson sorts
        them into (brokerDatas, filterServerTable, orderTopicConf, queueDatas)."""
        brokers = self.broker_addr_table
        filter_servers = self.filter_server_table
        broker_parts = []
        picked_filter_servers: dict[str, list[str]] = {}
        for broker_name in queues:
            broker_data = brokers.get(broker_name)
            if broker_data is None:
                continue
            broker_parts.append(broker_data.json(standard))
            if filter_servers:
                for addr in broker_data.broker_addrs.values():
                    servers = filter_servers.get(addr)
                    if servers:
                        picked_filter_servers[addr] = servers
        if not broker_parts:
            return None
        parts = ['{"brokerDatas":[', ",".join(broker_parts), '],"filterServerTable":',
                 fastjson.dumps(picked_filter_servers) if picked_filter_servers else "{}"]
        if order_topic_conf is not None:
            parts += [',"orderTopicConf":', fastjson.dumps(order_topic_conf)]
        parts += [',"queueDatas":[', ",".join([q.json for q in queues.values()]), "]}"]
        return "".join(parts).encode()

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
        self._routes_changed()

        def with_perm(queues: dict[str, QueueData], queue_data: QueueData) -> dict[str, QueueData]:
            perm = queue_data.perm & ~PERM_WRITE if wipe else queue_data.perm | PERM_WRITE | PERM_READ
            return {**queues, broker_name: self._queue_data(broker_name, queue_data.read_queue_nums,
                                                            queue_data.write_queue_nums, perm,
                                                            queue_data.topic_sys_flag)}

        return self._rewrite_entries(broker_name, with_perm)

    def _rewrite_entries(self, broker_name: str,
                         rewrite: Callable[[dict[str, QueueData], QueueData], dict[str, QueueData]]) -> int:
        """Replace every topic's inner dict that has an entry for ``broker_name`` by
        ``rewrite(dict, entry)`` -- once per shared dict, never changing one in place; a topic
        left with no entry goes. Returns how many topics had one."""
        table = self.topic_queue_table
        rewritten: dict[int, dict[str, QueueData]] = {}   # id(shared dict) -> its replacement
        count = 0
        for topic, queues in list(table.items()):   # the snapshot keeps every old dict (and its id) alive
            queue_data = queues.get(broker_name)
            if queue_data is None:
                continue
            count += 1
            new = rewritten.get(id(queues))
            if new is None:
                new = rewritten[id(queues)] = rewrite(queues, queue_data)
            if new:
                table[topic] = new
            else:
                del table[topic]
        return count

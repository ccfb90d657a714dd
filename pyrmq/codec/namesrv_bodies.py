"""Typed bodies of the NameServer's admin answers, shared by the server and clients: ClusterInfo
(GET_BROKER_CLUSTER_INFO) and TopicList (the topic list requests), with Apache's field names and
fastjson shapes (broker ids as unquoted integer keys: ``"brokerAddrs":{0:"10.0.0.1:10911"}``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import Body


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)   # brokerId -> address

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrs": dict(self.broker_addrs), "brokerName": self.broker_name, "cluster": self.cluster}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BrokerData:
        return cls(str(obj["cluster"]), str(obj["brokerName"]),
                   {fastjson.int_member(k): str(v) for k, v in (obj.get("brokerAddrs") or {}).items()})


@dataclass(frozen=True, slots=True)
class ClusterInfo(Body):
    """GET_BROKER_CLUSTER_INFO (106)."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, tuple[str, ...]] = field(default_factory=dict)   # cluster -> broker names

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrTable": {n: b.to_json() for n, b in self.broker_addr_table.items()},
                "clusterAddrTable": {c: list(names) for c, names in self.cluster_addr_table.items()}}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ClusterInfo:
        return cls({str(n): BrokerData.from_json(b) for n, b in (obj.get("brokerAddrTable") or {}).items()},
                   {str(c): tuple(str(n) for n in names) for c, names in (obj.get("clusterAddrTable") or {}).items()})


@dataclass(frozen=True, slots=True)
class TopicList(Body):
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), GET_TOPICS_BY_CLUSTER (224),
    GET_SYSTEM_TOPIC_LIST_FROM_NS (304, which also names one broker address)."""

    topic_list: tuple[str, ...] = ()
    broker_addr: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddr": self.broker_addr, "topicList": list(self.topic_list)}   # None is left out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TopicList:
        addr = obj.get("brokerAddr")
        return cls(tuple(str(t) for t in obj.get("topicList") or ()), None if addr is None else str(addr))

"""A topic's route as the NameServer answers GET_ROUTEINFO_BY_TOPIC (spec/remoting.md §12), and
what the clients derive from it: the writable queues a producer rotates over (Java's
``topicRouteData2TopicPublishInfo``), the readable queues a consumer pulls from
(``topicRouteData2TopicSubscribeInfo``) and broker addresses by name and id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Mapping

from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import MessageQueue
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.namesrv_bodies import BrokerData

PERM_WRITE: Final = 0x2
PERM_READ: Final = 0x4
MASTER_ID: Final = 0


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> QueueData:
        return cls(str(obj["brokerName"]), fastjson.int_member(obj["readQueueNums"]),
                   fastjson.int_member(obj["writeQueueNums"]), fastjson.int_member(obj["perm"]))


@dataclass(frozen=True, slots=True)
class TopicRoute:
    topic: str
    queue_datas: tuple[QueueData, ...]
    broker_datas: dict[str, BrokerData]   # by broker name
    order_topic_conf: str | None = None

    @classmethod
    def decode(cls, topic: str, body: bytes | bytearray | memoryview) -> TopicRoute:
        try:
            obj = fastjson.loads(body)
            if not isinstance(obj, dict):
                raise TypeError("not an object")
            brokers = [BrokerData.from_json(b) for b in obj.get("brokerDatas") or ()]
            order = obj.get("orderTopicConf")
            return cls(topic, tuple(QueueData.from_json(q) for q in obj.get("queueDatas") or ()),
                       {b.broker_name: b for b in brokers}, None if order is None else str(order))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"malformed route body for {topic}: {exc!r}") from None

    def with_queue_limit(self, topic: str, queue_nums: int) -> TopicRoute:
        """The default topic's route turned into a route for ``topic`` (a topic the broker creates at
        the first send), with at most ``queue_nums`` queues per broker, as Java does."""
        queues = tuple(QueueData(q.broker_name, min(queue_nums, q.read_queue_nums),
                                 min(queue_nums, q.read_queue_nums), q.perm) for q in self.queue_datas)
        return TopicRoute(topic, queues, self.broker_datas, None)

    def publish_queues(self) -> list[MessageQueue]:
        """Writable queues on brokers with a master, in broker-name order (or the order-topic
        configuration's ``brokerName:queueNums;...``)."""
        out: list[MessageQueue] = []
        if self.order_topic_conf:
            for item in self.order_topic_conf.split(";"):
                name, _, nums = item.partition(":")
                if nums.isdigit():
                    out.extend(MessageQueue(self.topic, name, i) for i in range(int(nums)))
            return out
        for queue_data in sorted(self.queue_datas, key=lambda q: q.broker_name):
            broker = self.broker_datas.get(queue_data.broker_name)
            if not queue_data.perm & PERM_WRITE or broker is None or MASTER_ID not in broker.broker_addrs:
                continue
            out.extend(MessageQueue(self.topic, queue_data.broker_name, i) for i in range(queue_data.write_queue_nums))
        return out

    def subscribe_queues(self) -> list[MessageQueue]:
        """Readable queues, in broker-name order."""
        return [MessageQueue(self.topic, q.broker_name, i)
                for q in sorted(self.queue_datas, key=lambda q: q.broker_name) if q.perm & PERM_READ
                for i in range(q.read_queue_nums)]

    def broker_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        """The address of ``broker_id`` in ``broker_name``; when that one is not in the route, the
        master, else any (Java's findBrokerAddressInSubscribe without onlyThisBroker)."""
        broker = self.broker_datas.get(broker_name)
        if broker is None or not broker.broker_addrs:
            return None
        addrs = broker.broker_addrs
        return addrs.get(broker_id) or addrs.get(MASTER_ID) or addrs[min(addrs)]

    def master_addr(self, broker_name: str) -> str | None:
        broker = self.broker_datas.get(broker_name)
        return None if broker is None else broker.broker_addrs.get(MASTER_ID)

    def all_broker_addrs(self) -> set[str]:
        return {addr for broker in self.broker_datas.values() for addr in broker.broker_addrs.values()}

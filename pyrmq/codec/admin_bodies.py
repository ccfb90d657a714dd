"""Typed bodies of the broker's admin and consumer-admin answers, shared by the server (which
encodes them) and clients (which decode them): Apache's ``remoting/protocol/body`` classes with
their exact field names and fastjson shapes.

``Map<MessageQueue, ...>`` members are written the fastjson way, with the queue as a JSON object
key (``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``); members come out sorted, as fastjson
writes bean properties.  ``decode`` raises :class:`ProtocolError` for bytes of the wrong shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar

from pyrmq.codec import fastjson
from pyrmq.codec.errors import ProtocolError

# Numeric members as fastjson's bean mapping reads them (ASCII digits only, within a long).
_int = fastjson.int_member
_float = fastjson.float_member

B = TypeVar("B", bound="Body")
V = TypeVar("V")


class Body:
    """``encode()`` / ``decode(bytes)`` over the model's ``to_json()`` / ``from_json(obj)``."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_json(cls: type[B], obj: Mapping[str, Any]) -> B:
        raise NotImplementedError

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json()).encode()

    @classmethod
    def decode(cls: type[B], data: bytes | bytearray | memoryview | str) -> B:
        obj = fastjson.loads(data)
        if not isinstance(obj, dict):
            raise ProtocolError(f"{cls.__name__} body is not a JSON object")
        try:
            return cls.from_json(obj)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"malformed {cls.__name__} body: {exc!r}") from None


@dataclass(frozen=True, slots=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> MessageQueue:
        return cls(str(obj["topic"]), str(obj["brokerName"]), _int(obj["queueId"]))

    def key(self) -> fastjson.ObjectKey:
        """The queue as a fastjson map key."""
        return fastjson.ObjectKey.of(self.to_json())

    @classmethod
    def from_key(cls, key: Any) -> MessageQueue:
        """Back from a map key: an object key, or a JSON string of one (standard-JSON writers)."""
        if isinstance(key, fastjson.ObjectKey):
            return cls.from_json(key.as_dict())
        if isinstance(key, str):
            return cls.from_json(fastjson.loads(key))
        raise TypeError(f"a message queue key cannot be a {type(key).__name__}")


def _queue_table_to_json(table: Mapping[MessageQueue, Any]) -> dict[fastjson.ObjectKey, Any]:
    return {mq.key(): value.to_json() if hasattr(value, "to_json") else value for mq, value in table.items()}


def _offset_table_from_json(obj: Mapping[str, Any], parse: Callable[[Any], V]) -> dict[MessageQueue, V]:
    """The ``offsetTable`` member, a ``Map<MessageQueue, V>``."""
    return {MessageQueue.from_key(k): parse(v) for k, v in (obj.get("offsetTable") or {}).items()}


@dataclass(frozen=True, slots=True)
class TopicOffset:
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {"lastUpdateTimestamp": self.last_update_timestamp, "maxOffset": self.max_offset,
                "minOffset": self.min_offset}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TopicOffset:
        return cls(_int(obj["minOffset"]), _int(obj["maxOffset"]), _int(obj.get("lastUpdateTimestamp", 0)))


@dataclass(frozen=True, slots=True)
class TopicStatsTable(Body):
    """GET_TOPIC_STATS_INFO (202)."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": _queue_table_to_json(self.offset_table)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TopicStatsTable:
        return cls(_offset_table_from_json(obj, TopicOffset.from_json))


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset,
                "lastTimestamp": self.last_timestamp}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> OffsetWrapper:
        return cls(_int(obj["brokerOffset"]), _int(obj["consumerOffset"]), _int(obj.get("lastTimestamp", 0)))


@dataclass(frozen=True, slots=True)
class ConsumeStats(Body):
    """GET_CONSUME_STATS (208)."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"consumeTps": float(self.consume_tps), "offsetTable": _queue_table_to_json(self.offset_table)}

    def total_diff(self) -> int:
        """Messages the group is behind, over every queue (Java computeTotalDiff)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ConsumeStats:
        return cls(_offset_table_from_json(obj, OffsetWrapper.from_json), _float(obj.get("consumeTps", 0.0)))


@dataclass(frozen=True, slots=True)
class ResetOffsetBody(Body):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) answer and RESET_CONSUMER_CLIENT_OFFSET (220) body."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": _queue_table_to_json(self.offset_table)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ResetOffsetBody:
        return cls(_offset_table_from_json(obj, _int))


@dataclass(frozen=True, slots=True)
class GetConsumerStatusBody(Body):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) answer (``message_queue_table``: one client's
    offsets) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) answer (``consumer_table``: client id
    -> its offsets)."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"consumerTable": {client: _queue_table_to_json(table) for client, table in self.consumer_table.items()},
                "messageQueueTable": _queue_table_to_json(self.message_queue_table)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> GetConsumerStatusBody:
        def table(value: Any) -> dict[MessageQueue, int]:
            return {MessageQueue.from_key(k): _int(v) for k, v in (value or {}).items()}
        return cls(table(obj.get("messageQueueTable")),
                   {str(client): table(t) for client, t in (obj.get("consumerTable") or {}).items()})


@dataclass(frozen=True, slots=True)
class Connection:
    client_id: str
    client_addr: str
    language: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"clientAddr": self.client_addr, "clientId": self.client_id, "language": self.language,
                "version": self.version}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Connection:
        return cls(str(obj["clientId"]), str(obj["clientAddr"]), str(obj.get("language", "JAVA")),
                   _int(obj.get("version", 0)))


@dataclass(frozen=True, slots=True)
class Subscription:
    """SubscriptionData as clients send it in heartbeats and admin answers repeat it."""

    topic: str
    sub_string: str = "*"
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()     # sorted
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"classFilterMode": self.class_filter_mode, "codeSet": list(self.code_set),
                "expressionType": self.expression_type, "subString": self.sub_string,
                "subVersion": self.sub_version, "tagsSet": list(self.tags_set), "topic": self.topic}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Subscription:
        return cls(str(obj["topic"]), str(obj.get("subString", "*")),
                   tuple(str(t) for t in obj.get("tagsSet") or ()),
                   tuple(sorted(_int(c) for c in obj.get("codeSet") or ())),
                   _int(obj.get("subVersion", 0)), str(obj.get("expressionType", "TAG")),
                   bool(obj.get("classFilterMode", False)))


@dataclass(frozen=True, slots=True)
class ConsumerConnection(Body):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    connection_set: tuple[Connection, ...] = ()
    subscription_table: dict[str, Subscription] = field(default_factory=dict)
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"

    def to_json(self) -> dict[str, Any]:
        return {"connectionSet": [c.to_json() for c in self.connection_set],
                "consumeFromWhere": self.consume_from_where, "consumeType": self.consume_type,
                "messageModel": self.message_model,
                "subscriptionTable": {t: s.to_json() for t, s in self.subscription_table.items()}}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ConsumerConnection:
        return cls(tuple(Connection.from_json(c) for c in obj.get("connectionSet") or ()),
                   {str(t): Subscription.from_json(s) for t, s in (obj.get("subscriptionTable") or {}).items()},
                   str(obj.get("consumeType", "CONSUME_PASSIVELY")), str(obj.get("messageModel", "CLUSTERING")),
                   str(obj.get("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET")))


@dataclass(frozen=True, slots=True)
class QueueTimeSpan:
    message_queue: MessageQueue
    min_time_stamp: int
    max_time_stamp: int
    consume_time_stamp: int
    delay_time: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"consumeTimeStamp": self.consume_time_stamp, "delayTime": self.delay_time,
                "maxTimeStamp": self.max_time_stamp, "messageQueue": self.message_queue.to_json(),
                "minTimeStamp": self.min_time_stamp}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> QueueTimeSpan:
        return cls(MessageQueue.from_json(obj["messageQueue"]), _int(obj.get("minTimeStamp", 0)),
                   _int(obj.get("maxTimeStamp", 0)), _int(obj.get("consumeTimeStamp", 0)),
                   _int(obj.get("delayTime", 0)))


@dataclass(frozen=True, slots=True)
class QueryConsumeTimeSpanBody(Body):
    """QUERY_CONSUME_TIME_SPAN (303): per write queue, the stored time range and where a group is."""

    consume_time_span_set: tuple[QueueTimeSpan, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"consumeTimeSpanSet": [span.to_json() for span in self.consume_time_span_set]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> QueryConsumeTimeSpanBody:
        return cls(tuple(QueueTimeSpan.from_json(s) for s in obj.get("consumeTimeSpanSet") or ()))


@dataclass(frozen=True, slots=True)
class ProducerConnection(Body):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    connection_set: tuple[Connection, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"connectionSet": [c.to_json() for c in self.connection_set]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ProducerConnection:
        return cls(tuple(Connection.from_json(c) for c in obj.get("connectionSet") or ()))


@dataclass(frozen=True, slots=True)
class GroupList(Body):
    """QUERY_TOPIC_CONSUME_BY_WHO (300): the groups consuming a topic (a Java HashSet)."""

    group_list: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"groupList": list(self.group_list)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> GroupList:
        return cls(tuple(str(g) for g in obj.get("groupList") or ()))


@dataclass(frozen=True, slots=True)
class KVTable(Body):
    """String table: GET_BROKER_RUNTIME_INFO (28), GET_KVLIST_BY_NAMESPACE (219), the order-topic
    configuration in a REGISTER_BROKER answer."""

    table: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"table": dict(self.table)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> KVTable:
        return cls({str(k): str(v) for k, v in (obj.get("table") or {}).items()})


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    """One window of a stats item: what was added, per second, per call."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"avgpt": float(self.avgpt), "sum": self.sum, "tps": float(self.tps)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BrokerStatsItem:
        return cls(_int(obj.get("sum", 0)), _float(obj.get("tps", 0.0)), _float(obj.get("avgpt", 0.0)))


@dataclass(frozen=True, slots=True)
class BrokerStatsData(Body):
    """VIEW_BROKER_STATS_DATA (315): one stats item over the last minute, hour and day."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)

    def to_json(self) -> dict[str, Any]:
        return {"statsDay": self.stats_day.to_json(), "statsHour": self.stats_hour.to_json(),
                "statsMinute": self.stats_minute.to_json()}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BrokerStatsData:
        return cls(*(BrokerStatsItem.from_json(obj.get(k) or {}) for k in ("statsMinute", "statsHour", "statsDay")))


@dataclass(frozen=True, slots=True)
class ConsumeStatsList(Body):
    """GET_BROKER_CONSUME_STATS (317): every subscription group's ConsumeStats per topic it has
    offsets in, one ``{group: [ConsumeStats...]}`` map per group, and their summed lag."""

    broker_addr: str = ""
    consume_stats_list: tuple[dict[str, tuple[ConsumeStats, ...]], ...] = ()
    total_diff: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddr": self.broker_addr,
                "consumeStatsList": [{group: [s.to_json() for s in stats] for group, stats in entry.items()}
                                     for entry in self.consume_stats_list],
                "totalDiff": self.total_diff}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ConsumeStatsList:
        entries = tuple({str(group): tuple(ConsumeStats.from_json(s) for s in stats) for group, stats in entry.items()}
                        for entry in obj.get("consumeStatsList") or ())
        return cls(str(obj.get("brokerAddr") or ""), entries, _int(obj.get("totalDiff", 0)))


@dataclass(frozen=True, slots=True)
class ConsumerIdList(Body):
    """GET_CONSUMER_LIST_BY_GROUP (38)."""

    consumer_id_list: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_id_list)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ConsumerIdList:
        return cls(tuple(str(c) for c in obj.get("consumerIdList") or ()))


@dataclass(frozen=True, slots=True)
class LockBatchResult(Body):
    """LOCK_BATCH_MQ (41) answer: the queues now locked by the asking client."""

    lock_ok_mq_set: tuple[MessageQueue, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"lockOKMQSet": [mq.to_json() for mq in self.lock_ok_mq_set]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LockBatchResult:
        return cls(tuple(MessageQueue.from_json(mq) for mq in obj.get("lockOKMQSet") or ()))


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """One producer connection in GET_ALL_PRODUCER_INFO; ``remote_ip`` is the socket address as
    Java prints it (``/host:port``)."""

    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {"clientId": self.client_id, "language": self.language,
                "lastUpdateTimestamp": self.last_update_timestamp, "remoteIP": self.remote_ip,
                "version": self.version}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ProducerInfo:
        return cls(str(obj["clientId"]), str(obj.get("remoteIP", "")), str(obj.get("language", "JAVA")),
                   _int(obj.get("version", 0)), _int(obj.get("lastUpdateTimestamp", 0)))


@dataclass(frozen=True, slots=True)
class ProducerTableInfo(Body):
    """GET_ALL_PRODUCER_INFO (328, mqadmin producer): every producer group's connections."""

    data: dict[str, tuple[ProducerInfo, ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"data": {group: [p.to_json() for p in infos] for group, infos in self.data.items()}}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ProducerTableInfo:
        return cls({str(g): tuple(ProducerInfo.from_json(p) for p in infos or ())
                    for g, infos in (obj.get("data") or {}).items()})


@dataclass(frozen=True, slots=True)
class ConsumeQueueData:
    """One consume queue unit in QUERY_CONSUME_QUEUE; the optional members are left out when None."""

    physic_offset: int
    physic_size: int
    tags_code: int
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"bitMap": self.bit_map, "eval": self.eval, "extendDataJson": self.extend_data_json,
                "msg": self.msg, "physicOffset": self.physic_offset, "physicSize": self.physic_size,
                "tagsCode": self.tags_code}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ConsumeQueueData:
        return cls(_int(obj["physicOffset"]), _int(obj["physicSize"]), _int(obj["tagsCode"]),
                   obj.get("extendDataJson"), obj.get("bitMap"), bool(obj.get("eval", False)), obj.get("msg"))


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueResponseBody(Body):
    """QUERY_CONSUME_QUEUE (321, mqadmin queryCq): units of one queue from an index, and, when a
    group was named, its subscription and filter."""

    max_queue_index: int
    min_queue_index: int
    queue_data: tuple[ConsumeQueueData, ...] | None = None
    subscription_data: Subscription | None = None
    filter_data: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"filterData": self.filter_data, "maxQueueIndex": self.max_queue_index,
                "minQueueIndex": self.min_queue_index,
                "queueData": None if self.queue_data is None else [u.to_json() for u in self.queue_data],
                "subscriptionData": None if self.subscription_data is None else self.subscription_data.to_json()}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> QueryConsumeQueueResponseBody:
        units = obj.get("queueData")
        sub = obj.get("subscriptionData")
        return cls(_int(obj.get("maxQueueIndex", 0)), _int(obj.get("minQueueIndex", 0)),
                   None if units is None else tuple(ConsumeQueueData.from_json(u) for u in units),
                   None if sub is None else Subscription.from_json(sub), obj.get("filterData"))

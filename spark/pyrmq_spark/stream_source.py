"""``rocketmq``: a topic as a Structured Streaming source and a sink, through the remoting protocol.

    spark.readStream.format("rocketmq").option("namesrv", "127.0.0.1:9876")
        .option("topic", "Orders").option("consumerGroup", "spark_orders").load()
    df.write.format("rocketmq").option("namesrv", ...).option("topic", "Out").save()

The source's offset is one consume offset per queue, keyed ``"<brokerName>:<queueId>"``. The
driver asks the brokers for the queues' max offsets (the end of a micro-batch), each task pulls
exactly one queue's range with :mod:`pyrmq.client` (pull API: pyrmq and Apache brokers alike),
and when Spark commits a batch the group's offsets are stored on the brokers, so admin tools show
the query's progress. Spark's checkpoint, not the broker, is what a restarted query resumes from:
with a checkpoint location and an idempotent or transactional sink, every message is delivered
exactly once.

The sink sends each row (``body`` and optional ``tags``, ``keys``, ``properties``, ``topic``) with
:class:`pyrmq.client.sync.Producer`; a failed task is retried by Spark, so the sink is
at-least-once, as every RocketMQ producer is.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from pyrmq.client.model import MessageQueue, PullStatus
from pyrmq.client.sync import Producer, PullConsumer

log = logging.getLogger(__name__)

SCHEMA = ("topic string, broker_name string, queue_id int, queue_offset bigint, msg_id string, tags string, "
          "keys string, properties map<string,string>, body binary, born_timestamp timestamp, "
          "store_timestamp timestamp, reconsume_times int")
# The group a reader uses when the query has none: pulls name a group, and nothing is committed.
READER_GROUP = "pyrmq_spark_reader"
PRODUCER_GROUP = "pyrmq_spark_producer"
DEFAULT_PULL_BATCH = 32
DEFAULT_TIMEOUT_S = 10.0
# A queue whose end the broker announced but whose pulls find nothing: asked this many times
# before the task fails (Spark retries it) rather than ending the range short.
EMPTY_PULLS_BEFORE_FAILING = 20


def queue_key(broker_name: str, queue_id: int) -> str:
    return f"{broker_name}:{queue_id}"


def _split_key(key: str) -> tuple[str, int]:
    broker, _, queue = key.rpartition(":")
    return broker, int(queue)


def _required(options: Mapping[str, str], name: str) -> str:
    value = options.get(name)
    if not value:
        raise ValueError(f'the rocketmq source needs the option "{name}"')
    return value


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """One queue's messages from ``start`` (included) to ``end`` (excluded)."""

    broker_name: str
    queue_id: int
    start: int
    end: int


class RocketMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RocketMQStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return RocketMQWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return RocketMQStreamWriter(self.options, schema)


class RocketMQStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.namesrv = _required(options, "namesrv")
        self.topic = _required(options, "topic")
        self.group = options.get("consumerGroup") or None
        self.starting = options.get("startingOffsets") or ("group" if self.group else "earliest")
        if self.starting == "group" and not self.group:
            raise ValueError('startingOffsets "group" needs the option "consumerGroup"')
        max_per_trigger = options.get("maxMessagesPerTrigger")
        self.max_per_trigger = int(max_per_trigger) if max_per_trigger else None
        self.pull_batch = int(options.get("pullBatchSize") or DEFAULT_PULL_BATCH)
        self.timeout = float(options.get("timeout") or DEFAULT_TIMEOUT_S)
        self._client: PullConsumer | None = None   # the driver's; never shipped to executors
        self._stored: dict[str, int] = {}          # the group offsets last stored on the brokers

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"], state["_stored"] = None, {}
        return state

    def _driver_client(self) -> PullConsumer:
        if self._client is None:
            self._client = PullConsumer(self.namesrv, self.group or READER_GROUP, timeout=self.timeout)
        return self._client

    def _queues(self) -> list[MessageQueue]:
        return self._driver_client().fetch_queues(self.topic)

    def initialOffset(self) -> dict[str, int]:
        client = self._driver_client()
        queues = self._queues()
        if self.starting.startswith("{"):
            given = {str(k): int(v) for k, v in json.loads(self.starting).items()}
            return {queue_key(q.broker_name, q.queue_id): given.get(queue_key(q.broker_name, q.queue_id),
                                                                    client.min_offset(q)) for q in queues}
        offsets = {}
        for q in queues:
            if self.starting == "latest":
                offset = client.max_offset(q)
            elif self.starting == "earliest":
                offset = client.min_offset(q)
            elif self.starting == "group":
                committed = client.query_offset(q)
                offset = committed if committed >= 0 else client.min_offset(q)
            else:
                raise ValueError(f'startingOffsets is "group", "earliest", "latest" or a JSON map, not {self.starting!r}')
            offsets[queue_key(q.broker_name, q.queue_id)] = offset
        return offsets

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
        if start is not None:
            # Spark 4.2+ passes the end of the last completed batch, at every trigger; Spark calls
            # commit() for a batch only when it plans the next one, so without this the broker's
            # offsets would trail a query that has caught up by a whole batch until more arrives.
            self._store_group_offsets(start)
        client = self._driver_client()
        latest = {queue_key(q.broker_name, q.queue_id): client.max_offset(q) for q in self._queues()}
        budget = getattr(limit, "max_rows", None)
        if start is None or budget is None:   # Spark before 4.2 calls latestOffset() alone: no limit
            return latest
        # ReadMaxRows: hand the budget out a message at a time across the queues that have some,
        # so one busy queue does not starve the others.
        end = {key: start.get(key, 0) for key in latest}
        while budget > 0:
            moved = False
            for key, last in latest.items():
                if budget > 0 and end[key] < last:
                    end[key] += 1
                    budget -= 1
                    moved = True
            if not moved:
                break
        return end

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[QueueRange]:
        ranges = []
        for key, stop in sorted(end.items()):
            begin = start.get(key, 0)   # a queue added after the query started is read from 0
            if stop > begin:
                broker, queue_id = _split_key(key)
                ranges.append(QueueRange(broker, queue_id, begin, stop))
        return ranges

    def read(self, partition: QueueRange) -> Iterator[tuple[Any, ...]]:   # type: ignore[override]
        mq = MessageQueue(self.topic, partition.broker_name, partition.queue_id)
        with PullConsumer(self.namesrv, self.group or READER_GROUP, timeout=self.timeout) as consumer:
            yield from read_range(consumer, mq, partition.start, partition.end, self.pull_batch)

    def commit(self, end: dict[str, int]) -> None:
        self._store_group_offsets(end)

    def _store_group_offsets(self, offsets: dict[str, int]) -> None:
        """The group's consume offsets on the brokers (what mqadmin consumerProgress shows), each
        queue's once per change."""
        if not self.group:
            return
        client = self._driver_client()
        for key, offset in offsets.items():
            if self._stored.get(key) != offset:
                broker, queue_id = _split_key(key)
                client.update_offset(MessageQueue(self.topic, broker, queue_id), offset)
                self._stored[key] = offset

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def read_range(consumer: PullConsumer, mq: MessageQueue, start: int, end: int, pull_batch: int) -> Iterator[tuple[Any, ...]]:
    """The rows of ``mq``'s messages from ``start`` to ``end``: every offset in the range once, in order."""
    offset, empty = start, 0
    while offset < end:
        result = consumer.pull(mq, offset, max_nums=min(pull_batch, end - offset))
        if result.status is PullStatus.FOUND:
            empty = 0
            for m in result.messages:
                if offset <= m.queue_offset < end:
                    yield (m.topic, m.broker_name or mq.broker_name, m.queue_id, m.queue_offset, m.msg_id, m.tags,
                           m.keys, m.properties, m.body, _time(m.born_timestamp), _time(m.store_timestamp),
                           m.reconsume_times)
            offset = max(offset + 1, min(result.next_begin_offset, end)) if result.messages else result.next_begin_offset
        elif result.status is PullStatus.OFFSET_ILLEGAL and result.next_begin_offset > offset:
            # The broker deleted the start of the range (retention): what is left is all there is.
            log.warning("%s: offsets %d..%d were deleted before they were read; reading from %d",
                        mq, offset, result.next_begin_offset, result.next_begin_offset)
            offset = result.next_begin_offset
        elif result.status is PullStatus.NO_MATCHED_MSG and result.next_begin_offset > offset:
            offset = result.next_begin_offset
        else:
            empty += 1
            if empty >= EMPTY_PULLS_BEFORE_FAILING:
                raise RuntimeError(f"{mq}: the broker announced offsets up to {end} but has none past {offset} "
                                   f"({result.status.value})")


def _time(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)


# ------------------------------------------------------------------------------------------ sink

@dataclass
class SentCount(WriterCommitMessage):
    messages: int


class RocketMQWriter(DataSourceWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.namesrv = _required(options, "namesrv")
        self.topic = options.get("topic") or None
        if self.topic is None and "topic" not in schema.fieldNames():
            raise ValueError('the rocketmq sink needs the option "topic" or a "topic" column')
        if "body" not in schema.fieldNames():
            raise ValueError('the rocketmq sink needs a "body" column (binary or string)')
        self.group = options.get("producerGroup") or PRODUCER_GROUP
        self.timeout = float(options.get("timeout") or DEFAULT_TIMEOUT_S)

    def write(self, iterator: Iterator[Any]) -> SentCount:
        sent = 0
        with Producer(self.namesrv, self.group, timeout=self.timeout) as producer:
            for row in iterator:
                fields = row.asDict()
                topic = fields.get("topic") or self.topic
                body = fields["body"]
                if body is None or topic is None:
                    raise ValueError(f"a row without a body or a topic cannot be sent: {fields!r}")
                producer.send(topic, body.encode() if isinstance(body, str) else bytes(body),
                              tags=fields.get("tags"), keys=fields.get("keys"),
                              properties=dict(fields.get("properties") or {}))
                sent += 1
        return SentCount(sent)


class RocketMQStreamWriter(RocketMQWriter, DataSourceStreamWriter):
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:   # type: ignore[override]
        pass   # every message was stored when its task ended: nothing is left to publish

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:   # type: ignore[override]
        pass   # sent messages cannot be taken back; Spark re-runs the batch (at-least-once)

"""The broker's Prometheus endpoint (opt-in ``metricsPort``, loopback unless ``metricsBindAddress``
says otherwise): what rocketmq-exporter would scrape from this broker through mqadmin calls, under
the exporter's metric names and labels, plus pyrmq's own store figures.

Every scrape reads the live tables on the event loop (no copies kept between scrapes):

* ``rocketmq_broker_tps`` / ``rocketmq_broker_qps``: messages stored / pulled per second over the
  last minute (the BROKER_PUT_NUMS / BROKER_GET_NUMS stats items, as the exporter reads them);
* ``rocketmq_producer_tps``, ``rocketmq_producer_message_size``, ``rocketmq_producer_offset`` per
  topic; ``rocketmq_consumer_tps``, ``rocketmq_consumer_message_size``, ``rocketmq_consumer_offset``,
  ``rocketmq_send_back_nums``, ``rocketmq_group_get_latency_by_storetime`` per topic and group;
* ``rocketmq_group_diff`` and ``rocketmq_group_get_latency`` **per queue** (the exporter sums a
  group's queues over every broker; its labels are kept, ``broker`` and ``queueid`` are added, so
  ``sum by (group, topic)`` gives the exporter's figure);
* ``rocketmq_brokeruntime_*``: the GET_BROKER_RUNTIME_INFO figures the exporter publishes;
* ``pyrmq_store_*``: disk ratios, dispatch and flush lag, commit log bounds, the earliest message
  time and a page cache hit estimate.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable, Iterator

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from pyrmq.broker.broker_stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
)
from pyrmq.broker.stats_processor import flush_behind_bytes
from pyrmq.codec.system_topics import TOPIC_GROUP_SEPARATOR
from pyrmq.remoting.http_server import HttpRequest, HttpResponse, HttpServer
from pyrmq.store.store_stats import PUT_TIME_DESC, TPS_WINDOWS_S

if TYPE_CHECKING:
    from pyrmq.broker.broker_stats import BrokerStatsManager
    from pyrmq.broker.client_manager import ConsumerManager
    from pyrmq.broker.config import BrokerConfig
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

# MessageModel ordinals, as the exporter labels msgModel
_MESSAGE_MODEL_ORDINAL = {"BROADCASTING": "0", "CLUSTERING": "1"}
# the exporter's pmdt metric suffixes, in PUT_TIME_DESC's order
_PMDT_SUFFIXES = ("0ms", "0to10ms", "10to50ms", "50to100ms", "100to200ms", "200to500ms", "500to1s", "1to2s",
                  "2to3s", "3to4s", "4to5s", "5to10s", "10stomore")
# rocketmq_brokeruntime_<name> <- runtime info key (plain numbers)
_RUNTIME_GAUGES = (
    ("msg_put_total_today_now", "msgPutTotalTodayNow"), ("msg_gettotal_today_now", "msgGetTotalTodayNow"),
    ("msg_puttotal_yesterdaymorning", "msgPutTotalYesterdayMorning"),
    ("msg_gettotal_yesterdaymorning", "msgGetTotalYesterdayMorning"),
    ("dispatch_behind_bytes", "dispatchBehindBytes"), ("put_message_size_total", "putMessageSizeTotal"),
    ("put_message_average_size", "putMessageAverageSize"),
    ("earliest_message_timestamp", "earliestMessageTimeStamp"),
    ("putmessage_entire_time_max", "putMessageEntireTimeMax"), ("putmessage_times_total", "putMessageTimesTotal"),
    ("getmessage_entire_time_max", "getMessageEntireTimeMax"),
    ("pagecache_lock_time_mills", "pageCacheLockTimeMills"),
    ("commitlog_disk_ratio", "commitLogDiskRatio"), ("consumequeue_disk_ratio", "consumeQueueDiskRatio"),
    ("dispatch_maxbuffer", "dispatchMaxBuffer"),
    ("start_accept_sendrequest_time", "startAcceptSendRequestTimeStamp"),
    ("send_threadpool_queue_size", "sendThreadPoolQueueSize"),
    ("pull_threadpoolqueue_size", "pullThreadPoolQueueSize"),
    ("query_threadpoolqueue_size", "queryThreadPoolQueueSize"),
    ("send_threadpoolqueue_capacity", "sendThreadPoolQueueCapacity"),
    ("pull_threadpoolqueue_capacity", "pullThreadPoolQueueCapacity"),
    ("query_threadpool_queue_capacity", "queryThreadPoolQueueCapacity"),
    ("remain_transientstore_buffer_numbs", "remainTransientStoreBufferNumbs"))
# rocketmq_brokeruntime_<prefix><window> <- runtime info key holding "r10 r60 r600"
_RUNTIME_RATES = (("put_tps", "putTps"), ("getfound_tps", "getFoundTps"), ("getmiss_tps", "getMissTps"),
                  ("gettotal_tps", "getTotalTps"), ("gettransfered_tps", "getTransferedTps"))


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


class BrokerMetricsCollector:
    """A prometheus-client collector over one broker's services."""

    def __init__(self, *, config: BrokerConfig, store: DefaultMessageStore, stats: BrokerStatsManager,
                 topics: TopicConfigManager, offsets: ConsumerOffsetManager, consumers: ConsumerManager,
                 runtime_info: Callable[[], dict[str, str]]) -> None:
        self.config = config
        self.store = store
        self.stats = stats
        self.topics = topics
        self.offsets = offsets
        self.consumers = consumers
        self.runtime_info = runtime_info

    def _minute(self, stats_name: str, key: str) -> float:
        return self.stats.in_minute(stats_name, key).tps

    def collect(self) -> Iterator[Metric]:
        cluster, broker, addr = self.config.broker_cluster_name, self.config.broker_name, self.config.broker_addr
        yield from self._broker(cluster, broker, addr)
        yield from self._topics(cluster, broker)
        yield from self._groups(cluster, broker)
        yield from self._runtime(cluster, broker, addr)
        yield from self._store(cluster, broker)

    def _broker(self, cluster: str, broker: str, addr: str) -> Iterator[Metric]:
        labels = ["cluster", "brokerIP", "broker"]
        for name, doc, stats_name in (("rocketmq_broker_tps", "BrokerPutNums", BROKER_PUT_NUMS),
                                      ("rocketmq_broker_qps", "BrokerGetNums", BROKER_GET_NUMS)):
            family = GaugeMetricFamily(name, doc, labels=labels)
            family.add_metric([cluster, addr, broker], self._minute(stats_name, cluster))
            yield family

    def _topics(self, cluster: str, broker: str) -> Iterator[Metric]:
        labels = ["cluster", "broker", "topic"]
        put_tps = GaugeMetricFamily("rocketmq_producer_tps", "TopicPutNums", labels=labels)
        put_size = GaugeMetricFamily("rocketmq_producer_message_size", "TopicPutMessageSize", labels=labels)
        offset = GaugeMetricFamily("rocketmq_producer_offset", "TopicOffset", labels=labels)
        store = self.store
        for topic, config in list(self.topics.table.items()):
            values = [cluster, broker, topic]
            put_tps.add_metric(values, self._minute(TOPIC_PUT_NUMS, topic))
            put_size.add_metric(values, self._minute(TOPIC_PUT_SIZE, topic))
            offset.add_metric(values, sum(store.get_max_offset_in_queue(topic, q)
                                          for q in range(config.write_queue_nums)))
        yield from (put_tps, put_size, offset)

    def _groups(self, cluster: str, broker: str) -> Iterator[Metric]:
        labels = ["cluster", "broker", "topic", "group"]
        get_tps = GaugeMetricFamily("rocketmq_consumer_tps", "GroupGetNums", labels=labels)
        get_size = GaugeMetricFamily("rocketmq_consumer_message_size", "GroupGetMessageSize", labels=labels)
        consumer_offset = GaugeMetricFamily("rocketmq_consumer_offset", "GroupBrokerTotalOffset", labels=labels)
        send_back = GaugeMetricFamily("rocketmq_send_back_nums", "SendBackNums", labels=labels)
        lag_time = GaugeMetricFamily("rocketmq_group_get_latency_by_storetime", "GroupGetLatencyByStoreTime",
                                     labels=labels)
        diff = GaugeMetricFamily("rocketmq_group_diff", "GroupDiff (per queue)",
                                 labels=["group", "topic", "countOfOnlineConsumers", "msgModel", "cluster", "broker",
                                         "queueid"])
        latency = GaugeMetricFamily("rocketmq_group_get_latency", "GroupGetLatency",
                                    labels=["cluster", "broker", "topic", "group", "queueid"])
        store = self.store
        now = int(time.time() * 1000)
        for key, queues in list(self.offsets.offset_table.items()):
            topic, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
            config = self.topics.select(topic)
            if config is None or not topic:
                continue
            values = [cluster, broker, topic, group]
            stats_key = topic + TOPIC_GROUP_SEPARATOR + group
            get_tps.add_metric(values, self._minute(GROUP_GET_NUMS, stats_key))
            get_size.add_metric(values, self._minute(GROUP_GET_SIZE, stats_key))
            send_back.add_metric(values, self.stats.in_minute(SNDBCK_PUT_NUMS, stats_key).sum)
            info = self.consumers.groups.get(group)
            online = str(len(info.channels)) if info is not None else "0"
            model = _MESSAGE_MODEL_ORDINAL.get(info.message_model, "") if info is not None else ""
            total = 0
            worst_lag_ms = 0
            for queue_id in range(config.write_queue_nums):
                broker_offset = max(0, store.get_max_offset_in_queue(topic, queue_id))
                position = max(0, queues.get(queue_id, 0))
                total += position
                diff.add_metric([group, topic, online, model, cluster, broker, str(queue_id)],
                                max(0, broker_offset - position))
                latency.add_metric([cluster, broker, topic, group, str(queue_id)],
                                   self._minute(GROUP_GET_LATENCY, f"{queue_id}{TOPIC_GROUP_SEPARATOR}{stats_key}"))
                if position < broker_offset:   # how long its next message has waited
                    stored = store.get_message_store_timestamp(topic, queue_id, position)
                    if stored > 0:
                        worst_lag_ms = max(worst_lag_ms, now - stored)
            consumer_offset.add_metric(values, total)
            lag_time.add_metric(values, worst_lag_ms)
        yield from (get_tps, get_size, consumer_offset, send_back, lag_time, diff, latency)

    def _runtime(self, cluster: str, broker: str, addr: str) -> Iterator[Metric]:
        info = self.runtime_info()
        labels = ["cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"]
        values = [cluster, addr, broker, info.get("brokerVersionDesc", ""), info.get("bootTimestamp", ""),
                  info.get("brokerVersion", "")]

        def gauge(name: str, value: float | None) -> Iterator[Metric]:
            if value is not None:
                family = GaugeMetricFamily(f"rocketmq_brokeruntime_{name}", name, labels=labels)
                family.add_metric(values, value)
                yield family

        for name, key in _RUNTIME_GAUGES:
            yield from gauge(name, _number(info.get(key)))
        for prefix, key in _RUNTIME_RATES:
            for window, text in zip(TPS_WINDOWS_S, (info.get(key) or "").split(" ")):
                yield from gauge(f"{prefix}{window}", _number(text))
        last = self.store.stats.last_put_times or [0] * len(PUT_TIME_DESC)
        for suffix, count in zip(_PMDT_SUFFIXES, last):
            yield from gauge(f"pmdt_{suffix}", count)

    def _store(self, cluster: str, broker: str) -> Iterator[Metric]:
        store = self.store
        labels = ["cluster", "broker"]
        values = [cluster, broker]
        ratios = store.clean_service.disk_ratios
        for name, doc, value in (
                ("pyrmq_store_commitlog_disk_ratio", "Used share of the commit log's file system (0-1)",
                 ratios.commit_log),
                ("pyrmq_store_consumequeue_disk_ratio", "Used share of the consume queues' file system (0-1)",
                 ratios.consume_queue),
                ("pyrmq_store_dispatch_behind_bytes", "Commit log bytes not yet in the consume queues and index",
                 store.reput.behind()),
                ("pyrmq_store_flush_behind_bytes", "Commit log bytes written but not yet synced to disk",
                 flush_behind_bytes(store)),
                ("pyrmq_store_commitlog_min_offset", "First commit log offset still held", store.get_min_phy_offset()),
                ("pyrmq_store_commitlog_max_offset", "Commit log end offset", store.get_max_phy_offset()),
                ("pyrmq_store_earliest_message_timestamp_ms", "Store time of the oldest message held (-1: none)",
                 store.earliest_message_time()),
                ("pyrmq_store_page_cache_hit_ratio",
                 "Share of found reads within the in-memory window (estimate: accessMessageInMemoryMaxRatio of RAM)",
                 store.stats.page_cache_hit_estimate())):
            family = GaugeMetricFamily(name, doc, labels=labels)
            family.add_metric(values, value)
            yield family
        stats = store.stats
        for name, doc, value in (
                ("pyrmq_store_put_messages", "Messages stored", stats.put_times_total()),
                ("pyrmq_store_put_bytes", "Bytes of messages stored", stats.put_size_total()),
                ("pyrmq_store_get_messages", "Messages handed out to pulls", stats.get_transferred_msgs)):
            counter = CounterMetricFamily(name, doc, labels=labels)
            counter.add_metric(values, value)
            yield counter


class MetricsEndpoint:
    """``GET /metrics`` in the Prometheus text format; nothing else."""

    def __init__(self, collector: BrokerMetricsCollector, host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.server = HttpServer(host, port, self._handle, role="metrics", max_body_bytes=0)

    async def _handle(self, request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return HttpResponse(405, b"only GET\n", headers={"allow": "GET, HEAD"})
        if request.path != "/metrics":
            return HttpResponse(404, b"see /metrics\n")
        body = generate_latest(self.registry)
        return HttpResponse(200, b"" if request.method == "HEAD" else body, CONTENT_TYPE_LATEST)

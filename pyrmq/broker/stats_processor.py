"""The broker's figures for operators: GET_BROKER_RUNTIME_INFO (28, mqadmin brokerStatus and
clusterList, the dashboard, rocketmq-exporter), VIEW_BROKER_STATS_DATA (315, mqadmin statsAll)
and GET_BROKER_CONSUME_STATS (317, mqadmin brokerConsumeStats), with Apache 4.9.7's keys, bodies
and remarks."""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING, Callable

from pyrmq.broker.consumer_admin_processor import group_queue_offsets
from pyrmq.codec.admin_bodies import (
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeStats,
    ConsumeStatsList,
    KVTable,
)
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.codec.system_topics import SCHEDULE_TOPIC
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.headers import optional_bool, required_str

if TYPE_CHECKING:
    from pyrmq.broker.broker_stats import BrokerStatsManager, StatsItem
    from pyrmq.broker.client_manager import ConsumerManager
    from pyrmq.broker.config import BrokerConfig
    from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager, SubscriptionGroupManager
    from pyrmq.broker.topic_config import TopicConfigManager
    from pyrmq.store.message_store import DefaultMessageStore

# What a 4.9.8 broker says it is (MQVersion.Version.V4_9_8)
BROKER_VERSION_DESC = "V4_9_8"
BROKER_VERSION = 409
# Apache's thread-pool queue capacities (BrokerConfig defaults). pyrmq has no such pools -- every
# request is handled on the event loop as it is read -- so their sizes and waits are always 0;
# the capacities are reported because mqadmin and rocketmq-exporter read them.
_QUEUE_CAPACITIES = {"sendThreadPoolQueueCapacity": 10000, "pullThreadPoolQueueCapacity": 100000,
                     "queryThreadPoolQueueCapacity": 20000, "EndTransactionThreadPoolQueueCapacity": 100000}
_EMPTY_QUEUES = ("sendThreadPoolQueueSize", "pullThreadPoolQueueSize", "queryThreadPoolQueueSize",
                 "EndTransactionQueueSize", "sendThreadPoolQueueHeadWaitTimeMills",
                 "pullThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills")
# TransientStorePool.availableBufferNums() without a pool: Integer.MAX_VALUE
_NO_TRANSIENT_POOL = 2**31 - 1


def human_readable_bytes(count: int) -> str:
    """Java MixAll.humanReadableByteCount(bytes, false): ``512 B``, ``1.5 KiB``, ``97.9 GiB``."""
    if count < 1024:
        return f"{count} B"
    exp = min(int(math.log(count) / math.log(1024)), 6)
    return f"{count / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def broker_runtime_info(store: DefaultMessageStore, stats: BrokerStatsManager,
                        delay_offsets: Callable[[], dict[int, int]],
                        extra_runtime_info: Callable[[], dict[str, str]] = dict) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's table: Apache's keys and text forms, and the extra keys
    (replication, transactions, alarms); ``delay_offsets`` is the schedule service's progress per
    delay level."""
    now = int(time.time() * 1000)
    info = store.stats.runtime_info(now)
    root = store.config.store_path_root_dir
    # the clean service's last readings (every cleanResourceInterval), as the put path uses
    info["commitLogDiskRatio"] = str(store.clean_service.disk_ratios.commit_log)
    info[f"commitLogDiskRatio_{store.config.commit_log_dir()}"] = info["commitLogDiskRatio"]
    info["consumeQueueDiskRatio"] = str(store.clean_service.disk_ratios.consume_queue)
    for level, offset in sorted(delay_offsets().items()):
        info[f"scheduleMessageOffset_{level}"] = f"{offset},{store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)}"
    info.update(commitLogMinOffset=str(store.get_min_phy_offset()), commitLogMaxOffset=str(store.get_max_phy_offset()),
                brokerVersionDesc=BROKER_VERSION_DESC, brokerVersion=str(BROKER_VERSION))
    info.update(stats.runtime_info())
    info.update({key: "0" for key in _EMPTY_QUEUES})
    info.update({key: str(value) for key, value in _QUEUE_CAPACITIES.items()})
    info.update(
        # a slave's dispatch of replicated bytes into its queues lags by this much
        dispatchBehindBytes=str(store.reput.behind()),
        # puts are synchronous mmap writes on the loop: none is ever in progress when asked
        pageCacheLockTimeMills="0",
        earliestMessageTimeStamp=str(store.earliest_message_time()),
        startAcceptSendRequestTimeStamp="0",
        remainTransientStoreBufferNumbs=str(_NO_TRANSIENT_POOL),
        remainHowManyDataToFlush=human_readable_bytes(flush_behind_bytes(store)))
    if os.path.isdir(root):
        disk = os.statvfs(root)   # one syscall on the store's file system: not a blocking write
        info["commitLogDirCapacity"] = (f"Total : {human_readable_bytes(disk.f_blocks * disk.f_frsize)}, "
                                        f"Free : {human_readable_bytes(disk.f_bavail * disk.f_frsize)}.")
    info.update(extra_runtime_info())
    return info


def flush_behind_bytes(store: DefaultMessageStore) -> int:
    """Commit log bytes written but not yet synced to disk."""
    return max(0, store.get_max_phy_offset() - store.commit_log.flushed_where)


def register_stats_processors(table: ProcessorTable, *, config: BrokerConfig, store: DefaultMessageStore,
                              stats: BrokerStatsManager, topics: TopicConfigManager,
                              groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager,
                              consumers: ConsumerManager, runtime_info_table: Callable[[], dict[str, str]]) -> None:
    """``runtime_info_table`` is GET_BROKER_RUNTIME_INFO's table (:func:`broker_runtime_info`
    over the broker's services)."""

    def runtime_info(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=KVTable(runtime_info_table()).encode())

    def view_broker_stats_data(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        name = required_str(request, "statsName")
        key = required_str(request, "statsKey")
        item = stats.item(name, key)
        if item is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return request.response(ResponseCode.SUCCESS, body=_stats_data(item).encode())

    def broker_consume_stats(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """Every subscription group's lag on this broker, topic by topic (write queues, as Apache)."""
        order_only = optional_bool(request, "isOrder")
        entries = []
        total_diff = 0
        for group in list(groups.table):
            per_topic = []
            for topic in offsets.topics_of_group(group):
                topic_config = topics.select(topic)
                if topic_config is None or (order_only and not topic_config.order) \
                        or not consumers.subscribes(group, topic):
                    continue
                consume_stats = ConsumeStats(
                    group_queue_offsets(store, offsets, config.broker_name, group, topic,
                                        topic_config.write_queue_nums),
                    stats.group_get_tps(group, topic))
                total_diff += consume_stats.total_diff()
                per_topic.append(consume_stats)
            entries.append({group: tuple(per_topic)})
        body = ConsumeStatsList(config.broker_addr, tuple(entries), total_diff)
        return request.response(ResponseCode.SUCCESS, body=body.encode())

    table.register(RequestCode.GET_BROKER_RUNTIME_INFO, runtime_info)
    table.register(RequestCode.VIEW_BROKER_STATS_DATA, view_broker_stats_data)
    table.register(RequestCode.GET_BROKER_CONSUME_STATS, broker_consume_stats)


def _stats_data(item: StatsItem) -> BrokerStatsData:
    def window(snapshot) -> BrokerStatsItem:
        return BrokerStatsItem(snapshot.sum, snapshot.tps, snapshot.avgpt)
    return BrokerStatsData(window(item.in_minute()), window(item.in_hour()), window(item.in_day()))

"""Traffic statistics as mqadmin, the dashboard and rocketmq-exporter read them: the stats items'
minute/hour/day windows (VIEW_BROKER_STATS_DATA), the store's rates and figures
(GET_BROKER_RUNTIME_INFO) and every group's lag (GET_BROKER_CONSUME_STATS), on a real broker. The
sampling clock is driven by the test (``tick``), so no test waits out a window."""

from __future__ import annotations

import time

import pytest
import trio

from pyrmq.broker.broker_stats import BrokerStatsManager, StatsItemSet
from pyrmq.broker.stats_processor import human_readable_bytes
from pyrmq.codec.admin_bodies import BrokerStatsData, ConsumeStatsList, KVTable, MessageQueue
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import BatchEntry, encode_batch, properties_to_string
from pyrmq.codec.remoting import make_request
from pyrmq.codec.text import java_double
from pyrmq.store.store_stats import StoreStats, format_runtime
from tests.broker.rmq import pull, send

# Every key rocketmq-exporter's BrokerRuntimeStats parses as a number (a missing one fails its scrape)
EXPORTER_NUMERIC_KEYS = (
    "msgPutTotalTodayNow", "msgGetTotalTodayNow", "msgPutTotalTodayMorning", "msgGetTotalTodayMorning",
    "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning", "sendThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueSize",
    "pullThreadPoolQueueSize", "sendThreadPoolQueueSize", "bootTimestamp", "commitLogMinOffset",
    "commitLogMaxOffset", "dispatchMaxBuffer", "brokerVersion", "consumeQueueDiskRatio", "commitLogDiskRatio",
    "pageCacheLockTimeMills", "getMessageEntireTimeMax", "putMessageTimesTotal", "startAcceptSendRequestTimeStamp",
    "putMessageEntireTimeMax", "earliestMessageTimeStamp", "remainTransientStoreBufferNumbs",
    "queryThreadPoolQueueCapacity", "putMessageAverageSize", "dispatchBehindBytes", "putMessageSizeTotal",
    "sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity")


def test_stats_item_windows_sum_tps_and_average_per_call():
    items = StatsItemSet("TOPIC_PUT_NUMS")
    t0 = 1_700_000_000_000
    items.add("T", 4)          # a batch of 4: one call
    items.add("T", 1)
    items.sample_minute(t0)    # a new item's window starts from zero 10 s before
    items.add("T", 5)
    items.sample_minute(t0 + 10_000)
    minute = items.items["T"].in_minute()
    assert (minute.sum, minute.times) == (10, 3)
    assert minute.tps == 10 * 1000 / 20_000 and minute.avgpt == 10 / 3
    for i in range(2, 9):      # 7 snapshots are kept: the minute window slides
        items.sample_minute(t0 + i * 10_000)
    assert items.items["T"].in_minute().sum == 0
    assert items.items["T"].in_hour().sum == 0      # never sampled: an empty window


def test_a_sends_items_are_counted_and_start_again_after_their_topic_is_forgotten():
    manager = BrokerStatsManager("C", StoreStats(boot_timestamp_ms=0))
    manager.on_put("T", 4, 400)   # a batch of 4: one call
    manager.on_put("T", 1, 100)
    manager.on_topic_put("T", 1, 50)   # a send-back's store counts the topic only
    assert (manager.item("TOPIC_PUT_NUMS", "T").value, manager.item("TOPIC_PUT_NUMS", "T").times) == (6, 3)
    assert (manager.item("TOPIC_PUT_SIZE", "T").value, manager.item("TOPIC_PUT_SIZE", "T").times) == (550, 3)
    assert (manager.item("BROKER_PUT_NUMS", "C").value, manager.item("BROKER_PUT_NUMS", "C").times) == (5, 2)
    manager.on_topic_deleted("T")
    assert manager.item("TOPIC_PUT_NUMS", "T") is None
    manager.on_put("T", 2, 20)
    assert (manager.item("TOPIC_PUT_NUMS", "T").value, manager.item("TOPIC_PUT_SIZE", "T").value) == (2, 20)
    assert manager.item("BROKER_PUT_NUMS", "C").value == 7


def test_store_rates_are_empty_until_their_window_is_covered():
    stats = StoreStats(boot_timestamp_ms=0)
    t0 = 1_700_000_000_000
    for second in range(11):
        stats.sample(t0 + second * 1000)
        stats.on_put(1, 100, 0)
        stats.on_get(2, 0)
        stats.on_get(0, 0)
    info = stats.runtime_info(t0 + 11_000)
    # one put a second over the last 10 s; 60 and 600 s not covered yet (Apache prints nothing)
    assert info["putTps"] == "1.0  "
    assert info["getTransferedTps"] == "2.0  "
    assert info["getFoundTps"] == "1.0  "
    assert info["getMissTps"] == info["getTotalTps"] == "2.0 0.0 0.0"   # found + missed, as Apache
    assert (info["putMessageTimesTotal"], info["putMessageSizeTotal"], info["putMessageAverageSize"]) == \
        ("11", "1100", "100.0")
    assert info["putMessageDistributeTime"] == "null"      # before the first minute's rotation
    stats.rotate_put_times()
    info = stats.runtime_info(t0 + 61_000)
    assert info["putMessageDistributeTime"].startswith("[<=0ms]:11 [0~10ms]:0 ")
    assert info["putLatency99"] == "0.91"   # the 10th of 11 puts, within the first 1 ms bucket


def test_put_time_distribution_and_percentiles():
    stats = StoreStats(boot_timestamp_ms=0)
    for elapsed in [0] * 90 + [5] * 9 + [1500]:
        stats.on_put(1, 10, elapsed)
    stats.rotate_put_times()
    assert stats.last_put_times == [90, 9, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    assert stats.put_entire_time_max_ms == 1500
    assert stats.put_latency_percentile(0.99) == 5.0      # the 99th of 100 is the last 5 ms put
    assert stats.put_latency_percentile(0.5) < 1.0


def test_text_forms_match_java():
    assert format_runtime(((2 * 24 + 3) * 3600 + 4 * 60 + 5) * 1000) == "[ 2 days, 3 hours, 4 minutes, 5 seconds ]"
    assert [human_readable_bytes(n) for n in (0, 1023, 1024, 1536, 100 * 2**30)] == \
        ["0 B", "1023 B", "1.0 KiB", "1.5 KiB", "100.0 GiB"]
    assert [java_double(v) for v in (0.0, 2.5, 0.0005, 1.5e7)] == ["0.0", "2.5", "5.0E-4", "1.5E7"]


def test_daily_totals_roll_over_at_midnight():
    store = StoreStats(boot_timestamp_ms=0)
    manager = BrokerStatsManager("C", store)
    store.on_put(3, 30, 0)
    store.on_get(2, 0)
    manager.record_morning()
    store.on_put(1, 10, 0)
    manager.record_morning()
    info = manager.runtime_info()
    assert (info["msgPutTotalYesterdayMorning"], info["msgPutTotalTodayMorning"], info["msgPutTotalTodayNow"]) == \
        ("3", "4", "4")
    assert (info["msgGetTotalYesterdayMorning"], info["msgGetTotalTodayMorning"]) == ("2", "2")


async def _admin(cluster, code: int, header: dict[str, str] | None = None):
    return await cluster.client.invoke(cluster.broker_addr, make_request(code, header or {}), timeout=5)


async def test_broker_counts_sends_and_pulls(cluster):
    addr = cluster.broker_addr
    with trio.fail_after(20):
        for i in range(6):
            assert (await send(cluster.client, addr, "TopicS", b"x" * (10 + i), queue_id=0)).code == 0
        entries = [BatchEntry(0, f"b{i}".encode(), properties_to_string({"UNIQ_KEY": f"U{i}"})) for i in range(4)]
        resp = await send(cluster.client, addr, "TopicS", encode_batch(entries),
                          code=RequestCode.SEND_BATCH_MESSAGE, batch=True, queue_id=1)
        assert resp.code == 0, resp.remark
        resp, messages = await pull(cluster.client, addr, "TopicS", 0, 0, group="g1")
        assert len(messages) == 6
        resp = await _admin(cluster, RequestCode.UPDATE_CONSUMER_OFFSET,
                            {"consumerGroup": "g1", "topic": "TopicS", "queueId": "0", "commitOffset": "4"})
        assert resp.code == 0

        stats = cluster.broker.stats
        now = int(time.time() * 1000)
        stats.tick(0, now)           # the sampling clock's first second: every window starts
        stats.tick(10, now + 10_000)

        resp = await _admin(cluster, RequestCode.VIEW_BROKER_STATS_DATA,
                            {"statsName": "TOPIC_PUT_NUMS", "statsKey": "TopicS"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        data = BrokerStatsData.decode(resp.body)
        # 7 sends (6 single, one batch of 4): 10 messages
        assert (data.stats_minute.sum, data.stats_hour.sum, data.stats_day.sum) == (10, 10, 10)
        assert data.stats_minute.avgpt == 10 / 7 and data.stats_minute.tps > 0
        resp = await _admin(cluster, RequestCode.VIEW_BROKER_STATS_DATA,
                            {"statsName": "GROUP_GET_NUMS", "statsKey": "TopicS@g1"})
        assert BrokerStatsData.decode(resp.body).stats_minute.sum == 6
        resp = await _admin(cluster, RequestCode.VIEW_BROKER_STATS_DATA,
                            {"statsName": "BROKER_PUT_NUMS", "statsKey": "DefaultCluster"})
        assert BrokerStatsData.decode(resp.body).stats_minute.sum == 10
        resp = await _admin(cluster, RequestCode.VIEW_BROKER_STATS_DATA,
                            {"statsName": "TOPIC_PUT_NUMS", "statsKey": "Nope"})
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <Nope> not exist")

        resp = await _admin(cluster, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        body = ConsumeStatsList.decode(resp.body)
        assert body.broker_addr == addr
        (g1,) = [entry["g1"] for entry in body.consume_stats_list if "g1" in entry]
        (consume_stats,) = g1
        table = consume_stats.offset_table
        assert sorted(mq.queue_id for mq in table) == [0, 1, 2, 3]     # the topic's write queues
        assert (table[MessageQueue("TopicS", "broker-a", 0)].broker_offset,
                table[MessageQueue("TopicS", "broker-a", 0)].consumer_offset) == (6, 4)
        assert table[MessageQueue("TopicS", "broker-a", 0)].last_timestamp == messages[3].store_timestamp
        assert body.total_diff == 2 + 4 and consume_stats.consume_tps > 0

        resp = await _admin(cluster, RequestCode.GET_BROKER_RUNTIME_INFO)
        info = KVTable.decode(resp.body).table
        for key in EXPORTER_NUMERIC_KEYS:
            float(info[key])
        assert (info["msgPutTotalTodayNow"], info["msgGetTotalTodayNow"]) == ("10", "6")
        assert info["earliestMessageTimeStamp"] == str(messages[0].store_timestamp)
        assert info["commitLogDirCapacity"].startswith("Total : ") and " GiB, Free : " in info["commitLogDirCapacity"]
        assert info["runtime"].startswith("[ 0 days, 0 hours, ")
        assert info["remainHowManyDataToFlush"].endswith("B")


async def _put_stats_exist(cluster, topic: str) -> bool:
    resp = await _admin(cluster, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": topic})
    return resp.code == ResponseCode.SUCCESS


async def test_deleted_topic_keeps_its_stats_by_default(cluster):
    """Apache's autoDeleteUnusedStats is off by default: statsAll still finds a deleted topic."""
    with trio.fail_after(10):
        assert (await send(cluster.client, cluster.broker_addr, "TopicGone", b"x")).code == 0
        assert (await _admin(cluster, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TopicGone"})).code == 0
        assert await _put_stats_exist(cluster, "TopicGone")


@pytest.mark.parametrize("broker_overrides", [{"autoDeleteUnusedStats": "true"}])
async def test_auto_delete_unused_stats_forgets_deleted_topics_and_groups(cluster):
    addr = cluster.broker_addr
    with trio.fail_after(10):
        assert (await send(cluster.client, addr, "TopicGone", b"x")).code == 0
        resp, messages = await pull(cluster.client, addr, "TopicGone", 0, 0, group="gGone")
        assert len(messages) == 1
        assert (await _admin(cluster, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "gGone"})).code == 0
        assert cluster.broker.stats.item("GROUP_GET_NUMS", "TopicGone@gGone") is None
        assert await _put_stats_exist(cluster, "TopicGone")
        assert (await _admin(cluster, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TopicGone"})).code == 0
        assert not await _put_stats_exist(cluster, "TopicGone")

"""The broker-side surface of master/slave: the master's config tables (43, 45, 201), group
administration (200, 207), a slave's refusals, its config sync from the master, the pull's
suggestWhichBrokerId and the replication keys of the runtime info -- a real master and slave
(in-process, one NameServer, real ports and files)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
import trio

from pyrmq.broker.config import build_config
from pyrmq.broker.controller import BrokerController
from pyrmq.broker.group_admin_processor import SLAVE_REMARK
from pyrmq.broker.offsets_and_groups import SubscriptionGroupConfig
from pyrmq.broker.pull_processor import suggest_which_broker_id
from pyrmq.codec import fastjson
from pyrmq.codec.admin_bodies import KVTable
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import make_request
from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController
from pyrmq.remoting.client import RemotingClient
from tests.broker.conftest import broker_properties
from tests.broker.rmq import pull, send

GROUP = "cg_slave_surface"


@dataclass
class Pair:
    master: BrokerController
    slave: BrokerController
    client: RemotingClient

    @property
    def master_addr(self) -> str:
        return self.master.config.broker_addr

    @property
    def slave_addr(self) -> str:
        return self.slave.config.broker_addr

    async def call(self, addr: str, code: int, fields: dict[str, str] | None = None, body: bytes | None = None):
        return await self.client.invoke(addr, make_request(code, fields, body), timeout=10)


@asynccontextmanager
async def master_and_slave(tmp_path, master_extra=None, slave_extra=None):
    async with trio.open_nursery() as nursery:
        namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                                  kv_config_path=str(tmp_path / "kv.json")))
        await nursery.start(namesrv.run)
        master = BrokerController(build_config(broker_properties(tmp_path / "m", namesrv.port, **(master_extra or {}))))
        await nursery.start(master.run)
        slave = BrokerController(build_config(broker_properties(
            tmp_path / "s", namesrv.port, brokerId=1, brokerRole="SLAVE", **(slave_extra or {}))))
        await nursery.start(slave.run)
        try:
            async with RemotingClient() as client:
                yield Pair(master, slave, client)
        finally:
            for broker in (slave, master):
                broker.stop()
                await broker.wait_stopped()
            namesrv.server.close()
            nursery.cancel_scope.cancel()


async def test_master_answers_the_config_tables(tmp_path):
    async with master_and_slave(tmp_path) as pair:
        resp = await pair.call(pair.master_addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                               {"consumerGroup": GROUP, "topic": "TopicA", "queueId": "2", "commitOffset": "7"})
        assert resp.code == 0, resp.remark
        offsets = await pair.call(pair.master_addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        assert offsets.code == 0 and offsets.remark is None
        # fastjson writes Map<Integer, Long> keys unquoted
        assert b'"TopicA@cg_slave_surface":{2:7}' in offsets.body
        delay = await pair.call(pair.master_addr, RequestCode.GET_ALL_DELAY_OFFSET)
        assert delay.code == 0 and delay.body == b'{"offsetTable":{}}'
        groups = await pair.call(pair.master_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        obj = fastjson.loads(groups.body)
        assert set(obj) == {"dataVersion", "subscriptionGroupTable"}
        assert obj["subscriptionGroupTable"]["TOOLS_CONSUMER"] == SubscriptionGroupConfig("TOOLS_CONSUMER").to_json()
        topics = await pair.call(pair.master_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert set(fastjson.loads(topics.body)) == {"dataVersion", "topicConfigTable"}


async def test_group_admin_on_master_and_refusals_on_slave(tmp_path):
    async with master_and_slave(tmp_path) as pair:
        config = SubscriptionGroupConfig(GROUP, broker_id=1, which_broker_when_consume_slowly=1)
        before = pair.master.subscription_group_manager.data_version.counter
        resp = await pair.call(pair.master_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                               body=fastjson.dumps(config.to_json()).encode())
        assert resp.code == 0, resp.remark
        assert pair.master.subscription_group_manager.table[GROUP] == config
        assert pair.master.subscription_group_manager.data_version.counter == before + 1
        assert GROUP in (tmp_path / "m" / "store" / "config" / "subscriptionGroup.json").read_text()
        pair.master.consumer_offset_manager.commit_offset(GROUP, "TopicA", 0, 3)
        resp = await pair.call(pair.master_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                               {"groupName": GROUP, "removeOffset": "true"})
        assert resp.code == 0 and GROUP not in pair.master.subscription_group_manager.table
        assert pair.master.consumer_offset_manager.query_offset(GROUP, "TopicA", 0) == -1

        writes = [(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T1", "readQueueNums": "4", "writeQueueNums": "4",
                                                         "perm": "6", "topicFilterType": "SINGLE_TAG"}, None),
                  (RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T1"}, None),
                  (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, fastjson.dumps(config.to_json()).encode()),
                  (RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": GROUP}, None)]
        for code, fields, body in writes:
            resp = await pair.call(pair.slave_addr, code, fields, body)
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK), code
        resp = await send(pair.client, pair.slave_addr, "TopicA", b"x")
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert resp.remark.startswith("service not available now. It may be caused by one of the following reasons: "
                                      "the broker's disk is full [")
        assert pair.slave.store.get_max_phy_offset() == 0


async def test_slave_copies_the_masters_tables(tmp_path):
    async with master_and_slave(tmp_path) as pair:
        master, slave = pair.master, pair.slave
        with trio.fail_after(10):
            while slave.registration.master_addr != pair.master_addr:
                await slave.registration.register_all(pair.client)
                await trio.sleep(0.05)
        assert slave.slave_sync.master() == pair.master_addr
        resp = await pair.call(pair.master_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "SyncTopic", "readQueueNums": "3", "writeQueueNums": "3", "perm": "6",
            "topicFilterType": "SINGLE_TAG"})
        assert resp.code == 0
        master.subscription_group_manager.update(SubscriptionGroupConfig(GROUP, which_broker_when_consume_slowly=1))
        master.consumer_offset_manager.commit_offset(GROUP, "SyncTopic", 1, 42)
        master.schedule_service.offsets.offset_table.update({1: 5, 3: 9})
        slave.consumer_offset_manager.commit_offset("only_on_slave", "X", 0, 1)   # merged, not dropped

        await slave.slave_sync.sync_all(pair.client)
        assert slave.topic_config_manager.table == master.topic_config_manager.table
        assert slave.topic_config_manager.data_version.to_json() == master.topic_config_manager.data_version.to_json()
        assert slave.subscription_group_manager.table == master.subscription_group_manager.table
        assert slave.consumer_offset_manager.query_offset(GROUP, "SyncTopic", 1) == 42
        assert slave.consumer_offset_manager.query_offset("only_on_slave", "X", 0) == 1
        assert slave.schedule_service.offset_table == {1: 5, 3: 9}
        assert slave.slave_sync.master_offset == master.store.get_max_phy_offset()
        assert await slave.config_persister.wait_written()
        config_dir = tmp_path / "s" / "store" / "config"
        assert "SyncTopic" in (config_dir / "topics.json").read_text()
        assert GROUP in (config_dir / "subscriptionGroup.json").read_text()
        assert fastjson.loads((config_dir / "delayOffset.json").read_text())["offsetTable"] == {1: 5, 3: 9}
        assert '"SyncTopic@cg_slave_surface":{1:42}' in (config_dir / "consumerOffset.json").read_text().replace(
            " ", "").replace("\n", "").replace("\t", "")

        # the same dataVersion: a table the slave changed itself is left alone (Apache's rule)
        slave.topic_config_manager.table.pop("SyncTopic")
        await slave.slave_sync.sync_all(pair.client)
        assert "SyncTopic" not in slave.topic_config_manager.table

        info = KVTable.decode((await pair.call(pair.slave_addr, RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
        assert info["masterAddr"] == pair.master_addr
        assert info["masterOffset"] == str(master.store.get_max_phy_offset())
        assert info["slaveFallBehindMuch"] == str(master.store.get_max_phy_offset() - slave.store.get_max_phy_offset())
        assert "dispatchBehindBytes" in info
        with trio.fail_after(10):
            while not (slave.ha_client.connected and master.ha_service.connection_count == 1):
                await trio.sleep(0.05)
        info = KVTable.decode((await pair.call(pair.slave_addr, RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
        assert info["haConnected"] == "true" and info["haMasterAddress"] == slave.ha_client.master_ha_address
        info = KVTable.decode((await pair.call(pair.master_addr, RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
        assert info["haConnectionCount"] == "1"
        assert info["push2SlaveMaxOffset"] == str(master.ha_service.push2slave_max_offset)
        assert info["slaveFallBehindMuch"] == str(master.ha_service.slave_fall_behind())


async def test_sync_skips_without_master_and_survives_a_dead_one(tmp_path):
    async with master_and_slave(tmp_path) as pair:
        sync = pair.slave.slave_sync
        pair.slave.registration.master_addr = pair.slave_addr       # itself: no round
        await sync.sync_all(pair.client)
        assert sync.rounds == 0
        pair.slave.registration.master_addr = None
        await sync.sync_all(pair.client)
        assert sync.rounds == 0
        with socket_closed_port() as dead:
            pair.slave.registration.master_addr = dead
            await sync.sync_all(pair.client)     # every step fails, contained
        assert sync.rounds == 1
        assert all(guard.failures == 1 for guard in sync._guards.values())


class socket_closed_port:
    """A loopback address nobody listens on."""

    def __enter__(self) -> str:
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return f"127.0.0.1:{s.getsockname()[1]}"

    def __exit__(self, *exc) -> None:
        return None


@pytest.mark.parametrize("enabled,in_disk,expected", [
    (False, True, 0), (False, False, 0), (True, True, 3), (True, False, 2)])
def test_suggest_which_broker_id(enabled, in_disk, expected):
    group = SubscriptionGroupConfig("g", broker_id=2, which_broker_when_consume_slowly=3)
    assert suggest_which_broker_id(enabled, in_disk, group) == expected


async def test_pull_suggestions_on_master_and_slave(tmp_path):
    # accessMessageInMemoryMaxRatio=0: every message before the commit log's tail counts as "in disk"
    async with master_and_slave(tmp_path, master_extra={"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": "0"},
                                slave_extra={"slaveReadEnable": "true"}) as pair:
        for i in range(4):
            assert (await send(pair.client, pair.master_addr, "PullTopic", b"m%d" % i)).code == 0
        pair.master.subscription_group_manager.update(
            SubscriptionGroupConfig(GROUP, broker_id=0, which_broker_when_consume_slowly=1))
        resp, messages = await pull(pair.client, pair.master_addr, "PullTopic", 0, 0, group=GROUP, max_nums=1)
        assert resp.code == 0 and resp.ext_fields["suggestWhichBrokerId"] == "1"      # behind: the slave
        # as Apache, the distance is counted from the last message pulled's start: with ratio 0 even
        # the newest counts as in disk; with the default 40 % of RAM it is in memory
        resp, messages = await pull(pair.client, pair.master_addr, "PullTopic", 0, 3, group=GROUP, max_nums=1)
        assert resp.code == 0 and resp.ext_fields["suggestWhichBrokerId"] == "1"
        pair.master.store.pull_scanner.memory_limit = 1 << 30
        pair.master.subscription_group_manager.update(
            SubscriptionGroupConfig(GROUP, broker_id=2, which_broker_when_consume_slowly=1))
        resp, messages = await pull(pair.client, pair.master_addr, "PullTopic", 0, 0, group=GROUP, max_nums=1)
        assert resp.code == 0 and resp.ext_fields["suggestWhichBrokerId"] == "2"      # in memory: brokerId

        # an offset past the slave's queue (it may lag its master): not OFFSET_MOVED but retry, offset kept
        pair.slave.topic_config_manager.update(pair.master.topic_config_manager.table["PullTopic"])
        pair.slave.subscription_group_manager.update(SubscriptionGroupConfig(GROUP, broker_id=0))
        resp, _ = await pull(pair.client, pair.slave_addr, "PullTopic", 0, 1000, group=GROUP)
        assert (resp.code, resp.ext_fields["suggestWhichBrokerId"]) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "0")
        assert resp.ext_fields["nextBeginOffset"] == "1000"      # not corrected on a slave
        pair.slave.store.config.offset_check_in_slave = True
        resp, _ = await pull(pair.client, pair.slave_addr, "PullTopic", 0, 1000, group=GROUP)
        assert (resp.code, resp.ext_fields["nextBeginOffset"]) == (
            ResponseCode.PULL_OFFSET_MOVED, str(pair.slave.store.get_max_offset_in_queue("PullTopic", 0)))

"""A pyrmq master and a pyrmq slave in one process, over real sockets: the slave finds the master
through the NameServer, copies its commit log byte for byte and builds its own consume queues;
SYNC_MASTER sends wait for the slave; a slave restarted mid-way resumes from its own end; a slave
ahead of its master is refused."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import trio

from pyrmq.broker.config import build_config
from pyrmq.broker.controller import BrokerController
from pyrmq.codec.codes import ResponseCode
from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController
from pyrmq.remoting.client import RemotingClient
from tests.broker.conftest import broker_properties
from pyrmq.codec.message import decode_messages
from tests.broker.rmq import send

FILE_SIZE = 64 * 1024


def commit_log_bytes(store_root: Path, start: int, end: int) -> bytes:
    """The commit log's bytes [start, end) read from its files."""
    out = bytearray()
    directory = store_root / "commitlog"
    offset = start
    while offset < end:
        base = offset - offset % FILE_SIZE
        with open(directory / f"{base:020d}", "rb") as f:
            f.seek(offset - base)
            chunk = f.read(min(end, base + FILE_SIZE) - offset)
        out += chunk
        offset += len(chunk)
    return bytes(out)


class Pair:
    def __init__(self, nursery: trio.Nursery, tmp_path: Path, namesrv_port: int) -> None:
        self.nursery = nursery
        self.tmp_path = tmp_path
        self.namesrv_port = namesrv_port
        self.master: BrokerController | None = None
        self.slave: BrokerController | None = None

    def props(self, name: str, **overrides) -> dict[str, str]:
        props = broker_properties(self.tmp_path / name, self.namesrv_port,
                                  mappedFileSizeCommitLog=FILE_SIZE, haSendHeartbeatInterval=500,
                                  **overrides)
        return props

    async def start(self, name: str, **overrides) -> BrokerController:
        broker = BrokerController(build_config(self.props(name, **overrides)))
        await self.nursery.start(broker.run)
        return broker

    async def start_master(self, role: str = "ASYNC_MASTER", **overrides) -> BrokerController:
        self.master = await self.start("master", brokerRole=role, **overrides)
        return self.master

    async def start_slave(self, **overrides) -> BrokerController:
        self.slave = await self.start("slave", brokerRole="SLAVE", brokerId=1, **overrides)
        return self.slave

    async def stop(self, broker: BrokerController) -> None:
        broker.stop()
        await broker.wait_stopped()


@pytest.fixture
async def pair(nursery, tmp_path):
    namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                              kv_config_path=str(tmp_path / "kv.json")))
    await nursery.start(namesrv.run)
    p = Pair(nursery, tmp_path, namesrv.port)
    yield p
    for broker in (p.slave, p.master):
        if broker is not None and not broker._stopped.is_set():
            await p.stop(broker)
    namesrv.server.close()


async def wait_caught_up(master: BrokerController, slave: BrokerController, timeout: float = 20) -> None:
    with trio.fail_after(timeout):
        while slave.store.get_max_phy_offset() != master.store.get_max_phy_offset():
            await trio.sleep(0.02)


async def test_slave_copies_the_commit_log_and_serves_pulls(pair):
    master = await pair.start_master()
    async with RemotingClient() as client:
        for i in range(200):   # ~3 files of 64 KiB
            response = await send(client, master.config.broker_addr, "HaTopic", f"message {i} ".encode() * 60,
                                  queue_id=i % 2)
            assert response.code == ResponseCode.SUCCESS
        slave = await pair.start_slave()
        await wait_caught_up(master, slave)
        end = master.store.get_max_phy_offset()
        start = slave.store.get_min_phy_offset()
        # a new slave starts at the master's last file
        assert start == end - end % FILE_SIZE and start > 0
        assert commit_log_bytes(pair.tmp_path / "slave" / "store", start, end) == \
            commit_log_bytes(pair.tmp_path / "master" / "store", start, end)
        # then everything sent now is copied too, and the slave's queues serve it
        for i in range(200, 260):
            await send(client, master.config.broker_addr, "HaTopic", f"message {i} ".encode() * 60, queue_id=i % 2)
        await wait_caught_up(master, slave)
        end = master.store.get_max_phy_offset()
        assert commit_log_bytes(pair.tmp_path / "slave" / "store", start, end) == \
            commit_log_bytes(pair.tmp_path / "master" / "store", start, end)
        for queue_id in (0, 1):
            max_offset = master.store.get_max_offset_in_queue("HaTopic", queue_id)
            assert slave.store.get_max_offset_in_queue("HaTopic", queue_id) == max_offset == 130
            # (read from the store: pulling from a slave needs the topic config it syncs from its master)
            result = slave.store.get_message("g", "HaTopic", queue_id, 120, 32, None)
            messages = decode_messages(b"".join(result.buffers))
            assert [m.body for m in messages] == [f"message {i} ".encode() * 60 for i in range(240 + queue_id, 260, 2)]
            assert [m.queue_offset for m in messages] == list(range(120, 130))
        assert master.ha_service.connection_count == 1
        with trio.fail_after(10):   # the slave's report follows its append
            while master.ha_service.push2slave_max_offset != end:
                await trio.sleep(0.02)
        assert slave.ha_client.connected and slave.ha_client.reported_offset == end


async def test_sync_master_waits_for_the_slave_and_reports_its_absence(pair):
    master = await pair.start_master("SYNC_MASTER", slaveTimeout=1000)
    async with RemotingClient() as client:
        # no slave: stored, answered SLAVE_NOT_AVAILABLE with the message's ids (as Apache)
        response = await send(client, master.config.broker_addr, "SyncTopic", b"alone")
        assert response.code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert response.ext_fields["queueOffset"] == "0" and response.ext_fields["msgId"]
        slave = await pair.start_slave()
        with trio.fail_after(10):
            while master.ha_service.connection_count == 0:
                await trio.sleep(0.02)
        await wait_caught_up(master, slave)
        for i in range(20):
            response = await send(client, master.config.broker_addr, "SyncTopic", b"replicated %d" % i)
            assert response.code == ResponseCode.SUCCESS
            # SEND_OK under SYNC_MASTER: the slave has it already
            assert slave.store.get_max_phy_offset() >= master.store.get_max_phy_offset()
        # a slave that stops acknowledging (its connection stays open): FLUSH_SLAVE_TIMEOUT
        with _frozen_slave(slave):
            response = await send(client, master.config.broker_addr, "SyncTopic", b"unacknowledged")
            assert response.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
        # the slave gone: SLAVE_NOT_AVAILABLE again
        await pair.stop(slave)
        with trio.fail_after(10):
            while master.ha_service.connection_count:
                await trio.sleep(0.02)
        response = await send(client, master.config.broker_addr, "SyncTopic", b"after")
        assert response.code == ResponseCode.SLAVE_NOT_AVAILABLE


@contextlib.contextmanager
def _frozen_slave(slave: BrokerController):
    """The slave keeps its connection but appends nothing (as a slave whose disk hangs)."""
    append = slave.store.append_data
    frozen: list[tuple[int, bytes]] = []
    slave.store.append_data = lambda offset, data: frozen.append((offset, bytes(data))) or True
    try:
        yield
    finally:
        slave.store.append_data = append


async def test_restarted_slave_resumes_from_its_own_end(pair):
    master = await pair.start_master()
    async with RemotingClient() as client:
        slave = await pair.start_slave()
        for i in range(100):
            await send(client, master.config.broker_addr, "ResumeTopic", b"first %d" % i)
        await wait_caught_up(master, slave)
        middle = slave.store.get_max_phy_offset()
        await pair.stop(slave)
        for i in range(100):
            await send(client, master.config.broker_addr, "ResumeTopic", b"second %d" % i)
        slave = await pair.start_slave()
        await wait_caught_up(master, slave)
        end = master.store.get_max_phy_offset()
        assert slave.store.get_min_phy_offset() == 0 and middle < end
        assert commit_log_bytes(pair.tmp_path / "slave" / "store", 0, end) == \
            commit_log_bytes(pair.tmp_path / "master" / "store", 0, end)
        assert slave.store.get_max_offset_in_queue("ResumeTopic", 0) == 200


async def test_a_slave_ahead_of_its_master_is_disconnected(pair, caplog):
    # the slave has more than the master ever wrote: the master never serves it
    slave = await pair.start_slave(haMasterAddress="127.0.0.1:1")   # nowhere yet
    async with RemotingClient() as client:
        master = await pair.start_master()
        for i in range(10):
            await send(client, master.config.broker_addr, "AheadTopic", b"m %d" % i)
        await pair.stop(slave)
        # the slave's store gets 30 more messages of its own (as if it once followed another master)
        slave_alone = await pair.start("slave", brokerRole="ASYNC_MASTER", namesrvAddr="")
        for i in range(30):
            await send(client, slave_alone.config.broker_addr, "AheadTopic", b"other %d" % i)
        await pair.stop(slave_alone)
        slave = await pair.start_slave(haMasterAddress=f"127.0.0.1:{master.ha_service.port}")
        with trio.fail_after(10):
            while "ahead of this master" not in caplog.text:
                await trio.sleep(0.05)
        assert master.ha_service.connection_count == 0
        assert master.ha_service.push2slave_max_offset == 0


async def test_the_ha_port_drops_a_peer_that_is_not_a_slave(pair, caplog):
    master = await pair.start_master()
    async with RemotingClient() as client:
        await send(client, master.config.broker_addr, "HostileTopic", b"before")
        with trio.fail_after(10):
            stream = await trio.open_tcp_stream("127.0.0.1", master.ha_service.port)
            await stream.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert await stream.receive_some(100) == b""    # closed, nothing served
            await stream.aclose()
        assert "ahead of this master" in caplog.text
        assert master.ha_service.connection_count == 0
        # a report cut short is held, never served, and the connection is the only casualty
        with trio.fail_after(10):
            stream = await trio.open_tcp_stream("127.0.0.1", master.ha_service.port)
            await stream.send_all(b"\x00\x00\x00")
            await trio.sleep(0.2)
            assert master.ha_service.connection_count == 1
            await stream.aclose()
        response = await send(client, master.config.broker_addr, "HostileTopic", b"after")
        assert response.code == ResponseCode.SUCCESS


async def test_a_slave_drops_a_master_that_sends_garbage_and_reconnects(pair, nursery, caplog):
    connections = []

    async def fake_master(stream):
        connections.append(stream)
        assert len(await stream.receive_some(8)) == 8          # the slave's report
        await stream.send_all(b"\x00" * 8 + b"\x7f\xff\xff\xff")  # a transfer of 2 GiB
        with trio.move_on_after(5):
            assert await stream.receive_some(100) == b""      # the slave hangs up

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    nursery.start_soon(trio.serve_listeners, fake_master, listeners)
    slave = await pair.start_slave(haMasterAddress=f"127.0.0.1:{port}")
    with trio.fail_after(10):
        while len(connections) < 2:      # dropped, then back after a second
            await trio.sleep(0.05)
    assert "outside 0..4194304" in caplog.text
    assert slave.store.get_max_phy_offset() == 0

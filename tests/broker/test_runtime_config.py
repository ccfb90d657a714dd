"""UPDATE_BROKER_CONFIG (25): only runtime-safe keys change, each takes effect at once, and the
change is written into the -c file; process-, path- and start-up keys are refused with 16."""

from __future__ import annotations

import pytest
import trio

from pyrmq.broker.config import load_config_file
from pyrmq.broker.controller import BrokerController
from pyrmq.broker.runtime_config import APACHE_BLACK_LIST_REMARK, RUNTIME_KEYS
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.java_properties import parse_properties, update_properties
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from tests.broker.conftest import broker_properties
from tests.broker.rmq import send


async def update(client: RemotingClient, addr: str, text: str):
    return await client.invoke(addr, make_request(RequestCode.UPDATE_BROKER_CONFIG, {}, text.encode()), timeout=10)


async def broker_config(client: RemotingClient, addr: str) -> dict[str, str]:
    response = await client.invoke(addr, make_request(RequestCode.GET_BROKER_CONFIG, {}), timeout=10)
    return parse_properties(response.body.decode())


def test_update_properties_rewrites_lines_in_place_and_appends_new_keys():
    text = "# my broker\nbrokerName = b1\nfileReservedTime: 72\n\n! old\ndeleteWhen=04\n"
    assert update_properties(text, {"fileReservedTime": "1", "brokerPermission": "4"}) == (
        "# my broker\nbrokerName = b1\nfileReservedTime=1\n\n! old\ndeleteWhen=04\nbrokerPermission=4\n")


@pytest.mark.parametrize("text, code, remark", [
    ("filterServerNums=1\n", ResponseCode.NO_PERMISSION, "Can not update config filterServerNums at runtime"),
    ("rocketmqHome=/tmp/x\n", ResponseCode.NO_PERMISSION, APACHE_BLACK_LIST_REMARK),
    ("brokerConfigPath=/etc/cron.d/x\n", ResponseCode.NO_PERMISSION, APACHE_BLACK_LIST_REMARK),
    ("storePathRootDir=/tmp/elsewhere\n", ResponseCode.NO_PERMISSION, "Can not update config storePathRootDir"),
    ("listenPort=1\n", ResponseCode.NO_PERMISSION, "Can not update config listenPort"),
    ("noSuchKey=1\n", ResponseCode.NO_PERMISSION, "Can not update config noSuchKey"),
    # one refused key: nothing of the request is applied
    ("fileReservedTime=1\nfilterServerNums=2\n", ResponseCode.NO_PERMISSION, "filterServerNums"),
    ("brokerPermission=5\n", ResponseCode.SYSTEM_ERROR, "brokerPermission must be one of 0, 2, 4, 6"),
    ("fileReservedTime=abc\n", ResponseCode.SYSTEM_ERROR, "bad value 'abc' for fileReservedTime"),
    ("deleteWhen=25\n", ResponseCode.SYSTEM_ERROR, "deleteWhen='25' must be hours of the day"),
    ("transactionCheckInterval=0\n", ResponseCode.SYSTEM_ERROR, "transactionCheckInterval must be positive"),
])
async def test_refused_updates_change_nothing(cluster, text, code, remark):
    before = await broker_config(cluster.client, cluster.broker_addr)
    response = await update(cluster.client, cluster.broker_addr, text)
    assert response.code == code
    assert remark in response.remark
    assert await broker_config(cluster.client, cluster.broker_addr) == before


async def test_every_runtime_key_is_a_config_field(cluster):
    current = await broker_config(cluster.client, cluster.broker_addr)
    assert RUNTIME_KEYS <= current.keys()
    # the same values again: accepted, nothing changes
    response = await update(cluster.client, cluster.broker_addr, "".join(f"{k}={current[k]}\n" for k in RUNTIME_KEYS))
    assert response.code == ResponseCode.SUCCESS, response.remark
    after = await broker_config(cluster.client, cluster.broker_addr)
    assert after.keys() == current.keys()
    # the two disk ratios are floats ("85" is read as 85.0)
    assert all(after[k] == v or float(after[k]) == float(v) for k, v in current.items())


async def route_perms(client: RemotingClient, namesrv_addr: str, topic: str) -> list[int]:
    response = await client.invoke(namesrv_addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    return [q["perm"] for q in fastjson.loads(response.body)["queueDatas"]]


async def test_broker_permission_is_registered_at_once_and_checked_as_apache(cluster):
    from tests.broker.rmq import pull
    assert (await send(cluster.client, cluster.broker_addr, "TopicPerm", b"before")).code == ResponseCode.SUCCESS
    assert (await send(cluster.client, cluster.broker_addr, "TopicOrder", b"before")).code == ResponseCode.SUCCESS
    cluster.broker.topic_config_manager.select("TopicOrder").order = True
    response = await update(cluster.client, cluster.broker_addr, "brokerPermission=4")
    assert response.code == ResponseCode.SUCCESS, response.remark
    with trio.fail_after(10):   # registered now, not at the next 30 s round
        while await route_perms(cluster.client, cluster.namesrv_addr, "TopicPerm") != [4]:
            await trio.sleep(0.05)
    # as Apache: a send that still arrives (stale route) is stored, except to an order topic
    assert (await send(cluster.client, cluster.broker_addr, "TopicPerm", b"during")).code == ResponseCode.SUCCESS
    refused = await send(cluster.client, cluster.broker_addr, "TopicOrder", b"during")
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION,
                                              "the broker[127.0.0.1] sending message is forbidden")
    assert (await update(cluster.client, cluster.broker_addr, "brokerPermission=2")).code == ResponseCode.SUCCESS
    response, _ = await pull(cluster.client, cluster.broker_addr, "TopicPerm", 0, 0)
    assert (response.code, response.remark) == (ResponseCode.NO_PERMISSION,
                                                "the broker[127.0.0.1] pulling message is forbidden")
    assert (await update(cluster.client, cluster.broker_addr, "brokerPermission=6")).code == ResponseCode.SUCCESS
    assert (await send(cluster.client, cluster.broker_addr, "TopicOrder", b"after")).code == ResponseCode.SUCCESS
    with trio.fail_after(10):
        while await route_perms(cluster.client, cluster.namesrv_addr, "TopicPerm") != [6]:
            await trio.sleep(0.05)


async def test_change_is_written_into_the_config_file_and_survives_restart(nursery, tmp_path):
    from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController
    namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                              kv_config_path=str(tmp_path / "kv.json")))
    await nursery.start(namesrv.run)
    conf = tmp_path / "broker.conf"
    props = broker_properties(tmp_path, namesrv.port, fileReservedTime=48)
    conf.write_text("# written by hand\n" + "".join(f"{k}={v}\n" for k, v in props.items()))

    loaded = load_config_file(str(conf))
    broker = BrokerController(loaded)
    await nursery.start(broker.run)
    async with RemotingClient() as client:
        response = await update(client, loaded.broker.broker_addr, "fileReservedTime=1\ndeleteWhen=03;15")
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert (broker.store_config.file_reserved_time, broker.store_config.delete_when) == (1, "03;15")
    broker.stop()
    await broker.wait_stopped()
    namesrv.server.close()

    text = conf.read_text()
    assert text.startswith("# written by hand\n")
    assert "fileReservedTime=1\n" in text and "fileReservedTime=48" not in text
    reloaded = load_config_file(str(conf))
    assert (reloaded.store.file_reserved_time, reloaded.store.delete_when) == (1, "03;15")
    assert reloaded.broker.listen_port == loaded.broker.listen_port

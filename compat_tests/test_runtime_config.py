"""UPDATE_BROKER_CONFIG (what ``mqadmin updateBrokerConfig`` sends) side by side with Apache.

Apache 4.9.7 applies any key (it has no deny-list; 4.9.8 and 5.x refuse ``rocketmqHome``,
``brokerConfigPath`` and ``configBlackList``), so the refusals are compared with Apache 5.3.3 only.
pyrmq refuses every key outside its runtime allow-list as well (tests/broker/test_runtime_config.py).
"""

from __future__ import annotations

import pytest
import trio

from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.java_properties import parse_properties
from pyrmq.codec.remoting import make_request
from pyrmq.remoting.client import RemotingClient
from tests.broker.rmq import pull_request, send

pytestmark = pytest.mark.compat


async def _update(client: RemotingClient, addr: str, text: str) -> tuple[int, str | None]:
    response = await client.invoke(addr, make_request(RequestCode.UPDATE_BROKER_CONFIG, {}, text.encode()), 10)
    return response.code, response.remark


async def _route_perms(client: RemotingClient, namesrv_addr: str, topic: str) -> list[int]:
    response = await client.invoke(namesrv_addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 10)
    return [q["perm"] for q in fastjson.loads(response.body)["queueDatas"]] if response.code == 0 else []


@pytest.mark.compat_servers("pyrmq", "apache5")
def test_deny_listed_keys_are_refused(server):
    async def main() -> list[tuple[int, str | None]]:
        async with RemotingClient() as client:
            return [await _update(client, server.broker_addr, text)
                    for text in ("rocketmqHome=/tmp/elsewhere\n", "brokerConfigPath=/tmp/x.conf\n",
                                 "configBlackList=none\n")]

    assert trio.run(main) == [(16, "Can not update config in black list.")] * 3


@pytest.mark.compat_servers("pyrmq", "apache", "apache5")
def test_broker_permission_and_clean_keys_take_effect(server_factory, names):
    """brokerPermission=4 is registered at once (routes show perm 4) while a send that still
    arrives is stored; 2 refuses pulls with Apache's remark; 6 restores the routes;
    fileReservedTime shows in GET_BROKER_CONFIG."""
    server = server_factory()
    topic = names.topic

    async def main() -> None:
        async with RemotingClient() as client:
            addr = server.broker_addr
            sent = await send(client, addr, topic, b"before")   # auto-creates the topic
            assert sent.code == 0, sent.remark
            with trio.fail_after(40):
                while await _route_perms(client, server.namesrv_addr, topic) != [6]:
                    await trio.sleep(0.2)
            assert await _update(client, addr, "brokerPermission=4\n") == (0, None)
            with trio.fail_after(10):    # re-registered at once, not at the next 30 s round
                while await _route_perms(client, server.namesrv_addr, topic) != [4]:
                    await trio.sleep(0.1)
            # a send that still arrives is stored (only order topics are refused)
            assert (await send(client, addr, topic, b"during")).code == 0
            assert await _update(client, addr, "brokerPermission=2\n") == (0, None)
            pulled = await client.invoke(addr, pull_request(topic, 0, 0, group=names.group), 10)
            assert (pulled.code, pulled.remark) == (16, f"the broker[{addr.split(':')[0]}] pulling message is forbidden")
            assert await _update(client, addr, "brokerPermission=6\nfileReservedTime=7\n") == (0, None)
            with trio.fail_after(10):
                while await _route_perms(client, server.namesrv_addr, topic) != [6]:
                    await trio.sleep(0.1)
            assert (await send(client, addr, topic, b"after")).code == 0
            config = await client.invoke(addr, make_request(RequestCode.GET_BROKER_CONFIG, {}), 10)
            values = parse_properties(config.body.decode())
            assert (values["brokerPermission"], values["fileReservedTime"]) == ("6", "7")

    trio.run(main)

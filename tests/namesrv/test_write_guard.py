"""The NameServer's write allow-list over real sockets: a stranger can neither register a broker
under an existing name nor change KV config or write permissions; everyone may still read."""

from __future__ import annotations

import pytest
import trio

from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import make_request
from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController
from pyrmq.namesrv.write_guard import WRITE_CODES
from pyrmq.remoting.client import RemotingClient
from tests.namesrv.test_namesrv import register_request


async def start(nursery, tmp_path, allow: str) -> str:
    ctl = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1", write_allowed_addresses=allow,
                                          kv_config_path=str(tmp_path / "kvConfig.json")))
    await nursery.start(ctl.run)
    return f"127.0.0.1:{ctl.port}"


@pytest.mark.parametrize("allow", ["10.9.9.9", "10.0.0.*;192.168.1-3.*"])
async def test_writes_from_strangers_are_refused(nursery, tmp_path, allow):
    addr = await start(nursery, tmp_path, allow)
    with trio.fail_after(10):
        async with RemotingClient() as client:
            writes = [register_request(),
                      make_request(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}),
                      make_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}),
                      make_request(RequestCode.UNREGISTER_BROKER, {"brokerName": "broker-a", "clusterName": "c",
                                                                   "brokerAddr": "x:1", "brokerId": "0"})]
            for request in writes:
                response = await client.invoke(addr, request)
                assert response.code == ResponseCode.NO_PERMISSION
                assert f"request code {request.code} only from" in response.remark
                assert "127.0.0.1 is not on it" in response.remark
            route = await client.invoke(addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}))
            assert route.code == ResponseCode.TOPIC_NOT_EXIST      # reads are served; nothing was registered
            kv = await client.invoke(addr, make_request(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"}))
            assert kv.code == ResponseCode.QUERY_NOT_FOUND


async def test_writes_from_the_allow_list_are_served(nursery, tmp_path):
    addr = await start(nursery, tmp_path, "10.0.0.1;127.0.0.*")
    with trio.fail_after(10):
        async with RemotingClient() as client:
            assert (await client.invoke(addr, register_request())).code == ResponseCode.SUCCESS
            route = await client.invoke(addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}))
            assert route.code == ResponseCode.SUCCESS


def test_write_codes_cover_every_state_changing_processor():
    assert {RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER, RequestCode.PUT_KV_CONFIG,
            RequestCode.DELETE_KV_CONFIG, RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER,
            RequestCode.DELETE_TOPIC_IN_NAMESRV, RequestCode.QUERY_DATA_VERSION, 318} <= WRITE_CODES
    assert not {RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_KV_CONFIG,
                RequestCode.GET_BROKER_CLUSTER_INFO} & WRITE_CODES


def test_allow_list_from_namesrv_conf_and_the_command_line(tmp_path, capsys):
    import argparse

    from pyrmq.cli import main as cli_main
    from pyrmq.cli import namesrv_config

    conf = tmp_path / "namesrv.conf"
    conf.write_text("writeAllowedAddresses=10.0.0.*;192.168.1.{1,2}\n")

    def args(*write_allow):
        return argparse.Namespace(config=str(conf), port=None, bind="127.0.0.1", kv_config_path=None,
                                  write_allow=list(write_allow) or None)

    assert namesrv_config(args()).write_allowed_addresses == "10.0.0.*;192.168.1.{1,2}"
    assert namesrv_config(args("127.0.0.1", "10.1.1.1-9")).write_allowed_addresses == "127.0.0.1;10.1.1.1-9"
    conf.write_text("writeAllowedAddresses=10.0.0.300\n")
    assert cli_main(["namesrv", "-c", str(conf), "--port", "0", "--bind", "127.0.0.1"]) == 2
    assert "write allow-list: address pattern '10.0.0.300'" in capsys.readouterr().err

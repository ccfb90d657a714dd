"""A NameServer and a broker that enforce TLS with client certificates, set up as an Apache
operator would (tls.server.mode in the role's config, the rest in a tls.config.file): the broker
registers over TLS showing its client certificate, a TLS client sends and pulls, a plain one is
refused on every port."""

from __future__ import annotations

import trio

from pyrmq.broker.config import build_config
from pyrmq.broker.controller import BrokerController
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController
from pyrmq.remoting.channel import ChannelClosedError
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.tls_config import TlsConfig
from pyrmq.remoting.tls_context import client_ssl_context
from tests.broker.conftest import broker_properties
from tests.broker.rmq import pull, send
from tests.tls_pki import make_pki


async def test_enforcing_cluster_with_client_certificates(nursery, tmp_path, caplog):
    pki = make_pki(tmp_path / "pki")
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(f"""tls.test.mode.enable=false
tls.server.need.client.auth=require
tls.server.certPath={pki.server_cert}
tls.server.keyPath={pki.server_key}
tls.server.authClient=true
tls.server.trustCertPath={pki.ca}
tls.client.certPath={pki.client_cert}
tls.client.keyPath={pki.client_key}
tls.client.authServer=true
tls.client.trustCertPath={pki.ca}
""")
    role_keys = {"tls.server.mode": "enforcing", "tls.config.file": str(tls_file)}
    namesrv_config = NamesrvConfig.from_properties({"listenPort": "0", **role_keys})
    namesrv_config.bind_address = "127.0.0.1"
    namesrv_config.kv_config_path = str(tmp_path / "kv.json")
    namesrv = NamesrvController(namesrv_config)
    await nursery.start(namesrv.run)
    loaded = build_config(broker_properties(tmp_path, namesrv.port, **role_keys))
    assert loaded.tls.use_tls          # enforcing: the broker's own connections use TLS too
    broker = BrokerController(loaded)
    await nursery.start(broker.run)
    namesrv_addr, broker_addr = f"127.0.0.1:{namesrv.port}", loaded.broker.broker_addr
    fast_addr = f"127.0.0.1:{loaded.broker.listen_port - 2}"
    try:
        client_tls = client_ssl_context(TlsConfig(
            test_mode_enable=False, client_auth_server=True, client_trust_cert_path=str(pki.ca),
            client_cert_path=str(pki.client_cert), client_key_path=str(pki.client_key)))
        async with RemotingClient(ssl_context=client_tls) as client:
            # registered over TLS with the broker's client certificate
            route = await client.invoke(namesrv_addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                   {"topic": "TBW102"}))
            assert route.code == 0
            assert fastjson.loads(route.body)["brokerDatas"][0]["brokerAddrs"] == {"0": broker_addr}
            for addr in (broker_addr, fast_addr):
                sent = await send(client, addr, "TlsTopic", b"over tls")
                assert sent.code == 0, sent.remark
            response, messages = await pull(client, broker_addr, "TlsTopic", 0, 0)
            assert [m.body for m in messages] == [b"over tls", b"over tls"]

        async with RemotingClient() as plain:
            for addr in (namesrv_addr, broker_addr, fast_addr):
                try:
                    await plain.invoke(addr, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), 2)
                except (ChannelClosedError, OSError):
                    continue
                raise AssertionError(f"{addr} answered a plain request")
        refused = [r for r in caplog.records if "refused, tls.server.mode is enforcing" in r.getMessage()]
        assert len(refused) == 3
    finally:
        broker.stop()
        with trio.fail_after(30):
            await broker.wait_stopped()
        namesrv.server.close()

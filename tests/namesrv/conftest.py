"""An in-process NameServer on a free loopback port with a temporary KV file."""

import pytest

from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController


@pytest.fixture
async def namesrv(nursery, tmp_path):
    ctl = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                          kv_config_path=str(tmp_path / "kvConfig.json")))
    await nursery.start(ctl.run)
    ctl.addr = f"127.0.0.1:{ctl.port}"
    yield ctl
    ctl.server.close()

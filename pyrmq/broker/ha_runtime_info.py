"""Replication figures added to GET_BROKER_RUNTIME_INFO (what ``mqadmin brokerStatus`` prints).

Apache 4.9.x (and 5.x) put no HA figure in this table: its master only logs "Slave fall behind
master: N bytes" every minute (BrokerController.printMasterAndSlaveDiff).  pyrmq adds these keys,
its own, so that an operator sees replication from brokerStatus (docs/HA.md):

| role | key | value |
|---|---|---|
| master | ``haConnectionCount`` | slaves connected to the HA port now |
| master | ``push2SlaveMaxOffset`` | highest commit log offset a slave acknowledged |
| master | ``slaveFallBehindMuch`` | commitLogMaxOffset - push2SlaveMaxOffset (0 without a slave) |
| slave | ``masterAddr`` | the master's remoting address learnt from the NameServer ("" before) |
| slave | ``haMasterAddress`` | the HA address the slave replicates from ("" before) |
| slave | ``haConnected`` | whether the HA connection is up |
| slave | ``haReportedOffset`` | the last max offset the slave reported to the master |
| slave | ``masterOffset`` | the master's commitLogMaxOffset at the last config sync (-1: unknown) |
| slave | ``slaveFallBehindMuch`` | masterOffset - the slave's commitLogMaxOffset (-1: unknown) |

The HA core's objects are read with ``getattr`` (``controller.ha_service`` on a master,
``controller.ha_client`` on a slave): before they exist the keys say 0 / "" / false.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyrmq.broker.controller import BrokerController


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def ha_runtime_info(ctl: BrokerController) -> dict[str, str]:
    if not ctl.is_slave:
        service = getattr(ctl, "ha_service", None)
        if service is None:
            return {"haConnectionCount": "0", "push2SlaveMaxOffset": "0", "slaveFallBehindMuch": "0"}
        return {"haConnectionCount": _text(service.connection_count),
                "push2SlaveMaxOffset": _text(service.push2slave_max_offset),
                "slaveFallBehindMuch": _text(service.slave_fall_behind())}
    client = getattr(ctl, "ha_client", None)
    master_offset = ctl.slave_sync.master_offset
    behind = max(0, master_offset - ctl.store.get_max_phy_offset()) if master_offset >= 0 else -1
    return {"masterAddr": _text(ctl.registration.master_addr),
            "haMasterAddress": _text(getattr(client, "master_ha_address", None)),
            "haConnected": _text(bool(getattr(client, "connected", False))),
            "haReportedOffset": _text(getattr(client, "reported_offset", 0)),
            "masterOffset": str(master_offset), "slaveFallBehindMuch": str(behind)}

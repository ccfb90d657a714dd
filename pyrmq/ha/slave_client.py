"""The slave side of replication (Apache's HAClient): one connection to the master's HA port.

The slave reports its commit log end as soon as it connects (Apache waits for the first
heartbeat interval; the master reads the same 8 bytes either way, only sooner), then again after
every transfer that grew its log and at least every ``haSendHeartbeatInterval``. Transfers are
appended with ``DefaultMessageStore.append_data``, which CRC-checks each record and sends it
through the one dispatch pipeline into this slave's consume queues and index.

The master's address is ``haMasterAddress`` when configured, otherwise the ``haServerAddr``
the NameServer returns at each registration. A broken connection, a protocol error, a refused
append or ``haHousekeepingInterval`` without a byte from the master closes the connection with
one log line; the client reconnects and reports its end again, so it resumes from where its log
stands.
"""

from __future__ import annotations

import logging
from typing import Final

import trio

from pyrmq.codec.errors import ProtocolError
from pyrmq.ha.config import HAConfig
from pyrmq.ha.protocol import NEED_DATA, HAProtocolError, SlaveSession, Transfer
from pyrmq.remoting.transport import PeerStream, open_tcp_peer_stream, split_addr
from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

# One receive; the session holds at most one transfer (4 MiB) plus this.
RECEIVE_CHUNK: Final = 256 * 1024
# Pause between connection attempts (Apache: 5 s) and while no master address is known.
RECONNECT_PAUSE_S: Final = 1.0
CONNECT_TIMEOUT_S: Final = 3.0
# An address Apache accepts in haMasterAddress has at least this many characters ("a:1234").
MIN_ADDRESS_LENGTH: Final = 6


class HAClient:
    """Copies the master's commit log into this slave's store."""

    def __init__(self, store: DefaultMessageStore, config: HAConfig, ha_master_address: str = "") -> None:
        self.store = store
        self.config = config
        fixed = ha_master_address.strip()
        self._address_fixed = len(fixed) >= MIN_ADDRESS_LENGTH
        self.master_ha_address: str | None = fixed if self._address_fixed else None
        self.connected = False
        self.reported_offset = 0
        self.received_bytes = 0
        self._address_known = trio.Event()
        if self.master_ha_address:
            self._address_known.set()
        self._failing_address: str | None = None   # connection failures are logged once per address

    def update_master_address(self, addr: str | None) -> None:
        """The master's HA address from a registration answer; ignored when haMasterAddress is set."""
        if self._address_fixed or not addr or addr == self.master_ha_address:
            return
        log.info("HA master address: %s (was %s)", addr, self.master_ha_address)
        self.master_ha_address = addr
        self._address_known.set()

    async def run(self) -> None:
        while True:
            await self._address_known.wait()
            addr = self.master_ha_address
            assert addr is not None
            try:
                host, port = split_addr(addr)   # ValueError: no host or no port
                with trio.fail_after(CONNECT_TIMEOUT_S):
                    peer = await open_tcp_peer_stream(host, port, addr)
            except (OSError, ValueError, trio.TooSlowError) as exc:
                if self._failing_address != addr:
                    self._failing_address = addr
                    log.warning("cannot connect to the HA master %s (retrying every %g s): %s",
                                addr, RECONNECT_PAUSE_S, exc or type(exc).__name__)
                await trio.sleep(RECONNECT_PAUSE_S)
                continue
            self._failing_address = None
            try:
                await self._replicate(peer)
            except (ProtocolError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                log.warning("HA connection to master %s closed: %s", addr, exc)
            except Exception:   # a bug here costs a reconnect, never the broker
                log.exception("HA connection to master %s failed", addr)
            finally:
                self.connected = False
                await trio.aclose_forcefully(peer)
            await trio.sleep(RECONNECT_PAUSE_S)

    async def _report(self, peer: PeerStream, session: SlaveSession) -> float:
        offset = self.reported_offset = self.store.get_max_phy_offset()
        await peer.send_buffers([session.report(offset)])
        return trio.current_time()

    async def _replicate(self, peer: PeerStream) -> None:
        session = SlaveSession(self.store.get_max_phy_offset())
        heartbeat_s = self.config.send_heartbeat_interval / 1000
        housekeeping_s = self.config.housekeeping_interval / 1000
        self.connected = True
        log.info("connected to HA master %s; this slave's commit log ends at %d",
                 peer.remote_addr, session.expected_offset)
        last_report = await self._report(peer, session)
        last_read = trio.current_time()
        while True:
            now = trio.current_time()
            if now - last_read > housekeeping_s:
                raise HAProtocolError(f"nothing from the master for {housekeeping_s:g} s")
            if now - last_report >= heartbeat_s:
                last_report = await self._report(peer, session)
                continue
            with trio.move_on_after(last_report + heartbeat_s - now):
                data = await peer.receive_some(RECEIVE_CHUNK)
                if not data:
                    raise HAProtocolError("the master closed the connection")
                last_read = trio.current_time()
                self.received_bytes += len(data)
                session.receive_data(data)
                if self._apply(session) > self.reported_offset:
                    last_report = await self._report(peer, session)

    def _apply(self, session: SlaveSession) -> int:
        """Append every whole transfer buffered; returns the store's commit log end."""
        while True:
            event = session.next_event()
            if event is NEED_DATA:
                break
            if not isinstance(event, Transfer):   # a heartbeat
                continue
            if not self.store.append_data(event.phy_offset, event.body):
                raise HAProtocolError(f"the {len(event.body)} bytes at offset {event.phy_offset} were not "
                                      f"appended (see the store's log line); asking the master again")
        return self.store.get_max_phy_offset()

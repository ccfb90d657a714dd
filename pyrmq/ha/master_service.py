"""The master side of replication: the HA port, one transfer loop per slave, and the wait of
SYNC_MASTER sends (Apache's HAService, HAConnection and GroupTransferService).

Each slave connection runs two tasks around a :class:`~pyrmq.ha.protocol.MasterSession`: the
reader takes the slave's offset reports (its acknowledgements) and the writer sends the commit
log from where the slave stands, at most ``haTransferBatchSize`` bytes and never across a file
boundary per transfer, straight from the mapped file (header and mmap slice in one
gather-write). A writer with nothing to send sleeps until the store dispatches a new record
(this service is one of the store's dispatchers) or a heartbeat is due.

A connection that breaks the protocol, or is silent for ``haHousekeepingInterval``, is closed
with one log line; the service and every other connection go on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

import trio

from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.message import RecordInfo
from pyrmq.common.offset_waiters import OffsetWaiters
from pyrmq.ha.config import HAConfig
from pyrmq.ha.protocol import MasterSession
from pyrmq.remoting.transport import PeerStream, accept_loop, open_tcp_listeners
from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

# Reports are 8 bytes every few seconds or per transfer; Apache reads them into a 1 MiB buffer.
# Anything larger in one receive is simply read in several.
READ_CHUNK: Final = 64 * 1024


class _SlaveConnection:
    def __init__(self, peer: PeerStream, session: MasterSession) -> None:
        self.peer = peer
        self.session = session
        self.first_report = trio.Event()
        self.last_read = trio.current_time()


class HAService:
    """Serves slaves on the HA port and knows how far they have acknowledged."""

    def __init__(self, store: DefaultMessageStore, config: HAConfig) -> None:
        self.store = store
        self.config = config
        self.port = config.listen_port
        self.connections: set[_SlaveConnection] = set()
        # the highest offset any slave has acknowledged (Apache's push2SlaveMaxOffset)
        self.push2slave_max_offset = 0
        self._waiters = OffsetWaiters()
        self._new_data = trio.Event()
        self._writers_waiting = False
        self.transferred_bytes = 0

    # --- what the broker reads ---------------------------------------------------------------

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    def slave_fall_behind(self) -> int:
        """How many bytes of the commit log no slave has acknowledged yet (0 without slaves)."""
        if not self.connections:
            return 0
        return max(0, self.store.get_max_phy_offset() - self.push2slave_max_offset)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and not more than ``haSlaveFallbehindMax`` behind ``master_put_where``."""
        return bool(self.connections) and (
            master_put_where - self.push2slave_max_offset < self.config.slave_fallbehind_max)

    async def wait_replicated(self, next_offset: int, timeout_s: float) -> bool:
        """True once a slave acknowledged the commit log up to ``next_offset``; False after ``timeout_s``."""
        if self.push2slave_max_offset >= next_offset:
            return True
        # A slave that stopped acknowledging leaves waiters behind: OffsetWaiters prunes them,
        # so memory stays bounded by the sends of one slaveTimeout.
        return await self._waiters.wait(next_offset, timeout_s)

    # --- the store's dispatcher: new data wakes the writers -------------------------------------

    def dispatch(self, request: RecordInfo) -> None:
        # once per record on the loop: one attribute test unless a writer sleeps
        if self._writers_waiting:
            self._writers_waiting = False
            self._new_data.set()
            self._new_data = trio.Event()

    def dispatch_many(self, requests: Sequence[RecordInfo]) -> None:
        self.dispatch(requests[-1])   # a batch's records wake the writers once

    # --- serving ---------------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await open_tcp_listeners(self.config.listen_port, host=self.config.listen_address,
                                             role="HA service (haListenPort)")
        self.port = listeners[0].port
        log.info("HA service listening on %s:%d", self.config.listen_address, self.port)
        try:
            async with trio.open_nursery() as handlers:
                task_status.started(self.port)
                async with trio.open_nursery() as acceptors:
                    for listener in listeners:
                        acceptors.start_soon(accept_loop, listener, handlers, self._handle, "HA service")
        finally:
            for listener in listeners:
                await trio.aclose_forcefully(listener)

    async def _handle(self, peer: PeerStream) -> None:
        conn = _SlaveConnection(peer, MasterSession(self.store.config.mapped_file_size_commit_log))
        self.connections.add(conn)
        log.info("slave %s connected to the HA port", peer.remote_addr)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_reports, conn, nursery.cancel_scope)
                await self._transfer(conn)
        except (ProtocolError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.warning("HA connection from slave %s closed: %s", peer.remote_addr, exc)
        except Exception:   # a bug here ends this connection only
            log.exception("HA connection from slave %s failed", peer.remote_addr)
        finally:
            self.connections.discard(conn)
            await trio.aclose_forcefully(peer)

    async def _read_reports(self, conn: _SlaveConnection, scope: trio.CancelScope) -> None:
        housekeeping = self.config.housekeeping_interval / 1000
        while True:
            with trio.move_on_after(housekeeping) as timer:
                data = await conn.peer.receive_some(READ_CHUNK)
            if timer.cancelled_caught:
                log.warning("HA connection from slave %s closed: nothing read for %g s",
                            conn.peer.remote_addr, housekeeping)
                scope.cancel()
                return
            if not data:
                log.info("slave %s closed its HA connection", conn.peer.remote_addr)
                scope.cancel()
                return
            conn.last_read = trio.current_time()
            first = conn.session.request_offset is None
            ack = conn.session.receive_data(data, self.store.get_max_phy_offset())
            if ack is None:
                continue
            if first:
                log.info("slave %s asks from offset %d; transfers start at %d", conn.peer.remote_addr,
                         conn.session.request_offset, conn.session.next_transfer_from)
                conn.first_report.set()
            self._acknowledged(ack)

    def _acknowledged(self, offset: int) -> None:
        if offset <= self.push2slave_max_offset:
            return
        self.push2slave_max_offset = offset
        self._waiters.release(offset)

    async def _transfer(self, conn: _SlaveConnection) -> None:
        await conn.first_report.wait()
        session = conn.session
        commit_log = self.store.commit_log
        batch = self.config.transfer_batch_size
        heartbeat_s = self.config.send_heartbeat_interval / 1000
        last_write = trio.current_time()
        warned_missing = False
        while True:
            assert session.next_transfer_from is not None
            new_data = self._new_data
            view = commit_log.get_data_to_end_of_file(session.next_transfer_from)
            if view is not None and len(view):
                chunk = view[:batch]
                header = session.transfer_header(len(chunk))
                await conn.peer.send_buffers([header, chunk])
                self.transferred_bytes += len(chunk)
                last_write = trio.current_time()
                continue
            if (view is None and not warned_missing
                    and session.next_transfer_from < commit_log.min_offset):
                warned_missing = True
                log.warning("slave %s needs offset %d but this master's commit log starts at %d "
                            "(older files were deleted): it cannot catch up", conn.peer.remote_addr,
                            session.next_transfer_from, commit_log.min_offset)
            wait = last_write + heartbeat_s - trio.current_time()
            if wait <= 0:
                await conn.peer.send_buffers([session.transfer_header(0)])
                last_write = trio.current_time()
                continue
            self._writers_waiting = True
            with trio.move_on_after(wait):
                await new_data.wait()

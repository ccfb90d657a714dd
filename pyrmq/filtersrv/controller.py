"""The FilterServer process: its remoting port (REGISTER_MESSAGE_FILTER_CLASS, PULL_MESSAGE), the
registration with its broker (REGISTER_FILTER_SERVER every 10 s, the first after 3 s, as Apache's
FiltersrvController) and its lifecycle."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import trio

from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import RemotingCommand, make_request
from pyrmq.common.guard import ServiceGuard
from pyrmq.filtersrv.class_manager import FilterClassManager, RegistrationRefused, load_deployed
from pyrmq.filtersrv.config import FiltersrvConfig
from pyrmq.filtersrv.java_toolchain import JavaToolchain, JavaUnavailable
from pyrmq.filtersrv.pull_forward import PullForwarder
from pyrmq.remoting.channel import Channel, ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.dispatch import ProcessorTable
from pyrmq.remoting.headers import required_int, required_str
from pyrmq.remoting.server import RemotingServer

log = logging.getLogger(__name__)

REGISTER_FIRST_DELAY_S = 3.0
REGISTER_PERIOD_S = 10.0
PARENT_CHECK_S = 1.0


WORK_DIR_PREFIX = "pyrmq-filtersrv-"


def remove_stale_work_dirs() -> None:
    """Work directories of FilterServers that died without cleaning up (kill -9): named with the
    pid of their process, removed when no such process runs any more."""
    for path in Path(tempfile.gettempdir()).glob(f"{WORK_DIR_PREFIX}*-*"):
        pid = path.name.removeprefix(WORK_DIR_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)


class FilterServer:
    def __init__(self, config: FiltersrvConfig) -> None:
        self.config = config
        self.broker_name: str | None = None
        self.broker_id: int | None = None
        self.registrations = 0
        self._stopping = trio.Event()
        self.work_dir: Path | None = None
        self.classes: FilterClassManager | None = None
        self.forwarder: PullForwarder | None = None
        table = ProcessorTable("filtersrv")
        table.register(RequestCode.REGISTER_MESSAGE_FILTER_CLASS, self._register_class)
        table.register(RequestCode.PULL_MESSAGE, self._pull)
        self.server = RemotingServer(table, config.bind_address, config.listen_port, name="filtersrv")

    def _prepare(self) -> FilterClassManager:
        """Work directory, deployed classes, the JDK (a worker thread: files)."""
        remove_stale_work_dirs()
        work_dir = Path(tempfile.mkdtemp(prefix=f"{WORK_DIR_PREFIX}{os.getpid()}-"))
        work_dir.chmod(0o755)   # the jailed workers (nobody) read lib/, worker/ and classes/
        (work_dir / "cwd").mkdir(mode=0o555)
        (work_dir / "classes").mkdir(mode=0o755)
        self.work_dir = work_dir
        deployed = load_deployed(self.config.class_dir)
        java: JavaToolchain | None = None
        reason = ""
        try:
            java = JavaToolchain.create(work_dir, self.config.java_classpath, self.config.limits)
        except JavaUnavailable as exc:
            reason = str(exc)
            log.info("Java filter classes unavailable: %s", reason)
        return FilterClassManager(self.config, work_dir, deployed, java, reason)

    def _register_class(self, channel: Channel, request: RemotingCommand) -> object:
        group = required_str(request, "consumerGroup")
        topic = required_str(request, "topic")
        class_name = required_str(request, "className")
        crc = required_int(request, "classCRC")
        body = bytes(request.body) if isinstance(request.body, (bytes, bytearray, memoryview)) else b""

        async def register() -> RemotingCommand:
            assert self.classes is not None
            try:
                await self.classes.register(group, topic, class_name, crc, body)
            except RegistrationRefused as exc:
                log.warning("filter class %s of group %s (topic %s, from %s) refused: %s", class_name, group, topic,
                            channel.remote_addr, exc.remark)
                return request.response(exc.code, exc.remark)
            return request.response(ResponseCode.SUCCESS)
        return register()

    def _pull(self, channel: Channel, request: RemotingCommand) -> object:
        assert self.forwarder is not None
        return self.forwarder.process(channel, request)

    async def _register_with_broker(self, client: RemotingClient) -> None:
        guard = ServiceGuard("FilterServer registration", log)
        await trio.sleep(REGISTER_FIRST_DELAY_S)
        while True:
            with guard.round():
                try:
                    response = await client.invoke(
                        self.config.broker_addr,
                        make_request(RequestCode.REGISTER_FILTER_SERVER, {"filterServerAddr": self.config.addr}), 3.0)
                except (OSError, trio.TooSlowError, RemotingTimeoutError, ChannelClosedError) as exc:
                    log.warning("register with broker %s failed: %s", self.config.broker_addr, exc)
                else:
                    if response.code == ResponseCode.SUCCESS:
                        ext = response.ext_fields or {}
                        if self.registrations == 0:
                            log.info("registered with broker %s (%s, id %s) as %s", self.config.broker_addr,
                                     ext.get("brokerName"), ext.get("brokerId"), self.config.addr)
                        self.broker_name = ext.get("brokerName")
                        self.broker_id = int(ext.get("brokerId") or 0)
                        self.registrations += 1
                    else:
                        log.warning("broker %s refused the registration: %s %s", self.config.broker_addr,
                                    response.code, response.remark)
            await trio.sleep(REGISTER_PERIOD_S)

    async def _watch_parent(self) -> None:
        while os.getppid() == self.config.parent_pid:
            await trio.sleep(PARENT_CHECK_S)
        log.warning("the broker that started this FilterServer (pid %s) is gone: stopping", self.config.parent_pid)
        self.stop()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.classes = await trio.to_thread.run_sync(self._prepare)
        try:
            async with RemotingClient() as client:
                self.forwarder = PullForwarder(client, self.classes, self.config.broker_addr)
                async with trio.open_nursery() as nursery:
                    port = await nursery.start(self.server.serve)
                    self.config.listen_port = port
                    nursery.start_soon(self._register_with_broker, client)
                    if self.config.parent_pid is not None:
                        nursery.start_soon(self._watch_parent)
                    log.info("FilterServer %s ready for broker %s", self.config.addr, self.config.broker_addr)
                    task_status.started(port)
                    await self._stopping.wait()
                    nursery.cancel_scope.cancel()
        finally:
            self.classes.close()
            if self.work_dir is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(shutil.rmtree, self.work_dir, True)

    def stop(self) -> None:
        self._stopping.set()

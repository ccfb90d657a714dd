"""The Broker role: wires the store, the config managers, the processors and the services, and
owns the lifecycle (start with recovery; graceful stop that flushes and persists everything)."""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from pyrmq.broker.acl.admin import register_acl_admin_processors
from pyrmq.broker.acl.plain_config import AclConfigError, PlainAclConfig
from pyrmq.broker.acl.validator import AclValidator
from pyrmq.broker.acl.watcher import AclFileWatcher
from pyrmq.broker.accumulation_alarm import AccumulationAlarm
from pyrmq.broker.admin_processor import register_admin_processors
from pyrmq.broker.broker_stats import BrokerStatsManager
from pyrmq.broker.allocate_service import AllocateService
from pyrmq.broker.assignment_processor import QueryAssignmentProcessor
from pyrmq.broker.client_manager import ConsumerManager, ProducerManager
from pyrmq.broker.check_client_config import register_check_client_config
from pyrmq.broker.client_processor import register_client_processors
from pyrmq.broker.consumer_filter import ConsumerFilterManager
from pyrmq.broker.filter_bitmap import BitMapCalculator
from pyrmq.broker.config import BrokerRole, ConfigError, LoadedConfig
from pyrmq.broker.consumer_admin_processor import register_consumer_admin_processors
from pyrmq.broker.consumer_call_processor import register_consumer_call_processors
from pyrmq.broker.filter_server_manager import FilterServerManager
from pyrmq.broker.flush_service import FlushService
from pyrmq.broker.group_admin_processor import register_group_admin_processors
from pyrmq.broker.runtime_config import RuntimeConfig, register_runtime_config_processor
from pyrmq.broker.ha_runtime_info import ha_runtime_info
from pyrmq.broker.metrics import BrokerMetricsCollector, MetricsEndpoint
from pyrmq.console.server import ConsoleServer
from pyrmq.broker.namesrv_registration import NamesrvRegistration
from pyrmq.broker.offsets_and_groups import ConsumerOffsetManager, SubscriptionGroupManager
from pyrmq.broker.pull_processor import PullMessageProcessor
from pyrmq.broker.rebalance_lock import RebalanceLockManager
from pyrmq.broker.reply_processor import ReplyMessageProcessor
from pyrmq.broker.recall_processor import RecallMessageProcessor
from pyrmq.broker.schedule_service import ScheduleMessageService, parse_delay_levels
from pyrmq.broker.stats_processor import broker_runtime_info, register_stats_processors
from pyrmq.broker.send_processor import SendMessageProcessor
from pyrmq.broker.slave_sync import SlaveSynchronize
from pyrmq.broker.store_clean_task import StoreCleanTask
from pyrmq.broker.timer_service import TimerService
from pyrmq.broker.topic_config import TopicConfigManager
from pyrmq.broker.admin_processor import TRANSACTION_PENDING_KEY
from pyrmq.broker.end_transaction import EndTransactionProcessor
from pyrmq.codec import fastjson, native
from pyrmq.broker.transaction_check import TransactionCheckService
from pyrmq.broker.usage_admin_processor import register_usage_admin_processors
from pyrmq.broker.inspect_processor import register_inspect_processors
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.ha.config import HAConfig
from pyrmq.ha.master_service import HAService
from pyrmq.ha.slave_client import HAClient
from pyrmq.common.guard import ServiceGuard
from pyrmq.common.persister import ConfigPersister
from pyrmq.filter.bloom import BloomFilter
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.client import RemotingClient
from pyrmq.remoting.dispatch import ProcessorTable, RequestError
from pyrmq.remoting.server import RemotingServer
from pyrmq.remoting.tls import tls_listener_wrapper
from pyrmq.remoting.tls_context import client_ssl_context
from pyrmq.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL_S = 10.0
# consumerFilter.json is written this often when it changed (Apache: every 10 s)
FILTER_PERSIST_INTERVAL_S = 10.0
# MQVersion.Version.V5_3_1.ordinal(): only requests of newer clients are answered GO_AWAY (Apache 5.3).
GO_AWAY_AFTER_VERSION = 475
# How long a graceful stop lets in-flight work (sync flushes, held pulls) finish.
SHUTDOWN_GRACE_S = 3.0


class BrokerController:
    def __init__(self, loaded: LoadedConfig) -> None:
        self.loaded_config = loaded
        self.config = loaded.broker
        self.store_config = loaded.store
        self.is_slave = self.config.broker_role is BrokerRole.SLAVE
        config_dir = Path(self.store_config.store_path_root_dir) / "config"
        self.topic_config_manager = TopicConfigManager(
            config_dir / "topics.json", self.config.broker_cluster_name, self.config.broker_name,
            auto_create_topic_enable=self.config.auto_create_topic_enable,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
            cluster_topic_enable=self.config.cluster_topic_enable,
            broker_topic_enable=self.config.broker_topic_enable,
            on_change=self.request_register_all)
        self.consumer_offset_manager = ConsumerOffsetManager(config_dir / "consumerOffset.json")
        self.subscription_group_manager = SubscriptionGroupManager(
            config_dir / "subscriptionGroup.json", self.config.auto_create_subscription_group)
        self.consumer_manager = ConsumerManager(self.config.channel_expired_timeout)
        # SQL92 filters of consumer groups (consumerFilter.json), registered by heartbeats
        self.consumer_filter_manager = ConsumerFilterManager(
            config_dir / "consumerFilter.json",
            BloomFilter.from_config(self.config.max_error_rate_of_bloom_filter,
                                    self.config.expect_consumer_num_use_filter),
            lambda: self.config.filter_data_clean_time_span)
        self.consumer_manager.on_group_removed = self.consumer_filter_manager.unregister
        self.producer_manager = ProducerManager(self.config.channel_expired_timeout)
        self.rebalance_lock_manager = RebalanceLockManager()
        self.store = DefaultMessageStore(self.store_config)
        # put/get TPS per topic and group (BrokerStatsManager), over the store's own counters
        self.stats = BrokerStatsManager(self.config.broker_cluster_name, self.store.stats)
        if self.config.enable_calc_filter_bit_map and self.store_config.enable_consume_queue_ext:
            # SQL92 bitmaps into the ConsumeQueueExt units (filter.md 3.5); without the ext there
            # is nowhere to keep them, so nothing is computed (Apache computes and drops them)
            self.store.set_bit_map_source(BitMapCalculator(self.consumer_filter_manager.bloom,
                                                           self.consumer_filter_manager.bitmap_filters).bit_map)
        self.flush_service = FlushService(self.store, self.store_config)
        self.allocate_service = AllocateService(self.store)
        self.store_clean_task = StoreCleanTask(self.store, self.consumer_offset_manager,
                                               lambda: self.schedule_service.offset_table)
        self.registration = NamesrvRegistration(self)
        # FilterServer processes (filterServerNums) and their registrations
        self.filter_server_manager = FilterServerManager(self.config, self.request_register_all)
        self.schedule_service = ScheduleMessageService(self, parse_delay_levels(self.config.message_delay_level))
        # a slave copies topics, groups and offsets from its master (run only on a SLAVE)
        self.slave_sync = SlaveSynchronize(self)
        # 5.x timer messages (docs/MESSAGING.md); sends are refused as Apache does when disabled
        self.timer_service = TimerService(self.store) if self.store_config.timer_wheel_enable else None
        # config JSON files are written from worker threads, many changes to one write
        self.config_persister = ConfigPersister()
        for config_file in (self.topic_config_manager, self.subscription_group_manager,
                            self.consumer_offset_manager, self.schedule_service.offsets,
                            self.consumer_filter_manager):
            config_file.persister = self.config_persister
        # Replication: a master serves slaves on the HA port, a slave copies its master.
        ha_config = HAConfig(
            listen_address=self.config.ha_listen_address, listen_port=self.config.ha_listen_port,
            send_heartbeat_interval=self.config.ha_send_heartbeat_interval,
            housekeeping_interval=self.config.ha_housekeeping_interval,
            transfer_batch_size=self.config.ha_transfer_batch_size,
            slave_fallbehind_max=self.config.ha_slave_fallbehind_max)
        self.ha_service = None if self.is_slave else HAService(self.store, ha_config)
        self.ha_client = HAClient(self.store, ha_config, self.config.ha_master_address) if self.is_slave else None
        if self.ha_service is not None:
            self.store.add_dispatcher(self.ha_service)   # new records wake the transfer loops
        self.send_processor = SendMessageProcessor(
            config=self.config, store=self.store, topics=self.topic_config_manager,
            groups=self.subscription_group_manager, flush_service=self.flush_service, stats=self.stats,
            max_delay_level=self.schedule_service.max_level, replicas=self.ha_service)
        self.reply_processor = ReplyMessageProcessor(
            send=self.send_processor, producers=self.producer_manager, consumers=self.consumer_manager,
            store_reply=self.config.store_reply_message_enable)
        self.assignment_processor = QueryAssignmentProcessor(
            broker_name=self.config.broker_name, topics=self.topic_config_manager,
            groups=self.subscription_group_manager, consumers=self.consumer_manager,
            namesrv_addrs=lambda: self.config.namesrv_addrs)
        self.recall_processor = RecallMessageProcessor(config=self.config, store=self.store,
                                                       topics=self.topic_config_manager, clock=self.send_processor.clock)
        self.pull_processor = PullMessageProcessor(
            config=self.config, store=self.store, topics=self.topic_config_manager,
            groups=self.subscription_group_manager, consumers=self.consumer_manager,
            offsets=self.consumer_offset_manager, stats=self.stats, filters=self.consumer_filter_manager)
        self.accumulation_alarm = AccumulationAlarm(config=self.config, store=self.store,
                                                    topics=self.topic_config_manager,
                                                    offsets=self.consumer_offset_manager)
        # the opt-in Prometheus endpoint (metricsPort), read on the event loop at each scrape
        self.metrics = MetricsEndpoint(
            BrokerMetricsCollector(config=self.config, store=self.store, stats=self.stats,
                                   topics=self.topic_config_manager, offsets=self.consumer_offset_manager,
                                   consumers=self.consumer_manager, runtime_info=self.runtime_info),
            self.config.metrics_bind_address, self.config.metrics_port) if self.config.metrics_port else None
        self.end_transaction_processor = EndTransactionProcessor(config=self.config, store=self.store)
        self.transaction_check_service = TransactionCheckService(
            config=self.config, store=self.store, topics=self.topic_config_manager,
            offsets=self.consumer_offset_manager, producers=self.producer_manager)
        # held pulls are woken by the store's dispatch pipeline, as one more dispatcher
        self.store.add_dispatcher(self.pull_processor.hold_service)
        self.acl_watcher = self._load_acl() if self.config.acl_enable else None
        self.processors = self._build_processors()
        deadlines = {"idle_timeout": self.config.server_channel_max_idle_time_seconds,
                     "frame_timeout": self.config.partial_frame_timeout_seconds,
                     "write_timeout": self.config.server_channel_write_timeout_seconds}
        # Both client ports negotiate TLS alike (Apache: remotingServer and fastRemotingServer);
        # a bad certificate stops the start here (TlsConfigError).
        wrap_listener = tls_listener_wrapper(loaded.tls, self.config.server_channel_max_idle_time_seconds, "broker")
        # Registration with the NameServers (Apache's BrokerOuterAPI client, useTLS).
        self.client_ssl_context = client_ssl_context(loaded.tls) if loaded.tls.use_tls else None
        # the opt-in web console (consolePort): it reaches this broker and the others over remoting
        self.console = ConsoleServer(
            self.config.console_bind_address, self.config.console_port, ";".join(self.config.namesrv_addrs),
            admin_secret=self._console_admin_secret if self.config.acl_enable else None,
            ssl_context=self.client_ssl_context,
        ) if self.config.console_port else None
        self.server = RemotingServer(self.processors, self.config.bind_address, self.config.listen_port,
                                     name="broker", max_frame_bytes=self.config.max_frame_bytes,
                                     on_channel=self._on_channel, wrap_listener=wrap_listener, **deadlines)
        self.fast_server: RemotingServer | None = None
        if self.config.fast_port_enable:
            # Old Java clients (vipChannelEnabled) send to listenPort - 2; as in Java, no pulls there.
            fast_table = self._build_processors(pull=False)
            self.fast_server = RemotingServer(fast_table, self.config.bind_address, self.config.listen_port - 2,
                                              name="broker-fast", max_frame_bytes=self.config.max_frame_bytes,
                                              on_channel=self._on_channel, wrap_listener=wrap_listener,
                                              **deadlines)
        self._stopping = trio.Event()
        self._stopped = trio.Event()
        self._going_away = False

    def _console_admin_secret(self, access_key: str) -> str | None:
        """The secret of an admin account of plain_acl.yml as loaded now (the console's log-in)."""
        if self.acl_watcher is None:
            return None
        account = self.acl_watcher.validator.config.accounts.get(access_key)
        return account.secret_key if account is not None and account.admin else None

    def _load_acl(self) -> AclFileWatcher:
        """The ACL rules are read before any port opens; a file that does not parse stops the start."""
        watcher = AclFileWatcher(self.loaded_config.plain_acl_file, AclValidator(PlainAclConfig()),
                                 self.config.acl_file_watch_interval_ms / 1000)
        try:
            watcher.load_initial()
        except (AclConfigError, OSError) as exc:
            raise ConfigError(f"ACL: {exc}") from None
        return watcher

    def _build_processors(self, pull: bool = True) -> ProcessorTable:
        table = ProcessorTable("broker")
        if self.acl_watcher is not None:
            table.add_check(self.acl_watcher.validator.check)
        table.add_check(self._go_away)
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            table.register(code, self.send_processor.process)
        table.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.send_processor.consumer_send_msg_back)
        table.register(RequestCode.END_TRANSACTION, self.end_transaction_processor.process)
        for code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
            table.register(code, self.reply_processor.process)
        table.register(RequestCode.RECALL_MESSAGE, self.recall_processor.process)
        table.register(RequestCode.REGISTER_FILTER_SERVER, self.filter_server_manager.process_register)
        if pull:
            table.register(RequestCode.PULL_MESSAGE, self.pull_processor.process)
            table.register(RequestCode.LITE_PULL_MESSAGE, self.pull_processor.process)
        self.assignment_processor.register(table)
        register_client_processors(
            table, config=self.config, consumers=self.consumer_manager, producers=self.producer_manager,
            groups=self.subscription_group_manager, offsets=self.consumer_offset_manager,
            topics=self.topic_config_manager, locks=self.rebalance_lock_manager, store=self.store,
            filters=self.consumer_filter_manager)
        register_check_client_config(table, self.config)
        register_admin_processors(
            table, loaded_config=self.loaded_config, store=self.store, topics=self.topic_config_manager,
            offsets=self.consumer_offset_manager, persister=self.config_persister,
            on_topic_deleted=self._forget_topic_stats)
        register_stats_processors(
            table, config=self.config, store=self.store, stats=self.stats, topics=self.topic_config_manager,
            groups=self.subscription_group_manager, offsets=self.consumer_offset_manager,
            consumers=self.consumer_manager, runtime_info_table=self.runtime_info)
        register_group_admin_processors(
            table, is_slave=self.is_slave, groups=self.subscription_group_manager,
            offsets=self.consumer_offset_manager, delay_offsets=self.schedule_service.offsets,
            persister=self.config_persister, on_group_deleted=self._forget_group_stats)
        register_consumer_admin_processors(
            table, broker_name=self.config.broker_name, store=self.store, topics=self.topic_config_manager,
            offsets=self.consumer_offset_manager, consumers=self.consumer_manager, stats=self.stats)
        register_usage_admin_processors(
            table, cluster_name=self.config.broker_cluster_name, broker_name=self.config.broker_name,
            producers=self.producer_manager, consumers=self.consumer_manager, offsets=self.consumer_offset_manager)
        register_consumer_call_processors(table, broker_name=self.config.broker_name, store=self.store,
                                          consumers=self.consumer_manager)
        register_inspect_processors(table, store=self.store, consumers=self.consumer_manager,
                                    producers=self.producer_manager)
        register_acl_admin_processors(table, watcher=self.acl_watcher, cluster_name=self.config.broker_cluster_name,
                                      broker_name=self.config.broker_name, broker_addr=self.config.broker_addr)
        register_runtime_config_processor(table, RuntimeConfig(self.loaded_config, self.config_persister,
                                                               self._on_permission_change))
        return table

    def _on_permission_change(self) -> None:
        # Apache: a new brokerPermission is a new data version, registered at once
        self.topic_config_manager.data_version.next_version()
        self.registration.request_register_all()

    def _transaction_runtime_info(self) -> dict[str, str]:
        # pyrmq's own key: half messages not committed nor rolled back yet, per producer group
        return {TRANSACTION_PENDING_KEY: fastjson.dumps(self.transaction_check_service.pending_by_group())}

    # --- hooks ----------------------------------------------------------------------------

    def _go_away(self, channel: Channel, request: RemotingCommand) -> None:
        """During a graceful stop with enableShutdownGracefully: 5.3.2+ clients are told to go."""
        if self._going_away and request.version > GO_AWAY_AFTER_VERSION:
            raise RequestError(ResponseCode.GO_AWAY, "please go away")

    def _on_channel(self, channel: Channel) -> None:
        channel.on_close(self._on_channel_closed)

    def _on_channel_closed(self, channel: Channel) -> None:
        def notify_enabled(group: str) -> bool:
            config = self.subscription_group_manager.table.get(group)
            return self.config.notify_consumer_ids_changed_enable and (
                config is None or config.notify_consumer_ids_changed_enable)
        self.consumer_manager.on_channel_closed(channel, notify_enabled)
        self.producer_manager.on_channel_closed(channel)

    def request_register_all(self) -> None:
        # Called by the topic manager, which exists before the registration service.
        registration = getattr(self, "registration", None)
        if registration is not None:
            registration.request_register_all()

    # --- lifecycle ------------------------------------------------------------------------

    def load(self) -> None:
        self.topic_config_manager.load()
        self.consumer_offset_manager.load()
        self.subscription_group_manager.load()
        self.consumer_filter_manager.load()
        self.schedule_service.load()
        self.store.load()
        self.store.start()
        if self.timer_service is not None:
            self.timer_service.load()
        # the disk guard's first reading before any port opens (Apache takes it 1 s after start):
        # a broker started on a full disk refuses writes from its first request on
        self.store.clean_service.check_disk_space()
        # The system topics of a fresh broker are written at once, as Java does.
        try:
            self.topic_config_manager.persist()
        except OSError as exc:   # a full disk: serve what is stored; the file is written on the next change
            log.error("writing the topic config at start failed: %s", exc)

    # autoDeleteUnusedStats (Apache's key, off by default as there): a deleted topic's or group's
    # stats items go with it; otherwise VIEW_BROKER_STATS_DATA still answers for them
    def _forget_topic_stats(self, topic: str) -> None:
        if self.config.auto_delete_unused_stats:
            self.stats.on_topic_deleted(topic)

    def _forget_group_stats(self, group: str) -> None:
        if self.config.auto_delete_unused_stats:
            self.stats.on_group_deleted(group)

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's table (mqadmin brokerStatus; the metrics endpoint too)."""
        return broker_runtime_info(
            self.store, self.stats, lambda: self.schedule_service.offset_table,
            lambda: {**ha_runtime_info(self), **self._transaction_runtime_info(),
                     **self.accumulation_alarm.runtime_info()})

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve until ``stop()``; the store is loaded (recovered) before any port opens."""
        await trio.to_thread.run_sync(self.load)
        try:
            async with RemotingClient(ssl_context=self.client_ssl_context) as client:
                self.assignment_processor.client = client   # routes for QUERY_ASSIGNMENT
                async with trio.open_nursery() as nursery:
                    if self.ha_service is not None:
                        await nursery.start(self.ha_service.serve)
                    if self.ha_client is not None:
                        nursery.start_soon(self.ha_client.run)
                    await nursery.start(self.server.serve)
                    if self.fast_server is not None:
                        await nursery.start(self.fast_server.serve)
                    nursery.start_soon(self.flush_service.run)
                    nursery.start_soon(self.config_persister.run)
                    nursery.start_soon(self.allocate_service.run)
                    nursery.start_soon(self.store_clean_task.run)
                    nursery.start_soon(self.pull_processor.hold_service.run)
                    nursery.start_soon(self._housekeeping)
                    if self.store.index_rebuild is not None:
                        nursery.start_soon(self._rebuild_index)
                    nursery.start_soon(self.accumulation_alarm.run)
                    nursery.start_soon(self.stats.run)
                    if self.metrics is not None:
                        await nursery.start(self.metrics.server.serve)
                    if self.console is not None:
                        await nursery.start(self.console.serve)
                    if self.acl_watcher is not None:
                        nursery.start_soon(self.acl_watcher.run)
                    if not self.is_slave:   # a slave takes the master's progress, it does not deliver
                        nursery.start_soon(self.schedule_service.run)
                        nursery.start_soon(self.transaction_check_service.run)
                        if self.timer_service is not None:
                            nursery.start_soon(self.timer_service.run)
                    if self.config.namesrv_addrs:
                        await nursery.start(self.registration.run, client)
                    if self.filter_server_manager.slots:
                        nursery.start_soon(self.filter_server_manager.run, self.server.port)
                    if self.is_slave:
                        nursery.start_soon(self.slave_sync.run, client)
                    log.info("broker %s (%s) ready: %s; the send path's byte work %s", self.config.broker_name,
                             self.config.broker_cluster_name, self.config.broker_addr,
                             "in C (pyrmq.codec._native)" if native.NATIVE
                             else "in pure Python (the C extension is not built, or PYRMQ_NATIVE=0)")
                    task_status.started(self.server.port)
                    await self._stopping.wait()
                    await self._graceful_stop(client, nursery)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._persist_and_close_store)
            self._stopped.set()

    async def _graceful_stop(self, client: RemotingClient, nursery: trio.Nursery) -> None:
        if self.config.enable_shutdown_gracefully:
            # Apache 5.3: the port stays open for shutdownWaitTimeSeconds while every request of a
            # 5.3.2+ client is answered GO_AWAY; out of the routes first, so clients move on.
            log.info("broker stopping: answering GO_AWAY for %d s", self.config.shutdown_wait_time_seconds)
            self._going_away = True
            if self.config.namesrv_addrs:
                await self.registration.unregister_all(client)
            await trio.sleep(self.config.shutdown_wait_time_seconds)
        log.info("broker stopping: no new connections, finishing in-flight work")
        self.server.stop_accepting()
        if self.fast_server is not None:
            self.fast_server.stop_accepting()
        if self.config.namesrv_addrs and not self._going_away:
            await self.registration.unregister_all(client)
        self.pull_processor.hold_service.wake_all()
        with trio.move_on_after(SHUTDOWN_GRACE_S):
            await trio.to_thread.run_sync(self.store.flush_commit_log)
            while self.flush_service.pending_waiters:
                await trio.sleep(0.01)
            await trio.sleep(0.05)   # let writers drain the last responses
        nursery.cancel_scope.cancel()

    def _persist_and_close_store(self) -> None:
        self.flush_service.fail_waiters()
        for persist in (self.consumer_offset_manager.persist, self.topic_config_manager.persist,
                        self.subscription_group_manager.persist, self.schedule_service.persist,
                        self.consumer_filter_manager.persist):
            try:
                persist()
            except OSError as exc:
                log.error("persisting config at shutdown failed: %s", exc)
        if self.timer_service is not None:
            self.timer_service.shutdown()
        self.store.shutdown()
        log.info("broker stopped")

    def stop(self) -> None:
        self._stopping.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def _rebuild_index(self) -> None:
        """After a crash, index the records the message index lacks, a slice at a time between
        the requests (the store listened without waiting for it)."""
        store = self.store
        guard = ServiceGuard("message index rebuild", log)
        while store.index_rebuild is not None:
            going = False
            with guard.round():
                store.rebuild_index_step()
                going = store.index_rebuild is None or store.index_rebuild.failure is None
            # a file that cannot be created (or a bug): tried again once a second, as a stalled dispatch
            await trio.sleep(0 if going else 1.0)

    async def _housekeeping(self) -> None:
        last_scan = last_filter_persist = trio.current_time()
        interval = self.config.flush_consumer_offset_interval / 1000
        guard = ServiceGuard("consumer offset persistence and client scan", log)
        while True:
            await trio.sleep(interval)
            with guard.round():
                self.consumer_offset_manager.persist_if_dirty()
                if trio.current_time() - last_filter_persist >= FILTER_PERSIST_INTERVAL_S:
                    last_filter_persist = trio.current_time()
                    self.consumer_filter_manager.persist_if_needed()
                if trio.current_time() - last_scan >= CLIENT_SCAN_INTERVAL_S:
                    last_scan = trio.current_time()
                    for channel in set(self.consumer_manager.scan_not_active()
                                       + self.producer_manager.scan_not_active()):
                        log.info("closing idle client channel %s (no heartbeat for %d ms)",
                                 channel.remote_addr, self.config.channel_expired_timeout)
                        channel.close()

"""Broker configuration: Apache RocketMQ's ``broker.conf`` keys and meanings.

A key is the camelCase name of a field of ``BrokerConfig`` or of the store's
``MessageStoreConfig`` (``listenPort`` -> ``listen_port``).  An unknown key is a warning (Apache
has hundreds we do not implement yet); a value of the wrong type is an error naming the key.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from pyrmq.broker.schedule_service import parse_delay_levels
from pyrmq.codec.ha_frames import MAX_TRANSFER_BODY
from pyrmq.codec.java_properties import parse_properties
from pyrmq.remoting.tls_config import TlsConfig, TlsConfigError, is_tls_key, tls_config_from_properties
from pyrmq.store.message_store import FlushDiskType, MessageStoreConfig

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A broker.conf value that cannot be used; the message names the key."""


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def _default_ip() -> str:
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
    return ip


@dataclass
class BrokerConfig:
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = field(default_factory=lambda: socket.gethostname().split(".")[0] or "broker-a")
    broker_id: int = 0
    namesrv_addr: str = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR", ""))
    listen_port: int = 10911
    bind_address: str = "0.0.0.0"
    broker_ip1: str = field(default_factory=_default_ip)
    broker_ip2: str = ""
    ha_listen_port: int = 0          # 0: listenPort + 1, as Apache
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    broker_permission: int = 6
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    register_name_server_period: int = 30_000
    region_id: str = "DefaultRegion"
    # RECALL_MESSAGE (5.3, timer messages): off by default, as Apache
    recall_message_enable: bool = False
    allow_recall_when_broker_not_writeable: bool = True
    trace_on: bool = True
    store_reply_message_enable: bool = True   # replies (request/reply) are stored as well as pushed
    fast_port_enable: bool = True    # also listen on listenPort - 2 (the "VIP channel" of old clients)
    max_frame_bytes: int = 16 * 1024 * 1024
    # Apache's NettyServerConfig key: a connection without a complete frame for this long is closed.
    server_channel_max_idle_time_seconds: int = 120
    # pyrmq's own: a frame whose first bytes arrived must be complete within this many seconds.
    partial_frame_timeout_seconds: int = 30
    # pyrmq's own: a peer that takes no part of its answers for this many seconds is disconnected.
    server_channel_write_timeout_seconds: int = 30
    notify_consumer_ids_changed_enable: bool = True
    # Apache 5.x NettyServerConfig keys: a graceful stop first answers every request of a client
    # newer than 5.3.1 with GO_AWAY for this many seconds (the client reconnects and retries).
    enable_shutdown_gracefully: bool = False
    shutdown_wait_time_seconds: int = 30
    channel_expired_timeout: int = 120_000
    flush_consumer_offset_interval: int = 5000
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    # ACL 1.0 (Apache's key): every request is checked against plain_acl.yml.
    acl_enable: bool = False
    # pyrmq's own: where plain_acl.yml is (relative to the -c file's directory); default: beside
    # the -c file. Apache reads ${rocketmq.home.dir}/conf/plain_acl.yml (JVM property
    # rocketmq.acl.plain.file, relative to the home directory, overrides it).
    acl_plain_file: str = ""
    # pyrmq's own: how often the file is checked for changes (Apache: every 5 s).
    acl_file_watch_interval_ms: int = 5000
    # Replication (spec/ha.md; Apache's MessageStoreConfig keys, same names and defaults).
    # pyrmq's own: the address the HA port binds; default brokerIP1 (Apache binds every interface).
    ha_listen_address: str = ""
    ha_master_address: str = ""      # a slave's fixed master HA address; default: learnt from the NameServer
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    # Transactions (Apache's keys and defaults): a half message older than transactionTimeOut ms
    # is checked with its producer every transactionCheckInterval ms, at most transactionCheckMax
    # times; rejectTransactionMessage refuses half messages.
    transaction_time_out: int = 6000
    transaction_check_max: int = 15
    transaction_check_interval: int = 60_000
    reject_transaction_message: bool = False
    # SQL92 filtering (Apache's keys and defaults, spec filter.md 3.1): off by default; filter data of
    # groups gone for filterDataCleanTimeSpan ms is dropped; filterSupportRetry evaluates a retry
    # message with its original topic's filter (the bloom sizes are with the bitmap keys below).
    enable_property_filter: bool = False
    filter_support_retry: bool = False
    filter_data_clean_time_span: int = 24 * 3600 * 1000
    # Accumulation alarm (pyrmq's own keys, 0 = off): a group whose lag (messages behind, summed over
    # its queues) or whose %DLQ%<group> size reaches the threshold is logged once and listed in
    # runtime info until it falls below again; checked every accumulationAlarmInterval ms.
    group_lag_alarm_threshold: int = 0
    dlq_size_alarm_threshold: int = 0
    accumulation_alarm_interval: int = 10_000
    # The Prometheus endpoint (pyrmq's own keys; README "Operations"): off unless metricsPort is
    # set, and then on loopback unless metricsBindAddress says otherwise.
    metrics_port: int = 0
    metrics_bind_address: str = "127.0.0.1"
    # The web console (pyrmq's own keys; README "Operations"): off unless consolePort is set, then on
    # loopback unless consoleBindAddress says otherwise; with aclEnable it asks for an admin account.
    console_port: int = 0
    console_bind_address: str = "127.0.0.1"
    # Apache's key: DELETE_TOPIC_IN_BROKER / DELETE_SUBSCRIPTIONGROUP also drop the stats items
    auto_delete_unused_stats: bool = False
    slave_timeout: int = 3000        # how long a SYNC_MASTER send waits for a slave's acknowledgement (ms)
    # Reads from slaves (Apache's key): a pull answer suggests the group's whichBrokerWhenConsumeSlowly
    # when the data pulled is no longer in memory, else the group's brokerId; false: always the master.
    slave_read_enable: bool = False
    # Class filtering (docs/FILTERING.md). filterServerNums is Apache's key: the broker starts this
    # many FilterServer processes itself (start-up only). The others are pyrmq's own, passed to
    # those processes when they start: uploads are off unless enabled, then only for the listed
    # consumer groups (';'-separated); operator-deployed classes come from filterClassDir; Java
    # classes compile against the jars of filterJavaClasspath (':'-separated: rocketmq-common).
    filter_server_nums: int = 0
    filter_class_upload_enable: bool = False
    filter_class_upload_groups: str = ""
    filter_class_dir: str = ""
    filter_java_classpath: str = ""
    filter_match_timeout_millis: int = 1000     # wall clock for one message in a filter worker
    filter_worker_cpu_seconds: int = 30         # RLIMIT_CPU of a filter worker process
    filter_worker_memory_mb: int = 256          # a worker's address space (Python) or heap (Java)
    # SQL92 bloom bitmaps (filter.md section 3.5): computed at dispatch into the ConsumeQueueExt
    # unit (needs the store's enableConsumeQueueExt); k and m of the bloom filter from these two.
    enable_calc_filter_bit_map: bool = False
    max_error_rate_of_bloom_filter: int = 20   # percent
    expect_consumer_num_use_filter: int = 32

    def __post_init__(self) -> None:
        if not self.broker_ip2:
            self.broker_ip2 = self.broker_ip1
        if not self.ha_listen_port and self.listen_port:   # listenPort 0 (any free port): the same for HA
            self.ha_listen_port = self.listen_port + 1
        if not self.ha_listen_address:
            self.ha_listen_address = self.broker_ip1

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]


# Keys Apache accepts that mean nothing to pyrmq yet, or are handled outside the dataclasses.
_ACCEPTED_WITHOUT_EFFECT = {"rocketmqHome", "fetchNamesrvAddrByAddressServer"}
# Apache store keys pyrmq knows but does not implement: accepted with a warning naming them.
_STORE_KEYS_WITHOUT_EFFECT = {
    "transientStorePoolEnable": "pyrmq writes straight into the mapped files (no off-heap write buffer)",
    "transientStorePoolSize": "no transient store pool",
    "commitIntervalCommitLog": "no transient store pool to commit from",
    "commitCommitLogLeastPages": "no transient store pool to commit from",
    "commitCommitLogThoroughInterval": "no transient store pool to commit from",
    "fastFailIfNoBufferInStorePool": "no transient store pool",
    "warmMapedFileEnable": "file space is reserved (fallocate) a chunk ahead of the writer; there is nothing to warm",
    "flushLeastPagesWhenWarmMapedFile": "file space is reserved (fallocate) a chunk ahead of the writer; there is nothing to warm",
}
PLAIN_ACL_FILE_NAME = "plain_acl.yml"
# Paths come only from these keys of the operator's file, never from requests at runtime.
_PATH_KEYS = {"storePathRootDir", "storePathCommitLog"}


def snake_name(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.upper() if re.fullmatch(r"ip\d*", part) else part.capitalize() for part in rest)


def convert_value(key: str, raw: str, typ: Any) -> Any:
    raw = raw.strip()
    try:
        if typ is bool:
            if raw.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return raw.lower() == "true"
        if typ is int:
            return int(raw)
        if typ is float:
            return float(raw)
        if isinstance(typ, type) and issubclass(typ, enum.Enum):
            # Case-sensitive, as Apache's Enum.valueOf. Apache then silently keeps the default
            # (a "sync_flush" broker flushes asynchronously); pyrmq refuses to start instead.
            if raw not in typ.__members__:
                case = " (names are case-sensitive)" if raw.upper() in typ.__members__ else ""
                raise ValueError(f"not a {typ.__name__}{case}")
            return typ[raw]
        return raw
    except ValueError as exc:
        choices = f" (one of {', '.join(m.name for m in typ)})" if isinstance(typ, type) and issubclass(typ, enum.Enum) else ""
        raise ConfigError(f"broker.conf: bad value {raw!r} for {key}{choices}: {exc}") from None


@dataclass
class LoadedConfig:
    broker: BrokerConfig
    store: MessageStoreConfig
    # tls.* keys (Apache's system property names) and useTLS; the NameServer of a standalone
    # process uses them too, as both roles of one JVM would.
    tls: TlsConfig = field(default_factory=TlsConfig)
    # The -c file (runtime config changes are written into it) and its directory, where
    # plain_acl.yml is looked for; None without a file.
    config_file: Path | None = None
    config_dir: Path | None = None
    # broker.conf keys that are no pyrmq setting, as given (GET_BROKER_CONFIG reports Apache's).
    apache_only: dict[str, str] = field(default_factory=dict)

    @property
    def plain_acl_file(self) -> Path:
        """Where the ACL rules are read from (see ``BrokerConfig.acl_plain_file``)."""
        name = self.broker.acl_plain_file
        if name:
            path = Path(name).expanduser()
            if not path.is_absolute():
                path = (self.config_dir or Path.cwd()) / path
            return path.absolute()
        if self.config_dir is not None:
            return self.config_dir / PLAIN_ACL_FILE_NAME
        home = os.environ.get("ROCKETMQ_HOME")
        if home:
            return Path(home).absolute() / "conf" / PLAIN_ACL_FILE_NAME
        raise ConfigError("broker.conf: aclEnable=true needs plain_acl.yml: start with -c <dir>/broker.conf "
                          "(the file is read from <dir>), set aclPlainFile, or set ROCKETMQ_HOME")


def field_types(obj: Any) -> dict[str, Any]:
    """Field name -> type of a config dataclass (or its instance), for ``convert_value``."""
    return get_type_hints(obj if isinstance(obj, type) else type(obj))


def build_config(properties: dict[str, str]) -> LoadedConfig:
    broker_fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    store_fields = {f.name: f for f in dataclasses.fields(MessageStoreConfig)}
    broker_types = field_types(BrokerConfig)
    store_types = field_types(MessageStoreConfig)
    broker_kwargs: dict[str, Any] = {}
    store_kwargs: dict[str, Any] = {}
    bad: list[str] = []   # every bad value is reported at once, not the first one only
    apache_only: dict[str, str] = {}
    for key, raw in properties.items():
        name = snake_name(key)
        try:
            if name in broker_fields:
                broker_kwargs[name] = convert_value(key, raw, broker_types[name])
            elif name in store_fields:
                typ = store_types[name]
                if typ == (str | None):
                    typ = str
                store_kwargs[name] = convert_value(key, raw, typ)
        except ConfigError as exc:
            bad.append(str(exc))
        if name in broker_fields or name in store_fields:
            continue
        elif is_tls_key(key):
            continue
        apache_only[key] = raw.strip()
        if key in _STORE_KEYS_WITHOUT_EFFECT:
            log.warning("broker.conf: %s=%s has no effect in pyrmq (%s)", key, raw,
                        _STORE_KEYS_WITHOUT_EFFECT[key])
        elif key not in _ACCEPTED_WITHOUT_EFFECT:
            log.warning("broker.conf: unknown key %s ignored", key)
    store_kwargs.setdefault("store_path_root_dir", str(Path.home() / "store"))
    for key in _PATH_KEYS:
        name = snake_name(key)
        if store_kwargs.get(name):
            store_kwargs[name] = os.path.abspath(os.path.expanduser(store_kwargs[name]))
    broker = BrokerConfig(**broker_kwargs)
    store = MessageStoreConfig(**store_kwargs)
    validate_config(broker, store, bad)
    try:
        tls = tls_config_from_properties(properties, "broker.conf")
    except TlsConfigError as exc:
        bad.append(f"broker.conf: {exc}")
    if bad:
        raise ConfigError("\n".join(bad))
    return LoadedConfig(broker, store, tls, apache_only=apache_only)


def validate_config(broker: BrokerConfig, store: MessageStoreConfig, bad: list[str] | None = None) -> None:
    """Raises one ConfigError naming every bad value (one line each); with ``bad`` given, adds
    to it instead (build_config collects the conversion errors first)."""
    problems = bad if bad is not None else []
    _check_config(broker, store, problems)
    if bad is None and problems:
        raise ConfigError("\n".join(problems))


def _check_config(broker: BrokerConfig, store: MessageStoreConfig, bad: list[str]) -> None:
    for key, port in (("listenPort", broker.listen_port), ("haListenPort", broker.ha_listen_port),
                      ("metricsPort", broker.metrics_port), ("consolePort", broker.console_port)):
        if not 0 <= port <= 65535:
            bad.append(f"broker.conf: {key}={port} is not a TCP port")
    if broker.fast_port_enable and broker.listen_port and broker.listen_port < 3:
        bad.append("broker.conf: listenPort must be >= 3 while fastPortEnable (listenPort - 2) is on")
    if store.mapped_file_size_consume_queue % 20:
        bad.append("broker.conf: mappedFileSizeConsumeQueue must be a multiple of 20")
    if store.mapped_file_size_commit_log < 4096:
        bad.append("broker.conf: mappedFileSizeCommitLog must be at least 4096")
    for key in ("timerPrecisionMs", "timerMaxDelaySec", "timerFlushIntervalMs", "mappedFileSizeTimerLog"):
        if getattr(store, snake_name(key)) <= 0:
            bad.append(f"broker.conf: {key} must be positive")
    if store.clean_files_first_delay_ms < 0:
        bad.append("broker.conf: cleanFilesFirstDelayMs must not be negative")
    hours = [h.strip() for h in store.delete_when.split(";")]
    if not all(h.isdigit() and int(h) < 24 for h in hours):
        bad.append(f"broker.conf: deleteWhen={store.delete_when!r} must be hours of the day (0-23) "
                   "separated by ';'")
    if broker.broker_role is BrokerRole.SLAVE:
        if broker.broker_id <= 0:   # Apache's BrokerStartup exits with the same words
            bad.append("broker.conf: Slave's brokerId must be > 0")
    elif broker.broker_id != 0:     # Apache sets a master's brokerId to 0 whatever the file says
        log.warning("broker.conf: brokerId=%d ignored, a master's brokerId is 0", broker.broker_id)
        broker.broker_id = 0
    for key in ("haSendHeartbeatInterval", "haHousekeepingInterval", "haTransferBatchSize", "haSlaveFallbehindMax",
                "slaveTimeout"):
        if getattr(broker, snake_name(key)) <= 0:
            bad.append(f"broker.conf: {key} must be positive")
    if not 1 <= broker.max_error_rate_of_bloom_filter < 100:
        bad.append("broker.conf: maxErrorRateOfBloomFilter must be at least 1 and less than 100 (percent)")
    if broker.expect_consumer_num_use_filter < 1:
        bad.append("broker.conf: expectConsumerNumUseFilter must be positive")
    if broker.ha_transfer_batch_size > MAX_TRANSFER_BODY:
        bad.append(f"broker.conf: haTransferBatchSize is at most {MAX_TRANSFER_BODY} (a slave's receive buffer)")
    try:
        parse_delay_levels(broker.message_delay_level)
    except ValueError as exc:
        bad.append(f"broker.conf: {exc}")
    if broker.acl_file_watch_interval_ms <= 0:
        bad.append("broker.conf: aclFileWatchIntervalMs must be positive")
    if not re.fullmatch(r"[%|a-zA-Z0-9_-]+", broker.broker_name):
        bad.append(f"broker.conf: brokerName {broker.broker_name!r} has characters outside [%|a-zA-Z0-9_-]")


def load_config_file(path: str | None, overrides: dict[str, str] | None = None) -> LoadedConfig:
    properties: dict[str, str] = {}
    if path:
        try:
            properties = parse_properties(Path(path).read_text("utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    properties.update(overrides or {})
    loaded = build_config(properties)
    if path:
        loaded.config_file = Path(path).absolute()
        loaded.config_dir = loaded.config_file.parent
    return loaded


def as_properties(loaded: LoadedConfig) -> dict[str, str]:
    """Every setting as Apache-style key=value text, for GET_BROKER_CONFIG."""
    result = {}
    for obj in (loaded.broker, loaded.store):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, enum.Enum):
                value = value.name
            elif isinstance(value, bool):
                value = str(value).lower()
            result[_camel(f.name)] = "" if value is None else str(value)
    return result


__all__ = ["BrokerConfig", "BrokerRole", "ConfigError", "FlushDiskType", "LoadedConfig",
           "MessageStoreConfig", "as_properties", "build_config", "load_config_file", "parse_properties"]

"""UPDATE_BROKER_CONFIG (25): the broker settings an operator may change while the broker runs.

Apache applies whatever keys the request names -- the road to CVE-2023-33246, where
``filterServerNums`` with a crafted ``rocketmqHome`` made the broker run a shell command -- and later
added a short deny-list.  pyrmq turns that around: only the keys of ``RUNTIME_KEYS`` are accepted.
Each of them is read by its users at every use, so a new value takes effect at once.  Every other
key (paths, ports, the role, process-shaping keys such as ``filterServerNums`` and ``rocketmqHome``,
keys read once at start-up, unknown keys) is refused with NO_PERMISSION (16), the code of Apache's
deny-list, and a remark naming it.  All keys of a request are checked, and their values validated as
broker.conf's are, before any is applied.

An accepted change is written into the broker's ``-c`` file (its line rewritten, other lines kept;
temp file, fsync, rename), so it survives a restart as with Apache, which rewrites that file.
Without a ``-c`` file a change lasts until the broker stops.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import trio

from pyrmq.broker.config import ConfigError, LoadedConfig, convert_value, field_types, snake_name, validate_config
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.java_properties import parse_properties, update_properties
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import ProcessorTable

if TYPE_CHECKING:
    from pyrmq.common.persister import ConfigPersister

log = logging.getLogger(__name__)

# BrokerConfig keys whose readers look them up at every use.
BROKER_RUNTIME_KEYS = frozenset({
    "brokerPermission", "longPollingEnable", "shortPollingTimeMills", "slaveReadEnable",
    "notifyConsumerIdsChangedEnable", "rejectTransactionMessage", "transactionTimeOut",
    "transactionCheckMax", "transactionCheckInterval", "recallMessageEnable",
    "allowRecallWhenBrokerNotWriteable", "groupLagAlarmThreshold", "dlqSizeAlarmThreshold",
    "accumulationAlarmInterval", "enablePropertyFilter", "filterSupportRetry", "filterDataCleanTimeSpan",
})
# MessageStoreConfig keys the clean service reads at every round.
STORE_RUNTIME_KEYS = frozenset({
    "fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio", "cleanFileForciblyEnable",
    "diskSpaceWarningLevelRatio", "diskSpaceCleanForciblyRatio", "deleteConsumeQueueFilesInterval",
})
RUNTIME_KEYS = BROKER_RUNTIME_KEYS | STORE_RUNTIME_KEYS
# Apache 4.9.8's deny-list (always refused there): refused here with Apache's own remark.
APACHE_BLACK_LIST = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})
APACHE_BLACK_LIST_REMARK = "Can not update config in black list."
_POSITIVE_KEYS = frozenset({"transactionCheckInterval", "accumulationAlarmInterval", "fileReservedTime"})
_PERMISSIONS = (0, 2, 4, 6)   # none, write, read, read+write (PermName bits; inherit means nothing here)


class UpdateRefused(Exception):
    """A request that changes nothing: ``code`` and ``remark`` are the answer."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def plan_update(loaded: LoadedConfig, properties: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (broker, store) field values ``properties`` asks for, all checked; or UpdateRefused."""
    refused = sorted(key for key in properties if key not in RUNTIME_KEYS)
    if refused:
        if APACHE_BLACK_LIST.intersection(refused):
            raise UpdateRefused(ResponseCode.NO_PERMISSION, APACHE_BLACK_LIST_REMARK)
        raise UpdateRefused(ResponseCode.NO_PERMISSION,
                            f"Can not update config {', '.join(refused)} at runtime: only these keys can be "
                            f"changed while the broker runs: {', '.join(sorted(RUNTIME_KEYS))}; "
                            "set other keys in broker.conf and restart")
    changes: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    try:
        for key, raw in properties.items():
            target = 0 if key in BROKER_RUNTIME_KEYS else 1
            name = snake_name(key)
            value = convert_value(key, raw, field_types(loaded.broker if target == 0 else loaded.store)[name])
            _check_range(key, value)
            changes[target][name] = value
        validate_config(dataclasses.replace(loaded.broker, **changes[0]),
                        dataclasses.replace(loaded.store, **changes[1]))
    except ConfigError as exc:
        raise UpdateRefused(ResponseCode.SYSTEM_ERROR, str(exc).replace("broker.conf: ", "")) from None
    return changes


def _check_range(key: str, value: Any) -> None:
    if key == "brokerPermission" and value not in _PERMISSIONS:
        raise ConfigError(f"brokerPermission must be one of {', '.join(map(str, _PERMISSIONS))} "
                          "(2 write, 4 read, 6 read and write)")
    if key in _POSITIVE_KEYS and value <= 0:
        raise ConfigError(f"{key} must be positive")
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise ConfigError(f"{key} must not be negative")


class RuntimeConfig:
    """Applies accepted changes to the live config objects and writes them to the ``-c`` file."""

    def __init__(self, loaded: LoadedConfig, persister: ConfigPersister,
                 on_permission_change: Callable[[], None]) -> None:
        self.loaded = loaded
        self.persister = persister
        self.on_permission_change = on_permission_change
        self.changes: dict[str, str] = {}   # every key changed since start, as the operator wrote it

    def apply(self, properties: dict[str, str], broker_changes: dict[str, Any], store_changes: dict[str, Any]) -> None:
        for name, value in broker_changes.items():
            setattr(self.loaded.broker, name, value)
        for name, value in store_changes.items():
            setattr(self.loaded.store, name, value)
        self.changes.update(properties)
        if "broker_permission" in broker_changes:
            self.on_permission_change()

    async def update(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            text = request.body.decode("utf-8") if request.body else ""
        except UnicodeDecodeError:
            return request.response(ResponseCode.SYSTEM_ERROR, "the body is not UTF-8 properties text")
        properties = parse_properties(text)
        if not properties:
            return request.response(ResponseCode.SUCCESS)
        try:
            broker_changes, store_changes = plan_update(self.loaded, properties)
        except UpdateRefused as refused:
            log.warning("UPDATE_BROKER_CONFIG from %s refused: %s", channel.remote_addr, refused.remark)
            return request.response(refused.code, refused.remark)
        log.info("UPDATE_BROKER_CONFIG from %s: %s", channel.remote_addr,
                 ", ".join(f"{k}={v}" for k, v in sorted(properties.items())))
        self.apply(properties, broker_changes, store_changes)
        path = self.loaded.config_file
        if path is None:
            return request.response(ResponseCode.SUCCESS)
        return await self._persist(request, path)

    async def _persist(self, request: RemotingCommand, path: Path) -> RemotingCommand:
        try:
            text = await trio.to_thread.run_sync(path.read_text, "utf-8")
        except OSError as exc:
            log.error("UPDATE_BROKER_CONFIG: cannot read %s to record the change: %s", path, exc)
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"applied, but persisting {path.name} failed, see the server log")
        # the encoder runs when the persister writes, with every change made by then
        self.persister.mark_dirty(path, lambda: update_properties(text, self.changes))
        answer: RemotingCommand = await self.persister.answer_when_written(request, path.name)
        return answer


def register_runtime_config_processor(table: ProcessorTable, runtime_config: RuntimeConfig) -> None:
    table.register(RequestCode.UPDATE_BROKER_CONFIG, runtime_config.update)

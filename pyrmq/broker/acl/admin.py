"""The ACL 1.0 admin requests, answered as Apache RocketMQ 4.9.7's AdminBrokerProcessor answers
them (mqadmin updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr, clusterAclConfigVersion):

- UPDATE_AND_CREATE_ACL_CONFIG (50): create or update one account; failure
  UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209);
- DELETE_ACL_CONFIG (51): remove one account; failure DELETE_ACL_CONFIG_FAILED (210);
- UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replace ``globalWhiteRemoteAddresses``; failure
  UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED (211);
- GET_BROKER_CLUSTER_ACL_INFO (52): the file's data version, with the broker's names;
- GET_BROKER_CLUSTER_ACL_CONFIG (54): the accounts and global white addresses as the file has
  them (secrets included, as Apache answers; admin-only here).

A change is written to ``plain_acl.yml`` (``plain_writer``: checked first, then temp file, fsync,
rename, in a worker thread) and applied at once; the file watcher's lock is held meanwhile, so
concurrent changes apply one after the other and the watcher does not read our own write back.

Deliberate differences from Apache 4.9.7 (not compared by the compat tests):

- these five codes need an admin account (``resources.ADMIN_CODES``); Apache lets any account
  with a valid signature rewrite the ACL;
- a file path is never taken from a request: UPDATE_GLOBAL_WHITE_ADDRS_CONFIG's
  ``aclFileFullPath`` must be absent, empty or this broker's own ACL file, else 211 with a remark
  naming the file to use (Apache writes any existing ``.yml`` under its home directory); and,
  where Apache refuses a request without that field (its header declares it non-null), pyrmq
  takes the absence for its own file (mqadmin updateGlobalWhiteAddr without ``-p``);
- values Apache writes unchecked are checked: default permissions must be permission words,
  white addresses must parse (``common/acl/address.py``);
- with aclEnable=false Apache answers with the text of its own NullPointerException (or, for
  52 and 54, not at all); pyrmq answers the request's failure code (SYSTEM_ERROR for 52 and 54)
  with the remark ``ACL is disabled on this broker (aclEnable=false)``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import trio

from pyrmq.broker.acl import plain_writer
from pyrmq.broker.acl.plain_config import AclConfigError, PlainAclConfig, scalar_text
from pyrmq.broker.acl.plain_writer import AclEditError, Document
from pyrmq.broker.acl.watcher import AclFileWatcher, FileIdentity, file_identity
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.dispatch import Processor, ProcessorTable
from pyrmq.remoting.headers import required_str

log = logging.getLogger(__name__)

__all__ = ["ACL_DISABLED_REMARK", "AclAdmin", "register_acl_admin_processors"]

ACL_DISABLED_REMARK = "ACL is disabled on this broker (aclEnable=false)"

# The fields of UPDATE_AND_CREATE_ACL_CONFIG's header (CreateAccessConfigRequestHeader).
_ACCOUNT_FIELDS = ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
                   "defaultGroupPerm", "topicPerms", "groupPerms")
# PlainAccessConfig's members, as GET_BROKER_CLUSTER_ACL_CONFIG's body names them.
_TEXT_MEMBERS = ("accessKey", "secretKey", "whiteRemoteAddress", "defaultTopicPerm", "defaultGroupPerm")
_LIST_MEMBERS = ("topicPerms", "groupPerms")


@dataclass(frozen=True)
class BrokerNames:
    cluster_name: str
    broker_name: str
    broker_addr: str


class AclAdmin:
    """The five handlers over the broker's ACL file and its watcher (None: ACL is off)."""

    def __init__(self, watcher: AclFileWatcher | None, names: BrokerNames) -> None:
        self.watcher = watcher
        self.names = names

    def register(self, table: ProcessorTable) -> None:
        for code, failed, handler in (
                (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                 self.update_and_create_acl_config),
                (RequestCode.DELETE_ACL_CONFIG, ResponseCode.DELETE_ACL_CONFIG_FAILED, self.delete_acl_config),
                (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                 self.update_global_white_addrs_config),
                (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, ResponseCode.SYSTEM_ERROR, self.get_broker_cluster_acl_info),
                (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, ResponseCode.SYSTEM_ERROR,
                 self.get_broker_cluster_acl_config)):
            table.register(code, self._when_enabled(failed, handler))

    def _when_enabled(self, failed: int, handler: Processor) -> Processor:
        def process(channel: Channel, request: RemotingCommand) -> Any:
            if self.watcher is None:
                return request.response(failed, ACL_DISABLED_REMARK)
            return handler(channel, request)
        return process

    def _watcher(self) -> AclFileWatcher:
        assert self.watcher is not None   # the handlers run only when ACL is on (_when_enabled)
        return self.watcher

    # --- changes --------------------------------------------------------------------------

    def update_and_create_acl_config(self, channel: Channel, request: RemotingCommand) -> Any:
        access_key = required_str(request, "accessKey")
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        fields = request.ext_fields or {}
        try:
            update = plain_writer.account_update({name: fields.get(name) for name in _ACCOUNT_FIELDS})
        except AclEditError as exc:
            return request.response(failed, str(exc))

        def edit(document: Document) -> None:
            plain_writer.upsert_account(document, update)
        return self._change(request, failed, edit, f"account {access_key} created or updated by {channel.remote_addr}")

    def delete_acl_config(self, channel: Channel, request: RemotingCommand) -> Any:
        access_key = required_str(request, "accessKey")
        failed = ResponseCode.DELETE_ACL_CONFIG_FAILED

        def edit(document: Document) -> None:
            if not access_key or not plain_writer.delete_account(document, access_key):
                raise AclEditError(f"The accesskey[{access_key}] corresponding to accessConfig has been deleted failed.")
        return self._change(request, failed, edit, f"account {access_key} deleted by {channel.remote_addr}")

    def update_global_white_addrs_config(self, channel: Channel, request: RemotingCommand) -> Any:
        addresses = required_str(request, "globalWhiteAddrs")
        failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        ours = self._watcher().path
        named = (request.ext_fields or {}).get("aclFileFullPath")
        if named and not _same_file(named, ours):
            return request.response(failed, f"aclFileFullPath={named} is not this broker's ACL file: leave it out "
                                             f"(mqadmin updateGlobalWhiteAddr without -p) or name {ours}")

        def edit(document: Document) -> None:
            plain_writer.set_global_white(document, plain_writer.java_split(addresses, ","))
        return self._change(request, failed, edit, f"global white addresses set to {addresses} by {channel.remote_addr}")

    async def _change(self, request: RemotingCommand, failed: int, edit: Callable[[Document], None],
                      what: str) -> RemotingCommand:
        watcher = self._watcher()
        async with watcher.lock:
            try:
                config, identity = await trio.to_thread.run_sync(_rewrite, watcher.path, edit)
            except AclEditError as exc:
                return request.response(failed, str(exc))
            except OSError as exc:
                log.error("ACL file %s could not be written: %s", watcher.path, exc)
                return request.response(failed, f"{watcher.path} could not be written: {exc}")
            watcher.apply_own_write(config, identity)
        log.info("ACL: %s; %s is at data version %d", what, watcher.path, config.data_version.counter)
        return request.response(ResponseCode.SUCCESS)

    # --- queries --------------------------------------------------------------------------

    def get_broker_cluster_acl_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        watcher = self._watcher()
        version = watcher.validator.config.data_version.to_json()
        return request.response(ResponseCode.SUCCESS, ext_fields={
            "version": fastjson.dumps(version),
            "allAclFileVersion": fastjson.dumps({str(watcher.path): version}),
            "brokerName": self.names.broker_name,
            "brokerAddr": self.names.broker_addr,
            "clusterName": self.names.cluster_name,
        })

    def get_broker_cluster_acl_config(self, channel: Channel, request: RemotingCommand) -> Any:
        path = self._watcher().path

        async def answer() -> RemotingCommand:
            try:
                document = await trio.to_thread.run_sync(plain_writer.read_document, path)
            except (AclConfigError, OSError) as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
            return request.response(ResponseCode.SUCCESS, body=fastjson.dumps(_cluster_acl_config(document)).encode())
        return answer()


def _rewrite(path: Path, edit: Callable[[Document], None]) -> tuple[PlainAclConfig, FileIdentity]:
    """Worker thread: the new config and the identity of the file just written."""
    config = plain_writer.rewrite(path, edit)
    return config, file_identity(path)


def _same_file(named: str, ours: Path) -> bool:
    candidate = Path(named).expanduser()
    if not candidate.is_absolute():
        return False
    return os.path.realpath(candidate) == os.path.realpath(ours)


def _cluster_acl_config(document: Document) -> dict[str, Any]:
    """GetBrokerClusterAclConfigResponseBody: the global white addresses and every account (the
    first of a repeated access key), members as the file spells them."""
    white = document.get("globalWhiteRemoteAddresses")
    accounts: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in document.get("accounts") or []:
        if not isinstance(entry, dict):
            continue
        config: dict[str, Any] = {name: scalar_text(entry.get(name)) for name in _TEXT_MEMBERS}
        config["admin"] = scalar_text(entry.get("admin")) == "true"
        for name in _LIST_MEMBERS:
            items = entry.get(name)
            config[name] = [scalar_text(item) for item in items] if isinstance(items, list) else None
        if config["accessKey"] in seen:
            continue
        seen.add(str(config["accessKey"]))
        accounts.append(config)
    return {"globalWhiteAddrs": [scalar_text(a) for a in white] if isinstance(white, list) else [],
            "plainAccessConfigs": accounts}


def register_acl_admin_processors(table: ProcessorTable, *, watcher: AclFileWatcher | None, cluster_name: str,
                                  broker_name: str, broker_addr: str) -> AclAdmin:
    admin = AclAdmin(watcher, BrokerNames(cluster_name, broker_name, broker_addr))
    admin.register(table)
    return admin

"""Edits of ``plain_acl.yml`` for the ACL admin requests (``admin.py``), shaped as Apache
RocketMQ 4.9.7's ``PlainPermissionManager`` writes the file, so that it still opens in Apache:

- an account is a mapping with ``accessKey``, ``secretKey``, ``whiteRemoteAddress``, ``admin``,
  ``defaultTopicPerm``, ``defaultGroupPerm``, ``topicPerms``, ``groupPerms`` in that order; an
  update keeps the keys it does not name and moves the account to the end of ``accounts``;
- ``globalWhiteRemoteAddresses`` is replaced as a whole;
- every edit bumps ``dataVersion``, a one-entry list ``[{counter, timestamp}]``.

Every value is checked before anything is written (``AclEditError``, whose message is the
remark the requester reads); the edited document must then parse as a whole
(``parse_plain_acl``), so a file this module writes is always one the broker can load. The file
is replaced atomically (temp file, fsync, rename, fsync of the directory): a reader -- our
watcher, Apache's, an operator -- sees the old file or the new one, never half of one.
Blocking: call these from a worker thread.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from pyrmq.broker.acl.plain_config import (
    KEY_MIN_LENGTH,
    PERM_WORDS,
    AclConfigError,
    PlainAclConfig,
    parse_plain_acl,
    read_plain_acl_document,
    scalar_text,
)
from pyrmq.common.acl.address import AddressPatternError, parse_address_pattern
from pyrmq.store.config_file import write_atomically

__all__ = ["AccountUpdate", "AclEditError", "Document", "account_update", "delete_account", "java_split",
           "read_document", "rewrite", "set_global_white", "upsert_account"]

Document = dict[str, Any]


class AclEditError(ValueError):
    """A change that cannot be made; the message is the remark for the requester."""


@dataclass(frozen=True)
class AccountUpdate:
    """The keys an UPDATE_AND_CREATE_ACL_CONFIG request sets, in the file's key order."""

    access_key: str
    entries: tuple[tuple[str, Any], ...]


def java_split(text: str, separator: str) -> list[str]:
    """Java's ``String.split`` on a plain separator: trailing empty pieces are dropped."""
    if text == "":
        return [""]
    pieces = text.split(separator)
    while pieces and pieces[-1] == "":
        pieces.pop()
    return pieces


def _check_resource_perms(items: list[str] | None) -> None:
    """Apache's Permission.checkResourcePerms, with its messages."""
    for item in items or ():
        pieces = [p for p in item.split("=") if p]
        if len(pieces) != 2:
            raise AclEditError(f"Parse Resource format error for {item}.\n"
                               "The expected resource format is 'Res=Perm'. For example: topicA=SUB")
        if pieces[1].strip() not in PERM_WORDS:
            raise AclEditError(f"Parse resource permission error for {item}.\n"
                               "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")


def _check_default_perm(key: str, word: str | None) -> None:
    # Apache writes any word here and later counts it as DENY; a typo would lock the account out.
    if word and word.strip() not in PERM_WORDS:
        raise AclEditError(f"{key}={word} is not one of DENY, PUB, SUB, PUB|SUB, SUB|PUB")


def _check_address(key: str, text: str | None) -> None:
    try:
        parse_address_pattern(text)
    except AddressPatternError as exc:
        raise AclEditError(f"{key}: {exc}") from None


def account_update(fields: Mapping[str, str | None]) -> AccountUpdate:
    """The change an UPDATE_AND_CREATE_ACL_CONFIG header asks for, checked as Apache checks it
    (key lengths, resource permissions) and further (default permissions, white address)."""
    access_key, secret_key = fields.get("accessKey"), fields.get("secretKey")
    if access_key is None or secret_key is None or len(access_key) < KEY_MIN_LENGTH \
            or len(secret_key) < KEY_MIN_LENGTH:
        # Java's String.format prints a missing value as "null"
        raise AclEditError(f"The accessKey={_java_text(access_key)} and secretKey={_java_text(secret_key)} "
                           f"cannot be null and length "
                           f"should longer than {KEY_MIN_LENGTH - 1}")
    topic_perms = _perm_list(fields.get("topicPerms"))
    group_perms = _perm_list(fields.get("groupPerms"))
    _check_resource_perms(topic_perms)
    _check_resource_perms(group_perms)
    default_topic, default_group = fields.get("defaultTopicPerm"), fields.get("defaultGroupPerm")
    _check_default_perm("defaultTopicPerm", default_topic)
    _check_default_perm("defaultGroupPerm", default_group)
    white = fields.get("whiteRemoteAddress")
    _check_address("whiteRemoteAddress", white)
    entries: list[tuple[str, Any]] = [("accessKey", access_key), ("secretKey", secret_key)]
    if white is not None:
        entries.append(("whiteRemoteAddress", white))
    entries.append(("admin", (fields.get("admin") or "").strip().lower() == "true"))
    if default_topic:
        entries.append(("defaultTopicPerm", default_topic))
    if default_group:
        entries.append(("defaultGroupPerm", default_group))
    if topic_perms is not None:
        entries.append(("topicPerms", topic_perms))
    if group_perms is not None:
        entries.append(("groupPerms", group_perms))
    return AccountUpdate(access_key, tuple(entries))


def _java_text(value: str | None) -> str:
    return "null" if value is None else value


def _perm_list(text: str | None) -> list[str] | None:
    return None if text is None else java_split(text, ",")


def _accounts(document: Document) -> list[Any]:
    accounts = document.get("accounts")
    return accounts if isinstance(accounts, list) else []


def _is_account(entry: Any, access_key: str) -> bool:
    return isinstance(entry, dict) and scalar_text(entry.get("accessKey")) == access_key


def upsert_account(document: Document, update: AccountUpdate) -> None:
    """Create the account, or update it in place of its keys and move it to the end (Apache)."""
    accounts = _accounts(document)
    for index, entry in enumerate(accounts):
        if _is_account(entry, update.access_key):
            del accounts[index]
            entry.update(update.entries)
            accounts.append(entry)
            break
    else:
        accounts.append(dict(update.entries))
    document["accounts"] = accounts


def delete_account(document: Document, access_key: str) -> bool:
    """False when the file has no such account (nothing changes)."""
    accounts = _accounts(document)
    for index, entry in enumerate(accounts):
        if _is_account(entry, access_key):
            del accounts[index]
            document["accounts"] = accounts
            return True
    return False


def set_global_white(document: Document, addresses: list[str]) -> None:
    for address in addresses:
        _check_address("globalWhiteRemoteAddresses", address)
    document["globalWhiteRemoteAddresses"] = list(addresses)


def _next_data_version(document: Document) -> None:
    counter = 0
    versions = document.get("dataVersion")
    first = versions[0] if isinstance(versions, list) and versions else None
    if isinstance(first, dict):
        try:
            counter = int(first.get("counter", 0))
        except (TypeError, ValueError):
            counter = 0
    document["dataVersion"] = [{"counter": counter + 1, "timestamp": int(time.time() * 1000)}]


def read_document(path: Path) -> Document:
    """The file as a plain mapping ({} when it is missing or empty)."""
    try:
        return read_plain_acl_document(path)
    except FileNotFoundError:
        return {}


def rewrite(path: Path, edit: Callable[[Document], None]) -> PlainAclConfig:
    """Read the file, apply ``edit`` (which may raise AclEditError), bump the data version, check
    that the result parses and replace the file with it; the config of the new file."""
    try:
        document = copy.deepcopy(read_document(path))
    except AclConfigError as exc:
        raise AclEditError(f"{exc}; fix the file by hand first") from None
    edit(document)
    _next_data_version(document)
    text = yaml.safe_dump(document, default_flow_style=False, sort_keys=False, allow_unicode=True)
    try:
        config = parse_plain_acl(text, str(path))
    except AclConfigError as exc:
        raise AclEditError(str(exc)) from None
    # no .bak copy of the secrets beside the file, and the operator's permissions kept
    write_atomically(path, text, keep_backup=False, keep_mode=True)
    return config

"""``plain_acl.yml``, read as Apache RocketMQ 4.9's ``PlainPermissionManager`` reads it.

```yaml
globalWhiteRemoteAddresses: [10.10.103.*]   # these peers skip every check
accounts:
  - accessKey: RocketMQ          # longer than 6 characters
    secretKey: 12345678          # longer than 6 characters
    whiteRemoteAddress:          # a peer from here skips the signature and permission checks
    admin: false                 # admin-only request codes (create topic, ...)
    defaultTopicPerm: DENY       # for topics not listed below; absent: DENY
    defaultGroupPerm: SUB        # for groups not listed below; absent: DENY
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
dataVersion:                     # written by the ACL admin requests (broker/acl/admin.py)
  - counter: 3
    timestamp: 1700000000000
```

Permissions are DENY, PUB, SUB, PUB|SUB (or SUB|PUB); any other word counts as DENY, as in
Apache. A group's permission is kept under its retry topic (``%RETRY%group``), which is how
requests name the group they need. Apache converts YAML scalars to Java strings and booleans the
way fastjson does (``secretKey: 12345678`` is the string "12345678"); so do we.

YAML is parsed with PyYAML's ``safe_load``: plain data only, no object construction from tags.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pyrmq.common.acl.address import AddressPattern, AddressPatternError, parse_address_pattern
from pyrmq.codec.system_topics import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger(__name__)

__all__ = ["ANY", "DENY", "PERM_WORDS", "PUB", "SUB", "Account", "AclConfigError", "AclDataVersion", "PlainAclConfig",
           "load_plain_acl", "parse_perm", "parse_plain_acl", "plain_acl_from_document",
           "read_plain_acl_document", "scalar_text"]

# Permission bits, as Apache's acl Permission class defines them.
DENY = 1
ANY = 2
PUB = 4
SUB = 8

PERM_WORDS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}
# Apache refuses shorter keys (ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH: "longer than 6").
KEY_MIN_LENGTH = 7
# An operator's file; anything this large is a mistake, not a config.
MAX_FILE_BYTES = 16 * 1024 * 1024


class AclConfigError(ValueError):
    """A ``plain_acl.yml`` that cannot be used as a whole; the message says where and why."""


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    # Topics and retry topics of groups. None when the account lists no topicPerms or groupPerms:
    # Apache lets such an admin account reach every resource.
    resource_perms: Mapping[str, int] | None


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class AclDataVersion:
    """The file's ``dataVersion`` (its first entry), as Apache's DataVersion: a file without one
    is counter 0, stamped when it was read."""

    counter: int = 0
    timestamp: int = field(default_factory=_now_ms)

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}


@dataclass(frozen=True)
class PlainAclConfig:
    global_white: tuple[AddressPattern, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    # Not part of the rules: two configs with the same rules are equal whatever their versions.
    data_version: AclDataVersion = field(default_factory=AclDataVersion, compare=False)


def parse_perm(word: str | None) -> int:
    if word is None:
        return DENY
    return PERM_WORDS.get(word.strip(), DENY)


def load_plain_acl(path: Path) -> PlainAclConfig:
    """Read and parse the file (blocking: call from a worker thread on a running broker)."""
    return plain_acl_from_document(read_plain_acl_document(path), str(path))


def read_plain_acl_document(path: Path) -> dict[str, Any]:
    """The file's YAML as a mapping, read within MAX_FILE_BYTES ({} when it has no data);
    FileNotFoundError when it is missing (blocking)."""
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise AclConfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AclConfigError(f"{path}: not UTF-8 ({exc})") from None
    return _document(text, str(path))


def _document(text: str, source: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{source}: not valid YAML: {exc}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise AclConfigError(f"{source}: the top level must be a mapping, not {type(document).__name__}")
    return document


def parse_plain_acl(text: str, source: str = "plain_acl.yml") -> PlainAclConfig:
    return plain_acl_from_document(_document(text, source), source)


def plain_acl_from_document(document: dict[str, Any], source: str) -> PlainAclConfig:
    if not document:
        log.warning("%s has no data: every request without a white address is refused", source)
        return PlainAclConfig()
    white = tuple(_pattern(source, "globalWhiteRemoteAddresses", _text(source, "globalWhiteRemoteAddresses", item))
                  for item in _list(source, "globalWhiteRemoteAddresses", document.get("globalWhiteRemoteAddresses")))
    accounts: dict[str, Account] = {}
    for number, entry in enumerate(_list(source, "accounts", document.get("accounts")), start=1):
        where = f"{source}: account #{number}"
        if not isinstance(entry, dict):
            raise AclConfigError(f"{where} must be a mapping with accessKey, secretKey, ...")
        account = _account(where, entry)
        if account.access_key in accounts:
            # Apache keeps the first definition of an access key and warns about the others.
            log.warning("%s repeats accessKey %s; the first definition is used", where, account.access_key)
            continue
        accounts[account.access_key] = account
    return PlainAclConfig(white, accounts, _data_version(document.get("dataVersion")))


def _data_version(value: Any) -> AclDataVersion:
    """The first entry of ``dataVersion``; anything unreadable there counts as no version (it
    says nothing about the rules, so it does not make the file unusable)."""
    first = value[0] if isinstance(value, list) and value else None
    if isinstance(first, dict):
        try:
            return AclDataVersion(int(first.get("counter", 0)), int(first.get("timestamp", _now_ms())))
        except (TypeError, ValueError):
            log.warning("plain_acl.yml: dataVersion %r is not {counter, timestamp}; counted as none", first)
    return AclDataVersion()


def _account(where: str, entry: dict[Any, Any]) -> Account:
    access_key = _text(where, "accessKey", entry.get("accessKey"))
    secret_key = _text(where, "secretKey", entry.get("secretKey"))
    if access_key is None or secret_key is None or len(access_key) < KEY_MIN_LENGTH or len(secret_key) < KEY_MIN_LENGTH:
        raise AclConfigError(f"{where} (accessKey={access_key}): accessKey and secretKey are required "
                             f"and must be longer than {KEY_MIN_LENGTH - 1} characters")
    where = f"{where} (accessKey={access_key})"
    perms: dict[str, int] = {}
    # Groups first, then topics, as Apache adds them: a topic entry wins over a group's retry topic.
    for key, is_topic in (("groupPerms", False), ("topicPerms", True)):
        for item in _list(where, key, entry.get(key)):
            resource, perm = _resource_perm(where, key, item)
            perms[resource if is_topic else RETRY_GROUP_TOPIC_PREFIX + resource] = perm
    return Account(
        access_key=access_key, secret_key=secret_key,
        white_remote_address=_pattern(where, "whiteRemoteAddress", _text(where, "whiteRemoteAddress",
                                                                        entry.get("whiteRemoteAddress"))),
        admin=_flag(where, "admin", entry.get("admin")),
        default_topic_perm=_perm(where, "defaultTopicPerm", entry.get("defaultTopicPerm")),
        default_group_perm=_perm(where, "defaultGroupPerm", entry.get("defaultGroupPerm")),
        resource_perms=perms or None)


def _resource_perm(where: str, key: str, item: Any) -> tuple[str, int]:
    text = _text(where, key, item)
    # Apache splits on '=' dropping empty pieces and wants exactly two: resource=PERM.
    pieces = [p for p in (text or "").split("=") if p]
    if len(pieces) != 2 or not pieces[0].strip():
        raise AclConfigError(f"{where}: {key} entry {item!r} is not resource=PERM (for example topicA=PUB|SUB)")
    return pieces[0].strip(), _perm(where, f"{key} entry {pieces[0].strip()!r}", pieces[1])


def _perm(where: str, key: str, value: Any) -> int:
    word = _text(where, key, value)
    perm = parse_perm(word)
    if word is not None and perm == DENY and word.strip() != "DENY":
        log.warning("%s: %s=%r is not DENY, PUB, SUB or PUB|SUB; it counts as DENY", where, key, word)
    return perm


def scalar_text(value: Any) -> str | None:
    """A YAML scalar as the Java string fastjson would make of it (None for anything else)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _text(where: str, key: str, value: Any) -> str | None:
    if value is None:
        return None
    text = scalar_text(value)
    if text is not None:
        return text
    raise AclConfigError(f"{where}: {key} must be a single value, not {type(value).__name__} {value!r}")


def _flag(where: str, key: str, value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclConfigError(f"{where}: {key} must be true or false, not {value!r}")


def _list(where: str, key: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclConfigError(f"{where}: {key} must be a list")
    return value


def _pattern(where: str, key: str, text: str | None) -> AddressPattern:
    try:
        return parse_address_pattern(text)
    except AddressPatternError as exc:
        raise AclConfigError(f"{where}: {key}: {exc}") from None

"""The ACL check in front of the broker's processors, in Apache 4.9.7's order
(``PlainPermissionManager.validate``):

1. a peer on a global white address passes;
2. the request must name an AccessKey the file defines;
3. a peer on that account's white address passes (no signature, no permission check);
4. the signature must verify (HMAC-SHA1 with the account's secret, compared in constant time);
5. a send to the message trace topic passes;
6. admin-only codes need ``admin: true``; each topic / group the request needs must be allowed,
   by its own entry or by the account's default (an admin account without any entry may reach
   everything).

A refused request is answered as Apache's RPC hook answers a thrown AclException: SYSTEM_ERROR
(1) with the remark ``org.apache.rocketmq.acl.common.AclException: <message>`` and Apache's
message (``Check signature failed for accessKey=...``, ``No default permission for topic:...``,
``Need admin permission for request code=17, but accessKey=... is not``); Apache appends the
first Java stack frame, which we have not. A oneway request is dropped without an answer, as
Apache does. The first refusal on a connection is logged with the peer; later ones on the same
connection at debug level, so a client retrying in a loop does not flood the log.
"""

from __future__ import annotations

import logging

from pyrmq.broker.acl.plain_config import ANY, DENY, PUB, SUB, Account, PlainAclConfig
from pyrmq.broker.acl.resources import ADMIN_CODES, AclDenied, needed_resources
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.codec.system_topics import RETRY_GROUP_TOPIC_PREFIX
from pyrmq.common.acl.address import remote_host
from pyrmq.common.acl.signature import (
    ACCESS_KEY,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    signature_matches,
    signature_of,
)
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.errors import RequestError

log = logging.getLogger(__name__)

__all__ = ["ACL_EXCEPTION", "AclValidator", "check_permission"]

ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
_LOGGED_ATTRIBUTE = "acl_refusal_logged"
_HOST_ATTRIBUTE = "acl_remote_host"


def check_permission(needed: int, owned: int) -> bool:
    """Apache's Permission.checkPermission: DENY wins; ANY wants PUB or SUB; else a common bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


class AclValidator:
    """Holds the current ``PlainAclConfig`` (swapped whole by the file watcher) and checks requests."""

    def __init__(self, config: PlainAclConfig) -> None:
        self.config = config
        self.refused = 0

    def check(self, channel: Channel, request: RemotingCommand) -> None:
        """A ``ProcessorTable`` check: returns to let the request through, raises RequestError."""
        host = channel.attributes.get(_HOST_ATTRIBUTE)
        if host is None:   # parsed once per connection, not per request
            host = channel.attributes[_HOST_ATTRIBUTE] = remote_host(channel.remote_addr)
        try:
            self.validate(request, str(host))
        except AclDenied as exc:
            self.refused += 1
            level = logging.DEBUG if channel.attributes.get(_LOGGED_ATTRIBUTE) else logging.WARNING
            channel.attributes[_LOGGED_ATTRIBUTE] = True
            log.log(level, "ACL refused request code %d from %s: %s", request.code, channel.remote_addr, exc)
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"{ACL_EXCEPTION}: {exc}") from None

    def validate(self, request: RemotingCommand, host: str) -> None:
        """Raises AclDenied with Apache's message when the request may not pass."""
        ext = request.ext_fields
        # Apache reads the resources before it looks at white addresses: a header it cannot
        # decode is refused even from a white address.
        needed = needed_resources(request) if ext is not None else {}
        config = self.config
        if any(pattern.matches(host) for pattern in config.global_white):
            return
        access_key = ext.get(ACCESS_KEY) if ext is not None else None
        if access_key is None:
            raise AclDenied("No accessKey is configured")
        account = config.accounts.get(access_key)
        if account is None:
            raise AclDenied(f"No acl config for {access_key}")
        if account.white_remote_address.matches(host):
            return
        assert ext is not None   # an access key came from it
        if not self._signature_verifies(request, ext, account):
            raise AclDenied(f"Check signature failed for accessKey={access_key}")
        if needed.get(TRACE_TOPIC) == PUB:
            return
        self._check_perms(request.code, needed, account)

    @staticmethod
    def _signature_verifies(request: RemotingCommand, ext: dict[str, str], account: Account) -> bool:
        body = request.body if isinstance(request.body, (bytes, bytearray, memoryview)) else None
        given = ext.get(SIGNATURE)
        expected = signature_of(ext, body, account.secret_key, (SIGNATURE, UNIQUE_KEY_QUERY))
        if signature_matches(expected, given):
            return True
        # The clients sign QUERY_MESSAGE with its _UNIQUE_KEY_QUERY field, which Apache 4.9.7
        # leaves out when it verifies (so it refuses every signed query); we accept that form too.
        if UNIQUE_KEY_QUERY in ext:
            expected = signature_of(ext, body, account.secret_key)
            return signature_matches(expected, given)
        return False

    @staticmethod
    def _check_perms(code: int, needed: dict[str, int], account: Account) -> None:
        if code in ADMIN_CODES and not account.admin:
            raise AclDenied(f"Need admin permission for request code={code}, but accessKey={account.access_key} is not")
        owned = account.resource_perms
        if not needed or (owned is None and account.admin):
            return
        for resource, perm in needed.items():
            is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
            own = owned.get(resource) if owned is not None else None
            if own is None:
                own = account.default_group_perm if is_group else account.default_topic_perm
            if not check_permission(perm, own):
                name = f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX):]}" if is_group else f"topic:{resource}"
                raise AclDenied(f"No default permission for {name}")

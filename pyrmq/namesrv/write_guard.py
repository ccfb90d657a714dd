"""The NameServer's write allow-list (pyrmq's own; Apache 4.9's NameServer has no ACL).

Anyone who can reach an unguarded NameServer can register a broker under an existing name and
take its route, wipe a broker's write permission, or rewrite KV config. With an allow-list
(``pyrmq namesrv --write-allow PATTERN``, patterns in Apache's white address syntax: ``*``,
``10.0.0.*``, ``10.0.0.1-20``, ``10.0.0.{1,2}``, one address), the codes that change the
NameServer's state are served only to peers on it; reads (routes, cluster info, KV reads) stay
open to every client. A refusal is NO_PERMISSION (16) with a remark naming the code and peer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import RemotingCommand
from pyrmq.common.acl.address import AddressPattern, parse_address_pattern, remote_host
from pyrmq.namesrv.runtime_config import UPDATE_NAMESRV_CONFIG
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.errors import RequestError

log = logging.getLogger(__name__)

__all__ = ["WRITE_CODES", "WriteGuard", "parse_allow_list"]


# Every code that changes what the NameServer answers. QUERY_DATA_VERSION is among them: when the
# version is unchanged it renews the broker's lease, so a stranger could keep a dead broker routed.
WRITE_CODES = frozenset({
    RequestCode.PUT_KV_CONFIG,
    RequestCode.DELETE_KV_CONFIG,
    RequestCode.REGISTER_BROKER,
    RequestCode.UNREGISTER_BROKER,
    RequestCode.QUERY_DATA_VERSION,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER,
    RequestCode.ADD_WRITE_PERM_OF_BROKER,
    RequestCode.DELETE_TOPIC_IN_NAMESRV,
    UPDATE_NAMESRV_CONFIG,
})

_LOGGED_ATTRIBUTE = "namesrv_write_refusal_logged"


def parse_allow_list(entries: Iterable[str]) -> list[AddressPattern]:
    """Patterns from option values; ';' also separates patterns within one value (',' belongs to
    the pattern syntax). Raises AddressPatternError for a pattern that does not parse."""
    return [parse_address_pattern(item.strip()) for entry in entries for item in entry.split(";") if item.strip()]


class WriteGuard:
    def __init__(self, patterns: list[AddressPattern]) -> None:
        self.patterns = patterns
        self.refused = 0

    def check(self, channel: Channel, request: RemotingCommand) -> None:
        """A ``ProcessorTable`` check: write codes only from the allow-list."""
        if request.code not in WRITE_CODES:
            return
        host = remote_host(channel.remote_addr)
        if any(pattern.matches(host) for pattern in self.patterns):
            return
        self.refused += 1
        level = logging.DEBUG if channel.attributes.get(_LOGGED_ATTRIBUTE) else logging.WARNING
        channel.attributes[_LOGGED_ATTRIBUTE] = True
        log.log(level, "refused request code %d from %s: not on the write allow-list", request.code,
                channel.remote_addr)
        raise RequestError(ResponseCode.NO_PERMISSION,
                           f"the NameServer accepts request code {request.code} only from the addresses of its "
                           f"write allow-list; {host} is not on it")

"""UPDATE_NAMESRV_CONFIG (318, mqadmin updateNamesrvConfig): the NameServer settings that may change
while it runs.

Apache applies any key of the request except the two paths (``kvConfigPath``, ``configStorePath``:
NO_PERMISSION, "Can not update config path"). pyrmq, as its broker does (broker/runtime_config.py),
accepts only the keys of ``RUNTIME_KEYS``, which its processors read at every use; any other key is
refused with NO_PERMISSION and a remark naming it, before anything changes. A change lasts until the
NameServer stops (the -c file is not rewritten).
"""

from __future__ import annotations

from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.java_properties import parse_properties
from pyrmq.remoting.errors import RequestError

__all__ = ["RUNTIME_KEYS", "UPDATE_NAMESRV_CONFIG", "parse_runtime_changes"]

UPDATE_NAMESRV_CONFIG = 318
RUNTIME_KEYS = frozenset({"orderMessageEnable"})
_PATH_KEYS = ("kvConfigPath", "configStorePath")


def parse_runtime_changes(body: bytes) -> dict[str, bool]:
    """The request body (Java properties text) as typed values; RequestError for a refused key or
    a bad value, with Apache's code and remark where Apache refuses too."""
    try:
        properties = parse_properties(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RequestError(ResponseCode.SYSTEM_ERROR, "string2Properties error") from None
    if any(key in properties for key in _PATH_KEYS):
        raise RequestError(ResponseCode.NO_PERMISSION, "Can not update config path")
    changes: dict[str, bool] = {}
    for key, raw in properties.items():
        if key not in RUNTIME_KEYS:
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"Can not update {key} at runtime: the NameServer changes only "
                               f"{', '.join(sorted(RUNTIME_KEYS))} while it runs; set it in namesrv.conf and restart")
        value = raw.strip().lower()
        if value not in ("true", "false"):
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"{key}={raw.strip()!r}: expected true or false")
        changes[key] = value == "true"
    return changes

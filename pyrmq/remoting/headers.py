"""Typed access to a request's extFields with Java's custom-header rules (spec/remoting.md §7):
a missing ``@CFNotNull`` field is answered with SYSTEM_ERROR "the custom field <name> is null";
an empty or unparsable optional number counts as absent.  Numbers are Java longs in ASCII digits
(text.parse_java_int): no other text reaches ``int()``."""

from __future__ import annotations

from pyrmq.codec.remoting import RemotingCommand
from pyrmq.codec.text import parse_java_int
from pyrmq.remoting.dispatch import SYSTEM_ERROR, RequestError


def _raw(request: RemotingCommand, name: str) -> str | None:
    ext = request.ext_fields
    if ext is None:
        return None
    value = ext.get(name)
    return value if value != "" else None


def required_str(request: RemotingCommand, name: str) -> str:
    value = _raw(request, name)
    if value is None:
        raise RequestError(SYSTEM_ERROR, f"the custom field <{name}> is null")
    return value


def optional_str(request: RemotingCommand, name: str, default: str | None = None) -> str | None:
    value = _raw(request, name)
    return default if value is None else value


def required_int(request: RemotingCommand, name: str) -> int:
    value = required_str(request, name)
    try:
        return parse_java_int(value)
    except ValueError:
        raise RequestError(SYSTEM_ERROR, f"the custom field <{name}> is not a number: {value[:32]!r}") from None


def optional_int(request: RemotingCommand, name: str, default: int | None = None) -> int | None:
    value = _raw(request, name)
    if value is None:
        return default
    try:
        return parse_java_int(value)
    except ValueError:
        return default


def optional_bool(request: RemotingCommand, name: str, default: bool = False) -> bool:
    value = _raw(request, name)
    if value is None:
        return default
    return value.lower() == "true"   # Java Boolean.parseBoolean

"""Reading the data sources' string options."""

from __future__ import annotations

from typing import Mapping


class OptionError(ValueError):
    pass


def flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    low = str(value).strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name}: expected true or false, got {value!r}")


def integer(options: Mapping[str, str], name: str, default: int) -> int:
    value = options.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise OptionError(f"option {name}: expected an integer, got {value!r}") from None


def store_path(options: Mapping[str, str]) -> str:
    path = options.get("path")
    if not path:
        raise OptionError("no path: load(<store dir>) or option('path', ...)")
    return path

"""Java ``.properties`` text, the subset RocketMQ's files use (broker.conf, namesrv.conf,
tls.properties): ``key=value``, ``key:value`` or ``key value`` lines, ``#`` and ``!`` comments.

Pure text in, a dict out: the broker's config loader and the TLS settings (Apache's
``tls.config.file``) read their files with it.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"([^=:\s]+)\s*[=:\s]\s*(.*)$")


def parse_properties(text: str) -> dict[str, str]:
    """Keys to values; a later line wins, a key without a separator has the empty value."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        match = _LINE.match(line)
        if match is None:
            result[line] = ""
            continue
        result[match.group(1)] = match.group(2).strip()
    return result


def update_properties(text: str, changes: dict[str, str]) -> str:
    """``text`` with each key of ``changes`` set: its lines rewritten as ``key=value`` in place
    (comments and every other line kept), keys not present appended at the end."""
    lines = text.splitlines()
    missing = dict(changes)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        match = _LINE.match(stripped)
        key = match.group(1) if match is not None else stripped
        if key in changes:
            lines[i] = f"{key}={changes[key]}"
            missing.pop(key, None)
    lines.extend(f"{key}={value}" for key, value in missing.items())
    return "".join(f"{line}\n" for line in lines)

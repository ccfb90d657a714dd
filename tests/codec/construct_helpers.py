"""Shared construct test helper (the `common(format, data, obj)` idiom)."""

from __future__ import annotations

from construct import Container


def _plain(obj):
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items() if not k.startswith("_")}
    return obj


def common(format, data: bytes, obj: dict, size: int | None = None) -> None:
    """parse == obj, build == data, sizeof (when static), compiled agrees with interpreted."""
    parsed = format.parse(data)
    assert _plain(parsed) == obj
    assert format.build(Container(obj)) == data
    if size is not None:
        assert format.sizeof() == size
    compiled = format.compile()
    assert _plain(compiled.parse(data)) == obj
    assert compiled.build(Container(obj)) == data

"""compile_expression with a bounded LRU cache, as Apache's parser keeps its last 100 results
(failures included, so a bad selector repeated by every heartbeat is not re-parsed)."""

from __future__ import annotations

from functools import lru_cache

from pyrmq.filter.errors import FilterParseError
from pyrmq.filter.expression import Expression
from pyrmq.filter.parser import parse

# Apache 5.x: CacheBuilder.maximumSize(100) in SelectorParser.
COMPILE_CACHE_ENTRIES = 100


@lru_cache(maxsize=COMPILE_CACHE_ENTRIES)
def _compile(text: str) -> Expression | FilterParseError:
    try:
        return Expression(text, parse(text))
    except FilterParseError as exc:
        return exc


def compile_expression(text: str) -> Expression:
    """The compiled expression for ``text``; raises FilterParseError."""
    result = _compile(text)
    if isinstance(result, FilterParseError):
        raise FilterParseError(result.message)
    return result


def compile_cache_info() -> tuple[int, int, int]:
    """(hits, misses, current size) of the compile cache."""
    info = _compile.cache_info()
    return info.hits, info.misses, info.currsize

"""Filters the sources apply themselves: a conjunction of per-column value sets and bounds.

Built from the filters Spark 4.1+ hands to ``DataSourceReader.pushFilters`` (an AND of simple
comparisons) or, on a Spark without filter push-down, from reader options (see
:func:`from_options`). Only filters on columns the scan can test before decoding a record are
taken; everything else is left to Spark. A taken filter is applied exactly, so Spark need not
re-check it.

Timestamps are compared in microseconds since the epoch (Spark's own unit), the stored
milliseconds scaled up, so a bound with a sub-millisecond part is still exact.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

INT_COLUMNS = frozenset({"queue_id", "queue_offset", "phy_offset"})
TIME_COLUMNS = frozenset({"store_timestamp"})
SET_COLUMNS = frozenset({"topic", "queue_id"})
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def to_micros(value: Any) -> int:
    """A Spark timestamp literal (a datetime; naive ones are session-local, as PySpark makes them)
    or an int/str in epoch milliseconds, as microseconds."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            seconds = int(value.replace(microsecond=0).timestamp())  # local time, as PySpark converts
            return seconds * 1_000_000 + value.microsecond
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return int(value) * 1000


@dataclass(frozen=True)
class Predicate:
    """``values[col]``: the allowed values; ``low``/``high``: inclusive integer bounds."""

    values: dict[str, frozenset[Any]] = field(default_factory=dict)
    low: dict[str, int] = field(default_factory=dict)
    high: dict[str, int] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.values or self.low or self.high)

    def with_values(self, col: str, allowed: Iterable[Any]) -> Predicate:
        new = frozenset(allowed)
        if col in self.values:
            new &= self.values[col]
        return replace(self, values={**self.values, col: new})

    def with_low(self, col: str, bound: int) -> Predicate:
        return replace(self, low={**self.low, col: max(bound, self.low.get(col, bound))})

    def with_high(self, col: str, bound: int) -> Predicate:
        return replace(self, high={**self.high, col: min(bound, self.high.get(col, bound))})

    def accepts(self, col: str, value: Any) -> bool:
        """Does a record whose ``col`` is ``value`` (timestamps in ms) pass?"""
        allowed = self.values.get(col)
        if allowed is not None and value not in allowed:
            return False
        if col in TIME_COLUMNS:
            value = value * 1000
        lo = self.low.get(col)
        if lo is not None and value < lo:
            return False
        hi = self.high.get(col)
        return hi is None or value <= hi

    def range_of(self, col: str) -> tuple[int | None, int | None]:
        return self.low.get(col), self.high.get(col)


def _column(f: Any) -> str | None:
    ref = getattr(f, "attribute", ())
    return ref[0] if len(ref) == 1 else None


def _scalar(col: str, value: Any) -> int | None:
    if col in TIME_COLUMNS:
        return to_micros(value) if isinstance(value, (dt.datetime, int)) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def absorb(pred: Predicate, f: Any, columns: frozenset[str]) -> Predicate | None:
    """``pred`` narrowed by the Spark filter ``f``, or None when ``f`` is not one the scan takes."""
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )

    col = _column(f)
    if col is None or col not in columns:
        return None
    if isinstance(f, (EqualTo, In)):
        raw = (f.value,) if isinstance(f, EqualTo) else tuple(f.value)
        if col in SET_COLUMNS:
            if col == "topic" and all(isinstance(v, str) for v in raw):
                return pred.with_values(col, raw)
            if col == "queue_id" and all(_scalar(col, v) is not None for v in raw):
                return pred.with_values(col, raw)
            return None
        if isinstance(f, EqualTo):
            v = _scalar(col, f.value)
            return None if v is None else pred.with_low(col, v).with_high(col, v)
        return None
    bound_filters = {GreaterThan: (1, "low"), GreaterThanOrEqual: (0, "low"),
                     LessThan: (-1, "high"), LessThanOrEqual: (0, "high")}
    for kind, (step, side) in bound_filters.items():
        if isinstance(f, kind):
            v = _scalar(col, f.value)
            if v is None or (col not in INT_COLUMNS and col not in TIME_COLUMNS):
                return None
            return pred.with_low(col, v + step) if side == "low" else pred.with_high(col, v + step)
    return None


def from_options(options: Mapping[str, str]) -> Predicate:
    """The fallback where Spark has no filter push-down (4.0): options ``topic`` (comma list),
    ``queueId`` (comma list), ``startTime``/``endTime`` (epoch ms, end exclusive),
    ``startOffset``/``endOffset`` (commit log offsets, end exclusive)."""
    pred = Predicate()
    if options.get("topic"):
        pred = pred.with_values("topic", [t.strip() for t in options["topic"].split(",") if t.strip()])
    if options.get("queueId"):
        pred = pred.with_values("queue_id", [int(q) for q in options["queueId"].split(",")])
    if options.get("startTime"):
        pred = pred.with_low("store_timestamp", int(options["startTime"]) * 1000)
    if options.get("endTime"):
        pred = pred.with_high("store_timestamp", int(options["endTime"]) * 1000 - 1)
    if options.get("startOffset"):
        pred = pred.with_low("phy_offset", int(options["startOffset"]))
    if options.get("endOffset"):
        pred = pred.with_high("phy_offset", int(options["endOffset"]) - 1)
    return pred

"""SQL92 filter bitmaps computed at dispatch (``enableCalcFilterBitMap``; Apache's
CommitLogDispatcherCalcBitMap, spec/filter.md section 3.5).

For each record of a topic that live SQL92 filters subscribe to, every filter whose expression
is TRUE on the record's properties ORs its bloom positions into an ``m``-bit map; the store keeps
the map in the record's ConsumeQueueExt unit (``enableConsumeQueueExt``).  At pull time a unit
whose map lacks one of the group's bits is skipped without reading the commit log
(:func:`bitmap_says_no`).

Cost: the store calls :meth:`BitMapCalculator.bit_map` only when both settings are on, and a
record of a topic without live filters costs one lookup.  Evaluating the expressions is the same
work the pull would do per group -- once per record here, instead of once per record per pull.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from pyrmq.codec.message import RecordInfo, string_to_properties
from pyrmq.filter.bloom import BloomFilter, BloomFilterData
from pyrmq.store.model import CqExtUnit

log = logging.getLogger(__name__)


class CompiledExpression(Protocol):
    def matches(self, props: Mapping[str, str]) -> bool: ...


class BitMapFilter(Protocol):
    """What the calculator needs of a consumer filter (the broker's ConsumerFilterData)."""

    @property
    def bloom_filter_data(self) -> BloomFilterData | None: ...

    @property
    def compiled_expression(self) -> CompiledExpression | None: ...


class BitMapCalculator:
    """The bitmap source the store calls at dispatch (``DefaultMessageStore.set_bit_map_source``)."""

    def __init__(self, bloom: BloomFilter, live_filters: Callable[[str], Sequence[BitMapFilter]]) -> None:
        self.bloom = bloom
        self.live_filters = live_filters
        self.evaluation_errors = 0   # statistics

    def bit_map(self, request: RecordInfo) -> bytes | None:
        """The record's bitmap; None when no filter watches its topic (no bitmap is stored)."""
        filters = self.live_filters(request.topic)
        if not filters:
            return None
        bloom = self.bloom
        bits = bloom.new_bits()
        props = string_to_properties(request.properties_string)
        for f in filters:
            data = f.bloom_filter_data
            expression = f.compiled_expression
            # data made for other bloom sizes (an old consumerFilter.json) must not touch the map
            if expression is None or not bloom.is_valid(data):
                continue
            assert data is not None
            try:
                matched = expression.matches(props)
            except Exception:   # a filter must never stall the dispatch of a record
                self.evaluation_errors += 1
                log.exception("evaluating a filter for the bitmap of record %d failed", request.commit_log_offset)
                continue
            if matched:
                bloom.hash_to(data, bits)
        return bytes(bits)


def bitmap_says_no(bloom: BloomFilter, data: BloomFilterData | None, born_time: int, ext_unit: CqExtUnit | None) -> bool:
    """True when the ext unit's bitmap proves the filter cannot match the record, so the pull
    skips it without reading the commit log (Apache ExpressionMessageFilter.isMatchedByConsumeQueue):
    only for a record stored after the filter was born (earlier maps do not hold its bits), a
    bitmap of the current size and bloom data valid for it; anything else is left to the record."""
    if ext_unit is None or data is None or ext_unit.msg_store_time <= born_time:
        return False
    bit_map = ext_unit.filter_bit_map
    if bit_map is None or len(bit_map) * 8 != data.bit_num or not bloom.is_valid(data):
        return False
    return not bloom.is_hit(data, bit_map)

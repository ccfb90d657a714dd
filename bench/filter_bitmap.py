"""SQL92 bloom bitmaps in process: what they cost at dispatch and save at pull (issue 10).

    .venv/bin/python bench/filter_bitmap.py [--messages 100000] [--filters 8] [--selectivity 10]

One store per mode, ``--messages`` records of 256 bytes, each with a property ``k`` that matches
the measured group's filter for ``--selectivity`` percent of them; ``--filters`` groups watch the
topic (each matching its own slice).  Prints, per mode, puts/s (append + dispatch) and, for the
measured group, a scan of the whole queue through the store's pull path: scanned units/s,
delivered messages/s and commit-log reads.  Modes: ``plain`` (no ConsumeQueueExt), ``ext``
(enableConsumeQueueExt, no bitmap), ``bitmap`` (ext + enableCalcFilterBitMap; the pull skips by
the bitmap).  The filters are property-equality stand-ins with the SQL92 seams (``compiled_expression``,
``bloom_filter_data``, ``born_time``): the real SQL92 evaluator costs more per record, on both sides.
A benchmark, not a test: tests/broker/test_filter_bitmap.py asserts the behaviour.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass

from pyrmq.broker.filter_bitmap import BitMapCalculator, bitmap_says_no
from pyrmq.codec.message import properties_to_string, record_properties_string, string_to_properties
from pyrmq.filter.bloom import BloomFilter, BloomFilterData
from pyrmq.store.message_store import DefaultMessageStore, GetMessageStatus, MessageExtBrokerInner, MessageStoreConfig

BLOOM = BloomFilter.from_config(20, 32)


@dataclass(frozen=True)
class Equals:
    value: str

    def matches(self, props: dict[str, str]) -> bool:
        return props.get("k") == self.value


@dataclass(frozen=True)
class Filter:
    compiled_expression: Equals
    bloom_filter_data: BloomFilterData
    born_time: int


class PullFilter:
    def __init__(self, f: Filter, use_bitmap: bool) -> None:
        self.f = f
        self.use_bitmap = use_bitmap
        self.reads = 0

    def is_matched_by_consume_queue(self, tags_code: int, ext_unit: object = None) -> bool:
        if not self.use_bitmap:
            return True
        return not bitmap_says_no(BLOOM, self.f.bloom_filter_data, self.f.born_time, ext_unit)  # type: ignore[arg-type]

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        self.reads += 1
        return self.f.compiled_expression.matches(string_to_properties(record_properties_string(record)))


def run(mode: str, messages: int, filters: int, selectivity: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="pyrmq-bitmap-") as root:
        config = MessageStoreConfig(store_path_root_dir=root, enable_consume_queue_ext=mode != "plain",
                                    message_index_enable=False)
        store = DefaultMessageStore(config)
        store.start()
        groups = [Filter(Equals(f"v{g}"), BLOOM.generate(f"G{g}#TopicBench"), 0) for g in range(filters)]
        if mode == "bitmap":
            store.set_bit_map_source(BitMapCalculator(BLOOM, lambda topic: groups).bit_map)
        per_slice = max(1, 100 // selectivity)
        msgs = []
        for i in range(messages):
            slot = i % per_slice
            value = f"v{slot}" if slot < filters else "none"
            msgs.append(MessageExtBrokerInner(
                topic="TopicBench", queue_id=0, flag=0, body=b"x" * 256,
                properties_string=properties_to_string({"k": value, "TAGS": "T"}), sys_flag=0,
                born_timestamp=1, born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 10911)))
        start = time.perf_counter()
        for m in msgs:
            assert store.put_message(m).is_ok()
        put_s = time.perf_counter() - start
        pull = PullFilter(groups[0], use_bitmap=mode == "bitmap")
        offset = delivered = 0
        start = time.perf_counter()
        while True:
            r = store.get_message("G0", "TopicBench", 0, offset, 32, pull)
            delivered += r.message_count
            if r.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE):
                break
            offset = r.next_begin_offset
        scan_s = time.perf_counter() - start
        store.shutdown()
    return {"puts/s": messages / put_s, "scan units/s": messages / scan_s, "delivered/s": delivered / scan_s,
            "delivered": delivered, "commit-log reads": pull.reads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--filters", type=int, default=8)
    parser.add_argument("--selectivity", type=int, default=10, help="percent of records the measured group wants")
    parser.add_argument("--modes", default="plain,ext,bitmap")
    args = parser.parse_args()
    print("| mode | puts/s | scan units/s | delivered/s | delivered | commit-log reads |")
    print("|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        r = run(mode, args.messages, args.filters, args.selectivity)
        print(f"| {mode} | {r['puts/s']:,.0f} | {r['scan units/s']:,.0f} | {r['delivered/s']:,.0f} "
              f"| {r['delivered']:,.0f} | {r['commit-log reads']:,.0f} |")


if __name__ == "__main__":
    main()

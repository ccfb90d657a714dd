"""The timing wheel's cost per message and its start-up, in process (no network): N timer
messages are stored in rmq_sys_wheel_timer as the send path stores them, then taken into the wheel
(enqueue), the store is stopped and started again (load), and every message is delivered to its
real topic (dequeue) with an injected clock.  Figures: docs/MESSAGING.md, "Timer messages".

    .venv/bin/python bench/timer_wheel.py --messages 100000
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyrmq.broker.timer_service import TimerService, transform_timer_message  # noqa: E402
from pyrmq.codec.message import properties_to_string, tags_string_to_tags_code  # noqa: E402
from pyrmq.store.message_store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig  # noqa: E402
from pyrmq.store.timer_store import TIMER_TOPIC  # noqa: E402

T0 = 1_700_000_000_300


class Clock:
    now = T0

    def __call__(self) -> int:
        return self.now


def open_timer(cfg: MessageStoreConfig, clock: Clock) -> tuple[DefaultMessageStore, TimerService, float]:
    """The store and its timer; the seconds the timer's load (recovery) took."""
    store = DefaultMessageStore(cfg)
    store.start()
    timer = TimerService(store, clock=clock)
    started = time.perf_counter()
    timer.load()
    return store, timer, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--spread-s", type=int, default=3600, help="delays spread over this many seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        cfg = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 * 1024 * 1024,
                                 message_index_enable=False)
        clock = Clock()
        store, timer, first_load = open_timer(cfg, clock)
        for i in range(args.messages):
            props = {"UNIQ_KEY": f"{i:032X}", "TAGS": "T", "TIMER_DELAY_MS": str(1000 + i * args.spread_s * 1000 // args.messages)}
            transform_timer_message(props, "TopicBench", i % 4, cfg, clock())
            store.put_message(MessageExtBrokerInner(
                topic=TIMER_TOPIC, queue_id=0, flag=0, body=b"x" * 100, properties_string=properties_to_string(props),
                sys_flag=0, born_timestamp=clock(), born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 10911),
                tags_code=tags_string_to_tags_code("T")))
        started = time.perf_counter()
        while timer.timer_store.enqueue(clock(), 1 << 30):
            pass
        enqueue_s = time.perf_counter() - started
        timer.shutdown()
        store.shutdown()

        store, timer, reload_s = open_timer(cfg, clock)
        clock.now = T0 + (args.spread_s + 2) * 1000
        started = time.perf_counter()
        delivered = 0
        while True:
            done = timer.timer_store.dequeue(clock(), 1 << 30)
            delivered += done
            if not done:
                break
        dequeue_s = time.perf_counter() - started
        timer.shutdown()
        store.shutdown()
    n = args.messages
    print(f"messages {n}, delays spread over {args.spread_s} s, wheel of {timer.timer_store.slots} slots")
    print(f"first load (wheel created): {first_load * 1000:.0f} ms")
    print(f"enqueue: {enqueue_s:.2f} s, {n / enqueue_s:,.0f} msg/s, {enqueue_s / n * 1e6:.1f} us/msg")
    print(f"load with {n} pending: {reload_s * 1000:.1f} ms")
    print(f"dequeue (re-put to the real topic): {dequeue_s:.2f} s, {delivered / dequeue_s:,.0f} msg/s, "
          f"{dequeue_s / delivered * 1e6:.1f} us/msg, {delivered} delivered")
    print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB")


if __name__ == "__main__":
    main()

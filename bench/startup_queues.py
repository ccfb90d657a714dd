"""Start-up time of a store with many consume queues of little data (issue 7: a clean start of
2,000+ queues took 25 s and 8.9 GB of page cache when every queue's last file was read whole).

    .venv/bin/python bench/startup_queues.py --dir /var/tmp/pyrmq-startup --queues 2000 [--drop-caches]

Builds the store the first time (one message per queue, default 6 MB consume queue files), then
opens it as a broker does at start-up (load + recovery + replay) and prints the time, the page
faults and the growth of the page cache.  ``--drop-caches`` (root) starts from a cold page cache,
as after a reboot.  ``--crash`` makes the start an abnormal one (the abort file left behind).
A benchmark, not a test: tests/robustness/test_startup_scale.py asserts the work done instead.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from pyrmq.codec.message import properties_to_string
from pyrmq.store.message_store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig


def config(root: str) -> MessageStoreConfig:
    # default consume queue files; small index files (their default 420 MB is beside the point)
    return MessageStoreConfig(store_path_root_dir=root, max_hash_slot_num=100_000, max_index_num=400_000)


def build(root: str, queues: int) -> None:
    store = DefaultMessageStore(config(root))
    store.start()
    for i in range(queues):
        msg = MessageExtBrokerInner(
            topic=f"TopicStartup{i // 4}", queue_id=i % 4, flag=0, body=b"x" * 100,
            properties_string=properties_to_string({"UNIQ_KEY": f"K{i}"}), sys_flag=0,
            born_timestamp=int(time.time() * 1000), born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 10911))
        assert store.put_message(msg).is_ok()
    store.shutdown()


def cached_kib() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Cached:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--queues", type=int, default=2000)
    parser.add_argument("--drop-caches", action="store_true")
    parser.add_argument("--crash", action="store_true")
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(args.dir, "consumequeue")):
        build(args.dir, args.queues)
    if args.crash:
        open(config(args.dir).abort_path(), "w").close()
    if args.drop_caches:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    cached = cached_kib()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()
    store = DefaultMessageStore(config(args.dir))
    store.start()
    elapsed = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_SELF)
    queues = len(store.consume_queues.queues)
    store.shutdown()
    print(f"{queues} queues: start {elapsed:.2f} s, page faults {after.ru_minflt - usage.ru_minflt} minor "
          f"{after.ru_majflt - usage.ru_majflt} major, page cache +{(cached_kib() - cached) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()

"""The store's own costs of many queues, in process: putting the first record of each new queue
(its consume queue file is created then) and one thorough flush round of all the queues.

    .venv/bin/python bench/flush_round.py                 # 1,000 topics x 8 queues
    .venv/bin/python bench/flush_round.py --topics 100

A measuring aid for the many-topics row of issue 14: the store alone, no broker, no client. The
store directory is a temporary one under --dir (default: the system's), so the figures are those
of that file system.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "store")]

from store_helpers import make_msg, open_store  # noqa: E402

from pyrmq.store.model import MessageStoreConfig  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="put one record per queue, then flush, this often")
    parser.add_argument("--dir", default=None, help="where the temporary store goes")
    args = parser.parse_args()
    queues = args.topics * args.queues
    with tempfile.TemporaryDirectory(prefix="flush-round-", dir=args.dir) as root:
        store = open_store(MessageStoreConfig(store_path_root_dir=root))
        try:
            for r in range(args.rounds):
                t0 = time.perf_counter()
                for t in range(args.topics):
                    for q in range(args.queues):
                        store.put_message(make_msg(topic=f"T_{t}", queue_id=q, body=b"x" * 100))
                put_us = 1e6 * (time.perf_counter() - t0) / queues
                store.flush_commit_log()
                t0 = time.perf_counter()
                store.flush_consume_queues()
                flush_s = time.perf_counter() - t0
                what = "new queues" if r == 0 else "existing queues"
                print(f"round {r}: put {put_us:,.0f} us per record ({queues:,} {what}); "
                      f"thorough flush of {queues:,} queues {flush_s:.2f} s", flush=True)
        finally:
            store.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

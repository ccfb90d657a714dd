"""How long a group commit's fdatasync takes while records keep being appended, by how they are
written: through a shared mapping (as ASYNC_FLUSH writes the commit log), with pwrite (as
SYNC_FLUSH does), or through the mapping but never while a flush runs.

    .venv/bin/python bench/fdatasync_writes.py                  # 8,000 records/s of 1,100 B, 5 s each
    .venv/bin/python bench/fdatasync_writes.py --dir /data --rate 16000

A measuring aid for issue 14's SYNC_FLUSH row: one thread appends records at a fixed rate to a
fallocated file (as the broker's loop does), another runs fdatasync after fdatasync (as the
group commit's worker does). The figures are those of the file system under --dir.
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import os
import sys
import tempfile
import threading
import time

FILE_SIZE = 256 << 20


def run(directory: str, how: str, rate: int, seconds: float, record: int) -> str:
    fd, path = tempfile.mkstemp(prefix="fdatasync-", dir=directory)
    try:
        os.posix_fallocate(fd, 0, FILE_SIZE)
        mm = mmap.mmap(fd, FILE_SIZE)
        data = os.urandom(record)
        lock = threading.Lock()
        done = threading.Event()
        syncs: list[float] = []
        flush_guard = lock if how == "mapping, not during a flush" else contextlib.nullcontext()

        def flusher() -> None:
            while not done.is_set():
                with flush_guard:
                    started = time.perf_counter()
                    os.fdatasync(fd)
                    syncs.append(time.perf_counter() - started)
                time.sleep(0.0005)   # the group commit's bookkeeping between rounds

        thread = threading.Thread(target=flusher)
        thread.start()
        pos = written = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds and pos + record <= FILE_SIZE:
            while time.perf_counter() < t0 + written / rate:
                pass
            if how == "pwrite":
                os.pwrite(fd, data, pos)
            elif how == "mapping":
                mm[pos:pos + record] = data
            else:
                with lock:
                    mm[pos:pos + record] = data
            pos += record
            written += 1
        done.set()
        thread.join()
        mm.close()
    finally:
        os.close(fd)
        os.unlink(path)
    syncs.sort()
    return (f"{how:28s} {written / seconds:8,.0f} records/s  {len(syncs):5d} fdatasyncs  "
            f"median {1e3 * syncs[len(syncs) // 2]:.2f} ms  p90 {1e3 * syncs[int(0.9 * len(syncs))]:.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="directory on the file system to measure (default: the system's temp)")
    parser.add_argument("--rate", type=int, default=8000, help="records appended per second")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--record", type=int, default=1100, help="record bytes (a 1 KiB message's)")
    args = parser.parse_args()
    for how in ("mapping", "pwrite", "mapping, not during a flush"):
        print(run(args.dir or tempfile.gettempdir(), how, args.rate, args.seconds, args.record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Broker CPU time per sent message: a fresh pyrmq standalone, pipelined SEND_MESSAGE_V2 frames
shaped as the Java client 4.9.8 sends them, and the broker process's CPU seconds over the window.

    .venv/bin/python bench/send_cpu.py --seconds 10 --connections 4 --window 64
    .venv/bin/python bench/send_cpu.py --batch 16                  # SEND_BATCH_MESSAGE of 16
    .venv/bin/python bench/send_cpu.py --profile /tmp/send.txt      # + py-spy's hottest frames

A profiling aid for issue 14, not the side-by-side measure: the load generator is a few raw
sockets replaying pre-encoded frames (no client logic), so nearly all of the machine's time goes
to the broker, and CPU per message (utime + stime of the broker process / acknowledged
messages) stays meaningful on a busy machine, where send TPS would not.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]

from rows.harness import BenchPyrmqServer, cpu_seconds, server_pids  # noqa: E402
from rows.send import create_topics  # noqa: E402

from compat_tests.servers import LOOPBACK, ServerConfig, allocate_ports  # noqa: E402
from pyrmq.codec.message_batch import BatchEntry, encode_batch  # noqa: E402
from pyrmq.codec.message_props import properties_to_string  # noqa: E402
from pyrmq.codec.remoting import SerializeType, encode_command, make_request  # noqa: E402

SEND_MESSAGE_V2 = 310
SEND_BATCH_MESSAGE = 320
TOPIC = "SendCpu"
FRAME_LENGTH = struct.Struct(">I")


def topic_names(topics: int) -> list[str]:
    """The topics ``create_topics`` makes: TOPIC alone, or TOPIC_0 .. TOPIC_{n-1}."""
    return [TOPIC] if topics <= 1 else [f"{TOPIC}_{i}" for i in range(topics)]


# Frames replayed in turn, at least: as many distinct keys as a real producer's index entries
# spread over, so that one topic and 1,000 topics differ in their topics, not in their keys.
MIN_FRAMES = 8192


def java_like_frames(topics: list[str], queues: int, size: int, batch: int,
                     serialize_type: SerializeType = SerializeType.ROCKETMQ) -> list[bytes]:
    """Frames queue by queue across the topics (as a producer sending to random topics touches
    them), the topics and queues cycled through up to MIN_FRAMES frames, each with its own KEYS and
    UNIQ_KEY: the header fields and properties the Java client 4.9.8 sends."""
    body = os.urandom(size)
    frames = []
    targets = [(q, t) for q in range(queues) for t in topics]
    for n, (queue_id, topic) in enumerate(itertools.islice(itertools.cycle(targets), max(MIN_FRAMES, len(targets)))):
        props = {"KEYS": f"key-{n}", "UNIQ_KEY": f"7F000001{n:08X}18B4AAC2" + "0" * 12,
                 "WAIT": "true", "TAGS": "TagA"}
        header = {"a": "send_cpu_pg", "b": topic, "c": "TBW102", "d": str(queues), "e": str(queue_id), "f": "0",
                  "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
                  "k": "false", "m": "false"}
        payload = body
        if batch:
            header["m"] = "true"
            header["i"] = ""
            payload = encode_batch([BatchEntry(0, body, properties_to_string(props))] * batch)
        code = SEND_BATCH_MESSAGE if batch else SEND_MESSAGE_V2
        frames.append(encode_command(make_request(code, header, payload, serialize_type=serialize_type)))
    return frames


class Sender(threading.Thread):
    """One connection keeping ``window`` sends in flight until told to stop."""

    def __init__(self, addr: tuple[str, int], frames: list[bytes], window: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(addr)
        self.frames = frames
        self.window = window
        self.acked = 0
        self.failed = 0
        self.stop = threading.Event()

    def _send(self, n: int, start: int) -> None:
        self.sock.sendall(b"".join(self.frames[(start + i) % len(self.frames)] for i in range(n)))

    def run(self) -> None:
        sent = 0
        self._send(self.window, sent)
        sent += self.window
        buf = bytearray()
        while True:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return
            buf += chunk
            done = 0
            pos = 0
            while len(buf) - pos >= 4:
                (length,) = FRAME_LENGTH.unpack_from(buf, pos)
                if len(buf) - pos < 4 + length:
                    break
                # the answer's header is in the request's encoding: ROCKETMQ starts with the
                # code (int16), JSON with its "code" member
                if buf[pos + 4] == SerializeType.ROCKETMQ:
                    ok = buf[pos + 8] == buf[pos + 9] == 0
                else:
                    ok = b'"code":0' in buf[pos + 8: pos + 40]
                if not ok:
                    self.failed += 1
                    if self.failed == 1:
                        print("first failed answer:", bytes(buf[pos + 8: pos + min(4 + length, 400)]), flush=True)
                pos += 4 + length
                done += 1
            del buf[:pos]
            self.acked += done
            if self.stop.is_set():
                if self.acked >= sent:
                    return
                continue
            if done:
                self._send(done, sent)
                sent += done


def user_system_seconds(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def py_spy_top(pid: int, seconds: float, out: Path) -> subprocess.Popen:
    raw = out.with_suffix(".raw")
    return subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid),
                             "--duration", str(int(seconds)), "--rate", "250", "--format", "raw",
                             "--output", str(raw)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def summarize_raw(raw: Path, out: Path, top: int = 45) -> None:
    """py-spy's collapsed stacks -> self and inclusive sample shares per function."""
    self_counts: collections.Counter[str] = collections.Counter()
    self_lines: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        frames = [f.split(" (")[0] + " " + f.rsplit("/", 1)[-1].split(":")[0].rstrip(")")
                  for f in stack.split(";")]
        total += n
        self_counts[frames[-1]] += n
        self_lines[stack.split(";")[-1].rsplit("/", 1)[-1]] += n
        for f in set(frames):
            incl[f] += n
    lines = [f"{total} samples", "", "self %  function"]
    lines += [f"{100 * c / total:5.1f}  {f}" for f, c in self_counts.most_common(top)]
    lines += ["", "inclusive %  function"]
    lines += [f"{100 * c / total:5.1f}  {f}" for f, c in incl.most_common(top)]
    lines += ["", "self %  line"]
    lines += [f"{100 * c / total:5.1f}  {f}" for f, c in self_lines.most_common(2 * top)]
    out.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--window", type=int, default=64, help="sends in flight per connection")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--topics", type=int, default=1, help="topics the sends spread over (the many-topics row: 1000)")
    parser.add_argument("--batch", type=int, default=0, help="messages per SEND_BATCH_MESSAGE (0: single sends)")
    parser.add_argument("--serialize", choices=("rocketmq", "json"), default="rocketmq",
                        help="the request headers' encoding (the side-by-side load generator's: rocketmq)")
    parser.add_argument("--broker-conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--profile", type=Path, help="write py-spy's hottest functions here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="send-cpu-") as tmp:
        config = ServerConfig(Path(tmp), allocate_ports(), flush_disk_type="ASYNC_FLUSH",
                              mapped_file_size_commit_log=256 << 20)
        extra = {"bindAddress": LOOPBACK, **dict(kv.split("=", 1) for kv in args.broker_conf)}
        server = BenchPyrmqServer(config, extra)
        server.start()
        try:
            create_topics(server, TOPIC, args.topics, args.queues)
            frames = java_like_frames(topic_names(args.topics), args.queues, args.size, args.batch,
                                      SerializeType[args.serialize.upper()])
            senders = [Sender((LOOPBACK, config.ports.listen), frames, args.window)
                       for _ in range(args.connections)]
            for s in senders:
                s.start()
            time.sleep(args.warmup)
            pids = server_pids(server)
            spy = py_spy_top(pids[0], args.seconds, args.profile) if args.profile else None
            print(f"broker pid {pids[0]}", flush=True)
            us0 = user_system_seconds(pids[0])
            acked0, cpu0, t0 = sum(s.acked for s in senders), cpu_seconds(pids), time.monotonic()
            time.sleep(args.seconds)
            acked1, cpu1, t1 = sum(s.acked for s in senders), cpu_seconds(pids), time.monotonic()
            us1 = user_system_seconds(pids[0])
            for s in senders:
                s.stop.set()
            for s in senders:
                s.join(timeout=30)
            if spy:
                spy.wait(timeout=60)
                summarize_raw(args.profile.with_suffix(".raw"), args.profile)
        finally:
            server.stop()
    per_frame = max(args.batch, 1)
    messages = (acked1 - acked0) * per_frame
    wall = t1 - t0
    cpu = cpu1 - cpu0
    failed = sum(s.failed for s in senders)
    print(f"{messages / wall:,.0f} msgs/s, broker CPU {100 * cpu / wall:.0f} % of a core, "
          f"{1e6 * cpu / max(messages, 1):.1f} us CPU per message "
          f"({'batches of %d' % args.batch if args.batch else 'single sends'}, {args.connections} x {args.window} "
          f"in flight, {args.size} B, failed {failed}); user {us1[0] - us0[0]:.1f} s, system {us1[1] - us0[1]:.1f} s")
    if args.profile:
        print(f"profile: {args.profile}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

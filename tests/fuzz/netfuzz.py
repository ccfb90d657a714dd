"""Network fuzzer: mutated real frames against a running ``python -m pyrmq standalone``.

    .venv/bin/python -m tests.fuzz.netfuzz [--batches 50] [--frames 300] [--seed 1] [--workdir DIR]

The seeds are the frames the Apache 4.9.8 Java client and broker sent (tests/fixtures/frames),
mutated by tests/fuzz/mutate.py (bit flips, length-word edits, splices, lone surrogates in JSON
strings, numeric fields in non-ASCII digits or 5,000 digits, deep nesting, lying ROCKETMQ
header lengths).  Each batch spreads its frames over a few connections to the broker and the
NameServer, reading and discarding whatever comes back; a connection the server closes is
opened again.  After each batch:

* the process must be alive;
* a canary client (tests/broker/rmq.py over pyrmq.remoting.client, a connection of its own)
  must send a message and pull that same message back;
* the process's RSS must stay under its size after start-up plus ``RSS_HEADROOM``.

The first failure ends the run (exit status 1).  The summary also counts the exceptions the
server contained (a processor that raised was answered SYSTEM_ERROR and logged): not failures of
this property, but bugs to look at.  Frames whose decoded form would legitimately stop the
canary (UPDATE_BROKER_CONFIG, anything naming the canary's topic or group) are not sent.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.errors import ProtocolError
from pyrmq.codec.remoting import FrameDecoder, RemotingCommand
from pyrmq.remoting.client import RemotingClient
from tests.broker.rmq import pull, send
from tests import test_process
from tests.fuzz import mutate, seeds

CANARY_TOPIC = "FuzzCanary"
CANARY_GROUP = "fuzz_canary_cg"
# Codes whose well-formed use may stop the canary without any fault of the broker's.
NOT_SENT_CODES = frozenset({RequestCode.UPDATE_BROKER_CONFIG})
RSS_HEADROOM = 256 * 1024 * 1024
CONNECTIONS_PER_BATCH = 8
ANSWER_WAIT_S = 0.02
CANARY_TIMEOUT_S = 30
# Seeds the NameServer answers; the rest go to the broker (and 10% of all to the other port).
_NAMESRV_SEEDS = ("client_get_route", "broker_register_broker")


class NetFuzzFailure(Exception):
    """The broker process died, the canary failed, or the RSS passed its bound."""


@dataclass
class Summary:
    seed: int
    batches: int = 0
    frames_sent: int = 0
    frames_skipped: int = 0
    answers: int = 0
    connections: int = 0
    closed_by_server: int = 0
    refused_connections: int = 0
    canaries: int = 0
    rss_start: int = 0
    rss_max: int = 0
    seconds: float = 0.0
    contained: dict[str, int] = field(default_factory=dict)
    bad_answers: list[str] = field(default_factory=list)
    failure: str | None = None


class Standalone(test_process.Standalone):
    """The process tests/test_process.py starts, plus what the fuzzer watches: liveness, RSS, log."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, mappedFileSizeCommitLog=4 * 1024 * 1024)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss(self) -> int:
        assert self.proc is not None
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        kib = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        return int(kib.group(1)) * 1024 if kib else 0

    def exit_state(self) -> str:
        """"alive", or how it ended (waiting a moment for a process that is on its way out)."""
        assert self.proc is not None
        try:
            return f"exited with {self.proc.wait(timeout=2)}"
        except subprocess.TimeoutExpired:
            return "alive"

    def stop_now(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.stop()
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def contained_exceptions(self) -> dict[str, int]:
        """The exceptions the server caught and logged ("... failed"), by their last line."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        counts: collections.Counter[str] = collections.Counter()
        for block in re.split(r"\n(?=\S+ \S+ (?:CRITICAL|ERROR|WARNING|INFO|DEBUG) )", text):
            if "Traceback (most recent call last)" in block:
                lines = block.strip().splitlines()
                what = re.sub(r" \(from [^)]*\)", "", lines[0].split(" ", 3)[-1])   # without time and peer
                counts[f"{what[:120]} | {lines[-1][:160]}"] += 1
        return dict(counts)


def _would_stop_the_canary(frame: bytes) -> bool:
    """Decode ``frame`` as the server will; True for what may legitimately break the canary."""
    decoder = FrameDecoder()
    decoder.receive_data(frame)
    try:
        commands = list(decoder.frames())
    except (ProtocolError, RecursionError, ValueError, UnicodeError):   # the server's view: a refusal
        return False
    return any(_dangerous(cmd) for cmd in commands)


def _dangerous(cmd: RemotingCommand) -> bool:
    if cmd.code in NOT_SENT_CODES:
        return True
    values = " ".join((cmd.ext_fields or {}).values())
    return CANARY_TOPIC in values or CANARY_GROUP in values


class FrameSource:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.frames = seeds.request_frames()
        self.datas = [f.data for f in self.frames]

    def next(self) -> tuple[bytes, bool]:
        """A mutated frame, and whether it goes to the NameServer."""
        seed = self.rng.choice(self.frames)
        to_namesrv = seed.name.startswith(_NAMESRV_SEEDS) != (self.rng.random() < 0.1)
        data = seed.data
        for _ in range(self.rng.choice((0, 1, 1, 1, 2))):   # some frames go unmutated: the broker's
            data = mutate.mutate_frame(data, self.rng, self.datas)   # state moves on as a client's would
        return data, to_namesrv


class _Lane:
    """One connection's reader: counts answers and notices the close."""

    def __init__(self, stream: trio.SocketStream, summary: Summary) -> None:
        self.stream = stream
        self.summary = summary
        self.closed = False
        self.progress = trio.Event()   # set on every answer and on the close

    async def drain(self) -> None:
        decoder = FrameDecoder()
        try:
            while data := await self.stream.receive_some(65536):
                decoder.receive_data(data)
                answers = sum(1 for _ in decoder.frames())
                if answers:
                    self.summary.answers += answers
                    self.progress.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except ProtocolError as exc:   # the server wrote a frame its own decoder refuses
            self.summary.bad_answers.append(str(exc))
        self.closed = True
        self.progress.set()

    async def wait_answer(self) -> None:
        """Until the next answer, the close, or ANSWER_WAIT_S (oneway and held requests get none)."""
        with trio.move_on_after(ANSWER_WAIT_S):
            await self.progress.wait()
        self.progress = trio.Event()


async def _connection(addr: tuple[str, int], frames: list[bytes], rng: random.Random, summary: Summary) -> None:
    """Send ``frames`` in order over one connection, each after the previous one's answer; a
    connection the server closed is opened again for the next frame."""
    pending = list(frames)
    while pending:
        try:
            stream = await trio.open_tcp_stream(*addr)
        except OSError:   # the process is gone: the check after the batch says so
            summary.refused_connections += 1
            return
        summary.connections += 1
        lane = _Lane(stream, summary)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lane.drain)
            try:
                while pending and not lane.closed:
                    frame = pending.pop(0)
                    cut = rng.randrange(len(frame) + 1) if rng.random() < 0.2 else len(frame)
                    await stream.send_all(frame[:cut])   # now and then in two writes
                    if cut < len(frame):
                        await trio.sleep(0)
                        await stream.send_all(frame[cut:])
                    summary.frames_sent += 1
                    await lane.wait_answer()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                lane.closed = True
            if lane.closed:
                summary.closed_by_server += 1
            await stream.aclose()
            nursery.cancel_scope.cancel()


async def _batch(server: Standalone, source: FrameSource, frames: int, rng: random.Random, summary: Summary) -> None:
    by_target: dict[bool, list[list[bytes]]] = {False: [[] for _ in range(CONNECTIONS_PER_BATCH)], True: [[]]}
    for _ in range(frames):
        data, to_namesrv = source.next()
        if _would_stop_the_canary(data):
            summary.frames_skipped += 1
            continue
        lanes = by_target[to_namesrv]
        rng.choice(lanes).append(data)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for to_namesrv, lanes in by_target.items():
                port = server.namesrv_port if to_namesrv else server.listen_port
                for lane in lanes:
                    if lane:
                        nursery.start_soon(_connection, ("127.0.0.1", port), lane, rng, summary)


async def _canary(server: Standalone, client: RemotingClient, n: int) -> None:
    body = f"canary-{n}-{time.time_ns()}".encode()
    try:
        with trio.fail_after(CANARY_TIMEOUT_S):
            sent = await send(client, server.broker_addr, CANARY_TOPIC, body)
            if sent.code != 0:
                raise NetFuzzFailure(f"canary send answered {sent.code} {sent.remark!r}")
            offset = int((sent.ext_fields or {})["queueOffset"])
            answer, messages = await pull(client, server.broker_addr, CANARY_TOPIC, 0, offset, group=CANARY_GROUP)
            if body not in [m.body for m in messages]:
                raise NetFuzzFailure(f"canary message not pulled back (code {answer.code} {answer.remark!r})")
    except (trio.TooSlowError, OSError, Exception) as exc:
        if isinstance(exc, NetFuzzFailure):
            raise
        raise NetFuzzFailure(f"canary failed: {type(exc).__name__}: {exc}") from exc


async def _rounds(server: Standalone, client: RemotingClient, source: FrameSource, batches: int, frames: int,
                  rng: random.Random, summary: Summary) -> None:
    try:
        await server.wait_ready(client)
    except (AssertionError, trio.TooSlowError) as exc:
        raise NetFuzzFailure(f"pyrmq did not start: {exc}") from exc
    await _canary(server, client, 0)
    summary.rss_start = summary.rss_max = server.rss()
    for n in range(1, batches + 1):
        await _batch(server, source, frames, rng, summary)
        summary.batches = n
        if not server.alive():
            raise NetFuzzFailure(f"the broker process died (exit {server.proc.returncode if server.proc else '?'})")
        await _canary(server, client, n)
        summary.canaries += 1
        rss = server.rss()
        summary.rss_max = max(summary.rss_max, rss)
        if rss > summary.rss_start + RSS_HEADROOM:
            raise NetFuzzFailure(f"RSS {rss >> 20} MiB > {summary.rss_start >> 20} MiB at start + "
                                 f"{RSS_HEADROOM >> 20} MiB")


async def fuzz(workdir: Path, batches: int, frames: int, seed: int) -> Summary:
    """Run the network fuzzer; the summary's ``failure`` says what broke, if anything did."""
    summary = Summary(seed=seed)
    rng = random.Random(seed)
    source = FrameSource(rng)
    server = Standalone(workdir)
    started = time.monotonic()
    server.start()
    try:
        async with RemotingClient() as client:
            try:   # inside the client's nursery, which would wrap the failure in an ExceptionGroup
                await _rounds(server, client, source, batches, frames, rng, summary)
            except NetFuzzFailure as exc:
                state = server.exit_state()
                summary.failure = (f"batch {summary.batches + 1} (process {state}): {exc}\n"
                                   f"--- server log ---\n{server.log_tail()}")
    finally:
        server.stop_now()
        summary.seconds = round(time.monotonic() - started, 1)
        summary.contained = server.contained_exceptions()
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--frames", type=int, default=300, help="frames per batch")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="store and server log (default: a temp dir, kept on failure)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pyrmq-netfuzz-"))
    workdir.mkdir(parents=True, exist_ok=True)
    summary = trio.run(fuzz, workdir, args.batches, args.frames, args.seed)
    print(json.dumps(summary.__dict__, indent=2))
    if summary.failure is None and args.workdir is None:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"server log and store in {workdir}", file=sys.stderr)
    return 0 if summary.failure is None else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())

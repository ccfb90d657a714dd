"""The broker's send path without sockets: CPU per message of SendMessageProcessor.process and the
answer's encoding, on decoded frames shaped as the Java client 4.9.8 sends them, in this process.

    .venv/bin/python bench/send_inproc.py                        # single sends, 1 KiB
    .venv/bin/python bench/send_inproc.py --batch 16             # SEND_BATCH_MESSAGE of 16
    .venv/bin/python bench/send_inproc.py --without IndexDispatcher --without HAService

A profiling aid for issue 14, next to send_cpu.py: no network, no event loop between messages,
so repeated runs agree within about 1 %, and a step's share is measured by taking it out
(``--without`` drops a store dispatcher by class name; ``--no-store`` answers every send with
the first one's put result, leaving the request's checks, the answer and its encoding). The
broker is a real BrokerController (its services run; the NameServer address is unset) over a
temporary store; the figure is the best of ``--rounds`` rounds of process_time per message.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import trio

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]

from send_cpu import java_like_frames, topic_names  # noqa: E402

from compat_tests.servers import LOOPBACK, allocate_ports  # noqa: E402
from pyrmq.broker.config import build_config  # noqa: E402
from pyrmq.broker.controller import BrokerController  # noqa: E402
from pyrmq.codec.remoting import FrameDecoder, RemotingCommand, encode_command_buffers  # noqa: E402


class _Producer:
    """What the processor reads of the channel a send came on."""

    remote_host_port = (LOOPBACK, 40000)
    closed = False


def decoded_requests(batch: int, topics: int, queues: int) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    for frame in java_like_frames(topic_names(topics), queues, 1024, batch):
        decoder.receive_data(frame)
    return list(decoder.frames())


async def measure(args: argparse.Namespace) -> float:
    ports = allocate_ports()
    with tempfile.TemporaryDirectory(prefix="send-inproc-") as store_dir:
        broker = BrokerController(build_config({
            "storePathRootDir": store_dir, "brokerIP1": LOOPBACK, "listenPort": str(ports.listen),
            "haListenPort": str(ports.ha), "autoCreateTopicEnable": "true",
            "defaultTopicQueueNums": str(args.queues)}))
        broker.load()
        requests = decoded_requests(args.batch, args.topics, args.queues)
        process, producer = broker.send_processor.process, _Producer()
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            for request in requests:   # the topic and each queue's first file, through the broker's gate
                answer = process(producer, request)
                if not isinstance(answer, RemotingCommand):
                    answer = await answer
                assert answer is not None and answer.code == 0, answer
            reput = broker.store.reput
            for dispatcher in list(reput.dispatchers):
                if type(dispatcher).__name__ in args.without:
                    reput.remove_dispatcher(dispatcher)
            if args.no_store:
                store = broker.store
                put = store.put_messages if args.batch else store.put_message
                canned = []

                def put_once(msg, unit_room=False):
                    if not canned:
                        canned.append(put(msg, unit_room))
                    return canned[0]
                store.put_message = store.put_messages = put_once

            def run(count: int) -> None:
                for i in range(count):
                    encode_command_buffers(process(producer, requests[i % len(requests)]))

            run(args.messages // 4)   # warm-up
            best = float("inf")
            for _ in range(args.rounds):
                started = time.process_time()
                run(args.messages)
                best = min(best, time.process_time() - started)
                await trio.sleep(0.2)   # the broker's own tasks between rounds (flush, ticks)
            nursery.cancel_scope.cancel()
        broker.store.shutdown()
    return best / (args.messages * max(1, args.batch)) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=50_000, help="sends per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=0, help="SEND_BATCH_MESSAGE of this many (0: single sends)")
    parser.add_argument("--without", action="append", default=[], metavar="DISPATCHER",
                        help="drop the store dispatcher of this class (repeatable)")
    parser.add_argument("--topics", type=int, default=1, help="send to this many topics, in turn")
    parser.add_argument("--queues", type=int, default=4, help="queues of each (auto-created) topic")
    parser.add_argument("--no-store", action="store_true", help="every send gets the first one's put result")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    per_message = trio.run(measure, args)
    shape = f"batches of {args.batch}" if args.batch else "single sends"
    extra = (f", {args.topics} topics x {args.queues} queues" if args.topics > 1 else "") + "".join(
        f", without {name}" for name in args.without) + (", no store" if args.no_store else "")
    print(f"{per_message:.2f} us CPU per message ({shape}, 1024 B, best of {args.rounds} x {args.messages}{extra})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

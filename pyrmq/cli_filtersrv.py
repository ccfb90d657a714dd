"""``pyrmq filtersrv --broker HOST:PORT --port N ...``: a FilterServer process (pyrmq/filtersrv).

Every setting is a command-line flag read once; a broker with ``filterServerNums`` starts its
FilterServers with a fixed argument list built from its own start-up configuration
(broker/filter_server_manager.py)."""

from __future__ import annotations

import argparse
import signal

import trio

from pyrmq.filtersrv.config import FiltersrvConfig
from pyrmq.filtersrv.controller import FilterServer
from pyrmq.filtersrv.workers import WorkerLimits


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("filtersrv", help="run a FilterServer (class filtering) beside a broker")
    p.add_argument("--broker", required=True, help="the broker's address host:port")
    p.add_argument("--port", type=int, default=0, help="listen port (default: any free port)")
    p.add_argument("--bind", default="0.0.0.0", help="address to listen on (default: all)")
    p.add_argument("--host", default="127.0.0.1", help="the address clients reach this FilterServer at "
                                                        "(registered with the broker; default 127.0.0.1)")
    p.add_argument("--upload-enable", action="store_true", help="accept uploaded filter classes (from "
                                                                "--upload-group groups only)")
    p.add_argument("--upload-group", action="append", default=[], metavar="GROUP",
                   help="a consumer group allowed to upload filter classes; repeatable")
    p.add_argument("--class-dir", default="", help="operator-deployed filter classes (Name.py, "
                                                   "fully.qualified.Name.java), read at start-up")
    p.add_argument("--java-classpath", default="", help="jars Java filter classes compile against "
                                                        "(rocketmq-common), ':'-separated")
    p.add_argument("--match-timeout-ms", type=int, default=1000, help="wall clock for one message (default 1000)")
    p.add_argument("--worker-cpu-seconds", type=int, default=30, help="CPU-time limit of a worker process")
    p.add_argument("--worker-memory-mb", type=int, default=256, help="memory of a worker (Python: address space, "
                                                                     "Java: heap)")
    p.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)


def config_from_args(args: argparse.Namespace) -> FiltersrvConfig:
    limits = WorkerLimits(match_timeout_s=args.match_timeout_ms / 1000, cpu_seconds=args.worker_cpu_seconds,
                          memory_mb=args.worker_memory_mb)
    return FiltersrvConfig(
        broker_addr=args.broker, listen_port=args.port, bind_address=args.bind, host=args.host,
        upload_enable=args.upload_enable,
        upload_groups=frozenset(g.strip() for value in args.upload_group for g in value.split(";") if g.strip()),
        class_dir=args.class_dir, java_classpath=[p for p in args.java_classpath.split(":") if p],
        limits=limits, parent_pid=args.parent_pid)


async def _run(server: FilterServer) -> None:
    async with trio.open_nursery() as nursery:
        async def on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    server.stop()
                    return
        nursery.start_soon(on_signal)
        await server.run()
        nursery.cancel_scope.cancel()


def run(args: argparse.Namespace) -> int:
    trio.run(_run, FilterServer(config_from_args(args)))
    return 0

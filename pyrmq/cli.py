"""Command line: ``pyrmq namesrv``, ``pyrmq broker``, ``pyrmq standalone``, ``pyrmq filtersrv``, and
``pyrmq transactions -b HOST:PORT`` (pending half messages per producer group),
``pyrmq dlq -b HOST:PORT -g GROUP [--resend MSGID ...]`` (a group's dead letters, see cli_dlq) and
``pyrmq health [--broker HOST:PORT] [--namesrv HOST:PORT]`` (the container HEALTHCHECK, cli_health).

The only place that configures logging.  SIGTERM and SIGINT stop gracefully: stop accepting,
finish in-flight work, flush, persist configs, remove the abort file, exit 0.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import signal
import sys
from pathlib import Path

import trio

from pyrmq import cli_dlq, cli_filtersrv, cli_health, cli_transactions
from pyrmq.broker.config import ConfigError, LoadedConfig, load_config_file
from pyrmq.broker.controller import BrokerController
from pyrmq.codec.java_properties import parse_properties
from pyrmq.common.acl.address import AddressPatternError
from pyrmq.namesrv.controller import NamesrvConfig, NamesrvController
from pyrmq.namesrv.write_guard import parse_allow_list
from pyrmq.remoting.channel import ChannelClosedError, RemotingTimeoutError
from pyrmq.remoting.tls_config import TlsConfigError
from pyrmq.store.model import StoreError

log = logging.getLogger("pyrmq")


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# --log-file rotates at this size, keeping this many old files (FILE.1 ... FILE.N), as Apache's logback.
LOG_FILE_BYTES = 128 * 1024 * 1024
LOG_FILE_BACKUPS = 10


def _configure_logging(level: str, log_file: str | None = None) -> None:
    handler: logging.Handler
    if log_file:
        # Opened lazily: the directory may be created by the broker's own start (a home volume).
        handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=LOG_FILE_BYTES,
                                                       backupCount=LOG_FILE_BACKUPS, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler])


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyrmq")
    except PackageNotFoundError:   # run from a checkout that was never installed
        return "unknown (not installed)"


async def _wait_for_signal(on_signal) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("received %s, shutting down", signal.Signals(signum).name)
            on_signal()
            return


def namesrv_config(args) -> NamesrvConfig:
    """namesrv.conf (``-c``) first, then the command line's flags."""
    config = NamesrvConfig()
    if args.config:
        try:
            props = parse_properties(Path(args.config).read_text("utf-8"))
            # Apache's NamesrvStartup: the -c file is where the config is stored
            config = NamesrvConfig.from_properties({**props, "configStorePath": str(Path(args.config).absolute())})
        except OSError as exc:
            raise ConfigError(f"cannot read {args.config}: {exc.strerror}") from None
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if args.port is not None:
        config.listen_port = args.port
    config.bind_address = args.bind
    if args.kv_config_path:
        config.kv_config_path = args.kv_config_path
    # --write-allow replaces namesrv.conf's writeAllowedAddresses; either is checked now.
    config.write_allowed_addresses = _allow_list(args.write_allow or [config.write_allowed_addresses])
    return config


async def _run_namesrv(controller: NamesrvController) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.run)
        await _wait_for_signal(lambda: None)
        nursery.cancel_scope.cancel()


async def _run_broker(broker: BrokerController, namesrv: NamesrvController | None = None) -> None:
    async with trio.open_nursery() as nursery:
        if namesrv is not None:
            await nursery.start(namesrv.run)
        nursery.start_soon(_wait_for_signal, broker.stop)
        await nursery.start(broker.run)
        await broker.wait_stopped()
        nursery.cancel_scope.cancel()


def _broker_overrides(args) -> dict[str, str]:
    """broker.conf keys given on the command line (``-o KEY=VALUE``, then ``-n``): they win over the
    file, and go through the same checks as the file's keys."""
    overrides = {}
    for item in getattr(args, "option", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-o wants KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    if getattr(args, "namesrv_addr", None):
        overrides["namesrvAddr"] = args.namesrv_addr
    return overrides


def embedded_namesrv_config(loaded: LoadedConfig, port: int) -> NamesrvConfig:
    """The standalone NameServer: the broker's bind address and connection deadlines."""
    broker = loaded.broker
    return NamesrvConfig(listen_port=port, bind_address=broker.bind_address,
                         kv_config_path=str(Path(loaded.store.store_path_root_dir) / "namesrv" / "kvConfig.json"),
                         server_channel_max_idle_time_seconds=broker.server_channel_max_idle_time_seconds,
                         partial_frame_timeout_seconds=broker.partial_frame_timeout_seconds,
                         server_channel_write_timeout_seconds=broker.server_channel_write_timeout_seconds,
                         tls=loaded.tls)


def _allow_list(values: list[str] | None) -> str:
    """The --write-allow values as one ';'-separated setting, each pattern checked now."""
    patterns = [item.strip() for value in values or [] for item in value.split(";") if item.strip()]
    try:
        parse_allow_list(patterns)
    except AddressPatternError as exc:
        raise ConfigError(f"write allow-list: {exc}") from None
    return ";".join(patterns)


_OPTION_HELP = ("a broker.conf key, overriding the file (repeatable): -o brokerIP1=10.0.0.5 -o listenPort=10921; "
                "how a container's command line sets what differs per deployment")
_WRITE_ALLOW_HELP = ("only peers matching PATTERN (Apache white address syntax: 10.0.0.*, 10.0.0.1-9, "
                     "10.0.0.{1,2}, one address, *) may register brokers, change write permissions or KV "
                     "config; repeatable; default: anyone")


def _health(args: argparse.Namespace) -> int:
    broker, namesrv = args.broker, args.namesrv
    if not broker and not namesrv:
        broker, namesrv = "127.0.0.1:10911", "127.0.0.1:9876"
    failures = cli_health.run(broker, namesrv, args.timeout)
    for failure in failures:
        print(f"pyrmq health: {failure}", file=sys.stderr)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyrmq", description="RocketMQ-compatible NameServer and Broker")
    parser.add_argument("--version", action="version", version=f"pyrmq {_version()} (RocketMQ remoting protocol, "
                                                                  "store format of Apache RocketMQ 4.9.x)")
    parser.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS,
                        default=os.environ.get("PYRMQ_LOG_LEVEL", "INFO").upper(),
                        help="DEBUG, INFO (default, or $PYRMQ_LOG_LEVEL), WARNING or ERROR")
    parser.add_argument("--log-file", metavar="FILE",
                        help=f"log to FILE instead of stderr, rotated at {LOG_FILE_BYTES >> 20} MiB keeping "
                             f"{LOG_FILE_BACKUPS} old files (FILE.1 ...)")
    sub = parser.add_subparsers(dest="command", required=True)

    p_ns = sub.add_parser("namesrv", help="run a NameServer")
    p_ns.add_argument("-c", "--config", help="namesrv.conf (Apache keys: listenPort, kvConfigPath, tls.* ...)")
    p_ns.add_argument("--port", type=int, default=None, help="listen port (default: listenPort or 9876)")
    p_ns.add_argument("--bind", default="0.0.0.0", help="address to listen on (default: all)")
    p_ns.add_argument("--kv-config-path", help="kvConfig.json location (default ~/namesrv/kvConfig.json)")
    p_ns.add_argument("--write-allow", action="append", metavar="PATTERN", help=_WRITE_ALLOW_HELP)

    p_br = sub.add_parser("broker", help="run a Broker")
    p_br.add_argument("-c", "--config", help="broker.conf (Apache RocketMQ keys)")
    p_br.add_argument("-n", "--namesrv-addr", help="NameServer addresses, host:port;host:port")
    p_br.add_argument("-o", "--option", action="append", metavar="KEY=VALUE", help=_OPTION_HELP)

    p_sa = sub.add_parser("standalone", help="NameServer and Broker in one process")
    p_sa.add_argument("-c", "--config", help="broker.conf (Apache RocketMQ keys)")
    p_sa.add_argument("--namesrv-port", type=int, default=9876)
    p_sa.add_argument("-o", "--option", action="append", metavar="KEY=VALUE", help=_OPTION_HELP)
    p_sa.add_argument("--namesrv-write-allow", action="append", metavar="PATTERN",
                      help=_WRITE_ALLOW_HELP + " (the embedded broker registers from 127.0.0.1)")

    p_tx = sub.add_parser("transactions", help="pending transactional (half) messages of a broker, per producer group")
    p_tx.add_argument("-b", "--broker", required=True, help="broker address host:port")

    p_dlq = sub.add_parser("dlq", help="a consumer group's dead letters (%%DLQ%%GROUP): list them, or re-send some "
                                       "to their original topic")
    p_dlq.add_argument("-b", "--broker", required=True, help="broker address host:port")
    p_dlq.add_argument("-g", "--group", required=True, help="consumer group")
    p_dlq.add_argument("--resend", nargs="+", metavar="MSGID", help="offset msgIds (as listed) to re-send")
    p_dlq.add_argument("--max", type=int, default=1000, help="list at most this many (default 1000)")

    p_health = sub.add_parser("health", help="exit 0 when the broker and/or NameServer answer over the remoting "
                                             "protocol (default: both, on 127.0.0.1:10911 and 127.0.0.1:9876)")
    p_health.add_argument("-b", "--broker", help="broker address host:port")
    p_health.add_argument("-n", "--namesrv", help="NameServer address host:port")
    p_health.add_argument("--timeout", type=float, default=cli_health.DEFAULT_TIMEOUT_S, help="seconds per request")

    cli_filtersrv.add_parser(sub)

    args = parser.parse_args(argv)
    if args.log_level not in LOG_LEVELS:   # a bad $PYRMQ_LOG_LEVEL (argparse checks only the flag)
        parser.error(f"--log-level / PYRMQ_LOG_LEVEL: {args.log_level!r} is not one of {', '.join(LOG_LEVELS)}")
    if args.command == "health":
        return _health(args)
    try:
        _configure_logging(args.log_level, args.log_file)
    except OSError as exc:
        print(f"pyrmq: cannot open the log file {args.log_file}: {exc.strerror}", file=sys.stderr)
        return 2
    if args.command == "filtersrv":
        try:
            return cli_filtersrv.run(args)
        except (OSError, ExceptionGroup) as exc:
            return _os_errors_exit(exc)
        except KeyboardInterrupt:
            return 0
    if args.command in ("transactions", "dlq"):
        try:
            if args.command == "dlq":
                sys.stdout.write(cli_dlq.run(args.broker, args.group, args.resend, args.max))
            else:
                sys.stdout.write(cli_transactions.run(args.broker))
        except (OSError, RuntimeError, ValueError, RemotingTimeoutError, ChannelClosedError) as exc:
            print(f"pyrmq: {exc or type(exc).__name__}", file=sys.stderr)
            return 1
        return 0
    try:
        if args.command == "namesrv":
            trio.run(_run_namesrv, NamesrvController(namesrv_config(args)))
            return 0
        overrides = _broker_overrides(args)
        namesrv = None
        if args.command == "standalone":
            # The embedded NameServer is the broker's; other NameServers may be named in broker.conf.
            loaded = load_config_file(args.config, overrides)
            own = f"127.0.0.1:{args.namesrv_port}"
            addrs = [own] + [a for a in loaded.broker.namesrv_addrs if a != own]
            loaded.broker.namesrv_addr = ";".join(addrs)
            ns_config = embedded_namesrv_config(loaded, args.namesrv_port)
            ns_config.write_allowed_addresses = _allow_list(args.namesrv_write_allow)
            allowed = parse_allow_list([ns_config.write_allowed_addresses])
            if allowed and not any(p.matches("127.0.0.1") for p in allowed):
                log.warning("--namesrv-write-allow does not admit 127.0.0.1: the embedded broker cannot register")
            namesrv = NamesrvController(ns_config)
        else:
            loaded = load_config_file(args.config, overrides)
        broker = BrokerController(loaded)
        trio.run(_run_broker, broker, namesrv)
        return 0
    except (ConfigError, TlsConfigError) as exc:
        for line in str(exc).splitlines():   # every bad value, one line each
            print(f"pyrmq: {line}", file=sys.stderr)
        return 2
    except (OSError, StoreError, ExceptionGroup) as exc:
        return _os_errors_exit(exc)
    except KeyboardInterrupt:
        return 0


def _os_errors_exit(exc: BaseException) -> int:
    """Exit status 1 with a log line each when only OS errors (a port in use ...) or an unusable
    store (locked by another broker ...) stopped the run; anything else is a bug and keeps its
    traceback."""
    errors = _leaf_errors(exc)
    if errors and all(isinstance(e, (OSError, StoreError)) for e in errors):
        for error in errors:
            log.error("cannot run: %s", error)
        return 1
    raise exc


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaf_errors(sub)]
    return [exc]


if __name__ == "__main__":
    sys.exit(main())

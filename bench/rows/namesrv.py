"""The NameServer row of side_by_side.py: a bare NameServer of each kind (no broker), --ns-brokers
brokers registered on it with REGISTER_BROKER, each carrying the same --ns-topics topics (the
body a 4.9.x broker sends: RegisterBrokerBody JSON, topic table and data version, CRC32 in the
header); then --ns-clients processes, one connection each, ask GET_ROUTEINFO_BY_TOPIC for those
topics in turn for --ns-seconds: queries per second and the p50 / p99 of one query; and what one
registration costs (its round trip, on the empty table and on the full one).

The registration connections stay open during the row: a NameServer forgets a broker when the
connection it registered on closes."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import sys
import statistics
import time
import zlib

from compat_tests.servers import (
    GET_ROUTEINFO_BY_TOPIC,
    LOOPBACK,
    ApacheServer,
    ServerConfig,
    allocate_ports,
    spawn_logged,
    wait_listening,
)

from .harness import Env, Measure, RowOutput, cpu_seconds, fmt, kinds_in_order, log_problems, log_sizes, quiet_wait
from .wire import FrameReader, request_frame

REGISTER_BROKER = 103
CLUSTER = "BenchNsCluster"
# Apache's runserver.sh gives the NameServer a 4 GiB heap; 1 GiB holds a million queue entries.
APACHE_NAMESRV_HEAP = ["-Xms1g", "-Xmx1g"]


# brokers registered after the route queries, each on the full table: the registration measure
# is their median (one sample, the last of the first ones, moved by +-30 % from run to run)
FULL_TABLE_REGISTRATIONS = 7


def topic_name(i: int) -> str:
    return f"BenchNs_{i}"


def register_body(topics: int) -> bytes:
    table = {topic_name(i): {"topicName": topic_name(i), "readQueueNums": 8, "writeQueueNums": 8, "perm": 6,
                             "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
             for i in range(topics)}
    return json.dumps({"topicConfigSerializeWrapper": {
        "topicConfigTable": table, "dataVersion": {"timestamp": int(time.time() * 1000), "counter": 1}},
        "filterServerList": []}, separators=(",", ":")).encode()


def register(sock: socket.socket, reader: FrameReader, n: int, body: bytes) -> float:
    """REGISTER_BROKER of broker n; its round trip in seconds."""
    addr = f"127.0.0.{1 + n // 250}:{10911 + n % 250}"
    frame = request_frame(REGISTER_BROKER, {
        "brokerName": f"bench-ns-broker-{n}", "brokerAddr": addr, "clusterName": CLUSTER,
        "haServerAddr": addr, "brokerId": "0", "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, n + 1, body)
    t0 = time.perf_counter()
    sock.sendall(frame)
    header, _ = reader.next_frame()
    elapsed = time.perf_counter() - t0
    if header.get("code") != 0:
        raise RuntimeError(f"REGISTER_BROKER {n}: {header}")
    return elapsed


def query_loop(port: int, topics: int, seconds: float, seed: int) -> tuple[int, list[float], str | None]:
    """One client process: route queries back to back; (queries, latencies in s, an error)."""
    lat: list[float] = []
    try:
        with socket.create_connection((LOOPBACK, port), timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            reader = FrameReader(sock)
            end = time.monotonic() + seconds
            i = seed
            while time.monotonic() < end:
                i = (i + 7919) % topics
                frame = request_frame(GET_ROUTEINFO_BY_TOPIC, {"topic": topic_name(i)}, len(lat) + 1)
                t0 = time.perf_counter()
                sock.sendall(frame)
                header, body = reader.next_frame()
                lat.append(time.perf_counter() - t0)
                if header.get("code") != 0 or not body:
                    return len(lat), lat, f"route of {topic_name(i)}: {header}"
    except OSError as exc:
        return len(lat), lat, repr(exc)
    return len(lat), lat, None


def start_namesrv(env: Env, kind: str, workdir) -> tuple:
    """A bare NameServer of ``kind`` on a free port: (process, port, log path)."""
    ports = allocate_ports()
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "namesrv.out"
    if kind == "pyrmq":
        argv = [sys.executable, "-m", "pyrmq", "namesrv", "--port", str(ports.namesrv), "--bind", LOOPBACK]
        proc_env = dict(os.environ, HOME=str(workdir))
    else:
        apache = ApacheServer(ServerConfig(workdir, ports), env.reference_cp)
        jvm = [a for a in apache._jvm() if not a.startswith(("-Xms", "-Xmx"))]
        argv = [jvm[0], *APACHE_NAMESRV_HEAP, *jvm[1:], "org.apache.rocketmq.namesrv.NamesrvStartup",
                "-c", str(apache.namesrv_conf)]
        proc_env = apache._env()
    proc = spawn_logged(argv, out, cwd=workdir, env=proc_env, banner=" ".join(argv[-3:]))
    wait_listening(LOOPBACK, ports.namesrv, proc)
    if proc.poll() is not None:
        raise RuntimeError(f"{kind} NameServer exited {proc.returncode}; see {out}")
    return proc, ports.namesrv, out


def run(env: Env, kinds: list[str], rep: int) -> RowOutput:
    args = env.args
    out = RowOutput()
    body = register_body(args.ns_topics)
    table = []
    for kind in kinds_in_order(kinds, rep):
        label = f"[{kind:>6}]"
        print(f"== namesrv: {args.ns_brokers} brokers x {args.ns_topics:,} topics, route queries: {kind}", flush=True)
        workdir = env.workdir(f"{kind}-namesrv")
        got: dict[str, float | None] = {}
        proc, socks = None, []
        try:
            quiet_wait(env, label)
            proc, port, log = start_namesrv(env, kind, workdir)
            regs = []
            for n in range(args.ns_brokers):
                sock = socket.create_connection((LOOPBACK, port), timeout=120)
                socks.append(sock)
                regs.append(register(sock, FrameReader(sock), n, body))
            got["reg_first_ms"], got["reg_last_ms"] = 1000 * regs[0], 1000 * regs[-1]
            got["reg_median_ms"] = 1000 * statistics.median(regs)
            c0 = cpu_seconds([proc.pid])
            with multiprocessing.get_context("fork").Pool(args.ns_clients) as pool:
                t0 = time.monotonic()
                results = pool.starmap(query_loop, [(port, args.ns_topics, args.ns_seconds, 1000 * i)
                                                    for i in range(args.ns_clients)])
                wall = time.monotonic() - t0
            got["ns_cpu_pct"] = 100 * (cpu_seconds([proc.pid]) - c0) / wall
            errors = [e for _, _, e in results if e]
            if errors:
                raise RuntimeError(f"route queries: {errors[0]}")
            lat = sorted(x for _, ls, _ in results for x in ls)
            got["qps"] = len(lat) / args.ns_seconds
            got["p50_ms"] = 1000 * lat[len(lat) // 2]
            got["p99_ms"] = 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))]
            # one registration on the full table, measured on more than one sample: new brokers
            # after the route queries (which saw the table as every other row describes it)
            full = []
            for n in range(args.ns_brokers, args.ns_brokers + FULL_TABLE_REGISTRATIONS):
                sock = socket.create_connection((LOOPBACK, port), timeout=120)
                socks.append(sock)
                full.append(register(sock, FrameReader(sock), n, body))
            got["reg_full_ms"] = 1000 * statistics.median(full)
            print(f"   -> {got['qps']:,.0f} routes/s, p50 {got['p50_ms']:.2f} ms, p99 {got['p99_ms']:.2f} ms; "
                  f"registration {got['reg_first_ms']:.0f} ms first, {got['reg_last_ms']:.0f} ms last, "
                  f"{got['reg_full_ms']:.1f} ms on the full table (median of {len(full)})", flush=True)
        except Exception as exc:  # noqa: BLE001 - recorded, the other rows still run
            out.problems.append(f"- namesrv, {kind} (work dir `{workdir}`): {type(exc).__name__}: {exc}")
        finally:
            for sock in socks:
                sock.close()
            if proc is not None:
                sizes = log_sizes([workdir / "namesrv.out", workdir / "logs" / "namesrv.log"])
                proc.terminate()
                try:
                    proc.wait(30)
                except Exception:  # noqa: BLE001 - whatever happened, it must go
                    proc.kill()
                    proc.wait()
                errors, _warnings, lines = log_problems(sizes)
                if errors:
                    out.problems.append(f"- namesrv, {kind}: {errors} error lines in its logs, e.g. "
                                        + "; ".join(f"`{x}`" for x in lines[:3]))
        table.append((kind, got))
        row = f"namesrv: {args.ns_brokers} brokers x {args.ns_topics:,} topics"
        out.measures += [
            Measure(row, "route queries/s (>= 1.5 x)", kind, got.get("qps"), "/s"),
            Measure(row, "route query p99", kind, got.get("p99_ms"), "ms", "lower"),
            Measure(row, "one registration, full table", kind, got.get("reg_full_ms"), "ms", "lower"),
        ]
    out.details = [f"NameServer ({args.ns_brokers} brokers x {args.ns_topics:,} topics registered, body "
                   f"{len(body) / 2**20:.1f} MiB each; {args.ns_clients} client processes querying routes for "
                   f"{args.ns_seconds} s; the clients share the machine with the NameServer):", "",
                   "| server | routes/s | p50 ms | p99 ms | NameServer CPU % | registration ms: first / median / last "
                   f"| registration on the full table, ms (median of {FULL_TABLE_REGISTRATIONS} more brokers) |",
                   "|---|---:|---:|---:|---:|---:|---:|"]
    for kind, got in table:
        out.details.append(f"| {kind} | {fmt(got.get('qps'))} | {fmt(got.get('p50_ms'), '.2f')} | "
                           f"{fmt(got.get('p99_ms'), '.2f')} | {fmt(got.get('ns_cpu_pct'))} | "
                           f"{fmt(got.get('reg_first_ms'), '.0f')} / {fmt(got.get('reg_median_ms'), '.0f')} / "
                           f"{fmt(got.get('reg_last_ms'), '.0f')} | {fmt(got.get('reg_full_ms'), '.1f')} |")
    return out

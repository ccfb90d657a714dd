#!/usr/bin/env python3
"""Capture golden RocketMQ remoting frames from the real Apache RocketMQ 4.9.8 Java stack.

This script re-creates ``tests/fixtures/frames/*.bin`` (+ README.md) and
``tests/fixtures/store/apache-4.9.8-small.tar.gz``.  It is a developer tool, not part of pyrmq and
not run by the test-suite.  Requirements: JDK 17, Maven (Maven Central reachable), tcpdump, root
(or CAP_NET_RAW) to capture on ``lo``.

What it needs
-------------
An Apache RocketMQ 4.9.x installation you already have (its ``lib/`` class path and ``conf/``),
given as two class-path files in the work directory: ``server.cp`` (NameServer + Broker) and
``client.cp`` (the ``rocketmq-example`` main classes on the published ``rocketmq-client`` jar), and
its ``conf/`` directory as ``<work>/rmqhome/conf``.  This tool builds nothing.

Steps (each can be run alone; ``all`` runs them in order)::

    # 1. run namesrv + broker + the example clients under tcpdump, write <work>/capture.pcap
    python tools/capture_frames.py capture --work /tmp/rmqcap
    # 2. split the pcap into frames, pick the fixtures, write tests/fixtures/frames/
    python tools/capture_frames.py extract --work /tmp/rmqcap
    # 3. fresh broker run, quickstart producer + consumer, SIGTERM, tar the store
    python tools/capture_frames.py store --work /tmp/rmqcap

Clients used (all main classes of rocketmq-example 4.9.8, unmodified; NAMESRV_ADDR from env):
quickstart.Producer (1000 x "Hello RocketMQ <i>", topic TopicTest, tag TagA), quickstart.Consumer
(group please_rename_unique_group_name_4, CONSUME_FROM_FIRST_OFFSET), batch.SimpleBatchProducer
(producer.send(List<Message>) of 3 messages to topic BatchTest) and simple.LitePullConsumerAssign
(assign + seek => GET_MIN_OFFSET/GET_MAX_OFFSET).  The ROCKETMQ (binary header) variants are the
same classes started with -Drocketmq.serialize.type=ROCKETMQ.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FRAMES_DIR = REPO / "tests" / "fixtures" / "frames"
STORE_DIR = REPO / "tests" / "fixtures" / "store"
VERSION = "4.9.8"

JVM_OPTS = [
    "-Xms128m", "-Xmx256m", "-XX:MaxDirectMemorySize=256m",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
]

EX = "org.apache.rocketmq.example."


# --------------------------------------------------------------------------------------------
# running the Java processes
# --------------------------------------------------------------------------------------------

def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def pick_ports() -> tuple[int, int]:
    """namesrv port N and broker listenPort B, with B-2 (fast) and B+1 (HA) also free."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
    for cand in range(max(20000, base % 40000 + 20000), 65000, 7):
        ports = [cand, cand + 10, cand + 8, cand + 11]
        if all(_port_free(p) for p in ports):
            return cand, cand + 10
    raise RuntimeError("no free ports")


@dataclass
class Cluster:
    work: Path
    ns_port: int
    broker_port: int
    store_root: Path
    extra_broker_conf: dict = field(default_factory=dict)
    procs: list = field(default_factory=list)
    rmqhome: Path = Path("/nonexistent")

    @property
    def ns_addr(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    def _java(self, cp_file: str, main: str, args: list[str], log: str, props: list[str] = (),
              env: dict | None = None) -> subprocess.Popen:
        home = self.work / "home"
        home.mkdir(parents=True, exist_ok=True)
        cp = (self.work / cp_file).read_text().strip()
        cmd = ["java", f"-Duser.home={home}", *JVM_OPTS, *props, "-cp", cp, main, *args]
        full_env = dict(os.environ)
        full_env.pop("ROCKETMQ_SERIALIZE_TYPE", None)
        full_env["ROCKETMQ_HOME"] = str(self.rmqhome)
        full_env.update(env or {})
        out = open(self.work / log, "wb")
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def start(self) -> None:
        ns_conf = self.work / "namesrv.conf"
        ns_conf.write_text(f"listenPort={self.ns_port}\n")
        self.namesrv = self._java("server.cp", "org.apache.rocketmq.namesrv.NamesrvStartup",
                                  ["-c", str(ns_conf)], "namesrv.log")
        wait_log(self.work / "namesrv.log", "The Name Server boot success", 60)
        conf = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": "0",
            "brokerIP1": "127.0.0.1",
            "listenPort": str(self.broker_port),
            "storePathRootDir": str(self.store_root),
            "storePathCommitLog": str(self.store_root / "commitlog"),
            "mappedFileSizeCommitLog": "67108864",
            "autoCreateTopicEnable": "true",
            "deleteWhen": "04",
            "fileReservedTime": "48",
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
        }
        conf.update(self.extra_broker_conf)
        b_conf = self.work / "broker.conf"
        b_conf.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.broker = self._java("server.cp", "org.apache.rocketmq.broker.BrokerStartup",
                                 ["-c", str(b_conf), "-n", self.ns_addr], "broker.log")
        wait_log(self.work / "broker.log", "boot success", 90)

    def client(self, main: str, log: str, rocketmq: bool = False) -> subprocess.Popen:
        props = ["-Drocketmq.serialize.type=ROCKETMQ"] if rocketmq else []
        return self._java("client.cp", EX + main, [], log, props, {"NAMESRV_ADDR": self.ns_addr})

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            stop(p)


def wait_log(path: Path, needle: str, timeout: float) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if path.exists() and needle in path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise RuntimeError(f"timeout waiting for {needle!r} in {path}")


def stop(p: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    if p.poll() is not None:
        return
    p.send_signal(sig)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


# --------------------------------------------------------------------------------------------
# capture
# --------------------------------------------------------------------------------------------

def capture(work: Path) -> None:
    ns_port, b_port = pick_ports()
    store_root = work / "capture-store"
    shutil.rmtree(store_root, ignore_errors=True)
    pcap = work / "capture.pcap"
    flt = f"tcp port {ns_port} or tcp port {b_port} or tcp port {b_port - 2}"
    tcpdump = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-U", "-w", str(pcap), flt],
                               stdout=subprocess.DEVNULL, stderr=open(work / "tcpdump.log", "wb"))
    time.sleep(1.5)
    phases: list[dict] = []

    def phase(name: str):
        phases.append({"name": name, "start": time.time()})

    cl = Cluster(work, ns_port, b_port, store_root, rmqhome=work / "rmqhome")
    try:
        phase("broker_start")
        cl.start()
        time.sleep(2)

        phase("producer_json")
        p = cl.client("quickstart.Producer", "producer_json.log")
        p.wait(180)

        phase("batch_json")
        p = cl.client("batch.SimpleBatchProducer", "batch_json.log")
        wait_log(work / "batch_json.log", "SendResult", 60)
        time.sleep(1)
        stop(p)

        phase("consumer_json")
        p = cl.client("quickstart.Consumer", "consumer_json.log")
        # long enough for: found pulls, periodic (5 s) oneway offset commits, and a long-poll
        # (15 s suspend) that ends in PULL_NOT_FOUND
        time.sleep(32)
        stop(p)

        phase("litepull_json")
        p = cl.client("simple.LitePullConsumerAssign", "litepull_json.log")
        time.sleep(10)
        stop(p)

        phase("producer_rocketmq")
        p = cl.client("quickstart.Producer", "producer_rocketmq.log", rocketmq=True)
        p.wait(180)

        phase("consumer_rocketmq")
        p = cl.client("quickstart.Consumer", "consumer_rocketmq.log", rocketmq=True)
        time.sleep(32)
        stop(p)

        phase("shutdown")
    finally:
        cl.stop_all()
        time.sleep(1.5)
        tcpdump.send_signal(signal.SIGINT)
        tcpdump.wait(20)
    meta = {"ns_port": ns_port, "broker_port": b_port, "fast_port": b_port - 2, "phases": phases}
    (work / "capture.json").write_text(json.dumps(meta, indent=1))
    print("capture written:", pcap)


# --------------------------------------------------------------------------------------------
# pcap -> TCP streams -> frames
# --------------------------------------------------------------------------------------------

def read_pcap(path: Path):
    data = path.read_bytes()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        raise ValueError("not a pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(e + "I", data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(e + "IIII", data[off:off + 16])
        off += 16
        pkt = data[off:off + incl]
        off += incl
        ts = sec + frac / (1e9 if nano else 1e6)
        if linktype == 1:  # Ethernet
            ethertype = struct.unpack(">H", pkt[12:14])[0]
            ip = pkt[14:]
        elif linktype == 113:  # Linux cooked
            ethertype = struct.unpack(">H", pkt[14:16])[0]
            ip = pkt[16:]
        elif linktype == 276:  # Linux cooked v2
            ethertype = struct.unpack(">H", pkt[0:2])[0]
            ip = pkt[20:]
        else:
            raise ValueError(f"unsupported link type {linktype}")
        if ethertype != 0x0800 or ip[9] != 6:
            continue
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        doff = (tcp[12] >> 4) * 4
        flags = tcp[13]
        yield ts, (src, sport), (dst, dport), seq, flags, bytes(tcp[doff:])


@dataclass
class Stream:
    key: tuple  # (client_port, server_port)
    syn_ts: float
    isn: dict = field(default_factory=dict)       # direction -> ISN
    segs: dict = field(default_factory=lambda: collections.defaultdict(list))


def tcp_streams(pcap: Path, server_ports: set[int]) -> list[Stream]:
    streams: dict[tuple, Stream] = {}
    for ts, (_src, sport), (_dst, dport), seq, flags, payload in read_pcap(pcap):
        if dport in server_ports:
            key, direction = (sport, dport), "c2s"
        elif sport in server_ports:
            key, direction = (dport, sport), "s2c"
        else:
            continue
        if flags & 0x02 and not flags & 0x10:  # SYN: new connection (port reuse => replace)
            if key in streams:
                streams[(key, streams[key].syn_ts)] = streams.pop(key)
            streams[key] = Stream(key, ts)
        st = streams.get(key)
        if st is None:
            continue
        if flags & 0x02:
            st.isn[direction] = seq
        if payload:
            st.segs[direction].append((seq, ts, payload))
    return sorted(streams.values(), key=lambda s: s.syn_ts)


def reassemble(st: Stream, direction: str) -> tuple[bytes, list[tuple[int, float]]]:
    isn = st.isn.get(direction)
    segs = st.segs.get(direction, [])
    if isn is None:
        if not segs:
            return b"", []
        raise ValueError(f"stream {st.key} {direction}: no SYN captured")
    buf = bytearray()
    marks: list[tuple[int, float]] = []  # (byte offset, ts) of each segment start
    for seq, ts, payload in sorted(segs, key=lambda s: ((s[0] - isn - 1) & 0xFFFFFFFF, s[1])):
        rel = (seq - isn - 1) & 0xFFFFFFFF
        if rel + len(payload) <= len(buf):
            continue  # retransmission
        if rel > len(buf):
            raise ValueError(f"stream {st.key} {direction}: gap at {len(buf)}")
        marks.append((len(buf), ts))
        buf += payload[len(buf) - rel:]
    return bytes(buf), marks


LANG = {0: "JAVA", 1: "CPP", 2: "DOTNET", 3: "PYTHON", 4: "DELPHI", 5: "ERLANG", 6: "RUBY",
        7: "OTHER", 8: "HTTP", 9: "GO", 10: "PHP", 11: "OMS"}


def decode_rocketmq_header(h: bytes) -> dict:
    code, lang, version, opaque, flag, rlen = struct.unpack(">hBhiii", h[:17])
    pos = 17
    out = {"code": code, "language": LANG.get(lang, lang), "version": version, "opaque": opaque,
           "flag": flag}
    if rlen:
        out["remark"] = h[pos:pos + rlen].decode()
        pos += rlen
    (elen,) = struct.unpack(">i", h[pos:pos + 4])
    pos += 4
    end = pos + elen
    ext = {}
    while pos < end:
        (kl,) = struct.unpack(">h", h[pos:pos + 2])
        k = h[pos + 2:pos + 2 + kl].decode()
        pos += 2 + kl
        (vl,) = struct.unpack(">i", h[pos:pos + 4])
        ext[k] = h[pos + 4:pos + 4 + vl].decode()
        pos += 4 + vl
    if elen:
        out["extFields"] = ext
    return out


@dataclass
class Frame:
    raw: bytes
    ts: float
    stream: Stream
    direction: str
    server: str        # namesrv | broker | broker_fast
    phase: str
    stype: int
    header: dict
    body: bytes

    @property
    def code(self) -> int:
        return self.header["code"]

    @property
    def flag(self) -> int:
        return self.header["flag"]

    @property
    def is_response(self) -> bool:
        return bool(self.flag & 1)

    @property
    def ext(self) -> dict:
        return self.header.get("extFields") or {}

    @property
    def stype_name(self) -> str:
        return {0: "json", 1: "rocketmq"}[self.stype]


def split_frames(work: Path) -> list[Frame]:
    meta = json.loads((work / "capture.json").read_text())
    servers = {meta["ns_port"]: "namesrv", meta["broker_port"]: "broker",
               meta["fast_port"]: "broker_fast"}
    phases = meta["phases"]

    def phase_of(ts: float) -> str:
        name = phases[0]["name"]
        for ph in phases:
            if ts >= ph["start"]:
                name = ph["name"]
        return name

    frames: list[Frame] = []
    for st in tcp_streams(work / "capture.pcap", set(servers)):
        for direction in ("c2s", "s2c"):
            buf, marks = reassemble(st, direction)
            pos, mi = 0, 0
            while pos + 4 <= len(buf):
                (length,) = struct.unpack(">i", buf[pos:pos + 4])
                if pos + 4 + length > len(buf):
                    print(f"warning: truncated frame at end of {st.key} {direction}",
                          file=sys.stderr)
                    break
                raw = buf[pos:pos + 4 + length]
                while mi + 1 < len(marks) and marks[mi + 1][0] <= pos:
                    mi += 1
                (word,) = struct.unpack(">I", raw[4:8])
                stype, hlen = word >> 24, word & 0xFFFFFF
                hbytes = raw[8:8 + hlen]
                header = json.loads(hbytes) if stype == 0 else decode_rocketmq_header(hbytes)
                frames.append(Frame(raw, marks[mi][1], st, direction, servers[st.key[1]],
                                    phase_of(st.syn_ts), stype, header, raw[8 + hlen:]))
                pos += 4 + length
            if pos != len(buf):
                print(f"warning: {len(buf) - pos} trailing bytes in {st.key} {direction}",
                      file=sys.stderr)
    frames.sort(key=lambda f: f.ts)
    return frames


def response_to(frames: list[Frame], req: Frame) -> Frame | None:
    for f in frames:
        if (f.stream is req.stream and f.direction != req.direction and f.is_response
                and f.header["opaque"] == req.header["opaque"]):
            return f
    return None


# --------------------------------------------------------------------------------------------
# fixture selection
# --------------------------------------------------------------------------------------------

@dataclass
class Pick:
    name: str           # file name without .bin
    frame: Frame
    notes: str


def select(frames: list[Frame]) -> list[Pick]:
    picks: list[Pick] = []
    reqs = [f for f in frames if not f.is_response]

    def first(pred, what):
        for f in reqs:
            if pred(f):
                return f
        raise LookupError(f"no frame for {what}")

    def first_with_response(pred, rpred, what):
        for f in reqs:
            if pred(f):
                r = response_to(frames, f)
                if r is not None and rpred(r):
                    return f, r
        raise LookupError(f"no frame for {what}")

    def add(name, f, notes):
        picks.append(Pick(name, f, notes))

    def ok(r):
        return r.code == 0

    # ---- broker -> namesrv
    f, r = first_with_response(lambda f: f.code == 103 and f.phase == "broker_start", ok,
                               "register broker")
    add("broker_register_broker_json", f,
        "REGISTER_BROKER sent by the broker at start-up (request to the NameServer); body is "
        "RegisterBrokerBody JSON (topicConfigSerializeWrapper with the system topics, "
        "filterServerList); compressed=false")
    add("namesrv_register_broker_response_json", r, "NameServer's answer to REGISTER_BROKER "
        "(RegisterBrokerResponseHeader fields in extFields; no body)")
    try:
        f = first(lambda f: f.code == 103 and "TopicTest" in f.body.decode("utf-8", "replace"),
                  "register with TopicTest")
        add("broker_register_broker_topictest_json" if f.flag == 0 else
            "broker_register_broker_oneway_json", f,
            "REGISTER_BROKER re-sent right after TopicTest was auto-created by the first send "
            f"(flag {f.flag}: the auto-create path registers oneway); body contains TopicTest's "
            "TopicConfig")
    except LookupError as e:
        print("note:", e)

    for st, sfx, ph_p, ph_c in (("json", "json", "producer_json", "consumer_json"),
                                ("rocketmq", "rocketmq", "producer_rocketmq", "consumer_rocketmq")):
        stype = 0 if st == "json" else 1
        # ---- routes
        f, r = first_with_response(
            lambda f: f.code == 105 and f.stype == stype and f.ext.get("topic") == "TopicTest"
            and f.server == "namesrv", ok, f"route {st}")
        add(f"client_get_route_{sfx}", f,
            f"GET_ROUTEINFO_BY_TOPIC(TopicTest) from a quickstart client ({f.phase})")
        add(f"namesrv_route_response_{sfx}", r,
            "its response: TopicRouteData body for TopicTest (broker-a, 4 queues)")
        try:
            f, r = first_with_response(
                lambda f: f.code == 105 and f.stype == stype and f.server == "namesrv",
                lambda r: r.code == 17, f"route not exist {st}")
            add(f"namesrv_route_not_exist_{sfx}", r,
                f"TOPIC_NOT_EXIST (17) answer to GET_ROUTEINFO_BY_TOPIC({f.ext.get('topic')}) "
                f"before the topic was auto-created ({f.phase}); remark set, no body")
        except LookupError as e:
            print("note:", e)

        # ---- send
        f, r = first_with_response(lambda f: f.code == 310 and f.stype == stype
                                   and f.phase == ph_p, ok, f"send {st}")
        add(f"client_send_v2_{sfx}", f,
            f"SEND_MESSAGE_V2 from quickstart.Producer: topic TopicTest, tag TagA, body "
            f"{f.body.decode(errors='replace')!r}, producer group please_rename_unique_group_name")
        add(f"broker_send_response_{sfx}", r, "SEND_OK response (msgId, queueId, queueOffset...)")

        # ---- heartbeats
        try:  # the producer's first heartbeat runs 1 s after start: a fast run may finish first
            f, r = first_with_response(lambda f: f.code == 34 and f.stype == stype
                                       and f.phase == ph_p, ok, f"producer heartbeat {st}")
            add(f"client_heartbeat_producer_{sfx}", f,
                "HEART_BEAT from quickstart.Producer: body HeartbeatData with producerDataSet "
                "(group please_rename_unique_group_name + CLIENT_INNER_PRODUCER), empty "
                "consumerDataSet")
        except LookupError as e:
            print("note:", e)
        f, r = first_with_response(
            lambda f: f.code == 34 and f.stype == stype and f.phase == ph_c
            and b'"consumerDataSet":[{' in f.body, ok, f"consumer heartbeat {st}")
        add(f"client_heartbeat_{sfx}", f,
            "HEART_BEAT from quickstart.Consumer: body HeartbeatData with consumerDataSet (group "
            "please_rename_unique_group_name_4, CLUSTERING, CONSUME_FROM_FIRST_OFFSET, "
            "subscriptions TopicTest '*' and %RETRY%please_rename_unique_group_name_4)")
        add(f"broker_heartbeat_response_{sfx}", r, "its response (code 0, no body)")

        # ---- pull
        f, r = first_with_response(
            lambda f: f.code == 11 and f.stype == stype and f.phase == ph_c
            and f.ext.get("topic") == "TopicTest", ok, f"pull found {st}")
        add(f"client_pull_{sfx}", f, "PULL_MESSAGE from quickstart.Consumer (topic TopicTest, "
            f"queueId {f.ext.get('queueId')}, queueOffset {f.ext.get('queueOffset')}, "
            f"maxMsgNums {f.ext.get('maxMsgNums')}, sysFlag {f.ext.get('sysFlag')})")
        n = count_msgs(r.body)
        add(f"broker_pull_found_{sfx}", r,
            f"FOUND (code 0): body = {n} concatenated message records (commitlog format) of "
            "TopicTest; nextBeginOffset/minOffset/maxOffset/suggestWhichBrokerId in extFields")
        f, r = first_with_response(lambda f: f.code == 11 and f.stype == stype and
                                   f.phase == ph_c, lambda r: r.code == 19, f"pull nf {st}")
        add(f"client_pull_long_poll_{sfx}", f,
            f"PULL_MESSAGE that the broker suspended (long polling) and then answered with "
            f"PULL_NOT_FOUND (topic {f.ext.get('topic')}, queueId {f.ext.get('queueId')}, "
            f"queueOffset {f.ext.get('queueOffset')})")
        nf_name = f"broker_pull_not_found_{sfx}" if r.stype == stype else \
            f"broker_pull_not_found_to_{sfx}_request_{r.stype_name}"
        add(nf_name, r, "PULL_NOT_FOUND (19) after the ~15 s long-poll suspend expired; no body"
            + ("" if r.stype == stype else
               f". NOTE: serialize type {r.stype_name.upper()} although the request was "
               f"{st.upper()}: the woken-up pull is answered with a freshly created response in "
               "the broker's own configured type"))
        try:
            f, r = first_with_response(lambda f: f.code == 11 and f.stype == stype and
                                       f.phase == ph_c, lambda r: r.code == 25, f"pull 25 {st}")
            add(f"broker_pull_subscription_not_latest_{r.stype_name}", r,
                f"SUBSCRIPTION_NOT_LATEST (25) answer to an early PULL_MESSAGE (topic "
                f"{f.ext.get('topic')}, subVersion {f.ext.get('subVersion')}) that raced the "
                f"consumer's first heartbeat ({f.phase}); remark set")
        except LookupError as e:
            print("note:", e)

        # ---- consumer offset & group management
        f, r = first_with_response(lambda f: f.code == 14 and f.stype == stype
                                   and f.phase == ph_c, lambda r: True, f"query offset {st}")
        add(f"client_query_consumer_offset_{sfx}", f,
            f"QUERY_CONSUMER_OFFSET (group please_rename_unique_group_name_4, topic "
            f"{f.ext.get('topic')}, queueId {f.ext.get('queueId')})")
        add(f"broker_query_consumer_offset_response_{sfx}", r,
            f"its response (code {r.code}, offset {r.ext.get('offset')})")
        f = first(lambda f: f.code == 15 and f.stype == stype and f.phase == ph_c
                  and f.flag == 2, f"oneway offset update {st}")
        add(f"client_update_consumer_offset_oneway_{sfx}", f,
            "UPDATE_CONSUMER_OFFSET oneway (flag 2), periodic offset persist of quickstart.Consumer; "
            "no response exists")
        f, r = first_with_response(lambda f: f.code == 38 and f.stype == stype
                                   and f.phase == ph_c, ok, f"consumer list {st}")
        add(f"client_get_consumer_list_{sfx}", f,
            "GET_CONSUMER_LIST_BY_GROUP (group please_rename_unique_group_name_4), sent on rebalance")
        add(f"broker_get_consumer_list_response_{sfx}", r,
            "its response: body GetConsumerListByGroupResponseBody {\"consumerIdList\":[...]}")
        try:
            f = first(lambda f: f.code == 40 and f.stype == stype and f.direction == "s2c",
                      f"notify ids changed {st}")
            add(f"broker_notify_consumer_ids_changed_{sfx}" if f.stype == stype else
                f"broker_notify_consumer_ids_changed_to_{sfx}_client_{f.stype_name}", f,
                "NOTIFY_CONSUMER_IDS_CHANGED: broker->client oneway request (flag 2) on the client's "
                "connection; opaque from the broker's own counter"
                + ("" if f.stype == stype else
                   f". NOTE: {f.stype_name.upper()} although the client talks {st.upper()}: "
                   "server-initiated requests use the broker's configured type"))
        except LookupError as e:
            print("note:", e)
        try:
            f, r = first_with_response(lambda f: f.code == 35 and f.stype == stype
                                       and f.server == "broker", ok, f"unregister {st}")
            add(f"client_unregister_client_{sfx}", f,
                f"UNREGISTER_CLIENT at client shutdown ({f.phase})")
            add(f"broker_unregister_client_response_{sfx}", r, "its response")
        except LookupError as e:
            print("note:", e)

    # ---- batch
    f, r = first_with_response(lambda f: f.code == 320 and f.phase == "batch_json", ok, "batch")
    add("client_send_batch_json", f,
        "SEND_BATCH_MESSAGE from batch.SimpleBatchProducer: producer.send(List<Message>) of 3 "
        "messages (topic BatchTest, tag Tag, keys OrderID001..3, bodies 'Hello world 0..2') "
        "encoded with MessageDecoder.encodeMessages; producer group BatchProducerGroupName")
    add("broker_send_batch_response_json", r,
        "its response (msgId is a comma-separated list of 3 offset msgIds)")

    # ---- lite pull: min/max offset
    for code, nm in ((30, "max"), (31, "min")):
        f, r = first_with_response(lambda f: f.code == code and f.phase == "litepull_json", ok,
                                   f"get {nm} offset")
        add(f"client_get_{nm}_offset_json", f,
            f"GET_{nm.upper()}_OFFSET (topic {f.ext.get('topic')}, queueId {f.ext.get('queueId')}) "
            "from simple.LitePullConsumerAssign (seek() checks the range)")
        add(f"broker_get_{nm}_offset_response_json", r,
            f"its response (offset {r.ext.get('offset')})")
    return picks


def count_msgs(body: bytes) -> int:
    n, pos = 0, 0
    while pos + 4 <= len(body):
        (size,) = struct.unpack(">i", body[pos:pos + 4])
        if size <= 0:
            break
        pos += size
        n += 1
    return n


def summarize_header(f: Frame) -> str:
    h = f.header
    s = f"code={h['code']} flag={h['flag']} opaque={h['opaque']} version={h['version']}"
    if "remark" in h:
        s += f" remark={h['remark']!r}"
    return s


def extract(work: Path) -> None:
    frames = split_frames(work)
    counts = collections.Counter((f.phase, f.server, f.direction, f.code, f.flag, f.stype)
                                 for f in frames)
    (work / "frames_summary.txt").write_text(
        "\n".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=str)))
    picks = select(frames)
    FRAMES_DIR.mkdir(parents=True, exist_ok=True)
    for old in FRAMES_DIR.glob("*.bin"):
        old.unlink()
    rows = []
    for p in picks:
        (FRAMES_DIR / f"{p.name}.bin").write_bytes(p.frame.raw)
        f = p.frame
        if f.direction == "c2s":
            who = "broker -> namesrv" if f.phase == "broker_start" or f.code == 103 else \
                f"client -> {f.server}"
            ver = "broker 4.9.8" if who.startswith("broker") else "Java client 4.9.8"
        else:
            who = f"{f.server} -> " + ("broker" if f.code == 103 or
                                         (f.server == "namesrv" and p.name.startswith(
                                             "namesrv_register")) else "client")
            ver = ("NameServer 4.9.8" if f.server == "namesrv" else "Broker 4.9.8")
        kind = "response" if f.is_response else ("oneway request" if f.flag & 2 else "request")
        rows.append((p.name + ".bin", len(f.raw), who, kind, f.code, f.stype_name.upper(), ver,
                     summarize_header(f), len(f.body), p.notes))
    write_readme(rows, json.loads((work / "capture.json").read_text()))
    print(f"{len(picks)} fixtures written to {FRAMES_DIR}")


WIRE_NOTES = [
    "## Things seen on the wire (4.9.8) worth knowing",
    "",
    "* JSON header: top-level keys are alphabetical and include `\"serializeTypeCurrentRPC\":\"JSON\"`",
    "  in every frame (requests and responses, client and servers), but **`extFields` keys are NOT",
    "  sorted**: they come out in Java `HashMap` iteration order (e.g. send response",
    "  `{\"queueId\",\"TRACE_ON\",\"MSG_REGION\",\"msgId\",\"queueOffset\"}`). Compare as maps, not as text.",
    "* An empty `extFields` is written as `{}` when a (empty/all-null) custom header object was",
    "  used (REGISTER_BROKER response, GET_CONSUMER_LIST response, SUBSCRIPTION_NOT_LATEST) and",
    "  is omitted entirely when there was none (route, heartbeat responses).",
    "* ROCKETMQ binary header matches the 21-byte fixed layout of spec section 6. Headers with a",
    "  fast encoder (SEND_MESSAGE_V2, its response, PULL_MESSAGE and its response) write their",
    "  fields in **declaration order** already in 4.9.8 (not only 5.x); other headers follow",
    "  HashMap order. An empty map is `extLen=0`.",
    "* The 4.9.8 servers answer in the request's serialize type **except**: a PULL_MESSAGE that",
    "  was suspended by long polling and then answered (PULL_NOT_FOUND after ~15 s) comes back as",
    "  **JSON** even though the request was ROCKETMQ (`broker_pull_not_found_to_rocketmq_request_json.bin`),",
    "  and broker-initiated requests (NOTIFY_CONSUMER_IDS_CHANGED, code 40, flag 2) are JSON on a",
    "  ROCKETMQ client's connection too. A ROCKETMQ-type client must therefore accept JSON frames.",
    "* REGISTER_BROKER is sent both as a normal request (start-up, periodic 30 s) and as a",
    "  **oneway** request (flag 2) right after a topic is auto-created by a send.",
    "* Opaques start at 0 per process (first request of the broker / of a client has opaque 0);",
    "  the broker's own requests to clients use its own counter (e.g. opaque 2017).",
    "* TOPIC_NOT_EXIST remark is",
    "  `No topic route info in name server for the topic: <t>\\nSee http://rocketmq.apache.org/docs/faq/ for further details.`",
    "  (a real newline, JSON-escaped as `\\n`).",
    "* Route body for a 4.9.8 client (version 409 >= 401) uses quoted brokerAddrs keys (`\"0\"`).",
    "* SEND_MESSAGE_V2 (`a`..`n` keys, `n` = bname) body is the raw message body; the",
    "  SEND_MESSAGE response carries extra `TRACE_ON` and `MSG_REGION` ext fields.",
    "  SEND_BATCH_MESSAGE body = MessageDecoder.encodeMessages (per message: totalSize, magic 0,",
    "  bodyCRC 0, flag, int32 body length + body, int16 properties length + properties), header `m=true`.",
    "* PULL_MESSAGE FOUND responses carry `remark` `\"FOUND\"` (also in the ROCKETMQ header, so",
    "  `broker_pull_found_rocketmq.bin` exercises a non-empty binary remark); the body is",
    "  the concatenated stored message records.",
    "* PULL_NOT_FOUND remarks seen: `OFFSET_OVERFLOW_ONE` (pulled at maxOffset) and",
    "  `NO_MESSAGE_IN_QUEUE` (empty %RETRY% queue).",
    "* SUBSCRIPTION_NOT_LATEST (25) is answered to the consumer's first pulls if they overtake its",
    "  first heartbeat; the client simply retries.",
    "* Addresses that depend on the capture machine appear in bodies/headers: `haServerAddr`",
    "  (brokerIP2 defaults to the host's NIC address, here 192.0.2.2), clientID",
    "  `192.0.2.2@<pid>#<nanotime>`, and the msgId in UNIQ_KEY (client IP fd00::2 here).",
    "* Timing-dependent frames (SUBSCRIPTION_NOT_LATEST, the producer's first heartbeat,",
    "  NOTIFY_CONSUMER_IDS_CHANGED) are kept only when the run produced them, so a re-capture",
    "  may yield a slightly different file set.",
    "* No traffic went to the broker's fast port (listenPort-2): `vipChannelEnabled` is false",
    "  by default in the 4.9.8 client.",
]


def write_readme(rows, meta) -> None:
    lines = [
        "# Golden remoting frames (Apache RocketMQ 4.9.8)",
        "",
        "Each `*.bin` file is exactly one whole remoting frame as it appeared on the wire: the",
        "4-byte big-endian length prefix (= number of bytes that follow), the header-length word",
        "(serialize type in the high byte), the header (JSON or ROCKETMQ binary) and the body.",
        "",
        "Captured with `tools/capture_frames.py` (tcpdump on `lo`, TCP reassembly, split on the",
        "length prefix) from:",
        "",
        "* NameServer + Broker: Apache RocketMQ 4.9.8 (release tag rocketmq-all-4.9.8); the client",
        "  side jars (client, common, remoting, store, srvutil, acl, logging, tools) are the",
        "  published 4.9.8 jars from Maven Central. Java: OpenJDK 17.",
        "* Clients: unmodified `rocketmq-example` 4.9.8 main classes on the published",
        "  `rocketmq-client` 4.9.8 jar (quickstart.Producer, quickstart.Consumer,",
        "  batch.SimpleBatchProducer, simple.LitePullConsumerAssign), `NAMESRV_ADDR` from the",
        "  environment. `*_rocketmq.bin` frames come from the same classes started with",
        "  `-Drocketmq.serialize.type=ROCKETMQ` (the 4.9.8 servers answer in the request's type).",
        "* Broker config: cluster `DefaultCluster`, `brokerName=broker-a`, `brokerId=0`,",
        "  `brokerIP1=127.0.0.1`, `autoCreateTopicEnable=true` (default 4 read/write queues);",
        f"  ports of the capture run: NameServer {meta['ns_port']}, broker {meta['broker_port']}",
        f"  (fast port {meta['fast_port']}); these numbers appear inside some headers/bodies",
        "  (brokerAddr, storeHost, bornHost, clientId...).",
        "",
        "Names: `<sender>_<what>_<serialize type>.bin`; `client_*` = sent by the Java client,",
        "`broker_*` / `namesrv_*` = sent by that server (responses unless stated otherwise;",
        "`broker_register_broker_*` is the broker's request to the NameServer). A response file",
        "listed directly after a request file is the answer to exactly that request (same opaque,",
        "same connection).",
        "",
        "| file | bytes | direction | kind | code | serialize | sender version | header | body bytes | notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [f"`{r[0]}`", str(r[1]), r[2], r[3], str(r[4]), r[5], r[6],
                 f"`{r[7]}`", str(r[8]), r[9]]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", *WIRE_NOTES, "", "Re-capture: see the module docstring of `tools/capture_frames.py`.", ""]
    (FRAMES_DIR / "README.md").write_text("\n".join(lines))


# --------------------------------------------------------------------------------------------
# small store
# --------------------------------------------------------------------------------------------

STORE_CONF = {
    "mappedFileSizeCommitLog": "131072",
    "mappedFileSizeConsumeQueue": "2000",
    "maxHashSlotNum": "64",
    "maxIndexNum": "2048",
}


def store(work: Path) -> None:
    ns_port, b_port = pick_ports()
    root = work / "store-run"
    shutil.rmtree(root, ignore_errors=True)
    store_root = root / "store"
    cl = Cluster(root, ns_port, b_port, store_root, STORE_CONF, rmqhome=work / "rmqhome")
    root.mkdir(parents=True)
    for f in ("server.cp", "client.cp"):
        shutil.copy(work / f, root / f)
    try:
        cl.start()
        p = cl.client("quickstart.Producer", "producer.log")
        p.wait(180)
        c = cl.client("quickstart.Consumer", "consumer.log")
        time.sleep(15)  # consume everything; the client commits offsets every 5 s
        stop(c)
        time.sleep(6)   # broker flushes consumerOffset.json every 5 s (and again at shutdown)
        stop(cl.broker, timeout=60)
        if cl.broker.returncode is None:
            raise RuntimeError("broker did not stop")
    finally:
        cl.stop_all()
    STORE_DIR.mkdir(parents=True, exist_ok=True)
    out = STORE_DIR / "apache-4.9.8-small.tar.gz"
    with tarfile.open(out, "w:gz", compresslevel=9) as tar:
        for p in sorted(store_root.rglob("*")):
            if p.is_file() and p.name != "lock":
                ti = tar.gettarinfo(str(p), "store/" + str(p.relative_to(store_root)))
                ti.uid = ti.gid = 0
                ti.uname = ti.gname = ""
                with open(p, "rb") as fh:
                    tar.addfile(ti, fh)
    print("store archive:", out, out.stat().st_size, "bytes")
    write_store_readme(store_root, out)


def write_store_readme(store_root: Path, archive: Path) -> None:
    files = [p for p in sorted(store_root.rglob("*")) if p.is_file() and p.name != "lock"]
    cl_notes = []
    total = 0
    for p in sorted((store_root / "commitlog").iterdir()):
        d = p.read_bytes()
        pos = n = 0
        blank = ""
        while pos + 8 <= len(d):
            size, magic = struct.unpack(">iI", d[pos:pos + 8])
            if size == 0:
                break
            if magic == 0xCBD43194:
                blank = f", then a BLANK_MAGIC_CODE end-of-file record of {size} bytes at {pos}"
                break
            n += 1
            pos += size
        total += n
        cl_notes.append(f"`commitlog/{p.name}`: {n} messages in bytes 0..{pos}{blank}")
    offsets = (store_root / "config" / "consumerOffset.json").read_text()
    lines = [
        "# Apache RocketMQ 4.9.8 store fixture",
        "",
        f"`{archive.name}` ({archive.stat().st_size} bytes): the whole `storePathRootDir` of an",
        "Apache RocketMQ 4.9.8 broker (the same servers as `../frames/README.md`) after a",
        "clean shutdown (SIGTERM; no `abort` file, `lock` file left out). Paths inside start with",
        "`store/`. Made by `python tools/capture_frames.py store`.",
        "",
        f"* Messages: {total} sent by the unmodified `rocketmq-example` 4.9.8 `quickstart.Producer`",
        "  (it always sends 1000: topic `TopicTest`, tag `TagA`, bodies `Hello RocketMQ 0` ..",
        "  `Hello RocketMQ 999`, producer group `please_rename_unique_group_name`, sync sends,",
        "  round-robin over the 4 auto-created queues). TopicTest was auto-created",
        "  (`autoCreateTopicEnable=true`, 4 read/write queues, perm 6).",
        "* Then `quickstart.Consumer` (group `please_rename_unique_group_name_4`, CLUSTERING,",
        "  CONSUME_FROM_FIRST_OFFSET) consumed everything, so `config/consumerOffset.json` holds",
        "  committed offsets (fastjson pretty format with unquoted integer keys),",
        "  `config/subscriptionGroup.json` contains the auto-created group and `config/topics.json`",
        "  its `%RETRY%please_rename_unique_group_name_4` topic (no message was retried, so there",
        "  is no consumequeue for it). The `.bak` files are the previous versions Apache keeps.",
        "* Broker config: `brokerName=broker-a`, `brokerId=0`, `brokerClusterName=DefaultCluster`,",
        "  `brokerIP1=127.0.0.1`, ASYNC_MASTER, ASYNC_FLUSH, and the small sizes: "
        + ", ".join(f"`{k}={v}`" for k, v in STORE_CONF.items()) + ".",
        "  (`mappedFileSizeConsumeQueue` must be a multiple of 20: 2000 = 100 entries per file;",
        "  index file = 40-byte header + 64*4 slots + 2048*20 entries = 41256 bytes.)",
        "* " + "; ".join(cl_notes) + ".",
        "* Host addresses recorded inside messages: storeHost `127.0.0.1:<broker port>`,",
        "  bornHost = the client's address; the msgId `UNIQ_KEY` property embeds the client IP.",
        "",
        "`config/consumerOffset.json`:",
        "",
        "```",
        offsets.rstrip("\n"),
        "```",
        "",
        "| file | bytes |",
        "|---|---|",
    ]
    lines += [f"| `{p.relative_to(store_root)}` | {p.stat().st_size} |" for p in files]
    (STORE_DIR / "README.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["capture", "extract", "store", "all"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/rmqcap"),
                    help="holds server.cp, client.cp and rmqhome/conf of your Apache RocketMQ installation")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    if a.step in ("capture", "all"):
        capture(a.work)
    if a.step in ("extract", "all"):
        extract(a.work)
    if a.step in ("store", "all"):
        store(a.work)


if __name__ == "__main__":
    main()

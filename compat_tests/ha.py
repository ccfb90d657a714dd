"""Master and slave of one brokerName, of either kind, for the HA (replication) scenarios.

Built on :mod:`compat_tests.cluster`: one NameServer, a master (``brokerRole`` ASYNC_MASTER or
SYNC_MASTER, brokerId 0) and a slave (``brokerRole=SLAVE``, brokerId 1) with the same brokerName,
each a pyrmq or an Apache RocketMQ 4.9.7 node on its own store. The slave learns the master's
HA address from its NameServer registration (spec/ha.md §2), as in a real deployment.

What the scenarios read of them, from outside, as an operator would:

- the commit log max offset of each broker (GET_BROKER_RUNTIME_INFO ``commitLogMaxOffset``);
- the commit log files themselves, compared byte for byte: the slave's files equal the master's
  from the slave's start position (the beginning of the master's last file when the slave came
  up empty, spec/ha.md §5) up to the slave's max offset;
- topic configs and consumer offsets on the slave (GET_ALL_TOPIC_CONFIG, QUERY_CONSUMER_OFFSET),
  which the slave copies from the master every 10 s.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from compat_tests.cluster import Broker, BrokerSpec, Cluster, NameServer, lenient_json
from compat_tests.servers import LOOPBACK, ProbeError, remoting_call

# Request codes (spec/codes.md).
UPDATE_AND_CREATE_TOPIC = 17
GET_ALL_TOPIC_CONFIG = 21
GET_BROKER_RUNTIME_INFO = 28

BROKER_NAME = "broker-ha"
# Small commit log files: a few hundred 1 KiB messages fill one, so the "new slave starts at the
# master's last file" rule is exercised in seconds. Both kinds get the same size (Apache refuses
# files of another length).
HA_COMMIT_LOG_FILE_SIZE = 256 * 1024
# The slave reports its offset every haSendHeartbeatInterval until it has data to append (5 s by
# default); 1 s on both kinds keeps the start of replication short.
HA_HEARTBEAT_MS = 1000

MASTER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")


def ha_keys(role: str, broker_id: int) -> dict[str, str]:
    """broker.conf keys (Apache's names) that make a broker a master or a slave of BROKER_NAME."""
    return {
        "brokerRole": role,
        "brokerId": str(broker_id),
        # Registered as the HA address (brokerIP2:haListenPort); Apache's default is the host's
        # first non-loopback address.
        "brokerIP2": LOOPBACK,
        "haSendHeartbeatInterval": str(HA_HEARTBEAT_MS),
    }


@dataclass
class HaPair:
    """A NameServer with a master and (once started) a slave of one brokerName."""

    cluster: Cluster
    namesrv: NameServer
    master: Broker
    slave: Broker
    role: str

    @property
    def label(self) -> str:
        return f"{self.master.kind}->{self.slave.kind} {self.role}"


def start_pair(cluster: Cluster, master_kind: str, slave_kind: str, role: str, *,
               namesrv_kind: str | None = None, start_slave: bool = True,
               flush_disk_type: str = "ASYNC_FLUSH", more: dict[str, str] | None = None,
               file_size: int = HA_COMMIT_LOG_FILE_SIZE) -> HaPair:
    """A NameServer (of the master's kind unless told), the master started, the slave started
    too unless ``start_slave`` is false (then ``pair.slave.start()`` later). ``more``: further
    broker.conf keys of both brokers."""
    assert role in MASTER_ROLES, role
    namesrv = cluster.namesrv(namesrv_kind or master_kind)

    def spec(label: str, keys: dict[str, str]) -> BrokerSpec:
        return BrokerSpec(name=BROKER_NAME, store_dir=cluster.root / f"store-{label}", namesrv_addr=namesrv.addr,
                          flush_disk_type=flush_disk_type, commit_log_file_size=file_size,
                          extra={**keys, **(more or {})})

    master = cluster.broker(master_kind, spec("master", ha_keys(role, 0)))
    slave = cluster.broker(slave_kind, spec("slave", ha_keys("SLAVE", 1)), start=start_slave)
    return HaPair(cluster, namesrv, master, slave, role)


# --------------------------------------------------------------------------------------- probes

STATS_SAMPLE_WAIT_S = 15.0

def broker_call(broker: Broker, code: int, fields: dict[str, str] | None = None,
                timeout: float = 5.0) -> tuple[dict, bytes]:
    return remoting_call(broker.spec.endpoint, code, fields, timeout=timeout)


def runtime_info(broker: Broker) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO: the broker's string table (both kinds: {"table": {...}})."""
    deadline = time.monotonic() + STATS_SAMPLE_WAIT_S
    while True:
        header, body = broker_call(broker, GET_BROKER_RUNTIME_INFO)
        if header.get("code") == 0:
            return lenient_json(body)["table"]
        # Apache answers SYSTEM_ERROR (NoSuchElementException from its StoreStatsService) until
        # that service took its first one-second sample, which a loaded machine can delay by seconds.
        if "NoSuchElementException" not in str(header.get("remark")) or time.monotonic() > deadline:
            raise ProbeError(f"{broker}: runtime info {header}")
        time.sleep(0.2)


def max_offset(broker: Broker) -> int:
    """The broker's commit log max offset (end of its last written byte)."""
    return int(runtime_info(broker)["commitLogMaxOffset"])


def wait_caught_up(pair: HaPair, timeout: float = 30.0, target: int | None = None) -> float:
    """Until the slave's max offset equals the master's (or ``target``); the seconds it took."""
    start = time.monotonic()
    deadline = start + timeout
    last = "not probed"
    while time.monotonic() < deadline:
        pair.master.check_alive()
        pair.slave.check_alive()
        try:
            want = max_offset(pair.master) if target is None else target
            have = max_offset(pair.slave)
            if have == want and want > 0:
                return time.monotonic() - start
            last = f"master {want}, slave {have}"
        except (OSError, ProbeError, KeyError, ValueError) as exc:
            last = repr(exc)
        time.sleep(0.05)
    raise AssertionError(f"{pair.label}: slave never caught up in {timeout}s: {last}\n{pair.cluster.logs()}")


def create_topic(broker: Broker, topic: str, queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC on one broker (the master: the slave copies it from there)."""
    header, _ = broker_call(broker, UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false"}, timeout=10)
    assert header.get("code") == 0, f"{broker}: UPDATE_AND_CREATE_TOPIC {topic}: {header}"


def wait_topic_on(broker: Broker, topic: str, timeout: float = 25.0) -> float:
    """Until GET_ALL_TOPIC_CONFIG of the broker names ``topic`` (a slave: copied from its master
    within ~10 s); the seconds it took."""
    start = time.monotonic()
    while time.monotonic() < start + timeout:
        broker.check_alive()
        header, body = broker_call(broker, GET_ALL_TOPIC_CONFIG)
        if header.get("code") == 0 and f'"{topic}"' in body.decode("utf-8", "replace"):
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"{broker} never had topic {topic} in {timeout}s\n{broker.log_tail()}")


# --------------------------------------------------------------------------------------- processes

def freeze(broker: Broker) -> None:
    """SIGSTOP: the process holds its sockets open but answers nothing (a hung slave)."""
    assert broker.proc is not None and broker.running
    os.kill(broker.proc.pid, signal.SIGSTOP)


def thaw(broker: Broker) -> None:
    assert broker.proc is not None
    os.kill(broker.proc.pid, signal.SIGCONT)


# --------------------------------------------------------------------------------------- commit logs

def commit_log_files(store_dir: Path) -> dict[int, Path]:
    """Commit log files by start offset (their names are the 20-digit start offsets)."""
    return {int(p.name): p for p in (store_dir / "commitlog").iterdir() if p.name.isdigit()}


@dataclass
class LogComparison:
    slave_start: int      # start offset of the slave's first file
    compared_bytes: int   # bytes compared (slave_start .. slave max offset)
    files: int            # slave files compared


def compare_commit_logs(pair: HaPair) -> LogComparison:
    """The slave's commit log equals the master's byte for byte, from the start of the slave's
    first file up to the slave's max offset (what both have written). Both brokers must be
    running and caught up (or the master stopped after the slave caught up)."""
    file_size = pair.master.spec.commit_log_file_size
    slave_max = max_offset(pair.slave)
    master_files = commit_log_files(pair.master.spec.store_dir)
    slave_files = commit_log_files(pair.slave.spec.store_dir)
    assert slave_files, f"{pair.slave} has no commit log file"
    slave_start = min(slave_files)
    compared = files = 0
    for start in sorted(s for s in slave_files if s < slave_max):
        assert start % file_size == 0, f"slave file {start} is not at a file boundary"
        assert start in master_files, f"slave file {start:020d} has no master counterpart: {sorted(master_files)}"
        length = min(file_size, slave_max - start)
        with open(slave_files[start], "rb") as s, open(master_files[start], "rb") as m:
            theirs, ours = m.read(length), s.read(length)
        assert len(ours) == length, f"slave file {start:020d} is shorter than {length}"
        if ours != theirs:
            at = next(i for i in range(length) if ours[i:i + 1] != theirs[i:i + 1])
            raise AssertionError(f"{pair.label}: commit logs differ at offset {start + at} (file {start:020d} "
                                 f"+{at}): master {theirs[at:at + 32].hex()} slave {ours[at:at + 32].hex()}")
        compared += length
        files += 1
    return LogComparison(slave_start, compared, files)


def last_file_start(offset: int, file_size: int = HA_COMMIT_LOG_FILE_SIZE) -> int:
    """Where a new slave starts replicating when the master's max offset is ``offset``."""
    return offset - offset % file_size

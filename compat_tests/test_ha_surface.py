"""Master and slave, the broker surface around replication (issue 8), with real processes and the
official Java client 4.9.8:

- the master's config tables for slaves (GET_ALL_TOPIC_CONFIG 21, GET_ALL_CONSUMER_OFFSET 43,
  GET_ALL_DELAY_OFFSET 45, GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201) have the same fastjson shape on
  an Apache and a pyrmq master;
- a pyrmq SLAVE copies them (topics, groups, the offsets a Java consumer committed, the delay
  offsets of delivered delayed messages) from an Apache master and from a pyrmq master over
  remoting -- config sync needs no commit log replication;
- beside an Apache slave of the same master, the pyrmq slave refuses topic/group writes and
  sends with the same code and remark, answers a pull whose offset moved the same way, and
  holds the same copied tables; the NameServer lists the master and both slaves by id;
- reads from slaves: with ``slaveReadEnable`` and every message "in disk"
  (``accessMessageInMemoryMaxRatio=0``) the Java consumer is sent to the slave (id 1) and reads there.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest

from compat_tests.cluster import (  # noqa: F401  (fixtures)
    CLUSTER_NAME,
    BrokerSpec,
    client4_fixture,
    cluster_fixture,
    lenient_json,
)
from compat_tests.servers import remoting_call

pytestmark = [pytest.mark.compat, pytest.mark.slow]

SEND_MESSAGE_V2 = 310
PULL_MESSAGE = 11
UPDATE_AND_CREATE_TOPIC = 17
GET_ALL_TOPIC_CONFIG = 21
GET_BROKER_RUNTIME_INFO = 28
GET_ALL_CONSUMER_OFFSET = 43
GET_ALL_DELAY_OFFSET = 45
GET_BROKER_CLUSTER_INFO = 106
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
DELETE_SUBSCRIPTIONGROUP = 207
DELETE_TOPIC_IN_BROKER = 215
SYSTEM_ERROR, SERVICE_NOT_AVAILABLE, PULL_RETRY_IMMEDIATELY = 1, 14, 20
SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."
GROUP_MEMBERS = {"groupName", "consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable", "retryQueueNums",
                 "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable"}
# A slave copies every 10 s after 3 s; the Java consumer commits every 5 s and at shutdown.
SYNC_WAIT_S = 40.0
MASTER_READS = {"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": "0"}


def call(addr: str, code: int, fields: dict[str, str] | None = None, body: bytes = b"") -> tuple[dict, bytes]:
    host, port = addr.rsplit(":", 1)
    return remoting_call((host, int(port)), code, fields, body=body)


def table(addr: str, code: int) -> dict:
    header, body = call(addr, code)
    # Apache 4.9.7 answers GET_ALL_DELAY_OFFSET with the table but code 1 (4.9.8 fixed it)
    assert header["code"] == 0 or (code == GET_ALL_DELAY_OFFSET and "remark" not in header), header
    return lenient_json(body)


def runtime_info(addr: str) -> dict[str, str]:
    header, body = call(addr, GET_BROKER_RUNTIME_INFO)
    assert header["code"] == 0, header
    return lenient_json(body)["table"]


def wait_for(what: str, check, timeout: float = SYNC_WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
            last = result
        except (AssertionError, OSError, KeyError, ValueError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s: {last!r}")
        time.sleep(0.5)


def check_master_tables(addr: str, topic: str, group: str) -> dict[str, dict]:
    """The four bodies of a master, in the form fastjson writes them; returns them parsed."""
    _, raw_offsets = call(addr, GET_ALL_CONSUMER_OFFSET)
    # Map<Integer, Long>: integer keys written unquoted
    assert re.search(rf'"{re.escape(topic)}@{re.escape(group)}":\{{\d+:\d+(,\d+:\d+)*\}}', raw_offsets.decode()), raw_offsets
    _, raw_delay = call(addr, GET_ALL_DELAY_OFFSET)
    assert re.fullmatch(rb'\{"offsetTable":\{(\d+:\d+(,\d+:\d+)*)?\}\}', raw_delay), raw_delay
    tables = {"topics": table(addr, GET_ALL_TOPIC_CONFIG), "groups": table(addr, GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
              "offsets": lenient_json(raw_offsets), "delay": lenient_json(raw_delay)}
    assert set(tables["topics"]) == {"dataVersion", "topicConfigTable"}
    assert set(tables["groups"]) == {"dataVersion", "subscriptionGroupTable"}
    assert set(tables["topics"]["dataVersion"]) >= {"counter", "timestamp"}
    assert set(tables["groups"]["subscriptionGroupTable"][group]) == GROUP_MEMBERS
    assert tables["delay"]["offsetTable"].get("1") == 3      # three delayed messages of level 1 delivered
    return tables


def assert_copied(slave: str, master: str, topic: str, group: str) -> dict:
    """The slave holds the master's topics and groups (same dataVersion) and the group's offsets."""
    def same() -> dict | None:
        mine = {"topics": table(slave, GET_ALL_TOPIC_CONFIG), "groups": table(slave, GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
                "offsets": table(slave, GET_ALL_CONSUMER_OFFSET), "delay": table(slave, GET_ALL_DELAY_OFFSET)}
        theirs = {"topics": table(master, GET_ALL_TOPIC_CONFIG),
                  "groups": table(master, GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
                  "offsets": table(master, GET_ALL_CONSUMER_OFFSET), "delay": table(master, GET_ALL_DELAY_OFFSET)}
        key = f"{topic}@{group}"
        ok = (mine["topics"] == theirs["topics"] and mine["groups"] == theirs["groups"]
              and key in theirs["offsets"]["offsetTable"]
              and mine["offsets"]["offsetTable"].get(key) == theirs["offsets"]["offsetTable"][key]
              and mine["delay"] == theirs["delay"])
        return mine if ok else None
    return wait_for(f"{slave} copies the config of {master}", same)


def send_v2(addr: str, topic: str) -> tuple[dict, bytes]:
    fields = {"a": "PG_HA", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
              "g": str(int(time.time() * 1000)), "h": "0", "i": "UNIQ_KEY\x01" + uuid.uuid4().hex.upper() + "\x02",
              "j": "0", "k": "false"}
    return call(addr, SEND_MESSAGE_V2, fields, b"to a slave")


def slave_answers(addr: str, topic: str, group: str) -> dict[str, tuple]:
    """What a slave answers to writes and to a pull whose offset is far past its queue."""
    out: dict[str, tuple] = {}
    for name, code, fields in (
            ("create topic", UPDATE_AND_CREATE_TOPIC, {"topic": topic + "_X", "readQueueNums": "4", "writeQueueNums": "4",
                                                       "perm": "6", "topicFilterType": "SINGLE_TAG"}),
            ("delete topic", DELETE_TOPIC_IN_BROKER, {"topic": topic}),
            ("update group", UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}),
            ("delete group", DELETE_SUBSCRIPTIONGROUP, {"groupName": group})):
        header, _ = call(addr, code, fields)
        out[name] = (header["code"], header.get("remark"))
    header, _ = send_v2(addr, topic)
    # the bracket holds the broker's own disk figures
    out["send"] = (header["code"], re.sub(r"\[[^\]]*\]", "[...]", header.get("remark", "")))
    header, _ = call(addr, PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "1000", "maxMsgNums": "32",
        "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
        "expressionType": "TAG"})
    fields = header.get("extFields", {})
    out["pull"] = (header["code"], fields.get("suggestWhichBrokerId"), fields.get("nextBeginOffset"))
    return out


def produce_and_consume(client4, namesrv: str, topic: str, group: str, master: str, slave: str) -> None:
    """Produce 100 messages and 3 delayed ones; once ``slave`` has replicated them, consume all.
    A pull of data "in disk" carries at most 8 messages (maxTransferCountOnMessageInDisk): with 25
    per queue the consumer's first pull of each queue (from the master) leaves the rest to the slave."""
    produced = client4.run("produce", namesrv=namesrv, topic=topic, mode="sync", count=100)
    delayed = client4.run("produce", namesrv=namesrv, topic=topic, mode="sync", count=3, delay_level=1,
                          body_prefix=f"{topic}-delayed")
    # a slave reports its offset first after up to haSendHeartbeatInterval (5 s); a consumer sent
    # to it before then finds nothing and is sent back to the master
    wait_for(f"{slave} replicates {master}", lambda: (
        runtime_info(slave)["commitLogMaxOffset"] == runtime_info(master)["commitLogMaxOffset"]))
    consumed = client4.run("consume", namesrv=namesrv, topic=topic, group=group, count=103, idle_ms=3000)
    assert consumed.summary["complete"], consumed.describe()
    bodies = sorted(e["body"] for e in consumed.received)
    assert bodies == sorted(e["body"] for e in produced.sent + delayed.sent)


def broker_addrs(namesrv_port: int, name: str) -> dict[str, str]:
    header, body = remoting_call(("127.0.0.1", namesrv_port), GET_BROKER_CLUSTER_INFO)
    assert header["code"] == 0, header
    info = lenient_json(body)
    assert name in info["clusterAddrTable"][CLUSTER_NAME]
    return info["brokerAddrTable"][name]["brokerAddrs"]


def slave_spec(cluster, name: str, namesrv: str, broker_id: int) -> BrokerSpec:
    return BrokerSpec(name=name, store_dir=cluster.root / f"store-slave{broker_id}", namesrv_addr=namesrv,
                      extra={"brokerId": str(broker_id), "brokerRole": "SLAVE"})


def start_master(cluster, kind: str):
    """A NameServer and a master of ``kind`` that sends consumers to its slave (id 1)."""
    name, tag = "broker-ha", uuid.uuid4().hex[:8]
    namesrv = cluster.namesrv(kind)
    master = cluster.broker(kind, BrokerSpec(name=name, store_dir=cluster.root / "store-master",
                                             namesrv_addr=namesrv.addr, extra=MASTER_READS))
    return name, f"HA_T_{tag}", f"HA_G_{tag}", namesrv, master


def test_pyrmq_slave_beside_apache_slave_of_apache_master(cluster, client4):
    name, topic, group, namesrv, master = start_master(cluster, "apache")
    apache_slave = cluster.broker("apache", slave_spec(cluster, name, namesrv.addr, 1))
    pyrmq_slave = cluster.broker("pyrmq", slave_spec(cluster, name, namesrv.addr, 2))
    assert broker_addrs(namesrv.port, name) == {"0": master.addr, "1": apache_slave.addr, "2": pyrmq_slave.addr}

    produce_and_consume(client4, namesrv.addr, topic, group, master.addr, apache_slave.addr)
    # reads from slaves, on the reference: the consumer was sent to the slave (id 1) and read there
    assert int(runtime_info(apache_slave.addr)["msgGetTotalTodayNow"]) > 0

    check_master_tables(master.addr, topic, group)
    copied = assert_copied(pyrmq_slave.addr, master.addr, topic, group)
    # Apache's own slave holds the same topics, groups and offsets (not the delay offsets: a
    # 4.9.7 master's answer carries code 1, which a 4.9.7 slave treats as a failure)
    reference = assert_copied_except_delay(apache_slave.addr, copied)
    assert reference

    theirs = slave_answers(apache_slave.addr, topic, group)
    ours = slave_answers(pyrmq_slave.addr, topic, group)
    assert ours == theirs
    assert ours["create topic"] == (SYSTEM_ERROR, SLAVE_REMARK)
    assert ours["send"][0] == SERVICE_NOT_AVAILABLE
    assert ours["pull"] == (PULL_RETRY_IMMEDIATELY, "0", "1000")

    master_offset = runtime_info(master.addr)["commitLogMaxOffset"]
    info = wait_for("the pyrmq slave's runtime info", lambda: (
        (i := runtime_info(pyrmq_slave.addr))["masterOffset"] == master_offset and i))
    assert info["masterAddr"] == master.addr


def assert_copied_except_delay(slave: str, copied: dict) -> bool:
    def same() -> bool:
        return (table(slave, GET_ALL_TOPIC_CONFIG) == copied["topics"]
                and table(slave, GET_ALL_SUBSCRIPTIONGROUP_CONFIG) == copied["groups"]
                and table(slave, GET_ALL_CONSUMER_OFFSET) == copied["offsets"])
    return wait_for(f"{slave} holds the copied tables", same)


def test_pyrmq_slave_of_pyrmq_master(cluster, client4):
    name, topic, group, namesrv, master = start_master(cluster, "pyrmq")
    slave = cluster.broker("pyrmq", slave_spec(cluster, name, namesrv.addr, 1))
    assert broker_addrs(namesrv.port, name) == {"0": master.addr, "1": slave.addr}

    # every pull answer of the master sends the consumer to the slave, which serves it
    produce_and_consume(client4, namesrv.addr, topic, group, master.addr, slave.addr)
    assert int(runtime_info(slave.addr)["msgGetTotalTodayNow"]) > 0

    check_master_tables(master.addr, topic, group)
    assert_copied(slave.addr, master.addr, topic, group)
    answers = slave_answers(slave.addr, topic, group)
    assert answers["create topic"] == answers["delete group"] == (SYSTEM_ERROR, SLAVE_REMARK)
    assert answers["send"][0] == SERVICE_NOT_AVAILABLE
    assert answers["pull"] == (PULL_RETRY_IMMEDIATELY, "0", "1000")
    master_info = runtime_info(master.addr)
    assert {"haConnectionCount", "push2SlaveMaxOffset", "slaveFallBehindMuch"} <= set(master_info)
    info = wait_for("the slave's runtime info", lambda: (
        (i := runtime_info(slave.addr))["masterOffset"] == master_info["commitLogMaxOffset"] and i))
    assert info["masterAddr"] == master.addr

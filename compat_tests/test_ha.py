"""Master -> slave replication between pyrmq and Apache RocketMQ 4.9.7, both ways, driven by the
official Java client 4.9.8 (issue 8, "Done when" point 1).

Pairs (master -> slave): apache->apache (the reference), pyrmq->pyrmq, apache->pyrmq,
pyrmq->apache; the NameServer is of the master's kind. Every scenario passes on apache->apache.

- replication: a master filled past one commit log file, then a new slave: the slave's commit
  log equals the master's byte for byte from the start of the master's last file (spec/ha.md §5)
  to its max offset; with the master stopped, a pull consumer reads from the slave exactly the
  messages sent (bodies, msgIds, queues, queue offsets, commit log offsets);
- SYNC_MASTER without its slave: a hung slave (SIGSTOP) makes the send answer FLUSH_SLAVE_TIMEOUT
  after slaveTimeout (3 s), a stopped slave (SIGTERM) SLAVE_NOT_AVAILABLE at once; the messages
  are stored all the same;
- kill -9 of a SYNC_MASTER (ASYNC_FLUSH) in the middle of a stream of sends: every message
  acknowledged SEND_OK is consumed from the slave by a push consumer;
- consumers switch to the slave when the master is down and back when it returns, offsets kept.

CI runs the combinations marked ``ci`` below (8 of 20, about 3 minutes): replication
pyrmq->pyrmq SYNC, pyrmq->apache SYNC, apache->pyrmq ASYNC; the SYNC_MASTER answers pyrmq->pyrmq;
kill -9 pyrmq->pyrmq and apache->pyrmq; the switch pyrmq->pyrmq and pyrmq->apache.
``PYRMQ_HA_FULL=1`` runs all 20 (every pair, both master roles: about 10 minutes).
"""

from __future__ import annotations

import os
import uuid
from collections import Counter

import pytest

from compat_tests.checks import assert_received_exactly, decode_offset_msg_id
from compat_tests.cluster import (  # noqa: F401  (fixtures)
    assert_acked_by,
    client4_fixture,
    cluster_fixture,
    next_offsets,
    queue_ends,
    wait_consumer_offsets,
)
from compat_tests.ha import (
    BROKER_NAME,
    HA_COMMIT_LOG_FILE_SIZE,
    create_topic,
    compare_commit_logs,
    freeze,
    last_file_start,
    max_offset,
    start_pair,
    thaw,
    wait_caught_up,
    wait_topic_on,
)

pytestmark = [pytest.mark.compat, pytest.mark.slow]

FULL = os.environ.get("PYRMQ_HA_FULL") == "1"
PAIRS = [("apache", "apache"), ("pyrmq", "pyrmq"), ("apache", "pyrmq"), ("pyrmq", "apache")]
SLAVE_TIMEOUT_MS = 3000  # slaveTimeout, the same default on both kinds


def case(*values: str, ci: bool = False):
    """One parametrization; outside CI's selection it runs only with PYRMQ_HA_FULL=1."""
    marks = [] if ci or FULL else [pytest.mark.skip(reason="run with PYRMQ_HA_FULL=1")]
    return pytest.param(*values, id="-".join(values[:2]) + "".join(f"-{v}" for v in values[2:]), marks=marks)


def _names(prefix: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"HA_{prefix}_{tag}", f"HA_G_{prefix}_{tag}"


def _ok(sent: list[dict]) -> list[dict]:
    return [e for e in sent if e["status"] == "SEND_OK"]


def _prime(pair, client4) -> None:
    """One message on a topic of its own, then wait until the slave has it: from here on the
    slave is connected and acknowledging (an empty master gives no offset to wait for)."""
    client4.run("produce", namesrv=pair.namesrv.addr, topic=f"HA_PRIME_{uuid.uuid4().hex[:8]}", count=1)
    wait_caught_up(pair)


REPLICATION_CASES = [case(m, s, role, ci=(m, s, role) in {("pyrmq", "pyrmq", "SYNC_MASTER"),
                                                           ("pyrmq", "apache", "SYNC_MASTER"),
                                                           ("apache", "pyrmq", "ASYNC_MASTER")})
                     for m, s in PAIRS for role in ("ASYNC_MASTER", "SYNC_MASTER")]


@pytest.mark.parametrize("master_kind,slave_kind,role", REPLICATION_CASES)
def test_replication_is_byte_identical_and_served_by_the_slave(cluster, client4, master_kind, slave_kind, role):
    pair = start_pair(cluster, master_kind, slave_kind, role, start_slave=False)
    topic, group = _names("repl")
    ns = pair.namesrv.addr

    # Before the slave exists: fill the master past its first commit log file (another topic).
    # A SYNC_MASTER without a slave answers SLAVE_NOT_AVAILABLE, the messages are stored anyway.
    client4.run("produce", namesrv=ns, topic=f"{topic}_FILL", mode="batch", count=300, batch_size=20,
                body_size=1000)
    before = max_offset(pair.master)
    assert before > HA_COMMIT_LOG_FILE_SIZE, before
    create_topic(pair.master, topic)

    pair.slave.start()
    first_sync_s = wait_caught_up(pair)
    produced = client4.run("produce", namesrv=ns, topic=topic, mode="sync", count=200, body_size=1000,
                           tags="TagA,TagB")
    assert_acked_by(produced.sent, 200, {BROKER_NAME: pair.master.addr})
    wait_caught_up(pair)

    compared = compare_commit_logs(pair)
    assert compared.slave_start == last_file_start(before), (compared, before)
    assert compared.slave_start > 0
    assert compared.compared_bytes == max_offset(pair.slave) - compared.slave_start
    print(f"{pair.label}: first catch-up {first_sync_s:.1f}s, compared {compared}")
    # The slave serves the topic once it has copied the master's topic configs (every 10 s).
    wait_topic_on(pair.slave, topic)

    # The master leaves; the NameServer keeps the brokerName with the slave alone, and the pull
    # consumer reads the topic from the slave's own consume queues.
    code = pair.master.stop()
    assert code in pair.master.graceful_exit_codes, f"{pair.master} exit code {code}\n{pair.master.log_tail()}"
    pulled = client4.run("pull", namesrv=ns, topic=topic, group=group)
    assert_received_exactly(produced.sent, pulled.received)
    statuses = {e["status"] for e in pulled.of("pull")}
    assert statuses <= {"FOUND", "NO_NEW_MSG"}, statuses


@pytest.mark.parametrize("master_kind,slave_kind", [case(m, s, ci=(m, s) == ("pyrmq", "pyrmq")) for m, s in PAIRS])
def test_sync_master_answers_as_apache_when_the_slave_is_hung_or_gone(cluster, client4, master_kind, slave_kind):
    pair = start_pair(cluster, master_kind, slave_kind, "SYNC_MASTER")
    topic, group = _names("sync")
    ns = pair.namesrv.addr
    _prime(pair, client4)
    send = {"namesrv": ns, "topic": topic, "mode": "sync", "send_timeout_ms": 10_000, "retries": 0}

    ok = client4.run("produce", count=3, body_prefix="ok", **send)
    assert [e["status"] for e in ok.sent] == ["SEND_OK"] * 3, ok.sent

    # A hung slave keeps its connection but acknowledges nothing: the send waits slaveTimeout.
    wait_caught_up(pair)
    freeze(pair.slave)
    try:
        hung = client4.run("produce", count=1, body_prefix="hung", **send)
    finally:
        thaw(pair.slave)
    (h,) = hung.sent
    assert h["status"] == "FLUSH_SLAVE_TIMEOUT", h
    assert SLAVE_TIMEOUT_MS - 200 <= h["rtMs"] <= SLAVE_TIMEOUT_MS + 2500, h

    # The slave resumes, then stops: no connection, the send answers at once.
    wait_caught_up(pair)
    code = pair.slave.stop()
    assert code in pair.slave.graceful_exit_codes, f"{pair.slave} exit code {code}"
    gone = client4.run("produce", count=2, body_prefix="gone", **send)
    assert [e["status"] for e in gone.sent] == ["SLAVE_NOT_AVAILABLE"] * 2, gone.sent
    assert all(e["rtMs"] < 1500 for e in gone.sent), gone.sent
    print(f"{pair.label}: hung slave answered in {h['rtMs']} ms, no slave in {[e['rtMs'] for e in gone.sent]} ms")

    # Whatever the status, the master stored every message, in send order per queue.
    pulled = client4.run("pull", namesrv=ns, topic=topic, group=group)
    assert_received_exactly(ok.sent + hung.sent + gone.sent, pulled.received)


@pytest.mark.parametrize("master_kind,slave_kind",
                         [case(m, s, ci=(m, s) in {("pyrmq", "pyrmq"), ("apache", "pyrmq")}) for m, s in PAIRS])
def test_kill9_of_sync_master_loses_no_acknowledged_message(cluster, client4, master_kind, slave_kind):
    pair = start_pair(cluster, master_kind, slave_kind, "SYNC_MASTER", flush_disk_type="ASYNC_FLUSH")
    topic, group = _names("kill")
    ns = pair.namesrv.addr
    create_topic(pair.master, topic)
    _prime(pair, client4)
    wait_topic_on(pair.slave, topic)

    running = client4.start("produce", namesrv=ns, topic=topic, mode="sync", count=100_000, interval_ms=2,
                            body_size=200, send_timeout_ms=3000, retries=0, stop_after_failures=3)
    running.wait_for(lambda evs: len(_ok([e for e in evs if e["ev"] == "sent"])) >= 150, timeout=60)
    pair.master.kill()
    produced = running.wait().check()
    acked = _ok(produced.sent)
    attempted = {e["body"] for e in produced.sent + produced.of("send_failed")}
    assert len(acked) >= 150 and produced.of("send_failed"), produced.summary

    consumed = client4.run("consume", namesrv=ns, topic=topic, group=group, count=len(acked), idle_ms=2000,
                           timeout_ms=60_000)
    got = Counter(e["body"] for e in consumed.received)
    lost = [e["body"] for e in acked if e["body"] not in got]
    assert not lost, f"{len(lost)} acknowledged messages not on the slave: {lost[:10]}"
    assert set(got) <= attempted, sorted(set(got) - attempted)[:10]
    by_body = {e["body"]: e for e in consumed.received}
    for e in acked:
        r = by_body[e["body"]]
        assert (r["msgId"], r["queueId"], r["queueOffset"]) == (e["msgId"], e["queueId"], e["queueOffset"]), (e, r)
        assert r["commitLogOffset"] == decode_offset_msg_id(e["offsetMsgId"])[2], (e, r)
    dups = {b: n for b, n in got.items() if n > 1}
    print(f"{pair.label}: {len(acked)} acknowledged, {len(attempted) - len(acked)} not, "
          f"{len(got)} consumed from the slave, {len(got) - len(acked)} unacknowledged among them, "
          f"duplicates {len(dups)}")


@pytest.mark.parametrize("master_kind,slave_kind",
                         [case(m, s, ci=(m, s) in {("pyrmq", "pyrmq"), ("pyrmq", "apache")}) for m, s in PAIRS])
def test_consumers_switch_to_the_slave_and_back_with_offsets_kept(cluster, client4, master_kind, slave_kind):
    pair = start_pair(cluster, master_kind, slave_kind, "ASYNC_MASTER")
    topic, group = _names("switch")
    ns = pair.namesrv.addr
    create_topic(pair.master, topic)
    _prime(pair, client4)
    wait_topic_on(pair.slave, topic)

    # A: consumed from the master; the consumer's offsets reach the master, then the slave.
    a = client4.run("produce", namesrv=ns, topic=topic, mode="sync", count=20, body_prefix="A")
    assert_acked_by(a.sent, 20, {BROKER_NAME: pair.master.addr})
    first = client4.run("consume", namesrv=ns, topic=topic, group=group, count=20, idle_ms=1000)
    assert_received_exactly(a.sent, first.received)
    after_a = queue_ends(a.sent)
    wait_consumer_offsets(pair.master, group, topic, after_a, timeout=15)
    offsets_copied_s = wait_consumer_offsets(pair.slave, group, topic, after_a, timeout=25)

    # B: sent while nobody consumes; then the master goes down.
    b = client4.run("produce", namesrv=ns, topic=topic, mode="sync", count=20, body_prefix="B")
    assert_acked_by(b.sent, 20, {BROKER_NAME: pair.master.addr}, next_offsets(a.sent))
    wait_caught_up(pair)
    code = pair.master.stop()
    assert code in pair.master.graceful_exit_codes, f"{pair.master} exit code {code}"

    # A consumer of the group now reads from the slave, from the group's offsets there: B only.
    second = client4.start("consume", namesrv=ns, topic=topic, group=group, count=40, idle_ms=1500,
                           timeout_ms=90_000, poll_namesrv_ms=1000)
    second.wait_for(lambda evs: len({e["body"] for e in evs if e["ev"] == "recv"}) >= 20, timeout=60)

    # C: the master returns; the running consumer takes C and moves its offsets back to it.
    pair.master.start()
    c = client4.run("produce", namesrv=ns, topic=topic, mode="sync", count=20, body_prefix="C")
    assert_acked_by(c.sent, 20, {BROKER_NAME: pair.master.addr}, next_offsets(a.sent, b.sent))
    result = second.wait().check()
    assert result.summary["complete"], result.describe()
    bodies = Counter(e["body"] for e in result.received)
    a_again = sorted(body for body in bodies if body.startswith("A-"))
    assert not a_again, f"offsets not kept on the slave: A consumed again {a_again}"
    assert set(bodies) == {e["body"] for e in b.sent + c.sent}, sorted(bodies)
    dups = {body: n for body, n in bodies.items() if n > 1}
    wait_consumer_offsets(pair.master, group, topic,
                          queue_ends(a.sent, b.sent, c.sent), timeout=20)
    print(f"{pair.label}: offsets copied to the slave in {offsets_copied_s:.1f}s; B and C consumed, "
          f"duplicates {dups}")

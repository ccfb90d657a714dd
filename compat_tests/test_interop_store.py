"""One store directory, two implementations: what pyrmq writes Apache RocketMQ serves, and back.

A broker of one kind (the writer) takes messages from the official Java client 4.9.8 (two
topics, tags, keys, sync and batch sends) and a consumer group commits its offsets; the writer
stops (SIGTERM, or SIGKILL for the crash cases); a broker of the other kind (the reader) starts
on the same store directory, with the same name, ports and file sizes, and must serve every
acknowledged message with its body, tags, keys, queue and queue offset, commit log offset and
msgId, and (after a clean stop) resume the group exactly where it committed.

The NameServer is Apache's in all cases, so a failure here is about the store alone.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass

import pytest

from compat_tests.checks import assert_dense_queues, assert_received_exactly, seed_group_offset_at
from compat_tests.cluster import (  # noqa: F401  (fixtures)
    BrokerSpec,
    assert_acked_by,
    client4_fixture,
    cluster_fixture,
    next_offsets,
    queue_ends,
    wait_consumer_offsets,
)
from compat_tests.javaclient import ScenarioResult
from pyrmq.codec.store_formats import CQ_UNIT, ext_undecorate, is_ext_addr

pytestmark = [pytest.mark.compat, pytest.mark.slow]

# Tiny files, the same for both kinds, so that the few hundred messages of a scenario span several
# commit log files (each ending in a BLANK record) and several consume queue files per queue, and
# recovery runs over file boundaries.
SMALL_FILES = {"commit_log_file_size": 16 * 1024, "consume_queue_file_size": 10 * 20}

@dataclass
class Written:
    topic_sync: str
    topic_batch: str
    group: str
    first: ScenarioResult   # topic_sync, consumed by `group` before the switch
    rest: ScenarioResult    # topic_sync, sent after the group committed: what it must get next
    batch: ScenarioResult   # topic_batch, two queues, batches of 8

    def all_sync(self) -> list[dict]:
        return self.first.sent + self.rest.sent


def _write(client, namesrv, writer, consume: bool) -> Written:
    tag = uuid.uuid4().hex[:8]
    w = Written(topic_sync=f"IS_sync_{tag}", topic_batch=f"IS_batch_{tag}", group=f"IS_G_{tag}",
                first=None, rest=None, batch=None)
    w.first = client.run("produce", namesrv=namesrv.addr, topic=w.topic_sync, mode="sync", count=40,
                         tags="TagA,TagB,TagC", body_prefix="first")
    brokers = {writer.name: writer.addr}
    assert_acked_by(w.first.sent, 40, brokers)
    w.batch = client.run("produce", namesrv=namesrv.addr, topic=w.topic_batch, mode="batch", count=24,
                         batch_size=8, tags="X,Y", create_topic=2)
    assert_acked_by(w.batch.sent, 24, brokers)
    assert {e["queueId"] for e in w.batch.sent} <= {0, 1}
    if consume:
        # The group's offsets must be on the writer before it stops: seeded first (Apache 4.9.7's
        # race on a group's first commits, see seed_group_offset_at), then waited for, since the
        # consumer's shutdown commits are oneway.
        seed_group_offset_at(writer.spec.endpoint, w.group, w.topic_sync)
        consumed = client.run("consume", namesrv=namesrv.addr, topic=w.topic_sync, group=w.group, count=40,
                              idle_ms=1000)
        assert_received_exactly(w.first.sent, consumed.received)
        wait_consumer_offsets(writer, w.group, w.topic_sync, queue_ends(w.first.sent))
    w.rest = client.run("produce", namesrv=namesrv.addr, topic=w.topic_sync, mode="sync", count=15,
                        tags="TagA,TagB,TagC", body_prefix="rest")
    assert_acked_by(w.rest.sent, 15, brokers, next_offsets(w.first.sent))
    return w


def _assert_all_served(client, namesrv, w: Written) -> None:
    """A fresh group pulls every queue of both topics from offset 0: exactly what was sent, in
    place, and each queue ends at the number of messages sent to it."""
    for topic, sent in ((w.topic_sync, w.all_sync()), (w.topic_batch, w.batch.sent)):
        pulled = client.run("pull", namesrv=namesrv.addr, topic=topic, group=f"{w.group}_pull")
        assert_received_exactly(sent, pulled.received)
        ends = {p["queueId"]: p["maxOffset"] for p in pulled.of("pull") if p["status"] == "NO_NEW_MSG"}
        per_queue = Counter(e["queueId"] for e in sent)
        assert set(per_queue) <= set(ends), ends
        assert all(ends[q] == per_queue.get(q, 0) for q in ends), (ends, per_queue)


def _no_abort_file(spec: BrokerSpec) -> None:
    assert not (spec.store_dir / "abort").exists(), "a clean stop leaves no abort file"


def _config_files(spec: BrokerSpec) -> set[str]:
    return {p.name for p in (spec.store_dir / "config").glob("*.json")}


def _assert_store_accepted(reader, config_files: set[str]) -> None:
    """The reader took every file the writer left as it was: no fallback to a ``.bak``, no
    complaint about the store (Apache logs one line per file it loaded; pyrmq warns on every
    file it cannot use)."""
    if reader.kind == "apache":
        loaded, failures = reader.store_load_report()
        assert not failures, "\n".join(failures)
        missing = (config_files | {"commitlog", "consumequeue"}) - loaded
        assert not missing, f"Apache did not report loading {sorted(missing)} (log: {reader.log_file})"
    else:
        complaints = [line for line in reader.out_path.read_text(errors="replace").splitlines()
                      if " WARNING " in line or " ERROR " in line or "Traceback" in line]
        assert not complaints, "\n".join(complaints)


@pytest.mark.parametrize("writer_kind,reader_kind", [("pyrmq", "apache"), ("apache", "pyrmq")])
def test_clean_stop_then_other_kind_serves_store(cluster, client4, writer_kind, reader_kind):
    namesrv = cluster.namesrv("apache")
    spec = BrokerSpec(name="broker-interop", store_dir=cluster.root / "store", namesrv_addr=namesrv.addr,
                      **SMALL_FILES)
    writer = cluster.broker(writer_kind, spec)
    w = _write(client4, namesrv, writer, consume=True)

    code = writer.stop()
    assert code in writer.graceful_exit_codes, f"{writer} exit code {code} after SIGTERM\n{writer.log_tail()}"
    _no_abort_file(spec)
    configs = _config_files(spec)
    assert {"topics.json", "subscriptionGroup.json", "consumerOffset.json"} <= configs, configs

    reader = cluster.broker(reader_kind, spec)
    _assert_store_accepted(reader, configs)
    # The group resumes where it committed on the writer: exactly the 15 sent after that.
    again = client4.run("consume", namesrv=namesrv.addr, topic=w.topic_sync, group=w.group, count=15,
                        idle_ms=2500)
    assert_received_exactly(w.rest.sent, again.received)
    _assert_all_served(client4, namesrv, w)

    # The reader goes on writing where the writer stopped: the next queue offsets.
    more = client4.run("produce", namesrv=namesrv.addr, topic=w.topic_sync, mode="sync", count=8,
                       body_prefix="more")
    assert_acked_by(more.sent, 8, {reader.name: reader.addr}, next_offsets(w.all_sync()))
    code = reader.stop()
    assert code in reader.graceful_exit_codes, f"{reader} exit code {code}\n{reader.log_tail()}"
    _no_abort_file(spec)


@pytest.mark.parametrize("writer_kind,reader_kind", [("pyrmq", "apache"), ("apache", "pyrmq")])
def test_kill9_mid_stream_then_other_kind_recovers_store(cluster, client4, writer_kind, reader_kind):
    """SIGKILL while a producer streams (the record in flight may be torn): the other kind runs
    its crash recovery on the store and serves every acknowledged message in place; nothing is
    duplicated; at most the one send in flight at the kill is there without its acknowledgement."""
    namesrv = cluster.namesrv("apache")
    spec = BrokerSpec(name="broker-crash", store_dir=cluster.root / "store", namesrv_addr=namesrv.addr,
                      **SMALL_FILES)
    writer = cluster.broker(writer_kind, spec)
    w = _write(client4, namesrv, writer, consume=False)

    stream_topic = f"{w.topic_sync}_stream"
    producer = client4.start("produce", namesrv=namesrv.addr, topic=stream_topic, mode="sync", count=100_000,
                             tags="TagA,TagB", interval_ms=2, stop_after_failures=3, retries=0,
                             send_timeout_ms=3000)
    try:
        producer.wait_for(lambda evs: sum(e["ev"] == "sent" for e in evs) >= 60, timeout=60)
        writer.kill()
        streamed = producer.wait().check()
    finally:
        producer.kill()
    acked = [e for e in streamed.sent if e["status"] == "SEND_OK"]
    assert len(acked) >= 60 and streamed.of("send_failed"), "the broker did not die mid-stream"
    assert_acked_by(acked, len(acked), {writer.name: writer.addr})
    assert (spec.store_dir / "abort").exists(), "a killed broker leaves its abort file"
    configs = _config_files(spec)

    reader = cluster.broker(reader_kind, spec)
    _assert_store_accepted(reader, configs)
    _assert_all_served(client4, namesrv, w)

    pulled = client4.run("pull", namesrv=namesrv.addr, topic=stream_topic, group=f"{w.group}_pull")
    assert not pulled.duplicates(), pulled.duplicates()
    acked_bodies = {e["body"] for e in acked}
    assert_received_exactly(acked, [r for r in pulled.received if r["body"] in acked_bodies])
    attempted = {e["body"] for e in streamed.sent + streamed.of("send_failed")}
    unacked = [r["body"] for r in pulled.received if r["body"] not in acked_bodies]
    assert set(unacked) <= attempted and len(unacked) <= 1, unacked
    assert_dense_queues(pulled.received)


# ConsumeQueueExt (store.md section 4.5) on both kinds: 256-byte ext files (12 bitmap-less units,
# then the -1 marker) so each queue's ext spans several files.
EXT_FILE_SIZE = 256
EXT_CONF = {"enableConsumeQueueExt": "true", "mappedFileSizeConsumeQueueExt": str(EXT_FILE_SIZE)}


def _ext_addressed_units(store_dir, topic: str) -> list[tuple[int, int]]:
    """(queueId, tagsCode) of every valid unit of ``topic``'s consume queues, read from the files."""
    found = []
    for qdir in sorted((store_dir / "consumequeue" / topic).iterdir()):
        for f in sorted(qdir.iterdir()):
            data = f.read_bytes()
            for offset, size, tags_code in CQ_UNIT.iter_unpack(data[: len(data) // 20 * 20]):
                if offset >= 0 and 0 < size < 0x7FFFFFFF:
                    found.append((int(qdir.name), tags_code))
    return found


def _assert_ext_written(store_dir, topic: str, count: int) -> None:
    units = _ext_addressed_units(store_dir, topic)
    spanned = []
    assert len(units) == count and all(is_ext_addr(t) for _, t in units), units[:5]
    for queue_id in {q for q, _ in units}:
        ext_dir = store_dir / "consumequeue_ext" / topic / str(queue_id)
        files = sorted(p.name for p in ext_dir.iterdir())
        last = max(ext_undecorate(t) for q, t in units if q == queue_id)
        assert int(files[-1]) <= last < int(files[-1]) + EXT_FILE_SIZE, (files, last)
        spanned.append(len(files))
    assert max(spanned) > 1, spanned


@pytest.mark.parametrize("writer_kind,reader_kind", [("pyrmq", "apache"), ("apache", "pyrmq")])
def test_consume_queue_ext_store_opens_in_the_other_kind(cluster, client4, writer_kind, reader_kind):
    """With enableConsumeQueueExt on both: every CQ unit's tagsCode addresses an ext unit in the
    writer's files; the reader recovers them, filters tags through them (a TagA consumer gets
    exactly the TagA messages) and appends ext units after the writer's."""
    namesrv = cluster.namesrv("apache")
    spec = BrokerSpec(name="broker-ext", store_dir=cluster.root / "store", namesrv_addr=namesrv.addr,
                      extra=dict(EXT_CONF), **SMALL_FILES)
    writer = cluster.broker(writer_kind, spec)
    w = _write(client4, namesrv, writer, consume=False)
    code = writer.stop()
    assert code in writer.graceful_exit_codes, f"{writer} exit code {code}\n{writer.log_tail()}"
    _assert_ext_written(spec.store_dir, w.topic_sync, 55)
    _assert_ext_written(spec.store_dir, w.topic_batch, 24)

    reader = cluster.broker(reader_kind, spec)
    _assert_store_accepted(reader, _config_files(spec))
    _assert_all_served(client4, namesrv, w)
    wanted = [e for e in w.all_sync() if e["tags"] == "TagA"]
    tagged = client4.run("consume", namesrv=namesrv.addr, topic=w.topic_sync, group=f"{w.group}_tagA",
                         tag_expr="TagA", count=len(wanted), idle_ms=1500)
    assert_received_exactly(wanted, tagged.received)
    more = client4.run("produce", namesrv=namesrv.addr, topic=w.topic_sync, mode="sync", count=8, body_prefix="more")
    assert_acked_by(more.sent, 8, {reader.name: reader.addr}, next_offsets(w.all_sync()))
    code = reader.stop()
    assert code in reader.graceful_exit_codes, f"{reader} exit code {code}\n{reader.log_tail()}"
    _assert_ext_written(spec.store_dir, w.topic_sync, 63)

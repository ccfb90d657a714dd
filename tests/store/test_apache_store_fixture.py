"""Open the store directory written by Apache RocketMQ 4.9.8 (tests/fixtures/store)."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from pyrmq.codec.message import check_record, decode_messages, tags_string_to_tags_code
from pyrmq.store.message_store import GetMessageStatus
from store_helpers import make_msg, open_store, small_config

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "store" / "apache-4.9.8-small.tar.gz"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason="Apache store fixture missing")

CL_SIZE = 131072
CQ_SIZE = 2000


@pytest.fixture
def java_config(tmp_path):
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return small_config(tmp_path / "store", mapped_file_size_commit_log=CL_SIZE,
                        mapped_file_size_consume_queue=CQ_SIZE)


def read_queue(store, queue_id):
    out, offset = [], 0
    while True:
        r = store.get_message("g", "TopicTest", queue_id, offset, 32, None)
        if r.status is not GetMessageStatus.FOUND:
            return out, r
        out += decode_messages(b"".join(r.buffers))
        offset = r.next_begin_offset


def check_java_content(s):
    assert s.get_max_phy_offset() >= CL_SIZE + 84888
    bodies = set()
    for q in range(4):
        assert s.get_max_offset_in_queue("TopicTest", q) >= 250
        msgs, last = read_queue(s, q)
        assert last.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        java = [m for m in msgs if m.body.startswith(b"Hello RocketMQ")]
        assert [m.queue_offset for m in java] == list(range(250))
        assert all(m.queue_id == q and m.tags == "TagA" for m in java)
        assert all(m.store_host[0] == "127.0.0.1" for m in java)
        assert all(m.properties.get("CLUSTER") == "DefaultCluster" for m in java)
        bodies.update(m.body for m in java)
        unit = s.find_consume_queue("TopicTest", q).get_unit(0)
        assert unit[2] == tags_string_to_tags_code("TagA")
    assert bodies == {f"Hello RocketMQ {i}".encode() for i in range(1000)}


def test_open_apache_store_after_clean_shutdown(java_config):
    s = open_store(java_config)
    try:
        assert s.last_exit_ok
        assert s.get_max_phy_offset() == CL_SIZE + 84888
        assert s.get_min_phy_offset() == 0
        check_java_content(s)
        blank = s.commit_log.get_data(131002, 8)
        assert check_record(blank, 0, 8) == 0
        r = s.put_message(make_msg(queue_id=1, body=b"from pyrmq"))
        assert r.append_result.wrote_offset == CL_SIZE + 84888
        assert r.append_result.logics_offset == 250
    finally:
        s.shutdown()
    s = open_store(java_config)
    try:
        check_java_content(s)
        assert s.get_max_offset_in_queue("TopicTest", 1) == 251
    finally:
        s.shutdown()


def test_apache_store_abnormal_recovery_and_lost_queues(java_config):
    import shutil

    cq_dir = Path(java_config.consume_queue_dir())
    java_units = {f.relative_to(cq_dir): f.read_bytes() for f in cq_dir.rglob("0000*")}
    shutil.rmtree(cq_dir)
    open(java_config.abort_path(), "w").close()
    s = open_store(java_config)
    try:
        assert not s.last_exit_ok
        check_java_content(s)  # every unit rebuilt from the Java commit log
    finally:
        s.shutdown()
    rebuilt = {f.relative_to(cq_dir): f.read_bytes() for f in cq_dir.rglob("0000*")}
    assert rebuilt == java_units  # byte-identical consume queue files
    assert not os.path.exists(java_config.abort_path())

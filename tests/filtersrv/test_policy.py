"""The FilterServer's policy (who may register which class) and the broker's side of its
FilterServers (the fixed command line, registrations, the 30 s idle drop)."""

from __future__ import annotations

import sys
import tempfile
import zlib
from pathlib import Path

import pytest
import trio

from pyrmq.broker.config import build_config
from pyrmq.broker.filter_server_manager import IDLE_DROP_S, FilterServerManager
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import make_request
from pyrmq.filtersrv.class_manager import FilterClassManager, RegistrationRefused, load_deployed
from pyrmq.filtersrv.config import FiltersrvConfig
from pyrmq.remoting.channel import Channel
from pyrmq.remoting.transport import PeerStream

DEPLOYED = b"class EvenBody:\n    def match(self, message):\n        return len(message.body) % 2 == 0\n"


@pytest.fixture
def work_dir():
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        root.chmod(0o755)
        (root / "cwd").mkdir(mode=0o555)
        (root / "deployed").mkdir()
        (root / "deployed" / "EvenBody.py").write_bytes(DEPLOYED)
        (root / "deployed" / "not a class.py").write_bytes(b"")
        yield root


def manager(work_dir: Path, **config: object) -> FilterClassManager:
    settings = FiltersrvConfig(broker_addr="127.0.0.1:1", class_dir=str(work_dir / "deployed"), **config)
    return FilterClassManager(settings, work_dir, load_deployed(settings.class_dir), None,
                              "no JDK on this FilterServer")


async def refused(classes: FilterClassManager, group: str, class_name: str, source: bytes) -> RegistrationRefused:
    with pytest.raises(RegistrationRefused) as info:
        await classes.register(group, "T", class_name, zlib.crc32(source) & 0x7FFFFFFF, source)
    return info.value


async def test_uploads_are_off_by_default_and_deployed_classes_serve_any_group(work_dir):
    classes = manager(work_dir)
    assert list(classes.deployed) == ["python:EvenBody"]
    try:
        off = await refused(classes, "G", "python:Mine", b"class Mine:\n    pass\n")
        assert off.code == ResponseCode.NO_PERMISSION and "filterClassUploadEnable=false" in off.remark
        # A deployed class is named, whatever source comes with it.
        await classes.register("G", "T", "python:EvenBody", 0, b"anything")
        registered = classes.find("G", "T")
        assert registered is not None and registered.deployed
        reply = await registered.worker.match(
            consumer_group="G", topic="T", queue_id=0, queue_offset=0, commit_log_offset=0, sys_flag=0,
            born_timestamp=0, store_timestamp=0, reconsume_times=0, flag=0, properties="", body=b"ab")
        assert reply.accepted
        # The same registration again (every heartbeat) keeps the running worker.
        await classes.register("G", "T", "python:EvenBody", 0, b"anything")
        assert classes.find("G", "T") is registered and registered.worker.starts == 1
    finally:
        classes.close()


async def test_uploads_only_from_allow_listed_groups(work_dir):
    classes = manager(work_dir, upload_enable=True, upload_groups=frozenset({"G_OK"}))
    try:
        source = b"class Mine:\n    def match(self, message):\n        return True\n"
        other = await refused(classes, "G_OTHER", "python:Mine", source)
        assert other.code == ResponseCode.NO_PERMISSION
        assert other.remark.startswith("consumer group G_OTHER may not upload filter classes")
        broken = await refused(classes, "G_OK", "python:Mine", b"class Other:\n    pass\n")
        assert broken.code == ResponseCode.SYSTEM_ERROR and "no class Mine" in broken.remark
        path = await refused(classes, "G_OK", "python:../../etc/passwd", source)
        assert "is not a filter class name" in path.remark
        java = await refused(classes, "G_OK", "com.example.Filter", b"class Filter {}")
        assert java.remark == "cannot register com.example.Filter: no JDK on this FilterServer"
        await classes.register("G_OK", "T", "python:Mine", zlib.crc32(source) & 0x7FFFFFFF, source)
        assert classes.find("G_OK", "T") is not None
    finally:
        classes.close()


def test_the_filtersrv_command_line_is_fixed_at_start_up():
    loaded = build_config({"filterServerNums": "2", "filterClassUploadEnable": "true",
                           "filterClassUploadGroups": "g1;g2", "filterClassDir": "/srv/filters",
                           "brokerIP1": "10.0.0.5", "bindAddress": "0.0.0.0"})
    fsm = FilterServerManager(loaded.broker, lambda: None)
    slot = fsm.slots[0]
    slot.port = 4321
    argv = fsm.argv(10911, slot)
    # a runtime change of the config object reaches no command line
    loaded.broker.filter_class_dir = "/tmp/evil"
    loaded.broker.filter_class_upload_groups = "evil"
    assert fsm.argv(10911, slot) == argv
    assert argv[:8] == [sys.executable, "-m", "pyrmq", "filtersrv", "--broker", "127.0.0.1:10911", "--port", "4321"]
    assert argv[argv.index("--class-dir") + 1] == "/srv/filters"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--upload-group"] == ["g1", "g2"]
    assert "--upload-enable" in argv and argv[argv.index("--host") + 1] == "10.0.0.5"
    assert len(fsm.slots) == 2


async def test_registrations_are_dropped_when_silent_or_closed():
    changes = []
    loaded = build_config({"filterServerNums": "1", "brokerName": "broker-x"})
    fsm = FilterServerManager(loaded.broker, lambda: changes.append(1))
    channels = []
    for _ in range(2):
        a, b = trio.testing.memory_stream_pair()
        channel = Channel(PeerStream(a, "127.0.0.1:1"))
        channels.append(channel)
    for addr, channel in zip(("10.0.0.1:1", "10.0.0.1:2"), channels):
        response = fsm.process_register(channel, make_request(RequestCode.REGISTER_FILTER_SERVER,
                                                              {"filterServerAddr": addr}))
        assert response.code == 0 and response.ext_fields == {"brokerName": "broker-x", "brokerId": "0"}
    assert fsm.addresses() == ["10.0.0.1:1", "10.0.0.1:2"] and len(changes) == 2
    # only from the broker's own host: routes send class sources and pulls to the listed servers
    a, _ = trio.testing.memory_stream_pair()
    stranger = fsm.process_register(Channel(PeerStream(a, "10.9.9.9:4000")), make_request(
        RequestCode.REGISTER_FILTER_SERVER, {"filterServerAddr": "10.9.9.9:4001"}))
    assert stranger.code == ResponseCode.NO_PERMISSION and "10.9.9.9" in stranger.remark
    assert fsm.addresses() == ["10.0.0.1:1", "10.0.0.1:2"]
    channels[0].close()
    assert fsm.addresses() == ["10.0.0.1:2"] and len(changes) == 3
    registered = fsm.table["10.0.0.1:2"].last_update
    assert fsm.drop_idle(registered + IDLE_DROP_S - 1) == []
    assert fsm.drop_idle(registered + IDLE_DROP_S + 1) == ["10.0.0.1:2"]
    assert fsm.addresses() == [] and channels[1].closed


def test_no_class_filter_key_changes_at_runtime():
    from pyrmq.broker.runtime_config import RUNTIME_KEYS
    keys = {"filterServerNums", "filterClassUploadEnable", "filterClassUploadGroups", "filterClassDir",
            "filterJavaClasspath", "filterMatchTimeoutMillis", "filterWorkerCpuSeconds", "filterWorkerMemoryMb"}
    assert not keys & RUNTIME_KEYS   # UPDATE_BROKER_CONFIG refuses them (16)

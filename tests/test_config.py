"""broker.conf: Apache keys and meanings; unknown keys warn, bad values stop the start clearly."""

from __future__ import annotations

import logging
import re
import subprocess
import sys

import pytest

from pyrmq.broker.config import BrokerRole, ConfigError, as_properties, build_config, parse_properties
from pyrmq.store.message_store import FlushDiskType


def test_apache_keys_map_to_broker_and_store_settings(tmp_path):
    loaded = build_config(parse_properties(f"""
# comment
brokerClusterName = C1
brokerName=broker-b
brokerId=0
namesrvAddr=10.0.0.1:9876;10.0.0.2:9876
listenPort=20911
brokerIP1=10.0.0.5
storePathRootDir={tmp_path}/s
flushDiskType=SYNC_FLUSH
brokerRole=SYNC_MASTER
mappedFileSizeCommitLog=1048576
longPollingEnable=false
"""))
    broker, store = loaded.broker, loaded.store
    assert (broker.broker_cluster_name, broker.broker_name, broker.listen_port) == ("C1", "broker-b", 20911)
    assert broker.namesrv_addrs == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert broker.broker_addr == "10.0.0.5:20911"
    assert broker.ha_listen_port == 20912 and broker.broker_ip2 == "10.0.0.5"
    assert broker.broker_role is BrokerRole.SYNC_MASTER and broker.long_polling_enable is False
    assert store.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert store.mapped_file_size_commit_log == 1048576
    assert store.store_path_root_dir == f"{tmp_path}/s"
    props = as_properties(loaded)
    assert props["brokerIP1"] == "10.0.0.5" and props["flushDiskType"] == "SYNC_FLUSH"


def test_unknown_key_is_a_warning(caplog, tmp_path):
    caplog.set_level(logging.WARNING)
    build_config({"storePathRootDir": str(tmp_path), "someFutureKey": "1"})
    assert "unknown key someFutureKey ignored" in caplog.text


def test_clean_and_flush_keys_are_store_settings(tmp_path):
    store = build_config({
        "storePathRootDir": str(tmp_path), "deleteWhen": "04;16", "fileReservedTime": "48",
        "diskMaxUsedSpaceRatio": "80", "diskSpaceWarningLevelRatio": "0.95", "diskSpaceCleanForciblyRatio": "88",
        "cleanResourceInterval": "5000", "cleanFilesFirstDelayMs": "2000", "deleteCommitLogFilesInterval": "50",
        "deleteConsumeQueueFilesInterval": "60", "destroyMapedFileIntervalForcibly": "1000",
        "redeleteHangedFileInterval": "2000", "deleteFileBatchMax": "3", "cleanFileForciblyEnable": "false",
        "deleteOnlyConsumed": "true", "flushCommitLogLeastPages": "8", "flushCommitLogThoroughInterval": "20000",
        "flushConsumeQueueLeastPages": "3", "flushConsumeQueueThoroughInterval": "30000",
    }).store
    assert (store.delete_when, store.file_reserved_time, store.disk_max_used_space_ratio) == ("04;16", 48, 80)
    assert (store.disk_space_warning_level_ratio, store.disk_space_clean_forcibly_ratio) == (0.95, 88)
    assert (store.clean_resource_interval, store.clean_files_first_delay_ms, store.delete_commit_log_files_interval,
            store.delete_consume_queue_files_interval) == (5000, 2000, 50, 60)
    assert (store.destroy_maped_file_interval_forcibly, store.redelete_hanged_file_interval,
            store.delete_file_batch_max) == (1000, 2000, 3)
    assert store.clean_file_forcibly_enable is False and store.delete_only_consumed is True
    assert (store.flush_commit_log_least_pages, store.flush_commit_log_thorough_interval,
            store.flush_consume_queue_least_pages, store.flush_consume_queue_thorough_interval) == (8, 20000, 3, 30000)


def test_store_keys_without_effect_warn(caplog, tmp_path):
    caplog.set_level(logging.WARNING)
    build_config({"storePathRootDir": str(tmp_path), "transientStorePoolEnable": "true",
                  "commitIntervalCommitLog": "200", "deleteWhen": "04", "fileReservedTime": "1"})
    assert "transientStorePoolEnable=true has no effect in pyrmq" in caplog.text
    assert "commitIntervalCommitLog=200 has no effect in pyrmq" in caplog.text
    assert "deleteWhen" not in caplog.text and "fileReservedTime" not in caplog.text


@pytest.mark.parametrize("key,value,message", [
    ("deleteWhen", "04;25", "deleteWhen='04;25' must be hours of the day"),
    ("cleanFilesFirstDelayMs", "-1", "cleanFilesFirstDelayMs must not be negative"),
    ("diskSpaceWarningLevelRatio", "high", "bad value 'high' for diskSpaceWarningLevelRatio"),
    ("listenPort", "abc", "bad value 'abc' for listenPort"),
    ("flushDiskType", "SOMETIMES", "one of ASYNC_FLUSH, SYNC_FLUSH"),
    # Apache's Enum.valueOf is case-sensitive (and Apache then keeps the default without a word)
    ("flushDiskType", "sync_flush", "bad value 'sync_flush' for flushDiskType (one of ASYNC_FLUSH, SYNC_FLUSH): "
                                    "not a FlushDiskType (names are case-sensitive)"),
    ("brokerRole", "Slave", "not a BrokerRole (names are case-sensitive)"),
    ("autoCreateTopicEnable", "yes", "expected true or false"),
    ("listenPort", "70000", "listenPort=70000 is not a TCP port"),
    ("mappedFileSizeConsumeQueue", "1001", "multiple of 20"),
    ("brokerName", "a/b", "brokerName 'a/b' has characters outside"),
    ("messageDelayLevel", "1s 5x", "bad delay level '5x'"),
])
def test_bad_values_name_the_key(tmp_path, key, value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_config({"storePathRootDir": str(tmp_path), key: value})


def test_cli_exits_2_with_the_message(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=notaport\n")
    result = subprocess.run([sys.executable, "-m", "pyrmq", "broker", "-c", str(conf)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "bad value 'notaport' for listenPort" in result.stderr


def test_every_bad_value_is_reported_at_once(tmp_path):
    """Conversion errors, range checks and TLS keys together, one line each, in the file's order."""
    conf = tmp_path / "broker.conf"
    conf.write_text("flushDiskType=sync_flush\nhaListenPort=99999\nlistenPort=abc\ndeleteWhen=25\n"
                    f"storePathRootDir={tmp_path}\ntls.server.mode=sometimes\n")
    result = subprocess.run([sys.executable, "-m", "pyrmq", "broker", "-c", str(conf)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "pyrmq: broker.conf: bad value 'sync_flush' for flushDiskType (one of ASYNC_FLUSH, SYNC_FLUSH): "
        "not a FlushDiskType (names are case-sensitive)",
        "pyrmq: broker.conf: bad value 'abc' for listenPort: invalid literal for int() with base 10: 'abc'",
        "pyrmq: broker.conf: haListenPort=99999 is not a TCP port",
        "pyrmq: broker.conf: deleteWhen='25' must be hours of the day (0-23) separated by ';'",
        "pyrmq: broker.conf: tls.server.mode='sometimes': expected disabled | permissive | enforcing",
    ]


def test_connection_deadlines_reach_both_broker_ports_and_the_namesrv(tmp_path):
    from pyrmq.broker.controller import BrokerController
    from pyrmq.cli import embedded_namesrv_config
    from pyrmq.namesrv.controller import NamesrvController

    loaded = build_config({"storePathRootDir": str(tmp_path), "serverChannelMaxIdleTimeSeconds": "45",
                           "partialFrameTimeoutSeconds": "7"})
    broker = BrokerController(loaded)
    for server in (broker.server, broker.fast_server):
        assert (server.idle_timeout, server.frame_timeout) == (45, 7)
    assert as_properties(loaded)["serverChannelMaxIdleTimeSeconds"] == "45"
    namesrv = NamesrvController(embedded_namesrv_config(loaded, 0))    # pyrmq standalone
    assert (namesrv.server.idle_timeout, namesrv.server.frame_timeout) == (45, 7)

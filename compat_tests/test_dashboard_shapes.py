"""rocketmq-dashboard's admin calls get the same answers from pyrmq as from Apache.

The dashboard is not on Maven Central, so its calls are made the way its services make them:
the Java scenario ``dashboard`` (compat_tests/java/.../Dashboard.java) sets a scene (a topic of 4
queues, 8 messages with keys, an online producer group and a consumer group that consumed them
all) and then calls, through DefaultMQAdminExt 4.9.8, every MQAdminExt method the dashboard uses
that a single 4.9 broker serves (its ACL 2.0 user calls are 5.3-only): cluster info, runtime
stats, topic list / route / stats / config, subscription groups, consume stats, connections,
running info, broker config, stats data, consume stats in broker, time spans, query / view /
track / consume-directly of messages, reset by timestamp, NameServer config. Each answer comes
back as the JSON fastjson makes of it.

Each answer is compared with ``dashboard_reference.json``, recorded from Apache 4.9.7, on pyrmq
and on Apache alike (the Apache run keeps the reference honest; ``PYRMQ_RECORD_DASHBOARD=1`` on the
Apache run rewrites it):

* the **shape** of every answer (members and their JSON types, recursively; list elements as a
  set of shapes; the run's addresses, names and store directory replaced by placeholders) is
  Apache's;
* the **values** of the answers that do not depend on timing are Apache's (times, rates and
  durations masked);
* where pyrmq answers more, by design: GET_BROKER_RUNTIME_INFO has every key Apache's has (and
  pyrmq's own: HA, transactions, alarms); the broker and NameServer configurations are tables of
  strings with the keys every operator looks for (pyrmq lists its own settings, not Apache's
  thread pools).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pyrmq.codec import fastjson

pytestmark = pytest.mark.compat

REFERENCE = Path(__file__).with_name("dashboard_reference.json")
# answers whose values are compared too (after masking what depends on timing)
VALUE_CALLS = ("queryTopicConsumeByWho", "examineSubscriptionGroupConfig", "examineTopicRouteInfo",
               "resetOffsetByTimestamp", "messageTrackDetail", "consumeMessageDirectly", "examineTopicStats",
               "examineConsumeStats", "examineConsumerConnectionInfo", "examineProducerConnectionInfo",
               "queryMessage", "viewMessageByUniqueKey", "viewMessageByOffsetId")
TIMING_MEMBERS = frozenset({
    "lastUpdateTimestamp", "lastTimestamp", "consumeTps", "spentTimeMills", "bornTimestamp", "storeTimestamp",
    "indexLastUpdateTimestamp", "indexLastUpdatePhyoffset", "version", "clientAddr", "clientId", "msgId",
    "offsetMsgId", "commitLogOffset", "bornHost", "storeHost", "bodyCRC", "storeSize", "sysFlag", "UNIQ_KEY",
    "CONSUME_START_TIME", "MIN_OFFSET", "MAX_OFFSET", "transactionId", "preparedTransactionOffset",
    "bornHostBytes", "storeHostBytes", "bornHostNameString", "bornHostString", "queueOffset", "queueId",
    "subVersion"})
# the keys of getBrokerConfig / getNameServerConfig a dashboard user reads first
BROKER_CONFIG_KEYS = ("brokerClusterName", "brokerName", "brokerId", "brokerIP1", "brokerIP2", "brokerRole",
                      "flushDiskType", "listenPort", "haListenPort", "namesrvAddr", "storePathRootDir",
                      "storePathCommitLog", "mappedFileSizeCommitLog", "fileReservedTime", "deleteWhen",
                      "autoCreateTopicEnable", "autoCreateSubscriptionGroup", "defaultTopicQueueNums",
                      "brokerPermission", "aclEnable", "checkCRCOnRecover", "bitMapLengthConsumeQueueExt")
NAMESRV_CONFIG_KEYS = ("listenPort", "kvConfigPath", "orderMessageEnable")


def _normalize(value: Any) -> Any:
    """fastjson's object keys (Map<MessageQueue, ...>) as sorted JSON text."""
    if isinstance(value, dict):
        return {(json.dumps(k.as_dict(), sort_keys=True) if isinstance(k, fastjson.ObjectKey) else str(k)):
                _normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


def answers(run, context: dict[str, str]) -> dict[str, Any]:
    """Each call's answer with the run's own names replaced by placeholders."""
    out: dict[str, Any] = {}
    for call in run.of("call"):
        if "json" not in call:
            out[call["name"]] = {"<error>": call["code"]}
            continue
        text = call["json"]
        for real, placeholder in sorted(context.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(real, placeholder)
        out[call["name"]] = _normalize(fastjson.loads(text))
    # The consumer takes its %RETRY% queue, pulls there and commits that offset once its first pull
    # has waited out the 15 s long poll: whether that happened before a call is timing, not behaviour.
    return {name: _without_retry_queues(answer) for name, answer in out.items()}


def _without_retry_queues(value: Any) -> Any:
    """Drops the entries keyed by a %RETRY% message queue (offset tables, a client's mqTable),
    and a ConsumeStats that held nothing else."""
    if isinstance(value, dict):
        return {k: _without_retry_queues(v) for k, v in value.items() if '"topic": "%RETRY%' not in k}
    if isinstance(value, list):
        kept = [_without_retry_queues(v) for v in value]
        return [v for v, original in zip(kept, value)
                if not (isinstance(original, dict) and original.get("offsetTable") and not v.get("offsetTable"))]
    return value


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return ["list", sorted({json.dumps(shape(v), sort_keys=True) for v in value})]
    return type(value).__name__


def masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: type(v).__name__ if k in TIMING_MEMBERS else masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((masked(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def reference_of(got: dict[str, Any]) -> dict[str, Any]:
    return {"shapes": {name: shape(answer) for name, answer in got.items()},
            "values": {name: masked(got[name]) for name in VALUE_CALLS if name in got},
            "runtimeKeys": sorted(got["fetchBrokerRuntimeStats"]["table"])}


@pytest.mark.compat_exclude("pyrmq", "client5")      # the 4.9.8 admin, as the 4.x dashboard
@pytest.mark.compat_exclude("apache", "client5")
@pytest.mark.compat_exclude("pyrmq-split", "client5")
def test_dashboard_admin_calls_match_apache(server_factory, java_client, names, server_kind):
    # A server of this test alone: the list answers (topics, groups, consume stats in the broker)
    # must hold nothing of other tests.
    server = server_factory()
    run = java_client.run("dashboard", namesrv=server.namesrv_addr, topic=names.topic, group=names.group)
    context = {server.broker_addr: "<ADDR>", server.namesrv_addr: "<NAMESRV>", names.topic: "<TOPIC>",
               names.group: "<GROUP>", str(server.config.workdir): "<ROOT>"}
    got = answers(run, context)
    if server_kind == "apache" and os.environ.get("PYRMQ_RECORD_DASHBOARD") == "1":
        REFERENCE.write_text(json.dumps(reference_of(got), indent=1, sort_keys=True) + "\n")
    reference = json.loads(REFERENCE.read_text())

    free_form = {"fetchBrokerRuntimeStats", "getBrokerConfig", "getNameServerConfig"}
    assert sorted(got) == sorted(reference["shapes"]), "calls made"
    for name, expected in reference["shapes"].items():
        if name not in free_form:
            assert shape(got[name]) == expected, name
    for name, expected in reference["values"].items():
        assert masked(got[name]) == expected, name

    runtime = got["fetchBrokerRuntimeStats"]["table"]
    assert set(reference["runtimeKeys"]) <= set(runtime), set(reference["runtimeKeys"]) - set(runtime)
    assert all(isinstance(v, str) for v in runtime.values())
    broker_config = got["getBrokerConfig"]
    assert all(isinstance(v, str) for v in broker_config.values())
    assert set(BROKER_CONFIG_KEYS) <= set(broker_config), set(BROKER_CONFIG_KEYS) - set(broker_config)
    assert broker_config["storePathCommitLog"].startswith("<ROOT>")
    (namesrv_config,) = got["getNameServerConfig"].values()
    assert set(NAMESRV_CONFIG_KEYS) <= set(namesrv_config), set(NAMESRV_CONFIG_KEYS) - set(namesrv_config)

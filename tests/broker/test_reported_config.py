"""GET_BROKER_CONFIG (26, mqadmin getBrokerConfig / exportConfigs) names Apache 4.9.7's key set
(issue 13 point 1)."""

from __future__ import annotations

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.java_properties import parse_properties
from pyrmq.codec.remoting import make_request


async def test_broker_config_has_apaches_key_set(cluster):
    resp = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.GET_BROKER_CONFIG))
    props = parse_properties(resp.body.decode())
    # keys exportConfigs copies (a missing one is a NullPointerException in the tool)
    for key in ("brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
                "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable",
                "traceOn", "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup"):
        assert key in props, key
    assert props["checkCRCOnRecover"] == "true" and "checkCrcOnRecover" not in props
    assert props["bitMapLengthConsumeQueueExt"] == "112"   # the bloom filter's m, as Apache sets it
    assert props["storePathCommitLog"].endswith("/commitlog")
    assert props["serverWorkerThreads"] == "8" and props["msgTraceTopicName"] == "RMQ_SYS_TRACE_TOPIC"

"""GET_BROKER_CONFIG (26): the broker's settings as Apache 4.9.7 reports them.

mqadmin getBrokerConfig and exportConfigs, and dashboards, read this text as Apache writes it: every
field of BrokerConfig, NettyServerConfig, NettyClientConfig and MessageStoreConfig. exportConfigs
even fails (a NullPointerException in the tool) when one of the keys it copies is missing. So the
answer names Apache's whole key set: pyrmq's own settings under Apache's names, plus
``APACHE_ONLY_DEFAULTS`` for the settings pyrmq has no use for (thread pools, Netty buffers,
commercial counters) -- the value of broker.conf when it names one, else Apache's default. pyrmq's
own keys (timers, filter servers, ACL file, ...) are reported as well.
"""

from __future__ import annotations

import os

from pyrmq.broker.config import LoadedConfig, as_properties
from pyrmq.filter.bloom import BloomFilter

__all__ = ["APACHE_ONLY_DEFAULTS", "reported_properties"]

# Apache sizes several pools by the machine's processors (Runtime.availableProcessors()).
_PROCESSORS = os.cpu_count() or 1

# Settings of Apache 4.9.7's broker that pyrmq accepts in broker.conf but does not use, with
# Apache's default values.
APACHE_ONLY_DEFAULTS: dict[str, str] = {
    "adminBrokerThreadPoolNums": "16",
    "brokerFastFailureEnable": "true",
    "channelNotActiveInterval": "60000",
    "clientAsyncSemaphoreValue": "65535",
    "clientCallbackExecutorThreads": str(_PROCESSORS),
    "clientChannelMaxIdleTimeSeconds": "120",
    "clientCloseSocketIfTimeout": "true",
    "clientManageThreadPoolNums": "32",
    "clientManagerThreadPoolQueueCapacity": "1000000",
    "clientOnewaySemaphoreValue": "65535",
    "clientPooledByteBufAllocatorEnable": "false",
    "clientSocketRcvBufSize": "0",
    "clientSocketSndBufSize": "0",
    "clientWorkerThreads": "4",
    "commercialBaseCount": "1",
    "commercialBigCount": "1",
    "commercialEnable": "true",
    "commercialTimerCount": "1",
    "commercialTransCount": "1",
    "commitCommitLogLeastPages": "4",
    "commitCommitLogThoroughInterval": "200",
    "commitIntervalCommitLog": "200",
    "compressedRegister": "false",
    "connectTimeoutMillis": "3000",
    "consumerFallbehindThreshold": "17179869184",
    "consumerManageThreadPoolNums": "32",
    "consumerManagerThreadPoolQueueCapacity": "1000000",
    "debugLockEnable": "false",
    "disableConsumeIfConsumerReadSlowly": "false",
    "diskFallRecorded": "true",
    "duplicationEnable": "false",
    "enableDLegerCommitLog": "false",
    "enableDetailStat": "true",
    "enableLmq": "false",
    "enableMultiDispatch": "false",
    "enableScheduleAsyncDeliver": "false",
    "enableScheduleMessageStats": "true",
    "endTransactionPoolQueueCapacity": "100000",
    "endTransactionThreadPoolNums": str(max(8 + _PROCESSORS * 2, min(_PROCESSORS, 4) * 4)),
    "fastFailIfNoBufferInStorePool": "false",
    "fetchNamesrvAddrByAddressServer": "false",
    "flushCommitLogTimed": "true",
    "flushConsumerOffsetHistoryInterval": "60000",
    "flushDelayOffsetInterval": "10000",
    "flushLeastPagesWhenWarmMapedFile": "4096",
    "forceRegister": "true",
    "heartbeatThreadPoolNums": str(min(32, _PROCESSORS)),
    "heartbeatThreadPoolQueueCapacity": "50000",
    "highSpeedMode": "false",
    "isEnableBatchPush": "false",
    "isolateLogEnable": "false",
    "maxDelayTime": "40",
    "maxLmqConsumeQueueNum": "20000",
    "messageIndexSafe": "false",
    "messageStorePlugIn": "",
    "msgTraceTopicName": "RMQ_SYS_TRACE_TOPIC",
    "osPageCacheBusyTimeOutMills": "1000",
    "processReplyMessageThreadPoolNums": str(16 + _PROCESSORS * 2),
    "pullMessageThreadPoolNums": str(16 + _PROCESSORS * 2),
    "pullThreadPoolQueueCapacity": "100000",
    "putMessageFutureThreadPoolNums": str(min(_PROCESSORS, 4)),
    "putMsgIndexHightWater": "600000",
    "putThreadPoolQueueCapacity": "10000",
    "queryMessageThreadPoolNums": str(8 + _PROCESSORS),
    "queryThreadPoolQueueCapacity": "20000",
    "registerBrokerTimeoutMills": "6000",
    "replyThreadPoolQueueCapacity": "10000",
    "scheduleAsyncDeliverMaxPendingLimit": "2000",
    "scheduleAsyncDeliverMaxResendNum2Blocked": "3",
    "sendMessageThreadPoolNums": str(min(_PROCESSORS, 4)),
    "sendThreadPoolQueueCapacity": "10000",
    "serverAsyncSemaphoreValue": "64",
    "serverCallbackExecutorThreads": "0",
    "serverOnewaySemaphoreValue": "256",
    "serverPooledByteBufAllocatorEnable": "true",
    "serverSelectorThreads": "3",
    "serverSocketBacklog": "1024",
    "serverSocketRcvBufSize": "0",
    "serverSocketSndBufSize": "0",
    "serverWorkerThreads": "8",
    "startAcceptSendRequestTimeStamp": "0",
    "traceTopicEnable": "false",
    "transferMsgByHeap": "true",
    "transientStorePoolEnable": "false",
    "transientStorePoolSize": "5",
    "useEpollNativeSelector": "false",
    "useReentrantLockWhenPutMessage": "true",
    "waitTimeMillsInHeartbeatQueue": "31000",
    "waitTimeMillsInPullQueue": "5000",
    "waitTimeMillsInSendQueue": "200",
    "waitTimeMillsInTransactionQueue": "3000",
    "warmMapedFileEnable": "false",
    "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0",
}
# pyrmq fields whose Apache name does not follow from the snake_case one.
_APACHE_SPELLING = {"checkCrcOnRecover": "checkCRCOnRecover"}


def reported_properties(loaded: LoadedConfig) -> dict[str, str]:
    """Every setting under Apache's names, Apache's key set included (see the module docstring)."""
    result = dict(APACHE_ONLY_DEFAULTS)
    result.update({k: v for k, v in loaded.apache_only.items() if k in APACHE_ONLY_DEFAULTS or k == "rocketmqHome"})
    for key, value in as_properties(loaded).items():
        result[_APACHE_SPELLING.get(key, key)] = value
    result.setdefault("rocketmqHome", os.environ.get("ROCKETMQ_HOME", ""))
    result["storePathCommitLog"] = loaded.store.commit_log_dir()   # Apache reports the path it uses
    result["useTLS"] = str(loaded.tls.use_tls).lower()
    # Apache sizes the consume queue ext bitmap as the bloom filter of the SQL92 bitmaps.
    result["bitMapLengthConsumeQueueExt"] = str(BloomFilter.from_config(
        loaded.broker.max_error_rate_of_bloom_filter, loaded.broker.expect_consumer_num_use_filter).m)
    return result

"""mqadmin (rocketmq-tools 4.9.8 and 5.3.3) against pyrmq and against Apache RocketMQ 4.9.7, output by output.

Both tools versions run the scenario (``TOOLS``: the client4 and client5 Java builds); the 5.x tools
against a 4.9 broker is what users of old clusters run. Test ids start with the tools version.

One scenario, ``STEPS``, runs on a fresh server of each kind in one JVM (``MqAdmin.java``: every
command line through ``MQAdminStartup.main0`` as the mqadmin script runs it, its stdout and stderr
captured apart). It creates what the query commands need first: a topic of 4 queues, a producer
group that stays online and sends 8 messages (message i to queue i % 4, tags TagA/TagB, key k-i),
a consumer group that stays online and has consumed and committed them, a second subscription
group and a second topic for the delete commands. Each subcommand line is then one test: the
pyrmq output must equal Apache's once the values that must differ are masked (``mask``):

- the NameServer and broker addresses, any other IPv4 address (the client's, a container's);
- message ids: those of the scenario's own sends become ``<msgId:i>`` / ``<offsetMsgId:i>`` (so a
  command showing the wrong message still fails), ids of messages mqadmin sends itself ``<id>``;
- client ids (``ip@instance``), wall-clock times, dates and millisecond timestamps, round-trip
  times, the temporary directories of the run, and the broker settings that name this machine
  (paths, ports, host names).

Anything else is compared as printed, line by line, exceptions included (mqadmin prints a failed
command's stack trace; its frames are dropped, its messages kept).

Subcommands compared (50 subcommands in 70 command lines), in the scenario's order: updateTopic
(cluster, broker, the group's retry topic), updateSubGroup (cluster, broker), topicList (plain, -c), topicRoute (a topic, an
unknown topic), topicStatus, topicClusterList, clusterList, getBrokerConfig (-b, -c),
updateBrokerConfig, getNamesrvConfig, updateNamesrvConfig, queryMsgById, queryMsgByKey,
queryMsgByUniqueKey, queryMsgByOffset, printMsg, printMsgByQueue, queryCq, consumerProgress (a
group, every group, a cloned group), consumerConnection, consumerStatus, getConsumerStatus, getConsumerConfig,
producerConnection, producer, brokerStatus (its keys: the figures are measured at that instant),
brokerConsumeStats, statsAll (its rows: TPS and 24-hour counts depend on when the 10 s samples
fell), sendMsgStatus, checkMsgSendRT, sendMessage (two queues),
consumeMessage, allocateMQ, updateOrderConf (put, get, delete), updateKvConfig, deleteKvConfig,
cloneGroupOffset, resetOffsetByTime, skipAccumulatedMessage, wipeWritePerm, addWritePerm,
updateTopicPerm (read-only, back), cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic,
deleteSubGroup, deleteTopic, exportMetadata and exportConfigs (with the files they write),
queryMsgTraceById (no trace topic: the error); then the errors of an unknown consumer group
(consumerConnection, consumerProgress, deleteSubGroup), an unknown producer group
(producerConnection), a key no message has (queryMsgByKey), a message id naming no broker
(queryMsgById), a queue that does not exist and an index past a queue's end (queryCq).

mqadmin 5.3.3 also runs the 5.x subcommands that make sense against one 4.9-style broker (``[5]``
lines of ``STEPS``): updateTopicList and updateSubGroupList (-b, -c; batch files from ``INPUTS``),
setConsumeMode (POP), haStatus, getBrokerEpoch, resetMasterFlushOffset, setCommitLogReadAheadMode,
getColdDataFlowCtrInfo, updateColdDataFlowCtrGroupConfig, removeColdDataFlowCtrGroupConfig,
exportPopRecord, checkRocksdbCqWriteProgress. Apache 4.9.7 knows none of their request codes, and
pyrmq (4.9.8) answers as it does: "request type N not supported".

One deliberate difference under the 5.3 tools: they ask GET_TOPIC_CONFIG (351) before topicStatus,
consumerProgress and cloneGroupOffset and in the message track of queryMsgByUniqueKey and
queryMsgByOffset. Apache 4.9.7 fails those ("request type 351 not supported", tracks UNKNOWN);
pyrmq answers 351 as Apache 5.3 does (rocketmq-dashboard 2.x needs it). There the test asserts
Apache's failure and pyrmq's success (no failure printed; the tracks CONSUMED, as both brokers
print them to the 4.9.8 tools) -- ``ASKS_GET_TOPIC_CONFIG``, ``TRACKS_MESSAGES``.

Where Apache's own output would vary from run to run, the scenario pins it: sends name their
queue (the producer's default selector starts at a random queue); the group's retry topic is
created before its consumer starts, which commits once that queue is assigned too (else the
consumer learns the retry route only at its next 30 s poll, and consumerProgress shows that row or
not); and two outputs are
compared as sets of lines, getBrokerConfig and getNamesrvConfig, which print a
java.util.Properties in its hash table's order (pyrmq's own settings, ``PYRMQ_ONLY_KEYS``, are
left out of pyrmq's). In consumerProgress (every group) and producer, the rows of mqadmin's own
short-lived clients (TOOLS_CONSUMER, CLIENT_INNER_PRODUCER) become one marker each: Apache may
list one of them again after it left, when the client's last heartbeat overtakes its
unregistration (``_tools_own_clients``). clusterList's version and load figures come from GET_BROKER_RUNTIME_INFO
(pyrmq reports V4_9_8, Apache V4_9_7) and are masked with the round-trip times.

Left out:

- exportMetrics: it writes the broker's counters of the moment to a file (nothing to compare
  that does not depend on timing; brokerStatus and statsAll cover the same calls).
- clusterRT, startMonitoring: they loop until killed.
- updateAclConfig, deleteAclConfig, clusterAclConfigVersion, updateGlobalWhiteAddr: ACL is off on
  these brokers, and Apache 4.9.7 then answers with the text of its own NullPointerException
  (codes 209-211) or not at all (clusterAclConfigVersion times out); compat_tests/test_acl.py
  compares them with ACL on (its ``ACL_ADMIN_STEPS``, masked by this module's ``mask_event``).
- 5.3-only: the ACL 2.0 user and acl subcommands (ACL 2.0 is a 5.x broker feature, which neither Apache 4.9.7 nor pyrmq has), the controller
  subcommands (no controller), addBroker/removeBroker (a broker container), updateStaticTopic and
  remappingStaticTopic (static topics: logic queues a 4.9 broker does not have), and the local
  file tools (dumpCompactionLog, exportMetadataInRocksDB, rocksDBConfigToJson).
- updateBrokerConfig of a path key (brokerConfigPath, rocketmqHome): Apache 4.9.7 applies it, pyrmq
  refuses it (NO_PERMISSION, "Can not update config in black list.", as Apache 4.9.8 does): the
  deliberate difference of broker/runtime_config.py, not compared.

Adding a subcommand is one line in ``STEPS``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from compat_tests import build
from compat_tests.checks import seed_group_offset
from compat_tests.conftest import DEFAULT_SERVER_KINDS, SERVER_KINDS, _built, _selected, _start_server
from compat_tests.javaclient import JavaClient

pytestmark = pytest.mark.compat

KINDS = ("apache", "pyrmq")
DEADLINE_MS = 150_000
# What every Apache broker of the harness runs with (servers.apache_broker_extras), given to both
# kinds here so that getBrokerConfig shows the same values.
BROKER_EXTRA = {"waitTimeMillsInSendQueue": "5000", "osPageCacheBusyTimeOutMills": "5000",
                "diskMaxUsedSpaceRatio": "95"}
# The files of the export subcommands, in their -f directory.
EXPORTS = {"exportMetadata": "metadata.json", "exportConfigs": "configs.json"}
# The files the batch subcommands read (updateTopicList, updateSubGroupList), in {input}.
INPUTS = {"topics.json": '[{"topicName": "MqTopicList", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}]',
          "groups.json": '[{"groupName": "MqGroupList", "retryQueueNums": 1, "retryMaxTimes": 5}]'}
# Settings that name this machine or this run (getBrokerConfig, getNamesrvConfig): their values
# are masked.
MACHINE_KEYS = frozenset({"brokerIP1", "brokerIP2", "namesrvAddr", "listenPort", "haListenPort", "rocketmqHome",
                          "storePathRootDir", "storePathCommitLog", "kvConfigPath", "configStorePath",
                          "brokerConfigPath"})
# pyrmq's own settings (timers, filter servers, ACL file, alarms, frame limits, the NameServer's write
# allow-list), which Apache 4.9.7 does not have: left out of pyrmq's output before comparing.
PYRMQ_ONLY_KEYS = frozenset({
    "accumulationAlarmInterval", "aclFileWatchIntervalMs", "aclPlainFile", "allowRecallWhenBrokerNotWriteable",
    "bindAddress", "channelExpiredTimeout", "cleanFilesFirstDelayMs", "deleteFileBatchMax", "deleteOnlyConsumed",
    "diskSpaceCleanForciblyRatio", "diskSpaceWarningLevelRatio", "dlqSizeAlarmThreshold", "enableShutdownGracefully",
    "fastPortEnable", "filterClassDir", "filterClassUploadEnable", "filterClassUploadGroups", "filterJavaClasspath",
    "filterMatchTimeoutMillis", "filterWorkerCpuSeconds", "filterWorkerMemoryMb", "groupLagAlarmThreshold",
    "haListenAddress", "haMasterAddress", "mappedFileSizeTimerLog", "maxFrameBytes", "partialFrameTimeoutSeconds",
    "recallMessageEnable", "serverChannelWriteTimeoutSeconds", "shutdownWaitTimeSeconds", "timerFlushIntervalMs",
    "timerMaxDelaySec", "timerPrecisionMs", "timerWheelEnable", "writeAllowedAddresses", "metricsPort",
    "metricsBindAddress", "consolePort", "consoleBindAddress"})
# GET_BROKER_RUNTIME_INFO keys pyrmq adds (replication, transactions, alarms) where Apache 4.9.7's
# master has none: left out of pyrmq's brokerStatus before comparing.
PYRMQ_ONLY_RUNTIME_KEYS = frozenset({"haConnectionCount", "push2SlaveMaxOffset", "slaveFallBehindMuch",
                                     "pyrmqTransactionHalfPending", "pyrmqAccumulationAlarms"})
# mqadmin 5.x asks GET_TOPIC_CONFIG (351) before topicStatus, consumerProgress and cloneGroupOffset
# (its static-topic mapping). Apache 4.9.7 does not know the code; pyrmq answers it as Apache 5.3
# does, so that these tools and rocketmq-dashboard 2.x work (a deliberate difference, see the module
# docstring): there Apache's output must be that failure and pyrmq's must show no failure.
ASKS_GET_TOPIC_CONFIG = frozenset({"topicStatus", "consumerProgress", "cloneGroupOffset"})
GET_TOPIC_CONFIG_UNKNOWN = "request type 351 not supported"
# The same difference in the message track of queryMsgByUniqueKey and queryMsgByOffset: the 5.3 tools find
# a group's progress through 351, so on Apache 4.9.7 every track is UNKNOWN; on pyrmq it is what the
# 4.9.8 tools print on both brokers (CONSUMED: the group consumed every message of the scenario).
TRACKS_MESSAGES = frozenset({"queryMsgByUniqueKey", "queryMsgByOffset"})
TRACK_UNKNOWN, TRACK_CONSUMED = "trackType=UNKNOWN,", "trackType=CONSUMED,"
# Subcommands that print a java.util.Properties: its iteration order follows the hash table's
# size, so the lines are compared as a set.
PROPERTIES_COMMANDS = frozenset({"getBrokerConfig", "getNamesrvConfig"})

# One step per line: an mqadmin command line (``-n`` is added) or an action of the driver
# (``@produce GROUP TOPIC COUNT TAGS``, ``@consume GROUP TOPIC COUNT``, ``@sleep MS``). Words may
# name {namesrv}, {broker}, {export} (this run's export directory), {msgId:i}, {offsetMsgId:i}.
STEPS = """
updateTopic -c DefaultCluster -t MqTopic -r 4 -w 4
updateTopic -b {broker} -t MqTopicDel -r 2 -w 2
updateSubGroup -c DefaultCluster -g MqGroup
updateSubGroup -b {broker} -g MqSubGroup -r 3 -q 2
updateTopic -c DefaultCluster -t %RETRY%MqGroup -r 1 -w 1
@produce MqProducerGroup MqTopic 8 TagA,TagB
@consume MqGroup MqTopic 8
topicList
topicList -c
topicRoute -t MqTopic
topicRoute -t MqNoSuchTopic
topicStatus -t MqTopic
topicClusterList -t MqTopic
clusterList
getBrokerConfig -b {broker}
updateBrokerConfig -b {broker} -k fileReservedTime -v 48
getBrokerConfig -c DefaultCluster
getNamesrvConfig
updateNamesrvConfig -k orderMessageEnable -v true
queryMsgById -i {offsetMsgId:0}
queryMsgByKey -t MqTopic -k k-1
queryMsgByUniqueKey -t MqTopic -i {msgId:2}
queryMsgByOffset -t MqTopic -b broker-a -i 3 -o 1
printMsg -t MqTopic
printMsgByQueue -t MqTopic -a broker-a -i 1 -p true -d true -f true
queryCq -t MqTopic -q 0 -i 0 -c 4
consumerProgress -g MqGroup
consumerProgress
consumerConnection -g MqGroup
consumerStatus -g MqGroup
getConsumerStatus -g MqGroup -t MqTopic
getConsumerConfig -g MqGroup
producerConnection -g MqProducerGroup -t MqTopic
producer -b {broker}
brokerStatus -b {broker}
brokerConsumeStats -b {broker}
statsAll -t MqTopic
sendMsgStatus -b broker-a -s 16 -c 3
checkMsgSendRT -t MqTopic -a 3 -s 16
sendMessage -t MqTopic -b broker-a -i 3 -p hello -k mq-key -c TagC
sendMessage -t MqTopic -b broker-a -i 2 -p hello2
consumeMessage -t MqTopic -b broker-a -i 0 -o 0 -c 2
allocateMQ -t MqTopic -i 10.0.0.1@1,10.0.0.2@2
updateOrderConf -k MqTopic -v broker-a:4 -m put
updateOrderConf -k MqTopic -m get
updateOrderConf -k MqTopic -m delete
updateKvConfig -s MqNamespace -k mqKey -v mqValue
deleteKvConfig -s MqNamespace -k mqKey
cloneGroupOffset -s MqGroup -d MqGroupClone -t MqTopic
consumerProgress -g MqGroupClone
resetOffsetByTime -g MqGroup -t MqTopic -s 0
skipAccumulatedMessage -g MqGroup -t MqTopic
wipeWritePerm -b broker-a
addWritePerm -b broker-a
updateTopicPerm -c DefaultCluster -t MqTopic -p 4
updateTopicPerm -c DefaultCluster -t MqTopic -p 6
cleanExpiredCQ -c DefaultCluster
deleteExpiredCommitLog -c DefaultCluster
cleanUnusedTopic -c DefaultCluster
deleteSubGroup -c DefaultCluster -g MqSubGroup
deleteTopic -c DefaultCluster -t MqTopicDel
exportMetadata -c DefaultCluster -f {export}
exportConfigs -c DefaultCluster -f {export}
[5] updateTopicList -b {broker} -f {input}/topics.json
[5] updateTopicList -c DefaultCluster -f {input}/topics.json
[5] updateSubGroupList -b {broker} -f {input}/groups.json
[5] updateSubGroupList -c DefaultCluster -f {input}/groups.json
[5] setConsumeMode -b {broker} -t MqTopic -g MqGroup -m POP -q 2
[5] haStatus -b {broker}
[5] getBrokerEpoch -b broker-a
[5] resetMasterFlushOffset -b {broker} -o 0
[5] setCommitLogReadAheadMode -b {broker} -m 1
[5] getColdDataFlowCtrInfo -b {broker}
[5] updateColdDataFlowCtrGroupConfig -b {broker} -g MqGroup -v 1000
[5] removeColdDataFlowCtrGroupConfig -b {broker} -g MqGroup
[5] exportPopRecord -b {broker} -d true
[5] checkRocksdbCqWriteProgress -c DefaultCluster -t MqTopic
queryMsgTraceById -i {msgId:0}
consumerConnection -g MqNoSuchGroup
consumerProgress -g MqNoSuchGroup
queryMsgByKey -t MqTopic -k no-such-key
queryMsgById -i 7F00000100002A9F0000000000000000
deleteSubGroup -b {broker} -g MqNoSuchGroup
producerConnection -g MqNoSuchProducer -t MqTopic
queryCq -t MqTopic -q 9 -i 0 -c 1
queryCq -t MqTopic -q 0 -i 100 -c 1 -g MqGroup
"""


# The mqadmin builds compared: tools version -> the Java build (compat_tests/java/pom.xml profile)
# with that rocketmq-tools on its classpath.
TOOLS = {"4.9.8": "client4", "5.3.3": "client5"}
# A STEPS line prefixed ``[5]`` exists for the 5.3 tools only (a subcommand 4.9.8 lacks).
_ONLY = re.compile(r"^\[(\d)\]\s+")


def steps_of(tools: str) -> list[str]:
    """The STEPS lines one tools version runs, without their version prefix."""
    lines = []
    for line in STEPS.strip().splitlines():
        only = _ONLY.match(line)
        if only is None or tools.startswith(only.group(1) + "."):
            lines.append(line[only.end():] if only else line)
    return lines


@dataclass(frozen=True)
class Command:
    step: int      # index among the command lines (actions are not counted)
    line: str

    @property
    def name(self) -> str:
        return self.line.split()[0]


def commands_of(tools: str) -> list[Command]:
    return [Command(i, line) for i, line in enumerate(line for line in steps_of(tools) if not line.startswith("@"))]


@dataclass
class Run:
    kind: str
    namesrv: str
    broker: str
    export_dir: Path
    outputs: dict[int, dict]    # step -> the mqadmin event
    sent: list[dict]
    seconds: float


def _run(kind: str, tools: str, request, tmp_path_factory, client: JavaClient) -> Run:
    srv = _start_server(kind, request, tmp_path_factory, broker_extra=BROKER_EXTRA)
    try:
        # The scenario's consumer commits its four queues at once: Apache 4.9.7 could lose some of
        # those first commits (seed_group_offset), and brokerConsumeStats would show the queues
        # it lost as not consumed.
        seed_group_offset(srv, "MqGroup", "MqTopic")
        workdir = tmp_path_factory.mktemp(f"mqadmin-{tools}-{kind}")
        steps = workdir / "steps.tsv"
        export_dir = workdir / "export"
        for name, content in INPUTS.items():
            (workdir / name).write_text(content)
        steps.write_text("".join("\t".join(line.replace("{export}", str(export_dir)).replace("{input}", str(workdir))
                                           .split()) + "\n" for line in steps_of(tools)))
        t0 = time.monotonic()
        result = client.run("mqadmin", namesrv=srv.namesrv_addr, broker=srv.broker_addr, commands=steps,
                            deadline_ms=DEADLINE_MS, system_properties={"java.security.manager": "allow"})
        seconds = time.monotonic() - t0
    finally:
        srv.stop()
    outputs = {e["step"]: e for e in result.of("mqadmin")}
    for event in outputs.values():   # what the export commands wrote is compared too
        written = EXPORTS.get(event["args"][0])
        if written and (export_dir / written).exists():
            event["out"] += f"\n--- {written}\n" + (export_dir / written).read_text()
    run = Run(kind, srv.namesrv_addr, srv.broker_addr, export_dir, outputs, result.sent, seconds)
    # What the comparison sees, for a reader of a failure (pytest's temp directory).
    (workdir / "masked.txt").write_text(f"# {kind}: the mqadmin JVM ran {seconds:.1f} s\n" + "".join(
        f"### {c.step:02d} {c.line}\n" + "".join(f"{line}\n" for line in mask_event(outputs.get(c.step), run))
        for c in commands_of(tools)))
    return run


@pytest.fixture(scope="module")
def runs(java_toolchain, reference_build, request, tmp_path_factory) -> Callable[[str], dict[str, Run]]:
    """The scenario with the mqadmin of one tools version on a fresh Apache server and a fresh
    pyrmq server, one after the other: run on the first test of that version, kept for the rest."""
    if not set(KINDS) <= set(_selected(request.config, "servers", SERVER_KINDS, DEFAULT_SERVER_KINDS)):
        pytest.skip("the mqadmin comparison needs both pyrmq and apache among the compat servers")
    done: dict[str, dict[str, Run]] = {}

    def of(tools: str) -> dict[str, Run]:
        if tools not in done:
            flavor = TOOLS[tools]
            if flavor not in _selected(request.config, "clients", build.CLIENT_FLAVORS, build.CLIENT_FLAVORS):
                pytest.skip(f"mqadmin {tools} needs the {flavor} build among the compat clients")
            client = JavaClient(_built(build.build_client, flavor), tmp_path_factory.mktemp(f"mqadmin-{flavor}"))
            done[tools] = {kind: _run(kind, tools, request, tmp_path_factory, client) for kind in KINDS}
        return done[tools]

    return of


# ------------------------------------------------------------------------------------ masking

_TRACE_FRAME = re.compile(r"^\s+(at |\.\.\. \d+ more)")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,3})?")
_JAVA_DATE = re.compile(r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} \d{2} \d{2}:\d{2}:\d{2} \w+ \d{4}")
_MILLIS = re.compile(r"(?<!\d)1[6-9]\d{11}(?!\d)")
_CLIENT_ID = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}@[\w.\-]+")
_ADDRESS = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?")
# Message ids: 32 hex digits (offset ids, client ids of IPv4 hosts) or 56 (client ids of IPv6 hosts).
_UNIQ_ID = re.compile(r"\b[0-9A-F]{32}(?:[0-9A-F]{24})?\b")
# Measured round trips: sendMsgStatus's rt=Nms, checkMsgSendRT's last column and average.
_RT = re.compile(r"(?<=rt=)\d+(?=ms)|(?<=Avg RT: )[\d.]+|(?<=true)(\s+)\d+$", re.M)
# clusterList: the broker's version and its load figures (InTPS, OutTPS, PCWait, Hour, SPACE) come
# from GET_BROKER_RUNTIME_INFO, measured at that instant; pyrmq says V4_9_8 as its clients do.
_CLUSTER_FIGURES = re.compile(r"(<broker>\s+)V\d+_\d+_\d+\S*\s.*$", re.M)
_PADDING = re.compile(r" {2,}")
# brokerStatus: "key : value" -- the figures are measured at that instant; the keys are compared
_STATUS_LINE = re.compile(r"^(\S+)\s*: .*$")
# statsAll: InTPS, OutTPS and the 24 h counts depend on when the 10 s stats samples fell
_STATS_ALL_FIGURES = re.compile(r"^(.+?\s\d+)\s+[\d.]+\s+[\d.]+\s+\d+\s+\S+$", re.M)
_CONFIG_LINE = re.compile(r"^(\S+)(\s+=)(.*)$")


def mask(text: str, run: Run, command: str = "") -> list[str]:
    """``text`` with this run's own values replaced by names, as lines without trailing blanks."""
    for e in run.sent:
        text = text.replace(e["offsetMsgId"], f"<offsetMsgId:{e['i']}>").replace(e["msgId"], f"<msgId:{e['i']}>")
    text = text.replace(str(run.export_dir), "<export>")
    text = text.replace(run.broker, "<broker>").replace(run.namesrv, "<namesrv>")
    text = _UNIQ_ID.sub("<id>", text)
    text = _DATE_TIME.sub("<time>", text)
    text = _JAVA_DATE.sub("<time>", text)
    text = _MILLIS.sub("<ms>", text)
    text = _CLIENT_ID.sub("<clientId>", text)
    text = _ADDRESS.sub("<addr>", text)
    if command in ("sendMsgStatus", "checkMsgSendRT"):
        text = _RT.sub(lambda m: (m.group(1) or "") + "<rt>", text)
    if command == "clusterList":
        text = _CLUSTER_FIGURES.sub(r"\1<version and load>", text)
    if command == "statsAll":
        text = _STATS_ALL_FIGURES.sub(r"\1 <tps and 24h counts>", text)
    if command == "brokerStatus":
        keys = [m.group(1) for m in map(_STATUS_LINE.match, text.splitlines()) if m]
        # the path-named commitLogDiskRatio_<dir> key masked with the directory
        return sorted(re.sub(r"_/.*", "_<dir>", k) for k in keys
                      if not (run.kind == "pyrmq" and k in PYRMQ_ONLY_RUNTIME_KEYS))
    # Columns are padded by mqadmin's printf: a masked value of another length shifts them.
    lines = [_PADDING.sub("  ", line.rstrip()) for line in text.splitlines() if not _TRACE_FRAME.match(line)]
    if command in PROPERTIES_COMMANDS:
        lines = sorted(_config_line(line) for line in lines
                       if not (run.kind == "pyrmq" and _config_key(line) in PYRMQ_ONLY_KEYS))
    if command in ("consumerProgress", "producer"):
        lines = _tools_own_clients(lines)
    return lines


def _tools_own_clients(lines: list[str]) -> list[str]:
    """The rows of mqadmin's own short-lived clients (the TOOLS_CONSUMER of printMsg and
    printMsgByQueue, the CLIENT_INNER_PRODUCER instances) as one marker each: whether the broker
    still lists them depends on when the client's heartbeat thread and its unregistration reach
    it (Apache 4.9.7 handles the two on different executors, so a late heartbeat can register a
    client again after it left; it then stays until the channel expires)."""
    out: list[str] = []
    for line in lines:
        marker = next((m for prefix, m in TOOLS_OWN_CLIENT_ROWS_MASKS if line.startswith(prefix)), line)
        if marker == line or marker not in out:
            out.append(marker)
    return out


TOOLS_OWN_CLIENT_ROWS_MASKS = (("TOOLS_CONSUMER ", "TOOLS_CONSUMER  <mqadmin's own consumer, online or not>"),
                               ("producer group (CLIENT_INNER_PRODUCER) instance",
                                "producer group (CLIENT_INNER_PRODUCER) <mqadmin's own producers>"))


def _config_key(line: str) -> str | None:
    m = _CONFIG_LINE.match(line)
    return m.group(1) if m else None


def _config_line(line: str) -> str:
    m = _CONFIG_LINE.match(line)
    if m and m.group(1) in MACHINE_KEYS:
        return f"{m.group(1)}{m.group(2)}  <machine>"
    return line


def mask_event(event: dict | None, run: Run) -> list[str]:
    if event is None:
        return ["(not run)"]
    name = event["args"][0]
    return mask(event["out"], run, name) + [f"stderr: {line}" for line in mask(event["err"], run)] + \
        ([f"thrown: {event['thrown']}"] if event["thrown"] else [])


@pytest.mark.parametrize(("tools", "command"), [
    pytest.param(tools, c, id=f"{tools}-{c.step:02d}-{c.name}") for tools in TOOLS for c in commands_of(tools)])
def test_mqadmin_output_as_apache(runs, tools, command):
    apache, pyrmq = runs(tools)["apache"], runs(tools)["pyrmq"]
    want = mask_event(apache.outputs.get(command.step), apache)
    assert want and want != ["(not run)"], "Apache's output is empty: the scenario shows nothing here"
    got = mask_event(pyrmq.outputs.get(command.step), pyrmq)
    if any(GET_TOPIC_CONFIG_UNKNOWN in line for line in want) and command.name in ASKS_GET_TOPIC_CONFIG:
        # the deliberate difference: pyrmq answers 351, and the 5.3 tools print what they asked for
        assert got and not [line for line in got if line.startswith(("stderr:", "thrown:"))], got
        return
    if tools.startswith("5.") and command.name in TRACKS_MESSAGES:
        want = [line.replace(TRACK_UNKNOWN, TRACK_CONSUMED) for line in want]
    assert got == want

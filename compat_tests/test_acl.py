"""ACL 1.0 with the official clients' signatures (the Java client's AclClientRPCHook, the Go
client's primitive.Credentials), against a broker with aclEnable=true and one plain_acl.yml
(pyrmq reads it beside broker.conf, Apache from $ROCKETMQ_HOME/conf).

Signed with the right secret, produce and consume work; a wrong secret, a topic without PUB, a
topic without SUB and a non-admin UPDATE_AND_CREATE_TOPIC are refused as Apache 4.9.7 refuses
them: SYSTEM_ERROR (1), remark ``org.apache.rocketmq.acl.common.AclException: <message>`` (Apache
appends the Java stack frame that threw, which pyrmq has not). A changed file is applied without
a restart (both poll every 5 s). The Go client's refusals carry the same remark (its error text
is ``CODE: 1, DESC: <remark>``).

mqadmin's ACL subcommands (updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr,
clusterAclConfigVersion; ``ACL_ADMIN_STEPS``), signed as the admin account, print on pyrmq what
they print on Apache 4.9.7 (masked as compat_tests/test_mqadmin.py masks), leave the same
plain_acl.yml behind, and take effect: the account created can produce, the one deleted cannot."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from compat_tests import build, goclient
from compat_tests.conftest import _built, _start_server
from compat_tests.javaclient import JavaClient
from compat_tests.test_mqadmin import Run, mask_event
from pyrmq.client.errors import MQClientError
from pyrmq.client.sync import Producer

pytestmark = pytest.mark.compat

USER, USER_SECRET = "aclUser01", "aclSecret01"
ADMIN, ADMIN_SECRET = "aclAdmin01", "aclAdminSecret"
PLAIN_ACL = f"""
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: {USER}
    secretKey: {USER_SECRET}
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - T_acl_rw=PUB|SUB
      - T_acl_sub=SUB
      - T_acl_pub=PUB
    groupPerms:
      - G_acl=SUB
  - accessKey: {ADMIN}
    secretKey: {ADMIN_SECRET}
    admin: true
"""
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "
SYSTEM_ERROR = 1
# Apache's AclFileWatchService and pyrmq's default aclFileWatchIntervalMs: 5 s.
RELOAD_WAIT_S = 20


@pytest.fixture(scope="module")
def acl_server(server_kind, java_toolchain, request, tmp_path_factory):
    return _start_server(server_kind, request, tmp_path_factory, plain_acl=PLAIN_ACL)


@pytest.fixture(scope="session")
def go_client(tmp_path_factory) -> goclient.GoClient:
    return goclient.session_client(tmp_path_factory)


def acl_run(java_client, server, op, access_key=USER, secret_key=USER_SECRET, **options):
    return java_client.run("acl", op=op, namesrv=server.namesrv_addr, access_key=access_key,
                           secret_key=secret_key, **options)


def assert_refused(run, op, message, server_kind):
    (refused,) = run.of("refused")
    assert (refused["op"], refused["code"]) == (op, SYSTEM_ERROR), refused
    assert refused["remark"].startswith(ACL_EXCEPTION + message), refused
    if server_kind != "apache":
        assert refused["remark"] == ACL_EXCEPTION + message


def test_signed_produce_and_consume(acl_server, java_client):
    sent = acl_run(java_client, acl_server, "produce", topic="T_acl_rw", count=10)
    assert not sent.of("refused") and [e["status"] for e in sent.sent] == ["SEND_OK"] * 10
    got = acl_run(java_client, acl_server, "consume", topic="T_acl_rw", group="G_acl", count=10)
    assert sorted(got.bodies()) == sorted(e["body"] for e in sent.sent)


def test_wrong_secret_is_refused(acl_server, java_client, server_kind):
    run = acl_run(java_client, acl_server, "produce", topic="T_acl_rw", secret_key="not-the-secret")
    assert not run.sent
    assert_refused(run, "produce", f"Check signature failed for accessKey={USER}", server_kind)


def test_missing_pub_is_refused(acl_server, java_client, server_kind):
    run = acl_run(java_client, acl_server, "produce", topic="T_acl_sub")
    assert_refused(run, "produce", "No default permission for topic:T_acl_sub", server_kind)


def test_missing_sub_is_refused_and_admin_may_create_topics(acl_server, java_client, server_kind):
    created = acl_run(java_client, acl_server, "create-topic", ADMIN, ADMIN_SECRET, topic="T_acl_pub",
                      broker_addr=acl_server.broker_addr)
    assert created.of("created") and not created.of("refused")
    run = acl_run(java_client, acl_server, "pull", topic="T_acl_pub", group="G_acl")
    assert_refused(run, "pull", "No default permission for topic:T_acl_pub", server_kind)


def test_non_admin_cannot_create_topics(acl_server, java_client, server_kind):
    run = acl_run(java_client, acl_server, "create-topic", topic="T_acl_new", broker_addr=acl_server.broker_addr)
    assert_refused(run, "create-topic",
                   f"Need admin permission for request code=17, but accessKey={USER} is not", server_kind)


def produce_until(java_client, server, topic, granted: bool):
    """Sends one message every few seconds until the broker has applied the file: SEND_OK when
    PUB was granted, refused when it was taken away."""
    deadline = time.monotonic() + RELOAD_WAIT_S
    while True:
        run = acl_run(java_client, server, "produce", topic=topic)
        if bool(run.sent) == granted or time.monotonic() > deadline:
            return run


@pytest.mark.slow
def test_changed_file_applies_without_restart(acl_server, java_client, server_kind):
    """PUB granted on T_acl_sub by rewriting the file, then taken away again."""
    acl_server.write_plain_acl(PLAIN_ACL.replace("T_acl_sub=SUB", "T_acl_sub=PUB|SUB"))
    try:
        run = produce_until(java_client, acl_server, "T_acl_sub", granted=True)
        assert [e["status"] for e in run.sent] == ["SEND_OK"], run.of("refused")
    finally:
        acl_server.write_plain_acl(PLAIN_ACL)
    run = produce_until(java_client, acl_server, "T_acl_sub", granted=False)
    assert_refused(run, "produce", "No default permission for topic:T_acl_sub", server_kind)

def test_go_client_signatures(acl_server, go_client, server_kind):
    """The Go producer signed as the admin account creates the topics (auto-creation; the Go
    admin's CreateTopic does not sign in 2.1.2); signed as the user its sends pass, a wrong secret
    and a topic without PUB are refused with Apache's remark."""
    common = {"namesrv": acl_server.namesrv_addr}
    for topic in ("T_acl_rw", "T_acl_sub"):
        created = go_client.run("send-sync", topic=topic, count=1, access_key=ADMIN, secret_key=ADMIN_SECRET,
                                **common)
        assert [e["status"] for e in created.sent] == ["SEND_OK"]
    sent = go_client.run("send-sync", topic="T_acl_rw", count=4, access_key=USER, secret_key=USER_SECRET, **common)
    assert [e["status"] for e in sent.sent] == ["SEND_OK"] * 4
    for topic, secret, message in (("T_acl_rw", "not-the-secret", f"Check signature failed for accessKey={USER}"),
                                   ("T_acl_sub", USER_SECRET, "No default permission for topic:T_acl_sub")):
        run = go_client.run("send-sync", topic=topic, count=1, access_key=USER, secret_key=secret, **common)
        (failed,) = run.of("send_failed")
        assert f"CODE: {SYSTEM_ERROR}, DESC: {ACL_EXCEPTION}{message}" in failed["error"], failed


def test_signed_query_by_key(acl_server, java_client, server_kind):
    """QUERY_MESSAGE is the one request where the servers differ, on purpose: the clients sign its
    _UNIQUE_KEY_QUERY field with the others, Apache 4.9.7 leaves that field out when it verifies
    and so refuses every signed query (its admin logs the refusal and finds nothing); pyrmq
    accepts the clients' signature and answers."""
    admin = {"access_key": ADMIN, "secret_key": ADMIN_SECRET}
    sent = acl_run(java_client, acl_server, "produce", topic="T_acl_query", count=1, **admin)
    assert [e["status"] for e in sent.sent] == ["SEND_OK"]
    (query,) = acl_run(java_client, acl_server, "query", topic="T_acl_query", key="k-0", **admin).of("query")
    if server_kind == "apache":
        assert query["found"] == 0
        log = (acl_server.config.workdir / "logs" / "broker.log").read_text(errors="replace")
        assert "code=12," in log and f"Check signature failed for accessKey={ADMIN}" in log
    else:
        assert query["found"] >= 1


# ------------------------------------------------------------- mqadmin's ACL subcommands

# Signed as ADMIN (tools.yml), one mqadmin JVM per server kind: accounts created, updated (the
# keys a request leaves out are kept), refused for bad values, deleted; the global white
# addresses replaced in the broker's own file (-p, which Apache 4.9.7 requires); the version
# listed (5 changes: counter 5). {aclFile} is that kind's plain_acl.yml.
ACL_ADMIN_STEPS = """
updateTopic -b {broker} -t T_acl_admin -r 1 -w 1
updateAclConfig -b {broker} -a aclNew001 -s aclNewSecret1 -i DENY -u SUB -t T_acl_admin=PUB
updateAclConfig -b {broker} -a aclGone001 -s aclGoneSecret1 -i PUB
updateAclConfig -b {broker} -a aclNew001 -s aclNewSecret1 -t T_acl_admin=PUB|SUB -w 10.10.105.*
updateAclConfig -b {broker} -a short -s aclNewSecret1
updateAclConfig -b {broker} -a aclBad001 -s aclBadSecret1 -t T_acl_admin
updateAclConfig -b {broker} -a aclBad001 -s aclBadSecret1 -g G_acl=ALL
deleteAclConfig -b {broker} -a aclGone001
deleteAclConfig -b {broker} -a aclNoSuch01
updateGlobalWhiteAddr -b {broker} -g 10.10.103.*,10.10.104.* -p {aclFile}
clusterAclConfigVersion -b {broker}
clusterAclConfigVersion -c DefaultCluster
"""
ACL_ADMIN_COMMANDS = [line for line in ACL_ADMIN_STEPS.strip().splitlines()]
NEW, NEW_SECRET = "aclNew001", "aclNewSecret1"
GONE, GONE_SECRET = "aclGone001", "aclGoneSecret1"


@dataclass
class AclAdminRun:
    run: Run                  # test_mqadmin's: the outputs, masked by its mask_event
    acl_file: Path
    document: dict            # plain_acl.yml after the scenario


_OBJECT_HASH = re.compile(r"(\.PlainAccessConfig)@[0-9a-f]+")
# Runs of the scenario by server kind, kept for the kind that runs second to compare with.
ACL_ADMIN_RUNS: dict[str, AclAdminRun] = {}


@pytest.fixture(scope="module")
def mqadmin_client(java_toolchain, tmp_path_factory) -> JavaClient:
    # mqadmin 4.9.8: rocketmq-tools of the client4 build, as in test_mqadmin
    return JavaClient(_built(build.build_client, "client4"), tmp_path_factory.mktemp("acl-mqadmin"))


def run_acl_admin(server, kind: str, client: JavaClient, workdir: Path) -> AclAdminRun:
    acl_file = server.plain_acl_path
    steps = workdir / "steps.tsv"
    steps.write_text("".join("\t".join(line.replace("{aclFile}", str(acl_file)).split()) + "\n"
                             for line in ACL_ADMIN_COMMANDS))
    t0 = time.monotonic()
    result = client.run("mqadmin", namesrv=server.namesrv_addr, broker=server.broker_addr, commands=steps,
                        access_key=ADMIN, secret_key=ADMIN_SECRET, deadline_ms=60_000,
                        system_properties={"java.security.manager": "allow"})
    outputs = {e["step"]: e for e in result.of("mqadmin")}
    for event in outputs.values():
        for stream in ("out", "err"):
            # the file's path differs by kind and run; updateAclConfig prints the identity hash of
            # its PlainAccessConfig (a class without toString)
            event[stream] = _OBJECT_HASH.sub(r"\1@<hash>", event[stream].replace(str(acl_file), "<aclFile>"))
    run = Run(kind, server.namesrv_addr, server.broker_addr, workdir, outputs, [], time.monotonic() - t0)
    return AclAdminRun(run, acl_file, yaml.safe_load(acl_file.read_text()))


def without_timestamps(document: dict) -> dict:
    return {**document, "dataVersion": [{k: v for k, v in entry.items() if k != "timestamp"}
                                        for entry in document.get("dataVersion") or []]}


def send_as(server, access_key, secret_key, topic="T_acl_admin"):
    """A SEND_OK, or the refusal's remark."""
    with Producer(server.namesrv_addr, f"PG_{access_key}", credentials=(access_key, secret_key)) as producer:
        try:
            return producer.send(topic, b"acl-admin").status.name
        except MQClientError as exc:
            return exc.remark


def wait_for(server_kind, probe, want):
    """pyrmq applies a change at once; Apache's memory may lag until its watcher has reloaded."""
    deadline = time.monotonic() + (RELOAD_WAIT_S if server_kind == "apache" else 0)
    while True:
        got = probe()
        if want(got) or time.monotonic() > deadline:
            return got
        time.sleep(1)


def test_mqadmin_acl_subcommands_as_apache(acl_server, server_kind, mqadmin_client, tmp_path_factory):
    """mqadmin's ACL subcommands against this kind, then their effect: the created account
    produces, the deleted one is refused, the file holds the change; the outputs and the file
    are compared with the other kind's (whichever ran first), masked as test_mqadmin masks."""
    this = run_acl_admin(acl_server, server_kind, mqadmin_client, tmp_path_factory.mktemp(f"acl-admin-{server_kind}"))
    ACL_ADMIN_RUNS[server_kind] = this

    assert wait_for(server_kind, lambda: send_as(acl_server, NEW, NEW_SECRET), lambda r: r == "SEND_OK") == "SEND_OK"
    refused = wait_for(server_kind, lambda: send_as(acl_server, GONE, GONE_SECRET), lambda r: r != "SEND_OK")
    assert refused.startswith(ACL_EXCEPTION + f"No acl config for {GONE}"), refused
    accounts = {a["accessKey"]: a for a in this.document["accounts"]}
    assert GONE not in accounts and list(accounts[NEW].items()) == [
        ("accessKey", NEW), ("secretKey", NEW_SECRET), ("admin", False), ("defaultTopicPerm", "DENY"),
        ("defaultGroupPerm", "SUB"), ("topicPerms", ["T_acl_admin=PUB|SUB"]), ("whiteRemoteAddress", "10.10.105.*")]
    assert this.document["globalWhiteRemoteAddresses"] == ["10.10.103.*", "10.10.104.*"]
    assert [v["counter"] for v in this.document["dataVersion"]] == [5]

    apache = ACL_ADMIN_RUNS.get("apache")
    for kind, other in ACL_ADMIN_RUNS.items():
        if kind == "apache" or apache is None or server_kind not in ("apache", kind):
            continue
        differ = []
        for step, line in enumerate(ACL_ADMIN_COMMANDS):
            want, got = mask_event(apache.run.outputs.get(step), apache.run), mask_event(other.run.outputs.get(step),
                                                                                        other.run)
            assert want != ["(not run)"], f"Apache did not run {line}"
            if got != want:
                differ.append(f"### {line}\n--- apache\n" + "\n".join(want) + f"\n--- {kind}\n" + "\n".join(got))
        assert not differ, "\n".join(differ)
        assert without_timestamps(other.document) == without_timestamps(apache.document)
        assert [list(a) for a in other.document["accounts"]] == [list(a) for a in apache.document["accounts"]]

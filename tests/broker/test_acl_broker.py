"""ACL over real sockets: a running broker with aclEnable=true refuses and serves signed requests
from a plain_acl.yml in its config directory, on both ports, and reloads the file when it changes."""

from __future__ import annotations

import logging
import os
import time

import pytest
import trio

from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.message import decode_messages, properties_to_string
from pyrmq.codec.remoting import make_request
from pyrmq.common.acl.signature import sign_ext_fields
from tests.broker.rmq import pull_request

ACL_YAML = """
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [aclTopic=PUB|SUB, pubOnly=PUB, subOnly=SUB]
    groupPerms: [aclGroup=SUB]
  - accessKey: admin007
    secretKey: admin-secret
    admin: true
"""
EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "
WATCH_MS = 100


@pytest.fixture
def acl_file(tmp_path):
    path = tmp_path / "conf" / "plain_acl.yml"
    path.parent.mkdir()
    path.write_text(ACL_YAML)
    return path


@pytest.fixture
def broker_overrides(acl_file):
    return {"aclEnable": "true", "aclPlainFile": str(acl_file), "aclFileWatchIntervalMs": str(WATCH_MS)}


def signed(code, fields, body=None, ak="producer1", sk="producer-secret", oneway=False):
    return make_request(code, sign_ext_fields(fields, body, ak, sk), body, oneway=oneway)


def send_request(topic, body=b"hello", **credentials):
    header = {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
              "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string({"WAIT": "true"}),
              "j": "0", "k": "false"}
    return signed(RequestCode.SEND_MESSAGE_V2, header, body, **credentials)


def signed_pull(topic, group, **credentials):
    request = pull_request(topic, 0, 0, group=group)
    return signed(request.code, request.ext_fields, **credentials)


def create_topic(topic, **credentials):
    return signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}, **credentials)


async def test_signed_requests_pass_and_others_are_refused_with_apaches_answers(cluster):
    c, addr = cluster.client, cluster.broker_addr
    with trio.fail_after(20):
        sent = await c.invoke(addr, send_request("aclTopic"))
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        pulled = await c.invoke(addr, signed_pull("aclTopic", "aclGroup"))
        assert pulled.code == ResponseCode.SUCCESS, pulled.remark
        assert [m.body for m in decode_messages(pulled.body)] == [b"hello"]

        refusals = {
            "wrong secret": (send_request("aclTopic", sk="not-the-secret"),
                             "Check signature failed for accessKey=producer1"),
            "PUB denied": (send_request("subOnly"), "No default permission for topic:subOnly"),
            "SUB denied": (signed_pull("pubOnly", "aclGroup"), "No default permission for topic:pubOnly"),
            "group denied": (signed_pull("aclTopic", "otherGroup"), "No default permission for group:otherGroup"),
            "not admin": (create_topic("newTopic"),
                          "Need admin permission for request code=17, but accessKey=producer1 is not"),
            "unknown key": (send_request("aclTopic", ak="stranger", sk="whatever"), "No acl config for stranger"),
            "unsigned": (make_request(RequestCode.GET_MAX_OFFSET, {"topic": "aclTopic", "queueId": "0"}),
                         "No accessKey is configured"),
        }
        for name, (request, message) in refusals.items():
            response = await c.invoke(addr, request)
            assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, EXCEPTION + message), name
        assert cluster.broker.acl_watcher.validator.refused == len(refusals)

        created = await c.invoke(addr, create_topic("adminTopic", ak="admin007", sk="admin-secret"))
        assert created.code == ResponseCode.SUCCESS, created.remark
        # A refused oneway request gets no answer; the connection goes on serving.
        await c.invoke_oneway(addr, send_request("subOnly", oneway=True))
        assert (await c.invoke(addr, send_request("aclTopic"))).code == ResponseCode.SUCCESS
        # The "fast" port (listenPort - 2) is guarded the same way.
        host, port = addr.rsplit(":", 1)
        fast = f"{host}:{int(port) - 2}"
        assert (await c.invoke(fast, send_request("subOnly"))).remark == \
            EXCEPTION + "No default permission for topic:subOnly"
        assert (await c.invoke(fast, send_request("aclTopic"))).code == ResponseCode.SUCCESS


async def wait_reloads(cluster, count):
    watcher = cluster.broker.acl_watcher
    with trio.fail_after(5):
        while watcher.reloads < count:
            await trio.sleep(WATCH_MS / 1000)


def replace_file(path, text: str) -> None:
    """Write the whole new file at once, as an operator's editor or config tool does (temp +
    rename): with write_text the watcher may read the truncated, still empty file first, which
    is a valid ACL file with no accounts and counts as one reload."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def test_hot_reload(cluster, acl_file, caplog):
    c, addr = cluster.client, cluster.broker_addr
    with trio.fail_after(30):
        assert (await c.invoke(addr, send_request("subOnly"))).code == ResponseCode.SYSTEM_ERROR
        replace_file(acl_file, ACL_YAML.replace("subOnly=SUB", "subOnly=PUB|SUB"))
        await wait_reloads(cluster, 1)
        assert (await c.invoke(addr, send_request("subOnly"))).code == ResponseCode.SUCCESS

        # A broken file keeps the rules in force and is reported once, not at every poll.
        caplog.set_level(logging.ERROR, logger="pyrmq.broker.acl.watcher")
        replace_file(acl_file, "accounts:\n  - accessKey: [broken\n")
        await trio.sleep(10 * WATCH_MS / 1000)
        errors = [r.message for r in caplog.records if r.name == "pyrmq.broker.acl.watcher"]
        assert len(errors) == 1 and "cannot be used" in errors[0] and "not valid YAML" in errors[0]
        assert (await c.invoke(addr, send_request("subOnly"))).code == ResponseCode.SUCCESS

        # A fixed file applies again; a removed file refuses everyone.
        replace_file(acl_file, ACL_YAML)
        await wait_reloads(cluster, 2)
        assert (await c.invoke(addr, send_request("subOnly"))).code == ResponseCode.SYSTEM_ERROR
        assert (await c.invoke(addr, send_request("aclTopic"))).code == ResponseCode.SUCCESS
        os.unlink(acl_file)
        await wait_reloads(cluster, 3)
        refused = await c.invoke(addr, send_request("aclTopic"))
        assert refused.remark == EXCEPTION + "No acl config for producer1"


# --- the real process: plain_acl.yml beside the -c file ----------------------------------------

async def test_standalone_reads_plain_acl_beside_its_config_file(tmp_path):
    from tests.test_process import Standalone   # the process harness of the CLI tests

    server = Standalone(tmp_path, aclEnable="true")
    (tmp_path / "plain_acl.yml").write_text(ACL_YAML)
    server.start()
    try:
        from pyrmq.remoting.client import RemotingClient
        async with RemotingClient() as client:
            await server.wait_ready(client)
            with trio.fail_after(10):
                assert (await client.invoke(server.broker_addr, send_request("aclTopic"))).code == ResponseCode.SUCCESS
                refused = await client.invoke(server.broker_addr, send_request("subOnly"))
                assert refused.remark == EXCEPTION + "No default permission for topic:subOnly"
        assert server.stop() == 0
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


def test_a_broken_acl_file_stops_the_start(tmp_path):
    import subprocess
    import sys

    conf = tmp_path / "broker.conf"
    conf.write_text(f"aclEnable=true\nstorePathRootDir={tmp_path / 'store'}\nlistenPort=0\nfastPortEnable=false\n")
    (tmp_path / "plain_acl.yml").write_text("accounts:\n  - accessKey: tiny\n    secretKey: x\n")
    done = subprocess.run([sys.executable, "-m", "pyrmq", "broker", "-c", str(conf)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "plain_acl.yml: account #1 (accessKey=tiny)" in done.stderr and "longer than 6" in done.stderr

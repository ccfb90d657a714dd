"""The console with aclEnable=true: HTTP Basic with an admin account of plain_acl.yml, and its
remoting requests signed as that account (the broker refuses them otherwise)."""

from __future__ import annotations

import pytest

from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from tests.broker.conftest import free_port
from tests.console.conftest import call

ACL_YAML = """
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    topicPerms: [aclTopic=PUB|SUB]
  - accessKey: admin007
    secretKey: admin-secret
    admin: true
"""
ADMIN = ("admin007", "admin-secret")


@pytest.fixture
def broker_overrides(tmp_path):
    path = tmp_path / "conf" / "plain_acl.yml"
    path.parent.mkdir()
    path.write_text(ACL_YAML)
    return {"aclEnable": "true", "aclPlainFile": str(path), "consolePort": str(free_port())}


async def test_only_an_admin_account_gets_in(cluster):
    for auth in (None, ("producer1", "producer-secret"), ("admin007", "wrong"), ("nobody", "admin-secret")):
        answer = await call(cluster, "GET", "/api/cluster", auth=auth)
        assert answer.status == 401, auth
        assert answer.headers["www-authenticate"].startswith('Basic realm="pyrmq console"')
    assert (await call(cluster, "GET", "/", auth=None)).status == 401
    assert (await call(cluster, "GET", "/", auth=ADMIN)).status == 200


async def test_the_admins_requests_are_signed_and_served(cluster):
    answer = await call(cluster, "POST", "/api/topics", {"topic": "AclConsoleT", "writeQueueNums": 2}, auth=ADMIN)
    assert answer.status == 200, answer.body
    assert cluster.broker.topic_config_manager.select("AclConsoleT").write_queue_nums == 2
    [broker] = (await call(cluster, "GET", "/api/cluster", auth=ADMIN)).json()["brokers"]
    assert "error" not in broker and broker["info"]["brokerVersionDesc"] == "V4_9_8"
    topics = (await call(cluster, "GET", "/api/topics", auth=ADMIN)).json()["topics"]
    assert any(t["topic"] == "AclConsoleT" and t["writeQueueNums"] == 2 for t in topics)


async def test_the_broker_would_refuse_the_same_request_unsigned(cluster):
    unsigned = await cluster.client.invoke(cluster.broker_addr, make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "AclConsoleU", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}))
    assert unsigned.code != 0 and cluster.broker.topic_config_manager.select("AclConsoleU") is None

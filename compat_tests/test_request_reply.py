"""Request/reply: ``DefaultMQProducer.request()`` sync and async against a consumer that answers
with ``MessageUtil.createReplyMessage`` (SEND_REPLY_MESSAGE_V2 to ``<cluster>_REPLY_TOPIC``, the
broker pushes it to the requester with PUSH_REPLY_MESSAGE_TO_CLIENT)."""

from __future__ import annotations

import pytest

from compat_tests import goclient

pytestmark = [pytest.mark.compat, pytest.mark.compat_servers("pyrmq", "apache", "apache5", "pyrmq-split"),
              pytest.mark.compat_exclude("apache5", "client4")]

COUNT = 5
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def test_request_reply_sync_and_async(server, java_client, names):
    """client5 runs the asynchronous request only: rocketmq-client 5.3.x's synchronous
    ``request()`` counts its reply latch down when the *send* succeeds (apache/rocketmq#8272), so it
    returns "wait reply message timeout" at once on any server; fixed upstream by #9608, after 5.3.3."""
    both = java_client.flavor == "client4"
    run = java_client.run("request", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          count=COUNT, mode="both" if both else "async").check()
    expected = list(range(2 * COUNT)) if both else list(range(COUNT, 2 * COUNT))
    assert run.summary == {**run.summary, "ok": len(expected), "failed": 0}, run.describe()
    _assert_replies(run, expected, names)


def _assert_replies(run, expected: list[int], names) -> None:
    replies = run.of("reply")
    # Every request got exactly its own answer (the correlation id matched it), in both modes.
    assert sorted(e["i"] for e in replies) == expected
    assert all(e["mode"] == ("sync" if e["i"] < COUNT else "async") for e in replies)
    for e in replies:
        assert e["body"] == f"reply:{e['request']}", e
        assert e["request"] == f"{names.topic}-{e['i']}", e
        assert e["topic"] == REPLY_TOPIC, e
        assert e["correlationId"], e
    # The replier's sends of the replies: all acknowledged, all to the reply topic.
    replied = run.of("replied")
    assert sorted(e["body"] for e in replied) == sorted(e["request"] for e in replies)
    assert {(e["status"], e["topic"]) for e in replied} == {("SEND_OK", REPLY_TOPIC)}


@pytest.fixture(scope="session")
def go_client(tmp_path_factory) -> goclient.GoClient:
    return goclient.session_client(tmp_path_factory)


@pytest.mark.compat_servers("pyrmq", "apache", "pyrmq-split")
def test_go_request_reply_sync_and_async(server, go_client, names):
    """The Go client (v2.1.2): Producer.Request and RequestAsync; its replier sends with
    SEND_REPLY_MESSAGE (324, V1 header names)."""
    run = go_client.run("request", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                        count=COUNT, create_topic=4, broker=server.broker_addr)
    assert run.summary == {**run.summary, "ok": 2 * COUNT, "failed": 0}, run.describe()
    _assert_replies(run, list(range(2 * COUNT)), names)

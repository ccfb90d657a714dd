"""Dead letters for operators with the official Java client, on pyrmq and Apache 4.9.7 alike: a
consumer with maxReconsumeTimes 1 fails a message until the broker dead-letters it; the DLQ is
read as the dashboard reads it (a pull consumer over %DLQ%<group>) and the dashboard's resend
(consumeMessageDirectly, CONSUME_MESSAGE_DIRECTLY relayed to a live client of the group) hands it
to a healthy consumer; then ``pyrmq dlq`` lists the group's DLQ and re-sends the dead letter to its
original topic, where the group's consumer receives the exact body once."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.compat_servers("pyrmq", "apache"),
              # one client keeps the scenario within budget (two retry delays of 10 s per run)
              pytest.mark.compat_exclude("pyrmq", "client5"), pytest.mark.compat_exclude("apache", "client5")]


def pyrmq_dlq(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyrmq", "--log-level", "WARNING", "dlq", *args],
                          capture_output=True, text=True, timeout=60)


def test_dead_letter_query_direct_consume_and_resend(server, java_client, names):
    run = java_client.run("dlq", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          timeout_ms=60_000)
    [sent] = run.sent
    body = sent["body"]
    # delivered once from the topic, once from the retry topic (maxReconsumeTimes 1), then dead
    failed = run.of("failed")
    assert [(e["reconsumeTimes"], e["body"]) for e in failed] == [(0, body), (1, body)], run.describe()
    [letter] = run.of("dlq")
    assert (letter["topic"], letter["body"], letter["retryTopic"]) == (f"%DLQ%{names.group}", body, names.topic)
    assert letter["reconsumeTimes"] == 2 and letter["originMsgId"] and letter["uniqKey"] == sent["msgId"]
    [direct] = run.of("direct")
    assert direct == {**direct, "consumeResult": "CR_SUCCESS", "order": False}, direct
    assert [(e["topic"], e["body"]) for e in run.of("recv_healthy")] == [(f"%DLQ%{names.group}", body)]

    listed = pyrmq_dlq("-b", server.broker_addr, "-g", names.group)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[-1] == "1 dead letter(s)" and lines[1].split()[:3] == [letter["offsetMsgId"], names.topic, "2"]
    resent = pyrmq_dlq("-b", server.broker_addr, "-g", names.group, "--resend", letter["offsetMsgId"])
    assert resent.returncode == 0, resent.stderr
    assert resent.stdout.startswith(f"{letter['offsetMsgId']} -> {names.topic} (")

    again = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                            count=1, idle_ms=3000, timeout_ms=30_000)
    assert [(e["topic"], e["body"]) for e in again.received] == [(names.topic, body)], again.describe()
    assert again.received[0]["reconsumeTimes"] == 0

"""SQL92 filtering with the official clients: the Java 4.9.8 push consumer
(``MessageSelector.bySql``) and the Go push consumer (``consumer.SQL92``), on pyrmq and on the
Apache 4.9.7 reference, both with ``enablePropertyFilter=true`` -- matching, non-matching, NULL
properties, numeric and string comparisons, a syntax error -- and on the default brokers
(``enablePropertyFilter=false``).  Tag filtering with ``||`` lists is covered by
test_consume.py / test_go_consume.py.

Produced message i carries ``a = i % 10`` (absent when that is 9) and ``s = "s" + i % 3``.
"""

from __future__ import annotations

import pytest

from compat_tests import goclient
from compat_tests.checks import assert_received_exactly, assert_sent_ok

pytestmark = [pytest.mark.compat, pytest.mark.slow,
              # the 4.9.8 client is the one the issue names; the 5.x client speaks the same SQL92
              pytest.mark.compat_exclude("pyrmq", "client5"), pytest.mark.compat_exclude("apache", "client5")]

COUNT = 40


def a_of(i: int) -> int | None:
    return None if i % 10 == 9 else i % 10


# (selector, which i are delivered)
SELECTORS = [
    ("a = 3", lambda i: a_of(i) == 3),
    ("(a > 6 AND s = 's1') OR a IS NULL", lambda i: (a_of(i) or 0) > 6 and i % 3 == 1 or a_of(i) is None),
    ("a BETWEEN 100 AND 200 OR s = 'none'", lambda i: False),
]


@pytest.fixture(scope="module")
def sql_server(module_server_factory):
    return module_server_factory(enablePropertyFilter="true")


@pytest.fixture(scope="session")
def go_client(tmp_path_factory) -> goclient.GoClient:
    return goclient.session_client(tmp_path_factory)


def _events_text(run) -> str:
    return "\n".join(str(e) for e in run.of("error"))


def test_java_sql92_push_consumer(sql_server, java_client, names):
    produced = java_client.run("produce", namesrv=sql_server.namesrv_addr, topic=names.topic, mode="sync",
                               count=COUNT, tags="TagA,TagB", sql_props=1)
    assert_sent_ok(produced.sent, COUNT, sql_server)
    for n, (selector, wanted_i) in enumerate(SELECTORS):
        wanted = [e for e in produced.sent if wanted_i(e["i"])]
        consumed = java_client.run("consume", namesrv=sql_server.namesrv_addr, topic=names.topic,
                                   group=names.another_group(f"s{n}"), sql_expr=selector, count=len(wanted),
                                   idle_ms=2500 if not wanted else 1500)
        assert consumed.summary["complete"], consumed.describe()
        assert_received_exactly(wanted, consumed.received)
    assert [len([e for e in produced.sent if w(e["i"])]) for _, w in SELECTORS] == [4, 7, 0]
    # a syntax error: CHECK_CLIENT_CONFIG answers SUBSCRIPTION_PARSE_FAILED, the consumer does not start
    failed = java_client.start("consume", namesrv=sql_server.namesrv_addr, topic=names.topic,
                               group=names.another_group("bad"), sql_expr="a > ", count=1, idle_ms=500).wait()
    assert failed.returncode != 0 and not failed.received, failed.describe()
    assert "CODE: 23" in _events_text(failed) or "SUBSCRIPTION_PARSE_FAILED" in _events_text(failed), failed.describe()


def test_java_sql92_refused_when_property_filter_disabled(server, java_client, names):
    produced = java_client.run("produce", namesrv=server.namesrv_addr, topic=names.topic, mode="sync",
                               count=10, sql_props=1)
    assert_sent_ok(produced.sent, 10, server)
    failed = java_client.start("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                               sql_expr="a = 3", count=1, idle_ms=500).wait()
    assert failed.returncode != 0 and not failed.received, failed.describe()
    assert "The broker does not support consumer to filter message by SQL92" in _events_text(failed), \
        failed.describe()


def test_go_sql92_push_consumer(sql_server, go_client, names):
    produced = go_client.run("send-sync", namesrv=sql_server.namesrv_addr, topic=names.topic, count=COUNT,
                             tags="TagA,TagB", sql_props=1)
    assert_sent_ok(produced.sent, COUNT, sql_server)
    selector, wanted_i = SELECTORS[1]
    wanted = [e for e in produced.sent if wanted_i(e["i"])]
    consumed = go_client.run("push-consume", namesrv=sql_server.namesrv_addr, topic=names.topic,
                             group=names.group, sql_expr=selector, count=len(wanted), idle_ms=2000)
    assert consumed.summary["complete"], consumed.describe()
    assert_received_exactly(wanted, consumed.received)
    # The Go client does not ask CHECK_CLIENT_CONFIG: a selector that does not compile is not
    # registered by the heartbeat, its pulls answer FILTER_DATA_NOT_EXIST (27), nothing arrives.
    bad = go_client.run("push-consume", namesrv=sql_server.namesrv_addr, topic=names.topic,
                        group=names.another_group("bad"), sql_expr="a >", count=1, idle_ms=3000, deadline_ms=9000)
    assert not bad.received and not bad.summary["complete"], bad.describe()


def test_go_sql92_refused_when_property_filter_disabled(server, go_client, names):
    produced = go_client.run("send-sync", namesrv=server.namesrv_addr, topic=names.topic, count=10, sql_props=1)
    assert_sent_ok(produced.sent, 10, server)
    consumed = go_client.run("push-consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                             sql_expr="a = 3", count=1, idle_ms=3000, deadline_ms=9000)
    assert not consumed.received and not consumed.summary["complete"], consumed.describe()

"""What 5.x remoting clients send on ordinary connections (issue 9, point 4), with rocketmq-client
5.3.3 against pyrmq and Apache 5.3.3 (Apache 4.9.7 knows none of it)."""

from __future__ import annotations

import pytest

from compat_tests.checks import assert_two_consumers_split

pytestmark = [pytest.mark.compat, pytest.mark.compat_servers("pyrmq", "apache5", "pyrmq-split"),
              pytest.mark.compat_exclude("pyrmq", "client4"), pytest.mark.compat_exclude("apache5", "client4"),
              pytest.mark.compat_exclude("pyrmq-split", "client4")]


def test_push_consumers_without_client_rebalance(server, java_client, names):
    """Two push consumers with ``setClientRebalance(false)`` get their queues from the broker
    (QUERY_ASSIGNMENT, PULL mode): disjoint, together all four, and every message once. Without
    an answer to code 400 they would hold no queue and receive nothing."""
    count = 40
    run = java_client.run("consume", namesrv=server.namesrv_addr, topic=names.topic, group=names.group,
                          create_topic=4, consumers=2, wait_balanced=1, produce=count, idle_ms=1500,
                          client_rebalance=0)
    assert_two_consumers_split(run, server, count)

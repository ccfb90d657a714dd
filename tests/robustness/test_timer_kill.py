"""Timer messages through a kill -9: a real broker process kills itself (``PYRMQ_CRASH_POINT``)
while it takes timer messages in or delivers them, is restarted on the same store, and every
acknowledged timer message reaches its real topic -- none lost; a duplicate only where the
broker said at start-up that one may come (docs/MESSAGING.md, "Timer messages")."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import trio

from pyrmq.remoting.client import RemotingClient
from tests.broker.rmq import pull, send
from tests.robustness.broker_process import BrokerProcess

pytestmark = pytest.mark.slow

TIMER_CONF = {"timerPrecisionMs": 100, "timerFlushIntervalMs": 300}
COUNT = 8
# point -> the passage that kills: in the middle of the eight messages
CRASHES = {
    "timer.unit_appended": "timer.unit_appended:4",
    "timer.delivered_one": "timer.delivered_one:3",
    "timer.read_time_moved": "timer.read_time_moved:5",
    "timer.flushed_before_checkpoint": "timer.flushed_before_checkpoint:3",
}


async def pull_all(client, addr, topic, queue_id):
    resp, messages = await pull(client, addr, topic, queue_id, 0)
    return messages if resp.code == 0 else []


@pytest.mark.parametrize("point", sorted(CRASHES))
async def test_timer_messages_survive_kill_9(tmp_path, point):
    server = BrokerProcess(tmp_path, **TIMER_CONF)
    due = {}
    try:
        server.start(crash_point=CRASHES[point])
        async with RemotingClient() as client:
            await server.wait_ready(client)
            for i in range(COUNT):
                body = b"timer-%d" % i
                try:
                    resp = await send(client, server.broker_addr, "TopicKill", body, queue_id=0,
                                      extra={"TIMER_DELAY_MS": str(400 + 150 * i)})
                except Exception:   # the crash came while sending (the flush point): not acknowledged
                    break
                if resp.code == 0:
                    due[body] = time.time() * 1000 + 400 + 150 * i
            await server.wait_exit(timeout=20)
        assert server.crashed_at(point), server.log_tail()
        assert due, "nothing was acknowledged before the crash"

        server.start()
        async with RemotingClient() as client:
            await server.wait_ready(client)
            with trio.fail_after(15):
                while True:
                    bodies = Counter(m.body for m in await pull_all(client, server.broker_addr, "TopicKill", 0))
                    if set(due) <= set(bodies):
                        break
                    await trio.sleep(0.1)
            await trio.sleep(0.5)   # anything delivered twice would be there by now
            bodies = Counter(m.body for m in await pull_all(client, server.broker_addr, "TopicKill", 0))
        twice = [b for b, n in bodies.items() if n > 1]
        assert len(twice) <= 1, bodies
        if twice:
            assert "may be delivered twice" in server.log.read_text(), server.log_tail()
        print(f"{point}: {len(due)} acknowledged, all delivered, {len(twice)} reported duplicate(s)")
        assert server.stop() == 0
    finally:
        server.kill()

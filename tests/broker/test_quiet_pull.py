"""A held pull that expires with nothing changed is answered from what it found when suspended
(_QuietPull), without being re-run; whatever changed in between -- the queue, the topic, the group,
the broker's permission, the consumer's subscription -- sends it through the full re-run. Either
way the answer is exactly what re-running the pull gives at that moment."""

from __future__ import annotations

import pytest
import trio

from pyrmq.broker.offsets_and_groups import SubscriptionGroupConfig
from pyrmq.broker.topic_config import PERM_WRITE, TopicConfig
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import make_request
from tests.broker.rmq import pull, send
from tests.broker.test_consumers import heartbeat
from tests.broker.test_long_polling import wait_held

SUSPEND = 0x2
SUBSCRIPTION = 0x4
TOPIC = "TopicQuiet"
GROUP = "quiet_cg"


async def _nothing(cluster):
    pass


async def _other_tag_stored(cluster):
    await send(cluster.client, cluster.broker_addr, TOPIC, b"not yours", tags="TagB")


async def _other_tag_stored_in_queue_1(cluster):
    await send(cluster.client, cluster.broker_addr, TOPIC, b"not yours", tags="TagB", queue_id=1)


async def _topic_write_only(cluster):
    cluster.broker.topic_config_manager.update(TopicConfig(TOPIC, 4, 4, PERM_WRITE))


async def _topic_fewer_read_queues(cluster):
    cluster.broker.topic_config_manager.update(TopicConfig(TOPIC, 0, 4))


async def _group_consumption_off(cluster):
    cluster.broker.subscription_group_manager.update(SubscriptionGroupConfig(GROUP, consume_enable=False))


async def _broker_write_only(cluster):
    cluster.broker.config.broker_permission = PERM_WRITE   # what updateBrokerConfig sets


async def _same_heartbeat(cluster):
    await _heartbeat(cluster, TOPIC, "TagA")


async def _subscription_dropped(cluster):
    await _heartbeat(cluster, "TopicElse", "TagA")


async def _heartbeat(cluster, topic, sub):
    response = await cluster.client.invoke(cluster.broker_addr, make_request(
        RequestCode.HEART_BEAT, body=heartbeat(GROUP, "127.0.0.1@quiet", topic, sub)), timeout=10)
    assert response.code == 0


# (change while the pull is held, the subscription from the heartbeat, queue, answered quietly, code);
# queue 0 holds one message (the pull waits at offset 1), queue 1 has no file yet (offset 0)
CASES = {
    "nothing": (_nothing, False, 0, True, ResponseCode.PULL_NOT_FOUND),
    "nothing, queue without a file": (_nothing, False, 1, True, ResponseCode.PULL_NOT_FOUND),
    "nothing, heartbeat subscription": (_nothing, True, 0, True, ResponseCode.PULL_NOT_FOUND),
    "the same heartbeat again": (_same_heartbeat, True, 0, True, ResponseCode.PULL_NOT_FOUND),
    "a message of another tag": (_other_tag_stored, False, 0, False, ResponseCode.PULL_RETRY_IMMEDIATELY),
    "the queue's first message, another tag": (_other_tag_stored_in_queue_1, False, 1, False,
                                               ResponseCode.PULL_RETRY_IMMEDIATELY),
    "topic write-only": (_topic_write_only, False, 0, False, ResponseCode.NO_PERMISSION),
    "topic's read queues cut": (_topic_fewer_read_queues, False, 0, False, ResponseCode.SYSTEM_ERROR),
    "group's consumption off": (_group_consumption_off, False, 0, False, ResponseCode.NO_PERMISSION),
    "broker write-only": (_broker_write_only, False, 1, False, ResponseCode.NO_PERMISSION),
    "subscription dropped by heartbeat": (_subscription_dropped, True, 0, False, ResponseCode.SUBSCRIPTION_NOT_EXIST),
}


async def _held_pull_across(cluster, case, suspend_ms, wake=None):
    """The case's pull held on its queue, the case's change made while it is held, then ``wake``
    (a send) if given: the pull's answer, its messages, and what re-running it gives afterwards."""
    change, by_heartbeat, queue_id, _, _ = CASES[case]
    addr = cluster.broker_addr
    with trio.fail_after(30):
        await send(cluster.client, addr, TOPIC, b"first", tags="TagA")
        if by_heartbeat:
            await _heartbeat(cluster, TOPIC, "TagA")
        results = []

        async def held_pull():
            flag = SUSPEND if by_heartbeat else SUSPEND | SUBSCRIPTION
            results.append(await pull(cluster.client, addr, TOPIC, queue_id, 1 - queue_id, group=GROUP,
                                      subscription="TagA", sys_flag=flag, suspend_ms=suspend_ms))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(held_pull)
            await wait_held(cluster)
            hold = cluster.broker.pull_processor.hold_service
            [held] = [p for pulls in hold._held.values() for p in pulls.values()]
            await change(cluster)
            if wake is not None:
                await wake(cluster, queue_id)
    [(response, messages)] = results
    rerun = cluster.broker.pull_processor.process_request(held.channel, held.request, allow_suspend=False)
    return response, messages, rerun


@pytest.mark.parametrize("case", list(CASES))
async def test_an_expiring_pull_answers_what_its_rerun_answers(cluster, case):
    _, _, _, quiet, code = CASES[case]
    hold = cluster.broker.pull_processor.hold_service
    response, messages, rerun = await _held_pull_across(cluster, case, suspend_ms=600)
    assert (hold.quiet_answers, hold.wakeups, messages) == (1 if quiet else 0, 0, [])
    assert (response.code, response.remark, response.ext_fields) == (rerun.code, rerun.remark, rerun.ext_fields)
    assert response.code == code


async def test_a_quiet_answer_counts_as_the_store_read_it_stands_for(cluster):
    """The store's get statistics (runtime info) count a quiet answer as the missed read it skips."""
    stats = cluster.broker.store.stats
    with trio.fail_after(30):
        await send(cluster.client, cluster.broker_addr, TOPIC, b"first", tags="TagA")
        before = stats.get_miss_times
        response, _ = await pull(cluster.client, cluster.broker_addr, TOPIC, 0, 1, group=GROUP,
                                 sys_flag=SUSPEND | SUBSCRIPTION, suspend_ms=300)
    assert response.code == ResponseCode.PULL_NOT_FOUND
    assert cluster.broker.pull_processor.hold_service.quiet_answers == 1
    assert stats.get_miss_times - before == 2   # at suspension and at expiry, as a re-run counts


@pytest.mark.parametrize("case", list(CASES))
async def test_a_woken_pull_answers_what_its_rerun_answers(cluster, case):
    """A held pull woken by a message answers what re-running it then answers: the checks see what
    changed while it was held (Apache re-runs the whole request)."""
    expiry_code = CASES[case][4]
    hold = cluster.broker.pull_processor.hold_service

    async def wake(cluster, queue_id):
        await send(cluster.client, cluster.broker_addr, TOPIC, b"mine", tags="TagA", queue_id=queue_id)

    response, messages, rerun = await _held_pull_across(cluster, case, suspend_ms=60_000, wake=wake)
    assert (hold.wakeups, hold.quiet_answers) == (1, 0)
    assert (response.code, response.remark, response.ext_fields) == (rerun.code, rerun.remark, rerun.ext_fields)
    # the cases that leave the basis alone found the message; the others were refused
    unchanged = expiry_code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY)
    assert (response.code == ResponseCode.SUCCESS) == unchanged
    assert [m.body for m in messages] == ([b"mine"] if unchanged else [])

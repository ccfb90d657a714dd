"""Transactional messages in an in-process broker: half messages, END_TRANSACTION, and the check
service driven round by round with an injected clock (no real waits)."""

from __future__ import annotations

import uuid

import pytest
import trio

from pyrmq import cli
from pyrmq.cli_transactions import fetch_pending

from pyrmq.broker.topic_config import TopicConfig
from pyrmq.broker.transaction_check import CheckRequest
from pyrmq.broker.transaction_messages import CHECK_GROUP, CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_TOPIC
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.message import decode_messages
from pyrmq.codec.remoting import make_request
from tests.broker.rmq import pull, send

PREPARED, COMMIT, ROLLBACK = 4, 8, 12


class Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


async def send_half(cluster, topic: str = "TopicTx", body: bytes = b"tx", group: str = "pg_tx", extra=None):
    props = {"TRAN_MSG": "true", "PGROUP": group, **(extra or {})}
    resp = await send(cluster.client, cluster.broker_addr, topic, body, tags="TagTx", extra=props,
                      queue_id=1, sys_flag=PREPARED)
    assert resp.code == 0, resp.remark
    return resp


async def end_tx(cluster, resp, kind: int, group: str = "pg_tx", from_check: bool = False, header=None):
    from pyrmq.codec.message import decode_offset_msg_id
    fields = header or {"tranStateTableOffset": resp.ext_fields["queueOffset"],
                        "commitLogOffset": str(decode_offset_msg_id(resp.ext_fields["msgId"])[2])}
    request = make_request(RequestCode.END_TRANSACTION, {
        "producerGroup": group, "commitOrRollback": str(kind), "fromTransactionCheck": str(from_check).lower(),
        "msgId": uuid.uuid4().hex, "transactionId": "t", **{k: fields[k] for k in ("tranStateTableOffset",
                                                                                    "commitLogOffset")}})
    return await cluster.client.invoke(cluster.broker_addr, request, timeout=10)


def topic(cluster, name: str = "TopicTx") -> None:
    cluster.broker.topic_config_manager.update(TopicConfig(name, 4, 4))


def service(cluster, clock: Clock):
    svc = cluster.broker.transaction_check_service
    svc.clock = clock
    return svc


def stored(cluster, name: str):
    """(None, every message of queue 0 of a system topic), read from the store."""
    store = cluster.broker.store
    cq = store.find_consume_queue(name, 0)
    units = [] if cq is None else cq.iter_units(cq.get_min_offset_in_queue())
    return None, [store.look_message_by_offset(offset) for offset, _size, _tags in units]


async def visible(cluster, name: str = "TopicTx", queue_id: int = 1):
    _, messages = await pull(cluster.client, cluster.broker_addr, name, queue_id, 0)
    return messages


async def test_half_is_invisible_and_commit_delivers_it_once(cluster):
    topic(cluster)
    resp = await send_half(cluster)
    assert await visible(cluster) == []
    _, [half] = stored(cluster, HALF_TOPIC)
    assert (half.properties["REAL_TOPIC"], half.properties["REAL_QID"]) == ("TopicTx", "1")
    assert half.sys_flag & 0xC == 0          # as Apache: the stored half is NOT_TYPE
    answer = await end_tx(cluster, resp, COMMIT)
    assert answer.code == 0
    [message] = await visible(cluster)
    assert message.body == b"tx" and message.sys_flag & 0xC == COMMIT
    assert message.prepared_transaction_offset == half.commit_log_offset
    assert message.properties["TAGS"] == "TagTx"
    _, [op] = stored(cluster, OP_TOPIC)
    assert op.body == b"0" and op.properties["TAGS"] == "d"
    # a second commit of the same half is answered, and the op makes the checker skip it
    svc = service(cluster, Clock(half.born_timestamp + 3_600_000))
    assert svc.check() == []
    assert cluster.broker.consumer_offset_manager.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == 1
    assert cluster.broker.consumer_offset_manager.query_offset(CHECK_GROUP, OP_TOPIC, 0) == 1
    assert svc.pending_by_group() == {}


async def test_rollback_never_delivers_and_wrong_headers_are_refused(cluster):
    topic(cluster)
    resp = await send_half(cluster)
    wrong_group = await end_tx(cluster, resp, COMMIT, group="other")
    assert (wrong_group.code, wrong_group.remark) == (1, "The producer group wrong")
    wrong_offset = await end_tx(cluster, resp, COMMIT, header={"tranStateTableOffset": "5",
                                                                "commitLogOffset": "0"})
    assert (wrong_offset.code, wrong_offset.remark) == (1, "The transaction state table offset wrong")
    assert (await end_tx(cluster, resp, ROLLBACK)).code == 0
    assert await visible(cluster) == []
    assert cluster.broker.transaction_check_service.pending_by_group() == {}


async def test_unknown_state_is_checked_after_the_timeout_then_discarded(cluster):
    topic(cluster)
    await send_half(cluster, extra={"UNIQ_KEY": "ABC"})
    svc = cluster.broker.transaction_check_service
    assert svc.pending_by_group() == {"pg_tx": 1}
    _, [half] = stored(cluster, HALF_TOPIC)
    clock = service(cluster, Clock(half.born_timestamp + 1000))
    assert clock.check() == []               # younger than transactionTimeOut (6 s)
    config = cluster.broker.config
    checks: list[CheckRequest] = []
    for round_ in range(1, config.transaction_check_max + 1):
        svc.clock.now_ms = half.born_timestamp + 10_000 * round_
        [check] = svc.check()
        checks.append(check)
        [body] = decode_messages(check.body)
        assert (body.topic, body.queue_id) == ("TopicTx", 1)
        assert body.properties["TRANSACTION_CHECK_TIMES"] == str(round_)
        assert check.header["msgId"] == check.header["transactionId"] == "ABC"
        assert check.group == "pg_tx"
        # as Apache, the copy the last check wrote is discarded in the same round
        assert svc.pending_by_group() == ({"pg_tx": 1} if round_ < config.transaction_check_max else {})
    # offsets of the checks: each re-put copy is the next unit of the half queue
    assert [int(c.header["tranStateTableOffset"]) for c in checks] == list(range(1, 16))
    svc.clock.now_ms += 10_000
    assert svc.check() == []
    _, [discarded] = stored(cluster, CHECK_MAX_TIME_TOPIC)
    assert discarded.properties["TRANSACTION_CHECK_TIMES"] == "15" and discarded.body == b"tx"
    assert svc.pending_by_group() == {}
    assert await visible(cluster) == []


async def test_commit_answering_a_check_delivers_once(cluster):
    topic(cluster)
    await send_half(cluster)
    _, [half] = stored(cluster, HALF_TOPIC)
    svc = service(cluster, Clock(half.born_timestamp + 7000))
    [check] = svc.check()
    answer = await end_tx(cluster, None, COMMIT, from_check=True, header=check.header)
    assert answer.code == 0
    [message] = await visible(cluster)
    assert message.properties["TRANSACTION_CHECK_TIMES"] == "1"
    svc.clock.now_ms += 60_000
    assert svc.check() == []
    assert svc.pending_by_group() == {}
    # the broker restarts from its files: the progress is in consumerOffset.json
    offsets = cluster.broker.consumer_offset_manager
    offsets.persist()
    text = offsets.path.read_text()
    assert f"{HALF_TOPIC}@{CHECK_GROUP}" in text and f"{OP_TOPIC}@{CHECK_GROUP}" in text


@pytest.mark.parametrize("immunity", ["60"])
async def test_check_immunity_time_delays_the_first_check(cluster, immunity):
    topic(cluster)
    await send_half(cluster, extra={"CHECK_IMMUNITY_TIME_IN_SECONDS": immunity})
    _, [half] = stored(cluster, HALF_TOPIC)
    svc = service(cluster, Clock(half.born_timestamp + 10_000))
    assert svc.check() == []                 # past transactionTimeOut, inside its immunity: re-put
    _, units = stored(cluster, HALF_TOPIC)
    assert units[-1].properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
    svc.clock.now_ms = half.born_timestamp + 61_000
    [check] = svc.check()
    assert check.group == "pg_tx"


@pytest.mark.parametrize("broker_overrides", [{"rejectTransactionMessage": "true"}])
async def test_reject_transaction_message(cluster):
    topic(cluster)
    resp = await send(cluster.client, cluster.broker_addr, "TopicTx", b"x",
                      extra={"TRAN_MSG": "true", "PGROUP": "pg"}, sys_flag=PREPARED)
    assert resp.code == 16 and "sending transaction message is forbidden" in resp.remark


async def test_operator_view_in_runtime_info_and_cli(cluster, capsys):
    topic(cluster)
    await send_half(cluster, group="pg_a")
    await send_half(cluster, group="pg_a")
    resp = await send_half(cluster, group="pg_b")
    assert await fetch_pending(cluster.broker_addr) == {"pg_a": 2, "pg_b": 1}
    assert (await end_tx(cluster, resp, ROLLBACK, group="pg_b")).code == 0
    assert await fetch_pending(cluster.broker_addr) == {"pg_a": 2}
    # the command line, as an operator runs it (its own trio loop, in a thread here)
    code = await trio.to_thread.run_sync(cli.main, ["transactions", "-b", cluster.broker_addr])
    out = capsys.readouterr().out
    assert code == 0
    assert [line.split() for line in out.splitlines()[1:]] == [["pg_a", "2"], ["total", "2"]]


async def test_crash_before_the_progress_is_written_checks_once(cluster):
    """A check round re-put the half message and moved its progress, and the process died before
    consumerOffset.json had the new progress: after the restart both copies are in the half queue
    from the old progress on. The next round asks the producer once, not once per copy."""
    topic(cluster)
    await send_half(cluster, extra={"UNIQ_KEY": "K1"})
    await send_half(cluster, extra={"UNIQ_KEY": "K2"})
    _, [half, _] = stored(cluster, HALF_TOPIC)
    svc = service(cluster, Clock(half.born_timestamp + 10_000))
    assert len(svc.check()) == 2
    offsets = cluster.broker.consumer_offset_manager
    offsets.commit_offset(CHECK_GROUP, HALF_TOPIC, 0, 0)    # the progress the file still had
    svc.clock.now_ms += 10_000
    checks = svc.check()
    assert sorted(c.header["msgId"] for c in checks) == ["K1", "K2"]
    assert offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == 4
    # answering the checks commits each message once
    for check in checks:
        assert (await end_tx(cluster, None, COMMIT, from_check=True, header=check.header)).code == 0
    svc.clock.now_ms += 10_000
    assert svc.check() == []
    assert len(await visible(cluster)) == 2

"""5.x timer messages driven with an injected clock: the send-side transform (Apache 5.3's
properties, rounding and refusals), the timing wheel's delivery (order, precision), a restart
with pending messages, and crashes between enqueue and checkpoint and in a slot's delivery."""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest

from pyrmq.broker.timer_service import TimerService, timer_illegal_remark, transform_timer_message
from pyrmq.codec.codes import ResponseCode
from pyrmq.codec.message import properties_to_string, tags_string_to_tags_code
from pyrmq.codec.timer_formats import (
    TIMER_CHECKPOINT,
    TIMER_LOG_UNIT,
    TIMER_LOG_UNIT_SIZE,
    TIMER_SLOT,
    TimerCheckpointLayout,
    TimerLogUnit,
    TimerSlot,
    pack_timer_log_unit,
    unpack_timer_log_unit,
)
from pyrmq.store.message_store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig
from pyrmq.codec.system_topics import TIMER_TOPIC
from pyrmq.store.timer_store import round_deliver_ms

T0 = 1_700_000_000_300   # wall clock ms at the first send (not a slot boundary)


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def config(tmp_path, **overrides) -> MessageStoreConfig:
    values = dict(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=1024 * 1024,
                  mapped_file_size_consume_queue=20 * 1000, max_hash_slot_num=64, max_index_num=256,
                  timer_max_delay_sec=3600, mapped_file_size_timer_log=TIMER_LOG_UNIT_SIZE * 8)
    values.update(overrides)
    return MessageStoreConfig(**values)


def open_broker_side(cfg: MessageStoreConfig, clock: Clock) -> tuple[DefaultMessageStore, TimerService]:
    store = DefaultMessageStore(cfg)
    store.start()
    timer = TimerService(store, clock=clock)
    timer.load()
    return store, timer


@contextlib.contextmanager
def broker_side(cfg: MessageStoreConfig, clock: Clock):
    """The store and its timer, stopped cleanly at the end."""
    store, timer = open_broker_side(cfg, clock)
    try:
        yield store, timer
    finally:
        timer.shutdown()
        store.shutdown()

def send_timer(store, cfg, clock, topic="TopicT", queue_id=1, body=b"x", **timer_props) -> str:
    """What the send processor stores for a timer message; returns its UNIQ_KEY."""
    uniq = uuid.uuid4().hex.upper()
    props = {"UNIQ_KEY": uniq, "TAGS": "TagT", "CLUSTER": "DefaultCluster", **timer_props}
    parked = transform_timer_message(props, topic, queue_id, cfg, clock())
    assert parked == (TIMER_TOPIC, 0)
    result = store.put_message(MessageExtBrokerInner(
        topic=TIMER_TOPIC, queue_id=0, flag=0, body=body, properties_string=properties_to_string(props),
        sys_flag=0, born_timestamp=clock(), born_host=("127.0.0.1", 5000), store_host=("127.0.0.1", 10911),
        tags_code=tags_string_to_tags_code("TagT")))
    assert result.status.name == "PUT_OK"
    return uniq


def tick(timer: TimerService) -> int:
    """One round of the service's loop: the files are opened (in a worker thread there) once
    there is a timer message, then the wheel turns."""
    if not timer.opened:
        timer.load()
    return timer.tick()


def delivered(store, topic="TopicT", queue_id=1):
    cq = store.find_consume_queue(topic, queue_id)
    if cq is None:
        return []
    return [store.look_message_by_offset(offset) for offset, _size, _tags in cq.iter_units(0)]


def run_until(timer, clock, until_ms, step_ms=10):
    """Tick every ``step_ms`` up to ``until_ms``; returns {body: first clock time it was seen}."""
    seen = {}
    while clock.now <= until_ms:
        tick(timer)
        for message in delivered(timer.store):
            seen.setdefault(message.body, clock.now)
        clock.now += step_ms
    return seen


# --------------------------------------------------------------------------- formats

def test_construct_layouts_agree_with_the_structs():
    unit = pack_timer_log_unit(1, 56, 2_000, 1_000, 4096, 200, 7)
    assert len(unit) == TIMER_LOG_UNIT_SIZE == TimerLogUnit.sizeof()
    parsed = TimerLogUnit.parse(unit)
    assert (parsed.flags, parsed.prev_pos, parsed.deliver_ms, parsed.enqueue_ms, parsed.commit_log_offset,
            parsed.size, parsed.queue_offset) == (1, 56, 2_000, 1_000, 4096, 200, 7)
    assert unpack_timer_log_unit(unit) == (1, 56, 2_000, 1_000, 4096, 200, 7)
    torn = unit[:-5] + b"\0" + unit[-4:]
    assert unpack_timer_log_unit(torn) is None and unpack_timer_log_unit(bytes(len(unit))) is None
    assert TIMER_LOG_UNIT.size + 4 == TimerLogUnit.sizeof()
    assert TIMER_SLOT.size == TimerSlot.sizeof()
    assert TimerSlot.build(dict(time_ms=5, last_pos=6, num=7, reserved=0)) == TIMER_SLOT.pack(5, 6, 7, 0)
    assert TimerCheckpointLayout.sizeof() == 4096 and TIMER_CHECKPOINT.size == 64


# --------------------------------------------------------------------------- send-side transform

def test_transform_as_apache_5(tmp_path):
    cfg = config(tmp_path)
    props = {"TIMER_DELAY_MS": "2500", "UNIQ_KEY": "U"}
    assert transform_timer_message(props, "TopicT", 3, cfg, T0) == (TIMER_TOPIC, 0)
    # the request properties stay; Apache adds these three
    assert props == {"TIMER_DELAY_MS": "2500", "UNIQ_KEY": "U", "TIMER_OUT_MS": str((T0 + 2500) // 1000 * 1000),
                     "REAL_TOPIC": "TopicT", "REAL_QID": "3"}
    props = {"TIMER_DELAY_SEC": "7"}
    transform_timer_message(props, "TopicT", 0, cfg, T0)
    assert props["TIMER_OUT_MS"] == str((T0 + 7000) // 1000 * 1000)
    # an exact multiple of the precision goes one slot earlier (its slot is delivered once passed)
    props = {"TIMER_DELIVER_MS": "1700000009000"}
    transform_timer_message(props, "TopicT", 0, cfg, T0)
    assert props["TIMER_OUT_MS"] == "1700000008000"
    assert round_deliver_ms(1_234, 100) == 1_200 and round_deliver_ms(1_200, 100) == 1_100
    fine = config(tmp_path, timer_precision_ms=100)
    props = {"TIMER_DELAY_MS": "777"}
    transform_timer_message(props, "TopicT", 0, fine, T0)
    assert props["TIMER_OUT_MS"] == str((T0 + 777) // 100 * 100)
    # a delay level wins elsewhere; TIMER_OUT_MS already there (a delivered copy): not a timer message
    assert transform_timer_message({"TIMER_DELAY_MS": "5", "TIMER_OUT_MS": "1"}, "TopicT", 0, cfg, T0) is None
    assert transform_timer_message({"TIMER_DELAY_MS": "5"}, TIMER_TOPIC, 0, cfg, T0) is None
    # due already: stored as it is, timer properties and all
    props = {"TIMER_DELIVER_MS": str(T0 - 1)}
    assert transform_timer_message(props, "TopicT", 0, cfg, T0) is None and props == {"TIMER_DELIVER_MS": str(T0 - 1)}


def test_refusals_carry_apache_codes_and_remarks(tmp_path):
    cfg = config(tmp_path, timer_max_delay_sec=259200)
    illegal = (ResponseCode.MESSAGE_ILLEGAL,
               "timer message illegal, the delay time should not be bigger than the max delay 259200000ms; or if set "
               "del msg, the delay time should be bigger than the current time")
    assert timer_illegal_remark(cfg) == illegal[1]
    assert transform_timer_message({"TIMER_DELAY_SEC": "259201"}, "T", 0, cfg, T0) == illegal
    assert transform_timer_message({"TIMER_DELAY_MS": "259200001"}, "T", 0, cfg, T0) == illegal
    assert transform_timer_message({"TIMER_DELAY_MS": "259200000"}, "T", 0, cfg, T0) == (TIMER_TOPIC, 0)
    assert transform_timer_message({"TIMER_DELIVER_MS": "soon"}, "T", 0, cfg, T0) == illegal
    assert transform_timer_message({"TIMER_DELAY_MS": "1.5"}, "T", 0, cfg, T0) == illegal
    assert transform_timer_message({"TIMER_DELIVER_MS": "1", "TIMER_DEL_UNIQKEY": "T+U"}, "T", 0, cfg, T0) == illegal
    off = config(tmp_path, timer_wheel_enable=False)
    assert transform_timer_message({"TIMER_DELAY_MS": "10"}, "T", 0, off, T0) == (
        ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false")


# --------------------------------------------------------------------------- delivery

def test_delivery_order_and_precision(tmp_path):
    cfg = config(tmp_path)
    clock = Clock()
    with broker_side(cfg, clock) as (store, timer):
        due = {}
        for body, delay in ((b"a", 3000), (b"b", 1200), (b"c", 3000), (b"d", 1)):
            send_timer(store, cfg, clock, body=body, TIMER_DELAY_MS=str(delay))
            due[body] = T0 + delay
            clock.now += 1   # sent one after the other
        seen = run_until(timer, clock, T0 + 5000)
        assert set(seen) == {b"a", b"b", b"c", b"d"}
        for body, at in seen.items():   # never early, and within the precision of the due time
            assert due[body] <= at <= due[body] + cfg.timer_precision_ms + 10, (body, due[body], at)
        # by slot, then oldest first within a slot
        assert [m.body for m in delivered(store)] == [b"d", b"b", b"a", b"c"]
        message = delivered(store)[2]
        props = message.properties
        assert message.topic == "TopicT" and message.queue_id == 1
        assert props["REAL_TOPIC"] == "TopicT" and props["REAL_QID"] == "1"   # kept, as Apache
        assert props["TIMER_OUT_MS"] == str((T0 + 3000) // 1000 * 1000) and props["TIMER_DELAY_MS"] == "3000"
        assert int(props["TIMER_ENQUEUE_MS"]) % 1000 == 0   # the wheel's write time when taken in
        assert int(props["TIMER_DEQUEUE_MS"]) == seen[b"a"]
        assert timer.timer_store.stats.delivered == 4


def test_a_message_taken_in_late_is_delivered_at_once(tmp_path):
    """Sent while the timer was not running (or stalled) and due by the time it is taken in."""
    cfg = config(tmp_path)
    clock = Clock()
    with broker_side(cfg, clock) as (store, timer):
        send_timer(store, cfg, clock, body=b"late", TIMER_DELAY_MS="1500")
        clock.now += 5000
        tick(timer)
        [message] = delivered(store)
        assert message.properties["TIMER_ENQUEUE_MS"] == str((1 << 63) - 1)   # Apache's "never enqueued"


def test_recall_marker_cancels_its_message(tmp_path):
    cfg = config(tmp_path)
    clock = Clock()
    with broker_side(cfg, clock) as (store, timer):
        deliver_at = str(T0 + 2000)
        uniq = send_timer(store, cfg, clock, body=b"recalled", TIMER_DELIVER_MS=deliver_at)
        send_timer(store, cfg, clock, body=b"kept", TIMER_DELIVER_MS=deliver_at)
        send_timer(store, cfg, clock, body=b"0", TIMER_DELIVER_MS=deliver_at, TIMER_DEL_UNIQKEY=f"TopicT+{uniq}")
        run_until(timer, clock, T0 + 3000)
        assert [m.body for m in delivered(store)] == [b"kept"]
        assert timer.timer_store.stats.recalled == 1


# --------------------------------------------------------------------------- restarts and crashes

def test_restart_with_pending_messages(tmp_path):
    cfg = config(tmp_path)
    clock = Clock()
    store, timer = open_broker_side(cfg, clock)
    for i in range(12):   # over several timer log files (8 units each)
        send_timer(store, cfg, clock, body=b"m%d" % i, TIMER_DELAY_MS=str(2000 + 300 * i))
    send_timer(store, cfg, clock, body=b"early", TIMER_DELAY_MS="200")
    clock.now += 1200
    tick(timer)
    assert [m.body for m in delivered(store)] == [b"early"]
    assert timer.timer_store.queue_offset == 13
    timer.shutdown()
    store.shutdown()

    with broker_side(cfg, clock) as (store, timer):
        ts = timer.timer_store
        assert not ts.wheel.created and ts.queue_offset == 13 and ts.stats.possible_duplicates == 0
        assert len(os.listdir(os.path.join(cfg.timer_dir(), "log"))) == 3   # two with units, the next one made ahead
        seen = run_until(timer, clock, T0 + 7000)
        assert sorted(seen) == sorted([b"early"] + [b"m%d" % i for i in range(12)])
        assert len(delivered(store)) == 13   # each once
        for i in range(12):
            assert seen[b"m%d" % i] >= T0 + 2000 + 300 * i


def sent_and_taken_in(tmp_path, sends: list[tuple[bytes, int]]):
    """A store and timer, the (body, delay ms) messages sent and taken into the wheel."""
    cfg = config(tmp_path)
    clock = Clock()
    store, timer = open_broker_side(cfg, clock)
    for body, delay in sends:
        send_timer(store, cfg, clock, body=body, TIMER_DELAY_MS=str(delay))
    tick(timer)
    return cfg, clock, store, timer


def crash_timer(timer: TimerService) -> None:
    """What a kill -9 leaves of the timer: its mappings' writes (the page cache keeps them), no
    flush and no checkpoint of what was flushed."""
    timer.timer_store.close()


def test_crash_between_enqueue_and_checkpoint(tmp_path):
    cfg, clock, store, timer = sent_and_taken_in(tmp_path, [(b"p%d" % i, 1500 + 700 * i) for i in range(5)])
    timer.timer_store.flush(timer.timer_store.flush_point())   # the first five are checkpointed
    for i in range(5, 10):
        send_timer(store, cfg, clock, body=b"p%d" % i, TIMER_DELAY_MS=str(1500 + 700 * i))
    tick(timer)   # the next five are in the log and the wheel, not in the checkpoint
    crash_timer(timer)
    store.shutdown()

    with broker_side(cfg, clock) as (store, timer):
        assert timer.timer_store.queue_offset == 10   # from the log, not the older checkpoint
        seen = run_until(timer, clock, T0 + 9000, step_ms=50)
        assert [m.body for m in delivered(store)] == [b"p%d" % i for i in range(10)]   # each once, in order
        assert len(seen) == 10


def test_crash_with_a_torn_last_unit_takes_its_message_in_again(tmp_path):
    cfg, clock, store, timer = sent_and_taken_in(tmp_path, [(b"t%d" % i, 2000) for i in range(3)])
    end = timer.timer_store.log.end
    mf = timer.timer_store.log.queue.find_mapped_file_by_offset(end - TIMER_LOG_UNIT_SIZE)
    rel = end - TIMER_LOG_UNIT_SIZE - mf.file_from_offset
    mf.view[rel + 10:rel + 12] = b"\xff\xff"   # the last unit half written
    timer.timer_store.checkpoint.set("log_end", end - TIMER_LOG_UNIT_SIZE)   # the checkpoint cannot tell: the torn unit does
    crash_timer(timer)
    store.shutdown()

    with broker_side(cfg, clock) as (store, timer):
        assert timer.timer_store.queue_offset == 2   # the torn unit's message is taken in again
        run_until(timer, clock, T0 + 4000)
        assert sorted(m.body for m in delivered(store)) == [b"t0", b"t1", b"t2"]


class CrashAfter(Exception):
    pass


def test_crash_in_a_slot_delivery_is_reported_and_resumed(tmp_path):
    cfg, clock, store, timer = sent_and_taken_in(tmp_path, [(b"s%d" % i, 2000) for i in range(4)])
    real_put = timer.timer_store._put
    calls = []

    def put_then_die(message):
        if len(calls) == 2:
            raise CrashAfter()   # the process dies before its third put
        calls.append(message)
        return real_put(message)

    timer.timer_store._put = put_then_die
    clock.now = T0 + 3000
    with pytest.raises(CrashAfter):
        tick(timer)
    crash_timer(timer)
    store.shutdown()

    with broker_side(cfg, clock) as (store, timer):
        # the slot was being delivered: the next message may have been put (not here) -- reported
        assert timer.timer_store.stats.possible_duplicates == 1
        tick(timer)
        assert [m.body for m in delivered(store)] == [b"s0", b"s1", b"s2", b"s3"]   # none lost, none twice


def test_wheel_lost_is_rebuilt_from_the_log(tmp_path):
    cfg, clock, store, timer = sent_and_taken_in(tmp_path, [(b"w%d" % i, 1000 + 1000 * (i % 2)) for i in range(6)])
    timer.shutdown()
    store.shutdown()
    os.unlink(os.path.join(cfg.timer_dir(), "wheel"))
    with broker_side(cfg, clock) as (store, timer):
        run_until(timer, clock, T0 + 3000)
        assert [m.body for m in delivered(store)] == [b"w0", b"w2", b"w4", b"w1", b"w3", b"w5"]


def test_pending_messages_survive_a_change_of_precision(tmp_path):
    cfg = config(tmp_path, timer_precision_ms=500)
    clock = Clock()
    with broker_side(cfg, clock) as (store, timer):
        for i in range(4):
            send_timer(store, cfg, clock, body=b"q%d" % i, TIMER_DELAY_MS=str(1250 + 500 * i))
        tick(timer)
        send_timer(store, cfg, clock, body=b"later", TIMER_DELAY_MS="4250")   # not taken in before the stop
    due = {b"q%d" % i: T0 + 1250 + 500 * i for i in range(4)}
    due[b"later"] = T0 + 4250
    coarse = config(tmp_path, timer_precision_ms=1000)
    with broker_side(coarse, clock) as (store, timer):
        seen = run_until(timer, clock, T0 + 6000)
        assert sorted(seen) == sorted(due)
        for body, at in seen.items():   # never early; within the new precision
            assert due[body] <= at <= due[body] + 1000 + 10, (body, at - due[body])


def test_delivered_log_files_are_deleted(tmp_path):
    cfg, clock, store, timer = sent_and_taken_in(tmp_path, [(b"d%d" % i, 1000 + 100 * i) for i in range(20)])
    try:
        run_until(timer, clock, T0 + 4000)
        assert len(delivered(store)) == 20
        log_dir = os.path.join(cfg.timer_dir(), "log")
        assert len(os.listdir(log_dir)) >= 3
        clock.now += timer.timer_store.span_ms + 1000   # a unit is delivered within the span of its enqueue
        tick(timer)
        timer.timer_store.flush(timer.timer_store.flush_point())
        assert sorted(os.listdir(log_dir))[0] == f"{2 * 8 * TIMER_LOG_UNIT_SIZE:020d}"   # the first two are gone
    finally:
        timer.shutdown()
        store.shutdown()


def test_no_timer_files_without_timer_messages(tmp_path):
    """The wheel (6 MB by default) is made with the first timer message, not at every start."""
    cfg = config(tmp_path, timer_max_delay_sec=3 * 24 * 3600)
    clock = Clock()
    with broker_side(cfg, clock) as (store, timer):
        assert tick(timer) == 0 and not timer.opened
        assert not os.path.exists(cfg.timer_dir())
        send_timer(store, cfg, clock, body=b"first", TIMER_DELAY_MS="1000")
        tick(timer)
        assert timer.opened and os.path.getsize(os.path.join(cfg.timer_dir(), "wheel")) == 259_320 * 24

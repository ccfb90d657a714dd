"""The NameServer's topic queue table: a registration's merge (the C function and its twin give
the same table and the same changed topics), and the inner dicts shared between topics, which
registration, a write-perm change and a broker's removal replace and never change in place."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrmq.codec.register_body import RegisteredTopic
from pyrmq.namesrv import route_info
from pyrmq.namesrv.route_info import QueueData, RouteInfoManager

try:
    from pyrmq.codec import _native
except ImportError:
    _native = None   # type: ignore[assignment]

MERGES = [pytest.param(route_info.merge_queue_datas_py, id="twin"),
          pytest.param(getattr(_native, "merge_queue_datas", None), id="native",
                       marks=pytest.mark.skipif(_native is None, reason="pyrmq.codec._native not built"))]

# members as a typed body gives them, and as a generic parse may ("8": converted by int())
member = st.sampled_from([0, 4, 8, "8", 6])
row = st.builds(RegisteredTopic, st.sampled_from([f"T{i}" for i in range(6)]), member, member, member,
                st.sampled_from([0, 1]))
registration = st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(row, max_size=12))


def snapshot(table: dict) -> dict:
    """The table's content, and every inner dict's by identity: a merge must leave those as they were."""
    return {id(queues): (queues, dict(queues)) for queues in table.values()}


def assert_untouched(before: dict) -> None:
    for queues, content in before.values():
        assert queues == content, "an inner dict was changed in place"


@settings(max_examples=300, deadline=None)
@given(registrations=st.lists(registration, max_size=6))
def test_native_merge_equals_its_twin(registrations):
    if _native is None:
        pytest.skip("pyrmq.codec._native not built")
    twin, native = RouteInfoManager(), RouteInfoManager()
    for broker_name, rows in registrations:
        before = snapshot(native.topic_queue_table)
        expected = route_info.merge_queue_datas_py(twin.topic_queue_table, broker_name, rows,
                                                   twin._queue_datas, twin._queue_data)
        got = _native.merge_queue_datas(native.topic_queue_table, broker_name, rows,
                                        native._queue_datas, native._queue_data)
        assert got == expected
        assert native.topic_queue_table == twin.topic_queue_table
        assert_untouched(before)


@pytest.mark.parametrize("merge", MERGES)
def test_a_registration_shares_one_dict_between_its_topics(merge):
    routes = RouteInfoManager()
    rows = [RegisteredTopic(f"T{i}", 8, 8, 6, 0) for i in range(1000)]
    for broker_name in ("a", "b"):
        assert merge(routes.topic_queue_table, broker_name, rows, routes._queue_datas, routes._queue_data) == []
    table = routes.topic_queue_table
    assert len({id(queues) for queues in table.values()}) == 1
    assert list(table["T0"]) == ["a", "b"]   # registration order, as the routes list them
    assert table["T999"]["b"] == QueueData("b", 8, 8, 6, 0)

    # one topic changes on broker a: it alone gets another dict, the others keep theirs
    before = snapshot(table)
    changed = merge(table, "a", [RegisteredTopic("T5", 4, 4, 6, 0), *rows[6:]], routes._queue_datas,
                    routes._queue_data)
    assert changed == ["T5"]
    assert_untouched(before)
    assert table["T5"]["a"].write_queue_nums == 4 and list(table["T5"]) == ["a", "b"]
    assert table["T4"]["a"].write_queue_nums == 8 and table["T4"] is table["T999"]


@pytest.mark.parametrize("merge", MERGES)
def test_a_failing_member_raises_and_leaves_the_shared_dicts_alone(merge):
    routes = RouteInfoManager()
    merge(routes.topic_queue_table, "a", [RegisteredTopic("T1", 8, 8, 6, 0)], routes._queue_datas, routes._queue_data)
    before = snapshot(routes.topic_queue_table)
    with pytest.raises(ValueError):
        merge(routes.topic_queue_table, "a", [RegisteredTopic("T1", "x", 8, 6, 0)], routes._queue_datas,
              routes._queue_data)
    with pytest.raises(AttributeError):
        merge(routes.topic_queue_table, "a", [object()], routes._queue_datas, routes._queue_data)
    assert_untouched(before)


def test_write_perm_and_removal_replace_the_shared_dicts():
    routes = RouteInfoManager()
    rows = [RegisteredTopic(f"T{i}", 8, 8, 6, 0) for i in range(50)]
    for n, name in enumerate(("a", "b")):
        routes.register_broker("C", f"10.0.0.{n}:10911", name, 0, "", {"counter": 1}, rows, [], None)
    routes.register_broker("C", "10.0.0.9:10911", "solo", 0, "", {"counter": 1}, [RegisteredTopic("Own", 1, 1, 6, 0)],
                           [], None)
    table = routes.topic_queue_table
    before = snapshot(table)

    assert routes.change_write_perm("a", wipe=True) == 50
    assert_untouched(before)
    assert {queues["a"].perm for topic, queues in table.items() if topic != "Own"} == {4}
    assert {queues["b"].perm for topic, queues in table.items() if topic != "Own"} == {6}
    assert len({id(table[f"T{i}"]) for i in range(50)}) == 1

    before = snapshot(table)
    routes.unregister_broker("C", "10.0.0.0:10911", "a", 0)
    assert_untouched(before)
    assert all(list(table[f"T{i}"]) == ["b"] for i in range(50))
    routes.unregister_broker("C", "10.0.0.9:10911", "solo", 0)
    assert "Own" not in table and len(table) == 50
    assert routes.topic_route_body("T7", True) is not None


def test_an_unchanged_registration_replaces_nothing():
    # the next registration's body decodes to other row objects with equal members
    routes = RouteInfoManager()
    rows = [RegisteredTopic(f"T{i}", 8, 8, 6, 0) for i in range(10)]
    routes._update_queue_datas("a", rows)
    first = routes.topic_queue_table["T0"]
    routes._update_queue_datas("a", copy.deepcopy(rows))
    assert routes.topic_queue_table["T0"] is first   # nothing changed: nothing replaced


# one change of the tables: (operation, broker name, address index, broker id, rows, filter servers, counter)
change = st.tuples(st.sampled_from(["register", "register", "unregister", "close", "wipe", "unwipe", "delete"]),
                   st.sampled_from(["a", "b", "c"]), st.integers(0, 3), st.sampled_from([0, 1]),
                   st.lists(row, max_size=6), st.sampled_from([[], ["10.0.0.1:45454"], ["10.0.0.2:45454"]]),
                   st.integers(0, 2))


@settings(max_examples=300, deadline=None)
@given(changes=st.lists(change, max_size=12), order_conf=st.sampled_from([None, "b:4"]))
def test_cached_routes_equal_the_routes_built_from_the_tables(changes, order_conf):
    routes = RouteInfoManager()
    channels = [object() for _ in range(4)]
    topics = [f"T{i}" for i in range(6)]

    def check() -> None:
        for topic in topics:
            queues = routes.topic_queue_table.get(topic)
            for standard in (False, True):
                expected = routes._route_body(queues, standard, order_conf) if queues else None
                assert routes.topic_route_body(topic, standard, order_conf) == expected

    for op, name, n, broker_id, rows, filter_servers, counter in changes:
        addr = f"10.0.1.{n}:10911"
        if op == "register":
            routes.register_broker("C", addr, name, broker_id, addr, {"counter": counter}, rows, filter_servers,
                                   channels[n])
        elif op == "unregister":
            routes.unregister_broker("C", addr, name, broker_id)
        elif op == "close":
            routes.on_channel_destroy(channels[n])
        elif op == "delete":
            routes.delete_topic(rows[0].topic_name if rows else "T0")
        else:
            routes.change_write_perm(name, wipe=op == "wipe")
        check()

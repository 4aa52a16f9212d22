"""The task lifecycle on a queue (issue 18): delayed puts, release with a delay, ttl and ttr,
bury, peek and delete by task id, and the statistics per state (utube: tests/test_utube.py).

Every state change is one script; these tests check each transition on a real server,
what a plain spec client sees of it, and that a consumer SIGKILLed around it loses nothing.
No timed assertions: a due item is waited for with a generous timeout, never measured.
"""

from __future__ import annotations

import hashlib
import pickle
import time
from typing import Any

import pytest
import redis

import pressure
from pressure.testing.spec_client import SpecClient

from .faults_helpers import fork_child, kill_and_reap
from .helpers import assert_invariants

#: How long a test waits at most for an item that is due (the waiter looks every second).
DUE = 10.0


def _spec(r: redis.Redis, q: pressure.Queue[Any]) -> SpecClient:
    return SpecClient(r, q.name, prefix=q.prefix)


# -- delay -----------------------------------------------------------------------------------

def test_a_delayed_item_is_invisible_until_due(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("d", reliable=True)
    q.put("later", delay=0.3)
    q.put("now")
    # not in the list, not in its length; counted as produced (join() waits for it)
    assert q.qsize() == 1
    assert r.zcard(q.keys.delayed) == 1
    stats = q.statistics()
    assert stats.produced_messages == 2 and stats.size == 1 and q.unfinished_tasks == 2
    assert q.get_nowait() == "now"
    q.task_done()
    assert q.get(timeout=DUE) == "later"  # a blocked consumer gets it once due
    q.task_done()
    assert r.exists(q.keys.delayed) == 0
    assert q.unfinished_tasks == 0


def test_due_order_and_fifo_among_equal_due_times(make_queue: Any) -> None:
    q = make_queue("o")
    q.put("b", delay=0.4)
    q.put_many(["a1", "a2", "a3"], delay=0.2)  # one due time: in order
    q.put("c", delay=0.6)
    got = [q.get(timeout=DUE) for _ in range(5)]
    assert got == ["a1", "a2", "a3", "b", "c"]


def test_due_items_enter_behind_what_is_queued_and_before_later_puts(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("f")
    q.put("first")
    q.put_many(["d1", "d2"], delay=0.05)
    time.sleep(0.1)  # due now; nobody touched the queue yet
    assert r.zcard(q.keys.delayed) == 2
    q.put("after")  # the put moves the due ones in first
    assert r.exists(q.keys.delayed) == 0
    assert [q.get_nowait() for _ in range(4)] == ["first", "d1", "d2", "after"]


def test_delay_zero_or_none_is_a_plain_put(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("z")
    q.put(1, delay=0)
    q.put_many([2, 3], delay=None)
    assert q.qsize() == 3 and r.exists(q.keys.delayed) == 0


@pytest.mark.parametrize("bad, exc", [(-1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                                      ("1", TypeError), (True, TypeError), (10**13, ValueError)])
def test_a_bad_delay_is_refused_before_anything_is_sent(make_queue: Any, r: redis.Redis, bad: Any,
                                                        exc: type[Exception]) -> None:
    q = make_queue("bad")
    before = q.statistics()
    with pytest.raises(exc):
        q.put(1, delay=bad)
    with pytest.raises(exc):
        q.put_many([1, 2], delay=bad)
    assert q.statistics() == before and r.exists(q.keys.delayed) == 0


def test_delayed_items_count_against_maxsize(make_queue: Any, r: redis.Redis) -> None:
    """As in tarantool, a delayed item is a task: it takes its place under the bound."""
    q = make_queue("bounded", 2)
    q.put("x", delay=0.3)
    q.put("y")
    assert q.qsize() == 1
    with pytest.raises(pressure.Full):
        q.put_nowait("z")
    with pytest.raises(pressure.Full):
        q.put("z", delay=5, block=False)
    with pytest.raises(pressure.Full) as caught:
        q.put_many(["z1", "z2"], delay=1, block=False)
    assert caught.value.items_put == 0
    assert r.llen(q.keys.not_full) == 0  # no permit while delayed + queued fill the bound
    assert q.get_nowait() == "y"
    time.sleep(0.4)  # x is due: the next put moves it in ahead of z
    q.put("z", timeout=DUE)
    assert [q.get(timeout=DUE), q.get(timeout=DUE)] == ["x", "z"]


def test_put_many_with_delay_stops_at_the_bound(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("pm", 3)
    q.put("q")
    with pytest.raises(pressure.Full) as caught:
        q.put_many(["a", "b", "c"], delay=0.1, block=False)
    assert caught.value.items_put == 2
    assert r.zcard(q.keys.delayed) == 2


def test_due_items_never_push_the_list_past_the_bound(make_queue: Any, r: redis.Redis) -> None:
    """A plain spec client cannot see delayed items, so it may fill the list to the bound
    meanwhile: a due item then waits in the sorted set until there is room."""
    q = make_queue("room", 2)
    q.put("late", delay=0.05)
    spec = _spec(r, q)
    spec.put(b"s1")  # the spec client sees length 0 < 2, and 1 < 2
    time.sleep(0.1)
    q_bytes = make_queue("room", serializer="bytes")
    spec.put(b"s2")
    assert r.llen(q.keys.base) == 2 and r.zcard(q.keys.delayed) == 1
    assert q_bytes.get_nowait() == b"s1"  # the get moves nothing: the list was full when it looked
    assert r.llen(q.keys.base) <= 2
    assert q_bytes.get_nowait() == b"s2"
    assert q.get(timeout=DUE) == "late"


def test_due_items_never_push_a_list_that_items_given_back_overfilled_further(make_queue: Any,
                                                                              r: redis.Redis) -> None:
    """Items given back go in past the bound (they were accepted when put); a due item then
    waits, out of the list, until a get makes room, as when the list is exactly full."""
    q = make_queue("overfull", 2, reliable=True)
    q.put_many(["a", "b"])
    held = [q.receive(block=False), q.receive(block=False)]
    q.put("late", delay=0.05)
    q.put("c")
    time.sleep(0.2)  # due; no script has moved it in yet
    assert held[1].release() and held[0].release()  # [a, b, c]: one past the bound
    assert r.llen(q.keys.base) == 3
    assert q.receive(block=False).item == "a"
    assert r.llen(q.keys.base) == 2 and r.zcard(q.keys.delayed) == 1
    assert [q.receive(block=False).item for _ in range(3)] == ["b", "c", "late"]
    assert_invariants(r, q)


@pytest.mark.parametrize("reliable", [False, True])
def test_a_get_many_that_empties_the_list_takes_the_due_items_the_bound_kept_out(make_queue: Any, r: redis.Redis,
                                                                                 reliable: bool) -> None:
    """An item given back fills the list to the bound while a delayed item falls due: the due
    item waits out of the list, but a get_many that takes the list's items has room for it
    and takes it in turn, as a get of items with a state of their own does."""
    holder = make_queue("keptout", 2, reliable=True)
    holder.put("a")
    held = holder.receive(block=False)
    holder.put("b")
    holder.put("late", delay=0.05)
    time.sleep(0.2)  # due; no script has moved it in yet
    assert held.release()  # back at the head: the list is full, [a, b]
    assert r.llen(holder.keys.base) == 2 and r.zcard(holder.keys.delayed) == 1
    getter = make_queue("keptout", reliable=reliable)
    assert getter.get_many(3) == ["a", "b", "late"]
    assert_invariants(r, getter)


def test_a_spec_client_sees_a_due_item_as_any_other(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("spec", serializer="bytes")
    spec = _spec(r, q)
    q.put(b"d", delay=0.05)
    assert spec.length() == 0
    with pytest.raises(Exception):
        spec.get_nowait()  # not visible yet
    time.sleep(0.1)
    q.put(b"p")  # any pressure client's put or get moves due items in
    assert spec.length() == 2
    assert spec.get_nowait() == b"d" and spec.get_nowait() == b"p"


def test_a_closed_queue_is_drained_only_after_its_delayed_items(make_queue: Any) -> None:
    q = make_queue("closing")
    q.put("late", delay=0.3)
    q.close()
    with pytest.raises(pressure.Empty):
        q.get_nowait()  # not drained: ShutDown would say so
    assert q.get(timeout=DUE) == "late"
    with pytest.raises(pressure.ShutDown):
        q.get(timeout=DUE)


def test_immediate_shutdown_discards_delayed_items(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("imm")
    q.put("a")
    q.put_many(["b", "c"], delay=60)
    q.shutdown(immediate=True)
    assert r.exists(q.keys.delayed) == 0
    assert q.statistics().discarded_messages == 3 and q.unfinished_tasks == 0


def test_delete_removes_delayed_items(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("del")
    q.put("a", delay=60)
    q.delete()
    assert r.exists(q.keys.delayed) == 0


@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_delay_on_ordered_queues(url: str, prefix: str, kind: str) -> None:
    cls = pressure.LifoQueue if kind == "lifo" else pressure.PriorityQueue
    q: pressure.Queue[int] = cls("ord", url=url, prefix=prefix)
    q.put(5, delay=0.1)
    q.put(1)
    assert q.qsize() == 1
    assert q.get_nowait() == 1
    assert q.get(timeout=DUE) == 5
    q.put_many([3, 2], delay=0.05)
    time.sleep(0.1)
    q.put(9)
    got = [q.get_nowait() for _ in range(3)]
    assert sorted(got) == [2, 3, 9]
    if kind == "priority":
        assert got == [2, 3, 9]
    q.delete()


def _consume(url: str, prefix: str, name: str, marker: str) -> None:
    """Runs in a forked child: one reliable get, then mark ``marker`` and wait to be killed."""
    q: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix, reliable=True)
    q.get(timeout=DUE)
    redis.Redis.from_url(url).set(marker, 1)
    time.sleep(60)


def _wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("when", ["waiting", "holding"])
def test_a_consumer_killed_around_a_due_item_loses_nothing(url: str, r: redis.Redis, make_queue: Any,
                                                           when: str) -> None:
    """SIGKILL a reliable consumer while it waits (the registered waiter) for a delayed item,
    or after its get returned the item once due: the item is delivered again (at least
    once), never lost, and the queue's invariants hold."""
    q = make_queue("kill", reliable=True)
    marker = f"{q.prefix}:test:returned"
    q.put("job", delay=0.5 if when == "holding" else 2.0)
    pid = fork_child(_consume, url, q.prefix, "kill", marker)
    try:
        if when == "waiting":
            _wait_for(lambda: r.get(q.keys.waiter) is not None and r.zcard(q.keys.delayed) == 1,
                      "the child to wait")
        else:
            _wait_for(lambda: r.exists(marker), "the child's get")
    finally:
        kill_and_reap(pid)
    d = q.receive(timeout=DUE * 3)  # a dead consumer on this host is recovered at once
    assert d.item == "job" and d.deliveries == (2 if when == "holding" else 1)
    d.ack()
    assert r.exists(q.keys.delayed) == 0
    assert_invariants(r, q)


# -- release(delay=) -------------------------------------------------------------------------

def test_release_with_a_delay_keeps_the_delivery_count(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("rel", reliable=True)
    q.put("a")
    q.put("b")
    d = q.receive(timeout=DUE)
    assert d.item == "a" and d.deliveries == 1
    assert d.release(delay=0.3)
    assert not d.release(delay=0.3)  # settled already
    assert r.zcard(q.keys.delayed) == 1 and q.in_flight() == []
    stats = q.statistics()
    assert stats.size == 1 and stats.consumed_messages == 0  # released: not consumed any more
    assert q.get_nowait() == "b"
    q.task_done()
    d2 = q.receive(timeout=DUE)
    assert d2.item == "a" and d2.deliveries == 2
    d2.release()  # without a delay: straight back to the head
    d3 = q.receive(block=False)
    assert d3.item == "a" and d3.deliveries == 3
    d3.ack()
    assert_invariants(r, q)


def test_release_with_a_delay_past_max_deliveries_dead_letters(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("relmax", reliable=True, max_deliveries=1)
    q.put("poison")
    assert q.receive(timeout=DUE).release(delay=60)
    assert r.exists(q.keys.delayed) == 0
    assert [pickle.loads(d.payload) for d in q.dead_letters()] == ["poison"]


def test_a_bad_release_delay_is_refused_and_changes_nothing(make_queue: Any) -> None:
    q = make_queue("relbad", reliable=True)
    q.put("a")
    d = q.receive(timeout=DUE)
    with pytest.raises(ValueError):
        d.release(delay=-1)
    with pytest.raises(TypeError):
        d.release(delay="1")
    assert [pickle.loads(f.payload) for f in q.in_flight()] == ["a"]
    assert d.ack()


# -- ttl and ttr -----------------------------------------------------------------------------

def test_an_item_not_taken_within_its_ttl_is_dropped(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ttl", reliable=True)
    q.put("old", ttl=0.05)
    q.put("new")
    time.sleep(0.1)
    assert q.qsize() == 1  # past its ttl: not counted; dropped when a get reaches it, never handed out
    assert r.llen(q.keys.base) == 2 and q.statistics().expired == 1
    assert q.get_nowait() == "new"
    assert int(r.hget(q.keys.counts, "expired") or 0) == 1
    assert q.unfinished_tasks == 1  # the expired one counts as done, as a discarded one
    q.task_done()
    assert q.unfinished_tasks == 0
    assert r.exists(q.keys.meta) == 0 and q.dead_letters() == []


def test_an_expired_item_can_be_dead_lettered(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ttld", reliable=True, ttl=0.05, dead_letter_expired=True)
    q.put_many(["a", "b"])
    time.sleep(0.1)
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    dead = q.dead_letters()
    assert [(pickle.loads(d.payload), d.reason) for d in dead] == [("a", "expired"), ("b", "expired")]
    assert q.unfinished_tasks == 0  # done, as dead letters: join() does not wait for them
    assert q.kick() == 2
    assert q.unfinished_tasks == 2  # back in the queue (with no ttl left to run): not done again


@pytest.mark.parametrize("reliable", [False, True])
@pytest.mark.parametrize("how", ["get", "get_many", "blocking get"])
def test_a_shut_down_queue_whose_items_all_expired_is_drained_at_the_first_get(
        make_queue: Any, reliable: bool, how: str) -> None:
    """A get that drops the last items as expired, on a shut-down queue, raises ShutDown: it is
    closed and empty. (The model found it: that get said Empty, the next one ShutDown.)"""
    q = make_queue(f"ttlsd{int(reliable)}{how[0]}{len(how)}", reliable=reliable)
    q.put_many(["a", "b"], ttl=0.05)
    time.sleep(0.1)
    q.shutdown()
    with pytest.raises(pressure.ShutDown):
        if how == "get":
            q.get_nowait()
        elif how == "get_many":
            q.get_many(2, block=False)
        else:
            q.get(timeout=5)
    assert q.qsize() == 0 and q.statistics().expired == 2


def test_a_delay_extends_the_ttl(make_queue: Any) -> None:
    """As tarantool's fifottl: the ttl runs from when the item is due."""
    q = make_queue("ttlx")
    q.put("x", delay=1.5, ttl=1.0)
    time.sleep(1.6)  # past put + ttl, before due + ttl
    assert q.get_nowait() == "x"


def test_an_item_taken_within_its_ttl_keeps_nothing_behind(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ttlok", reliable=True)
    q.put("a", ttl=60, ttr=60)
    d = q.receive(block=False)
    assert r.hlen(q.keys.meta) == 1  # its ttr holds while in flight
    d.ack()
    assert r.exists(q.keys.meta) == 0
    p = make_queue("ttlok2")  # default mode: the get takes it along
    p.put("b", ttl=60)
    assert p.get_nowait() == "b" and r.exists(p.keys.meta) == 0


def test_ttr_overrides_the_visibility_timeout(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ttr", reliable=True, visibility_timeout=600)
    q.put("short", ttr=0.2)
    q.put("long")
    first = q.receive(block=False)
    second = q.receive(block=False)
    assert (first.item, second.item) == ("short", "long")
    time.sleep(0.3)
    other = make_queue("ttr", reliable=True, visibility_timeout=600)
    r.delete(q.keys.sweep)  # the sweep runs at most once a second across clients
    again = other.receive(timeout=DUE)  # its wait sweeps: only the item past its ttr comes back
    assert again.item == "short" and again.deliveries == 2
    assert not first.ack() and second.ack() and again.ack()


@pytest.mark.parametrize("kw, exc", [({"ttl": 0}, ValueError), ({"ttl": -1}, ValueError), ({"ttr": 0}, ValueError),
                                     ({"ttr": "1"}, TypeError), ({"ttl": float("nan")}, ValueError)])
def test_a_bad_ttl_or_ttr_is_refused_before_anything_is_sent(make_queue: Any, r: redis.Redis, kw: dict[str, Any],
                                                             exc: type[Exception]) -> None:
    q = make_queue("ttlbad")
    with pytest.raises(exc):
        q.put(1, **kw)
    with pytest.raises(exc):
        q.put_many([1], **kw)
    assert q.qsize() == 0 and r.exists(q.keys.meta) == 0
    if "ttl" in kw:
        with pytest.raises(exc):
            make_queue("ttlbad2", ttl=kw["ttl"])


def test_a_spec_client_takes_an_item_with_a_ttl_as_any_other(make_queue: Any, r: redis.Redis) -> None:
    """Expiry happens in pressure's gets: a plain spec client takes what is in the list."""
    q = make_queue("ttlspec", serializer="bytes")
    q.put(b"x", ttl=0.01)
    time.sleep(0.05)
    assert _spec(r, q).get_nowait() == b"x"


# -- bury, kick, and the statistics per state ------------------------------------------------

def test_bury_parks_an_item_until_kicked(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("bury", reliable=True, max_deliveries=10)
    q.put("poison")
    d = q.receive(block=False)
    assert d.bury()
    assert not d.bury() and not d.ack()  # settled
    [dead] = q.dead_letters()
    assert dead.reason == "buried" and dead.deliveries == 1 and pickle.loads(dead.payload) == "poison"
    assert q.qsize() == 0 and q.in_flight() == []
    assert q.kick(1) == 1  # the oldest back to the head, with a fresh count
    again = q.receive(block=False)
    assert again.item == "poison" and again.deliveries == 1
    again.ack()
    assert_invariants(r, q)


def test_statistics_per_state(make_queue: Any) -> None:
    q = make_queue("stats", reliable=True)
    q.put_many(["a", "b", "c", "d"])
    q.put("later", delay=60)
    q.put("gone", ttl=0.01)
    time.sleep(0.05)
    taken = q.receive(block=False)  # a
    assert taken.item == "a"
    b = q.receive(block=False)
    b.bury()
    c = q.receive(block=False)
    c.release()  # back to the head
    c = q.receive(block=False)
    c.ack()
    d = q.receive(block=False)
    d.release(delay=60)
    s = q.statistics()
    # "gone" is past its ttl: not ready, expired at once (a get drops it on the way); done: b
    # (buried) and c (acknowledged), each once; d given back is not
    assert s.tasks == {"total": 4, "ready": 0, "taken": 1, "delayed": 2, "buried": 1, "done": 2,
                       "expired": 1}
    assert s.unfinished_tasks == 4
    with pytest.raises(pressure.Empty):
        q.receive(block=False)  # "gone" is past its ttl: dropped on the way
    taken.ack()
    s = q.statistics()
    assert s.tasks == {"total": 3, "ready": 0, "taken": 0, "delayed": 2, "buried": 1, "done": 4,
                       "expired": 1}
    assert s.unfinished_tasks == 2  # "later" and d, delayed
    assert s.calls == {"put": 6, "take": 5, "ack": 2, "release": 2, "bury": 1, "kick": 0, "delete": 0}


def test_statistics_count_what_a_spec_client_takes(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("statspec", serializer="bytes")
    q.put_many([b"a", b"b"])
    _spec(r, q).get_nowait()
    s = q.statistics()
    assert s.tasks["ready"] == 1 and s.calls["take"] == 1 and s.calls["put"] == 2


# -- peek and delete by task id --------------------------------------------------------------

def _task_id(item: Any) -> str:
    """The task id of an item put with the default serializer (pickle)."""
    return hashlib.sha1(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()


def test_peek_and_delete_an_item_in_every_state(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ids", reliable=True)
    q.put("taken")
    held = q.receive(block=False)
    q.put("buried")
    buried = q.receive(block=False)
    assert buried.bury()
    q.put("ready")
    q.put("delayed", delay=60)
    ids = {"taken": held.task_id, "buried": buried.task_id, "ready": _task_id("ready"),
           "delayed": _task_id("delayed")}
    assert held.task_id == _task_id("taken")
    assert q.dead_letters()[0].task_id == ids["buried"] and q.in_flight()[0].task_id == ids["taken"]
    for state, task_id in ids.items():
        info = q.peek_item(task_id)
        assert info is not None and (info.state, info.item, info.id) == (state, state, task_id)
    assert q.peek_item(ids["taken"]).consumer == held.consumer  # type: ignore[union-attr]
    before = q.statistics()
    for state, task_id in ids.items():
        gone = q.delete_item(task_id)
        assert gone is not None and gone.state == state
        assert q.peek_item(task_id) is None and q.delete_item(task_id) is None
    s = q.statistics()
    assert s.tasks["total"] == 0 and s.calls["delete"] == 4
    # ready, delayed and taken count as done as they are deleted; buried counted when buried
    assert s.done == before.done + 3 and s.unfinished_tasks == 0
    assert not held.ack()  # deleted under its consumer
    assert_invariants(r, q)


def test_delivery_delete(make_queue: Any) -> None:
    q = make_queue("ddel", reliable=True)
    q.put("x")
    d = q.receive(block=False)
    assert d.delete()
    assert not d.delete()
    assert q.statistics().tasks["total"] == 0


@pytest.mark.parametrize("bad, exc", [(5, TypeError), ("abc", ValueError), ("G" * 40, ValueError)])
def test_a_bad_task_id_is_refused(make_queue: Any, bad: Any, exc: type[Exception]) -> None:
    q = make_queue("idbad")
    with pytest.raises(exc):
        q.peek_item(bad)
    with pytest.raises(exc):
        q.delete_item(bad)


def test_peek_item_on_a_priority_queue(url: str, prefix: str) -> None:
    q: pressure.Queue[int] = pressure.PriorityQueue("pid", url=url, prefix=prefix, reliable=True)
    q.put_many([3, 1, 2])
    d = q.receive(block=False)
    d.release()
    info = q.peek_item(d.task_id)
    assert info is not None and (info.state, info.item) == ("ready", 1)
    assert q.delete_item(d.task_id) is not None
    assert [q.get_nowait(), q.get_nowait()] == [2, 3]
    q.delete()


def test_a_consumer_killed_holding_an_item_with_a_ttr_loses_nothing(url: str, r: redis.Redis,
                                                                    make_queue: Any) -> None:
    q = make_queue("ttrkill", reliable=True, visibility_timeout=600)
    q.put("job", ttr=60)
    marker = f"{q.prefix}:test:returned"
    pid = fork_child(_consume, url, q.prefix, "ttrkill", marker)
    try:
        _wait_for(lambda: r.exists(marker), "the child's get")
    finally:
        kill_and_reap(pid)
    d = q.receive(timeout=DUE * 3)
    assert d.item == "job" and d.deliveries == 2
    d.ack()
    assert r.exists(q.keys.meta) == 0


# -- on a Redis Cluster: the lifecycle's keys share the queue's slot -------------------------

@pytest.mark.slow
def test_the_lifecycle_on_a_cluster(prefix: str) -> None:
    """The scripts name some lifecycle keys from the ones they declare (lib.lua sibling_key),
    and utube lists from :pressure:utube: all in the slot of the queue's hash tag."""
    from pressure.testing import ClusterTopology

    with ClusterTopology() as cluster:
        for tag in ("{a}", "{b}", "{c}"):
            q: pressure.Queue[str] = pressure.Queue(f"life{tag}", url=cluster.url, prefix=prefix, reliable=True)
            q.put("later", delay=0.05, ttl=60, ttr=60)
            q.put_many(["k0", "k1"], key="k")
            q.put("gone", ttl=0.001)
            time.sleep(0.1)
            got = []
            for _ in range(3):
                d = q.receive(timeout=DUE)
                got.append(d.item)
                d.ack()
            assert sorted(got) == ["k0", "k1", "later"] and q.statistics().expired == 1
            q.put("b")
            d2 = q.receive(timeout=DUE)
            assert d2.bury() and q.peek_item(d2.task_id) is not None and q.delete_item(d2.task_id)
            q.delete()
            q.disconnect()


def test_aio_dead_letters_an_unreadable_item_through_the_lifecycle_scripts(make_queue: Any, url: str,
                                                                           r: redis.Redis) -> None:
    """pressure.aio builds requeue.lua's call from its binding (it had the KEYS and ARGV of
    before the lifecycle hard-coded, which the new ones broke)."""
    import asyncio

    from pressure.aio import AsyncQueue

    q = make_queue("aiodead", serializer="bytes")
    q.put(b"not json")
    q.put(b"1")

    async def main() -> Any:
        aq: AsyncQueue[Any] = AsyncQueue("aiodead", url=url, prefix=q.prefix, serializer="json")
        try:
            with pytest.raises(pressure.DeserializationError):
                await aq.get(timeout=DUE)  # dead-lettered (requeue.lua), as a sync get does
            return await aq.get(timeout=DUE)
        finally:
            await aq.disconnect()

    assert asyncio.run(main()) == 1
    assert [d.payload for d in q.dead_letters()] == [b"not json"]


def test_a_dead_lettered_item_leaves_no_ttl_or_ttr_behind(make_queue: Any, r: redis.Redis) -> None:
    """Its field in :pressure:meta goes with it (purge_dead would otherwise leave it forever)."""
    q = make_queue("deadmeta", reliable=True, max_deliveries=1)
    q.put("x", ttl=600, ttr=600)
    q.receive(block=False).release()  # past max_deliveries: dead-lettered
    q.put("y", ttr=600)
    q.receive(block=False).bury()
    assert r.exists(q.keys.meta) == 0
    assert q.purge_dead() == 2


# -- a handle sees its own effects ------------------------------------------------------------

@pytest.mark.parametrize("reliable", [False, True])
def test_reads_of_a_handle_see_what_it_posted(make_queue: Any, reliable: bool) -> None:
    """A get of the default mode posts the drop of what it took (its held batch and in-flight
    list), task_done() posts its count or acknowledgement: the handle's own reads come after
    them (statistics(), peek_item(), qsize() of a utube key's next item), not up to 200 ms
    before them."""
    q = make_queue("own", reliable=reliable)
    q.put_many(["a", "b"])
    q.put_many(["k0", "k1"], key="k")
    for i in range(3):  # the third one, k0, lets k1 in once it is done
        q.get(timeout=DUE)
        s = q.statistics()
        assert s.taken == (i + 1 if reliable else 0) and s.unfinished_tasks == 4
        if not reliable:
            assert q.peek_item(_task_id("a")) is None
    for i in range(3):
        q.task_done()  # reliable: a's, b's, then k0's acknowledgement (k1 in then)
        assert q.qsize() == (1 if not reliable or i == 2 else 0)
        s = q.statistics()
        assert (s.done, s.unfinished_tasks) == (i + 1, 3 - i)
        assert s.taken == (2 - i if reliable else 0)
    assert q.get(timeout=DUE) == "k1"
    q.task_done()
    assert q.unfinished_tasks == 0

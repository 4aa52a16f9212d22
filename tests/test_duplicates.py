"""Items with identical bytes (a queue of "tick" messages, a job put again): each copy keeps its
own delivery count, ttl, ttr and utube key, whatever its identical copies do (issue 29, defect
9). Queued copies are bare payloads in the protocol's list, so what is still shared is stated
in the docs (reliability.md, Task lifecycle) and checked here: the task id, and the order in which queued
copies' states are handed out.
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

from .helpers import assert_invariants

#: How long a test waits at most for a sweep (it runs at most once a second across clients).
DUE = 10.0


def _receive_all(q: pressure.Queue[Any]) -> list[Any]:
    out = []
    while True:
        try:
            out.append(q.receive(block=False))
        except pressure.Empty:
            return out


def test_identical_items_given_back_together_keep_their_own_counts(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ident", reliable=True)
    q.put("tick")
    q.put("tick")
    for n in (1, 2, 3):
        a, b = q.receive(block=False), q.receive(block=False)
        assert (a.deliveries, b.deliveries) == (n, n)
        a.release()
        b.release()
    a, b = q.receive(block=False), q.receive(block=False)
    assert (a.deliveries, b.deliveries) == (4, 4)
    assert a.ack() and b.ack()
    assert r.exists(q.keys.redeliveries, q.keys.meta) == 0
    assert_invariants(r, q)


def test_no_identical_copy_escapes_max_deliveries(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identmax", reliable=True, max_deliveries=2)
    q.put_many(["tick", "tick"])
    received = 0
    for _ in range(10):  # each round: take all, give all back together
        got = _receive_all(q)
        if not got:
            break
        received += len(got)
        for d in got:
            d.release()
    assert received == 4  # two deliveries each, then both dead-lettered
    assert [(pickle.loads(d.payload), d.deliveries) for d in q.dead_letters()] == [("tick", 2), ("tick", 2)]
    assert r.exists(q.keys.redeliveries) == 0
    assert_invariants(r, q)


def test_identical_copies_swept_together_keep_their_own_counts(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identsweep", reliable=True, visibility_timeout=0.2)
    q.put_many(["tick", "tick"])
    held = [q.receive(block=False), q.receive(block=False)]
    time.sleep(0.3)
    other = make_queue("identsweep", reliable=True, visibility_timeout=600)
    r.delete(q.keys.sweep)
    first = other.receive(timeout=DUE)  # its wait sweeps both back
    second = other.receive(block=False)
    assert (first.deliveries, second.deliveries) == (2, 2)
    assert not any(d.ack() for d in held) and first.ack() and second.ack()


def test_each_copy_keeps_its_own_ttl(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identttl", reliable=True)
    q.put("tick", ttl=600)
    q.put("x")
    q.put("tick", ttl=0.05)
    time.sleep(0.1)
    assert [q.get_nowait() for _ in range(2)] == ["tick", "x"]  # the copy with 600 s, then x
    with pytest.raises(pressure.Empty):
        q.get_nowait()  # the second copy expired
    assert int(r.hget(q.keys.counts, "expired") or 0) == 1
    q.task_done()
    q.task_done()
    assert r.exists(q.keys.redeliveries, q.keys.meta) == 0


def test_acknowledging_one_copy_leaves_the_other_its_ttl(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identttl2", reliable=True)
    q.put("tick", ttl=0.3)
    q.put("tick")
    a, b = q.receive(block=False), q.receive(block=False)
    assert b.ack()
    a.release()  # back with its own ttl, which runs out
    time.sleep(0.4)
    with pytest.raises(pressure.Empty):
        q.receive(block=False)
    assert int(r.hget(q.keys.counts, "expired") or 0) == 1


def test_each_copy_keeps_its_own_ttr(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identttr", reliable=True, visibility_timeout=600)
    q.put("tick", ttr=600)
    q.put("tick", ttr=0.2)
    long, short = q.receive(block=False), q.receive(block=False)
    time.sleep(0.3)
    other = make_queue("identttr", reliable=True, visibility_timeout=600)
    r.delete(q.keys.sweep)
    again = other.receive(timeout=DUE)  # its wait sweeps: only the copy past its ttr comes back
    assert again.deliveries == 2
    assert long.ack() and not short.ack() and again.ack()
    r.delete(q.keys.sweep)
    with pytest.raises(pressure.Empty):
        other.receive(timeout=1.5)
    assert r.exists(q.keys.meta) == 0


def test_identical_items_of_two_utube_keys_each_end_their_own_key(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identut", reliable=True)
    q.put("x", key="a")
    q.put("x", key="b")
    q.put("a2", key="a")
    q.put("b2", key="b")
    first, second = q.receive(block=False), q.receive(block=False)
    assert (first.item, second.item) == ("x", "x")
    assert first.ack() and second.ack()  # each lets its own key's next one in
    assert sorted(d.item for d in _receive_all(q)) == ["a2", "b2"]


def test_identical_items_waiting_behind_a_key_keep_their_ttls(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identutw", reliable=True)
    q.put("head", key="k")
    q.put("x", key="k", ttl=600)
    q.put("x", key="k", ttl=0.05)
    q.put("last", key="k")
    time.sleep(0.1)
    got = []
    for _ in range(4):
        try:
            d = q.receive(block=False)
        except pressure.Empty:
            break
        got.append(d.item)
        d.ack()
    assert got == ["head", "x", "last"]
    assert r.exists(q.keys.utube, q.keys.meta, q.keys.redeliveries, f"{q.keys.utube}_meta:k") == 0


def test_delivery_delete_removes_its_own_delivery(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identdel", reliable=True)
    q.put_many(["tick", "tick"])
    first, second = q.receive(block=False), q.receive(block=False)
    assert first.task_id == second.task_id  # identical bytes: one task id
    assert first.delete()
    assert not first.ack() and second.ack()
    assert q.statistics().tasks["total"] == 0


def test_delivery_delete_after_a_release_deletes_a_queued_copy(make_queue: Any) -> None:
    q = make_queue("identdel2", reliable=True)
    q.put("tick")
    d = q.receive(block=False)
    d.release()
    assert d.delete() and not d.delete()
    assert q.statistics().tasks["total"] == 0


def test_peek_and_delete_item_take_the_first_copy_found(make_queue: Any, r: redis.Redis) -> None:
    """Documented: identical copies share a task id; peek_item and delete_item take the first
    found: taken, then queued (the next out), delayed, buried."""
    q = make_queue("identpeek", reliable=True, max_deliveries=5)
    q.put_many(["tick", "tick"])
    q.put("tick", delay=600)
    held = q.receive(block=False)
    task_id = held.task_id
    assert q.peek_item(task_id).state == "taken"  # type: ignore[union-attr]
    held.release()  # back at the head with its count: the next out
    info = q.delete_item(task_id)
    assert info is not None and info.state == "ready"
    d = q.receive(block=False)
    assert d.deliveries == 1  # the deleted copy was the one given back, with its count
    assert q.delete_item(task_id).state == "taken"  # type: ignore[union-attr]
    assert q.delete_item(task_id).state == "delayed"  # type: ignore[union-attr]
    assert q.delete_item(task_id) is None
    assert r.exists(q.keys.redeliveries, q.keys.meta) == 0
    assert_invariants(r, q)


def test_a_queued_copy_without_a_state_ahead_of_one_with_takes_it(make_queue: Any, r: redis.Redis) -> None:
    """Documented: queued copies are bare payloads, told apart only by their order; a copy put
    with no ttl, ttr or key ahead of an identical one put with them takes their state, and the
    other leaves with none. Every state is still kept once: one of the two expires."""
    q = make_queue("identorder", reliable=True)
    q.put("tick")
    q.put("x")
    q.put("tick", ttl=0.05)
    time.sleep(0.1)
    assert q.get_nowait() == "x"  # the first copy took the ttl and expired
    assert q.get_nowait() == "tick"
    assert int(r.hget(q.keys.counts, "expired") or 0) == 1


def test_kicked_copies_and_spec_clients_leave_no_state_on_another_copy(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identkick", reliable=True, max_deliveries=1)
    q.put("tick")
    q.receive(block=False).release()  # dead-lettered
    q.put("tick")
    d = q.receive(block=False)
    d.release()  # dead-lettered too
    q.put("tick", ttl=600)
    assert q.kick() == 2  # both ahead of the queued copy, afresh
    assert [q.receive(block=False).deliveries for _ in range(3)] == [1, 1, 1]
    # a spec client takes a copy given back: its count is dropped once the queue runs empty
    p = make_queue("identspec", reliable=True)
    p.put("tick")
    p.receive(block=False).release()
    spec = SpecClient(r, p.name, prefix=p.prefix)
    assert spec.get(timeout=1) is not None
    with pytest.raises(pressure.Empty):
        p.receive(block=False)
    assert r.exists(p.keys.redeliveries) == 0
    p.put("tick")
    assert p.receive(block=False).deliveries == 1


def test_three_identical_copies_each_keep_their_ttl_in_order(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("identttl3", reliable=True)
    q.put("tick", ttl=600)
    q.put("tick", ttl=0.05)
    q.put("tick", ttl=600)
    q.put("x")
    time.sleep(0.1)
    assert [q.get_nowait() for _ in range(3)] == ["tick", "tick", "x"]  # the second copy expired
    assert int(r.hget(q.keys.counts, "expired") or 0) == 1
    assert r.keys(f"{q.keys.redeliveries}*") == []  # in flight, their ttls are kept by delivery
    assert r.hlen(q.keys.meta) == 2


def _redelivered(q: pressure.Queue[Any]) -> int:
    """The CLI's and the metrics' ``redelivered`` figure of ``q``."""
    from pressure.cli._inventory import QueueRef, queue_rows
    backend = q._backend
    (row,) = queue_rows(backend, q.prefix, [QueueRef(q.name, "fifo")])
    return row.redelivered


def test_redelivered_counts_each_identical_copy_and_no_copy_gone(make_queue: Any, r: redis.Redis) -> None:
    """The views' ``redelivered``: the queued copies with a state of their own, each of identical
    copies (one field of :pressure:redeliveries holds their states); a state a spec client's take
    left behind counts for no copy, and goes with the get that leaves the queue empty."""
    q = make_queue("identcount", reliable=True)
    q.put_many(["tick", "tick", "x"])
    held = [q.receive(block=False) for _ in range(3)]
    for d in held:
        d.release()
    assert r.hlen(q.keys.redeliveries) == 2  # "tick"'s field holds both its copies' states
    assert _redelivered(q) == 3
    spec = SpecClient(r, q.name, prefix=q.prefix)
    assert spec.get(timeout=1) is not None  # the copy next out: "x", given back last
    assert _redelivered(q) == 2
    assert [q.receive(block=False).deliveries for _ in range(2)] == [2, 2]
    q.put("y")
    assert spec.get(timeout=1) is not None and _redelivered(q) == 0
    # a copy given back, taken by a spec client, another left queued: the get that takes
    # that one (the queue empty then) drops the state the spec client's take left behind
    p = make_queue("identleft", reliable=True)
    p.put("a")
    p.receive(block=False).release()
    p.put("b")
    SpecClient(r, p.name, prefix=p.prefix).get(timeout=1)  # "a", given back at the head
    assert r.hlen(p.keys.redeliveries) == 1  # kept for the next copy of "a" while "b" waits
    assert p.get(block=False) == "b"
    assert r.exists(p.keys.redeliveries) == 0 and _redelivered(p) == 0


def test_redelivered_counts_a_due_item_the_bound_kept_out(make_queue: Any, r: redis.Redis) -> None:
    """A due item is queued in every view (qsize() counts it) whether or not a put or get has
    moved it into the list yet; a full list keeps it out of the one that runs then. Its state
    (a ttl) counts in ``redelivered`` before it is moved in as after."""
    q = make_queue("duekept", 2, reliable=True)
    q.put("x")
    q.put("y", delay=0.1, ttl=60)
    d = q.receive(block=False)  # "x"
    q.put("z")
    time.sleep(0.15)  # "y" is due
    d.release()  # "x" back at the head: the list holds the bound
    assert q.get(block=False) == "x"  # ran with the list full: "y" is still out of it
    assert r.zcard(q.keys.delayed) == 1 and q.qsize() == 2
    assert _redelivered(q) == 1
    assert q.get(block=False) == "z" and r.zcard(q.keys.delayed) == 0  # moved in now
    assert _redelivered(q) == 1
    assert q.get(block=False) == "y" and _redelivered(q) == 0


def test_no_state_outlives_its_copy_on_pressures_own_paths(make_queue: Any, r: redis.Redis) -> None:
    """Each way a queued copy with a state leaves the queue without a delivery takes its state
    with it: delete_item() (identical copies one at a time), ttl expiry, shutdown(immediate=True)."""
    q = make_queue("identpaths", reliable=True)
    q.put_many(["a", "a", "b"])
    for d in [q.receive(block=False) for _ in range(3)]:
        d.release()
    q.put("t", ttl=0.05)
    assert _redelivered(q) == 4
    task_id = _task_id("a")
    assert q.delete_item(task_id) is not None
    assert _redelivered(q) == 3 and r.exists(f"{q.keys.redeliveries}:{task_id}") == 0
    assert q.delete_item(task_id) is not None and _redelivered(q) == 2
    time.sleep(0.1)
    assert q.get_nowait() == "b"  # given back last: at the head
    with pytest.raises(pressure.Empty):
        q.get_nowait()  # "t" expired: dropped on the way
    assert r.exists(q.keys.redeliveries) == 0 and _redelivered(q) == 0
    q.put("c")
    q.receive(block=False).release()
    assert _redelivered(q) == 1
    q.shutdown(immediate=True)
    assert r.keys(f"{q.keys.redeliveries}*") == [] and _redelivered(q) == 0


def _task_id(item: Any) -> str:
    """The task id of an item put with the default serializer (pickle)."""
    return hashlib.sha1(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()

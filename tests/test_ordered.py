"""LifoQueue and PriorityQueue: stdlib order, their own key layout, and the same
blocking, bounding, stats and reliability as the FIFO queue."""

from __future__ import annotations

import dataclasses
import heapq
import multiprocessing
import os
import pickle
import queue as stdlib_queue
import signal
import threading
import time
from typing import Any

import hypothesis.strategies as st
import pytest
import redis
from hypothesis import given, settings

import pressure
from pressure.ordering import order_key

from .helpers import blocks
from .test_reliability import _receive_and_hang

KINDS = {"lifo": pressure.LifoQueue, "priority": pressure.PriorityQueue}


def ordered_invariants(r: redis.Redis, q: pressure.Queue[Any]) -> None:
    """assert_invariants for a sorted-set queue: one token per role, :not_full per length and bound."""
    k = q.keys
    assert r.llen(k.producer_free) == 1 and r.llen(k.consumer_free) == 1
    bound, length = int(r.get(k.bound)), r.zcard(k.base)
    if not r.exists(k.closed):
        assert r.llen(k.not_full) == (1 if bound == 0 or length < bound else 0)


@pytest.fixture
def make(url: str, prefix: str) -> Any:
    made: list[pressure.Queue[Any]] = []

    def build(kind: str, name: str = "q", maxsize: int | None = None, **kw: Any) -> Any:
        q = KINDS[kind](name, maxsize, url=url, prefix=prefix, **kw)
        made.append(q)
        return q

    yield build
    for q in made:
        q.disconnect()


# -- order ---------------------------------------------------------------------

def test_lifo_gets_the_newest_first(make: Any) -> None:
    q, ref = make("lifo"), stdlib_queue.LifoQueue()
    for i in [3, 1, 2, 5, 4]:
        q.put(i)
        ref.put(i)
    assert q.get() == ref.get() == 4
    q.put(9)
    ref.put(9)
    assert [q.get_nowait() for _ in range(5)] == [ref.get_nowait() for _ in range(5)] == [9, 5, 2, 1, 3]


PRIORITY_ITEMS: list[Any] = [(3, "c"), (1, "b"), (2, "a"), (1, "a"), (1,), (0.5, "z"), (-2, "x"),
                             (1, "a", b"\x00"), (2**60 + 1, "big"), (2.0**60, "big"), (True, "t")]


def test_priority_gets_what_the_stdlib_gets(make: Any) -> None:
    q, ref = make("priority"), stdlib_queue.PriorityQueue()
    for item in PRIORITY_ITEMS:
        q.put(item)
        ref.put(item)
    assert q.qsize() == ref.qsize()
    assert [q.get() for _ in PRIORITY_ITEMS] == [ref.get() for _ in PRIORITY_ITEMS]


def test_priority_ties_come_out_first_in_first_out(make: Any) -> None:
    """Equal priorities with unorderable payloads: the stdlib raises TypeError, pressure keeps put order."""
    q = make("priority")
    tasks = [{"n": i} for i in range(5)]
    for task in tasks:
        q.put((1, task))
    q.put((0, {"n": "first"}))
    with pytest.raises(TypeError):
        heapq.heapify([(1, {"n": 1}), (1, {"n": 0})])  # what the stdlib does with such items
    assert [q.get()[1]["n"] for _ in range(6)] == ["first", 0, 1, 2, 3, 4]


@dataclasses.dataclass(order=True)
class PrioritizedItem:
    """The pattern the queue module's documentation recommends."""

    priority: int
    item: Any = dataclasses.field(compare=False)


def test_priority_orders_order_dataclasses_by_their_compared_fields(make: Any) -> None:
    q = make("priority")
    for p, item in [(5, "e"), (1, {"unorderable": True}), (3, "c")]:
        q.put(PrioritizedItem(p, item))
    assert [q.get().priority for _ in range(3)] == [1, 3, 5]


@pytest.mark.parametrize("item", [{"a": 1}, None, ValueError("x"), ({}, 1)])
def test_an_item_with_nothing_orderable_is_refused_and_changes_nothing(make: Any, r: redis.Redis,
                                                                       item: Any) -> None:
    q = make("priority", maxsize=3)
    q.put((1, "x"))
    before = {key: r.dump(key) for key in q.keys.all_keys() if r.exists(key)}
    with pytest.raises(TypeError, match="PriorityQueue item must be ordered"):
        q.put(item)
    assert {key: r.dump(key) for key in q.keys.all_keys() if r.exists(key)} == before
    with pytest.raises(ValueError, match="NaN"):
        q.put((float("nan"), "x"))
    assert q.get_nowait() == (1, "x")


orderable = st.recursive(
    st.integers(min_value=-(2**80), max_value=2**80) | st.floats(allow_nan=False) | st.text()
    | st.booleans(),
    lambda children: st.tuples(children) | st.tuples(children, children)
    | st.lists(children, max_size=3).map(tuple),
    max_leaves=8,
)


def _comparable(a: Any, b: Any) -> bool:
    try:
        a < b  # noqa: B015
        return True
    except TypeError:
        return False


@settings(max_examples=400, deadline=None)
@given(a=orderable, b=orderable)
def test_order_keys_sort_as_python_sorts(a: Any, b: Any) -> None:
    """memcmp of the order keys agrees with <, == and > wherever Python can compare the items."""
    if not _comparable(a, b):
        return
    ka, kb = order_key(a), order_key(b)
    assert (ka < kb) == (a < b) and (ka == kb) == (a == b) and (ka > kb) == (a > b), (a, b)


# -- key layout: a plain spec client cannot mistake these for FIFO queues ----------

@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_own_key_layout_with_items_in_a_sorted_set(make: Any, r: redis.Redis, prefix: str, kind: str) -> None:
    q = make(kind, "jobs", 2)
    q.put((1, "a"))
    assert q.keys.base == f"{prefix}:{kind}:jobs"
    assert r.type(q.keys.base) == b"zset" and r.get(q.keys.kind) == kind.encode()
    assert not r.exists(f"{prefix}:jobs:bound"), "a spec client asking for 'jobs' must find no queue"
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.lpush(q.keys.base, b"spec item")  # a spec client pointed at '<kind>:jobs' fails, loudly
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.brpop([q.keys.base], 0.1)
    # and the twelve spec keys are all there, under that base, for the same machinery
    for key in q.keys.protocol_keys()[1:]:
        if key not in (q.keys.consumer, q.keys.closed, q.keys.not_full, q.keys.consumed_messages,
                       q.keys.consumed_bytes):
            assert r.exists(key), key


@pytest.mark.parametrize("kind", ["lifo", "priority"])
@pytest.mark.parametrize("ordered_first", [True, False])
def test_attaching_to_a_queue_of_another_kind_is_refused(url: str, prefix: str, r: redis.Redis, kind: str,
                                                         ordered_first: bool) -> None:
    """An ordered queue 'jobs' and a FIFO queue 'lifo:jobs' would share one base key: whichever
    comes second is refused, and nothing changes."""
    ordered = lambda: KINDS[kind]("jobs", 3, url=url, prefix=prefix)  # noqa: E731
    fifo = lambda: pressure.Queue(f"{kind}:jobs", 3, url=url, prefix=prefix)  # noqa: E731
    first, second = (ordered, fifo) if ordered_first else (fifo, ordered)
    q = first()
    q.put((1, "x"))
    before = {key: r.dump(key) for key in r.keys(f"{prefix}:*")}
    expected = kind if ordered_first else "fifo"
    with pytest.raises(pressure.QueueExistsError, match=f"^queue .* already exists as a {expected} queue"):
        second()
    assert {key: r.dump(key) for key in r.keys(f"{prefix}:*")} == before
    q.disconnect()


# -- the same machinery as the FIFO queue ------------------------------------------

@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_bounded_put_blocks_until_a_get_makes_room(make: Any, r: redis.Redis, kind: str) -> None:
    q = make(kind, maxsize=2)
    q.put((2, "b"))
    q.put((1, "a"))
    assert q.full() and r.llen(q.keys.not_full) == 0
    with pytest.raises(pressure.Full):
        q.put_nowait((0, "x"))
    with pytest.raises(pressure.Full):
        q.put((0, "x"), timeout=0.2)
    got: list[Any] = []
    blocks(lambda: q.put((0, "c")), lambda: got.append(q.get()))
    assert got == [(1, "a")] and q.qsize() == 2
    ordered_invariants(r, q)


@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_blocked_get_is_handed_the_next_put(make: Any, url: str, prefix: str, r: redis.Redis,
                                            kind: str) -> None:
    q = make(kind)
    producer = KINDS[kind]("q", url=url, prefix=prefix)
    assert blocks(q.get, lambda: producer.put((7, "x"))) == (7, "x")
    with pytest.raises(pressure.Empty):
        q.get(timeout=0.1)
    producer.disconnect()
    ordered_invariants(r, q)


def test_a_waiter_handed_an_item_gets_the_best_one_queued(make: Any, r: redis.Redis) -> None:
    """Items queued while a consumer waits (e.g. requeued) compete with the new put by priority."""
    q = make("priority", reliable=True)
    q.put((5, "late"))
    d = q.receive()
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(q.get(timeout=10)))
    t.start()
    try:
        deadline = time.monotonic() + 10
        while r.get(q.keys.waiter) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        d.release()  # back in the queue while the consumer waits: it is woken, takes the best
        q.put((9, "worse"))
    finally:
        t.join(10)
    assert got == [(5, "late")] and q.get_nowait() == (9, "worse")


@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_stats_count_payload_bytes_as_a_fifo_queue_does(make: Any, url: str, prefix: str, kind: str) -> None:
    q, fifo = make(kind), pressure.Queue("fifo", url=url, prefix=prefix)
    for item in [(1, "a" * 100), (2, b"xyz"), (0, 1.5)]:
        q.put(item)
        fifo.put(item)
    assert q.get() == (0, 1.5) and fifo.get() == (1, "a" * 100)  # newest, and lowest, is (0, 1.5)
    s, f = q.statistics(), fifo.statistics()
    assert (s.produced_messages, s.produced_bytes, s.size) == (f.produced_messages, f.produced_bytes, f.size)
    assert s.consumed_messages == f.consumed_messages == 1
    assert s.consumed_bytes == len(pickle.dumps((0, 1.5), protocol=pickle.HIGHEST_PROTOCOL))
    fifo.delete()
    fifo.disconnect()


@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_task_done_join_and_shutdown(make: Any, r: redis.Redis, kind: str) -> None:
    q = make(kind, maxsize=5)
    for i in range(4):
        q.put((i, "x"))
    q.get()
    q.task_done()
    assert q.unfinished_tasks == 3
    q.shutdown(immediate=True)  # discards the three queued: join no longer waits for them
    assert q.unfinished_tasks == 0 and q.qsize() == 0 and not r.exists(q.keys.base)
    q.join()
    with pytest.raises(pressure.ShutDown):
        q.get_nowait()
    with pytest.raises(pressure.ShutDown):
        q.put((0, "y"))
    with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
        q.task_done()


@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_reliable_release_and_kick_return_items_to_their_place(make: Any, kind: str) -> None:
    q = make(kind, reliable=True, max_deliveries=2)
    for i in [2, 1, 3]:
        q.put((i, "x"))
    first = q.receive()
    assert first.item == ((3, "x") if kind == "lifo" else (1, "x"))
    first.release()
    again = q.receive()
    assert again.item == first.item and again.deliveries == 2
    again.release()  # its second delivery: to the dead letters
    (dead,) = q.dead_letters()
    assert dead.deliveries == 2 and pickle.loads(dead.payload) == first.item  # the payload, unwrapped
    assert q.kick() == 1
    assert q.peek(3)[0] == first.item and q.qsize() == 3


@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_repair_and_delete(make: Any, r: redis.Redis, prefix: str, kind: str) -> None:
    q = make(kind, maxsize=2)
    q.put((1, "a"))
    r.delete(q.keys.producer_free)
    r.lpush(q.keys.not_full, 1, 1)
    report = q.repair()
    assert set(report.reset) == {"producer_free", "not_full"}
    ordered_invariants(r, q)
    q.delete()
    assert r.keys(f"{prefix}:*") == []


@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_maxsize_is_shared_and_settable(make: Any, url: str, prefix: str, r: redis.Redis, kind: str) -> None:
    q = make(kind, maxsize=1)
    q.put((1, "a"))
    other = KINDS[kind]("q", url=url, prefix=prefix)
    with pytest.raises(pressure.Full):
        other.put_nowait((2, "b"))
    other.maxsize = 3
    other.put_nowait((2, "b"))
    assert q.maxsize == 3 and q.qsize() == 2
    other.disconnect()
    ordered_invariants(r, q)


@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_non_blocking_semantics_on_fakeredis(prefix: str, kind: str) -> None:
    fakeredis = pytest.importorskip("fakeredis")
    conn = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    q = KINDS[kind]("q", 2, connection=conn, prefix=prefix)
    ref = stdlib_queue.LifoQueue(2) if kind == "lifo" else stdlib_queue.PriorityQueue(2)
    for item in [(2, "b"), (1, "a")]:
        q.put_nowait(item)
        ref.put_nowait(item)
    with pytest.raises(pressure.Full):
        q.put_nowait((0, "c"))
    assert [q.get_nowait(), q.get_nowait()] == [ref.get_nowait(), ref.get_nowait()]
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    conn.close()


def test_reliable_consumer_killed_mid_task_is_redelivered_in_priority_order(make: Any, r: redis.Redis) -> None:
    q = make("priority", reliable=True)
    for item in [(2, "b"), (1, "a"), (3, "c")]:
        q.put(item)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    child = ctx.Process(target=_receive_and_hang, args=(q, ready))
    child.start()
    assert ready.wait(10)
    os.kill(child.pid, signal.SIGKILL)  # it held (1, "a"), unacknowledged
    child.join()
    assert len(q.repair().recovered) == 1  # found dead on this host (a get's sweep would find it too)
    got = [q.receive(timeout=10) for _ in range(3)]
    assert [(d.item, d.deliveries) for d in got] == [((1, "a"), 2), ((2, "b"), 1), ((3, "c"), 1)]
    assert all(d.ack() for d in got) and q.in_flight() == []
    ordered_invariants(r, q)

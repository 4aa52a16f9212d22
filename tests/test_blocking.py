"""Blocking puts and gets, timeouts, wake-ups, and many clients: real redis-server only."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import Counter
from typing import Any

import pytest
import redis

import pressure
import pressure._producer
from pressure.connection import _script_sha

from .helpers import assert_invariants, blocks, blocks_raising
from .test_native_put import _Monitor


def test_blocking_get_released_by_put_from_another_thread(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("g")
    assert blocks(q.get, lambda: q.put("x")) == "x"
    assert_invariants(r, q)


def test_blocking_put_released_by_get_from_another_thread(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("p", 1)
    q.put("first")
    got: list[Any] = []
    blocks(lambda: q.put("second"), lambda: got.append(q.get()))
    assert got == ["first"] and q.get_nowait() == "second"
    assert_invariants(r, q)


def test_a_put_that_finds_the_queue_as_full_as_before_waits_in_its_own_round_trip(
        make_queue: Any, url: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """A producer that waited for room has learnt how full the queue gets; its next put that
    finds it that full sends its wait for room (BRPOP :not_full) and put.lua together: the
    script runs once, not once to answer Full and again after the wait. (That first wait is
    short, PREDICTED_WAIT: here long enough for the get that makes room.)"""
    monkeypatch.setattr(pressure._producer, "PREDICTED_WAIT", 5.0, raising=False)
    q = make_queue("full-put", 1)
    q.put("a")
    got: list[Any] = []
    blocks(lambda: q.put("b"), lambda: got.append(q.get()))  # waits: full is one item
    monitor = _Monitor(url)
    blocks(lambda: q.put("c"), lambda: got.append(q.get()))
    sha = _script_sha(q._put_command.name)
    puts = [line for line in monitor.close(r) if sha in line and not line.startswith("lua ")]
    assert len(puts) == 1, puts
    assert got == ["a", "b"] and q.get_nowait() == "c"
    assert_invariants(r, q)


def test_a_put_that_expects_a_full_queue_keeps_its_timeout_and_finds_room_at_once(
        make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("full-timeout", 1)
    q.put("a")
    got: list[Any] = []
    blocks(lambda: q.put("b"), lambda: got.append(q.get()))
    with pytest.raises(pressure.Full):  # still full: the wait in its round trip counts
        q.put("c", timeout=0.05)
    with pytest.raises(pressure.Full):
        q.put_nowait("c")  # no wait at all
    assert q.get() == "b"
    q.put("c", timeout=5)  # room: the BRPOP in front finds the permit
    assert q.qsize() == 1 and q.get_nowait() == "c"
    assert got == ["a"]
    assert_invariants(r, q)


def test_a_put_past_the_length_it_expected_full_stops_expecting_it(
        make_queue: Any, url: str, r: redis.Redis) -> None:
    """A bound raised since the producer waited: a put that leaves the queue longer than the
    length it found full at forgets that length, and the puts after it send no BRPOP in front."""
    q = make_queue("raised", 1)
    q.put("a")
    got: list[Any] = []
    blocks(lambda: q.put("b"), lambda: got.append(q.get()))  # waits: full is one item
    q.maxsize = 10
    q.put("c")  # expected full (one item queued): its BRPOP finds the permit
    monitor = _Monitor(url)
    q.put("d")
    q.put("e")
    assert not [line for line in monitor.close(r) if line.startswith("BRPOP")]
    assert got == ["a"] and q.qsize() == 4
    assert_invariants(r, q)


@pytest.mark.parametrize("reliable", [False, True])
def test_gets_working_off_a_backlog_send_no_blmove_and_then_wait_as_before(
        make_queue: Any, r: redis.Redis, reliable: bool) -> None:
    """A get after one that found its item queued takes the next with get.lua alone (its
    'nowait' mode): no BLMOVE per item while a backlog is worked off. The get that finds the
    queue empty then waits (script and BLMOVE, as ever) and a put wakes it; a get after a
    wait is back to one pipeline."""
    q = make_queue("backlog", reliable=reliable)
    q.put_many(list(range(5)))
    r.config_resetstat()
    got = []
    for _ in range(5):
        got.append(q.get(timeout=5))
        if reliable:
            q.task_done()
    assert got == list(range(5))
    assert r.info("commandstats")["cmdstat_blmove"]["calls"] == 1  # the first get's only
    assert blocks(lambda: q.get(timeout=30), lambda: q.put("late")) == "late"
    r.config_resetstat()
    q.put("next")
    assert q.get(timeout=5) == "next"  # after a wait: the pipeline (the item is queued: no wait)
    assert r.info("commandstats")["cmdstat_blmove"]["calls"] == 1
    if reliable:
        q.task_done()
        q.task_done()
        assert q.unfinished_tasks == 0
    assert_invariants(r, q)


@pytest.mark.parametrize("reliable", [False, True])
def test_a_get_after_the_last_queued_item_waits_at_once(make_queue: Any, r: redis.Redis,
                                                        reliable: bool) -> None:
    """get.lua says whether items are still queued when it delivers: after a get that took
    the last one (whether the script and BLMOVE pipeline took it, or 'nowait' alone, at the
    end of a backlog), the next get sends the pipeline at once. A 'nowait' first would find
    the queue empty: a round trip more before the wait, which across hosts is added to the
    next item's latency."""
    q = make_queue("last", reliable=reliable)
    gets: list[str] = []
    send = q._backend._send

    def counting_send(conn: Any, data: list[bytes], what: str) -> None:
        if what.startswith("script get"):
            gets.append(what)
        send(conn, data, what)

    for backlog in (["a"], ["b", "c", "d"]):
        q.put_many(backlog)
        gets.clear()
        q._backend._send = counting_send
        assert [q.get(timeout=5) for _ in backlog] == backlog
        # the first by the pipeline; the rest, while more are queued, by 'nowait' alone
        assert gets == ["script get and BLMOVE"] + ["script get"] * (len(backlog) - 1)
        gets.clear()
        assert blocks(lambda: q.get(timeout=30), lambda: q.put("late")) == "late"
        assert gets[0] == "script get and BLMOVE"  # no 'nowait' that finds nothing first
        del q._backend._send
        if reliable:
            for _ in range(len(backlog) + 1):
                q.task_done()
    assert_invariants(r, q)


@pytest.mark.parametrize("timeout", [0.05, 0.2, 0.5])
def test_sub_second_timeouts_are_honoured(make_queue: Any, r: redis.Redis, timeout: float) -> None:
    q = make_queue("t", 1)
    for call, exc in ((lambda: q.get(timeout=timeout), pressure.Empty),
                      (lambda: (q.put(0), q.put(1, timeout=timeout)), pressure.Full)):
        start = time.monotonic()
        with pytest.raises(exc):
            call()
        elapsed = time.monotonic() - start
        assert elapsed >= timeout * 0.9, "returned before the timeout"
        # the server checks timeouts on its own clock (hz=10 by default): allow slack, not 0=forever
        assert elapsed < timeout + 2.0
        assert_invariants(r, q)


def test_zero_timeout_is_immediate_not_forever(make_queue: Any) -> None:
    q = make_queue("z", 1)
    with pytest.raises(pressure.Empty):
        q.get(timeout=0)
    q.put(1)
    with pytest.raises(pressure.Full):
        q.put(2, timeout=0)


def test_timed_get_returns_an_item_that_arrives_in_time(make_queue: Any) -> None:
    q = make_queue("late")
    assert blocks(lambda: q.get(timeout=5), lambda: q.put("in time"), delay=0.2) == "in time"


def test_close_wakes_a_blocked_consumer(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("c")
    blocks_raising(q.get, q.close, pressure.ShutDown)
    assert r.llen(q.keys.closed) == 2  # the marker the waiter took is put back
    assert_invariants(r, q)


def test_shutdown_wakes_a_producer_blocked_on_a_full_queue(make_queue: Any, r: redis.Redis) -> None:
    """Spec failure F6: close must not wait behind a producer blocked on a full queue."""
    q = make_queue("f", 1)
    q.put(1)
    blocks_raising(lambda: q.put(2), q.shutdown, pressure.ShutDown)
    assert q.get() == 1
    assert_invariants(r, q)


def test_shutdown_wakes_every_blocked_client(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("all", 1)
    empty = make_queue("all-empty")
    q.put(0)
    outcomes: list[str] = []

    def put() -> None:
        try:
            q.put(1)
            outcomes.append("put")
        except pressure.ShutDown:
            outcomes.append("shutdown")

    def get() -> None:
        try:
            empty.get()
        except pressure.ShutDown:
            outcomes.append("shutdown")

    threads = [threading.Thread(target=put) for _ in range(4)] + [threading.Thread(target=get) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    q.shutdown()
    empty.shutdown()
    for t in threads:
        t.join(10)
    assert outcomes == ["shutdown"] * 8
    assert_invariants(r, q)
    assert_invariants(r, empty)


def test_delete_wakes_blocked_clients_with_does_not_exist(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("d")
    blocks_raising(q.get, q.delete, pressure.QueueDoesNotExist)
    assert r.keys(f"{q.prefix}:*") == []
    full = make_queue("d2", 1)
    full.put(1)
    blocks_raising(lambda: full.put(2), full.delete, pressure.QueueDoesNotExist)
    assert r.keys(f"{q.prefix}:*") == []


def test_join_waits_for_task_done_in_another_thread(make_queue: Any) -> None:
    q = make_queue("j")
    q.put(1)
    q.put(2)

    def work() -> None:
        for _ in range(2):
            q.get()
            q.task_done()

    blocks(q.join, work)
    assert q.unfinished_tasks == 0


def test_many_producer_and_consumer_threads_get_every_item_once(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("many", 5)
    n_producers, n_consumers, per_producer = 4, 4, 100
    got: list[tuple[int, int]] = []
    lock = threading.Lock()

    def produce(p: int) -> None:
        for i in range(per_producer):
            q.put((p, i))

    def consume() -> None:
        for item in q:
            with lock:
                got.append(item)

    consumers = [threading.Thread(target=consume) for _ in range(n_consumers)]
    producers = [threading.Thread(target=produce, args=(p,)) for p in range(n_producers)]
    for t in consumers + producers:
        t.start()
    for t in producers:
        t.join(60)
    q.close()
    for t in consumers:
        t.join(60)
    assert Counter(got) == Counter((p, i) for p in range(n_producers) for i in range(per_producer))
    for p in range(n_producers):  # items from one producer keep their order
        mine = [i for (pp, i) in got if pp == p]
        assert sorted(mine) == list(range(per_producer))
    stats = q.statistics()
    assert stats.produced_messages == stats.consumed_messages == n_producers * per_producer
    assert_invariants(r, q)


# -- processes ---------------------------------------------------------------------

def _producer(q: pressure.Queue[Any], start: int, count: int) -> None:
    for i in range(start, start + count):
        q.put(i)


def _consumer(q: pressure.Queue[Any], out: pressure.Queue[Any]) -> None:
    for item in q:
        out.put(item)
        q.task_done()


def _put_one(q: pressure.Queue[Any], item: Any) -> None:
    time.sleep(0.3)
    q.put(item)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_blocking_get_released_by_another_process(make_queue: Any, method: str) -> None:
    q = make_queue("proc-" + method)
    ctx = multiprocessing.get_context(method)
    p = ctx.Process(target=_put_one, args=(q, {"from": method}))
    p.start()
    try:
        assert q.get(timeout=30) == {"from": method}
    finally:
        p.join(30)
    assert p.exitcode == 0


def _get_one(q: pressure.Queue[Any], out: pressure.Queue[Any]) -> None:
    out.put(q.get(timeout=30))


def test_blocking_put_released_by_a_get_in_another_process(make_queue: Any) -> None:
    q = make_queue("pp", 1)
    out = make_queue("pp-out")
    q.put("first")
    p = multiprocessing.get_context("spawn").Process(target=_get_one, args=(q, out))
    start = time.monotonic()
    p.start()
    q.put("second", timeout=30)  # blocks until the child's get
    assert out.get(timeout=30) == "first"
    p.join(30)
    assert q.get_nowait() == "second" and time.monotonic() - start < 30


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_many_producer_and_consumer_processes(make_queue: Any, r: redis.Redis, method: str) -> None:
    q = make_queue("mp", 10)
    out = make_queue("mp-out")
    ctx = multiprocessing.get_context(method)
    producers = [ctx.Process(target=_producer, args=(q, p * 1000, 150)) for p in range(3)]
    consumers = [ctx.Process(target=_consumer, args=(q, out)) for _ in range(3)]
    for p in producers + consumers:
        p.start()
    for p in producers:
        p.join(120)
    q.join()  # every item got and marked done, across processes
    q.close()
    for p in consumers:
        p.join(60)
    assert all(p.exitcode == 0 for p in producers + consumers)
    items = [out.get_nowait() for _ in range(out.qsize())]
    assert sorted(items) == sorted(p * 1000 + i for p in range(3) for i in range(150))
    assert_invariants(r, q)


def _initializer(q: pressure.Queue[Any]) -> None:
    global _initialized_queue
    _initialized_queue = q


def _use_initialized(x: int) -> int:
    _initialized_queue.put(x)
    return x


def test_handle_passes_to_process_pool_initializer(make_queue: Any) -> None:
    from concurrent.futures import ProcessPoolExecutor

    q = make_queue("pool")
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=ctx, initializer=_initializer, initargs=(q,)) as ex:
        assert list(ex.map(_use_initialized, range(6))) == list(range(6))
    assert sorted(q.get_nowait() for _ in range(6)) == list(range(6))

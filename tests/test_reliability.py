"""Crash recovery, acknowledged gets, dead letters, inspection and repair."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from typing import Any

import pytest
import redis

import pressure
from pressure._internal import internal

from .helpers import assert_invariants, blocks, register_waiter


def _wait_for(predicate: Any, limit: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _blocked_get(q: pressure.Queue[Any]) -> None:
    q.get()  # waits on the empty queue as the registered waiter, until killed


def _kill_a_waiting_consumer(q: pressure.Queue[Any], r: redis.Redis) -> None:
    """Fork a consumer, let it become the waiter (holding the consumer role), SIGKILL it."""
    child = multiprocessing.get_context("fork").Process(target=_blocked_get, args=(q,))
    child.start()
    _wait_for(lambda: r.exists(q.keys.waiter), what="the child to wait")
    os.kill(child.pid, signal.SIGKILL)
    child.join()


def _receive_and_hang(q: pressure.Queue[Any], ready: Any) -> None:
    q.get()  # reliable mode: in flight until task_done, which never comes
    ready.set()
    time.sleep(60)


# -- role-token recovery -------------------------------------------------------------

def test_consumer_killed_while_waiting_is_recovered_within_a_second(make_queue: Any, r: redis.Redis) -> None:
    """Spec failure F1: a consumer SIGKILLed while blocked on an empty queue held the
    consumer role forever. Now the next consumer on this host takes it back."""
    q = make_queue("f1")
    _kill_a_waiting_consumer(q, r)
    assert r.llen(q.keys.consumer_free) == 0  # the dead process still holds the role
    q.put("after the crash")
    start = time.monotonic()
    assert q.get(timeout=10) == "after the crash"  # possibly via the dead consumer's inbox
    assert time.monotonic() - start < 3
    assert_invariants(r, q)
    assert q.statistics().consumed_messages == 1


def test_waiter_on_another_host_is_recovered_when_its_lease_expires(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("lease", lease=1.0)
    k = q.keys
    ghost = "elsewhere:1:1"
    # a consumer on another host registers as the waiter (as get.lua does), then vanishes
    status = register_waiter(q, ghost, "elsewhere|1|1.0|1000|d", 1000)
    assert status == -6 and r.get(k.waiter) == ghost.encode()
    start = time.monotonic()
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(q.get(timeout=15)))
    t.start()
    time.sleep(0.2)
    q.put("x")  # the lease still runs: the ghost is woken and keeps the role; "x" stays queued ...
    t.join(15)
    elapsed = time.monotonic() - start
    assert got == ["x"]  # ... until the ghost's lease expires and the role is taken back
    assert 0.9 < elapsed < 4, elapsed
    assert not r.exists(k.inbox(ghost)) and r.hget(k.consumers, ghost) is None
    assert_invariants(r, q)


def test_dead_plain_spec_producer_gets_its_token_back(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("spec-dead", 1)
    k = q.keys
    dead_pid = 2**22 + 12345  # above pid_max: never a live process
    r.rpop(k.producer_free)  # a spec producer took the role ...
    r.set(k.producer, f"{os.uname().nodename}:{dead_pid}:1")  # ... and died
    start = time.monotonic()
    q.put("through", timeout=10)
    assert time.monotonic() - start < 3
    assert q.get_nowait() == "through"
    assert_invariants(r, q)


def test_live_holder_is_never_taken_over(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("alive")
    outcome: list[str] = []

    def wait() -> None:
        try:
            q.get(timeout=3)
        except pressure.Empty:
            outcome.append("empty")

    waiting = threading.Thread(target=wait)
    waiting.start()
    _wait_for(lambda: r.exists(q.keys.waiter), what="the waiter")
    with pytest.raises(pressure.Empty):
        make_queue("alive").get(timeout=0.5)  # waits for the live waiter, takes nothing over
    assert r.exists(q.keys.waiter)
    waiting.join(10)
    assert outcome == ["empty"]
    assert_invariants(r, q)


def test_delete_recovers_a_dead_waiter(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("del-dead")
    _kill_a_waiting_consumer(q, r)
    q.delete()  # wakes the waiter; never waits on a dead one
    assert r.keys(f"{q.prefix}:*") == []


def test_repair_resets_tokens_to_the_invariants(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("repair", 2)
    q.put(1)
    k = q.keys
    r.delete(k.producer_free)
    r.lpush(k.consumer_free, 1, 1)
    r.delete(k.not_full)
    report = q.repair()
    assert report.reset == {"producer_free": "0", "consumer_free": "3", "not_full": "0"}
    assert_invariants(r, q)
    assert q.repair().reset == {}  # nothing left to do
    q.put(2)
    assert [q.get(), q.get()] == [1, 2]


def test_repair_counts_delayed_items_against_the_bound(make_queue: Any, r: redis.Redis) -> None:
    """Delayed items count against the bound (put.lua, get.lua): a full queue of delayed items
    has no :not_full permit, and repair() must not give it one (the model found it did: a put
    then went past the bound)."""
    q = make_queue("repair-delayed", 2)
    q.put_many([1, 2], delay=50)
    assert q.full() and r.llen(q.keys.not_full) == 0
    assert q.repair().reset == {}
    assert_invariants(r, q)
    with pytest.raises(pressure.Full):
        q.put_nowait(3)
    # where a permit is missing, one is given back
    q2 = make_queue("repair-delayed-room", 3)
    q2.put_many([1, 2], delay=50)
    r.delete(q2.keys.not_full)
    assert q2.repair().reset == {"not_full": "0"}
    assert_invariants(r, q2)


# -- lost replies ----------------------------------------------------------------------

def test_reply_lost_after_delivery_loses_nothing(make_queue: Any, r: redis.Redis, monkeypatch: Any) -> None:
    """The connection drops after the server moved an item to the consumer but before the
    reply arrives: the item stays in Redis and the next get returns it."""
    q = make_queue("lost-reply", serializer="bytes")
    q.put(b"precious")
    conn = q._backend.thread_connection()
    real_read = conn.read_response
    calls = {"n": 0}

    def drop_second_reply(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        reply = real_read(*args, **kwargs)
        if calls["n"] == 2:  # the BLMOVE reply carrying the item: the server did its part
            conn.disconnect()
            raise redis.ConnectionError("connection dropped (injected)")
        return reply

    monkeypatch.setattr(conn, "read_response", drop_second_reply)
    with pytest.raises(pressure.BackendError):
        q.get(timeout=5)
    monkeypatch.setattr(conn, "read_response", real_read)
    assert q.get(timeout=5) == b"precious"
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages) == (1, 1)
    assert_invariants(r, q)


# -- reliable mode ---------------------------------------------------------------------

def test_reliable_item_stays_in_flight_until_task_done(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("rel", reliable=True)
    q.put("job")
    assert q.get() == "job"
    [flight] = q.in_flight()
    assert (flight.consumer, flight.deliveries) == (q._consumer.id(), 1) and flight.age < 5
    assert flight.consumer.startswith(q.client_id + "#")
    assert q.qsize() == 0
    q.task_done()
    assert q.in_flight() == [] and q.unfinished_tasks == 0


def test_reliable_consumer_killed_mid_task_redelivers_with_a_count(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("rel-kill", reliable=True)
    q.put("task")
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    child = ctx.Process(target=_receive_and_hang, args=(q, ready))
    child.start()
    assert ready.wait(10)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    delivery = q.receive(timeout=10)  # the dead consumer is found by the sweep on this host
    assert (delivery.item, delivery.deliveries) == ("task", 2)
    assert delivery.ack()
    assert q.in_flight() == []
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages, s.size) == (1, 1, 0)
    assert_invariants(r, q)


def test_visibility_timeout_returns_items_in_their_original_order(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("vis", reliable=True, visibility_timeout=0.3)
    for i in range(3):
        q.put(i)
    q.put("tail")
    slow = make_queue("vis", reliable=True, visibility_timeout=0.3, client_id="slow-consumer")
    assert [slow.get(), slow.get(), slow.get()] == [0, 1, 2]  # never acknowledged
    time.sleep(1.5)
    other = make_queue("vis", reliable=True)
    got = [other.receive(timeout=5) for _ in range(4)]
    assert [(d.item, d.deliveries) for d in got] == [(0, 2), (1, 2), (2, 2), ("tail", 1)]
    assert {f.consumer for f in other.in_flight()} == {other._consumer.id()}  # nothing left with "slow"
    assert_invariants(r, q)


def test_out_of_order_ack_and_release(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ooo", reliable=True)
    for item in "abc":
        q.put(item)
    a, b, c = (q.receive() for _ in range(3))
    assert b.ack() and not b.ack()  # idempotent
    assert a.release()  # back to the head of the queue
    assert c.ack()
    again = q.receive()
    assert (again.item, again.deliveries) == ("a", 2)
    again.ack()
    assert q.in_flight() == [] and q.qsize() == 0
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages) == (3, 3)


def test_poison_item_goes_to_the_dead_letter_list(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("poison", reliable=True, max_deliveries=3)
    q.put("poison")
    q.put("fine")
    for attempt in (1, 2, 3):
        d = q.receive()
        assert (d.item, d.deliveries) == ("poison", attempt)
        d.release()
    d = q.receive()
    assert d.item == "fine"  # the poison item did not loop forever
    d.ack()
    [dead] = q.dead_letters()
    assert dead.deliveries == 3 and q._serializer.loads(dead.payload) == "poison"
    assert q.kick() == 1 and q.dead_letters() == [] and not r.exists(q.keys.dead)
    d = q.receive()
    assert (d.item, d.deliveries) == ("poison", 1)  # a fresh count after a kick
    d.release()
    q.receive().release()
    q.receive().release()
    assert len(q.dead_letters()) == q.statistics().dead_letters == 1
    assert q.purge_dead() == 1 and q.dead_letters() == []


def test_undeserializable_payload_goes_to_the_dead_letter_list(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("garbage")
    make_queue("garbage", serializer="bytes").put(b"\x80not a pickle")
    q.put("next")
    with pytest.raises(pressure.DeserializationError) as info:
        q.get()
    assert info.value.payload == b"\x80not a pickle"
    assert q.get() == "next"
    [dead] = q.dead_letters()
    assert dead.payload == b"\x80not a pickle"
    assert_invariants(r, q)


def test_peek_does_not_consume(make_queue: Any) -> None:
    q = make_queue("peek")
    for i in range(5):
        q.put(i)
    assert q.peek(3) == [0, 1, 2] and q.peek() == [0] and q.qsize() == 5
    assert q.peek(10) == [0, 1, 2, 3, 4]


def test_reliable_mode_keeps_the_spec_keys_consistent(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("consistent", 2, reliable=True)
    q.put(1)
    q.put(2)
    assert q.full() and r.llen(q.keys.not_full) == 0
    d = q.receive()
    assert r.llen(q.keys.base) == 1 and r.llen(q.keys.not_full) == 1  # room again for spec producers
    d.release()
    assert r.llen(q.keys.base) == 2 and r.llen(q.keys.not_full) == 0
    s = q.statistics()
    assert s.produced_messages - s.consumed_messages == s.size == 2
    assert_invariants(r, q)


def test_kick_some_dead_letters_oldest_first(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("kick", reliable=True, max_deliveries=1)
    for item in ("first", "second", "third"):
        q.put(item)
        q.receive().release()  # one delivery is the limit: straight to the dead letters
    assert [q._serializer.loads(d.payload) for d in q.dead_letters()] == ["first", "second", "third"]
    q.put("queued")
    assert q.kick(2) == 2
    assert [q._serializer.loads(d.payload) for d in q.dead_letters()] == ["third"]
    assert q.peek(3) == ["first", "second", "queued"]  # kicked to the head, oldest next out
    s = q.statistics()
    assert s.produced_messages - s.consumed_messages == s.size == 3
    assert_invariants(r, q)


def test_item_too_large_for_the_server_is_a_typed_error_and_the_handle_recovers(prefix: str) -> None:
    from pressure.testing import RedisServer

    with RedisServer(extra_args=("--proto-max-bulk-len", "1mb")) as server:
        q: pressure.Queue[bytes] = pressure.Queue("big", url=server.url, prefix=prefix, serializer="bytes")
        r = redis.Redis.from_url(server.url)
        with pytest.raises(pressure.ItemTooLarge) as info:  # checked against the server's limit
            q.put(b"x" * (2 * 1024 * 1024))  # before sending: nothing is sent
        assert isinstance(info.value, ValueError) and not isinstance(info.value, pressure.BackendError)
        assert q.qsize() == 0
        assert_invariants(r, q)
        q.put(b"small")  # the connection the server closed is replaced, not reported as unknown
        assert q.get() == b"small"


def test_clients_reconnect_cleanly_after_a_restart(prefix: str) -> None:
    from pressure.testing import RedisServer

    with RedisServer(appendonly=True) as server:
        q: pressure.Queue[str] = pressure.Queue("restart", url=server.url, prefix=prefix)
        q.put("before")
        server.restart()  # AOF with appendfsync always: nothing is lost
        q.put("after")  # a connection closed by the old server is noticed before sending
        assert [q.get(), q.get()] == ["before", "after"]
        assert_invariants(redis.Redis.from_url(server.url), q)


def test_a_sweep_never_orphans_a_consumers_lists(make_queue: Any, r: redis.Redis) -> None:
    """A consumer whose lists hold only wake-up entries keeps its record until they are
    gone, so a later Delete still finds (and deletes) its lists: nothing is left behind."""
    q = make_queue("leak", serializer="json")

    def consume() -> None:
        try:
            while True:
                q.get_many(10)
        except pressure.ShutDown:
            pass

    worker = threading.Thread(target=consume)
    worker.start()
    time.sleep(0.5)
    q.put_many([1, 2, 3])
    time.sleep(0.5)
    q.close()
    worker.join(10)
    time.sleep(1.1)  # past the sweep's once-a-second limit
    other = make_queue("leak", serializer="json")
    with pytest.raises(pressure.ShutDown):
        other.get_many(10, timeout=0.1)  # sweeps first
    q.delete()
    assert r.keys(f"{q.prefix}:*") == []


def test_settling_every_delivery_at_once(make_queue: Any, r: redis.Redis) -> None:
    """What a reader of many items uses (pressure.spark): touch them all, acknowledge them
    all, or give them all back, each in one step, however many."""
    q = make_queue("q", 10, reliable=True, visibility_timeout=60)
    q.put_many(range(10))
    got = internal(q).receive_many(6)
    cid = got[0].consumer
    time.sleep(0.3)
    before = min(f.age for f in q.in_flight())
    assert before >= 0.25
    assert internal(q).touch_all(cid) == 6
    assert max(f.age for f in q.in_flight()) < before  # every one stamped anew
    assert [f.id for f in q.in_flight()] == [d.id for d in got][::-1]  # order kept
    assert q._settle_all(cid, ack=False) == 6  # back to the head, in order
    assert q.peek(10) == list(range(10))
    assert q.in_flight() == []
    assert [d.item for d in internal(q).receive_many(4)] == [0, 1, 2, 3]
    assert q._settle_all(cid, ack=True) == 4
    assert q.in_flight() == [] and q.peek(10) == list(range(4, 10))
    st = q.statistics()
    assert (st.consumed_messages, st.size) == (4, 6)
    assert_invariants(r, q)


def test_threads_sharing_a_reliable_handle_acknowledge_each_delivery_once(make_queue: Any) -> None:
    """task_done() from two threads of one handle: each call settles a different delivery.
    (Both calls used to read the same oldest delivery: it was acknowledged once and counted
    twice, so join() returned with items still in flight, to be delivered again later.)"""
    q = make_queue(reliable=True, visibility_timeout=60)
    n = 600
    q.put_many(range(n))
    start = threading.Barrier(2)
    got: list[int] = []

    def work() -> None:
        start.wait()
        while True:
            try:
                got.append(q.get(timeout=0.5))
            except pressure.Empty:
                return
            q.task_done()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(n))
    assert q.in_flight() == []
    assert q.unfinished_tasks == 0


def test_a_consumer_holding_many_deliveries_settles_each_wherever_it_is(make_queue: Any) -> None:
    """ack, touch and release find a delivery anywhere in a long in-flight list: they search
    from the oldest end a growing chunk at a time (16, 32, 64...), so entries on both sides
    of each chunk's edge, the newest and the oldest are all found, once."""
    import random

    q = make_queue("many-held", reliable=True)
    n = 150
    q.put_many(list(range(n)))
    held = [q.receive(timeout=5) for _ in range(n)]
    assert [d.item for d in held] == list(range(n))
    # the entries at the chunk edges, counted from the oldest (the tail): 15/16, 47/48, 111/112
    edges = {0, 15, 16, 47, 48, 111, 112, n - 1}
    for i in sorted(edges):
        assert held[i].touch() is True
    assert held[48].release() is True and held[48].release() is False
    assert q.get(timeout=5) == 48  # back at the head of the queue
    q.task_done()  # that redelivery's own count
    order = [i for i in range(n) if i != 48]
    random.Random(7).shuffle(order)
    for i in order:
        assert held[i].ack() is True
        assert held[i].ack() is False
    assert not q.in_flight() and q.qsize() == 0


# -- a wait that ends empty gives back only what was never received -----------------------

_TIMED_GETS = {
    "receive": lambda q: q.receive(timeout=0.3).item,
    "get": lambda q: q.get(timeout=0.3),
    "get_many": lambda q: q.get_many(5, timeout=0.3),
}
_NOWAIT_GETS = {
    "get_nowait": lambda q: q.get_nowait(),
    "receive(block=False)": lambda q: q.receive(block=False).item,
    "get_many(block=False)": lambda q: q.get_many(5, block=False),
}


@pytest.mark.parametrize("timed", sorted(_TIMED_GETS))
def test_a_timed_out_wait_never_hands_out_a_delivery_the_handle_holds(
        make_queue: Any, r: redis.Redis, timed: str) -> None:
    """receive() then a get that waits in vain: Empty, and the delivery stays the holder's.
    (The wait's clean-up, get.lua 'cancel', was told only of get()'s deliveries: receive()'s
    went back to the inbox and came out again under the same number, acknowledged once.)"""
    q = make_queue(reliable=True, visibility_timeout=60)
    q.put("a")
    d1 = q.receive()
    with pytest.raises(pressure.Empty):
        _TIMED_GETS[timed](q)
    assert [f.id for f in q.in_flight()] == [d1.id]
    assert d1.ack() is True
    assert q.in_flight() == [] and q.qsize() == 0
    assert_invariants(r, q)


@pytest.mark.parametrize("timed", sorted(_TIMED_GETS))
def test_several_held_deliveries_survive_timed_out_waits(make_queue: Any, r: redis.Redis, timed: str) -> None:
    """Deliveries of receive(), get() and get_many() held at once, then waits that end empty:
    each is delivered once and acknowledged once."""
    q = make_queue(reliable=True, visibility_timeout=60)
    q.put_many(["a", "b", "c", "d", "e"])
    held = [q.receive(), q.receive()]
    assert q.get() == "c"
    assert q.get_many(2) == ["d", "e"]
    for _ in range(2):
        with pytest.raises(pressure.Empty):
            _TIMED_GETS[timed](q)
    assert len(q.in_flight()) == 5
    assert [d.ack() for d in held] == [True, True]
    for _ in range(3):
        q.task_done()  # the get()s' deliveries, oldest first
    assert q.in_flight() == [] and q.qsize() == 0
    assert q.unfinished_tasks == 0  # ack() and task_done() each count their own
    assert_invariants(r, q)


@pytest.mark.parametrize("nowait", sorted(_NOWAIT_GETS))
def test_a_get_that_does_not_wait_never_hands_out_a_delivery_the_handle_holds(
        make_queue: Any, r: redis.Redis, nowait: str) -> None:
    q = make_queue(reliable=True, visibility_timeout=60)
    q.put("a")
    d1 = q.receive()
    with pytest.raises(pressure.Empty):
        _NOWAIT_GETS[nowait](q)
    with pytest.raises(pressure.Empty):
        q.receive(timeout=0.3)  # and a wait after it
    assert d1.ack() is True and q.in_flight() == []
    assert_invariants(r, q)


@pytest.mark.parametrize("timed", sorted(_TIMED_GETS))
def test_an_item_arriving_while_deliveries_are_held_is_delivered_once(
        make_queue: Any, r: redis.Redis, timed: str) -> None:
    """A wait of a handle that holds deliveries gets the item put meanwhile, and only it;
    the next wait ends empty."""
    q = make_queue(reliable=True, visibility_timeout=60)
    q.put("a")
    d1 = q.receive()
    wait = {"receive": lambda: q.receive(timeout=30).item, "get": lambda: q.get(timeout=30),
            "get_many": lambda: q.get_many(5, timeout=30)}[timed]
    got = blocks(wait, lambda: q.put("b"))
    assert got == (["b"] if timed == "get_many" else "b")
    with pytest.raises(pressure.Empty):
        _TIMED_GETS[timed](q)
    assert len(q.in_flight()) == 2
    assert d1.ack() is True
    (left,) = q.in_flight()
    assert left.id != d1.id and left.deliveries == 1
    assert_invariants(r, q)


def test_a_timed_out_wait_gives_back_only_what_was_never_received(make_queue: Any, r: redis.Redis) -> None:
    """An entry in the in-flight list the handle never received (its reply lost: here taken
    by get.lua behind the handle's back) is what the timed-out wait's clean-up gives back and
    hands out; the deliveries the handle holds stay where they are."""
    q = make_queue(reliable=True, visibility_timeout=60, serializer="json")
    q.put_many(["a", "b", "c"])
    d1, d2 = q.receive(), q.receive()
    cid = d1.consumer
    lost = q._backend.script(q._get_command, (cid, "nowait", "0", q._consumer.record(),
                                              q._options.lease_ms, q.client_id))
    assert lost.endswith(b'"c"')  # in flight, never received
    d3 = q.receive(timeout=0.3)  # the queue is empty: the wait ends, and its clean-up finds c
    assert d3.item == "c" and d3.id not in (d1.id, d2.id)
    with pytest.raises(pressure.Empty):
        q.receive(timeout=0.3)
    assert [d.ack() for d in (d1, d2, d3)] == [True, True, True]
    assert q.in_flight() == [] and q.qsize() == 0
    assert_invariants(r, q)


@pytest.mark.parametrize("timed", sorted(_TIMED_GETS))
def test_default_mode_a_timed_out_wait_before_task_done_hands_nothing_back(
        make_queue: Any, r: redis.Redis, timed: str) -> None:
    q = make_queue()
    q.put_many(["a", "b"])
    assert q.get() == "a"
    assert q.receive().item == "b"
    with pytest.raises(pressure.Empty):
        _TIMED_GETS[timed](q)
    q.task_done()
    q.task_done()
    assert q.qsize() == 0 and q.unfinished_tasks == 0
    with pytest.raises(pressure.Empty):
        q.get(timeout=0.3)
    assert_invariants(r, q)

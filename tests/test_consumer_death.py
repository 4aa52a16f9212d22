"""Consumers that die inside get() or holding items (issue 12, defects 1, 2 and 5).

Real forked processes, SIGKILLed on a private redis-server: a dead waiter must not
break the bound or the order (1), a closed queue reports drained only once nothing
recoverable remains (2), and a default-mode consumer killed before get() returned
loses nothing (5).
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from typing import Any

import pytest
import redis

import pressure

from .faults_helpers import fork_child, kill_and_reap
from .helpers import assert_invariants, register_waiter

KINDS: dict[str, Any] = {"fifo": pressure.Queue, "lifo": pressure.LifoQueue,
                         "priority": pressure.PriorityQueue}


def _wait_for(predicate: Any, limit: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class KillOnLoad:
    """A pickle serializer whose loads SIGKILLs its own process: the consumer dies inside
    get(), after Redis delivered the item and before get() could return it."""

    def dumps(self, obj: Any) -> bytes:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # never reached


def _consume(url: str, prefix: str, name: str, kind: str, kw: dict[str, Any], how: str,
             marker: str) -> None:
    """Runs in a forked child: one get of the kind ``how``, then (if it returns) mark
    ``marker`` in Redis and wait to be killed."""
    q = KINDS[kind](name, url=url, prefix=prefix, **kw)
    if how == "get":
        q.get()
    elif how == "get_nowait":
        q.get_nowait()
    elif how == "get_many":
        q.get_many(10)
    elif how == "receive":
        q.receive()
    redis.Redis.from_url(url).set(marker, 1)
    time.sleep(60)


def _dead_consumer(q: Any, r: redis.Redis, url: str, how: str, *, until: Any = None,
                   **kw: Any) -> None:
    """Fork a consumer of ``q`` that runs one ``how`` get, wait for ``until`` (default:
    the get returned), SIGKILL it and reap it."""
    marker = f"{q.prefix}:test:returned"
    kind = {pressure.Queue: "fifo", pressure.LifoQueue: "lifo", pressure.PriorityQueue: "priority"}[type(q)]
    pid = fork_child(_consume, url, q.prefix, q.name, kind, kw, how, marker)
    try:
        _wait_for(until or (lambda: r.exists(marker)), what=f"the child's {how}")
    finally:
        kill_and_reap(pid)


def _dead_waiter(q: Any, r: redis.Redis, url: str, **kw: Any) -> None:
    """A consumer SIGKILLed while blocked in get() on the empty queue (the registered waiter)."""
    _dead_consumer(q, r, url, "get", until=lambda: r.exists(q.keys.waiter), **kw)


# -- defect 1: a dead waiter breaks FIFO and the bound ----------------------------------

@pytest.mark.parametrize("kind", ["fifo", "lifo", "priority"])
def test_an_item_put_while_the_waiter_is_dead_counts_against_the_bound(
        url: str, prefix: str, r: redis.Redis, kind: str) -> None:
    q = KINDS[kind]("bound", 1, url=url, prefix=prefix)
    _dead_waiter(q, r, url)
    q.put((1, "a"))
    with pytest.raises(pressure.Full):
        q.put((2, "b"), timeout=0.5)  # the queue holds "a" (nobody received it): full
    assert q.qsize() == 1 and r.llen(q.keys.not_full) == 0
    consumer = KINDS[kind]("bound", url=url, prefix=prefix)
    start = time.monotonic()
    assert consumer.get(timeout=10) == (1, "a")  # the dead waiter (this host) is recovered at once
    assert time.monotonic() - start < 3
    q.put((2, "b"), timeout=5)
    assert consumer.get(timeout=5) == (2, "b")
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages, s.size) == (2, 2, 0)
    if kind == "fifo":
        assert_invariants(r, q)
    consumer.disconnect()
    q.disconnect()


def test_items_put_while_the_waiter_is_dead_come_out_in_order(url: str, prefix: str, r: redis.Redis) -> None:
    q: pressure.Queue[str] = pressure.Queue("order", url=url, prefix=prefix)
    _dead_waiter(q, r, url)
    for item in "abc":
        q.put(item)
    assert q.qsize() == 3  # a plain spec client sees all three queued
    consumer: pressure.Queue[str] = pressure.Queue("order", url=url, prefix=prefix)
    assert [consumer.get(timeout=10) for _ in range(3)] == ["a", "b", "c"]
    assert_invariants(r, q)
    consumer.disconnect()
    q.disconnect()


def test_items_put_while_a_waiter_elsewhere_is_dead_wait_for_its_lease_in_order(
        make_queue: Any, r: redis.Redis) -> None:
    """A waiter on another host cannot be checked by pid: the role comes back when its
    lease expires, and what was put meanwhile then comes out first, within the bound."""
    q = make_queue("ghost", 2, lease=1.0)
    ghost = "otherhost:1:1#ghost"
    assert register_waiter(q, ghost, "otherhost|1|1.0|1000|d", 1000) == -6
    start = time.monotonic()
    q.put("a")
    q.put("b")
    with pytest.raises(pressure.Full):
        q.put("c", timeout=0.2)
    consumer = make_queue("ghost")
    assert [consumer.get(timeout=10), consumer.get(timeout=10)] == ["a", "b"]
    assert 0.9 < time.monotonic() - start < 5
    assert not r.exists(q.keys.inbox(ghost)) and r.hget(q.keys.consumers, ghost) is None
    assert_invariants(r, q)


# -- defect 2: close() strands the in-flight items of a dead consumer -----------------

def test_a_closed_queue_drains_what_a_dead_reliable_consumer_held(url: str, prefix: str,
                                                                  r: redis.Redis) -> None:
    q: pressure.Queue[str] = pressure.Queue("closing", url=url, prefix=prefix, reliable=True)
    q.put("held")
    q.put("queued")
    _dead_consumer(q, r, url, "receive", reliable=True)  # took "held", never acknowledged it
    q.close()
    start = time.monotonic()
    drained = []
    for item in q:  # recovers the dead holder (this host) before answering "drained"
        drained.append(item)
        q.task_done()
    assert sorted(drained) == ["held", "queued"]
    assert time.monotonic() - start < 5
    assert q.in_flight() == [] and q.qsize() == 0
    with pytest.raises(pressure.ShutDown):
        q.get_nowait()
    q.disconnect()


def test_a_closed_queue_waits_for_a_live_holder(make_queue: Any, r: redis.Redis) -> None:
    holder = make_queue("live", reliable=True)
    other = make_queue("live", reliable=True)
    holder.put("x")
    d = holder.receive()
    holder.close()
    # not drained while "x" may come back: Empty (as an open, empty queue), never ShutDown
    with pytest.raises(pressure.Empty):
        other.get_nowait()
    with pytest.raises(pressure.Empty):
        other.get(timeout=0.3)
    release = threading.Timer(0.3, d.release)  # back to the queue: the waiting consumer gets it
    release.start()
    assert other.get(timeout=10) == "x"
    release.join()
    # now "other" holds it: its own delivery never makes it wait (it would wait for itself)
    with pytest.raises(pressure.ShutDown):
        other.get(timeout=5)
    ended: list[str] = []

    def drain() -> None:
        try:
            holder.get(timeout=10)
            ended.append("item")
        except pressure.ShutDown:
            ended.append("ShutDown")
        except pressure.Empty:
            ended.append("Empty")

    t = threading.Thread(target=drain)
    t.start()
    time.sleep(0.3)
    assert ended == []  # waits for "x": other may still give it back
    other.task_done()  # acknowledged: nothing recoverable is left
    t.join(15)
    assert ended == ["ShutDown"]
    assert_invariants(r, holder)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("how", ["get", "get_nowait"])
def test_an_item_given_back_while_a_get_looks_at_the_holders_is_got_not_shut_down(
        url: str, prefix: str, r: redis.Redis, kind: str, how: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """get.lua says closed, empty, held by others (-8); the holder gives its item back
    before the get has looked at the holders: the item is in the queue, so the get gets
    it. (The look read the holders apart from the queue and found the item in neither:
    ShutDown with "x" queued, seen once in CI as test_a_closed_queue_waits_for_a_live_holder.)"""
    holder = KINDS[kind]("back", url=url, prefix=prefix, reliable=True)
    other = KINDS[kind]("back", url=url, prefix=prefix, reliable=True)
    try:
        holder.put("x")
        d = holder.receive()
        holder.close()
        roles = other._consumer.roles
        look = roles.recover_holders

        def given_back_first(cid: str) -> str:
            d.release()  # as when it lands between get.lua's -8 and this look
            return look(cid)

        monkeypatch.setattr(roles, "recover_holders", given_back_first)
        assert (other.get(timeout=5) if how == "get" else other.get_nowait()) == "x"
        other.task_done()
        with pytest.raises(pressure.ShutDown):
            other.get_nowait()
        assert_invariants(r, holder)
    finally:
        holder.disconnect()
        other.disconnect()


def test_a_closed_queue_is_drained_once_a_live_default_consumer_got_the_last_item(
        make_queue: Any) -> None:
    """What a default-mode get returned is its consumer's, even while the drop of its
    in-flight entry is still on the way to Redis: the queue is drained, as queue.Queue's."""
    producer = make_queue("last")
    consumer = make_queue("last")
    producer.put("x")
    assert consumer.get_nowait() == "x"
    producer.close()
    with pytest.raises(pressure.ShutDown):
        producer.get_nowait()
    with pytest.raises(pressure.ShutDown):
        producer.get(timeout=5)


# -- defect 5: default mode loses items of a consumer killed inside get() --------------

@pytest.mark.parametrize("how", ["get", "get_nowait", "get_many"])
def test_a_default_consumer_killed_before_get_returned_loses_nothing(
        url: str, prefix: str, r: redis.Redis, how: str) -> None:
    q: pressure.Queue[str] = pressure.Queue("inside", url=url, prefix=prefix)
    for item in "abc":
        q.put(item)
    _dead_consumer(q, r, url, how, serializer=KillOnLoad(),
                   until=lambda: not r.exists(q.keys.base) or r.llen(q.keys.base) < 3)
    time.sleep(0.2)  # the child is gone; what it took is in its lists
    consumer: pressure.Queue[str] = pressure.Queue("inside", url=url, prefix=prefix)
    # what it took is back at the head once it is seen dead (a sweep, about once a second):
    # "b" and "c" may come out before that
    got = [consumer.get(timeout=5) for _ in range(3)]
    assert sorted(got) == ["a", "b", "c"]
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages, s.size) == (3, 3, 0)
    assert q.in_flight() == [] or {f.consumer for f in q.in_flight()} == {consumer._consumer.id()}
    assert_invariants(r, q)
    consumer.disconnect()
    q.disconnect()


def test_a_default_waiter_killed_as_its_item_arrives_loses_nothing(url: str, prefix: str,
                                                                   r: redis.Redis) -> None:
    q: pressure.Queue[str] = pressure.Queue("woken", url=url, prefix=prefix)
    marker = f"{prefix}:test:returned"
    pid = fork_child(_consume, url, prefix, "woken", "fifo", {"serializer": KillOnLoad()}, "get", marker)
    try:
        _wait_for(lambda: r.exists(q.keys.waiter), what="the child to wait")
        q.put("woke it")  # the waiter takes it, and dies deserializing it
        _wait_for(lambda: not os.path.exists(f"/proc/{pid}") or _is_zombie(pid), what="the kill")
    finally:
        kill_and_reap(pid)
    consumer: pressure.Queue[str] = pressure.Queue("woken", url=url, prefix=prefix)
    assert consumer.get(timeout=5) == "woke it"
    assert_invariants(r, q)
    consumer.disconnect()
    q.disconnect()


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_default_consumer_on_another_host_killed_inside_get_loses_nothing(
        make_queue: Any, r: redis.Redis) -> None:
    """Taken by get.lua for a consumer on another host that never came back (it died before
    get() returned): no pid to check, so it comes back once that consumer's lease has passed."""
    q = make_queue("far", lease=1.0)
    q.put("taken")
    q.put("next")
    ghost = "otherhost:1:1#ghost"
    k = q.keys
    entry = q._backend.script(q._get_command, (ghost, "nowait", "0", "otherhost|1|1.0|1000|d", 1000, ghost))
    assert entry.endswith(pickle.dumps("taken", protocol=pickle.HIGHEST_PROTOCOL))
    time.sleep(1.2)
    consumer = make_queue("far", lease=1.0)
    assert [consumer.get(timeout=5), consumer.get(timeout=5)] == ["taken", "next"]
    assert not r.exists(k.inflight(ghost)) and r.hget(k.consumers, ghost) is None


def test_a_default_consumer_killed_after_get_returned_loses_that_item_only(
        url: str, prefix: str, r: redis.Redis) -> None:
    """At most once, as documented: an item get() returned is the consumer's; killing it
    while it processes the item loses the item, and never delivers it twice."""
    q: pressure.Queue[str] = pressure.Queue("after", url=url, prefix=prefix)
    q.put("processing")
    q.put("queued")
    _dead_consumer(q, r, url, "get")
    # nothing of it is left in Redis once get() returned (its DEL may land an instant later)
    _wait_for(lambda: q.in_flight() == [], what="the returned item to leave Redis")
    consumer: pressure.Queue[str] = pressure.Queue("after", url=url, prefix=prefix)
    assert consumer.get(timeout=5) == "queued"
    with pytest.raises(pressure.Empty):
        consumer.get(timeout=1.5)  # well past a sweep: "processing" never comes back
    consumer.disconnect()
    q.disconnect()


def _get_and_exit(url: str, prefix: str, name: str) -> None:
    pressure.Queue(name, url=url, prefix=prefix).get()  # then os._exit(0), no cleanup at all


def test_a_default_consumer_that_exits_after_get_never_gets_its_item_delivered_again(
        url: str, prefix: str, r: redis.Redis) -> None:
    q: pressure.Queue[str] = pressure.Queue("exit", url=url, prefix=prefix)
    q.put("done")
    pid = fork_child(_get_and_exit, url, prefix, "exit")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    consumer: pressure.Queue[str] = pressure.Queue("exit", url=url, prefix=prefix)
    with pytest.raises(pressure.Empty):
        consumer.get(timeout=1.5)
    assert q.in_flight() == [] and q.qsize() == 0
    consumer.disconnect()
    q.disconnect()

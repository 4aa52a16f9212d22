"""utube (put(..., key=)): one item of a key at a time, in order, as tarantool/queue's utube.

Each test drives a real server; no timed assertions (a delayed item is waited for past its due
time, never measured).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis

import pressure
from pressure import identity
from pressure.aio import AsyncQueue

from .faults_helpers import fork_child, kill_and_reap
from .helpers import assert_invariants
from .test_lifecycle import DUE, _consume, _spec, _wait_for


def test_utube_hands_out_one_item_per_key_at_a_time(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ut", reliable=True)
    q.put_many(["a1", "a2", "a3"], key="a")
    q.put("b1", key="b")
    q.put("free")
    assert q.qsize() == 3  # a1, b1, free: a2 and a3 wait behind a1
    a1, b1, free = (q.receive(block=False) for _ in range(3))
    assert (a1.item, b1.item, free.item) == ("a1", "b1", "free")
    with pytest.raises(pressure.Empty):
        q.receive(block=False)
    assert a1.release()  # given back: still a's current item
    again = q.receive(block=False)
    assert again.item == "a1" and again.deliveries == 2
    assert again.ack()  # done: a2 comes in
    a2 = q.receive(block=False)
    assert a2.item == "a2"
    assert a2.bury()  # dead-lettered: a3 comes in
    a3 = q.receive(block=False)
    assert a3.item == "a3"
    assert a3.delete()  # deleted: a's items are all gone
    assert r.hkeys(q.keys.utube) == [b"b"]
    b1.ack()
    free.ack()
    assert r.exists(q.keys.utube, q.keys.meta) == 0
    assert_invariants(r, q)


def test_utube_an_expired_item_lets_the_next_in(make_queue: Any) -> None:
    q = make_queue("utx", reliable=True)
    q.put("old", key="k", ttl=0.01)
    q.put("new", key="k")
    time.sleep(0.05)
    assert q.receive(block=False).item == "new"


def test_utube_in_the_default_mode_a_get_lets_the_next_in(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("utd")
    q.put_many([1, 2], key="k")
    assert q.get_nowait() == 1 and q.get_nowait() == 2
    assert r.exists(q.keys.utube, q.keys.meta) == 0


def test_utube_lists_go_with_the_queue(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("utdel", reliable=True)
    q.put_many([1, 2, 3], key="k")
    assert r.llen(f"{q.keys.utube}:k") == 2
    q.delete()
    assert r.exists(q.keys.utube, f"{q.keys.utube}:k", q.keys.meta) == 0


def test_utube_bad_input(make_queue: Any, url: str, prefix: str) -> None:
    q = make_queue("utbad")
    with pytest.raises(ValueError):
        q.put(1, key="k", delay=1)
    with pytest.raises(TypeError):
        q.put(1, key=5)
    with pytest.raises(TypeError):
        q.put_many([1], key="")
    lifo: pressure.Queue[int] = pressure.LifoQueue("utl", url=url, prefix=prefix)
    with pytest.raises(ValueError):
        lifo.put(1, key="k")
    lifo.delete()
    assert q.qsize() == 0


@pytest.mark.parametrize("settle", ["ack", "bury", "delete"])
@pytest.mark.parametrize("maxsize", [0, 3])
def test_utube_a_key_lets_its_next_item_in_behind_the_items_due_by_then(make_queue: Any, r: redis.Redis,
                                                                       settle: str, maxsize: int) -> None:
    # A delayed item enters the queue when it falls due; a key's next item enters when the
    # key's current one is done. Due first, done later: the due item is ahead, whichever
    # script lets the key's item in (ack.lua, requeue.lua's bury, find_item.lua's delete).
    q = make_queue(f"utdue{settle}{maxsize}", maxsize, reliable=True)
    q.put_many(["k1", "k2"], key="k")
    first = q.receive(block=False)
    q.put("due", delay=0.05)
    time.sleep(0.2)  # due now; no script has moved it in yet
    assert getattr(first, settle)()
    assert [q.receive(block=False).item for _ in range(2)] == ["due", "k2"]
    assert_invariants(r, q)


KEYS_ = ("k0", "k1", "k2", "k3")
PER_KEY = 12


def _utube_worker(url: str, prefix: str, name: str) -> None:
    """A consumer process: for each item, claim its key (SET NX: an overlap fails), work a
    little, record the item in its key's order list, release the claim, acknowledge."""
    import random
    q: pressure.Queue[tuple[str, int]] = pressure.Queue(name, url=url, prefix=prefix, reliable=True)
    r = redis.Redis.from_url(url)
    while r.llen(f"{prefix}:test:done") < len(KEYS_) * PER_KEY:
        try:
            d = q.receive(timeout=0.5)
        except pressure.Empty:
            continue
        key, n = d.item
        if not r.set(f"{prefix}:test:busy:{key}", n, nx=True):
            r.rpush(f"{prefix}:test:overlaps", f"{key}:{n}")
        time.sleep(random.random() * 0.005)
        r.rpush(f"{prefix}:test:order:{key}", n)
        r.delete(f"{prefix}:test:busy:{key}")
        r.rpush(f"{prefix}:test:done", f"{key}:{n}")
        d.ack()


def test_utube_across_consumer_processes_never_overlaps_and_keeps_order(url: str, r: redis.Redis,
                                                                         make_queue: Any) -> None:
    q = make_queue("utp", reliable=True)
    for n in range(PER_KEY):  # interleaved keys, as a producer would put them
        for key in KEYS_:
            q.put((key, n), key=key)
    pids = [fork_child(_utube_worker, url, q.prefix, "utp") for _ in range(3)]
    try:
        _wait_for(lambda: r.llen(f"{q.prefix}:test:done") >= len(KEYS_) * PER_KEY, "every item")
    finally:
        for pid in pids:
            kill_and_reap(pid)
    assert r.lrange(f"{q.prefix}:test:overlaps", 0, -1) == []
    for key in KEYS_:
        assert [int(n) for n in r.lrange(f"{q.prefix}:test:order:{key}", 0, -1)] == list(range(PER_KEY))
    assert r.exists(q.keys.utube) == 0


def test_utube_a_consumer_killed_holding_the_current_item_blocks_its_key_until_recovered(
        url: str, r: redis.Redis, make_queue: Any) -> None:
    """The current item of a key comes back to the next consumer after its holder is SIGKILLed
    (at least once), and the key's next item only after it is acknowledged: no overlap."""
    q = make_queue("utkill", reliable=True)
    q.put_many(["k0", "k1"], key="k")
    marker = f"{q.prefix}:test:returned"
    pid = fork_child(_consume, url, q.prefix, "utkill", marker)
    try:
        _wait_for(lambda: r.exists(marker), "the child's get")
    finally:
        kill_and_reap(pid)
    d = q.receive(timeout=DUE * 3)
    assert d.item == "k0" and d.deliveries == 2
    with pytest.raises(pressure.Empty):
        q.receive(block=False)  # k1 waits for k0
    d.ack()
    assert q.receive(block=False).item == "k1"


def _get_closed(q: pressure.Queue[Any], how: str) -> Any:
    """One get of ``how`` on ``q`` (one that waits for good ends at pytest's timeout)."""
    if how == "get_nowait":
        return q.get_nowait()
    if how == "receive_nowait":
        return q.receive(block=False)
    if how == "get_timeout":
        return q.get(timeout=5)
    if how == "receive_timeout":
        return q.receive(timeout=5)
    return q.get()


GETS = ["get_nowait", "receive_nowait", "get_timeout", "receive_timeout", "get"]


@pytest.mark.parametrize("how", GETS)
@pytest.mark.parametrize("behind", [0, 2])
def test_utube_a_closed_queue_never_waits_for_the_consumers_own_key(make_queue: Any, r: redis.Redis,
                                                                      behind: int, how: str) -> None:
    """The consumer holds its key's current item: its own delivery never makes it wait, nor
    do the items behind it, which only its own settling lets in (a wait would be for
    itself). Nothing is lost: each acknowledgement lets the next item in for the next get."""
    q = make_queue("utown", reliable=True)
    q.put_many([f"k{i}" for i in range(1 + behind)], key="k")
    d = q.receive(block=False)
    q.close()
    with pytest.raises(pressure.ShutDown):
        _get_closed(q, how)
    for i in range(1, 1 + behind):
        d.ack()
        d = q.receive(block=False)
        assert d.item == f"k{i}"
        with pytest.raises(pressure.ShutDown):
            _get_closed(q, how)
    assert d.release()  # given back: the next get finds it again
    d = q.receive(block=False)
    assert d.item == f"k{behind}" and d.deliveries == 2
    d.ack()
    with pytest.raises(pressure.ShutDown):
        _get_closed(q, how)
    assert r.exists(q.keys.utube, q.keys.meta) == 0
    assert_invariants(r, q)


def test_utube_a_closed_queue_drains_a_key_in_a_task_done_loop(make_queue: Any, r: redis.Redis) -> None:
    """`for item in q` with task_done(): each acknowledgement lets the key's next item in
    before the next get looks, so the loop gets every one and ends drained."""
    q = make_queue("utloop", reliable=True)
    q.put_many(["k0", "k1", "k2"], key="k")
    q.put("free")
    q.close()
    got = []
    for item in q:
        got.append(item)
        q.task_done()
    assert got == ["k0", "free", "k1", "k2"]
    assert r.exists(q.keys.utube, q.keys.meta) == 0


@pytest.mark.parametrize("behind", [0, 1])
def test_utube_a_closed_queue_waits_for_another_consumers_key(make_queue: Any, r: redis.Redis,
                                                              behind: int) -> None:
    """Another live consumer holds the key's current item: not drained until it settles it."""
    holder = make_queue("utother", reliable=True)
    other = make_queue("utother", reliable=True)
    holder.put_many([f"k{i}" for i in range(1 + behind)], key="k")
    d = holder.receive(block=False)
    holder.close()
    with pytest.raises(pressure.Empty):
        other.get_nowait()
    with pytest.raises(pressure.Empty):
        other.get(timeout=0.3)
    ack = threading.Timer(0.3, d.ack)
    ack.start()
    try:
        if behind:
            assert other.get(timeout=DUE) == "k1"  # let in by the holder's acknowledgement
            other.task_done()
        with pytest.raises(pressure.ShutDown):
            other.get(timeout=DUE)
    finally:
        ack.join()
    assert_invariants(r, holder)


def test_utube_a_closed_queue_waits_for_a_spec_clients_key(make_queue: Any, r: redis.Redis) -> None:
    """A plain spec client took the key's current item: it leaves no consumer record and
    cannot acknowledge, so the key stays blocked (until delete_item) and the queue undrained."""
    q = make_queue("utspec", reliable=True, serializer="bytes")
    q.put_many([b"k0", b"k1"], key="k")
    assert _spec(r, q).get_nowait() == b"k0"
    q.close()
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    with pytest.raises(pressure.Empty):
        q.get(timeout=0.3)


def test_utube_own_key_and_a_live_default_consumer_here_is_drained(make_queue: Any, r: redis.Redis) -> None:
    """Another consumer's in-flight entry whose drop is on its way (a default-mode consumer
    alive on this host: its get returned it) sends the get to look at the holders; there the
    key whose current item the getter holds does not make it wait either."""
    q = make_queue("utlook", reliable=True)
    q.put_many(["k0", "k1"], key="k")
    d = q.receive(block=False)
    q.close()
    host, pid, start = identity.process_record()
    returned = "returned#0"  # as a default-mode consumer of this process whose get returned
    r.hset(q.keys.consumers, returned, f"{host}|{pid}|{start}|10000|d")
    r.lpush(q.keys.inflight(returned), b"99:1:0:x")
    try:
        with pytest.raises(pressure.ShutDown):
            q.get_nowait()
        with pytest.raises(pressure.ShutDown):
            q.get(timeout=5)
    finally:
        r.delete(q.keys.inflight(returned))
        r.hdel(q.keys.consumers, returned)
    d.ack()
    assert q.receive(block=False).item == "k1"


@pytest.mark.parametrize("how", GETS)
@pytest.mark.parametrize("behind", [0, 1])
def test_utube_a_closed_queue_never_waits_for_an_async_consumers_own_key(url: str, prefix: str,
                                                                          behind: int, how: str) -> None:
    """As the sync test: pressure.aio's gets judge the drain as the sync ones do."""
    async def get(q: AsyncQueue[Any]) -> Any:
        if how == "get_nowait":
            return await q.get_nowait()
        if how == "receive_nowait":
            return await q.receive(block=False)
        if how == "get_timeout":
            return await q.get(timeout=5)
        if how == "receive_timeout":
            return await q.receive(timeout=5)
        return await q.get()

    async def main() -> None:
        async with AsyncQueue[Any]("utaio", url=url, prefix=prefix, reliable=True) as q:
            d = await q.receive(block=False)
            await q.close()
            with pytest.raises(pressure.ShutDown):
                await get(q)
            if behind:
                await d.ack()
                d = await q.receive(block=False)
                assert d.item == "k1"
                with pytest.raises(pressure.ShutDown):
                    await get(q)
            await d.ack()
            with pytest.raises(pressure.ShutDown):
                await get(q)

    producer = pressure.Queue[Any]("utaio", url=url, prefix=prefix)
    try:
        producer.put_many([f"k{i}" for i in range(1 + behind)], key="k")
        asyncio.run(main())
    finally:
        producer.disconnect()


def test_utube_immediate_shutdown_discards_the_items_behind_keys(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("utimm", reliable=True)
    q.put_many(["k0", "k1", "k2"], key="k")
    d = q.receive(block=False)
    q.shutdown(immediate=True)
    assert q.statistics().discarded_messages == 2
    assert r.exists(q.keys.utube, f"{q.keys.utube}:k") == 0
    d.ack()
    assert r.exists(q.keys.utube) == 0

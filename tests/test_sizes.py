"""qsize(), empty(), full() and statistics() say what put and get do (issue 29, defect 3).

At any instant (no other client acting): empty() is True exactly when get_nowait() would hand
out no item (Empty; ShutDown on a closed, drained queue), full() exactly when put_nowait()
would raise Full (on an open queue), and qsize() is how many items the gets would hand out.
Delayed items due count as ready (a get moves them in first), items past their ttl do not (a
get drops them), an item of a utube key waiting behind another is not ready, and every delayed
item holds its place under the bound (a put counts it). These hold without any put or get
having run since the items came due or expired: the reads count as the next get would find
the queue, and change nothing. Each case asks, then does. Short real delays and ttls, waited
for generously, never measured.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest
import redis

import pressure
from pressure.aio import AsyncQueue
from pressure.cli._inventory import find_queues, queue_rows
from pressure.connection import Backend, ConnectionConfig

KINDS = {"fifo": pressure.Queue, "lifo": pressure.LifoQueue, "priority": pressure.PriorityQueue}
#: a short delay or ttl, and how long the tests wait for one to pass (generous: shared machine)
SHORT, PAST = 0.2, 0.6
#: a delay or ttl that does not pass during a test
LONG = 600.0


def _queue(kind: str, url: str, prefix: str, name: str, maxsize: int = 0, **kw: Any) -> pressure.Queue[Any]:
    q: pressure.Queue[Any] = KINDS[kind](name, maxsize, url=url, prefix=prefix, **kw)
    return q


def _gets_an_item(q: pressure.Queue[Any]) -> bool:
    try:
        q.get_nowait()
    except (pressure.Empty, pressure.ShutDown):
        return False
    return True


def _put_is_full(q: pressure.Queue[Any], item: Any) -> bool:
    try:
        q.put_nowait(item)
    except pressure.Full:
        return True
    return False


@pytest.mark.parametrize("kind", list(KINDS))
def test_delayed_items_fill_the_bound_for_full_as_for_put(kind: str, url: str, prefix: str, r: redis.Redis) -> None:
    q = _queue(kind, url, prefix, "bound", 2)
    q.put(1, delay=LONG)
    q.put(2, delay=LONG)
    assert q.qsize() == 0 and q.empty()
    assert q.full()
    with pytest.raises(pressure.Full):
        q.put_nowait(3)
    assert r.zcard(q.keys.delayed) == 2
    q.delete()


@pytest.mark.parametrize("kind", list(KINDS))
def test_due_items_are_ready_before_any_put_or_get_moves_them(kind: str, url: str, prefix: str,
                                                              r: redis.Redis) -> None:
    q = _queue(kind, url, prefix, "due")
    q.put_many([1, 2, 3], delay=SHORT)
    time.sleep(PAST)
    assert r.zcard(q.keys.delayed) == 3  # nobody moved them in yet
    assert q.qsize() == 3 and not q.empty()
    s = q.statistics()
    assert (s.size, s.delayed) == (3, 0) and s.tasks["ready"] == 3
    assert r.zcard(q.keys.delayed) == 3  # the reads changed nothing
    assert q.get_nowait() == (3 if kind == "lifo" else 1)
    q.delete()


def test_items_past_their_ttl_are_not_counted(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ttl", reliable=True)
    q.put_many(["a", "b"], ttl=SHORT)
    q.put("c", delay=SHORT, ttl=SHORT / 4)  # due, then past its ttl before anyone looks
    time.sleep(PAST)
    assert r.llen(q.keys.base) == 2 and r.zcard(q.keys.delayed) == 1
    assert q.qsize() == 0 and q.empty()
    s = q.statistics()
    assert (s.size, s.delayed, s.expired) == (0, 0, 3)
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    s = q.statistics()
    assert (s.size, s.delayed, s.expired) == (0, 0, 3)  # the same figures once the get dropped them


def test_an_expired_utube_item_counts_the_next_of_its_key(make_queue: Any) -> None:
    q = make_queue("utx", reliable=True)
    q.put("old", key="k", ttl=SHORT)
    q.put("older-behind", key="k", ttl=SHORT)
    q.put("new", key="k")
    time.sleep(PAST)
    assert q.qsize() == 1 and not q.empty()
    assert q.statistics().expired == 2
    assert q.get_nowait() == "new"
    assert q.qsize() == 0 and q.empty()


def test_an_item_waiting_behind_its_key_is_not_ready(make_queue: Any) -> None:
    """The rule for utube: only a key's current item can be got; those behind it are in no
    count that empty() or qsize() reads (nor under the bound), until it is done."""
    q = make_queue("utw", reliable=True)
    q.put_many(["k0", "k1"], key="k")
    assert q.qsize() == 1
    d = q.receive(block=False)
    assert q.qsize() == 0 and q.empty()
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    d.ack()  # k1 comes in
    assert q.qsize() == 1 and not q.empty()
    assert q.get_nowait() == "k1"


def test_a_get_finds_a_due_item_that_the_bound_kept_out_behind_expired_ones(make_queue: Any,
                                                                            r: redis.Redis) -> None:
    """A full list of items past their ttl, and a due item kept out by the bound: the get drops
    them and takes the due one (as qsize() counted it), not Empty."""
    q = make_queue("room", 2, reliable=True)
    q.put("x", ttl=LONG)
    d = q.receive(block=False)
    q.put_many(["y", "z"], ttl=SHORT)  # the bound
    assert d.release(delay=SHORT)  # back among the delayed ones, past the bound
    time.sleep(PAST)
    assert r.llen(q.keys.base) == 2 and r.zcard(q.keys.delayed) == 1
    assert q.qsize() == 1 and not q.empty()
    assert q.get_nowait() == "x"


def test_a_closed_queue(make_queue: Any) -> None:
    q = make_queue("closed", 1)
    q.put("later", delay=SHORT)
    q.close()
    assert q.full() and q.empty()  # the bound holds the delayed item; nothing to get yet
    with pytest.raises(pressure.ShutDown):
        q.put_nowait("x")
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    time.sleep(PAST)
    assert not q.empty() and q.qsize() == 1
    assert q.get_nowait() == "later"
    assert q.empty() and not q.full()
    with pytest.raises(pressure.ShutDown):
        q.get_nowait()


@pytest.mark.parametrize("seed", range(6))
def test_asking_agrees_with_doing(seed: int, url: str, prefix: str, r: redis.Redis) -> None:
    """A random mix of items ready, due, delayed, past their ttl and behind utube keys (FIFO),
    some held by a consumer: at each step qsize/empty/full are asked, then a get and a put
    done, and they must agree; qsize() must be how many items the gets then hand out."""
    rng = random.Random(seed)
    kind = list(KINDS)[seed % 3]
    fifo = kind == "fifo"
    q = _queue(kind, url, prefix, f"mix{seed}", reliable=True)
    n = 0

    def item() -> int:
        nonlocal n
        n += 1
        return n

    for _ in range(rng.randint(8, 16)):
        what = rng.choice(["ready", "due", "delayed", "expired", "due-expired"] + ["keyed"] * 2 * fifo)
        if what == "ready":
            q.put(item())
        elif what == "due":
            q.put(item(), delay=SHORT)
        elif what == "delayed":
            q.put(item(), delay=LONG)
        elif what == "expired":
            q.put(item(), ttl=SHORT)
        elif what == "due-expired":
            q.put(item(), delay=SHORT, ttl=SHORT / 4)
        else:
            q.put(item(), key=rng.choice("abc"), ttl=rng.choice([SHORT, LONG]))
    held = [q.receive(block=False) for _ in range(rng.randint(0, 2)) if not q.empty()]
    time.sleep(PAST)  # every short delay and ttl has passed: nothing changes by itself from here
    q.maxsize = rng.choice([0, 1, 3, 6, 100])
    stored = (r.llen(q.keys.base) if fifo else r.zcard(q.keys.base), r.zcard(q.keys.delayed))
    q.qsize(), q.empty(), q.full(), q.statistics()
    assert (r.llen(q.keys.base) if fifo else r.zcard(q.keys.base), r.zcard(q.keys.delayed)) == stored
    for step in range(40):
        size, empty, full = q.qsize(), q.empty(), q.full()
        assert empty == (size == 0) and q.statistics().size == size, step
        action = rng.random()
        if action < 0.3:
            refused = _put_is_full(q, item())
            assert full == refused, step
            assert q.qsize() == size + (not refused), step
        elif action < 0.4 and held:
            held.pop().ack()  # may let the next item of its key in
        else:
            assert _gets_an_item(q) == (not empty), step
            assert q.qsize() == max(size - 1, 0), step
    for d in held:
        d.ack()
    q.delete()


def test_aio_sizes_agree_with_put_and_get(url: str, prefix: str, r: redis.Redis) -> None:
    sync = pressure.Queue[Any]("aio", 2, url=url, prefix=prefix)
    sync.put(1, delay=LONG)
    sync.put(2, delay=SHORT)
    time.sleep(PAST)

    async def main() -> None:
        async with AsyncQueue[Any]("aio", url=url, prefix=prefix) as q:
            assert await q.full()
            with pytest.raises(pressure.Full):
                await q.put_nowait(3)
            assert await q.qsize() == 1 and not await q.empty()
            assert await q.get_nowait() == 2
            assert await q.qsize() == 0 and await q.empty() and not await q.full()
            with pytest.raises(pressure.Empty):
                await q.get_nowait()

    asyncio.run(main())
    sync.delete()


def test_simple_queue_counts_due_items(url: str, prefix: str) -> None:
    q = pressure.Queue[Any]("simple", url=url, prefix=prefix)
    q.put("d", delay=SHORT)
    time.sleep(PAST)
    s = pressure.SimpleQueue[Any]("simple", url=url, prefix=prefix)
    assert s.qsize() == 1 and not s.empty()
    assert s.get(block=False) == "d"
    assert s.empty()
    q.delete()


def test_the_command_line_counts_the_size_as_qsize(url: str, prefix: str) -> None:
    q = pressure.LifoQueue[Any]("cli", url=url, prefix=prefix)
    q.put_many([1, 2], delay=SHORT)
    q.put(3, ttl=SHORT)
    q.put(4, delay=LONG)
    f = pressure.Queue[Any]("cli-fifo", url=url, prefix=prefix)
    f.put(1, ttl=SHORT)
    f.put(2)
    time.sleep(PAST)
    backend = Backend(ConnectionConfig.resolve(url, None))
    try:
        rows = {row.name: row for row in queue_rows(backend, prefix, find_queues(backend, prefix))}
    finally:
        backend.disconnect()
    assert rows["cli"].size == q.qsize() == 2
    assert rows["cli-fifo"].size == f.qsize() == 1
    q.delete()
    f.delete()


def test_peek_item_calls_a_due_item_ready_as_qsize_counts_it(make_queue: Any) -> None:
    """A delayed item is ready once due, whether or not a put or get has moved it in yet:
    peek_item() says so, as qsize() counts it."""
    import hashlib

    q = make_queue(serializer="bytes")
    q.put(b"later", delay=0.2)
    task_id = hashlib.sha1(b"later").hexdigest()
    assert q.peek_item(task_id).state == "delayed"
    time.sleep(0.3)
    assert q.qsize() == 1
    assert q.peek_item(task_id).state == "ready"
    assert q.get_nowait() == b"later"

"""Attaching does not depend on who came first (issue 29, defect 8).

A handle that names no bound (``maxsize=None``; ``pressure.multiprocessing``'s default,
``maxsize <= 0``) attaches to whatever exists; if it creates the queue, the queue is
unbounded with its bound unset, and the first handle that names a bound sets it instead of
failing. Two different bounds named still raise QueueExistsError, and a bound a plain spec
client created with stays as it is (the protocol's Create: a spec client names its bound).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

import pressure
import pressure.multiprocessing as pmp
from pressure.aio import AsyncQueue
from pressure.testing.spec_client import QueueFull, SpecClient


def test_a_consumer_first_then_a_bounded_producer(make_queue: Any, r: redis.Redis) -> None:
    consumer = make_queue("pc")  # names no bound: unbounded for now
    producer = make_queue("pc", maxsize=5)  # was QueueExistsError
    assert consumer.maxsize == producer.maxsize == 5
    producer.put_many(range(5))
    with pytest.raises(pressure.Full):
        producer.put_nowait(5)
    assert r.get(producer.keys.bound) == b"5"  # a spec client reads the bound it set
    make_queue("pc", maxsize=5)  # the same bound again: fine
    make_queue("pc")  # none named: attaches
    with pytest.raises(pressure.QueueExistsError):
        make_queue("pc", maxsize=6)  # a second bound named contradicts the first
    assert consumer.get() == 0
    producer.put_nowait(5)


def test_the_bound_set_later_counts_what_is_queued(make_queue: Any) -> None:
    first = make_queue("pc")
    first.put_many(range(7))
    bounded = make_queue("pc", maxsize=5)
    with pytest.raises(pressure.Full):
        bounded.put_nowait(7)  # 7 queued, above the bound now
    for _ in range(3):
        first.get()
    bounded.put_nowait(7)  # 5 queued: full again
    with pytest.raises(pressure.Full):
        bounded.put_nowait(8)


def test_an_explicit_bound_of_zero_is_a_bound_named(make_queue: Any) -> None:
    make_queue("unbounded", maxsize=0)
    with pytest.raises(pressure.QueueExistsError):
        make_queue("unbounded", maxsize=5)
    q = make_queue("set")
    q.maxsize = 0  # assigning names it too
    with pytest.raises(pressure.QueueExistsError):
        make_queue("set", maxsize=5)


def test_create_false_sets_an_unset_bound_too(make_queue: Any) -> None:
    make_queue("pc")
    assert make_queue("pc", maxsize=4, create=False).maxsize == 4  # was QueueExistsError
    make_queue("pc", maxsize=4, create=False)
    with pytest.raises(pressure.QueueExistsError):
        make_queue("pc", maxsize=5, create=False)


def test_the_bound_counts_delayed_items(make_queue: Any) -> None:
    q = make_queue("pc")
    q.put_many([1, 2])
    q.put(3, delay=60)
    q.maxsize = 3  # two queued and one delayed: full
    with pytest.raises(pressure.Full):
        q.put_nowait(4)


def test_delete_takes_the_unset_bound_along(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("pc")
    assert r.exists(q.keys.bound_unset)
    q.delete()
    assert not r.exists(q.keys.bound_unset)
    make_queue("pc", maxsize=3)
    assert not r.exists(q.keys.bound_unset)
    with pytest.raises(pressure.QueueExistsError):
        make_queue("pc", maxsize=4)


def test_multiprocessing_attaches_to_a_bounded_queue(url: str, prefix: str, make_queue: Any) -> None:
    make_queue("bounded", maxsize=5)
    handle: pmp.Queue[int] = pmp.Queue(name="bounded", url=url, prefix=prefix)  # was QueueExistsError
    assert handle._queue.maxsize == 5
    first: pmp.Queue[int] = pmp.Queue(name="later", url=url, prefix=prefix)
    assert make_queue("later", maxsize=3).maxsize == 3  # was QueueExistsError
    for i in range(3):
        first.put(i)
    with pytest.raises(pressure.Full):
        first.put(3, block=False)
    for h in (handle, first):
        h.disconnect()


def test_async_handles_attach_either_way(url: str, prefix: str, make_queue: Any) -> None:
    async def main() -> None:
        async with AsyncQueue("a", url=url, prefix=prefix) as first:
            assert make_queue("a", maxsize=4).maxsize == 4  # was QueueExistsError
            assert await first.maxsize() == 4
        make_queue("b")
        async with AsyncQueue("b", maxsize=2, url=url, prefix=prefix) as bounded:  # was QueueExistsError
            assert await bounded.maxsize() == 2
        other: AsyncQueue[Any] = AsyncQueue("b", maxsize=3, url=url, prefix=prefix)
        with pytest.raises(pressure.QueueExistsError):
            await other.open()
        await other.disconnect()

    asyncio.run(main())


def test_a_spec_client_names_its_bound(r: redis.Redis, prefix: str, make_queue: Any) -> None:
    SpecClient(r, "unbounded", prefix=prefix).create(0)
    assert make_queue("unbounded").maxsize == 0
    with pytest.raises(pressure.QueueExistsError):
        make_queue("unbounded", maxsize=5)  # the spec client chose unbounded

    SpecClient(r, "three", prefix=prefix).create(3)
    assert make_queue("three").maxsize == 3
    with pytest.raises(pressure.QueueExistsError):
        make_queue("three", maxsize=5)


def test_a_spec_client_sees_the_bound_once_set(r: redis.Redis, prefix: str, make_queue: Any) -> None:
    make_queue("pc")
    spec = SpecClient(r, "pc", prefix=prefix)
    assert spec.exists()
    spec.put(b"1", block=False)  # unbounded for now (":bound" is 0, as the spec says)
    spec.put(b"2", block=False)
    make_queue("pc", maxsize=2)
    with pytest.raises(QueueFull):
        spec.put(b"3", block=False)
    assert spec.get(block=False) == b"1"
    spec.put(b"3", block=False)

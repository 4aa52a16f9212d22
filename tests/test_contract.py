"""One contract for every kind of queue on every backend (huey's StorageTests in spirit).

Each test runs for FIFO, LIFO and priority queues, on a real server and on fakeredis:
what differs between the kinds is only the order items come out in (``Kind.out``), so a
hook a kind overrides can never change anything else unnoticed. Everything here is
non-blocking (fakeredis cannot block); blocking is tested per kind in test_blocking.py
and test_ordered.py.
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

import pressure


@dataclass(frozen=True)
class Kind:
    cls: type[pressure.Queue[Any]]
    #: the order ``get`` returns [3, 1, 2] in, put in that order
    out: list[int]


KINDS = {
    "fifo": Kind(pressure.Queue, [3, 1, 2]),
    "lifo": Kind(pressure.LifoQueue, [2, 1, 3]),
    "priority": Kind(pressure.PriorityQueue, [1, 2, 3]),
}
ITEMS = [3, 1, 2]

Make = Callable[..., pressure.Queue[Any]]


@pytest.fixture(params=["redis", "fakeredis"])
def connection(request: pytest.FixtureRequest, url: str) -> Iterator[Any]:
    if request.param == "redis":
        conn: Any = redis.Redis.from_url(url)
    else:
        fakeredis = pytest.importorskip("fakeredis")
        conn = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield conn
    conn.close()


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> Kind:
    return KINDS[request.param]


@pytest.fixture
def make(kind: Kind, connection: Any, prefix: str) -> Iterator[Make]:
    made: list[pressure.Queue[Any]] = []

    def build(name: str = "q", maxsize: int | None = None, **kw: Any) -> pressure.Queue[Any]:
        q = kind.cls(name, maxsize, connection=connection, prefix=prefix, **kw)
        made.append(q)
        return q

    yield build
    for q in made:
        q.disconnect()


def test_order_sizes_and_nowait_errors(make: Make, kind: Kind) -> None:
    q = make("order", 3)
    assert q.empty() and q.qsize() == 0 and not q.full() and q.maxsize == 3
    for item in ITEMS:
        q.put_nowait(item)
    assert q.full() and q.qsize() == 3
    with pytest.raises(pressure.Full):
        q.put_nowait(4)
    assert q.peek(3) == kind.out
    assert [q.get_nowait() for _ in ITEMS] == kind.out
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    assert q.empty()


def test_batches_keep_the_kinds_order(make: Make, kind: Kind) -> None:
    q = make("batches")
    q.put_many(ITEMS)
    assert q.get_many(10, block=False) == kind.out
    q.put_many(ITEMS)
    assert [q.get_nowait() for _ in ITEMS] == kind.out


def test_a_second_handle_sees_the_same_queue(make: Make, kind: Kind) -> None:
    q, other = make("shared"), make("shared")
    for item in ITEMS:
        q.put(item)
    assert other.qsize() == 3
    assert [other.get(block=False) for _ in ITEMS] == kind.out
    assert q.empty()


def test_task_tracking_and_statistics(make: Make) -> None:
    q = make("tasks")
    for item in ITEMS:
        q.put(item)
    assert q.unfinished_tasks == 3
    for _ in ITEMS:
        q.get_nowait()
        q.task_done()
    q.join()  # returns at once: nothing unfinished
    with pytest.raises(ValueError):
        q.task_done()
    stats = q.statistics()
    assert (stats.produced_messages, stats.consumed_messages, stats.unfinished_tasks, stats.size) == (3, 3, 0, 0)
    assert stats.produced_bytes == stats.consumed_bytes > 0


def test_shutdown_drains_then_raises(make: Make, kind: Kind) -> None:
    q = make("closing")
    for item in ITEMS:
        q.put(item)
    q.shutdown()
    assert q.closed and q.is_shutdown
    with pytest.raises(pressure.ShutDown):
        q.put_nowait(9)
    assert [q.get_nowait() for _ in ITEMS] == kind.out
    with pytest.raises(pressure.ShutDown):
        q.get_nowait()


def test_immediate_shutdown_discards(make: Make) -> None:
    q = make("discarding")
    for item in ITEMS:
        q.put(item)
    q.shutdown(immediate=True)
    with pytest.raises(pressure.ShutDown):
        q.get_nowait()
    assert q.statistics().discarded_messages == 3


def test_maxsize_is_shared_and_settable(make: Make) -> None:
    q, other = make("bound", 1), make("bound")
    q.put(1)
    with pytest.raises(pressure.Full):
        other.put_nowait(2)
    other.maxsize = 0
    q.put_nowait(2)
    assert q.maxsize == 0 and q.qsize() == 2
    with pytest.raises(pressure.QueueExistsError):
        make("bound", 5)


def test_pickled_handle_reaches_the_same_queue(make: Make, kind: Kind, connection: Any) -> None:
    if type(connection) is not redis.Redis:
        pytest.skip("a fakeredis server cannot be reached from a pickled handle")
    q = make(f"pickled-{uuid.uuid4().hex[:6]}")
    for item in ITEMS:
        q.put(item)
    copy = pickle.loads(pickle.dumps(q))
    try:
        assert type(copy) is kind.cls
        assert [copy.get_nowait() for _ in ITEMS] == kind.out
    finally:
        copy.disconnect()


def test_delete(make: Make) -> None:
    q = make("doomed")
    q.put(1)
    assert q.exists
    q.delete()
    assert not q.exists
    with pytest.raises(pressure.QueueDoesNotExist):
        q.put_nowait(1)

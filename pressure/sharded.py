"""Sharded queues: one logical queue made of N ordinary pressure queues, for throughput
beyond one Redis core (on a Redis Cluster, beyond one master).

``ShardedQueue("jobs", shards=3)`` is the FIFO queues ``jobs{0/3.<j>}``, ``jobs{1/3.<j>}``,
``jobs{2/3.<j>}`` (see ``shard_names``): each a complete pressure queue (its twelve spec keys,
its scripts, its reliable mode), so everything said of ``pressure.Queue`` holds per shard.
The text in braces is the shard's hash tag, chosen (``j``) so that shard ``i`` of ``N``
hashes near slot ``(2i+1)·16384/(2N)``: spread evenly over the slot range, hence over the
masters of a cluster whose masters own equal ranges. On a single Redis the names change
nothing (one server holds every shard).

Ordering contract, as Kafka partitions or tarantool's utube: **FIFO per shard, none across
shards.** A put with ``key=`` goes to the key's shard (``crc32(key) mod N``: stable across
processes, hosts and languages), so items of one key come out in the order they were put;
a put without a key goes to the next shard in turn (per handle), or past a full one to the
next with room.

Waiting on N shards: a get first asks each shard in turn for an item queued now (a
non-blocking get, one round trip each, starting one shard further on each call), then waits
on one shard for at most ``wait_slice`` seconds (a blocking get with that timeout), then
asks the others again, and so on until its deadline. Every one of those is a complete get
of one shard: it returns an item (delivered) or raises ``Empty`` having taken nothing, so a
sharded get that returns or raises leaves no item taken and not delivered. An item put on a
shard other than the one waited on is seen within one slice.
"""

from __future__ import annotations

import collections
import functools
import itertools
import numbers
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from . import serializers
from ._validate import _TIMEOUT_MESSAGE, _count, _maxsize_value, _seconds, _timeout_value
from .cluster import key_slot
from .errors import Empty, Full, QueueDoesNotExist, ShutDown
from .keys import resolve_prefix
from .queue import Queue, QueueStatistics
from .reliable import Delivery

__all__ = ["ShardedQueue", "ShardedStatistics", "shard_names", "shard_of", "MAX_SHARDS"]

T = TypeVar("T")
R = TypeVar("R")

#: The most shards a sharded queue may have.
MAX_SHARDS = 256
_SLOTS = 16384
#: How many items a put_many sends to one shard before moving to the next.
_CHUNK = 1000
#: How many gets' shards a handle remembers for task_done().
_GOTTEN = 1 << 16


@functools.lru_cache(maxsize=64)
def _tags(shards: int) -> tuple[str, ...]:
    """The hash tags of the shards of an N-shard queue: ``<i>/<N>.<j>`` with the smallest
    ``j`` whose slot is within 1/(8N) of the slot range of ``(2i+1)/(2N)``."""
    width = max(_SLOTS // (8 * shards), 1)
    tags = []
    for i in range(shards):
        target = (2 * i + 1) * _SLOTS // (2 * shards)
        j = next(j for j in itertools.count() if abs(key_slot(f"{i}/{shards}.{j}") - target) <= width)
        tags.append(f"{i}/{shards}.{j}")
    return tuple(tags)


def shard_names(name: str, shards: int) -> tuple[str, ...]:
    """The queue names of the shards of ``ShardedQueue(name, shards=shards)``."""
    return tuple(f"{name}{{{tag}}}" for tag in _tags(_shard_count(shards)))


def shard_of(key: str | bytes | int, shards: int) -> int:
    """The shard a put with ``key=key`` goes to: CRC-32 (zlib's) of the key's bytes (a str
    as UTF-8, an int as its decimal text) modulo ``shards``."""
    return zlib.crc32(_key_bytes(key)) % _shard_count(shards)


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return str(int(key)).encode()
    raise TypeError(f"key must be a str, bytes or int, not {type(key).__name__}")


def _shard_count(shards: Any) -> int:
    if isinstance(shards, bool) or not isinstance(shards, numbers.Integral):
        raise TypeError(f"shards must be an integer, not {type(shards).__name__}")
    count = int(shards)
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"shards must be from 1 to {MAX_SHARDS}, not {count}")
    return count


@dataclass(frozen=True)
class ShardedStatistics:
    """A snapshot of every shard's counters (each read atomically, the shards one after another)."""

    name: str
    #: Items in all shards now.
    size: int
    #: The bound of each shard (0 = unbounded).
    maxsize: int
    #: Whether every shard is closed.
    closed: bool
    produced_messages: int
    produced_bytes: int
    consumed_messages: int
    consumed_bytes: int
    discarded_messages: int
    unfinished_tasks: int
    dead_letters: int
    #: Each shard's own statistics, shard 0 first.
    shards: tuple[QueueStatistics, ...]


class ShardedQueue(Generic[T]):
    """N pressure FIFO queues used as one: FIFO per shard, no order across shards.

    ``maxsize`` bounds **each shard** (the whole holds up to ``shards * maxsize`` items).
    Every other argument is ``pressure.Queue``'s and applies to every shard;
    ``wait_slice`` is how long a blocking get or put waits on one shard before it looks
    at the others (see the module docstring). Every client of a sharded queue must pass
    the same ``shards``: the shard count is part of the shards' names.
    """

    def __init__(self, name: str, maxsize: int | None = None, *, shards: int, wait_slice: float = 0.1,
                 create: bool = True, **options: Any) -> None:
        if not isinstance(name, str):
            raise TypeError(f"queue name must be a str, not {type(name).__name__}")
        if not name:
            raise ValueError("queue name must not be empty")
        if options.get("prefix") is None:
            options["prefix"] = resolve_prefix(None)  # PRESSURE_PREFIX is checked too
        for what, text in (("name", name), ("prefix", options["prefix"])):
            if isinstance(text, str) and ("{" in text or "}" in text):
                raise ValueError(
                    f"a sharded queue's {what} must not hold '{{' or '}}' ({text!r}): each shard's name "
                    f"ends in a hash tag of its own, which places it on its slot of a Redis Cluster")
        count = _shard_count(shards)
        if maxsize is not None:
            _maxsize_value(maxsize)
        self._slice = _seconds("wait_slice", wait_slice)
        #: put_many checks every item with it before its first round trip (see there)
        self._serializer = serializers.resolve(options.get("serializer", "pickle"))
        self._name = name
        self._queues: tuple[Queue[T], ...] = tuple(
            Queue(shard, maxsize, create=create, **options) for shard in shard_names(name, count))
        self._init_local()

    def _init_local(self) -> None:
        # per handle and process: where the next call starts, and what task_done() settles
        self._turn = itertools.count(random.randrange(len(self._queues)))
        # (bounded: in the default mode many never call task_done)
        self._gotten: collections.deque[int] = collections.deque(maxlen=_GOTTEN)
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self._name, "slice": self._slice, "queues": self._queues,
                "serializer": self._serializer}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._name, self._slice, self._queues = state["name"], state["slice"], state["queues"]
        self._serializer = state["serializer"]
        self._init_local()

    def __repr__(self) -> str:
        return f"<pressure.ShardedQueue {self._name!r} shards={len(self._queues)} url={self.url!r}>"

    # -- shape ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def shards(self) -> int:
        """How many shards the queue has."""
        return len(self._queues)

    @property
    def url(self) -> str:
        return self._queues[0].url

    def shard(self, index: int) -> Queue[T]:
        """The ``pressure.Queue`` handle of shard ``index`` (0 to shards-1)."""
        return self._queues[index]

    def shard_for(self, key: str | bytes | int) -> int:
        """The index of the shard that items put with ``key=key`` go to."""
        return zlib.crc32(_key_bytes(key)) % len(self._queues)

    def _order(self) -> list[int]:
        """The shards in the order this call tries them: one further on than the last call."""
        n = len(self._queues)
        start = next(self._turn) % n
        return [(start + k) % n for k in range(n)]

    # -- trying every shard ----------------------------------------------------------

    def _each(self, order: list[int], step: Callable[[Queue[T], bool, float | None], R],
              block: bool, timeout: float | None, done: type[Exception]) -> tuple[int, R]:
        """``step`` on the shards of ``order``, as one blocking call: each non-blocking in
        turn, then a wait of one slice on one, then the others again..., until one succeeds
        or the deadline passes (``done``: Empty for gets, Full for puts). A shard whose step
        raises ShutDown is left out of the rest of this call; once every shard has,
        ShutDown is raised."""
        wait = _timeout_value(timeout) if block else None
        if wait is not None and wait < 0:
            raise ValueError(_TIMEOUT_MESSAGE)
        deadline = None if wait is None else time.monotonic() + wait
        live = list(order)
        shut: ShutDown | None = None
        while True:
            for index in list(live):
                try:
                    return index, step(self._queues[index], False, None)
                except done:
                    pass
                except ShutDown as exc:
                    shut = exc
                    live.remove(index)
            if shut is not None and not live:
                raise shut
            if not block:
                raise done(f"sharded queue {self._name!r}: every shard is "
                           f"{'empty' if done is Empty else 'full'}")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise done(f"sharded queue {self._name!r}: every shard stayed "
                           f"{'empty' if done is Empty else 'full'}")
            index = live[0]
            try:
                return index, step(self._queues[index], True, self._slice if left is None
                                   else min(self._slice, left))
            except done:
                pass
            except ShutDown as exc:
                shut = exc
                live.remove(index)  # the next one moves up: waited on next time
                if not live:
                    raise
                continue
            live = live[1:] + live[:1]  # wait on the next shard next time

    # -- put ------------------------------------------------------------------------

    def put(self, item: T, block: bool = True, timeout: float | None = None, *,
            key: str | bytes | int | None = None) -> None:
        """Put an item into the queue: into the shard of ``key`` (blocking, as
        ``Queue.put``, while that shard is full), else into the next shard in turn, or,
        if it is full, the next one with room (blocking while every shard is full).
        Raises Full and ShutDown as ``Queue.put``."""
        if key is not None:
            self._queues[self.shard_for(key)].put(item, block, timeout)
            return
        self._each(self._order(), lambda q, b, t: q.put(item, b, t), block, timeout, Full)

    def put_nowait(self, item: T, *, key: str | bytes | int | None = None) -> None:
        """Put an item without blocking (Full if its shard, or every shard, is full)."""
        self.put(item, block=False, key=key)

    def put_many(self, items: Iterable[T], block: bool = True, timeout: float | None = None, *,
                 key: str | bytes | int | None = None) -> None:
        """Put several items, in order: all into the shard of ``key`` (``Queue.put_many``),
        else up to 1000 at a time into the shards in turn (one round trip each), past full
        shards to ones with room, waiting (in slices, on one shard after another) while
        every shard is full. Items that go into one shard keep their order there. If every
        shard stays full (``timeout`` covers the whole call) or one is shut down, Full or
        ShutDown is raised with ``items_put``: how many of the items (the first ones) went in.
        An item that cannot be serialized raises SerializationError before anything is put."""
        items = items if isinstance(items, (list, tuple)) else list(items)
        if key is not None:
            self._queues[self.shard_for(key)].put_many(items, block, timeout)
            return
        wait = _timeout_value(timeout) if block else None
        if wait is not None and wait < 0:
            raise ValueError(_TIMEOUT_MESSAGE)
        for item in items[_CHUNK:]:  # (the first chunk's are checked by its put_many)
            serializers.dumps(self._serializer, item)  # SerializationError: nothing is put
        deadline = None if wait is None else time.monotonic() + wait
        order, n = self._order(), len(self._queues)
        done = turn = fruitless = 0  # items in; shards tried; tries in a row that put none
        while done < len(items):
            index = order[turn % n]
            turn += 1
            waiting, left = fruitless >= n, None
            if waiting:  # every shard was full just now
                left = None if deadline is None else deadline - time.monotonic()
                if not block or (left is not None and left <= 0):
                    exc = Full(f"sharded queue {self._name!r}: every shard is full")
                    exc.items_put = done
                    raise exc
                left = self._slice if left is None else min(self._slice, left)
            try:
                self._queues[index].put_many(items[done:done + _CHUNK], waiting, left)
                done += len(items[done:done + _CHUNK])
                fruitless = 0
            except Full as exc:
                went = exc.items_put or 0
                done += went
                fruitless = 0 if went else (1 if waiting else fruitless + 1)
            except ShutDown as exc:
                exc.items_put = done + (exc.items_put or 0)
                raise

    # -- get ------------------------------------------------------------------------

    def get(self, block: bool = True, timeout: float | None = None) -> T:
        """Remove and return an item from any shard (the oldest of that shard).

        'block' and 'timeout' as for ``Queue.get``: Empty once the timeout passes with
        every shard empty. Raises ShutDown once every shard is shut down and drained.
        In reliable mode ``task_done()`` acknowledges it.
        """
        index, item = self._each(self._order(), lambda q, b, t: q.get(b, t), block, timeout, Empty)
        with self._lock:
            self._gotten.append(index)
        return item

    def get_nowait(self) -> T:
        """Remove and return an item queued now in any shard, else raise Empty."""
        return self.get(block=False)

    def get_many(self, max_items: int, block: bool = True, timeout: float | None = None) -> list[T]:
        """Up to ``max_items`` items from **one** shard (the first, in this call's turn, that
        has any), oldest first; blocking as ``get`` when every shard is empty."""
        max_items = _count("max_items", max_items)
        if max_items < 1:
            raise ValueError(f"max_items must be at least 1, not {max_items}")
        index, items = self._each(self._order(), lambda q, b, t: q.get_many(max_items, b, t),
                                  block, timeout, Empty)
        with self._lock:
            self._gotten.extend([index] * len(items))
        return items

    def receive(self, block: bool = True, timeout: float | None = None) -> Delivery[T]:
        """Like ``get()``, but return the Delivery (acknowledged on its own shard)."""
        return self._each(self._order(), lambda q, b, t: q.receive(b, t), block, timeout, Empty)[1]

    def __iter__(self) -> Iterator[T]:
        """Yield items until every shard is closed and drained."""
        while True:
            try:
                yield self.get()
            except ShutDown:
                return

    # -- tasks ----------------------------------------------------------------------

    def task_done(self) -> None:
        """Mark a task done: the oldest item this handle got, on its shard (in reliable
        mode, acknowledged there); with none got here, on the first shard that has
        unfinished tasks. ValueError if no shard has any."""
        with self._lock:
            index = self._gotten.popleft() if self._gotten else None
        if index is not None:
            try:
                self._queues[index].task_done()
                return
            except ValueError:
                pass  # done elsewhere already: count another shard's task
            except BaseException:
                with self._lock:
                    self._gotten.appendleft(index)  # called again, it finishes the same item
                raise
        for queue in self._queues:
            try:
                queue.task_done()
                return
            except ValueError:
                continue
        raise ValueError("task_done() called too many times")

    @property
    def unfinished_tasks(self) -> int:
        """Items put and not yet marked done, in every shard."""
        return sum(q.unfinished_tasks for q in self._queues)

    def join(self) -> None:
        """Block until every shard's tasks are done (all at the same moment, as seen by a
        last pass over the shards)."""
        while True:
            for queue in self._queues:
                queue.join()
            if all(q.unfinished_tasks == 0 for q in self._queues):
                return

    # -- size and state -------------------------------------------------------------

    def qsize(self) -> int:
        """Return the approximate size of the queue, all shards (not reliable!)."""
        return sum(q.qsize() for q in self._queues)

    def empty(self) -> bool:
        """Return True if every shard is empty (not reliable!)."""
        return all(q.empty() for q in self._queues)

    def full(self) -> bool:
        """Return True if every shard is full, so that a put without a key would block
        (not reliable!). A put with a key blocks when its own shard is full."""
        return all(q.full() for q in self._queues)

    @property
    def maxsize(self) -> int:
        """The bound of each shard (0 = unbounded), as shard 0 stores it; assigning sets
        every shard's."""
        return self._queues[0].maxsize

    @maxsize.setter
    def maxsize(self, value: int) -> None:
        _maxsize_value(value)
        for queue in self._queues:
            queue.maxsize = value

    @property
    def exists(self) -> bool:
        """Whether every shard exists."""
        return all(q.exists for q in self._queues)

    @property
    def closed(self) -> bool:
        """Whether every shard is closed."""
        return all(q.closed for q in self._queues)

    def statistics(self) -> ShardedStatistics:
        """Every shard's counters, and their sums."""
        stats = tuple(q.statistics() for q in self._queues)

        def total(field: str) -> int:
            return sum(int(getattr(s, field)) for s in stats)

        return ShardedStatistics(
            name=self._name, size=total("size"), maxsize=stats[0].maxsize,
            closed=all(s.closed for s in stats), produced_messages=total("produced_messages"),
            produced_bytes=total("produced_bytes"), consumed_messages=total("consumed_messages"),
            consumed_bytes=total("consumed_bytes"), discarded_messages=total("discarded_messages"),
            unfinished_tasks=total("unfinished_tasks"), dead_letters=total("dead_letters"),
            shards=stats)

    # -- close, delete, resources ----------------------------------------------------

    def close(self) -> None:
        """Close every shard for every client (``Queue.close``, shard after shard)."""
        for queue in self._queues:
            queue.close()

    def shutdown(self, immediate: bool = False) -> None:
        """``Queue.shutdown`` on every shard."""
        for queue in self._queues:
            queue.shutdown(immediate)

    def delete(self) -> None:
        """Delete every shard (unread items are lost); QueueDoesNotExist if none existed."""
        missing: QueueDoesNotExist | None = None
        deleted = False
        for queue in self._queues:
            try:
                queue.delete()
                deleted = True
            except QueueDoesNotExist as exc:
                missing = exc
        if not deleted and missing is not None:
            raise missing

    def disconnect(self) -> None:
        """Close this handle's connections (every shard's)."""
        for queue in self._queues:
            queue.disconnect()

    def __enter__(self) -> ShardedQueue[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.disconnect()

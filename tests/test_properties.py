"""Model-based tests: random non-blocking operations from several handles on one queue.

A hypothesis state machine drives two to four ``pressure.Queue`` handles (some with their
own ``client_id``, optionally one ``reliable=True`` handle) attached to the same queue, and
checks every answer against a plain Python model after each step: FIFO contents, the bound,
close/shutdown, task counting, statistics, in-flight deliveries and dead letters. Only
non-blocking operations are used, so the same machine runs on a real redis-server and on
fakeredis. Every example gets a queue of its own (a fresh key prefix).
"""

from __future__ import annotations

import collections
import itertools
import os
import pickle
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import pressure

from .helpers import assert_invariants, fake_redis

# Hypothesis keeps its example database (and a cache of constants) in <cwd>/.hypothesis: keep
# both in the repository's own, git-ignored .hypothesis/ whatever directory pytest runs from.
_STORAGE = Path(__file__).resolve().parent.parent / ".hypothesis"
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(_STORAGE)
_DB = DirectoryBasedExampleDatabase(str(_STORAGE / "examples"))
# A passing run takes seconds; shrinking a failure can take a few minutes (every example
# opens its own connections), hence no explain phase, one bug at a time, and a long timeout.
SETTINGS = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    database=_DB,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

#: Payloads of the items (each item is (serial number, payload); put_copy puts one again, with
#: the same bytes: each copy keeps its own delivery count).
PAYLOADS = st.one_of(
    st.none(),
    st.integers(),
    st.booleans(),
    st.sampled_from(["", "a", "with space", "ünïcødé ✓", "x" * 300, "a:b:{c}"]),
    st.binary(max_size=40),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=4),
)
MAXSIZES = st.sampled_from([None, 0, -1, 1, 2, 3, 5])
HANDLE = st.integers(min_value=0, max_value=3)
#: close() and shutdown() are possible from this step on.
CLOSE_AFTER = 25


def _size(item: Any) -> int:
    """The payload size the default serializer stores (what :stats:*_bytes count)."""
    return len(pickle.dumps(item, pickle.HIGHEST_PROTOCOL))


@dataclass
class Entry:
    """An item in the modelled queue list."""

    item: Any
    size: int
    prior: int = 0  # deliveries so far (kept across release, reset by kick)


@dataclass
class Outstanding:
    """A delivery the reliable handle holds and has not acknowledged."""

    entry: Entry
    deliveries: int
    delivery: pressure.queue.Delivery[Any] | None  # None: got with get(), acknowledged by task_done()


class QueueMachine(RuleBasedStateMachine):
    """The model: a deque whose left end (``items[0]``) is the next item out."""

    #: Returns (a raw client on the same server, keyword arguments for pressure.Queue).
    connect: Callable[[str], tuple[redis.Redis, dict[str, Any]]]
    #: Whether examples may include a reliable=True handle.
    with_reliable = True

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"prop{uuid.uuid4().hex[:12]}"
        self.r, self.kw = type(self).connect(self.prefix)
        self.name = "q"
        self.handles: list[pressure.Queue[Any]] = []
        self.reliable: pressure.Queue[Any] | None = None
        self.max_deliveries: int | None = None
        self.items: collections.deque[Entry] = collections.deque()
        self.bound = 0
        self.bound_named = True
        self.closed = False
        self.unfinished = 0
        self.produced = self.produced_bytes = 0
        self.consumed = self.consumed_bytes = 0
        self.discarded = 0
        self.dead: list[tuple[Entry, int]] = []  # oldest first, with the delivery count
        self.outstanding: list[Outstanding] = []  # oldest first
        self.finished: list[pressure.queue.Delivery[Any]] = []  # acknowledged or released
        self.serial = 0
        self.steps = 0
        #: default-mode handles (by id): items their gets returned that no task_done() on that
        #: handle has answered yet (its task_done() posts its count: docs, queues.md)
        self.owing: dict[int, int] = collections.defaultdict(int)

    # -- set-up and tear-down ----------------------------------------------------------

    def _queue(self, maxsize: int | None = None, **kw: Any) -> pressure.Queue[Any]:
        return pressure.Queue(self.name, maxsize, prefix=self.prefix, **self.kw, **kw)

    @initialize(
        maxsize=MAXSIZES,
        own_ids=st.lists(st.booleans(), min_size=2, max_size=4),
        reliable=st.sampled_from([True, True, False]),
    )
    def create(self, maxsize: int | None, own_ids: list[bool], reliable: bool) -> None:
        for i, own in enumerate(own_ids):
            client_id = f"client-{i}-{self.prefix}" if own else None  # None: this thread's id
            # the first handle creates the queue; the others attach (maxsize=None: the stored bound)
            self.handles.append(self._queue(maxsize if i == 0 else None, client_id=client_id))
        self.bound = max(maxsize or 0, 0)
        self.bound_named = maxsize is not None  # else the first handle naming one sets it
        if reliable and self.with_reliable:
            # the second release of an item sends it to the dead letters
            self.max_deliveries = max_deliveries = 2
            self.reliable = self._queue(None, client_id=f"reliable-{self.prefix}", reliable=True,
                                        max_deliveries=max_deliveries)
            self.handles.append(self.reliable)

    def teardown(self) -> None:
        for q in self.handles:
            q.disconnect()
        keys = list(self.r.scan_iter(match=f"{self.prefix}:*"))
        if keys:
            self.r.delete(*keys)
        self.r.close()

    def handle(self, h: int) -> pressure.Queue[Any]:
        return self.handles[h % len(self.handles)]

    # -- model helpers -------------------------------------------------------------------

    def is_full(self) -> bool:
        return 0 < self.bound <= len(self.items)

    def take_head(self) -> tuple[Entry, int]:
        entry = self.items.popleft()
        self.consumed += 1
        self.consumed_bytes += entry.size
        return entry, entry.prior + 1

    def expect_get_failure(self, call: Callable[[], Any], q: pressure.Queue[Any]) -> None:
        """The queue is empty: a get by ``q`` raises ShutDown if it is closed and drained,
        else Empty. Drained: no other consumer holds a delivery that may come back (the
        reliable handle's unacknowledged ones; a default-mode get's item is its own)."""
        drained = self.closed and (q is self.reliable or not self.outstanding)
        with pytest.raises(pressure.ShutDown if drained else pressure.Empty) as info:
            call()
        assert not isinstance(info.value, pressure.QueueDoesNotExist)

    def give_back(self, entry: Entry, deliveries: int) -> None:
        """A released delivery: to the head of the queue, or past max_deliveries to the dead letters."""
        if self.max_deliveries is not None and deliveries >= self.max_deliveries:
            self.dead.append((entry, deliveries))
            self.ended()  # a dead letter's processing has ended
        else:
            self.items.appendleft(Entry(entry.item, entry.size, deliveries))
            self.consumed -= 1
            self.consumed_bytes -= entry.size

    def ended(self) -> None:
        """An item's processing ended (acknowledged, dead-lettered: docs, reliability.md, Counting): one task
        done, the count never going past the items put."""
        self.unfinished = max(self.unfinished - 1, 0)

    # -- producers -----------------------------------------------------------------------

    @rule(h=HANDLE, payloads=st.lists(PAYLOADS, min_size=1, max_size=4))
    def put_nowait(self, h: int, payloads: list[Any]) -> None:
        for payload in payloads:
            self.put_one(self.handle(h), payload)

    @rule()
    def put_next(self) -> None:
        """A small item from each handle in turn (puts are what most other rules need)."""
        self.put_one(self.handles[self.serial % len(self.handles)], self.serial)

    @precondition(lambda self: bool(self.items) or bool(self.outstanding) or bool(self.dead))
    @rule(h=HANDLE, i=st.integers(min_value=0, max_value=20))
    def put_copy(self, h: int, i: int) -> None:
        """An item with the same bytes as one queued, held or dead-lettered (a job put twice, a
        queue of "tick"s): a copy of its own, fresh count, whatever the other copies go through."""
        entries = [*self.items, *(o.entry for o in self.outstanding), *(e for e, _ in self.dead)]
        self.put_item(self.handle(h), entries[i % len(entries)].item)

    def put_one(self, q: pressure.Queue[Any], payload: Any) -> None:
        self.serial += 1
        self.put_item(q, (self.serial, payload))

    def put_item(self, q: pressure.Queue[Any], item: Any) -> None:
        if self.closed:
            with pytest.raises(pressure.ShutDown):
                q.put_nowait(item)
        elif self.is_full():
            with pytest.raises(pressure.Full):
                q.put_nowait(item)
        else:
            q.put_nowait(item)
            size = _size(item)
            self.items.append(Entry(item, size))
            self.produced += 1
            self.produced_bytes += size
            self.unfinished += 1

    # -- consumers -----------------------------------------------------------------------

    @rule(h=HANDLE)
    def get_nowait(self, h: int) -> None:
        q = self.handle(h)
        if not self.items:
            self.expect_get_failure(q.get_nowait, q)
            return
        entry, deliveries = self.take_head()
        assert q.get_nowait() == entry.item
        if q is self.reliable:
            self.outstanding.append(Outstanding(entry, deliveries, None))
        else:
            self.owing[id(q)] += 1

    @precondition(lambda self: self.reliable is not None)
    @rule(then=st.sampled_from(["keep", "ack", "release", "release"]))
    def receive(self, then: str) -> None:
        """The reliable handle receives a delivery, then keeps it, acknowledges or releases it."""
        assert self.reliable is not None
        if not self.items:
            reliable = self.reliable
            self.expect_get_failure(lambda: reliable.receive(block=False), reliable)
            return
        entry, deliveries = self.take_head()
        d = self.reliable.receive(block=False)
        assert (d.item, d.deliveries) == (entry.item, deliveries)
        assert d.consumer.startswith(self.reliable.client_id)  # '<client id>#<handle token>'
        self.outstanding.append(Outstanding(entry, deliveries, d))
        if then != "keep":
            self.settle(self.outstanding[-1], release=then == "release")

    @precondition(lambda self: self.reliable is not None and bool(self.items))
    @rule()
    def poison_head(self) -> None:
        """The next item fails every time: received and released until it is dead-lettered."""
        assert self.reliable is not None and self.max_deliveries is not None
        for _ in range(self.max_deliveries):
            entry, deliveries = self.take_head()
            d = self.reliable.receive(block=False)
            assert (d.item, d.deliveries) == (entry.item, deliveries)
            self.outstanding.append(Outstanding(entry, deliveries, d))
            self.settle(self.outstanding[-1], release=True)
            if self.dead and self.dead[-1][0] is entry:
                return
        raise AssertionError("the model never dead-lettered the item")  # pragma: no cover

    def settle(self, o: Outstanding, release: bool) -> None:
        assert o.delivery is not None
        self.outstanding.remove(o)
        self.finished.append(o.delivery)
        if release:
            assert o.delivery.release() is True
            self.give_back(o.entry, o.deliveries)  # to the head of the queue, or dead-lettered
        else:
            assert o.delivery.ack() is True
            self.ended()

    @precondition(lambda self: any(o.delivery is not None for o in self.outstanding))
    @rule(i=st.integers(min_value=0, max_value=20), release=st.booleans())
    def ack_or_release(self, i: int, release: bool) -> None:
        """Settle one of the deliveries kept, in any order."""
        candidates = [o for o in self.outstanding if o.delivery is not None]
        self.settle(candidates[i % len(candidates)], release)

    @precondition(lambda self: any(o.delivery is not None for o in self.outstanding))
    @rule()
    def release_all(self) -> None:
        """Every delivery kept is given back at once, in the order received (copies of one item
        among them come back each with its own count)."""
        for o in [o for o in self.outstanding if o.delivery is not None]:
            self.settle(o, release=True)

    @precondition(lambda self: bool(self.finished))
    @rule(i=st.integers(min_value=0, max_value=20), release=st.booleans())
    def ack_or_release_again(self, i: int, release: bool) -> None:
        """Acknowledging or releasing a delivery a second time is False and changes nothing."""
        d = self.finished[i % len(self.finished)]
        assert (d.release() if release else d.ack()) is False

    @rule(h=HANDLE)
    def task_done(self, h: int) -> None:
        q = self.handle(h)
        posted = False  # whether it may post (docs, queues.md: one round trip per item), not wait
        if q is self.reliable:
            got = [o for o in self.outstanding if o.delivery is None]
            if not got:  # every delivery counts as it ends: none of get()'s left to count
                with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
                    q.task_done()
                return
            # it acknowledges the oldest item this handle got, which counts it (never refused)
            self.outstanding.remove(got[0])
            q.task_done()
            self.ended()
            assert q.unfinished_tasks == self.unfinished
            return
        if self.owing[id(q)] > 0:  # for an item this handle got: its count may be posted
            self.owing[id(q)] -= 1
            posted = True
        if self.unfinished == 0:
            with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
                q.task_done()
                if posted:
                    # the reply's error is raised by the handle's next call, which reading
                    # its count is
                    _ = q.unfinished_tasks
        else:
            q.task_done()
            self.unfinished -= 1
            if posted:
                # posted (docs, queues.md: one round trip per item): this handle sees it at once, other
                # handles once it reaches Redis, which reading this handle's count makes sure of
                assert q.unfinished_tasks == self.unfinished

    @precondition(lambda self: self.unfinished == 0)
    @rule(h=HANDLE)
    def join_returns_at_once(self, h: int) -> None:
        self.handle(h).join()

    # -- close and shutdown (after a while: the model should see the open queue too) -----

    @precondition(lambda self: self.steps >= CLOSE_AFTER)
    @rule(h=HANDLE, immediate=st.booleans())
    def shutdown(self, h: int, immediate: bool) -> None:
        """close() (= shutdown()), or shutdown(immediate=True), which discards what is queued."""
        q = self.handle(h)
        if not immediate:
            q.close()
            self.closed = True
            return
        q.shutdown(immediate=True)
        self.closed = True
        n = len(self.items)
        self.discarded += n
        self.unfinished -= min(n, self.unfinished)  # unfinished tasks drop by the number discarded
        self.items.clear()

    # -- bound ---------------------------------------------------------------------------

    @rule(h=HANDLE, value=st.integers(min_value=-3, max_value=6))
    def set_maxsize(self, h: int, value: int) -> None:
        self.handle(h).maxsize = value
        self.bound, self.bound_named = max(value, 0), True

    @rule(maxsize=MAXSIZES)
    def attach_another_handle(self, maxsize: int | None) -> None:
        """A new handle attaches; an explicit maxsize sets a bound nobody named, else must
        match the stored bound."""
        if maxsize is not None and not self.bound_named:
            self.bound, self.bound_named = max(maxsize, 0), True
        if maxsize is not None and max(maxsize, 0) != self.bound:
            with pytest.raises(pressure.QueueExistsError):
                self._queue(maxsize)
            return
        q = self._queue(maxsize)
        try:
            assert (q.maxsize, q.qsize(), q.closed) == (self.bound, len(self.items), self.closed)
        finally:
            q.disconnect()

    # -- inspection and dead letters -----------------------------------------------------

    @rule(h=HANDLE, n=st.integers(min_value=0, max_value=6))
    def peek(self, h: int, n: int) -> None:
        assert self.handle(h).peek(n) == [e.item for e in itertools.islice(self.items, n)]

    @rule(h=HANDLE)
    def sizes(self, h: int) -> None:
        q = self.handle(h)
        assert q.qsize() == len(self.items)
        assert q.empty() == (not self.items)
        assert q.full() == self.is_full()
        assert q.maxsize == self.bound
        assert q.closed == q.is_shutdown == self.closed
        assert q.unfinished_tasks == self.unfinished

    @precondition(lambda self: bool(self.dead))
    @rule(h=HANDLE, n=st.one_of(st.none(), st.integers(min_value=0, max_value=3)))
    def kick(self, h: int, n: int | None) -> None:
        k = len(self.dead) if n is None else min(n, len(self.dead))
        assert self.handle(h).kick(n) == k
        moved, self.dead = self.dead[:k], self.dead[k:]
        # oldest first, to the head of the queue, with a fresh delivery count; unfinished again
        self.items.extendleft(Entry(e.item, e.size, 0) for e, _ in reversed(moved))
        self.unfinished += min(k, self.produced - self.unfinished)
        self.consumed -= k
        self.consumed_bytes -= sum(e.size for e, _ in moved)

    @precondition(lambda self: bool(self.dead))
    @rule(h=HANDLE)
    def purge_dead(self, h: int) -> None:
        assert self.handle(h).purge_dead() == len(self.dead)
        self.dead.clear()

    # -- checked after every step --------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        if not self.handles:
            return
        self.steps += 1
        q = self.handles[self.steps % len(self.handles)]  # each handle in turn
        assert_invariants(self.r, q)
        assert self.r.llen(q.keys.base) == len(self.items)
        s = q.statistics()
        assert (s.size, s.maxsize, s.closed) == (len(self.items), self.bound, self.closed)
        assert (s.produced_messages, s.produced_bytes) == (self.produced, self.produced_bytes)
        assert (s.consumed_messages, s.consumed_bytes) == (self.consumed, self.consumed_bytes)
        assert s.discarded_messages == self.discarded
        assert s.unfinished_tasks == self.unfinished
        # an item in flight or dead-lettered has left the list and counts as consumed
        assert s.produced_messages - s.consumed_messages - s.discarded_messages == s.size
        dead = q.dead_letters()
        assert [(pickle.loads(d.payload), d.deliveries) for d in dead] == [
            (e.item, n) for e, n in self.dead]
        if self.reliable is not None:
            mine = [f for f in q.in_flight() if f.consumer.startswith(self.reliable.client_id)]
            assert sorted((pickle.loads(f.payload), f.deliveries) for f in mine) == sorted(
                (o.entry.item, o.deliveries) for o in self.outstanding)


def _real_redis(url: str) -> Callable[[str], tuple[redis.Redis, dict[str, Any]]]:
    def connect(prefix: str) -> tuple[redis.Redis, dict[str, Any]]:
        return redis.Redis.from_url(url), {"url": url}

    return connect


def _fakeredis() -> Callable[[str], tuple[redis.Redis, dict[str, Any]]]:
    pytest.importorskip("fakeredis")

    def connect(prefix: str) -> tuple[redis.Redis, dict[str, Any]]:
        conn = fake_redis()
        return conn, {"connection": conn}

    return connect


def _machine(connect: Callable[[str], tuple[redis.Redis, dict[str, Any]]], label: str,
             with_reliable: bool = True) -> type[QueueMachine]:
    # a class per backend, so the example database keeps their examples apart
    return type(f"QueueMachine_{label}", (QueueMachine,),
                {"connect": staticmethod(connect), "with_reliable": with_reliable})


SHRINK_TIMEOUT = pytest.mark.timeout(600)


@SHRINK_TIMEOUT
def test_model_on_redis(url: str) -> None:
    run_state_machine_as_test(_machine(_real_redis(url), "redis"), settings=SETTINGS)


def _fakeredis_cannot(reliable: bool) -> str | None:
    """Why fakeredis cannot run the scripts the model uses (None if it can)."""
    conn = fake_redis()
    try:
        q: pressure.Queue[Any] = pressure.Queue("probe", 1, connection=conn, prefix="probe",
                                                reliable=reliable, max_deliveries=2)
        q.put_nowait(1)
        d = q.receive(block=False)
        if reliable:
            d.release()  # requeue.lua: redis.sha1hex
            q.receive(block=False).release()
            q.kick()
        q.shutdown(immediate=True)
    except pressure.PressureError as exc:
        text = str(exc).splitlines()[0]
        # fakeredis without lupa has no EVALSHA (fake_redis() adds the redis.sha1hex it lacks)
        if any(known in text.lower() for known in ("lupa", "unknown command", "sha1hex")):
            return f"{type(exc).__name__}: {text}"
        raise  # anything else is pressure's failure, not a fakeredis limitation
    finally:
        conn.close()
    return None


FAKE_SETTINGS = settings(SETTINGS, max_examples=50)


@SHRINK_TIMEOUT
def test_model_on_fakeredis() -> None:
    """The default-mode handles only: see test_model_on_fakeredis_with_a_reliable_handle."""
    problem = _fakeredis_cannot(reliable=False)
    if problem:
        pytest.skip(f"fakeredis cannot run pressure's Lua scripts: {problem}")
    run_state_machine_as_test(_machine(_fakeredis(), "fakeredis", with_reliable=False),
                              settings=FAKE_SETTINGS)


@SHRINK_TIMEOUT
def test_model_on_fakeredis_with_a_reliable_handle() -> None:
    problem = _fakeredis_cannot(reliable=True)
    if problem:
        # (fake_redis() gives fakeredis's Lua the redis.sha1hex it lacks; what else it cannot do)
        pytest.skip(f"fakeredis cannot run the reliable mode's scripts: {problem}")
    run_state_machine_as_test(_machine(_fakeredis(), "fakeredis_reliable"), settings=FAKE_SETTINGS)

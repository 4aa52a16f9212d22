"""A plain-Python reference model of one pressure queue: the stdlib's ``queue.Queue``
contract, the pressure protocol (bound, close/shutdown, statistics) and tarantool/queue's
task lifecycle as the docs state it (reliability.md) (reliable deliveries settled in any order, ``delay``,
``ttl``, ``ttr``, ``bury``, ``kick``, ``peek_item``/``delete_item``, utube ``key=``).

tests/test_model.py drives real handles and this model side by side and checks every answer
and every count a view shows against it. The model knows nothing of Redis: each put is one
task with an identity of its own (its delivery count, ttl, ttr and utube key), whatever its
bytes.

Time is the model's own clock, in seconds: the test moves the server's clock for the queue
(the due times of its delayed items and the expiry times of its items) by the same amount,
so nothing waits for real.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


class Outcome(enum.Enum):
    """What a get or a put must do right now."""

    OK = "ok"
    EMPTY = "empty"  # get: nothing ready (block=True: it times out, Empty)
    FULL = "full"  # put: no room (block=True: it times out, Full)
    SHUTDOWN = "shutdown"  # put: closed; get: closed and drained


@dataclass(eq=False)
class Task:
    """One item put: the same task through every state it goes through."""

    serial: int
    item: Any
    size: int  # its payload's size (what :stats:*_bytes count)
    deliveries: int = 0  # deliveries so far (kept by release and recovery, reset by kick)
    due_at: float = 0.0  # model clock; a delayed task is due from then
    expires_at: float | None = None  # model clock; past it, a get drops it (or dead-letters it)
    dead_on_expiry: bool = False  # put by a handle with dead_letter_expired=True
    ttr: float | None = None
    key: str | None = None  # utube
    task_id: str | None = None  # as the library named it (from a delivery or a dead letter)
    kicked: bool = False  # back from the dead letters: a fresh state of its own
    entered: int = 0  # when it entered the delayed items (FIFO among equal due times)

    def __repr__(self) -> str:
        return f"Task#{self.serial}({self.item!r}, deliveries={self.deliveries})"


@dataclass(eq=False)
class Hold:
    """A delivery a consumer holds (reliable mode), not yet settled."""

    task: Task
    deliveries: int
    handle: int  # the index of the handle holding it
    via_get: bool  # got with get()/get_many(): task_done() settles the oldest of these
    delivery: Any = None  # the library's Delivery (receive()), None for get()


@dataclass
class Dead:
    task: Task
    deliveries: int
    reason: str  # 'deliveries', 'buried', 'expired'


@dataclass
class Model:
    """The queue. ``ready`` is the list (``ready[0]`` is the next item out), ``delayed`` the
    items not due yet (they count against the bound), ``held`` what reliable consumers hold,
    ``dead`` the dead letters (oldest first)."""

    max_deliveries: int
    bound: int = 0
    closed: bool = False
    clock: float = 0.0
    ready: collections.deque[Task] = field(default_factory=collections.deque)
    delayed: list[Task] = field(default_factory=list)
    held: list[Hold] = field(default_factory=list)  # oldest delivery first
    dead: list[Dead] = field(default_factory=list)
    #: utube: the key's current task (queued, delayed by a release, or taken), and those
    #: waiting behind it (not in the list, not counted against the bound)
    current: dict[str, Task] = field(default_factory=dict)
    waiting: dict[str, collections.deque[Task]] = field(default_factory=dict)
    produced: int = 0
    produced_bytes: int = 0
    consumed: int = 0
    consumed_bytes: int = 0
    discarded: int = 0
    done: int = 0  # tasks marked done: task_done(), ack(), discarded, expired, deleted
    expired: int = 0
    expired_dead: int = 0  # expired items dead-lettered (and their bytes)
    expired_dead_bytes: int = 0
    calls: collections.Counter[str] = field(default_factory=collections.Counter)
    let_in: int = 0  # items let into the list from behind their utube key
    serial: int = 0

    # -- derived counts ------------------------------------------------------------------

    @property
    def unfinished(self) -> int:
        return self.produced - self.done

    def live_ready(self) -> list[Task]:
        """The ready items a get would return now (those past their ttl are dropped on the way)."""
        return [t for t in self.ready if not self.is_expired(t)]

    def reach(self) -> tuple[int, int]:
        """What the gets reach now, as qsize() counts it (lib.lua queue_counts): the live ready
        items, and for a key's current item past its ttl, the first live one behind it (its
        drop lets that one in); and the items past their ttl met on the way."""
        live = expired = 0
        for t in self.ready:
            if not self.is_expired(t):
                live += 1
                continue
            expired += 1
            if t.key is not None and self.current.get(t.key) is t:
                for w in self.waiting.get(t.key, ()):
                    if not self.is_expired(w):
                        live += 1
                        break
                    expired += 1
        return live, expired

    def qsize(self) -> int:
        """What qsize() says: what get_nowait() calls in a row would return."""
        return self.reach()[0]

    def occupancy(self) -> int:
        """What counts against the bound: the list (expired items too: only a get drops them)
        and the delayed items."""
        return len(self.ready) + len(self.delayed)

    def is_full(self) -> bool:
        """What full() says: a put_nowait() would raise Full."""
        return 0 < self.bound <= self.occupancy()

    def is_expired(self, t: Task) -> bool:
        return t.expires_at is not None and t.expires_at <= self.clock

    def not_due(self) -> int:
        """Delayed items not due yet (statistics().delayed)."""
        return sum(1 for t in self.delayed if t.due_at is None or t.due_at > self.clock)

    def expired_waiting(self) -> int:
        """Items past their ttl that no get has dropped yet (statistics().expired counts them
        at once)."""
        return self.reach()[1]

    def taken(self) -> int:
        return len(self.held)

    def tasks(self) -> int:
        """Every task the queue holds in any state (tarantool's total), utube waiters aside."""
        return len(self.ready) + len(self.delayed) + len(self.held) + len(self.dead)

    def held_by(self, h: int) -> list[Hold]:
        return [o for o in self.held if o.handle == h]

    def drained_for(self, h: int) -> bool:
        """A get by handle ``h`` raises ShutDown: closed, nothing queued or delayed, no other
        consumer holds anything that may come back, and no utube key's current item is
        anyone's but its own (its own deliveries never count, nor the items behind them)."""
        own = {id(o.task) for o in self.held if o.handle == h}
        return (self.closed and not self.can_take() and not self.delayed
                and not any(o.handle != h for o in self.held)
                and all(id(t) in own for t in self.current.values()))

    def can_take(self) -> bool:
        """Whether a get finds an item now: a live one in the list, or one that an expired
        item of a utube key, dropped on the way, lets in at the tail."""
        ready = list(self.ready)
        current = dict(self.current)
        behind = {k: list(q) for k, q in self.waiting.items()}
        for t in ready:  # (grows as expired keyed items let their next ones in)
            if not self.is_expired(t):
                return True
            if t.key is not None and current.get(t.key) is t and behind.get(t.key):
                current[t.key] = behind[t.key].pop(0)
                ready.append(current[t.key])
        return False

    def get_outcome(self, h: int) -> Outcome:
        if self.can_take():
            return Outcome.OK
        return Outcome.SHUTDOWN if self.drained_for(h) else Outcome.EMPTY

    def room(self) -> int | None:
        """How many items a put may add now (None: unbounded)."""
        if self.bound <= 0:
            return None
        return max(self.bound - self.occupancy(), 0)

    # -- time ----------------------------------------------------------------------------

    def advance(self, seconds: float) -> list[Task]:
        """The clock moves on: what is due now enters the list at its tail, in due order."""
        self.clock += seconds
        return self.move_due()

    def move_due(self) -> list[Task]:
        due = sorted((t for t in self.delayed if t.due_at <= self.clock), key=lambda t: (t.due_at, t.entered))
        for t in due:
            self.delayed.remove(t)
            self.ready.append(t)
        return due

    # -- put -----------------------------------------------------------------------------

    def new_task(self, item: Any, size: int, *, delay: float | None = None, ttl: float | None = None,
                 ttr: float | None = None, key: str | None = None, dead_on_expiry: bool = False) -> Task:
        self.serial += 1
        t = Task(self.serial, item, size, ttr=ttr, key=key)
        t.due_at = self.clock + (delay or 0.0)
        if ttl is not None:
            t.expires_at = t.due_at + ttl  # counted from when it is due
            t.dead_on_expiry = dead_on_expiry
        return t

    def delay(self, t: Task) -> None:
        self.serial += 1
        t.entered = self.serial
        self.delayed.append(t)

    def put_outcome(self) -> Outcome:
        if self.closed:
            return Outcome.SHUTDOWN
        return Outcome.FULL if self.is_full() else Outcome.OK

    def put(self, t: Task) -> None:
        """A put that went in (the caller checked put_outcome)."""
        self.produced += 1
        self.produced_bytes += t.size
        self.calls["put"] += 1
        if t.key is not None:
            if t.key in self.current:
                self.waiting.setdefault(t.key, collections.deque()).append(t)
                return
            self.current[t.key] = t
        if t.due_at > self.clock:
            self.delay(t)
        else:
            self.ready.append(t)

    # -- get -----------------------------------------------------------------------------

    def take(self, h: int, reliable: bool) -> tuple[Task, int] | None:
        """A get by handle ``h``: the next live item (dropping expired ones on the way), or None."""
        while self.ready:
            t = self.ready.popleft()
            if self.is_expired(t):
                self.expire(t)
                continue
            t.deliveries += 1
            self.consumed += 1
            self.consumed_bytes += t.size
            self.calls["take"] += 1
            if not reliable:  # settled as the get returns it: its ttl, ttr and key go
                self.task_gone(t)
            return t, t.deliveries
        return None

    def expire(self, t: Task) -> None:
        self.expired += 1
        if t.dead_on_expiry:  # never consumed (no get handed it out): kick() takes nothing back
            self.expired_dead += 1
            self.expired_dead_bytes += t.size
            self.dead.append(Dead(t, 0, "expired"))
            self.strip(t)
        self.mark_done()  # dropped or dead-lettered, its processing ended
        self.task_gone(t)

    def strip(self, t: Task) -> None:
        """A dead-lettered task loses its ttl, ttr and key (a kicked item starts afresh)."""
        t.expires_at = None
        t.ttr = None

    def task_gone(self, t: Task) -> None:
        """``t`` is done with (acknowledged, taken by a default-mode get, expired, deleted,
        dead-lettered): its utube key lets the next item in, at the tail."""
        if t.key is None or self.current.get(t.key) is not t:
            return
        del self.current[t.key]
        behind = self.waiting.get(t.key)
        if behind:
            nxt = behind.popleft()
            if not behind:
                del self.waiting[t.key]
            self.current[t.key] = nxt
            self.ready.append(nxt)
            self.let_in += 1
        t.key = None

    # -- settling a delivery ------------------------------------------------------------------

    def ack(self, o: Hold, count: bool = True) -> bool:
        """Acknowledged (Delivery.ack(), or task_done() for the oldest item got): the task is
        done. Returns whether it was counted (False: task_done() called too many times)."""
        self.held.remove(o)
        self.calls["ack"] += 1
        self.task_gone(o.task)
        return self.count_done() if count else True

    def mark_done(self, n: int = 1) -> None:
        """Tasks counted done by the queue itself (discarded, expired, deleted): never past
        the tasks put (task_done() calls for items still queued may have counted them)."""
        self.done = min(self.done + n, self.produced)

    def count_done(self) -> bool:
        if self.unfinished <= 0:
            return False
        self.done += 1
        return True

    def release(self, o: Hold, delay: float | None = None) -> None:
        """Given back: to the head of the queue (later with ``delay``), or past max_deliveries
        to the dead letters."""
        self.held.remove(o)
        t = o.task
        self.calls["release"] += 1
        if self.max_deliveries and o.deliveries >= self.max_deliveries:
            # a dead letter has left the list and counts as consumed (docs: reliability.md)
            self.dead.append(Dead(t, o.deliveries, "deliveries"))
            self.strip(t)
            self.mark_done()  # a dead letter's processing ended (kick() undoes it)
            self.task_gone(t)
            return
        self.consumed -= 1
        self.consumed_bytes -= t.size
        if delay:
            t.due_at = self.clock + delay
            self.delay(t)
        else:
            self.ready.appendleft(t)

    def bury(self, o: Hold) -> None:
        self.held.remove(o)
        self.calls["bury"] += 1
        self.dead.append(Dead(o.task, o.deliveries, "buried"))
        self.strip(o.task)
        self.mark_done()
        self.task_gone(o.task)

    def recover(self, holds: list[Hold]) -> None:
        """What a dead consumer held returns to the head, in its original order, with its
        delivery count (past max_deliveries: to the dead letters)."""
        back = []
        for o in reversed(holds):  # newest first, as requeue.lua takes them back
            self.held.remove(o)
            if self.max_deliveries and o.deliveries >= self.max_deliveries:
                self.dead.append(Dead(o.task, o.deliveries, "deliveries"))
                self.strip(o.task)
                self.mark_done()
                self.task_gone(o.task)
            else:
                self.consumed -= 1
                self.consumed_bytes -= o.task.size
                back.append(o.task)
        self.ready.extendleft(back)  # (the oldest ends up next out)

    # -- tasks by id ---------------------------------------------------------------------

    def locate(self, t: Task) -> str | None:
        """The task's state as peek_item names it, or None (gone, or waiting behind its key)."""
        if t in self.ready:
            return "ready"
        if t in self.delayed:
            return "delayed"
        if any(o.task is t for o in self.held):
            return "taken"
        if any(d.task is t for d in self.dead):
            return "buried"
        return None

    def delete(self, t: Task) -> str | None:
        """delete_item: a ready, delayed or taken task counts as done (a taken one's ack() then
        finds it gone); a dead letter was counted when it was dead-lettered."""
        state = self.locate(t)
        if state is None:
            return None
        self.calls["delete"] += 1
        if state == "ready":
            self.ready.remove(t)
            self.mark_done()
        elif state == "delayed":
            self.delayed.remove(t)
            self.mark_done()
        elif state == "taken":
            o = next(o for o in self.held if o.task is t)
            self.held.remove(o)
            self.mark_done()
        else:
            self.dead = [d for d in self.dead if d.task is not t]
        self.task_gone(t)
        return state

    def kick(self, n: int | None) -> int:
        k = len(self.dead) if n is None else min(n, len(self.dead))
        moved, self.dead = self.dead[:k], self.dead[k:]
        for d in reversed(moved):  # oldest first, at the head, with a fresh count
            d.task.deliveries = 0
            d.task.kicked = True
            self.ready.appendleft(d.task)
        consumed = [d for d in moved if d.reason != "expired"]  # (an expired one never was)
        self.consumed -= len(consumed)
        self.consumed_bytes -= sum(d.task.size for d in consumed)
        self.done = max(self.done - k, 0)  # unfinished again
        self.calls["kick"] += k
        return k

    def purge_dead(self) -> int:
        n = len(self.dead)
        self.dead.clear()
        return n

    # -- close and shutdown ----------------------------------------------------------------

    def shutdown(self, immediate: bool) -> None:
        self.closed = True
        if not immediate:
            return
        gone = list(self.ready) + self.delayed
        self.ready.clear()
        self.delayed.clear()
        self.discarded += len(gone)
        self.mark_done(len(gone))
        # and what waits behind a utube key; a key's current item that a consumer holds
        # stays its own to settle
        behind = [t for q in self.waiting.values() for t in q]
        self.waiting.clear()
        self.current.clear()  # (a key's current item a consumer holds stays its to settle)
        self.discarded += len(behind)
        self.mark_done(len(behind))

    # -- what the views show -------------------------------------------------------------

    def in_flight(self) -> dict[int, list[tuple[Any, int]]]:
        out: dict[int, list[tuple[Any, int]]] = collections.defaultdict(list)
        for o in self.held:
            out[o.handle].append((o.task.item, o.deliveries))
        return out

    def dead_letters(self) -> list[tuple[Any, int, str]]:
        return [(d.task.item, d.deliveries, d.reason) for d in self.dead]

    def all_tasks(self) -> Iterator[Task]:
        yield from self.ready
        yield from self.delayed
        yield from (o.task for o in self.held)
        yield from (d.task for d in self.dead)

"""Helpers for tests/test_faults.py: forked worker processes that are SIGKILLed at
random points (with their results kept in Redis keys apart from the queue under
test), and producer/consumer threads that retry through server restarts,
CLIENT KILLs and pauses while recording exactly what happened to every item.

Nothing here is an assertion about the library by itself: the tests compare
what the workers recorded with what Redis holds afterwards.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import signal
import statistics
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

import pressure

# -- forked worker processes ---------------------------------------------------------


def fork_child(target: Callable[..., None], *args: Any) -> int:
    """Fork a child that runs ``target(*args)`` and leaves with os._exit (no pytest
    teardown, no atexit). The caller must be single-threaded at this point."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            random.seed()  # the child would otherwise replay the parent's random sequence
            logging.getLogger("pressure").setLevel(logging.ERROR)  # recovery warnings: noise here
            target(*args)
        except BaseException:  # noqa: BLE001 - reported through the exit code and stderr
            code = 1
            try:
                traceback.print_exc()
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(code)
    return pid


def kill_and_reap(pid: int) -> None:
    """SIGKILL ``pid`` and wait for it (no zombie is left to look alive)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def exited_by_itself(pid: int) -> int | None:
    """The exit status of a child that ended on its own, or None if it still runs."""
    done, status = os.waitpid(pid, os.WNOHANG)
    return status if done else None


@dataclass(frozen=True)
class StormKeys:
    """Where storm workers record what happened: keys apart from the queue's."""

    base: str

    @property
    def attempted(self) -> str:  # set: ids a producer was about to put
        return f"{self.base}:attempted"

    @property
    def put_done(self) -> str:  # set: ids whose put() returned
        return f"{self.base}:put_done"

    @property
    def got(self) -> str:  # hash id -> times a consumer recorded receiving it
        return f"{self.base}:got"

    @property
    def deliveries(self) -> str:  # list of 'id deliveries' (Delivery.deliveries of each receive)
        return f"{self.base}:deliveries"

    @property
    def acking(self) -> str:  # hash consumer id -> the id it is acknowledging right now
        return f"{self.base}:acking"

    @property
    def acked(self) -> str:  # hash id -> acknowledgements that returned (recorded after the ack)
        return f"{self.base}:acked"

    @property
    def ack_false(self) -> str:  # hash id -> ack() returned False (the delivery was taken back)
        return f"{self.base}:ack_false"

    @property
    def pace(self) -> str:  # 'slow' or 'fast': how quickly producers put
        return f"{self.base}:pace"

    @property
    def errors(self) -> str:  # list of unexpected exceptions in workers
        return f"{self.base}:errors"


def _report_errors(r: redis.Redis, keys: StormKeys, body: Callable[[], None]) -> None:
    try:
        body()
    except BaseException:
        r.rpush(keys.errors, f"pid {os.getpid()}: {traceback.format_exc()}")
        raise


def storm_producer(url: str, prefix: str, name: str, keys: StormKeys, slot: int, inc: int,
                   parent: int) -> None:
    """Put unique ids forever; record each id before the put and again after it returned.
    While the parent sets ``pace`` to 'slow', pause up to 40 ms between puts: the queue
    goes from full to empty and back, and consumers are killed while they wait (holding
    the consumer role) as well as while they work."""
    r = redis.Redis.from_url(url)

    def body() -> None:
        q: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix)
        rng = random.Random()
        n = 0
        slow, looked = False, 0.0
        while os.getppid() == parent:
            if time.monotonic() - looked > 0.05:
                slow, looked = r.get(keys.pace) == b"slow", time.monotonic()
            if slow:
                time.sleep(rng.uniform(0.0, 0.04))
            item = f"p{slot}.{inc}.{n}"
            n += 1
            r.sadd(keys.attempted, item)
            while True:
                try:
                    if rng.random() < 0.3:
                        q.put(item, timeout=rng.uniform(0.0, 0.3))
                    else:
                        q.put(item)
                    break
                except pressure.Full:  # not pushed: the same id again
                    if os.getppid() != parent:
                        return
            r.sadd(keys.put_done, item)

    _report_errors(r, keys, body)


def storm_consumer(url: str, prefix: str, name: str, keys: StormKeys, slot: int, client_id: str,
                   reliable: bool, parent: int) -> None:
    """Receive forever, recording what was received (and, in reliable mode, acknowledged).

    Reliable mode: slot 0 uses get() + task_done(), the others receive() + Delivery.ack().
    Before acknowledging, the consumer writes its id to ``acking`` and clears it with the
    acknowledgement count in one transaction afterwards: a kill between the two leaves the
    marker, which is how the test tells "acknowledged but not recorded" from "lost".
    Default mode: slot 0 polls with get_nowait(), the others block in get(timeout).
    """
    r = redis.Redis.from_url(url)

    def body() -> None:
        q: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix, reliable=reliable,
                                                visibility_timeout=30.0, client_id=client_id)
        rng = random.Random()
        while os.getppid() == parent:
            delivery = None
            try:
                if not reliable and slot == 0:
                    item = q.get_nowait()
                elif reliable and slot != 0:
                    delivery = q.receive(timeout=rng.uniform(0.05, 1.0))
                    item = delivery.item
                else:
                    item = q.get(timeout=rng.uniform(0.05, 1.0))
            except pressure.Empty:
                if not reliable and slot == 0:
                    time.sleep(0.005)
                continue
            pipe = r.pipeline(transaction=True)
            pipe.hincrby(keys.got, item, 1)
            if delivery is not None:
                pipe.rpush(keys.deliveries, f"{item} {delivery.deliveries}")
            pipe.execute()
            if not reliable:
                continue
            if rng.random() < 0.3:
                time.sleep(rng.uniform(0.0, 0.004))  # "processing": kills land in here too
            r.hset(keys.acking, client_id, item)
            if delivery is None:
                q.task_done()
                ok = True
            else:
                ok = delivery.ack()
            pipe = r.pipeline(transaction=True)
            pipe.hincrby(keys.acked if ok else keys.ack_false, item, 1)
            pipe.hdel(keys.acking, client_id)
            pipe.execute()

    _report_errors(r, keys, body)


def parse_entry(entry: bytes) -> tuple[str, int, Any] | None:
    """A delivery entry '<seq>:<deliveries>:<ms>:<payload>' as (seq, deliveries, item);
    None for a wake-up entry 's:'."""
    if entry.startswith(b"s:"):
        return None
    seq, deliveries, _ms, payload = entry.split(b":", 3)
    return seq.decode(), int(deliveries), pickle.loads(payload)


def drain(q: pressure.Queue[Any], record: Callable[[Any, int], None], *, reliable: bool,
          own: str | None = None, limit: float = 45.0) -> None:
    """Receive (acknowledging in reliable mode) until the queue is empty and nothing is left
    in flight anywhere but in ``own``'s last received default-mode entry. Dead consumers'
    deliveries come back through the drain's own sweeps (about once a second)."""
    deadline = time.monotonic() + limit
    while True:
        assert time.monotonic() < deadline, (
            f"drain did not finish in {limit}s: size {q.qsize()}, in flight {q.in_flight()}")
        try:
            d = q.receive(timeout=0.5)
        except pressure.Empty:
            pending = [f for f in q.in_flight() if f.consumer != own]
            if not pending and q.qsize() == 0:
                return
            continue
        record(d.item, d.deliveries)
        if reliable:
            assert d.ack(), f"the drain's own delivery {d} was taken back before its ack"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# -- threads that retry through faults -------------------------------------------------


@dataclass
class Op:
    """One call a worker thread made: when, how long, and how it ended."""

    worker: str
    kind: str
    start: float
    end: float
    outcome: str  # 'ok', 'Empty', 'Full', or the exception class name


@dataclass
class Streams:
    """Producer and consumer threads on one reliable queue that keep going through faults.

    Producers put unique ids and retry the same id after any BackendError until a put
    returns (so a retry after OutcomeUnknown may push it twice, and only then);
    consumers receive() and ack(), retrying the ack after errors. Everything is
    recorded under one lock for the final accounting (``check``).
    """

    url: str
    prefix: str
    name: str = "streams"
    maxsize: int = 50
    producers: int = 2
    consumers: int = 2
    visibility: float = 60.0
    #: producers wait up to this long between puts, so the queue is full only part of the
    #: time and puts (not only waits for room) are in flight when a fault strikes
    put_gap: float = 0.002
    #: how long a consumer "processes" an item before acknowledging it: with some, items
    #: are in flight whenever a fault strikes, not only by chance
    work: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    put_done: dict[str, int] = field(default_factory=dict)  # id -> OutcomeUnknowns before success
    unknown_puts: Counter[str] = field(default_factory=Counter)
    got: Counter[str] = field(default_factory=Counter)
    acked: Counter[str] = field(default_factory=Counter)
    ambiguous: Counter[str] = field(default_factory=Counter)  # ack False after an OutcomeUnknown
    ack_false: Counter[str] = field(default_factory=Counter)  # ack False with no error before
    errors: Counter[str] = field(default_factory=Counter)
    ops: list[Op] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stop_producing: threading.Event = field(default_factory=threading.Event)
    stop_consuming: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    lost: int = 0

    def handle(self, client_id: str | None = None) -> pressure.Queue[str]:
        return pressure.Queue(self.name, url=self.url, prefix=self.prefix, reliable=True,
                              visibility_timeout=self.visibility, client_id=client_id)

    def start(self) -> pressure.Queue[str]:
        admin: pressure.Queue[str] = pressure.Queue(self.name, self.maxsize, url=self.url, prefix=self.prefix,
                                                    reliable=True, visibility_timeout=self.visibility)
        for i in range(self.producers):
            q = self.handle()
            self.threads.append(threading.Thread(target=self._guard, args=(self._produce, f"P{i}", q),
                                                 name=f"fault-P{i}", daemon=True))
        for i in range(self.consumers):
            q = self.handle(f"{self.prefix}-C{i}")
            self.threads.append(threading.Thread(target=self._guard, args=(self._consume, f"C{i}", q),
                                                 name=f"fault-C{i}", daemon=True))
        for t in self.threads:
            t.start()
        return admin

    def _guard(self, body: Callable[[str, pressure.Queue[str]], None], who: str,
               q: pressure.Queue[str]) -> None:
        try:
            body(who, q)
        except BaseException:  # noqa: BLE001 - reported by check()
            with self.lock:
                self.failures.append(f"{who}: {traceback.format_exc()}")
        finally:
            q.disconnect()

    def _log(self, who: str, kind: str, start: float, outcome: str) -> None:
        with self.lock:
            self.ops.append(Op(who, kind, start, time.monotonic(), outcome))
            if outcome not in ("ok", "Empty", "Full"):
                self.errors[outcome] += 1

    def _produce(self, who: str, q: pressure.Queue[str]) -> None:
        n = 0
        rng = random.Random()
        while not self.stop_producing.is_set():
            time.sleep(rng.uniform(0.0, self.put_gap))
            item = f"{who}-{n}"
            n += 1
            unknown = 0
            while True:  # until a put of this id returns, even after stop_producing
                start = time.monotonic()
                try:
                    q.put(item, timeout=1.0)
                except pressure.Full:
                    self._log(who, "put", start, "Full")
                    continue
                except pressure.OutcomeUnknown:
                    self._log(who, "put", start, "OutcomeUnknown")
                    unknown += 1
                    with self.lock:
                        self.unknown_puts[item] += 1
                    time.sleep(0.01)
                    continue
                except pressure.BackendError:
                    self._log(who, "put", start, "BackendError")
                    time.sleep(0.01)
                    continue
                self._log(who, "put", start, "ok")
                break
            with self.lock:
                self.put_done[item] = unknown

    def _take(self, who: str, q: pressure.Queue[str], delivery: Any) -> None:
        with self.lock:
            self.got[delivery.item] += 1
        if self.work:
            time.sleep(self.work)
        unknown = False
        deadline = time.monotonic() + 30
        while True:
            start = time.monotonic()
            try:
                ok = delivery.ack()
            except pressure.OutcomeUnknown:
                self._log(who, "ack", start, "OutcomeUnknown")
                unknown = True
            except pressure.BackendError:
                self._log(who, "ack", start, "BackendError")
            else:
                self._log(who, "ack", start, "ok")
                break
            assert time.monotonic() < deadline, f"{who} could not acknowledge {delivery} in 30 s"
            time.sleep(0.01)
        with self.lock:
            if ok:
                self.acked[delivery.item] += 1
            elif unknown:
                self.ambiguous[delivery.item] += 1  # an earlier attempt ran, its reply was lost
            else:
                self.ack_false[delivery.item] += 1

    def _consume(self, who: str, q: pressure.Queue[str]) -> None:
        while not self.stop_consuming.is_set():
            start = time.monotonic()
            try:
                delivery = q.receive(timeout=0.5)
            except pressure.Empty:
                self._log(who, "get", start, "Empty")
                continue
            except pressure.BackendError as exc:
                self._log(who, "get", start, type(exc).__name__)
                time.sleep(0.01)
                continue
            self._log(who, "get", start, "ok")
            self._take(who, q, delivery)
        # leaving: whatever reached this consumer's inbox in the last instant is taken too
        deadline = time.monotonic() + 20
        while True:
            start = time.monotonic()
            try:
                delivery = q.receive(block=False)
            except pressure.Empty:
                return
            except pressure.BackendError as exc:
                self._log(who, "get", start, type(exc).__name__)
                assert time.monotonic() < deadline, f"{who} could not finish: {exc!r}"
                time.sleep(0.05)
                continue
            self._log(who, "get", start, "ok")
            self._take(who, q, delivery)

    def progress(self) -> Counter[str]:
        """Successful operations per worker so far."""
        with self.lock:
            return Counter(op.worker for op in self.ops if op.outcome == "ok")

    def finish(self, settle: float = 30.0) -> None:
        """Stop the producers, let the consumers take everything that was put, stop them."""
        self.stop_producing.set()
        for t in self.threads[: self.producers]:
            t.join(60)
            assert not t.is_alive(), f"producer {t.name} did not stop"
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            with self.lock:
                if all(self.acked[i] + self.ambiguous[i] for i in self.put_done):
                    break
            time.sleep(0.05)
        self.stop_consuming.set()
        for t in self.threads[self.producers:]:
            t.join(60)
            assert not t.is_alive(), f"consumer {t.name} did not stop"

    def check(self, r: redis.Redis, q: pressure.Queue[Any]) -> dict[str, int]:
        """Every item whose put returned was acknowledged; an item is delivered more than
        once only if its put was retried after OutcomeUnknown; the counters agree."""
        assert not self.failures, "\n".join(self.failures)
        assert self.put_done, "no put ever completed"
        dead = Counter(pickle.loads(d.payload) for d in q.dead_letters())
        in_flight = q.in_flight()
        assert in_flight == [], f"left in flight after every consumer finished: {in_flight}"
        stats = q.statistics()
        assert stats.size == 0, f"{stats.size} items left in the queue"
        assert not self.ack_false, (
            f"ack() returned False with no OutcomeUnknown before it: a live consumer's delivery "
            f"was taken back, or an earlier attempt ran although it raised a plain BackendError: "
            f"{dict(self.ack_false)}")
        lost = sorted(i for i in self.put_done if self.acked[i] + self.ambiguous[i] + dead[i] == 0)
        self.lost = len(lost)
        assert not lost, f"{len(lost)} items lost (put returned, never acknowledged): {lost[:20]}"
        phantom = set(self.acked) | set(self.ambiguous) | set(dead)
        phantom -= set(self.put_done)
        assert not phantom, f"items acknowledged that no put returned: {sorted(phantom)[:20]}"
        duplicated = 0
        for i in self.put_done:
            copies = self.acked[i] + self.ambiguous[i] + dead[i]
            if copies > 1:
                duplicated += copies - 1
                assert copies - 1 <= self.unknown_puts[i], (
                    f"{i} came out {copies} times but only {self.unknown_puts[i]} of its puts "
                    f"raised OutcomeUnknown")
        total = sum(self.acked.values()) + sum(self.ambiguous.values()) + sum(dead.values())
        assert stats.produced_messages == total, (
            f"produced_messages {stats.produced_messages} != {total} items that came out")
        assert stats.consumed_messages == stats.produced_messages
        return {"items": len(self.put_done), "duplicated": duplicated,
                "redelivered": sum(c - 1 for c in self.got.values() if c > 1),
                "outcome_unknown": self.errors["OutcomeUnknown"],
                "backend_errors": self.errors["BackendError"], "dead": sum(dead.values())}

"""Workers of a ``pressure.Executor``: processes, on any host, that run its tasks.

A worker takes tasks from the executor's task queue ``<name>:tasks`` (a
reliable pressure queue: a task stays in Redis, in flight, until it is
settled) and runs them one at a time:

1. before a task starts, ``claim.lua`` decides, in Redis: run it (and count
   the start), drop it (its future was cancelled, or it is a second copy of a
   task that is running or finished), or give up on it (it was started
   ``max_attempts`` times and its worker died each time: its future fails with
   ``WorkerLost``). Tasks received together (prefetched) are claimed together,
   in one round trip, as the first starts: from then on the worker holds them
   to start next (``cancel()`` returns False, as for a task in
   ProcessPoolExecutor's call queue), but each is counted only as it starts
   (count_start.lua sent without waiting for the reply: ``_claims.py``), so a task
   the worker only held is never counted. Held tasks go back to the
   queue (and cancel again) when the worker stops or runs a long task. The
   decision stays in Redis until the task is settled, so a worker that dies
   before reporting leaves it to the next delivery;
2. it runs, while a heartbeat thread restarts the visibility timeout of what
   the worker holds (so a long task is never redelivered while its worker
   lives) and records the worker as alive;
3. the outcome goes to the result queue of the executor that submitted it,
   then ``settle.lua`` acknowledges the delivery and removes the decision (a
   batch of short tasks together, in one round trip). A worker killed before
   that leaves the task in flight: pressure returns it to the queue when it
   finds the worker dead (at once on the same host, after the visibility
   timeout elsewhere).

A worker rides out Redis restarts and outages (it retries, logging less and
less often), and an item of the task queue that is not a task goes to the
dead-letter list. An error no retry mends (a wrong password, an ACL that
refuses: ``_fatal.PERMANENT``) stops it, and its pool does not replace it.
Worker processes share nothing with their supervisor under a lock: the stop
signal is a shared byte.

Start workers with ``python -m pressure worker NAME --url ... --processes N``,
or from Python with ``run_workers(NAME, url=..., processes=N)`` (blocks) or
``WorkerPool`` (a context manager). An executor that finds no live worker
starts its own local ones.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import multiprocessing
import multiprocessing.context
import os
import pickle
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from .. import identity
from .._internal import attach, internal
from .._scripts import CLAIM, COUNT_START, CREATE, GET, PUT, SETTLE, ClaimStatus, PutStatus
from .. import _log
from .._packing import Call
from .._validate import _seconds
from ..connection import Backend, ConnectionConfig, _load_command, _script_sha
from ..errors import BrokenExecutor, DeserializationError, Empty, PressureError, ShutDown, WorkerLost
from ..keys import ExecutorKeys, resolve_prefix
from ..outage import LOG_FORMAT, Complaint, pause
from ..queue import Delivery, Queue
from ..signing import Authkey, refuse_unsigned_pickle, resolve_authkey
from ._claims import Claims
from ._contexts import own_forkserver, pool_context
from ._fatal import MESSAGE_SIZE, heard, permanent, reach_executor, say
from ._handles import PREFETCH, Handles, Prepared, WorkerConfig
from ._initializer import initialize
from ._outcomes import _RemoteTraceback, unpack_outcome  # noqa: F401 - importable from here, as before
from ._outcomes import outcome, unpickling_hint

__all__ = ["Task", "run_worker", "run_workers", "WorkerPool", "HEARTBEAT", "ALIVE_FOR", "pool_context"]

logger = _log.WORKER

#: How often a worker records that it is alive, and touches its running task's delivery.
HEARTBEAT = 1.0
#: A worker not heard from for this long is not counted as alive.
ALIVE_FOR = 5.0
#: How long one wait for a task lasts before the worker checks whether it should stop.
_POLL = 0.5
#: The longest a new worker's first heartbeat (and its first sweep of the task queue) waits
#: for the worker's first replies to go out: a worker starting up spends its CPU and its
#: round trips on its first task, not on a second connection. A worker that stops first (told
#: to stop before it ran a task) ends that wait: its stop never waits for it.
FIRST_BEAT = 0.25
#: While stopping, how often a pool wakes the worker waiting for a task again.
_WAKE_AGAIN = 0.02
#: Tasks shorter than this are prefetched (WorkerConfig.prefetch); tasks held behind one
#: that runs longer go back to the queue.
SHORT_TASK = 0.005

#: How a worker ends (run_worker's return value, its process's exit status, which the process
#: also says in a shared byte as it exits); _UNSAID: it did not say (see WorkerPool.check).
#: FAILED: on an error no retry mends (_fatal.PERMANENT), which it says in shared memory too.
STOPPED, NOT_INITIALIZED, CRASHED, RETIRED, FAILED, _UNSAID = 0, 1, 2, 3, 4, -1


@dataclass(frozen=True, slots=True)
class Task:
    """What travels through the task queue. ``body`` is the pickled ``(fn, args, kwargs)``,
    kept apart so that a function the worker cannot import fails that task, not the worker."""

    id: str
    reply_to: str
    max_attempts: int
    body: bytes


def _is_task(item: Any) -> bool:
    """Whether an item of the task queue is a task a worker can run (anything else is
    dead-lettered: it must not stop the worker)."""
    return (isinstance(item, Task) and isinstance(item.id, str) and bool(item.id)
            and isinstance(item.reply_to, str) and bool(item.reply_to)
            and type(item.max_attempts) is int and item.max_attempts >= 1
            and isinstance(item.body, bytes))



class _Worker:
    """One worker process: take tasks, run them one at a time, reply; until told to stop.

    Round trips are shared: tasks are taken up to ``prefetch`` at a time when that
    many are queued (and tasks are short) and claimed together (each counted as it
    starts, without a round trip of its own); their replies and settlements go out
    with the get of the next batch; a take is no more than the worker's share of what is
    queued among the workers alive (``alive``, counted by the heartbeat), so that a few
    short tasks spread over idle workers. Tasks held behind one that runs longer than
    SHORT_TASK are given back at once, for idle workers; so are tasks held when the
    worker stops.
    """

    def __init__(self, where: WorkerConfig, stop: Callable[[], bool], backend: Backend | None = None, *,
                 made: bool = False, handles: Handles | None = None, siblings: int = 1) -> None:
        self.where = where
        self.keys = ExecutorKeys.build(where.prefix, where.name)
        # one backend for every queue: replies and settlements share one round trip
        self.backend = backend or Backend(where.config)
        self.backend.route(self.keys.claims, f"executor {where.name!r}")  # on a cluster: its slot
        self.handles = handles or Handles.build(where, self.backend)
        self.tasks = self.handles.tasks
        self.id = f"{identity.client_id()}#{uuid.uuid4().hex[:8]}"
        # the consumer this (main) thread receives tasks as: its in-flight list holds them
        self.link = internal(self.tasks)
        if not made:
            # created if need be (a worker may start before its executor) on this thread's own
            # connection, the one its gets and replies go on: the first task is one connect and
            # handshake away, not two (a create on a pooled connection opened one more)
            [created] = self.link.pipeline([self.link.create_call()])
            self.link.created(created)
        self.consumer = self.link.consumer_id()
        self.inflight = self.tasks.keys.inflight(self.consumer)
        self.claims = Claims(self.backend, self.keys, self.inflight, self.tasks.keys.inflight_prefix, self.consumer,
                             (self.id, where.name, where.prefix))
        self.stop = stop
        self.replies = self.handles.replies
        self.held: collections.deque[Delivery[Task]] = collections.deque()  # received, not started
        #: claim.lua's decisions about held deliveries claimed with an earlier one (by delivery
        #: id): a start number (to be counted as it starts), or a decision not to run it
        self.claimed: dict[str, int] = {}
        self.started: float | None = None  # when the running task started
        self.ran = 0  # tasks started (what max_tasks_per_child counts)
        self.short = False  # whether the last task ran shorter than SHORT_TASK
        #: how many workers of the executor are alive, this one included, as the last heartbeat
        #: counted them: a take of short tasks is no more than this worker's share of those queued
        self.alive = max(1, siblings)
        #: the workers its pool starts with it, this one included: counted alive until a beat
        #: counts as many (they start together, and a pool's first map must not go to the first)
        self.siblings = siblings
        #: tasks run whose replies and settlements have not gone out yet (under ``lock``): short
        #: tasks' go out together; a task running longer than SHORT_TASK sends those before it
        self.done: list[tuple[Delivery[Task], bytes | None]] = []
        #: deliveries the heartbeat settled, for the main thread to forget (it owns the link)
        self.settled: list[Delivery[Task]] = []
        self.lock = threading.Lock()
        #: set as the main loop ends (for whatever reason): the heartbeat ends too
        self.ending = threading.Event()
        #: set once the worker's first replies have gone out, or as it ends: the heartbeat's
        #: first beat waits for it (FIRST_BEAT at most), and every wait of the heartbeat must
        #: end with the worker, which joins it before it lets its connections go
        self.first_beat = threading.Event()
        # the first sweep of the task queue is the heartbeat's, after the first task
        self.link.sweep_later()

    def heartbeat(self) -> None:
        """Record this worker as alive and keep what it holds visible (every HEARTBEAT);
        give back tasks held behind one running longer than SHORT_TASK (at once)."""
        # the first beat waits for the worker's first task to be done (or FIRST_BEAT at most);
        # then it sweeps the task queue once, as the worker's first get would have: deliveries
        # of dead workers on this host, and those whose visibility timeout passed, come back
        self.first_beat.wait(FIRST_BEAT)
        if self.ending.is_set():
            # the worker ended first (told to stop before it ran a task, say): nothing recorded
            # alive yet, and what it holds it settles or gives back itself, after this ends
            return
        with contextlib.suppress(redis.RedisError, PressureError):
            self.link.sweep()
        client = Backend(self.where.config).route(self.keys.claims, f"executor {self.where.name!r}").client()
        complaint = Complaint(logger, f"worker {self.id}: heartbeat")
        last_beat = 0.0
        while not self.stop() and not self.ending.is_set():
            try:
                with self.lock:
                    waiting: list[Delivery[Task]] = []
                    replies: list[tuple[Delivery[Task], bytes | None]] = []
                    if self.started is not None and time.monotonic() - self.started > SHORT_TASK:
                        waiting, self.held = list(self.held), collections.deque()
                        self.claimed.clear()
                        replies, self.done = self.done, []  # finished before it: not held back
                if waiting:
                    _log.event(logger, logging.DEBUG, "requeue", "worker %s: %d held tasks given back (behind "
                               "a long task)", self.id, len(waiting), queue=self.keys.tasks,
                               key=self.tasks.keys.base, executor=self.where.name, prefix=self.where.prefix,
                               worker=self.id, count=len(waiting), reason="given_back")
                self.give_back(waiting)
                self.finish_batch(replies, forget=False)
                if time.monotonic() - last_beat >= HEARTBEAT:
                    last_beat = time.monotonic()
                    self.beat(client)
                    self.link.touch_all(self.consumer)  # the running task and those held
                    complaint.succeeded()
            except (redis.RedisError, PressureError) as exc:
                complaint.failed(exc)
            time.sleep(SHORT_TASK)
        with contextlib.suppress(redis.RedisError):
            client.hdel(self.keys.workers, self.id)
        client.close()

    def beat(self, client: redis.Redis) -> None:
        """Record this worker as alive (server time), and count the executor's workers alive
        (``alive``), in one round trip after the clock's."""
        seconds, micros = client.time()
        now = seconds * 1000 + micros // 1000
        pipe = client.pipeline(transaction=False)
        pipe.hset(self.keys.workers, self.id, now)
        pipe.hgetall(self.keys.workers)  # not HVALS: the least ACL (security.md) has HGETALL
        _, beats = pipe.execute()
        counted = sum(1 for ms in beats.values() if now - int(ms) < ALIVE_FOR * 1000)
        if counted >= self.siblings:
            self.siblings = 1  # all of them heard from: the count alone from now on
        self.alive = max(1, counted, self.siblings)

    def give_back(self, deliveries: list[Delivery[Task]]) -> None:
        """Return tasks received but not started to the queue, in order (the oldest ends up
        next out). Those not returned when Redis fails are held again (claim.lua tells the
        worker later if one did go back after all)."""
        for i in range(len(deliveries) - 1, -1, -1):
            try:
                deliveries[i].release()
            except BaseException:
                with self.lock:
                    self.held.extendleft(reversed(deliveries[:i + 1]))
                raise

    def _reply_queue(self, task: Task) -> Queue[bytes]:
        return self.handles.reply_queue(self.where, task.reply_to)

    def fetch(self, done: list[tuple[Delivery[Task], bytes | None]] | None = None) -> None:
        """Send the replies of the tasks ``done`` and settle them, and take what is queued now
        (up to ``prefetch`` while tasks are short), in one round trip; else wait a little for
        one task; hold them. If Redis fails, ``done`` waits in ``self.done`` for the next try."""
        done = done or []
        got: list[Delivery[Task]] = []
        if self.short and done:
            try:
                calls, puts = self._reply_calls(done)
                replies, got = self.link.receive_many_after(calls, self.batch(), self.alive)
                with self.lock:
                    self.held.extend(got)  # ours now, whatever the replies say
                self._check_replies(puts, replies)
            except BaseException:
                with self.lock:
                    self.done[:0] = done
                raise
            self._settled(done, True)
        else:
            self.finish_batch(done)
            if self.short:
                got = self.link.receive_many(self.batch(), share=self.alive)
                with self.lock:
                    self.held.extend(got)
        if not got:
            # one at a time (the first task, or after a long one): the blocking get takes a
            # queued task as well, in one round trip instead of two; woken through Redis when
            # told to stop (WorkerPool.stop): never waits out the slice
            delivery = self.link.receive(_POLL, self.stop)
            with self.lock:
                self.held.append(delivery)

    def batch(self) -> int:
        """How many queued tasks to take at once while tasks are short: no more than it runs
        before it retires (and, get.lua sees to it, no more than its share of those queued
        among the ``alive`` workers: a map's few chunks spread over idle workers)."""
        if self.where.max_tasks_per_child is None:
            return self.where.prefetch
        return max(1, min(self.where.prefetch, self.where.max_tasks_per_child - self.ran))

    def retired(self) -> bool:
        """Whether the worker has run its ``max_tasks_per_child`` tasks: then it ends."""
        limit = self.where.max_tasks_per_child
        return limit is not None and self.ran >= limit

    def claim_next(self) -> tuple[Delivery[Task], int] | None:
        """The next held task and claim.lua's decision about it; None if nothing is held, or
        the item was not a task (it goes to the dead-letter list). A task not claimed yet is
        claimed with those held behind it (one round trip); one claimed with an earlier task
        is counted as it starts (``Claims.start``). If Redis fails, the task stays held
        (asking again about a delivery is harmless)."""
        with self.lock:
            if not self.held:
                return None
            delivery = self.held.popleft()
            decision = self.claimed.pop(delivery.id, None)
        try:
            if decision is None:
                return self.claim(delivery)
            if decision >= 1:
                decision = self.claims.start(delivery, decision)
            return delivery, decision
        except BaseException:
            with self.lock:
                self.held.appendleft(delivery)
                if decision is not None:
                    self.claimed[delivery.id] = decision
            raise

    def claim(self, delivery: Delivery[Task]) -> tuple[Delivery[Task], int] | None:
        """Claim ``delivery``'s task to start now, and the tasks held behind it not claimed yet
        to start next, in one round trip; their decisions wait in ``claimed``."""
        if not _is_task(delivery.item):
            self.link.bury(delivery)
            _log.event(logger, logging.ERROR, "dead_letter", "worker %s: an item of the task queue %r is "
                       "not a task (moved to its dead-letter list): %.200r", self.id, self.keys.tasks,
                       delivery.item, queue=self.keys.tasks, key=self.tasks.keys.base, executor=self.where.name,
                       prefix=self.where.prefix, worker=self.id, count=1, reason="not_a_task")
            return None
        with self.lock:  # an item not a task stops the batch: it is buried when reached
            batch = [delivery, *itertools.takewhile(
                lambda d: d.id not in self.claimed and _is_task(d.item), self.held)]
        decisions = self.claims.claim(batch)
        with self.lock:
            held = {d.id for d in self.held}  # given back meanwhile: no longer ours to start
            self.claimed.update((d.id, decision) for d, decision in zip(batch[1:], decisions[1:]) if d.id in held)
        return delivery, decisions[0]

    def run(self, delivery: Delivery[Task], decision: int) -> bytes | None:
        """Act on claim.lua's decision about a task: run it (its reply), or the reply that it
        was given up on; None if it is not to run (cancelled, or a second copy)."""
        task = delivery.item
        if decision == ClaimStatus.GIVE_UP:
            _log.event(logger, logging.WARNING, "task_given_up", "executor %r: task %s was started %d "
                       "times and its worker died each time: not run again (WorkerLost)", self.where.name,
                       task.id, task.max_attempts, executor=self.where.name, prefix=self.where.prefix,
                       task=task.id, attempts=task.max_attempts, worker=self.id)
            lost = WorkerLost(f"task {task.id} was started {task.max_attempts} times and its worker "
                              f"died each time (max_attempts={task.max_attempts}): not run again")
            return pickle.dumps((False, lost, ""), pickle.HIGHEST_PROTOCOL)
        if decision < 1:
            return None
        with self.lock:
            self.started = time.monotonic()
        self.ran += 1
        try:
            fn, args, kwargs = pickle.loads(task.body)
        except BaseException as exc:  # noqa: BLE001 - BrokenProcessPool in ProcessPoolExecutor
            broken = BrokenExecutor(f"task {task.id}'s function or arguments could not be "
                                    f"unpickled in the worker: {exc!r}{unpickling_hint(exc)}")
            broken.__cause__ = exc
            _, message = outcome(False, broken)
        else:
            try:
                _, message = outcome(True, fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - the task's own failure, reported
                _, message = outcome(False, exc)
        with self.lock:
            self.short = time.monotonic() - self.started < SHORT_TASK
            self.started = None
        return message

    def finish(self) -> None:
        """Send the replies of the tasks run so far and settle them (``finish_batch``)."""
        with self.lock:
            batch, self.done = self.done, []
        self.finish_batch(batch)

    def finish_batch(self, done: list[tuple[Delivery[Task], bytes | None]], forget: bool = True) -> None:
        """Send the replies, then settle the deliveries: one round trip for all, in one
        transaction (a reply sent is never left with its task's claim mark and delivery
        unsettled, whatever happens to this process, the connection or the server: the mark
        would outlive the task, and the delivery come back to run again). If Redis fails,
        they wait in ``self.done`` for the next try, first in line."""
        if not done:
            return
        try:
            calls, puts = self._reply_calls(done)
            self._check_replies(puts, self.backend.pipeline(calls, atomic=len(calls)))
        except BaseException:
            with self.lock:
                self.done[:0] = done
            raise
        self._settled(done, forget)

    def _settled(self, done: list[tuple[Delivery[Task], bytes | None]], forget: bool) -> None:
        """The replies of ``done`` went out and the deliveries are settled: forget them (on the
        main thread; else it does, later)."""
        self.first_beat.set()
        if forget:
            for delivery, _ in done:
                self.link.forget(delivery)
        else:
            with self.lock:
                self.settled += [delivery for delivery, _ in done]

    def forget_settled(self) -> None:
        """Forget (in this, the main thread) what the heartbeat settled."""
        with self.lock:
            settled, self.settled = self.settled, []
        for delivery in settled:
            self.link.forget(delivery)

    def _reply_calls(self, done: list[tuple[Delivery[Task], bytes | None]]
                     ) -> tuple[list[Call], list[tuple[Queue[bytes], list[bytes], int]]]:
        """The calls that send the replies of ``done`` (one put.lua call per reply queue,
        usually one: the executor's) and then settle them, to run as one transaction; and, per
        put call, its queue, its replies and how many it carries."""
        by_queue: dict[str, tuple[Queue[bytes], list[bytes]]] = {}
        for delivery, message in done:
            if message is not None:
                queue = self._reply_queue(delivery.item)
                framed = delivery.item.id.encode() + b"\n" + message
                by_queue.setdefault(delivery.item.reply_to, (queue, []))[1].append(framed)
        calls: list[Call] = []
        puts: list[tuple[Queue[bytes], list[bytes], int]] = []
        for queue, messages in by_queue.values():
            first = 0
            link = internal(queue)
            for call, count in link.put_many_calls(messages, [link.payload(message) for message in messages]):
                calls.append(call)
                puts.append((queue, messages[first:first + count], count))
                first += count
        settle: list[bytes | str] = [self.consumer]
        for delivery, _ in done:
            settle += (delivery.id, delivery.item.id)
        calls.append((SETTLE.command(self.keys, self.inflight, self.tasks.keys, more=len(settle) - 1), settle))
        return calls, puts

    def _check_replies(self, puts: list[tuple[Queue[bytes], list[bytes], int]], replies: list[Any]) -> None:
        """Act on the replies of ``_reply_calls``' calls: an error raises; replies a full
        reply queue refused are put the patient way."""
        for reply in replies:
            if isinstance(reply, redis.RedisError):
                self.backend.raise_error(reply, "replies and settlements", True)
        for (queue, messages, count), reply in zip(puts, replies):
            went, stop = internal(queue).put_outcome(reply, count)
            if stop in (PutStatus.FULL, PutStatus.BUSY):  # full, or a plain spec client mid-put: the
                for message in messages[went:]:         # patient way
                    with contextlib.suppress(ShutDown):
                        queue.put(message)
            # -3 or -4 (closed, deleted): the executor is gone, nobody waits for these results

    def _try_finish(self) -> None:
        """finish(), or keep the replies for the next try if Redis fails meanwhile (the tasks
        stay in flight; a reply sent twice is ignored by the executor)."""
        try:
            self.finish()
        except PressureError as exc:
            _log.event(logger, logging.WARNING, "replies_wait", "worker %s: replies wait: %s", self.id, exc,
                       executor=self.where.name, prefix=self.where.prefix, worker=self.id, error=str(exc))

    def loop(self) -> int:
        """Run tasks until told to stop, or retired (``max_tasks_per_child``): how it ended,
        STOPPED or RETIRED."""
        beat = threading.Thread(target=self.heartbeat, name="pressure-heartbeat", daemon=True)
        beat.start()
        _log.event(logger, logging.INFO, "worker_start", "worker %s started (executor %r, pid %d)", self.id,
                   self.where.name, os.getpid(), executor=self.where.name, prefix=self.where.prefix,
                   worker=self.id, pid=os.getpid())
        complaint = Complaint(logger, f"worker {self.id}")
        try:
            while not self.stop() and not self.retired():
                try:
                    self.forget_settled()
                    if not self.held:  # a batch is over: its replies go before more is taken
                        with self.lock:
                            done, self.done = self.done, []
                        self.fetch(done)
                    step = self.claim_next()
                    complaint.succeeded()
                except Empty:
                    complaint.succeeded()
                    continue
                except DeserializationError:  # dead-lettered (and logged) by the queue
                    continue
                except ShutDown:  # the executor's queue was deleted
                    return STOPPED
                except PressureError as exc:
                    if permanent(exc):  # a wrong password, an ACL that refuses...: the worker stops
                        raise
                    complaint.failed(exc)  # Redis restarting or unreachable: wait for it
                    pause(_POLL, self.stop)
                    continue
                if step is None:
                    continue
                delivery, decision = step
                if decision == ClaimStatus.NOT_OURS:  # it went back to the queue meanwhile: not ours to run
                    self.link.forget(delivery)
                    continue
                reply = self.run(delivery, decision)
                with self.lock:
                    self.done.append((delivery, reply))
                if not self.short or self.stop():
                    self._try_finish()  # a long task's result goes out at once
            return RETIRED if self.retired() else STOPPED
        finally:
            self.ending.set()
            self.first_beat.set()  # a heartbeat still waiting for its first beat ends now
            beat.join(HEARTBEAT)  # it ends within a round trip: then the connections can go
            with self.lock:
                held, self.held = list(self.held), collections.deque()
                self.claimed.clear()
            with contextlib.suppress(PressureError, redis.RedisError):
                self.finish()
            with contextlib.suppress(PressureError, redis.RedisError):
                self.give_back(held)  # not started: back to the queue for other workers
            with contextlib.suppress(redis.RedisError):  # no longer alive (the heartbeat may not say so)
                self.backend.client().hdel(self.keys.workers, self.id)
            self.tasks.disconnect()
            for queue in self.replies.values():
                queue.disconnect()
            _log.event(logger, logging.INFO, "worker_stop", "worker %s stopped (executor %r)", self.id,
                       self.where.name, executor=self.where.name, prefix=self.where.prefix, worker=self.id,
                       pid=os.getpid(), given_back=len(held), retired=self.retired())


def run_worker(where: WorkerConfig, stop: Callable[[], bool],
               initializer: Callable[..., Any] | None = None, initargs: tuple[Any, ...] = ()) -> int:
    """Run one worker in this process until ``stop()`` is true (or it has run
    ``where.max_tasks_per_child`` tasks); the exit status: STOPPED, NOT_INITIALIZED or RETIRED.
    An error no retry mends (a wrong password, an ACL that refuses...) is raised."""
    return _run_worker(where, stop, initializer, initargs, None, None)


def _run_worker(where: WorkerConfig, stop: Callable[[], bool], initializer: Callable[..., Any] | None,
                initargs: tuple[Any, ...], prepared: Prepared | None, handles: Handles | None,
                siblings: int = 1) -> int:
    """run_worker, for a worker whose executor ``prepared`` its way (None: nothing is known),
    with the handles its parent made for it (see WorkerPool.start), or new ones; one of the
    ``siblings`` worker processes of its pool."""
    # the worker's connections, from the first round trip on
    backend = handles.backend if handles else Backend(where.config, loaded=prepared.scripts if prepared else ())
    initialized = initialize(where, initializer, initargs, stop, backend)
    if initialized is None:
        backend.disconnect()
        return STOPPED
    if not initialized:
        backend.disconnect()
        return NOT_INITIALIZED
    return _Worker(where, stop, backend, made=prepared is not None, handles=handles, siblings=siblings).loop()


def _process_main(where: WorkerConfig, stopping: Any, said: Any, verdict: Any,
                  initializer: Callable[..., Any] | None, initargs: tuple[Any, ...], prepared: Prepared | None,
                  handles: Handles | None, siblings: int = 1) -> None:
    """A worker process: SIGINT is the parent's to handle (it sets the shared byte
    ``stopping``, which is read without a lock). Its exit status (STOPPED, NOT_INITIALIZED,
    CRASHED, RETIRED or FAILED) also goes in the shared byte ``said`` as it ends: a process
    that ends without saying so died (its exit status may be any, a task's ``os._exit``);
    FAILED's error goes in the shared buffer ``verdict`` first. Its log lines are timestamped
    (a new process has no logging configuration: the parent's is not inherited)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not logging.getLogger().handlers:
        logging.basicConfig(format=LOG_FORMAT)
    try:
        status = _run_worker(where, lambda: stopping.value != 0, initializer, initargs, prepared, handles,
                             siblings)
    except Exception as exc:
        if permanent(exc):
            say(verdict, exc)  # its pool says it (once), and does not replace it
            status = FAILED
        else:
            _log.event(logger, logging.ERROR, "worker_crashed", "worker process %d crashed", os.getpid(),
                       exc_info=True, executor=where.name, prefix=where.prefix, pid=os.getpid())
            status = CRASHED
    said.value = status
    raise SystemExit(status)


class WorkerPool:
    """``processes`` worker processes for the executor ``name``, on this host.

    ``start()`` starts them; ``stop(wait=True)`` lets each finish its task and
    exit; ``with WorkerPool(...) as pool:`` does both. A process that dies (or
    ends without saying why: a task's ``os._exit``) is replaced by ``check()``
    (its task is redelivered); so is one that ran ``max_tasks_per_child`` tasks
    and ended (nothing of it is redelivered). One that stopped on an error no
    retry mends (a wrong password, an ACL that refuses...) is not: ``failure``
    holds that error. The executor uses one
    for its local workers; ``python -m pressure worker`` runs one until
    SIGINT or SIGTERM.

    The processes share nothing with the pool under a lock (a process can be
    killed while holding one, and the pool would wait for it forever): they
    are told to stop through a byte of shared memory.
    """

    def __init__(self, name: str, *, url: str | None = None, prefix: str | None = None,
                 processes: int | None = None, visibility_timeout: float = 30.0,
                 initializer: Callable[..., Any] | None = None, initargs: tuple[Any, ...] = (),
                 mp_context: multiprocessing.context.BaseContext | None = None,
                 config: ConnectionConfig | None = None, prefetch: int = PREFETCH,
                 authkey: Authkey | None = None, max_tasks_per_child: int | None = None,
                 insecure_pickle: bool = False, _prepared: Prepared | None = None) -> None:
        if config is None:
            config = ConnectionConfig.resolve(url)
        keys = resolve_authkey(authkey)
        if not keys:  # before any process starts: no unsigned task from another host unless asked for
            refuse_unsigned_pickle(config, insecure_pickle, f"workers of executor {name!r}", data_only=False)
        if processes is None:
            processes = os.cpu_count() or 1
        if processes <= 0:
            raise ValueError("processes must be greater than 0")
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        visibility_timeout = _seconds("visibility_timeout", visibility_timeout)
        # the platform's default, as ProcessPoolExecutor's: fork where it forks (a worker then
        # starts in a few ms, with nothing to import), forkserver or spawn elsewhere; spawn
        # with max_tasks_per_child
        self.context: Any = pool_context(mp_context, max_tasks_per_child)
        self.where = WorkerConfig(name, config, resolve_prefix(prefix), visibility_timeout, prefetch,
                                  keys, max_tasks_per_child, bool(insecure_pickle))
        self.processes = processes
        self.initializer, self.initargs = initializer, initargs
        #: 1 once the processes are told to stop: shared memory without a lock
        self.stopping: Any = self.context.RawValue("b", 0)
        self.procs: list[Any] = []
        #: by process: its byte of shared memory, in which it says how it ends (STOPPED...), and
        #: the buffer in which it says the error it ends on (FAILED)
        self._said: dict[Any, Any] = {}
        self._verdicts: dict[Any, Any] = {}
        #: The first error no retry mends that stopped a process (it is not replaced), if any.
        self.failure: PressureError | None = None
        self._failed: set[Any] = set()  # processes that stopped so, reported
        self._waker: Queue[Task] | None = None
        self._prepared = _prepared  # by the executor that starts this pool: see Prepared
        #: forked workers' queue handles, built here (their backend's client too: see
        #: Wire.for_child) and never used here: each takes its copy as its own
        self._for_child: Handles | None = None

    def _spawn(self) -> Any:
        """A new worker process, started (with the byte in which it says how it ends)."""
        if self.context.get_start_method() == "forkserver":
            own_forkserver()
        said = self.context.RawValue("b", _UNSAID)
        verdict = self.context.RawArray("c", MESSAGE_SIZE)
        proc = self.context.Process(target=_process_main, name="pressure-worker",
                                    args=(self.where, self.stopping, said, verdict, self.initializer,
                                          self.initargs, self._prepared, self._for_child, self.processes))
        proc.start()
        self._said[proc] = said
        self._verdicts[proc] = verdict
        return proc

    def start(self) -> WorkerPool:
        if self.context.get_start_method() == "fork":
            # the scripts of a worker's way to its first reply (it loads them as it calls them
            # first): read, hashed and encoded once here, inherited by every forked worker
            for script in (CREATE, GET, CLAIM, COUNT_START, SETTLE, PUT):
                _script_sha(script.name)
                _load_command(script.name)
            # and their queue handles: built in a child just forked, they cost it about 2 ms
            # more (every page a child touches first is copied)
            prepared = self._prepared or Prepared()
            backend = Backend(self.where.config, loaded=prepared.scripts)
            backend.for_child()
            self._for_child = Handles.build(self.where, backend, (prepared.results,) if prepared.results else ())
        self.procs = []
        try:
            for _ in range(self.processes):
                self.procs.append(self._spawn())
        except BaseException:  # e.g. fork() failed (EAGAIN): those started are told to stop, not
            self.stop(wait=False)  # left running (a process's exit would wait for them forever)
            raise
        _log.event(logger, logging.INFO, "pool_start", "%d workers for executor %r started", self.processes,
                   self.where.name, executor=self.where.name, prefix=self.where.prefix,
                   processes=self.processes, pids=[proc.pid for proc in self.procs])
        return self

    def check(self) -> int:
        """Replace worker processes that died (killed, crashed, or ended without saying how,
        whatever their exit status: a task's ``os._exit``) or retired (``max_tasks_per_child``),
        not those that stopped, failed to initialize or stopped on an error no retry mends (the
        first such error goes in ``failure``); return how many were replaced."""
        replaced = 0
        for i, proc in enumerate(self.procs):
            if proc.exitcode is None or self.stopping.value:
                continue
            said = self._said[proc].value if proc in self._said else _UNSAID
            if said in (STOPPED, NOT_INITIALIZED):
                continue
            if said == FAILED:
                if proc not in self._failed:
                    self._failed.add(proc)
                    error = heard(self._verdicts[proc])
                    self.failure = self.failure or error
                    _log.event(logger, logging.ERROR, "worker_crashed", "worker process %s stopped, not "
                               "replaced (no retry mends this): %s", proc.pid, error, executor=self.where.name,
                               prefix=self.where.prefix, pid=proc.pid, error=str(error))
                continue
            if said == RETIRED:
                _log.event(logger, logging.INFO, "worker_retired", "worker process %s ran its %d tasks "
                           "(max_tasks_per_child): starting another", proc.pid, self.where.max_tasks_per_child,
                           executor=self.where.name, prefix=self.where.prefix, pid=proc.pid)
            else:
                _log.event(logger, logging.WARNING, "worker_lost", "worker process %s died (exit code %s): "
                           "starting another", proc.pid, proc.exitcode, executor=self.where.name,
                           prefix=self.where.prefix, pid=proc.pid, exitcode=proc.exitcode)
            try:
                self.procs[i] = self._spawn()
            except OSError as exc:  # fork() failed (EAGAIN, ENOMEM): the next check tries again
                _log.event(logger, logging.WARNING, "worker_not_replaced", "cannot start a worker process "
                           "yet: %s", exc, executor=self.where.name, prefix=self.where.prefix,
                           error=str(exc))
                continue
            del self._said[proc]
            self._verdicts.pop(proc, None)
            replaced += 1
        return replaced

    def alive(self) -> int:
        return sum(proc.is_alive() for proc in self.procs)

    def stop(self, wait: bool = True, timeout: float | None = None) -> None:
        """Tell every process to stop after its current task; with ``wait``, join them.

        A worker waiting for a task is woken through Redis (wake.lua: the queue's waiter; the
        others wait for the consumer role it then gives back), so an idle pool stops in a few
        ms. While joining, the waiter is woken again every ``_WAKE_AGAIN`` s: a worker that
        became the waiter just after a wake, before it saw the stop, is not left waiting."""
        self.stopping.value = 1
        self._wake()
        if not wait:
            _log.event(logger, logging.INFO, "pool_stop", "workers for executor %r told to stop", self.where.name,
                       executor=self.where.name, prefix=self.where.prefix, processes=len(self.procs),
                       alive=self.alive())
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        for proc in self.procs:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                proc.join(_WAKE_AGAIN if left is None else min(_WAKE_AGAIN, left))
                if proc.exitcode is not None:
                    break
                self._wake()
        if self._waker is not None:
            self._waker.disconnect()
        _log.event(logger, logging.INFO, "pool_stop", "workers for executor %r told to stop (and stopped)",
                   self.where.name, executor=self.where.name, prefix=self.where.prefix,
                   processes=len(self.procs), alive=self.alive())

    def _wake(self) -> None:
        """Wake the worker waiting on the task queue, if any (errors are ignored: without
        Redis, the workers see the stop at the end of their wait)."""
        if not self.procs:
            return
        try:
            if self._waker is None:
                self._waker = attach(Queue, ExecutorKeys.build(self.where.prefix, self.where.name).tasks,
                                     self.where.config, prefix=self.where.prefix, reliable=True,
                                     create=False)
            internal(self._waker).wake_waiter()
        except (PressureError, redis.RedisError, OSError) as exc:
            logger.debug("worker pool %r: cannot wake its workers: %s", self.where.name, exc)

    def __enter__(self) -> WorkerPool:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def run_workers(name: str, *, url: str | None = None, prefix: str | None = None,
                processes: int | None = None, visibility_timeout: float = 30.0,
                prefetch: int = PREFETCH, authkey: Authkey | None = None,
                max_tasks_per_child: int | None = None, insecure_pickle: bool = False,
                create: bool = True) -> None:
    """Run ``processes`` workers for the executor ``name`` until SIGINT or SIGTERM (then each
    finishes its current task). Dead processes are replaced; the tasks they held are
    redelivered. With ``max_tasks_per_child``, each process ends after that many tasks and
    another starts (with 'spawn', as ProcessPoolExecutor's).

    First, in one round trip, the executor's task queue is created if it does not exist (an
    Executor started later uses it); not ``create``: QueueDoesNotExist if it does not exist
    (the Executor was never started there, or the name, server or prefix is wrong). An error
    no retry mends (a wrong password, an ACL that refuses: ``AuthenticationError``,
    ``PermissionDenied``, ``TLSError``, ``ProtocolError``), met then or by any worker later,
    stops every worker and is raised. While Redis cannot be reached, the workers wait for it."""
    pool = WorkerPool(name, url=url, prefix=prefix, processes=processes,
                      visibility_timeout=visibility_timeout, prefetch=prefetch, authkey=authkey,
                      max_tasks_per_child=max_tasks_per_child, insecure_pickle=insecure_pickle)
    stopping = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if not reach_executor(pool.where, create, stopping.is_set):
            return  # told to stop while Redis could not be reached
        pool.start()
        try:
            while pool.failure is None and not stopping.wait(1.0):
                pool.check()
        finally:
            pool.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pool.failure is not None:
        raise pool.failure

"""The machinery of a ``pressure.Executor`` (pressure/executor/__init__.py has the data-flow
diagram): ``_Core``, everything an Executor does apart from the Executor object itself (its
result thread, its futures, its local workers, its sender: pressure/executor/_sender.py, and
the counting of its results: pressure/executor/_outcomes.py), and the futures it hands out.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import itertools
import logging
import os
import pickle
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import redis
import redis.cluster

from .. import _log
from .._internal import attach, internal
from .._scripts import CANCEL, GET, STARTED, CancelStatus
from ..connection import Backend, ConnectionConfig
from ..errors import BackendError, BrokenExecutor, Empty, PressureError, ShutDown
from ..keys import ExecutorKeys, resolve_prefix
from ..outage import Complaint
from ..queue import Queue
from ._handles import WORKER_SCRIPTS, Prepared
from ._initializer import no_initializer, setup_commands
from ._outcomes import WAKE_MESSAGE, Ahead, Outcomes
from ._sender import _CLAIM_BATCH, _Outgoing, _Sender
from .worker import ALIVE_FOR, Task, WorkerPool

__all__ = ["ExecutorStatistics"]

logger = _log.EXECUTOR

#: How long the result thread waits for a result before it looks around
#: (shutdown, a broken executor, dead local workers).
_POLL = 0.25

_cores: weakref.WeakSet[_Core] = weakref.WeakSet()
_exiting = threading.Event()


def _python_exit() -> None:
    """At interpreter exit (before non-daemon threads are joined): pending work still
    completes, as with ProcessPoolExecutor, then each result thread ends."""
    _exiting.set()
    for core in list(_cores):
        if core._thread is None:
            core._cleanup()  # never used: its result queue (and an anonymous one's keys) go
        else:
            core._wake_collector()  # idle: it ends now, not at the end of its wait


threading._register_atexit(_python_exit)  # type: ignore[attr-defined]
# a forked child (a local worker) runs the threading atexit hooks as it ends: the parent's
# executors are not its own to finish or clean up
os.register_at_fork(after_in_child=_cores.clear)


@dataclass(frozen=True, slots=True)
class ExecutorStatistics:
    """A snapshot of an executor's work, across every executor and worker sharing its name."""

    #: Tasks waiting in the task queue.
    queued: int
    #: Tasks a worker has taken and not finished.
    running: int
    #: Tasks finished with a result.
    done: int
    #: Tasks finished by raising.
    failed: int
    #: Starts of a task after its first (its worker died or vanished).
    retried: int
    #: Tasks given up after ``max_attempts`` starts (their futures got WorkerLost).
    lost: int
    #: Workers heard from in the last few seconds, by identifier (host:pid:thread#token).
    workers: tuple[str, ...]


class _TaskFuture(Future):  # type: ignore[type-arg]
    """A Future whose ``cancel()`` first makes sure, in Redis, that no worker runs it."""

    def __init__(self, core: _Core, task_id: str) -> None:
        super().__init__()
        self._core = core  # never the Executor: dropping it lets it be collected
        self._task_id = task_id

    def cancel(self) -> bool:
        with self._condition:
            if self._state != "PENDING":
                return super().cancel()
        cancelled = self._core._cancel_task(self._task_id)
        if cancelled:
            if super().cancel():
                # no worker will ever run it (Redis said so): tell wait() and as_completed() now
                self.set_running_or_notify_cancel()
            return True
        if cancelled is False:
            self._started()
        # not confirmed (being sent, finished, or Redis unreachable): it may run, so it is
        # not cancelled; True only if it was cancelled already
        with self._condition:
            return self._state in ("CANCELLED", "CANCELLED_AND_NOTIFIED")

    def _started(self) -> None:
        """A worker has started the task: the future is running."""
        with self._condition:
            if self._state == "PENDING":
                self._state = "RUNNING"


class _Core:
    """Everything an Executor does, kept apart from the Executor object itself: its
    threads and futures reference this, so an Executor dropped without ``shutdown()`` is
    collected, and then finishes its pending work and cleans up like ``shutdown(wait=False)``.
    The arguments are the Executor's, validated."""

    def __init__(
        self,
        name: str | None,
        config: ConnectionConfig,
        connection: redis.Redis | redis.cluster.RedisCluster | None,
        prefix: str | None,
        max_workers: int,
        mp_context: Any,
        initializer: Callable[..., Any] | None,
        initargs: tuple[Any, ...],
        max_attempts: int,
        max_pending: int | None,
        visibility_timeout: float,
        local_workers: bool | None,
        authkey: tuple[bytes, ...] = (),
        dumps: Callable[[Any], bytes] = functools.partial(pickle.dumps, protocol=pickle.HIGHEST_PROTOCOL),
        outage_limit: float = 60.0,
        max_tasks_per_child: int | None = None,
        insecure_pickle: bool = False,
    ) -> None:
        self._insecure_pickle = insecure_pickle  # checked by the Executor: see signing.refuse_unsigned_pickle
        self._outage_limit = outage_limit  # pressure.executor.OUTAGE_LIMIT, as the Executor was made
        self._pid = os.getpid()  # the process whose executor this is (not a forked child)
        self._anonymous = name is None
        self._authkey = authkey
        self._dumps = dumps
        self._name = name if name is not None else f"{{exec-{uuid.uuid4().hex}}}"
        self._prefix = resolve_prefix(prefix)
        self._config = config
        self._keys = ExecutorKeys.build(self._prefix, self._name)
        self._backend = Backend(config, connection)
        self._backend.route(self._keys.claims, f"executor {self._name!r}")  # on a cluster: its slot
        self._max_workers = max_workers
        self._mp_context = mp_context
        self._max_tasks_per_child = max_tasks_per_child
        self._initializer, self._initargs = initializer, initargs
        self._max_attempts = max_attempts
        self._visibility_timeout = visibility_timeout
        self._local_workers = local_workers
        # both queues are created below, in one round trip: one backend, one set of connections
        self._tasks: Queue[Task] = attach(
            Queue, self._keys.tasks, config, prefix=self._prefix, reliable=True,
            visibility_timeout=visibility_timeout, max_deliveries=None, authkey=authkey,
            backend=self._backend, create=False, insecure_pickle=insecure_pickle)
        self._bounded = max_pending is not None and max_pending > 0
        self._id = uuid.uuid4().hex[:12]
        self._results: Queue[bytes] = attach(
            Queue, self._keys.results_prefix + self._id, config, prefix=self._prefix, serializer="bytes",
            authkey=authkey, backend=self._backend, create=False)
        self._futures: dict[str, _TaskFuture] = {}
        self._counter = itertools.count()
        self._lock = threading.Lock()
        #: held while another thread wakes the result thread: its connections stay open meanwhile
        self._waking = threading.Lock()
        self._shutdown = False
        self._cleaned = False
        self._broken: str | None = None
        self._thread: threading.Thread | None = None
        self._pool: WorkerPool | None = None
        self._sender = _Sender(self._name, self._tasks, self._keys, self._futures,
                               outage_limit, lambda: self._cleaned, self._break)
        self._outcomes = Outcomes(self._backend, self._keys, self._futures, self._name, self._prefix)
        setup, written = setup_commands(self._keys, authkey, initializer, initargs)
        # max_pending: the task queue's bound (<= 0: none), made with it, or set if it had another
        bound = None if max_pending is None else max(max_pending, 0)
        if self._setup(setup, written, bound) != bound and bound is not None:
            self._tasks.maxsize = bound
        _cores.add(self)

    def _setup(self, setup: list[bytes], written: list[str], bound: int | None) -> int:
        """Create both queues (the task queue with ``bound``, if it is made) and run the
        ``setup`` commands (plain, harmless to repeat), in one round trip on a connection of
        the backend's pool (the first task goes on it too: see _Sender.send_now); the task
        queue's bound. If the task queue cannot be created (of another kind, say), the result
        queue made with it goes again, and so do the keys ``written`` by ``setup``: no
        executor of this name can run on that task queue, so nothing of this one is left."""
        tasks, results = internal(self._tasks), internal(self._results)
        # and the scripts of the result thread's get and, if this process may start workers,
        # of theirs: loaded here (see Prepared), not by each of them on its way to a first reply
        load = WORKER_SCRIPTS if self._local_workers is not False else (GET.name,)
        created, made, *replies = self._backend.pipeline(
            [tasks.create_call(bound), results.create_call()], pooled=True, after=setup, load=load)
        try:
            results.created(made)
            stored = tasks.created(created)  # whatever bound it has: the caller sets max_pending's
        except BaseException:
            with contextlib.suppress(PressureError):
                self._results.delete()
            if written:
                client = self._backend.client()
                with contextlib.suppress(PressureError):
                    self._backend.call("DEL", client.delete, *written, mutating=True)
            raise
        for reply in replies:
            if isinstance(reply, redis.RedisError):
                self._backend.raise_error(reply, "executor setup", True)
        return stored

    # -- submitting ---------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            if self._broken is not None:
                raise BrokenExecutor(self._broken)
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if _exiting.is_set():
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")
            task_id = f"{self._id}-{next(self._counter)}"
            future = _TaskFuture(self, task_id)
            self._futures[task_id] = future
            entry: _Outgoing | None = None
            if self._thread is None:  # the first submit: workers, its task, then the threads
                entry = self._entry(task_id, future, fn, args, kwargs)
                try:
                    sent = self._start(entry)
                except BaseException:
                    self._futures.pop(task_id, None)
                    raise
                if sent:
                    return future
        if entry is None:
            entry = self._entry(task_id, future, fn, args, kwargs)
            if entry is None:
                return future
        # the sender thread batches puts (one round trip for many) and rides out outages
        self._sender.enqueue(entry)
        if entry.sent is not None:
            try:  # backpressure: block while the task queue is full (the sender waits for room)
                entry.sent.wait()
            except BaseException:
                self._sender.withdraw(entry)
                self._futures.pop(task_id, None)
                raise
        return future

    def start(self) -> None:
        """Start now what the first submit would (local workers if wanted, the threads), as
        ``multiprocessing.Pool`` starts its workers as it is made."""
        with self._lock:
            if self._thread is None and not self._shutdown and self._broken is None:
                self._start(None)

    def _entry(self, task_id: str, future: _TaskFuture, fn: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> _Outgoing | None:
        """The task on its way to the task queue; None if it cannot be pickled (its future
        fails, as ProcessPoolExecutor's)."""
        try:
            body = self._dumps((fn, args, kwargs))
        except Exception as exc:  # noqa: BLE001 - as ProcessPoolExecutor: the future fails
            self._futures.pop(task_id, None)
            future.set_exception(exc)
            return None
        return _Outgoing(Task(task_id, self._results.name, self._max_attempts, body), future,
                         threading.Event() if self._bounded else None)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            pending = list(self._futures.values())
            thread = self._thread
        if cancel_futures:
            for future in pending:
                future.cancel()
        if thread is None:
            self._cleanup()
            return
        self._wake_collector()
        if wait:
            thread.join()

    def _wake_collector(self) -> None:
        """Wake the result thread now (it looks whether it is done): an empty message in its
        result queue, which it ignores. Without Redis it looks at its next slice."""
        with self._waking:  # the result thread's cleanup closes the connections after this
            with self._lock:
                if self._futures or self._cleaned:
                    return  # it ends with the last result anyway, or has ended
            try:
                self._results.put(WAKE_MESSAGE, timeout=_POLL)
            except PressureError as exc:
                logger.debug("pressure executor %r: cannot wake the result thread: %s", self._name, exc)

    # -- inspection ---------------------------------------------------------------

    def statistics(self) -> ExecutorStatistics:
        """Tasks queued, running, done, failed, retried and lost, and the workers alive."""
        k = self._keys
        client = self._backend.client()
        pipe = client.pipeline(transaction=False)
        pipe.time()
        pipe.hgetall(k.workers)
        pipe.mget(k.done, k.failed, k.retried, k.lost)
        (seconds, micros), workers, counters = self._backend.call("statistics", pipe.execute)
        now = seconds * 1000 + micros // 1000
        alive = tuple(sorted(w.decode(errors="replace") for w, ms in workers.items()
                             if now - int(ms) < ALIVE_FOR * 1000))
        done, failed, retried, lost = (int(v or 0) for v in counters)
        return ExecutorStatistics(self._tasks.qsize(), len(self._tasks.in_flight()), done, failed,
                                  retried, lost, alive)

    def workers_alive(self) -> int:
        """How many workers of this name, on any host, were heard from in the last few seconds."""
        return len(self.statistics().workers)

    # -- the result thread --------------------------------------------------------

    def _start(self, first: _Outgoing | None) -> bool:
        """On first use (lock held): the first task, sent from this thread (one round trip,
        never waiting: it is there when the workers first look, instead of waiting for the
        sender thread); then local workers if needed (started here, in the submitting thread,
        before this executor has threads of its own: forked, as ProcessPoolExecutor's, they
        start in a few ms; if Redis cannot say whether workers are alive elsewhere, the result
        thread asks again); then the result thread, then the sender thread (if either cannot
        start, the executor is broken). The task goes before the fork: sent while the workers
        just forked start up, its round trip took 6-8 ms instead of 1 on two cores, and it
        could come after their first look. Whether ``first`` went (or failed for good): if
        not, it is for the sender thread."""
        deferred = spawn = False
        if self._local_workers is not False:
            try:
                spawn = bool(self._local_workers) or not self._alive_anywhere()
            except BackendError:
                deferred = True
        sent = first is None or self._sender.send_now(first)
        try:
            if spawn:
                self._spawn_pool()
            # the result thread first: the first task's result needs it, not the sender thread
            thread = threading.Thread(target=self._collect, args=(deferred,), name=f"pressure-executor-{self._id}")
            try:
                thread.start()
                self._thread = thread  # (shutdown() cleans up itself while there is none)
                self._sender.start(self._id)
            except BaseException as exc:  # no later task would be sent, or its result read
                self._broken = f"the executor's threads could not start: {exc!r}"
                raise
        except BaseException:
            if first is not None and sent:  # it went out, and submit fails: never run it
                self._cancel_task(first.task.id)
            raise
        return sent

    def _alive_anywhere(self) -> bool:
        """Whether a worker of this name, on any host, was heard from lately (one round trip)."""
        pipe = self._backend.client().pipeline(transaction=False)
        pipe.time()
        pipe.hgetall(self._keys.workers)  # (HVALS is not in the docs' ACL rule)
        (seconds, micros), beats = self._backend.call("look for workers", pipe.execute)
        now = seconds * 1000 + micros // 1000
        return any(now - int(ms) < ALIVE_FOR * 1000 for ms in beats.values())

    def _spawn_pool(self) -> None:
        self._pool = WorkerPool(self._name, config=self._config, prefix=self._prefix,
                                processes=self._max_workers,
                                visibility_timeout=self._visibility_timeout,
                                initializer=self._initializer or no_initializer, initargs=self._initargs,
                                mp_context=self._mp_context, authkey=self._authkey or None,
                                max_tasks_per_child=self._max_tasks_per_child,
                                insecure_pickle=self._insecure_pickle,
                                _prepared=Prepared(frozenset(filter(self._backend.is_loaded, WORKER_SCRIPTS)),
                                                   self._results.name)).start()

    def _start_workers(self) -> None:
        """Local worker processes, if wanted: ``local_workers=True``, or None and no worker of
        this name is alive anywhere (asked again while Redis cannot be reached, until it can
        or nothing is pending any more)."""
        if self._local_workers is False:
            return
        if self._local_workers is None:
            complaint = Complaint(logger, f"pressure executor {self._name!r}: looking for workers")
            while True:
                try:
                    if self.workers_alive():
                        return
                    break
                except BackendError as exc:
                    complaint.failed(exc)
                    with self._lock:
                        if self._broken is not None or not self._futures:
                            return
                    time.sleep(_POLL)
        self._spawn_pool()

    def _collect(self, start_workers: bool = False) -> None:
        """Complete futures from the result queue until shut down with nothing pending
        (``start_workers``: first start local workers if needed; ``_start`` could not tell),
        replacing local workers that died or retired (``max_tasks_per_child``) at every turn.
        Each batch of results is counted in Redis before its futures complete, so
        ``statistics()`` agrees with what a caller has seen finish."""
        last_look = 0.0
        complaint = Complaint(logger, f"pressure executor {self._name!r}: reading results")
        try:
            if start_workers:
                self._start_workers()
            while True:
                raw: list[bytes] = []
                ahead: Ahead | None = None
                try:
                    raw.append(self._results.get(timeout=_POLL))
                    ahead = self._outcomes.count_ahead(raw[0])
                    # and whatever else has arrived, in one more round trip (which carries the
                    # first result's count, posted just before)
                    raw += [d.item for d in internal(self._results).receive_many(_CLAIM_BATCH)]
                except Empty:
                    pass
                except ShutDown:  # our result queue was deleted under us
                    self._break("the executor's result queue was deleted")
                    return
                except BackendError as exc:  # results wait in Redis (a lost reply: in flight)
                    complaint.failed(exc)
                    time.sleep(_POLL)
                else:
                    complaint.succeeded()
                raw = [message for message in raw if message != WAKE_MESSAGE]
                if raw:
                    self._outcomes.complete_all(raw, ahead)
                if not raw or time.monotonic() - last_look > 1.0:
                    last_look = time.monotonic()
                    try:
                        self._look_around()
                    except BackendError as exc:
                        complaint.failed(exc)
                if self._pool is not None:  # no round trip: at every turn, Redis or not
                    self._pool.check()
                with self._lock:
                    if (self._shutdown or _exiting.is_set()) and not self._futures:
                        return
        except BaseException as exc:
            _log.event(logger, logging.ERROR, "executor_broken", "pressure executor %r: the result thread "
                       "failed", self._name, exc_info=True, executor=self._name, prefix=self._prefix,
                       part="result thread")
            self._break(f"the result thread failed: {exc!r}")
        finally:
            self._cleanup(patience=self._outage_limit)

    def _look_around(self) -> None:
        """A worker's initializer failed (the executor is broken); which pending futures a
        worker has started (they become running: one round trip in all)."""
        with self._lock:
            pending = [f for f in itertools.islice(self._futures.values(), _CLAIM_BATCH)
                       if not f.running() and not f.done()]
        pipe = self._backend.client().pipeline(transaction=False)
        pipe.get(self._keys.broken)
        if pending:  # each task's mark, and its count of starts by a worker that claimed it ahead
            pipe.hmget(self._keys.claims, [field for f in pending for field in (f._task_id, f._task_id + STARTED)])
        broken, *claims = self._backend.call("look around", pipe.execute)
        if broken is not None:
            self._break(broken.decode(errors="replace"))
            return
        fields = claims[0] if claims else []
        for future, state, started in zip(pending, fields[::2], fields[1::2]):
            if state is not None and (state.startswith(b"run:") or (state.startswith(b"pre:") and started)):
                future._started()

    def _break(self, reason: str) -> None:
        """Fail every pending future with BrokenExecutor; later submits raise it. Tasks not
        sent yet never will be."""
        with self._lock:
            self._broken = reason
            pending = list(self._futures.values())
            self._futures.clear()
        self._sender.cancel_all()
        for future in pending:
            try:
                future.set_exception(BrokenExecutor(reason))
            except concurrent.futures.InvalidStateError:
                pass

    def _cancel_task(self, task_id: str) -> bool | None:
        """Cancel a task no worker has started: True if cancelled, False if a worker has started
        it, None if it cannot be (it is being sent or has finished, or Redis cannot be reached).
        A task not sent yet is simply not sent."""
        if self._sender.cancel_unsent(task_id):
            return True
        try:
            answer = CANCEL.call(self._backend, CANCEL.keys(self._keys), (task_id, self._tasks.keys.inflight_prefix))
        except PressureError as exc:
            _log.event(logger, logging.WARNING, "cancel_failed", "pressure executor %r: cannot cancel task %s: "
                       "%s", self._name, task_id, exc, executor=self._name, prefix=self._prefix, task=task_id,
                       error=str(exc))
            return None
        if answer != CancelStatus.CANCELLED:
            return None if answer == CancelStatus.NOT_MARKED else False
        self._sender.forget(task_id)
        self._futures.pop(task_id, None)
        return True

    def _cleanup(self, patience: float = 0.0) -> None:
        """After the last result: stop local workers; remove the result queue, and an anonymous
        executor's task queue and keys (trying again for ``patience`` seconds while Redis
        cannot be reached; then the keys are left, with a warning). Once."""
        with self._lock:
            if self._cleaned:
                return
            self._cleaned = True
        self._sender.wake()  # the sender ends
        if self._pool is not None:
            self._pool.stop()
            self._pool = None
        steps = [self._results.delete]
        if self._anonymous:
            steps += [self._tasks.delete, lambda: self._backend.call(
                "delete the executor's keys", self._backend.client().delete, *self._keys.all_keys(),
                mutating=True)]
        complaint = Complaint(logger, f"pressure executor {self._name!r}: cleaning up")
        while steps:
            try:
                steps[0]()
            except ShutDown:
                pass  # deleted already
            except PressureError as exc:
                complaint.failed(exc)
                if complaint.failing_for >= patience:
                    _log.event(logger, logging.WARNING, "keys_left", "pressure executor %r: its keys are left "
                               "in Redis", self._name, executor=self._name)
                    break
                time.sleep(_POLL)
                continue
            steps.pop(0)
        with self._waking:  # a wake-up being sent from another thread finishes first
            self._results.disconnect()
            self._tasks.disconnect()
            self._backend.disconnect()

    def _release(self) -> None:
        """The Executor was collected without shutdown(): finish what is pending, then clean up.
        Not in a forked child ending (at exit): the executor is its parent's."""
        if os.getpid() == self._pid:
            self.shutdown(wait=False)

"""The sender of a ``pressure.Executor`` (pressure/executor/__init__.py has the data-flow
diagram): submitted tasks wait in its outbox, in order, and its thread puts them into the
task queue, as many per round trip as are waiting, riding out Redis outages.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from .. import _log
from .._internal import internal
from .._scripts import SUBMIT, PutStatus
from ..keys import ExecutorKeys
from ..errors import (AuthenticationError, BackendError, OutcomeUnknown, PermissionDenied, PressureError,
                     QueueDoesNotExist, ShutDown)
from ..outage import Complaint
from ..queue import Queue
from .worker import Task

if TYPE_CHECKING:
    from ._core import _TaskFuture

logger = _log.EXECUTOR

#: The most results read, or tasks sent, in one round trip.
_CLAIM_BATCH = 256
#: The first and the longest wait between two tries to reach Redis while it is down.
_BACKOFF_FIRST, _BACKOFF_LONGEST = 0.05, 1.0

#: Errors that no retry can mend: the sender gives up on waiting tasks at once.
_REFUSED = (AuthenticationError, PermissionDenied)


@dataclass(eq=False)
class _Outgoing:
    """A submitted task on its way to the task queue (the sender thread puts it)."""

    task: Task
    future: _TaskFuture
    #: Set once the task is sent, or its future failed (a bounded submit waits for it).
    sent: threading.Event | None
    #: A put of it failed after it was sent: it may be in Redis already.
    maybe_sent: bool = False
    #: Cancelled before it was sent: the sender drops it.
    cancelled: bool = False


class _Sender:
    """An executor's outbox and the thread that empties it. It borrows from the executor's
    core: its ``name`` (for messages), its task queue ``tasks``, its ``keys`` (the task queue's
    for errors, the claims hash that submit.lua marks), the pending ``futures`` by task id
    (a task that cannot be sent leaves them), ``outage_limit``, ``cleaned`` (whether the core
    is cleaned up: then the thread ends) and ``broken`` (called with a reason if the thread
    fails). The outbox is touched only under ``_ready``.

    A task taken off the outbox is *being sent* (``_sending``) until the round trip that
    marks and puts it has run: a ``cancel()`` can then neither drop it here nor find it in
    Redis, so it waits for that round trip (``cancel_unsent``)."""

    def __init__(self, name: str, tasks: Queue[Task], keys: ExecutorKeys,
                 futures: dict[str, _TaskFuture], outage_limit: float, cleaned: Callable[[], bool],
                 broken: Callable[[str], None]) -> None:
        self._name = name
        self._tasks = tasks
        self._keys = keys
        self._futures = futures
        self._outage_limit = outage_limit
        self._cleaned = cleaned
        self._broken = broken
        # submitted tasks not sent yet, in order; by id, those not being sent right now
        self._outbox: collections.deque[_Outgoing] = collections.deque()
        self._unsent: dict[str, _Outgoing] = {}
        # ids of the tasks in the round trip being made; ``_marked`` tells when it has run
        self._sending: set[str] = set()
        lock = threading.RLock()
        self._ready = threading.Condition(lock)
        self._marked = threading.Condition(lock)
        self._thread: threading.Thread | None = None

    def start(self, executor_id: str) -> None:
        """Start the sender thread."""
        self._thread = threading.Thread(target=self._send, name=f"pressure-submit-{executor_id}",
                                        daemon=True)
        self._thread.start()

    def enqueue(self, entry: _Outgoing) -> None:
        """A submitted task, to send after those waiting."""
        with self._ready:
            self._outbox.append(entry)
            self._unsent[entry.task.id] = entry
            self._ready.notify()

    def withdraw(self, entry: _Outgoing) -> None:
        """A bounded submit was interrupted while waiting for room: the task is not sent,
        unless it is being sent right now."""
        with self._ready:
            if self._unsent.pop(entry.task.id, None) is entry:
                entry.cancelled = True

    def cancel_all(self) -> None:
        """The executor is broken: no waiting task is sent, no bounded submit waits."""
        with self._ready:
            for entry in self._outbox:
                entry.cancelled = True
                if entry.sent is not None:
                    entry.sent.set()
            self._unsent.clear()

    def cancel_unsent(self, task_id: str) -> bool:
        """Cancel a task not sent yet (nor maybe sent): True if done. A task being sent is
        waited for first (one round trip): then it is marked in Redis, for the caller to
        cancel there, or back in the outbox (Redis failed), cancelled here. Never waits in
        the sender thread itself (a future's callback): that would wait for itself."""
        with self._ready:
            if threading.current_thread() is not self._thread:
                while task_id in self._sending:
                    self._marked.wait()
            entry = self._unsent.get(task_id)
            if entry is not None and not entry.maybe_sent:
                del self._unsent[task_id]
                entry.cancelled = True
                if entry.sent is not None:
                    entry.sent.set()  # a bounded submit waiting for it returns
                self._futures.pop(task_id, None)
                return True
        return False

    def forget(self, task_id: str) -> None:
        """A task cancelled in Redis: if its put's outcome was unknown, no need to send it again."""
        with self._ready:
            entry = self._unsent.pop(task_id, None)
            if entry is not None:
                entry.cancelled = True

    def send_now(self, entry: _Outgoing) -> bool:
        """Send one task from the submitting thread, before the sender thread exists (the
        first task, just before the local workers are forked): it is in Redis when they first
        look (it used to wait for the sender thread, started last). Never waits for room or
        for Redis: False if the task is for the sender thread after all (Redis unreachable,
        the queue full or busy, closed or gone: it retries and reports); True if it went in,
        or failed for good (its future says so)."""
        link = internal(self._tasks)
        try:
            payload = link.payload(entry.task)
        except PressureError as exc:  # ItemTooLarge, SerializationError
            self._fail(entry, exc)
            return True
        [(put, _)] = link.put_many_calls([entry.task], [payload])
        try:
            # on the connection the executor's constructor opened: this thread sends only this
            # (later tasks go from the sender thread), so a connection of its own would cost a
            # connect and a handshake while the workers start up
            marked, reply = link.pipeline([(SUBMIT.command(self._keys, more=1), [entry.task.id]), put],
                                          pooled=True)
        except OutcomeUnknown:
            entry.maybe_sent = True
            return False
        except PressureError:
            return False
        if isinstance(marked, redis.RedisError) or isinstance(reply, redis.RedisError):
            error: Any = marked if isinstance(marked, redis.RedisError) else reply
            try:
                link.raise_error(error, "script put (a task)")
            except PressureError as exc:
                self._fail(entry, exc)
            return True
        if not isinstance(reply, int) or reply < 0:
            return False
        if entry.sent is not None:
            entry.sent.set()
        return True

    def wake(self) -> None:
        """The core is cleaned up: the thread ends."""
        with self._ready:
            self._ready.notify_all()

    def _send(self) -> None:
        """The sender thread (see _send_all); if it fails, the executor is broken."""
        try:
            self._send_all()
        except BaseException as exc:
            _log.event(logger, logging.ERROR, "executor_broken", "pressure executor %r: the sender thread "
                       "failed", self._name, exc_info=True, executor=self._name, part="sender thread")
            self._broken(f"the sender thread failed: {exc!r}")

    def _send_all(self) -> None:
        """Put submitted tasks into the task queue, as many per round trip as are waiting,
        in submission order, until the executor is cleaned up. While Redis cannot be
        reached, they wait and are sent again (backing off up to a second), for
        OUTAGE_LIMIT seconds at most."""
        complaint = Complaint(logger, f"pressure executor {self._name!r}: sending tasks")
        backoff = _BACKOFF_FIRST
        while True:
            with self._ready:
                while not self._outbox and not self._cleaned():
                    self._ready.wait()
                if self._cleaned():
                    for entry in self._outbox:
                        if entry.sent is not None:
                            entry.sent.set()
                    return
                batch: list[_Outgoing] = []
                while self._outbox and len(batch) < _CLAIM_BATCH:
                    entry = self._outbox.popleft()
                    self._unsent.pop(entry.task.id, None)
                    if not entry.cancelled:
                        batch.append(entry)
                        self._sending.add(entry.task.id)
            if not batch:
                continue
            try:
                rest, error = self._send_batch(batch)
            except BaseException:
                self._sent()
                raise
            del batch, entry  # no reference to a future outlives its sending (as_completed frees them)
            if error is None:
                complaint.succeeded()
                backoff = _BACKOFF_FIRST
                continue
            complaint.failed(error)
            with self._ready:
                self._sent()  # (it holds the lock until those to send again are back in the outbox)
                # refused for good (a password, an ACL): no outage to ride out
                if complaint.failing_for > self._outage_limit or isinstance(error, _REFUSED):  # give up
                    rest += self._outbox
                    self._outbox.clear()
                    self._unsent.clear()
                else:  # back to the front, in order; wait a little (longer each time)
                    self._outbox.extendleft(reversed(rest))
                    self._unsent.update((entry.task.id, entry) for entry in rest)
                    rest = []
                    deadline = time.monotonic() + backoff
                    while not self._cleaned() and time.monotonic() < deadline:
                        self._ready.wait(deadline - time.monotonic())
            for failed in rest:
                self._fail(failed, self._outage_error(failed, error))
            del rest
            backoff = min(backoff * 2, _BACKOFF_LONGEST)

    def _outage_error(self, entry: _Outgoing, error: PressureError) -> BackendError:
        """Why a task was given up on after OUTAGE_LIMIT seconds of outage: BackendError,
        or OutcomeUnknown if a put of it may have run (then it may run yet); a refusal for
        good (AuthenticationError, PermissionDenied) as it is."""
        if isinstance(error, _REFUSED):
            return error
        text = (f"pressure executor {self._name!r}: Redis could not be reached for "
                f"{self._outage_limit:g} s, the task was not sent ({error})")
        failure = OutcomeUnknown(text + "; an earlier try may have queued it") if entry.maybe_sent \
            else BackendError(text)
        failure.__cause__ = error
        return failure

    def _send_batch(self, batch: list[_Outgoing]) -> tuple[list[_Outgoing], PressureError | None]:
        """Mark and put tasks: one round trip, one put.lua call for all of them (more only if
        they are too large for one command); the patient way, one by one, those that find
        the queue full. Returns the tasks left to send again and why: Redis failed (their
        puts may have run if the error is OutcomeUnknown: ``maybe_sent``)."""
        tasks = self._tasks
        link = internal(tasks)
        payloads: list[bytes] = []
        for entry in list(batch):
            try:
                payloads.append(link.payload(entry.task))
            except PressureError as exc:  # ItemTooLarge, SerializationError: this task alone fails
                batch.remove(entry)
                self._fail(entry, exc)
        if not batch:
            self._sent()
            return [], None
        ids: list[bytes | str] = [entry.task.id for entry in batch]
        puts = link.put_many_calls([entry.task for entry in batch], payloads)
        del payloads
        calls = [(SUBMIT.command(self._keys, more=len(ids)), ids), *(call for call, _ in puts)]
        try:
            marked, *replies = link.pipeline(calls)
        except OutcomeUnknown as exc:
            for entry in batch:
                entry.maybe_sent = True
            return batch, exc
        except BackendError as exc:
            return batch, exc
        self._sent()  # marked in Redis: a cancel() finds them there (even in a patient put below)
        # each task's outcome: None (it went in), put.lua's status, or the error reply
        outcomes: list[Any] = []
        for (_, count), reply in zip(puts, replies):
            went, stop = link.put_outcome(marked if isinstance(marked, redis.RedisError) else reply, count)
            outcomes += [None] * went + [stop] * (count - went)
        for entry, outcome in zip(batch, outcomes):
            if outcome is None and entry.sent is not None:
                entry.sent.set()
        for i, (entry, outcome) in enumerate(zip(batch, outcomes)):
            if outcome is None:
                continue
            if isinstance(outcome, int) and outcome in (PutStatus.FULL, PutStatus.BUSY):
                try:  # full, or a plain spec client mid-put: the patient way
                    tasks.put(entry.task)
                    outcome = None
                except OutcomeUnknown as exc:
                    entry.maybe_sent = True
                    return self._unsent_from(batch, outcomes, i), exc
                except BackendError as exc:
                    return self._unsent_from(batch, outcomes, i), exc
                except PressureError as exc:
                    outcome = exc
            if outcome is None:
                if entry.sent is not None:
                    entry.sent.set()
                continue
            if isinstance(outcome, redis.RedisError):
                try:
                    link.raise_error(outcome, "script put (a task)")
                except PressureError as exc:
                    outcome = exc
            elif isinstance(outcome, int):
                outcome = QueueDoesNotExist(f"the task queue {self._keys.tasks!r} is gone") \
                    if outcome == PutStatus.NO_QUEUE else ShutDown(f"the task queue {self._keys.tasks!r} is shut down")
            self._fail(entry, outcome)
        return [], None

    def _sent(self) -> None:
        """The round trip that marks the tasks being sent has run, or failed (then, with the
        lock held, they go back to the outbox, or fail): a cancel() waiting for it goes on."""
        with self._ready:
            self._sending.clear()
            self._marked.notify_all()

    @staticmethod
    def _unsent_from(batch: list[_Outgoing], outcomes: list[Any], i: int) -> list[_Outgoing]:
        """The tasks from ``batch[i]`` on that did not go in (to send again, in order)."""
        return [entry for entry, outcome in zip(batch[i:], outcomes[i:]) if outcome is not None]

    def _fail(self, entry: _Outgoing, error: BaseException) -> None:
        """A task could not be sent: its future fails with ``error``."""
        self._futures.pop(entry.task.id, None)
        try:
            entry.future.set_exception(error)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled meanwhile
        if entry.sent is not None:
            entry.sent.set()

"""Outcomes of tasks: how a worker pickles one (``outcome``) and the executor unpickles it
(``unpack_outcome``), and how an executor completes its futures from the results its workers
send: each result is counted in Redis (``:executor:stats:done`` or ``failed``) before its
future completes, so that ``statistics()`` agrees with what a caller has seen finish; a reply
a worker sent twice (a task run again after its worker was lost) counts once, since only a
pending future's counts."""

from __future__ import annotations

import concurrent.futures
import logging
import pickle
import re
import traceback
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis

from .. import _log
from .._wire import LOST
from ..connection import Backend, pack_command
from ..errors import BackendError, BrokenExecutor
from ..keys import ExecutorKeys

__all__ = ["WAKE_MESSAGE", "Ahead", "ExceptionNotPickled", "Outcomes", "ResultNotPickled", "outcome", "unpack_outcome"]

logger = _log.EXECUTOR

#: What shutdown() puts in the result queue to wake the result thread (a result is never
#: empty: it starts with its task's id).
WAKE_MESSAGE = b""


class _RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker, shown as the ``__cause__``
    of the exception re-raised in the caller (as ProcessPoolExecutor shows it)."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


class _NotPickled(Exception):
    """What a worker could not pickle: the pickling error's and the object's ``repr`` kept
    (``exc``, ``value``), for ``multiprocessing.pool.MaybeEncodingError`` (pressure.pool)."""

    def __init__(self, message: str, exc: str = "", value: str = "") -> None:
        super().__init__(message, exc, value)
        self.exc, self.value = exc, value

    def __str__(self) -> str:
        return str(self.args[0])


class ResultNotPickled(_NotPickled, pickle.PicklingError):
    """A task's result could not be pickled."""


class ExceptionNotPickled(_NotPickled, RuntimeError):
    """The exception a task raised could not be pickled (its type, text and traceback are in
    the message and the remote traceback)."""


def _shown(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails too
        return f"<{type(value).__name__} object>"


def outcome(ok: bool, value: Any) -> tuple[bool, bytes]:
    """Pickle a task's outcome: ``(succeeded, data)``. An exception keeps its traceback
    text. What cannot be pickled becomes an exception saying so: it fails that task, never
    the worker."""
    if not ok:
        text = "".join(traceback.format_exception(type(value), value, value.__traceback__))
        value.__traceback__ = None
        try:
            return False, pickle.dumps((False, value, text), pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - any pickling failure
            if isinstance(value, BrokenExecutor) and value.__cause__ is not None:
                value.__cause__ = None  # its cause could not be pickled: the text shows it
                return outcome(False, value)
            substitute = ExceptionNotPickled(f"the task raised {type(value).__name__}: {value!s}, "
                                             f"which could not be pickled ({exc!r})", repr(exc), _shown(value))
            return False, pickle.dumps((False, substitute, text), pickle.HIGHEST_PROTOCOL)
    try:
        return True, pickle.dumps((True, value, ""), pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        problem = ResultNotPickled(f"the task's result could not be pickled: {exc!r}", repr(exc), _shown(value))
        return False, pickle.dumps((False, problem, text), pickle.HIGHEST_PROTOCOL)


def unpack_outcome(data: bytes) -> tuple[bool, Any]:
    """The result, or the exception with its remote traceback as ``__cause__``."""
    ok, value, text = pickle.loads(data)
    if not ok and isinstance(value, BaseException) and text:
        last = value
        while last.__cause__ is not None:  # a BrokenExecutor's cause, pickled with it
            last = last.__cause__
        last.__cause__ = _RemoteTraceback(f'\n"""\n{text}"""')
    return ok, value


def _parse_result(message: bytes) -> tuple[str, bool, Any]:
    """A result message's task id, whether the task succeeded, and its result or exception."""
    task_id, _, data = message.partition(b"\n")
    try:
        ok, value = unpack_outcome(data)
    except Exception as exc:  # noqa: BLE001 - e.g. the result's class is not importable here
        ok, value = False, BrokenExecutor(f"the result of task {task_id.decode()} could not be "
                                          f"unpickled: {exc!r}")
        value.__cause__ = exc
    return task_id.decode(), ok, value


@dataclass(slots=True)
class Ahead:
    """A result whose count was posted ahead of the read of the results behind it."""

    task_id: str
    ok: bool
    value: Any
    #: whether the count ran (or may have: ``lost``): None until its reply is read; False if
    #: it was refused (an error reply: it did not run)
    counted: bool | None = None
    lost: bool = False


_F = TypeVar("_F", bound=Future[Any])


class Outcomes(Generic[_F]):
    """The result thread's counting and completing of ``futures`` (pending, by task id: the
    executor's own dict), on ``backend``, for the executor ``name`` (``prefix``, for the log)."""

    def __init__(self, backend: Backend, keys: ExecutorKeys, futures: dict[str, _F], name: str,
                 prefix: str) -> None:
        self._backend = backend
        self._keys = keys
        self._futures = futures
        self._name = name
        self._prefix = prefix

    def count_ahead(self, message: bytes) -> Ahead | None:
        """Post the count of the result just read (INCRBY done or failed, no round trip of its
        own: it goes with the next command of the result thread, the read of the results
        behind it, whose reply comes after the count's), if it is a pending future's. A lone
        result is then counted and completed one round trip after it is read, not two."""
        if message == WAKE_MESSAGE:
            return None
        ahead = Ahead(*_parse_result(message))
        if ahead.task_id not in self._futures:
            return None
        counter = self._keys.done if ahead.ok else self._keys.failed

        def check(reply: Any) -> None:
            ahead.counted = reply is LOST or not isinstance(reply, redis.RedisError)
            ahead.lost = reply is LOST  # it may or may not have run

        self._backend.post(pack_command("INCRBY", counter, 1), check)
        return ahead

    def complete_all(self, messages: list[bytes], ahead: Ahead | None = None) -> None:
        """Count the outcomes of pending futures (one round trip: a reply a worker sent twice
        counts once; ``ahead``, the first message's, posted already by count_ahead), then
        complete the futures. The tasks' claims are the workers' to remove (settle.lua), when
        the tasks leave the queue."""
        outcomes: list[tuple[str, bool, Any]] = []
        for i, message in enumerate(messages):
            if i == 0 and ahead is not None:
                outcomes.append((ahead.task_id, ahead.ok, ahead.value))  # parsed already
            else:
                outcomes.append(_parse_result(message))
        fresh = {task_id: ok for task_id, ok, _ in outcomes if task_id in self._futures}
        if ahead is not None and ahead.task_id in fresh:
            if ahead.counted is None:
                self._backend.flush()  # its reply is not read yet (the read behind it failed)
            if ahead.counted:  # counted on its own (else refused, so not run: counted below)
                del fresh[ahead.task_id]
            if ahead.lost:
                _log.event(logger, logging.WARNING, "count_failed", "pressure executor %r: counting results "
                           "failed: the connection was lost with the reply", self._name, executor=self._name,
                           prefix=self._prefix, error="reply lost")
        done = sum(fresh.values())
        pipe = self._backend.client().pipeline(transaction=False)
        if done:
            pipe.incrby(self._keys.done, done)
        if len(fresh) > done:
            pipe.incrby(self._keys.failed, len(fresh) - done)
        try:
            if fresh:
                self._backend.call("count results", pipe.execute, mutating=True)
        except BackendError as exc:  # the results are ours all the same: complete the futures
            _log.event(logger, logging.WARNING, "count_failed", "pressure executor %r: counting results "
                       "failed: %s", self._name, exc, executor=self._name, prefix=self._prefix, error=str(exc))
        for tid, ok, value in outcomes:
            future = self._futures.pop(tid, None)
            if future is None:
                continue
            try:
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
            except concurrent.futures.InvalidStateError:
                pass  # cancelled meanwhile


#: pickle's error for a name it cannot find in a module: ``Can't get attribute 'cube' on
#: <module 'pressure.__main__' from ...>`` (3.12 and later: ``Can't get attribute ... on
#: <module '__main__' ...>``)
_NOT_IN_MAIN = re.compile(r"Can't get attribute '[^']*' on <module '(?:[\w.]*\.)?__(?:mp_)?main__'")


def unpickling_hint(exc: BaseException) -> str:
    """What to do about a task that could not be unpickled, where the cause is known: a
    function or class defined in the submitting program's ``__main__`` (a script), which
    pickle names as ``__main__.<name>``: the workers look in their own ``__main__`` (the
    ``python -m pressure worker`` program, or another script) and do not find it."""
    if isinstance(exc, AttributeError) and _NOT_IN_MAIN.search(str(exc)):
        return (" (it is defined in the submitting program's __main__, a script, which the workers do "
                "not have: define it in a module the workers can import, or submit with "
                "Executor(..., serializer=\"cloudpickle\"), which sends it by value)")
    return ""

"""The pool's result-handler thread, as multiprocessing.pool's: every task's future, as it
completes (in the executor's result thread, which must never wait on a user's callback), is
queued here; this one thread sets the results and calls their callbacks, one at a time, in
the order the outcomes arrived. It ends after ``close()`` once no result is outstanding and no
imap is still feeding, or at ``terminate()`` (then results are set without callbacks)."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from concurrent.futures import Future
from typing import Any

import multiprocessing.pool

from ..executor._outcomes import _NotPickled, _RemoteTraceback
from ._results import Outcome

__all__ = ["ResultHandler"]

#: multiprocessing.pool's exceptions (not in its type stubs)
MaybeEncodingError: Any = multiprocessing.pool.__dict__["MaybeEncodingError"]
RemoteTraceback: Any = multiprocessing.pool.__dict__["RemoteTraceback"]


def outcome(future: Future[Any]) -> Outcome:
    """(True, value) or (False, exception): a completed future as multiprocessing's pool
    reports a task: a worker's traceback is a ``multiprocessing.pool.RemoteTraceback`` (the
    exception's ``__cause__``), a result or exception that could not be pickled a
    ``MaybeEncodingError``."""
    if future.cancelled():
        return False, concurrent.futures.CancelledError()
    exc = future.exception()
    if exc is None:
        return True, future.result()
    if isinstance(exc, _NotPickled):  # a result or an exception the worker could not send
        wrapped = MaybeEncodingError.__new__(MaybeEncodingError)
        Exception.__init__(wrapped, exc.exc, exc.value)
        wrapped.exc, wrapped.value = exc.exc, exc.value  # the reprs, as the stdlib keeps them
        wrapped.__cause__ = exc.__cause__
        exc = wrapped
    last = exc
    while last.__cause__ is not None and type(last.__cause__) is not _RemoteTraceback:
        last = last.__cause__
    if type(last.__cause__) is _RemoteTraceback:
        last.__cause__ = RemoteTraceback(last.__cause__.tb)
    return False, exc


class ResultHandler:
    """The thread, its queue of completed futures and the outstanding results (``cache``)."""

    def __init__(self, name: str) -> None:
        self.cache: dict[int, Any] = {}
        self._queue: queue.SimpleQueue[tuple[Any, int, Future[Any]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._feeding = 0
        self._closing = False
        self._terminating = False
        self.thread = threading.Thread(target=self._run, name=f"pressure-pool-results-{name}", daemon=True)
        self.thread.start()

    def deliver(self, result: Any, index: int, future: Future[Any]) -> None:
        """Route ``future``, once done, to ``result._set(index, ...)`` in the handler thread."""
        future.add_done_callback(lambda f: self._queue.put((result, index, f)))

    def feeding(self, delta: int) -> None:
        """An imap started (+1) or finished (-1) submitting its tasks."""
        with self._lock:
            self._feeding += delta
        if delta < 0:
            self._queue.put(None)  # it may have been the last thing the thread waited for

    def close(self) -> None:
        """End once nothing is outstanding."""
        self._closing = True
        self._queue.put(None)

    def terminate(self) -> None:
        """End now: what is queued is set without callbacks."""
        self._terminating = True
        self._closing = True
        self._queue.put(None)

    def _done(self) -> bool:
        with self._lock:
            return self._closing and not self.cache and not self._feeding

    def _run(self) -> None:
        while True:
            if self._terminating:
                while True:  # set whatever has come, callbacks left out: nobody waits for them
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        return
                    if item is not None:
                        result, index, future = item
                        result._set(index, outcome(future), callbacks=False)
            if self._done():
                return
            item = self._queue.get()
            if item is not None:
                result, index, future = item
                result._set(index, outcome(future), callbacks=not self._terminating)
                del result, future, item

"""The feeder of an ``imap``/``imap_unordered``: one thread per call that takes tasks from a
read-ahead (pressure/executor/_feeding.py, shared with ``Executor.map``) and submits them, so
the call returns at once and the input is read only as far ahead as its results are taken
(``buffersize``; multiprocessing before 3.14 reads all of it first, gh-84291). An exception
of the input iterable becomes the result after the last one read, as multiprocessing's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..executor._feeding import DONE, ReadAhead
from ._handler import ResultHandler
from ._results import IMapIterator

__all__ = ["DEFAULT_BUFFERSIZE", "Feeder", "limit"]


def DEFAULT_BUFFERSIZE(processes: int) -> int:  # noqa: N802 - read as a constant of the pool size
    """The read-ahead beyond ``processes`` tasks when ``buffersize`` is None: eight tasks per
    process, at least 256 (workers on other hosts also take from the queue, and each takes
    up to 16 short tasks at a time: a smaller window leaves them waiting, about half the
    throughput of short tasks at 32)."""
    return max(8 * processes, 256)


def limit(processes: int, buffersize: int | None) -> int:
    """Tasks submitted and not yet taken by the caller, at most (as 3.14's semaphore of
    ``processes + buffersize``)."""
    return processes + (DEFAULT_BUFFERSIZE(processes) if buffersize is None else buffersize)


class Feeder:
    """Submits ``fn(*args)`` for each ``args`` the read-ahead gives, as task ``i`` of ``result``."""

    def __init__(self, ahead: ReadAhead[tuple[Any, ...]], submit: Callable[..., Future[Any]],
                 fn: Callable[..., Any], result: IMapIterator, handler: ResultHandler,
                 bounded_by_default: bool) -> None:
        self.ahead = ahead
        #: whether close() lifts the bound: the default read-ahead (the stdlib reads all the input
        #: before join() returns); a buffersize given stays (as 3.14's)
        self.bounded_by_default = bounded_by_default
        self._submit, self._fn, self._result, self._handler = submit, fn, result, handler
        handler.feeding(+1)
        self.thread = threading.Thread(target=self._run, name="pressure-pool-feeder", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = -1
        try:
            while True:
                try:
                    args = self.ahead.take()
                except Exception as exc:  # noqa: BLE001 - the input failed: its own result
                    i += 1
                    self._result._set(i, (False, exc))
                    break
                if args is DONE:
                    break
                i += 1
                try:
                    future = self._submit(self._fn, *args)  # type: ignore[misc]
                except Exception as exc:  # noqa: BLE001 - the pool was terminated meanwhile
                    self._result._set(i, (False, exc))
                    break
                self._handler.deliver(self._result, i, future)
                del future, args
            self._result._set_length(i + 1)
        finally:
            self._handler.feeding(-1)

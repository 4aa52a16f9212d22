"""Bounded read-ahead, shared by ``Executor.map(buffersize=)`` and the Pool's ``imap`` family:
at most ``limit`` items of a source taken and not yet handed back (``release``), so that an
endless iterable is read only as fast as its results are consumed (CPython gh-64192)."""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, Final, Generic, TypeVar

__all__ = ["DONE", "FULL", "ReadAhead", "check_buffersize", "map_ahead"]

T = TypeVar("T")

#: ``ReadAhead.take`` without waiting: ``limit`` items are out.
FULL: Final = object()
#: ``ReadAhead.take``: the source is exhausted, or the read-ahead was stopped.
DONE: Final = object()


def check_buffersize(buffersize: int | None) -> None:
    """Python 3.14's checks of ``buffersize`` (``Executor.map``, ``Pool.imap``), messages and all."""
    if buffersize is not None and (isinstance(buffersize, bool) or not isinstance(buffersize, int)):
        raise TypeError("buffersize must be an integer or None")
    if buffersize is not None and buffersize < 1:
        raise ValueError("buffersize must be None or > 0")


class ReadAhead(Generic[T]):
    """Items of ``source``, at most ``limit`` of them out at a time (None: no limit). One
    thread takes (the source is read outside the lock: a slow generator never holds up
    ``release``); any thread releases, unbinds or stops."""

    def __init__(self, source: Iterator[T], limit: int | None) -> None:
        self._source = source
        self._limit = limit
        self._out = 0
        self._stopped = False
        self._cond = threading.Condition(threading.Lock())

    def take(self, block: bool = True) -> T | object:
        """The next item; ``FULL`` (only if not ``block``) while ``limit`` are out; ``DONE`` once
        the source is exhausted or ``stop()`` was called. An exception of the source propagates."""
        with self._cond:
            while self._limit is not None and self._out >= self._limit and not self._stopped:
                if not block:
                    return FULL
                self._cond.wait()
            if self._stopped:
                return DONE
            self._out += 1
        try:
            return next(self._source)
        except StopIteration:
            self.stop()
            return DONE

    def release(self) -> None:
        """One item's result was handed over: room for another."""
        with self._cond:
            self._out -= 1
            self._cond.notify()

    def unbind(self) -> None:
        """No limit any more: the rest of the source is read as fast as it can be."""
        with self._cond:
            self._limit = None
            self._cond.notify_all()

    def stop(self) -> None:
        """Take nothing more: ``take`` returns ``DONE`` (a waiting one too)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()


def _result_or_cancel(future: Future[T], timeout: float | None = None) -> T:
    try:
        try:
            return future.result(timeout)
        finally:
            future.cancel()
    finally:
        del future


def map_ahead(executor: concurrent.futures.Executor, fn: Callable[..., T], rows: Iterator[tuple[Any, ...]],
              timeout: float | None, buffersize: int | None) -> Iterator[T]:
    """``concurrent.futures.Executor.map`` of Python 3.14 (checked ``buffersize``): every row
    submitted now, or with ``buffersize`` that many, and one more as each result is yielded
    (while the executor is alive: the iterator holds it by a weak reference, as 3.14's); the
    futures not yielded are cancelled when the iterator is closed or fails."""
    end_time = None if timeout is None else timeout + time.monotonic()
    ahead: ReadAhead[tuple[Any, ...]] = ReadAhead(rows, buffersize)
    fs: collections.deque[Future[T]] = collections.deque()
    executor_ref = weakref.ref(executor)

    def fill(submitter: concurrent.futures.Executor | None) -> None:
        while submitter is not None and (args := ahead.take(block=False)) is not FULL and args is not DONE:
            fs.append(submitter.submit(fn, *args))  # type: ignore[misc]

    fill(executor)
    del executor

    def result_iterator() -> Iterator[T]:
        try:
            while fs:
                ahead.release()  # the oldest is about to be yielded: its successor goes first
                fill(executor_ref())
                if end_time is None:
                    yield _result_or_cancel(fs.popleft())
                else:
                    yield _result_or_cancel(fs.popleft(), end_time - time.monotonic())
        finally:
            for future in fs:
                future.cancel()

    return result_iterator()

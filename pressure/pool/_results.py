"""What ``Pool``'s methods return, as multiprocessing.pool's: ``ApplyResult`` (alias
``AsyncResult``), ``MapResult``, ``IMapIterator`` and ``IMapUnorderedIterator``. Each is set
by the pool's one result-handler thread (pressure/pool/_handler.py), which also calls the
callbacks, one at a time; an imap iterator hands each taken result back to its read-ahead
(pressure/executor/_feeding.py)."""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import types
from collections.abc import Callable
from multiprocessing import TimeoutError
from typing import Any, ClassVar

from ..executor._feeding import ReadAhead

__all__ = ["ApplyResult", "AsyncResult", "IMapIterator", "IMapUnorderedIterator", "MapResult"]

logger = logging.getLogger("pressure.pool")

job_counter = itertools.count()

#: A task's outcome: (True, value) or (False, exception), as multiprocessing.pool's.
Outcome = tuple[bool, Any]


def _call(callback: Callable[[Any], Any], value: Any) -> None:
    """A user's callback; if it raises, the traceback is logged and the result is still set
    (multiprocessing's result-handler thread dies then, and the pool hangs)."""
    try:
        callback(value)
    except Exception:  # noqa: BLE001 - the pool goes on
        logger.exception("pressure pool: a callback raised")


class ApplyResult:
    """The result of ``Pool.apply_async``: ``get``, ``wait``, ``ready``, ``successful``."""

    def __init__(self, cache: dict[int, Any], callback: Callable[[Any], Any] | None,
                 error_callback: Callable[[BaseException], Any] | None) -> None:
        self._event = threading.Event()
        self._job = next(job_counter)
        self._cache = cache
        self._callback = callback
        self._error_callback = error_callback
        self._success = False
        self._value: Any = None
        cache[self._job] = self

    def ready(self) -> bool:
        return self._event.is_set()

    def successful(self) -> bool:
        if not self.ready():
            raise ValueError(f"{self!r} not ready")
        return self._success

    def wait(self, timeout: float | None = None) -> None:
        self._event.wait(timeout)

    def get(self, timeout: float | None = None) -> Any:
        self.wait(timeout)
        if not self.ready():
            raise TimeoutError
        if self._success:
            return self._value
        raise self._value

    def _set(self, i: int, obj: Outcome, callbacks: bool = True) -> None:
        self._success, self._value = obj
        if callbacks and self._callback and self._success:
            _call(self._callback, self._value)
        if callbacks and self._error_callback and not self._success:
            _call(self._error_callback, self._value)
        self._event.set()
        self._cache.pop(self._job, None)

    __class_getitem__: ClassVar[Any] = classmethod(types.GenericAlias)


AsyncResult = ApplyResult


class MapResult(ApplyResult):
    """The result of ``Pool.map_async``/``starmap_async``: a list, or the first error of any
    chunk (the result is ready once every chunk has finished)."""

    def __init__(self, cache: dict[int, Any], chunksize: int, length: int,
                 callback: Callable[[Any], Any] | None,
                 error_callback: Callable[[BaseException], Any] | None) -> None:
        super().__init__(cache, callback, error_callback)
        self._success = True
        self._value = [None] * length
        self._chunksize = chunksize
        if chunksize <= 0:
            self._number_left = 0
            self._event.set()
            del self._cache[self._job]
        else:
            self._number_left = length // chunksize + bool(length % chunksize)

    def _set(self, i: int, obj: Outcome, callbacks: bool = True) -> None:
        self._number_left -= 1
        success, result = obj
        if success and self._success:
            self._value[i * self._chunksize:(i + 1) * self._chunksize] = result
            if self._number_left == 0:
                if callbacks and self._callback:
                    _call(self._callback, self._value)
                self._cache.pop(self._job, None)
                self._event.set()
        else:
            if not success and self._success:
                self._success = False  # only the first exception is kept
                self._value = result
            if self._number_left == 0:
                if callbacks and self._error_callback:
                    _call(self._error_callback, self._value)
                self._cache.pop(self._job, None)
                self._event.set()


class IMapIterator:
    """The iterator of ``Pool.imap``: results in input order; ``next(timeout)`` raises
    ``multiprocessing.TimeoutError``. Each result taken makes room in its read-ahead."""

    def __init__(self, cache: dict[int, Any], ahead: ReadAhead[Any] | None = None) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._job = next(job_counter)
        self._cache = cache
        self._items: collections.deque[Outcome] = collections.deque()
        self._index = 0
        self._length: int | None = None
        self._unsorted: dict[int, Outcome] = {}
        self._ahead = ahead
        cache[self._job] = self

    def __iter__(self) -> IMapIterator:
        return self

    def next(self, timeout: float | None = None) -> Any:
        with self._cond:
            try:
                item = self._items.popleft()
            except IndexError:
                if self._index == self._length:
                    raise StopIteration from None
                self._cond.wait(timeout)
                try:
                    item = self._items.popleft()
                except IndexError:
                    if self._index == self._length:
                        raise StopIteration from None
                    raise TimeoutError from None
        if self._ahead is not None:
            self._ahead.release()
        success, value = item
        if success:
            return value
        raise value

    __next__ = next

    def _set(self, i: int, obj: Outcome, callbacks: bool = True) -> None:
        with self._cond:
            if self._index == i:
                self._items.append(obj)
                self._index += 1
                while self._index in self._unsorted:
                    self._items.append(self._unsorted.pop(self._index))
                    self._index += 1
                self._cond.notify()
            else:
                self._unsorted[i] = obj
            if self._index == self._length:
                self._cache.pop(self._job, None)

    def _set_length(self, length: int) -> None:
        with self._cond:
            self._length = length
            if self._index == self._length:
                self._cond.notify()
                self._cache.pop(self._job, None)


class IMapUnorderedIterator(IMapIterator):
    """The iterator of ``Pool.imap_unordered``: results as they finish."""

    def _set(self, i: int, obj: Outcome, callbacks: bool = True) -> None:
        with self._cond:
            self._items.append(obj)
            self._index += 1
            self._cond.notify()
            if self._index == self._length:
                self._cache.pop(self._job, None)

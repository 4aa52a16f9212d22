"""``pressure.pool.Pool`` (also ``pressure.multiprocessing.Pool``): ``multiprocessing.Pool``
on the Executor's machinery, with workers on any host.

Every task (an ``apply_async`` call, or a chunk of a ``map``) is one task of a
``pressure.Executor`` (pressure/executor/): pickled (or cloudpickled), signed with an
authkey if given, retried when its worker dies, up to ``max_attempts`` starts, then failed
with ``pressure.WorkerLost``. ``processes`` local workers start with the pool, as the
stdlib's; workers on other hosts join a named pool with ``python -m pressure worker NAME``.
Results are set, and callbacks called, in one result-handler thread
(pressure/pool/_handler.py); ``imap``/``imap_unordered`` read their input only a bounded
amount ahead (pressure/pool/_feeding.py). docs/pages/pool.md lists the differences from
the stdlib.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import redis
import redis.cluster

from ..errors import BrokenExecutor
from ..executor import Executor, _batches, _map_chunk, _process_chunk
from ..executor._feeding import ReadAhead, check_buffersize
from ..signing import Authkey
from ._feeding import Feeder, limit
from ._handler import ResultHandler
from ._results import ApplyResult, AsyncResult, IMapIterator, IMapUnorderedIterator, MapResult

__all__ = ["ApplyResult", "AsyncResult", "IMapIterator", "IMapUnorderedIterator", "MapResult", "Pool"]

INIT = "INIT"
RUN = "RUN"
CLOSE = "CLOSE"
TERMINATE = "TERMINATE"


def _stdlib_context(context: Any) -> Any:
    """The stdlib context of ``context`` (a pressure.multiprocessing context wraps one)."""
    if context is None:
        return multiprocessing.get_context()
    return getattr(context, "stdlib", context)


def _lazily(iterable: Iterable[Any]) -> Iterator[Any]:
    """``iterable``'s items, ``iter()`` called at the first one (in the feeder thread)."""
    yield from iterable


class Pool:
    """A ``multiprocessing.Pool`` whose tasks run in pressure workers on any host.

    The stdlib's arguments and methods, and, keyword-only, a ``pressure.Executor``'s:
    ``name`` (workers on other hosts join with ``python -m pressure worker NAME``; None,
    an anonymous pool, whose keys go at ``terminate()`` or ``close()`` and ``join()``),
    ``url``, ``connection``, ``prefix``, ``authkey``, ``serializer``, ``max_attempts``,
    ``visibility_timeout``, ``insecure_pickle``; ``local_workers=False`` starts no local
    worker. ``context``'s start method starts the local workers; with ``maxtasksperchild``
    a 'fork' context starts them with 'forkserver' (a retired worker is replaced while the
    pool runs threads, which 'fork' cannot do safely).
    """

    def __init__(
        self,
        processes: int | None = None,
        initializer: Callable[..., Any] | None = None,
        initargs: Iterable[Any] = (),
        maxtasksperchild: int | None = None,
        context: Any = None,
        *,
        name: str | None = None,
        url: str | None = None,
        connection: redis.Redis | redis.cluster.RedisCluster | None = None,
        prefix: str | None = None,
        authkey: Authkey | None = None,
        serializer: str = "pickle",
        max_attempts: int = 3,
        visibility_timeout: float = 30.0,
        local_workers: bool = True,
        insecure_pickle: bool = False,
    ) -> None:
        # early, for __del__ if __init__ raises
        self._state = INIT
        self._feeders: list[Feeder] = []
        ctx = _stdlib_context(context)
        if processes is None:  # as the stdlib's: process_cpu_count() where there is one (3.13+)
            processes = getattr(os, "process_cpu_count", os.cpu_count)() or 1
        if processes < 1:
            raise ValueError("Number of processes must be at least 1")
        if maxtasksperchild is not None:
            if not isinstance(maxtasksperchild, int) or maxtasksperchild <= 0:
                raise ValueError("maxtasksperchild must be a positive int or None")
            if ctx.get_start_method() == "fork":
                ctx = multiprocessing.get_context("forkserver")
        if initializer is not None and not callable(initializer):
            raise TypeError("initializer must be a callable")
        self._ctx = ctx
        self._processes = processes
        self._maxtasksperchild = maxtasksperchild
        self._executor = Executor(
            name, url=url, connection=connection, prefix=prefix, max_workers=processes, mp_context=ctx,
            initializer=initializer, initargs=tuple(initargs), max_attempts=max_attempts,
            visibility_timeout=visibility_timeout, local_workers=bool(local_workers), authkey=authkey,
            serializer=serializer, max_tasks_per_child=maxtasksperchild, insecure_pickle=insecure_pickle)
        self._core = self._executor._core
        self._lock = threading.Lock()  # state changes against submissions
        try:
            self._core.start()  # the workers start with the pool, as the stdlib's
        except BaseException:
            self._executor.shutdown(wait=True)
            raise
        self._handler = ResultHandler(self._core._id)
        self._cache = self._handler.cache
        self._state = RUN

    # -- the stdlib's surface -----------------------------------------------------------

    @property
    def name(self) -> str:
        """The pool's name: workers join it with ``python -m pressure worker <name>``."""
        return self._core._name

    @property
    def _pool(self) -> list[Any]:
        """The local worker processes (multiprocessing.Pool's attribute of that name)."""
        workers = self._core._pool
        return list(workers.procs) if workers is not None else []

    def __del__(self, _warn: Callable[..., None] = warnings.warn, RUN: str = RUN) -> None:  # noqa: N803
        if getattr(self, "_state", None) == RUN:
            _warn(f"unclosed running multiprocessing pool {self!r}", ResourceWarning, source=self)
            handler = getattr(self, "_handler", None)
            if handler is not None:
                handler.close()  # it ends once the outstanding results are set

    def __repr__(self) -> str:
        cls = self.__class__
        return f"<{cls.__module__}.{cls.__qualname__} state={self._state} pool_size={len(self._pool)}>"

    def __reduce__(self) -> Any:
        raise NotImplementedError("pool objects cannot be passed between processes or pickled")

    def _check_running(self) -> None:
        if self._state != RUN:
            raise ValueError("Pool not running")

    def _submit(self, result: Any, index: int, fn: Callable[..., Any], args: Iterable[Any],
                kwds: dict[str, Any]) -> None:
        self._handler.deliver(result, index, self._executor.submit(fn, *args, **kwds))

    def apply(self, func: Callable[..., Any], args: Iterable[Any] = (), kwds: dict[str, Any] = {}) -> Any:  # noqa: B006
        """Equivalent of ``func(*args, **kwds)``. Pool must be running."""
        return self.apply_async(func, args, kwds).get()

    def apply_async(self, func: Callable[..., Any], args: Iterable[Any] = (), kwds: dict[str, Any] = {},  # noqa: B006
                    callback: Callable[[Any], Any] | None = None,
                    error_callback: Callable[[BaseException], Any] | None = None) -> ApplyResult:
        """Asynchronous version of ``apply()`` method."""
        with self._lock:
            self._check_running()
            result = ApplyResult(self._cache, callback, error_callback)
            try:
                self._submit(result, 0, func, args, kwds)
            except BaseException:
                self._cache.pop(result._job, None)  # never outstanding: join() does not wait for it
                raise
        return result

    def map(self, func: Callable[..., Any], iterable: Iterable[Any], chunksize: int | None = None) -> list[Any]:
        """Apply ``func`` to each element in ``iterable``, collecting the results in a list
        that is returned."""
        return self._map_async(func, iterable, False, chunksize).get()  # type: ignore[no-any-return]

    def starmap(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                chunksize: int | None = None) -> list[Any]:
        """Like ``map()`` but the elements of ``iterable`` are unpacked as arguments:
        ``func`` and ``(a, b)`` becomes ``func(a, b)``."""
        return self._map_async(func, iterable, True, chunksize).get()  # type: ignore[no-any-return]

    def map_async(self, func: Callable[..., Any], iterable: Iterable[Any], chunksize: int | None = None,
                  callback: Callable[[Any], Any] | None = None,
                  error_callback: Callable[[BaseException], Any] | None = None) -> MapResult:
        """Asynchronous version of ``map()`` method."""
        return self._map_async(func, iterable, False, chunksize, callback, error_callback)

    def starmap_async(self, func: Callable[..., Any], iterable: Iterable[Iterable[Any]],
                      chunksize: int | None = None, callback: Callable[[Any], Any] | None = None,
                      error_callback: Callable[[BaseException], Any] | None = None) -> MapResult:
        """Asynchronous version of ``starmap()`` method."""
        return self._map_async(func, iterable, True, chunksize, callback, error_callback)

    def _map_async(self, func: Callable[..., Any], iterable: Iterable[Any], star: bool,
                   chunksize: int | None = None, callback: Callable[[Any], Any] | None = None,
                   error_callback: Callable[[BaseException], Any] | None = None) -> MapResult:
        self._check_running()
        if not hasattr(iterable, "__len__"):
            iterable = list(iterable)
        length = len(iterable)  # type: ignore[arg-type]
        if chunksize is None:
            chunksize, extra = divmod(length, self._processes * 4)
            if extra:
                chunksize += 1
        if length == 0:
            chunksize = 0
        # a chunk is its items as they are: _process_chunk calls fn(*row), _map_chunk fn(item)
        task = _process_chunk if star else _map_chunk
        with self._lock:
            self._check_running()
            result = MapResult(self._cache, chunksize, length, callback, error_callback)
            try:
                if chunksize > 0:
                    for i, chunk in enumerate(_batches(iter(iterable), chunksize)):
                        self._submit(result, i, task, (func, chunk), {})
            except BaseException:
                self._cache.pop(result._job, None)
                raise
        return result

    def imap(self, func: Callable[..., Any], iterable: Iterable[Any], chunksize: int = 1,
             buffersize: int | None = None) -> Iterator[Any]:
        """Equivalent of ``map()``, results yielded in order as they come; the input is read
        at most ``processes + buffersize`` tasks ahead of the results taken."""
        self._check_running()
        if chunksize < 1:
            raise ValueError(f"Chunksize must be 1+, not {chunksize:n}")
        return self._imap(IMapIterator, func, iterable, chunksize, buffersize)

    def imap_unordered(self, func: Callable[..., Any], iterable: Iterable[Any], chunksize: int = 1,
                       buffersize: int | None = None) -> Iterator[Any]:
        """Like ``imap()`` but the results are yielded as they finish."""
        self._check_running()
        if chunksize < 1:
            raise ValueError(f"Chunksize must be 1+, not {chunksize!r}")
        return self._imap(IMapUnorderedIterator, func, iterable, chunksize, buffersize)

    def _imap(self, kind: type[IMapIterator], func: Callable[..., Any], iterable: Iterable[Any],
              chunksize: int, buffersize: int | None) -> Iterator[Any]:
        check_buffersize(buffersize)
        source: Iterator[tuple[Any, ...]]
        items = _lazily(iterable)  # not iterable: the first result raises, as the stdlib's
        if chunksize == 1:
            source, fn = zip(items), func
        else:
            source = ((chunk,) for chunk in _batches(items, chunksize))
            fn = functools.partial(_map_chunk, func)
        ahead: ReadAhead[tuple[Any, ...]] = ReadAhead(source, limit(self._processes, buffersize))
        with self._lock:
            self._check_running()
            result = kind(self._cache, ahead)
            feeder = Feeder(ahead, self._executor.submit, fn, result, self._handler, buffersize is None)
            self._feeders = [f for f in self._feeders if f.thread.is_alive()] + [feeder]
        if chunksize == 1:
            return result
        return (item for chunk in result for item in chunk)

    def close(self) -> None:
        """No more tasks; the workers end once every outstanding one is done (``join()``).
        An imap with the default read-ahead then reads the rest of its input."""
        with self._lock:
            if self._state != RUN:
                return
            self._state = CLOSE
            feeders = list(self._feeders)
        for feeder in feeders:
            if feeder.bounded_by_default:
                feeder.ahead.unbind()
        self._handler.close()

    def terminate(self) -> None:
        """Stop now: local workers are terminated, tasks not started are dropped, and the
        results still outstanding fail with ``pressure.BrokenExecutor``."""
        with self._lock:
            already = self._state == TERMINATE
            self._state = TERMINATE
            feeders = list(self._feeders)
        if already or not hasattr(self, "_handler"):
            return
        for feeder in feeders:
            feeder.ahead.stop()
        workers = self._core._pool
        if workers is not None:
            workers.stopping.value = 1  # none is replaced
        self._core._break("the pool was terminated")
        self._executor.shutdown(wait=False)
        for proc in workers.procs if workers is not None else ():
            if proc.exitcode is None:
                proc.terminate()
        for feeder in feeders:
            feeder.thread.join()
        self._core._break("the pool was terminated")  # any a feeder submitted meanwhile
        self._handler.terminate()
        self._handler.thread.join()
        self._executor.shutdown(wait=True)

    def join(self) -> None:
        """Wait for the worker processes to exit: ``close()`` or ``terminate()`` first."""
        if self._state == RUN:
            raise ValueError("Pool is still running")
        if self._state not in (CLOSE, TERMINATE):
            raise ValueError("In unknown state")
        for feeder in list(self._feeders):
            feeder.thread.join()
        self._handler.thread.join()
        self._executor.shutdown(wait=True)

    def __enter__(self) -> Pool:
        self._check_running()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.terminate()

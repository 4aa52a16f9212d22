"""The pools the pool section of ``python -m pressure bench`` compares, behind one small
interface (``Contender``): constructing one starts it; ``apply``, ``map``,
``imap_unordered`` and ``close`` are the calls the section makes.

* ``multiprocessing.Pool`` (the baseline) and ``pressure.multiprocessing.Pool`` are called
  through their own (the same) API;
* loky: ``loky.ProcessPoolExecutor``, the class ``loky.get_reusable_executor`` returns,
  made directly, because the reusable executor refuses the ``fork`` start method and a
  reused executor has no cold start; idle workers never time out (``timeout=None``), so a
  turn of another pool does not stop them. Its ``map`` takes the chunksize the stdlib Pool
  computes where the Pool is given none (loky's own default is 1), and ``imap_unordered``
  is ``as_completed`` over one future per item;
* dask: ``distributed.Client(LocalCluster(processes=True, n_workers=N, threads_per_worker=1))``,
  ``Client.map`` (``pure=False``: equal arguments are computed each time) gathered, or
  ``as_completed(..., with_results=True)``. It has no chunksize: one task per item.

loky and dask are optional (the ``bench`` extra); ``missing`` says which are not installed.
"""

from __future__ import annotations

import abc
import concurrent.futures
import importlib.util
import logging
import multiprocessing
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar

from ._harness import KEY_PREFIX

__all__ = ["CONTENDERS", "Contender", "default_chunksize", "missing"]

#: The longest one call waits for a single task (the cold start's, a warm-up's).
TASK_TIMEOUT = 60.0


def default_chunksize(items: int, workers: int) -> int:
    """The chunksize ``multiprocessing.Pool.map`` computes when it is given none."""
    chunksize, extra = divmod(items, workers * 4)
    return chunksize + 1 if extra else max(chunksize, 1)


def _limit(items: int) -> float:
    """How long a call of ``items`` tasks may take before the section gives up on it."""
    return 60.0 + items * 0.01


class Contender(abc.ABC):
    """One pool under test; constructing it makes (starts) the pool."""

    key: ClassVar[str]
    label: ClassVar[str]
    #: Whether ``map`` takes a chunksize (dask's has none: one task per item).
    chunks: ClassVar[bool] = True
    #: The module that must be importable, if any (an optional extra).
    needs: ClassVar[str | None] = None

    @abc.abstractmethod
    def __init__(self, workers: int, method: str, url: str) -> None:
        """Start a pool of ``workers`` processes started with ``method``."""

    @abc.abstractmethod
    def apply(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        """``fn(arg)`` in a worker: its result."""

    @abc.abstractmethod
    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], chunksize: int | None) -> list[Any]:
        """``fn`` of each item, in order (``chunksize`` None: the pool's default)."""

    @abc.abstractmethod
    def imap_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Any]:
        """``fn`` of each item, as they finish."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the pool and wait for its worker processes."""


class StdlibPool(Contender):
    """``multiprocessing.Pool``: the baseline."""

    key, label = "stdlib", "multiprocessing.Pool"

    def __init__(self, workers: int, method: str, url: str) -> None:
        #: the stdlib's Pool, or pressure's (``PressurePool``): the same API
        self.pool: Any = multiprocessing.get_context(method).Pool(workers)

    def apply(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        return self.pool.apply_async(fn, (arg,)).get(TASK_TIMEOUT)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], chunksize: int | None) -> list[Any]:
        results: list[Any] = self.pool.map_async(fn, items, chunksize).get(_limit(len(items)))
        return results

    def imap_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Any]:
        results = self.pool.imap_unordered(fn, items)
        limit = _limit(len(items))
        for _ in items:
            yield results.next(limit)

    def close(self) -> None:
        self.pool.close()
        self.pool.join()


class PressurePool(StdlibPool):
    """``pressure.multiprocessing.Pool``: the stdlib's API, the tasks in Redis."""

    key, label = "pressure", "pressure.multiprocessing.Pool"

    def __init__(self, workers: int, method: str, url: str) -> None:
        from .. import multiprocessing as pressure_mp

        self.pool = pressure_mp.Pool(workers, context=multiprocessing.get_context(method), url=url,
                                     prefix=KEY_PREFIX)


class LokyPool(Contender):
    """``loky.ProcessPoolExecutor`` (see the module's docstring for why not the reusable one)."""

    key, label, needs = "loky", "loky.ProcessPoolExecutor", "loky"

    def __init__(self, workers: int, method: str, url: str) -> None:
        import loky
        from loky.backend.context import get_context

        self.workers = workers
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # loky advises against 'fork'; both pools use it
            context = get_context(method)
        self.executor = loky.ProcessPoolExecutor(max_workers=workers, context=context, timeout=None)

    def apply(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        return self.executor.submit(fn, arg).result(TASK_TIMEOUT)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], chunksize: int | None) -> list[Any]:
        size = default_chunksize(len(items), self.workers) if chunksize is None else chunksize
        return list(self.executor.map(fn, items, chunksize=size, timeout=_limit(len(items))))

    def imap_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Any]:
        futures = [self.executor.submit(fn, item) for item in items]
        for future in concurrent.futures.as_completed(futures, timeout=_limit(len(items))):
            yield future.result()

    def close(self) -> None:
        self.executor.shutdown(wait=True)


class DaskPool(Contender):
    """A ``distributed.Client`` on a ``LocalCluster`` of ``workers`` single-threaded processes."""

    key, label, needs, chunks = "dask", "dask distributed.Client", "distributed", False

    def __init__(self, workers: int, method: str, url: str) -> None:
        import dask
        import distributed

        with dask.config.set({"distributed.worker.multiprocessing-method": method}):
            self.cluster = distributed.LocalCluster(processes=True, n_workers=workers, threads_per_worker=1,
                                                    dashboard_address=None, silence_logs=logging.ERROR)
        try:
            self.client = distributed.Client(self.cluster)
        except BaseException:
            self.cluster.close()
            raise

    def apply(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        return self.client.submit(fn, arg, pure=False).result(TASK_TIMEOUT)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any], chunksize: int | None) -> list[Any]:
        futures = self.client.map(fn, items, pure=False)
        result: list[Any] = self.client.gather(futures)
        return result

    def imap_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Any]:
        import distributed

        finished: Iterable[tuple[Any, Any]] = distributed.as_completed(
            self.client.map(fn, items, pure=False), with_results=True, timeout=_limit(len(items)))
        for _, value in finished:
            yield value

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            self.cluster.close()


#: Every pool of the section, in table order: the baseline first.
CONTENDERS: tuple[type[Contender], ...] = (StdlibPool, PressurePool, LokyPool, DaskPool)


def missing(contender: type[Contender]) -> str | None:
    """Why ``contender`` cannot run here (its module is not installed), or None."""
    if contender.needs is None or importlib.util.find_spec(contender.needs) is not None:
        return None
    return f"{contender.needs} is not installed (pip install 'pressure-queue[bench]')"

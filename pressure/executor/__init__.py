"""``pressure.Executor``: ``concurrent.futures`` with workers on any host.

Tasks travel through a reliable pressure queue, ``<name>:tasks`` (bounded by
``max_pending`` if given, which makes ``submit`` block: backpressure), to
workers started by the executor itself (when none is alive anywhere) or
joined from other hosts with ``python -m pressure worker <name>``; see
pressure/executor/worker.py for a worker's side. Each executor reads its results from
its own queue, ``<name>:results:<executor id>``, in one background thread
that completes the futures.

Futures are ``concurrent.futures.Future`` objects (a subclass), so ``wait``,
``as_completed``, callbacks and mixing with other executors' futures work.
``cancel()`` asks Redis first: it succeeds only if no worker has started the
task or holds it to start next (claim.lua / cancel.lua decide atomically), so a
cancelled future never runs anywhere. A worker claims the short tasks it takes
together (up to its prefetch) as the first of them starts, as
ProcessPoolExecutor moves tasks into its call queue: a ``cancel()`` of one of
those returns False (and the future is running), unless the worker gave it
back to the queue first.

A worker killed mid-task leaves the task in flight; it is delivered again to
another worker (at least once), and after ``max_attempts`` starts its future
fails with ``WorkerLost`` naming the task.

Submitting rides out a Redis outage: tasks wait in the executor (in order)
and are sent once Redis answers; only an outage longer than ``OUTAGE_LIMIT``
fails the futures still waiting, with the BackendError. Every task is marked
in Redis (submit.lua) in the same round trip as its put, just before it: a put
retried after a lost reply may leave a second copy in the queue, which workers
recognize by the mark and drop (claim.lua), so it does not run twice.

Data flow (compare concurrent/futures/process.py)::

    submit() -> _Outgoing --> outbox --> sender thread ----------------------+
      |          (in order, rides out outages)   submit.lua mark + put.lua   |
      v                                          (one round trip per batch)  v
    Future <-- collector thread <-- <name>:results:<id> <--+      <name>:tasks (reliable)
    (_Core._futures)  (get, then get_many)                 |              |
                                                           |   receive_many / receive
                                                           |              v
                                  put.lua reply, then      |   worker process (worker.py)
                                  settle.lua, then the   --+   claim.lua (per batch) ->
                                  next get (one round          count_start (per task, posted)
                                  trip per batch)              -> run -> outcome
                                                               heartbeat: touch_all, alive

A worker process is started by the executor (``WorkerPool``, local) or joins from any
host (``python -m pressure worker <name>``). Every queue operation of the executor and
its workers beyond ``queue.Queue``'s API goes through ``pressure._internal``.
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import numbers
import operator
import os
import pickle
import weakref
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any

import redis
import redis.cluster

from .._validate import MAX_BOUND, _seconds
from ..connection import ConnectionConfig
from ..signing import Authkey, refuse_unsigned_pickle, resolve_authkey
from ._contexts import pool_context
from ._core import ExecutorStatistics as ExecutorStatistics
from ._core import _Core
from ._feeding import check_buffersize, map_ahead
from .admin import delete_executor as delete_executor

__all__ = ["Executor", "ExecutorStatistics", "delete_executor"]

#: How long submitted tasks wait for an unreachable Redis (seconds without one successful
#: send) before the futures still waiting fail with the BackendError. Shorter outages (a
#: restart) cost a delay, never a future. Read as each executor is made.
OUTAGE_LIMIT = 60.0


def _process_chunk(fn: Callable[..., Any], chunk: list[tuple[Any, ...]]) -> list[Any]:
    return [fn(*args) for args in chunk]


def _map_chunk(fn: Callable[..., Any], chunk: list[Any]) -> list[Any]:
    """A chunk of one-argument calls (multiprocessing.pool's ``mapstar``): the items travel as
    they are, not each in a tuple (pickled and run in about half the time)."""
    return list(map(fn, chunk))


def _chunks(iterables: tuple[Iterable[Any], ...], size: int) -> Iterator[list[tuple[Any, ...]]]:
    return _batches(zip(*iterables), size)


def _batches(rows: Iterator[Any], size: int) -> Iterator[list[Any]]:
    """Lists of ``size`` items of ``rows`` (the last one shorter): one task each."""
    while chunk := list(itertools.islice(rows, size)):
        yield chunk


def _chain(lists: Iterator[list[Any]]) -> Iterator[Any]:
    for chunk in lists:
        chunk.reverse()
        while chunk:
            yield chunk.pop()


def _task_dumps(serializer: str) -> Callable[[Any], bytes]:
    """How tasks are pickled: ``"pickle"``, or ``"cloudpickle"`` (the ``cloudpickle`` extra),
    which also pickles lambdas, closures and functions of ``__main__`` by value, so that workers
    on other hosts can run them (they load tasks with pickle; cloudpickle must be importable
    there too)."""
    if serializer == "pickle":
        return functools.partial(pickle.dumps, protocol=pickle.HIGHEST_PROTOCOL)
    if serializer == "cloudpickle":
        try:
            import cloudpickle
        except ImportError:
            raise ImportError("serializer='cloudpickle' needs the cloudpickle package: "
                              "pip install 'pressure-queue[cloudpickle]'") from None
        return functools.partial(cloudpickle.dumps, protocol=pickle.HIGHEST_PROTOCOL)
    if isinstance(serializer, str):
        raise ValueError(f"serializer must be 'pickle' or 'cloudpickle', not {serializer!r}")
    raise TypeError(f"serializer must be 'pickle' or 'cloudpickle', not {type(serializer).__name__}")


def checked_arguments(name: str | None, url: str | None,
                      connection: redis.Redis | redis.cluster.RedisCluster | None, prefix: str | None,
                      mp_context: Any, initializer: Callable[..., Any] | None, max_attempts: int,
                      visibility_timeout: float, authkey: Authkey | None, serializer: str,
                      max_tasks_per_child: int | None, insecure_pickle: bool,
                      ) -> tuple[Any, float, tuple[bytes, ...], Callable[[Any], bytes], ConnectionConfig]:
    """The checks of an Executor's arguments (but ``max_workers`` and ``max_pending``), made
    before any round trip, by the Executor and by what makes one later (pressure.joblib):
    the start context, the visibility timeout in seconds, the authkeys, the task pickler and
    the connection's configuration."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"executor name must be a str or None, not {type(name).__name__}")
    if name == "":
        raise ValueError("executor name must not be empty")
    if prefix is not None and (not isinstance(prefix, str) or not prefix):
        raise ValueError("prefix must be a non-empty string")
    if initializer is not None and not callable(initializer):
        raise TypeError("initializer must be a callable")
    mp_context = pool_context(mp_context, max_tasks_per_child)  # ProcessPoolExecutor's checks
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be a positive integer, not {max_attempts!r}")
    seconds = _seconds("visibility_timeout", visibility_timeout)
    keys = resolve_authkey(authkey)
    dumps = _task_dumps(serializer)
    config = ConnectionConfig.resolve(url, connection)
    if not keys:  # it unpickles results, its workers tasks: not from another host unsigned
        refuse_unsigned_pickle(config, insecure_pickle, "an anonymous executor" if name is None
                               else f"executor {name!r}", data_only=False)
    return mp_context, seconds, keys, dumps, config


class Executor(concurrent.futures.Executor):
    """An Executor whose tasks run in worker processes on any host.

    ``Executor(name)`` attaches to the task queue ``name`` (creating it); an
    anonymous executor (``name=None``) gets a unique name, and its keys go
    when it shuts down. ``max_workers`` local worker processes are started on
    first use if no worker of this name is alive anywhere (``local_workers=True``
    starts them regardless, ``False`` never). ``initializer(*initargs)`` runs in
    every worker as it starts (workers that join from other hosts read it
    from Redis, so it must pickle there); if it fails, the executor is broken.
    ``max_attempts`` bounds the starts of a task whose workers die;
    ``max_pending`` bounds the task queue (``submit`` then blocks);
    ``visibility_timeout`` is how long a silent worker keeps its task (live
    workers renew it every second); ``max_tasks_per_child``, as in
    ProcessPoolExecutor, is how many tasks a local worker process runs before
    another replaces it ('spawn' is then the default start method; 'fork' is
    refused).
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        url: str | None = None,
        connection: redis.Redis | redis.cluster.RedisCluster | None = None,
        prefix: str | None = None,
        max_workers: int | None = None,
        mp_context: Any = None,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple[Any, ...] = (),
        max_attempts: int = 3,
        max_pending: int | None = None,
        visibility_timeout: float = 30.0,
        local_workers: bool | None = None,
        authkey: Authkey | None = None,
        serializer: str = "pickle",
        max_tasks_per_child: int | None = None,
        insecure_pickle: bool = False,
    ) -> None:
        # every argument is checked before the first round trip: a bad one creates nothing
        if max_workers is None:
            max_workers = os.cpu_count() or 1
        else:
            if max_workers <= 0:  # ProcessPoolExecutor's test: its TypeError for a str, too
                raise ValueError("max_workers must be greater than 0")
            # and the TypeError it raises for a float ('... cannot be interpreted as an integer')
            max_workers = int(operator.index(max_workers))
        if max_pending is not None:
            if isinstance(max_pending, bool) or not isinstance(max_pending, numbers.Integral):
                raise TypeError(f"max_pending must be an integer or None, not {type(max_pending).__name__}")
            if max_pending > MAX_BOUND:
                raise ValueError(f"max_pending must be at most {MAX_BOUND}, not {max_pending!r}")
            max_pending = int(max_pending)
        mp_context, visibility_timeout, keys, dumps, config = checked_arguments(
            name, url, connection, prefix, mp_context, initializer, max_attempts, visibility_timeout, authkey,
            serializer, max_tasks_per_child, insecure_pickle)
        self._core = _Core(name, config, connection, prefix, max_workers, mp_context, initializer,
                           initargs, max_attempts, max_pending, visibility_timeout, local_workers, keys,
                           dumps, OUTAGE_LIMIT, max_tasks_per_child, bool(insecure_pickle))
        weakref.finalize(self, self._core._release)

    @property
    def name(self) -> str:
        """The executor's name: workers join it with ``python -m pressure worker <name>``."""
        return self._core._name

    def __repr__(self) -> str:
        return f"<pressure.Executor name={self._core._name!r} url={self._core._backend.config.url!r}>"

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self._core.submit(fn, *args, **kwargs)

    submit.__doc__ = concurrent.futures.Executor.submit.__doc__

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any], timeout: float | None = None,
            chunksize: int = 1, buffersize: int | None = None) -> Iterator[Any]:
        """Returns an iterator equivalent to map(fn, iter).

        Args:
            fn: A callable that will take as many arguments as there are
                passed iterables.
            timeout: The maximum number of seconds to wait. If None, then there
                is no limit on the wait time.
            chunksize: If greater than one, the iterables will be chopped into
                chunks of size chunksize and submitted to the workers as one
                task each.
            buffersize: The number of submitted tasks (chunks) whose results
                have not yet been yielded. If the buffer is full, iteration over
                the iterables pauses until a result is yielded from the buffer.
                If None, all input elements are eagerly collected, and a task is
                submitted for each.

        Returns:
            An iterator equivalent to: map(func, *iterables) but the calls may
            be evaluated out-of-order.

        Raises:
            TimeoutError: If the entire result iterator could not be generated
                before the given timeout.
            Exception: If fn(*args) raises for any values.
        """
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        check_buffersize(buffersize)  # Python 3.14's map, on every version
        chunks = ((chunk,) for chunk in _chunks(iterables, chunksize))
        return _chain(map_ahead(self, functools.partial(_process_chunk, fn), chunks, timeout, buffersize))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._core.shutdown(wait, cancel_futures=cancel_futures)

    shutdown.__doc__ = concurrent.futures.Executor.shutdown.__doc__

    def statistics(self) -> ExecutorStatistics:
        """Tasks queued, running, done, failed, retried and lost, and the workers alive, across
        every executor and worker sharing this executor's name."""
        return self._core.statistics()

    def workers_alive(self) -> int:
        """How many workers of this name, on any host, were heard from in the last few seconds."""
        return self._core.workers_alive()

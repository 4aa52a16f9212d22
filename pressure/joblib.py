"""``pressure.joblib``: a joblib parallel backend whose batches run on ``pressure.Executor``
workers, on any host (the ``joblib`` extra).

Importing this module registers the backend ``"pressure"`` with joblib::

    import joblib
    import pressure.joblib  # noqa: F401 - registers the "pressure" backend

    with joblib.parallel_backend("pressure", name="grid", url="redis://host:6379/0"):
        results = joblib.Parallel(n_jobs=-1)(joblib.delayed(f)(i) for i in range(100))

Every ``joblib.Parallel`` call (scikit-learn's ``n_jobs=`` included) made in that block
configures the backend (``configure``), which makes one ``pressure.Executor`` from the
backend's keyword arguments (the Executor's own); the call's batches (joblib's
``BatchedCalls``) are its tasks, their futures complete through its result thread, and the
call's end (``terminate``) shuts it down: an anonymous backend (``name=None``) leaves no
worker and no key behind. See docs/pages/joblib.md for ``n_jobs`` and what differs from loky.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import redis
import redis.cluster

try:
    from joblib import register_parallel_backend
    from joblib.parallel import (
        AutoBatchingMixin,
        FallbackToBackend,
        ParallelBackendBase,
        SequentialBackend,
        cpu_count,
    )
except ImportError as exc:  # no joblib, or one older than 1.3
    kind = ModuleNotFoundError if isinstance(exc, ModuleNotFoundError) else ImportError
    raise kind(f"pressure.joblib needs joblib 1.3 or newer, the 'joblib' extra: "
               f"pip install 'pressure-queue[joblib]' ({exc})", name=exc.name) from exc

from ._validate import _seconds
from .connection import Backend
from .executor import Executor, checked_arguments
from .executor.admin import executor_workers_alive
from .keys import ExecutorKeys, resolve_prefix
from .signing import Authkey

__all__ = ["PressureBackend"]

#: How often the backend looks for a live worker while it waits for one (seconds).
_POLL = 0.1


class PressureBackend(AutoBatchingMixin, ParallelBackendBase):  # type: ignore[misc]  # joblib is untyped
    """A joblib backend running each batch of a ``Parallel`` call as a task of a
    ``pressure.Executor``, made from these keyword arguments (the Executor's; ``max_workers``
    is ``n_jobs``) for every call and shut down at its end.

    ``serializer`` defaults to ``"cloudpickle"``, as loky pickles ``__main__`` functions,
    lambdas and closures by value: workers on other hosts then need cloudpickle and joblib
    (``pip install 'pressure-queue[joblib]'``). ``wait_for_workers_timeout``: with
    ``local_workers=False`` and a negative ``n_jobs``, how long a call waits for a worker of
    ``name`` to be alive before it raises ``TimeoutError``.
    """

    #: ``n_jobs=None`` means every worker, as with dask's backend (loky's default is 1, which
    #: would run scikit-learn's ``n_jobs=None`` in the calling process instead)
    default_n_jobs = -1
    supports_retrieve_callback = True  # and so supports_timeout, supports_return_generator
    supports_inner_max_num_threads = False
    supports_sharedmem = False
    uses_threads = False

    def __init__(
        self,
        nesting_level: int | None = None,
        inner_max_num_threads: int | None = None,
        *,
        name: str | None = None,
        url: str | None = None,
        connection: redis.Redis | redis.cluster.RedisCluster | None = None,
        prefix: str | None = None,
        mp_context: Any = None,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple[Any, ...] = (),
        max_attempts: int = 3,
        visibility_timeout: float = 30.0,
        local_workers: bool | None = None,
        authkey: Authkey | None = None,
        serializer: str = "cloudpickle",
        max_tasks_per_child: int | None = None,
        insecure_pickle: bool = False,
        wait_for_workers_timeout: float = 10.0,
    ) -> None:
        super().__init__(nesting_level=nesting_level, inner_max_num_threads=inner_max_num_threads)
        if local_workers not in (None, True, False):
            raise TypeError(f"local_workers must be True, False or None, not {local_workers!r}")
        if local_workers is False and name is None:  # no worker could ever join it
            raise ValueError("local_workers=False needs a name: workers on other hosts join an executor "
                             "by its name (python -m pressure worker NAME)")
        # the Executor's checks, here too: a bad argument fails in parallel_backend(...)
        _, _, _, _, self._config = checked_arguments(
            name, url, connection, prefix, mp_context, initializer, max_attempts, visibility_timeout, authkey,
            serializer, max_tasks_per_child, insecure_pickle)
        self._wait_for_workers = _seconds("wait_for_workers_timeout", wait_for_workers_timeout)
        self._name = name
        self._local_workers = local_workers
        self._connection = connection
        self._prefix = prefix
        #: the Executor's arguments but max_workers, for the Executor of each call
        self._executor_kwargs: dict[str, Any] = dict(
            url=url, connection=connection, prefix=prefix, mp_context=mp_context,
            initializer=initializer, initargs=initargs, max_attempts=max_attempts,
            visibility_timeout=visibility_timeout, local_workers=local_workers, authkey=authkey,
            serializer=serializer, max_tasks_per_child=max_tasks_per_child,
            insecure_pickle=insecure_pickle)
        self._executor: Executor | None = None
        #: (n_jobs, effective n_jobs) of the configured call
        self._configured: tuple[int, int] | None = None
        self._lock = threading.Lock()
        #: the futures of this call not done yet (abort_everything cancels them)
        self._pending: set[Future[Any]] = set()

    def __repr__(self) -> str:
        return f"<pressure.joblib.PressureBackend name={self._name!r} url={self._config.url!r}>"

    # -- n_jobs ---------------------------------------------------------------------

    def _workers_alive(self) -> int:
        """The live workers of this backend's name, on any host (one round trip); 0 for an
        anonymous backend, whose only workers are the local ones of each call."""
        if self._executor is not None:
            return self._executor.workers_alive()
        if self._name is None:
            return 0
        backend = Backend(self._config, self._connection)
        keys = ExecutorKeys.build(resolve_prefix(self._prefix), self._name)
        try:
            backend.route(keys.claims, f"executor {self._name!r}")
            return len(executor_workers_alive(backend, keys))
        finally:
            backend.disconnect()

    def effective_n_jobs(self, n_jobs: int | None) -> int:
        """How many batches run at once: a positive ``n_jobs`` as it is (the executor starts
        that many local workers when it starts any); a negative one counts back from the
        workers there are, as loky counts from the CPUs (-1: all of them): the live workers
        of ``name`` on every host, plus the ``cpu_count()`` local ones the executor starts
        (``local_workers=True``, or None and no worker alive)."""
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        if n_jobs is None:
            return 1
        if n_jobs > 0:
            return int(n_jobs)
        if self._configured is not None and self._configured[0] == n_jobs:
            return self._configured[1]  # this call's: its own local workers are not counted twice
        alive = self._workers_alive()
        if self._local_workers is False and alive == 0 and self._executor is None:
            alive = self._wait_for_a_worker()
        local = self._executor is None and (self._local_workers is True
                                            or (self._local_workers is None and alive == 0))
        return max((cpu_count() if local else 0) + alive + 1 + n_jobs, 1)

    def _wait_for_a_worker(self) -> int:
        deadline = time.monotonic() + self._wait_for_workers
        while True:
            alive = self._workers_alive()
            if alive:
                return alive
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"no worker of executor {self._name!r} is alive after {self._wait_for_workers} s "
                    f"(local_workers=False): start some with `python -m pressure worker {self._name}`, "
                    f"give a positive n_jobs (the tasks then wait for workers), or raise "
                    f"wait_for_workers_timeout")
            time.sleep(_POLL)

    # -- a Parallel call ------------------------------------------------------------

    def configure(self, n_jobs: int | None = 1, parallel: Any = None, prefer: str | None = None,
                  require: str | None = None, **backend_kwargs: Any) -> int:
        """Make this call's Executor (joblib's memmapping and context arguments do not
        apply); n_jobs 1 runs the call in this process, as every joblib backend does."""
        n = self.effective_n_jobs(n_jobs)
        if n == 1:
            raise FallbackToBackend(SequentialBackend(nesting_level=self.nesting_level))
        if self._executor is not None:  # configured again without terminate: a managed backend's
            self.terminate()
        n_jobs = int(n_jobs) if n_jobs is not None else 1
        # the local workers it starts, if any: as many as n_jobs, or counted back from the CPUs
        local = n_jobs if n_jobs > 0 else max(cpu_count() + 1 + n_jobs, 1)
        self._executor = Executor(self._name, max_workers=local, **self._executor_kwargs)
        self._configured = (n_jobs, n)
        self.parallel = parallel
        return n

    def submit(self, func: Callable[[], Any], callback: Callable[[Any], None] | None = None) -> Future[Any]:
        """Send one batch (joblib's ``BatchedCalls``) as a task; ``callback`` gets its future."""
        executor = self._executor
        if executor is None:
            raise RuntimeError("the pressure backend is not configured: it runs inside a joblib.Parallel call")
        future = executor.submit(func)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        if callback is not None:
            future.add_done_callback(callback)
        return future

    apply_async = submit  # the name joblib < 1.5 calls

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def retrieve_result_callback(self, future: Future[Any]) -> Any:
        """The batch's results, or its exception (the task's own type, the remote traceback
        as ``__cause__``; ``pressure.WorkerLost`` once its workers died ``max_attempts``
        times)."""
        return future.result()

    def abort_everything(self, ensure_ready: bool = True) -> None:
        """After a task's error (or a timeout): cancel every task no worker has started (they
        never run); those running finish, their results unread. Without ``ensure_ready``,
        the executor shuts down too, without waiting for them."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()
        if not ensure_ready and self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
            self._configured = None

    def terminate(self) -> None:
        """The call's end: shut its Executor down (its local workers stop; an anonymous
        executor's keys are deleted)."""
        executor, self._executor = self._executor, None
        self._configured = None
        if executor is not None:
            executor.shutdown(wait=True)
        with self._lock:
            self._pending.clear()
        self.reset_batch_stats()

    # nested Parallel calls inside a task: ParallelBackendBase's, threads at the first
    # level of nesting, then sequential (a task does not wait for tasks of its own
    # executor: every worker could be waiting so)


register_parallel_backend("pressure", PressureBackend)

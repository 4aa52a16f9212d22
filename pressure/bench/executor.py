"""The executor section of ``python -m pressure bench``: pressure.Executor against
concurrent.futures.ProcessPoolExecutor.

First, **start and stop**: each executor in turn (``max(--start-rounds, --repeat)`` times;
the median counts, the best is shown too: on a shared machine one round in a few is slowed
by something else, and a best of few moves with luck) is made, runs one no-op task (**cold
start**: constructor to first result, worker processes started included), runs another, and
is shut down with ``shutdown(wait=True)`` while idle (**idle shutdown**).

Then both executors get ``--workers`` worker processes started with the platform's default
start method (``fork`` on Linux before Python 3.14; pressure's local workers use the same),
both are warmed up first (every worker process has run a task, so start-up is not
measured), then, in turns:

* **no-op** - ``--executor-tasks`` tasks that do nothing, all submitted, then
  waited for: tasks/s, the executor's own cost per task;
* **CPU-bound** - ``--cpu-tasks`` tasks, each the SHA-256 of ``--cpu-mb`` MiB
  (fed one MiB at a time; about 0.15 s per 256 MiB with SHA extensions):
  wall time from the first submit to the last result. Every digest is checked.

With ``--repeat R`` each measurement is taken R times, the executors taking turns, and
each one's best counts. The options, the server and the report framing live in
``pressure.bench``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import math
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..executor import Executor
from ._harness import (KEY_PREFIX, BenchConfig, fmt, goal_line, print_lines, progress, ratio, render_table,
                       rounds_note)

__all__ = [
    "EXECUTOR_START_METHOD",
    "ExecutorResult",
    "format_executor_goals",
    "format_executor_table",
    "hash_task",
    "noop_task",
    "print_executor_report",
    "run_executors",
]


#: Both executors' worker processes start with this method, the platform's default
#: (pressure's local workers use it too), so both pay the same for it.
EXECUTOR_START_METHOD = multiprocessing.get_start_method(allow_none=False)
#: The most idle shutdown may take (seconds): the goal.
SHUTDOWN_GOAL = 0.050
#: The longest a warm-up waits for every worker process to run a task.
WARM_TIMEOUT = 60.0
_MIB = 1 << 20


def noop_task() -> None:
    """The no-op task: what is measured is the executor's own cost per task."""


def hash_task(megabytes: int) -> str:
    """The CPU-bound task: the SHA-256 hex digest of ``megabytes`` MiB of zero bytes,
    fed one MiB at a time."""
    block = bytes(_MIB)
    digest = hashlib.sha256()
    for _ in range(megabytes):
        digest.update(block)
    return digest.hexdigest()


def _pid_task(seconds: float) -> int:
    """Warm-up: hold a worker for ``seconds`` (so the others get tasks too); its pid."""
    time.sleep(seconds)
    return os.getpid()


@dataclass
class ExecutorResult:
    """One executor's best no-op rate and CPU-bound wall time, its median cold start and idle
    shutdown (and its best cold start), or why it has none."""

    key: str
    label: str
    noop_per_s: float | None = None
    cpu_s: float | None = None
    cold_s: float | None = None
    shutdown_s: float | None = None
    cold_best_s: float | None = None
    error: str | None = None


def _executor_factories(url: str, workers: int
                        ) -> list[tuple[str, str, Callable[[], concurrent.futures.Executor]]]:
    """(key, label, factory) of the stdlib baseline and of pressure.Executor, in table order."""
    ctx = multiprocessing.get_context(EXECUTOR_START_METHOD)
    return [
        ("stdlib", "concurrent.futures.ProcessPoolExecutor",
         functools.partial(concurrent.futures.ProcessPoolExecutor, max_workers=workers, mp_context=ctx)),
        ("pressure", "pressure.Executor",
         functools.partial(Executor, url=url, prefix=KEY_PREFIX, max_workers=workers,
                           local_workers=True)),
    ]


def _wait_all(futures: Sequence[concurrent.futures.Future[Any]], limit: float) -> None:
    """Wait for every future; raise the first task's exception, or TimeoutError."""
    _, pending = concurrent.futures.wait(futures, timeout=limit)
    if pending:
        raise TimeoutError(f"{len(pending)} of {len(futures)} tasks unfinished after {limit:.0f} s")
    for future in futures:
        future.result()


def _warm(executor: concurrent.futures.Executor, workers: int) -> int:
    """Return once each of the ``workers`` processes has run a task (so all are started);
    how many did."""
    deadline = time.monotonic() + WARM_TIMEOUT
    pids: set[int] = set()
    while len(pids) < workers:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"only {len(pids)} of {workers} worker processes ran a task "
                               f"within {WARM_TIMEOUT:.0f} s")
        futures = [executor.submit(_pid_task, 0.05) for _ in range(2 * workers)]
        _wait_all(futures, remaining)
        pids.update(f.result() for f in futures)
    _wait_all([executor.submit(noop_task) for _ in range(10 * workers)], WARM_TIMEOUT)
    return len(pids)


def _noop_rate(executor: concurrent.futures.Executor, config: BenchConfig) -> float:
    """Submit ``executor_tasks`` no-op tasks, wait for all: tasks per second."""
    start = time.perf_counter()
    futures = [executor.submit(noop_task) for _ in range(config.executor_tasks)]
    _wait_all(futures, 60.0 + config.executor_tasks * 0.01)
    return config.executor_tasks / (time.perf_counter() - start)


def _cpu_time(executor: concurrent.futures.Executor, config: BenchConfig) -> float:
    """Submit ``cpu_tasks`` hash tasks, wait for all: seconds from the first submit to the
    last result. Every digest is checked against one computed here."""
    start = time.perf_counter()
    futures = [executor.submit(hash_task, config.cpu_mb) for _ in range(config.cpu_tasks)]
    _wait_all(futures, 60.0 + config.cpu_tasks * config.cpu_mb * 0.01)
    elapsed = time.perf_counter() - start
    expected = hash_task(config.cpu_mb)
    wrong = sum(f.result() != expected for f in futures)
    if wrong:
        raise ValueError(f"{wrong} of {config.cpu_tasks} hash tasks returned a wrong digest")
    return elapsed


#: What each step of the executor benchmark reports, as a progress-line format.
_STEPS: dict[str, str] = {"warm-up": "{:.0f} workers", "no-op": "{:,.0f} tasks/s",
                          "CPU-bound": "{:.2f} s"}


def _attempt(result: ExecutorResult, step: str, run: Callable[[], float]) -> float | None:
    """Run one step and show its outcome; on failure record the error and return None."""
    began = time.monotonic()
    try:
        value = run()
    except Exception as exc:  # noqa: BLE001 - shown in the table's notes
        result.error = f"{step}: {type(exc).__name__}: {exc}"
        progress(f"  {result.label} failed: {result.error}")
        return None
    status = _STEPS[step].format(value)
    progress(f"  {result.label:<38} {step:<10} {status:>16}  ({time.monotonic() - began:.1f} s)")
    return value


def _best_rate(result: ExecutorResult, rate: float) -> None:
    result.noop_per_s = max(rate, result.noop_per_s or 0.0)


def _best_time(result: ExecutorResult, seconds: float) -> None:
    result.cpu_s = min(seconds, result.cpu_s or math.inf)


#: The measurements of a round, in order: (step, measure, keep the best so far).
_MEASUREMENTS: tuple[tuple[str, Callable[[concurrent.futures.Executor, BenchConfig], float],
                           Callable[[ExecutorResult, float], None]], ...] = (
    ("no-op", _noop_rate, _best_rate),
    ("CPU-bound", _cpu_time, _best_time),
)


def _start_and_stop(factory: Callable[[], concurrent.futures.Executor]) -> tuple[float, float]:
    """Make an executor, run a no-op task, another, then shut it down while idle: (seconds
    from the constructor to the first result, seconds ``shutdown(wait=True)`` took)."""
    start = time.perf_counter()
    executor = factory()
    try:
        executor.submit(noop_task).result(timeout=WARM_TIMEOUT)
        cold = time.perf_counter() - start
        executor.submit(noop_task).result(timeout=WARM_TIMEOUT)
    except BaseException:
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    began = time.perf_counter()
    executor.shutdown(wait=True)
    return cold, time.perf_counter() - began


def run_start_stop(url: str, config: BenchConfig, results: list[ExecutorResult]) -> None:
    """``max(start_rounds, repeat)`` rounds of ``_start_and_stop``, the executors taking turns;
    each one's median cold start and idle shutdown (and best cold start) go into ``results``
    (in table order)."""
    factories = _executor_factories(url, config.workers)
    samples: list[tuple[list[float], list[float]]] = [([], []) for _ in results]
    for _ in range(max(config.start_rounds, config.repeat)):
        for (_, _, factory), result, (colds, shutdowns) in zip(factories, results, samples, strict=True):
            if result.error:
                continue
            began = time.monotonic()
            try:
                cold, shutdown = _start_and_stop(factory)
            except Exception as exc:  # noqa: BLE001 - shown in the table's notes
                result.error = f"start and stop: {type(exc).__name__}: {exc}"
                progress(f"  {result.label} failed: {result.error}")
                continue
            colds.append(cold)
            shutdowns.append(shutdown)
            progress(f"  {result.label:<38} {'start/stop':<10} {cold * 1000:>8.1f} / {shutdown * 1000:.1f} ms"
                     f"  ({time.monotonic() - began:.1f} s)")
    for result, (colds, shutdowns) in zip(results, samples, strict=True):
        if colds and not result.error:
            result.cold_s, result.cold_best_s = statistics.median(colds), min(colds)
            result.shutdown_s = statistics.median(shutdowns)


def run_executors(url: str, config: BenchConfig) -> list[ExecutorResult]:
    """Start and warm both executors, then ``repeat`` rounds of every measurement, the
    executors taking turns at each; each one's best counts. An executor that fails sits out
    the rest."""
    factories = _executor_factories(url, config.workers)
    results = [ExecutorResult(key, label) for key, label, _ in factories]
    run_start_stop(url, config, results)
    with contextlib.ExitStack() as stack:
        ready: list[tuple[concurrent.futures.Executor, ExecutorResult]] = []
        for (_, _, factory), result in zip(factories, results, strict=True):
            executor = factory()
            stack.callback(executor.shutdown, wait=True, cancel_futures=True)
            if _attempt(result, "warm-up", functools.partial(_warm, executor, config.workers)):
                ready.append((executor, result))
        for _ in range(config.repeat):
            for step, measure, keep in _MEASUREMENTS:
                still = []
                for executor, result in ready:
                    value = _attempt(result, step, functools.partial(measure, executor, config))
                    if value is not None:
                        keep(result, value)
                        still.append((executor, result))
                ready = still
    return results



# -- the report ---

def _executor_ratios(results: list[ExecutorResult]) -> tuple[float | None, float | None]:
    """pressure's no-op rate and CPU-bound speed (stdlib time / pressure time) as fractions
    of the stdlib's."""
    by = {r.key: r for r in results}
    stdlib, ours = by.get("stdlib"), by.get("pressure")
    if stdlib is None or ours is None:
        return None, None
    return ratio(ours.noop_per_s, stdlib.noop_per_s), ratio(stdlib.cpu_s, ours.cpu_s)


def format_executor_table(results: list[ExecutorResult]) -> list[str]:
    """The executor table: no-op tasks/s and CPU-bound wall time, each with its ratio to
    ProcessPoolExecutor (for the time, its speed: stdlib time / this time)."""
    by = {r.key: r for r in results}
    stdlib = by.get("stdlib")
    rows = [("executor", "cold start ms (best)", "vs stdlib", "idle shutdown ms", "no-op tasks/s", "vs stdlib",
             "CPU-bound s", "speed vs stdlib")]
    for r in results:
        cold = fmt(None if r.cold_s is None else r.cold_s * 1000, 1)
        if r.cold_s is not None and r.cold_best_s is not None:
            cold += f" ({r.cold_best_s * 1000:.1f})"
        rows.append((
            r.label,
            cold,
            fmt(ratio(r.cold_s, stdlib.cold_s if stdlib else None), 2, "x"),
            fmt(None if r.shutdown_s is None else r.shutdown_s * 1000, 1),
            "error" if r.noop_per_s is None and r.error else fmt(r.noop_per_s),
            fmt(ratio(r.noop_per_s, stdlib.noop_per_s if stdlib else None), 2, "x"),
            "error" if r.cpu_s is None and r.error else fmt(r.cpu_s, 2),
            fmt(ratio(stdlib.cpu_s if stdlib else None, r.cpu_s), 2, "x"),
        ))
    return render_table(rows)


def format_executor_goals(results: list[ExecutorResult]) -> list[str]:
    """The two executor goals, each PASS or MISS."""
    noop, cpu = _executor_ratios(results)
    by = {r.key: r for r in results}
    stdlib, ours = by.get("stdlib"), by.get("pressure")
    cold = ratio(stdlib.cold_s, ours.cold_s) if stdlib and ours else None
    shutdown = ours.shutdown_s if ours else None
    if shutdown is None:
        shutdown_line = f"  {'pressure.Executor idle shutdown <= 50 ms':<52} {'n/a':>8}  MISS (no result)"
    else:
        verdict = "PASS" if shutdown <= SHUTDOWN_GOAL else "MISS"
        shutdown_line = f"  {'pressure.Executor idle shutdown <= 50 ms':<52} {shutdown * 1000:>6.1f}ms  {verdict}"
    return [
        "goals (executor):",
        goal_line("pressure.Executor cold start <= 3x (speed >= 0.33x)", cold, 1 / 3),
        shutdown_line,
        goal_line("pressure.Executor no-op >= 1.0x ProcessPoolExecutor", noop, 1.0),
        goal_line("pressure.Executor CPU-bound within 10% (>= 0.9x)", cpu, 0.9),
    ]


def print_executor_report(results: list[ExecutorResult], config: BenchConfig) -> None:
    """The executor section: settings, table, errors, goals."""
    print()
    print(f"executors: {config.workers} worker processes each (multiprocessing "
          f"'{EXECUTOR_START_METHOD}'); cold start (constructor to first result) and idle "
          f"shutdown: median of {max(config.start_rounds, config.repeat)} rounds, taking turns; then started and warmed "
          f"up before measuring{rounds_note(config)}")
    print(f"  no-op: {config.executor_tasks:,} tasks submitted, then waited for; CPU-bound: "
          f"{config.cpu_tasks:,} tasks, each SHA-256 of {config.cpu_mb:,} MiB (wall time)")
    print_lines(format_executor_table(results))
    errors = [f"  - {r.label} {r.error}" for r in results if r.error]
    if errors:
        print_lines(errors, "notes:")
    print_lines(format_executor_goals(results))



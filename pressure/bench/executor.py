"""The executor section of ``python -m pressure bench``: pressure.Executor against
concurrent.futures.ProcessPoolExecutor.

Both executors get ``--workers`` worker processes started with ``forkserver``, both are
warmed up first (every worker process has run a task, so start-up is not measured), then,
in turns:

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


#: Both executors' worker processes start with this method (pressure's local workers
#: use it too), so both pay the same for it, outside the measurements.
EXECUTOR_START_METHOD = "forkserver"
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
    """One executor's best no-op rate and CPU-bound wall time, or why it has none."""

    key: str
    label: str
    noop_per_s: float | None = None
    cpu_s: float | None = None
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


def run_executors(url: str, config: BenchConfig) -> list[ExecutorResult]:
    """Start and warm both executors, then ``repeat`` rounds of every measurement, the
    executors taking turns at each; each one's best counts. An executor that fails sits out
    the rest."""
    factories = _executor_factories(url, config.workers)
    results = [ExecutorResult(key, label) for key, label, _ in factories]
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
    rows = [("executor", "no-op tasks/s", "vs stdlib", "CPU-bound s", "speed vs stdlib")]
    for r in results:
        rows.append((
            r.label,
            "error" if r.noop_per_s is None and r.error else fmt(r.noop_per_s),
            fmt(ratio(r.noop_per_s, stdlib.noop_per_s if stdlib else None), 2, "x"),
            "error" if r.cpu_s is None and r.error else fmt(r.cpu_s, 2),
            fmt(ratio(stdlib.cpu_s if stdlib else None, r.cpu_s), 2, "x"),
        ))
    return render_table(rows)


def format_executor_goals(results: list[ExecutorResult]) -> list[str]:
    """The two executor goals, each PASS or MISS."""
    noop, cpu = _executor_ratios(results)
    return [
        "goals (executor):",
        goal_line("pressure.Executor no-op >= 0.5x ProcessPoolExecutor", noop, 0.5),
        goal_line("pressure.Executor CPU-bound within 10% (>= 0.9x)", cpu, 0.9),
    ]


def print_executor_report(results: list[ExecutorResult], config: BenchConfig) -> None:
    """The executor section: settings, table, errors, goals."""
    print()
    print(f"executors: {config.workers} worker processes each (multiprocessing "
          f"'{EXECUTOR_START_METHOD}'), started and warmed up before measuring{rounds_note(config)}")
    print(f"  no-op: {config.executor_tasks:,} tasks submitted, then waited for; CPU-bound: "
          f"{config.cpu_tasks:,} tasks, each SHA-256 of {config.cpu_mb:,} MiB (wall time)")
    print_lines(format_executor_table(results))
    errors = [f"  - {r.label} {r.error}" for r in results if r.error]
    if errors:
        print_lines(errors, "notes:")
    print_lines(format_executor_goals(results))



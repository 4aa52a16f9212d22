"""The pool section of ``python -m pressure bench --pool``: pressure.multiprocessing.Pool
against multiprocessing.Pool, and loky and dask where they are installed (the pools and
how each is called: ``_pool_contenders``).

Every pool gets ``--workers`` worker processes started with the platform's default start
method (``EXECUTOR_START_METHOD``, as the executor section's). First, **cold start**: each
pool in turn (``max(--start-rounds, --repeat)`` times; the median counts, the best is shown
too) is constructed, runs one no-op task to its result (constructor to first result, worker
processes started included), and is closed. Then ``--repeat`` rounds (each one's best
counts): in each, every pool in turn is constructed, warmed up (each worker process has run
a task), measured on every row and closed, so that no other pool's processes or threads
(dask's scheduler runs in this process) are alive while one is measured:

* **map, chunksize 1** - ``map`` of ``--pool-tasks`` no-op tasks, one task per item;
* **map, default chunksize** - ``map`` of ``--pool-map-tasks`` no-op tasks with the Pool's
  default chunksize (loky is given the same; dask has no chunksize and sits this one out);
* **imap_unordered** - ``--pool-tasks`` no-op tasks, each result taken as it comes;
* **CPU-bound map** - ``--cpu-tasks`` tasks, each the SHA-256 of ``--cpu-mb`` MiB, default
  chunksize; every digest is checked.

Each is tasks per second from the call to its last result, and starts once the processes
are idle (a row's leftover work, such as dask's scheduler releasing thousands of futures, is
not measured as the next row's).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from ._harness import BenchConfig, fmt, print_lines, progress, ratio, render_table, rounds_note
from ._pool_contenders import CONTENDERS, Contender, default_chunksize, missing
from .executor import EXECUTOR_START_METHOD, WARM_TIMEOUT, hash_task

__all__ = [
    "MEASUREMENTS",
    "PoolReport",
    "PoolResult",
    "format_pool_goals",
    "format_pool_table",
    "noop_item",
    "print_pool_report",
    "run_pools",
]

#: The goals: pressure's Pool against multiprocessing.Pool.
MAP_GOAL, CPU_GOAL, COLD_GOAL = 0.8, 0.95, 3.0
#: Before each turn: the CPU of this process and its children over a window of
#: ``SETTLE_WINDOW`` s must be below ``SETTLE_IDLE`` of a core (CPU times count in 10-ms
#: ticks), waited for at most ``SETTLE_LIMIT`` s.
SETTLE_WINDOW, SETTLE_IDLE, SETTLE_LIMIT = 0.2, 0.15, 3.0


def noop_item(item: object) -> None:
    """The no-op task of ``map``: what is measured is the pool's own cost per task."""


def _pid_item(seconds: float) -> int:
    """Warm-up: hold a worker for ``seconds`` (so the others get tasks too); its pid."""
    time.sleep(seconds)
    return os.getpid()


def _check(results: list[object], expected: object, count: int) -> None:
    if len(results) != count:
        raise ValueError(f"{len(results)} results of {count} tasks")
    wrong = sum(result != expected for result in results)
    if wrong:
        raise ValueError(f"{wrong} of {count} tasks returned a wrong result")


def _rate(count: int, run: Callable[[], list[object]], expected: object) -> float:
    """Tasks per second of ``run`` (``count`` tasks; each result must be ``expected``)."""
    start = time.perf_counter()
    results = run()
    elapsed = time.perf_counter() - start
    _check(results, expected, count)
    return count / elapsed


def _map_chunks_1(pool: Contender, config: BenchConfig) -> float:
    return _rate(config.pool_tasks, lambda: pool.map(noop_item, range(config.pool_tasks), 1), None)


def _map_default(pool: Contender, config: BenchConfig) -> float:
    return _rate(config.pool_map_tasks, lambda: pool.map(noop_item, range(config.pool_map_tasks), None), None)


def _imap_unordered(pool: Contender, config: BenchConfig) -> float:
    return _rate(config.pool_tasks, lambda: list(pool.imap_unordered(noop_item, range(config.pool_tasks))), None)


def _cpu_map(pool: Contender, config: BenchConfig) -> float:
    expected = hash_task(config.cpu_mb)
    return _rate(config.cpu_tasks, lambda: pool.map(hash_task, [config.cpu_mb] * config.cpu_tasks, None), expected)


#: The warm measurements, in table order: (key, row label, measure, whether it needs a chunksize).
MEASUREMENTS: tuple[tuple[str, str, Callable[[Contender, BenchConfig], float], bool], ...] = (
    ("map1", "no-op map, chunksize 1", _map_chunks_1, False),
    ("map", "no-op map, default chunksize", _map_default, True),
    ("imap_unordered", "no-op imap_unordered", _imap_unordered, False),
    ("cpu", "CPU-bound map", _cpu_map, False),
)


@dataclass
class PoolResult:
    """One pool's best tasks/s of each measurement, its median (and best) cold start, or why
    it has none (``error``: it failed and sat out the rest; ``skipped``: not installed)."""

    key: str
    label: str
    chunks: bool = True
    rates: dict[str, float] = field(default_factory=dict)
    cold_s: float | None = None
    cold_best_s: float | None = None
    error: str | None = None
    skipped: str | None = None


@dataclass
class PoolReport:
    """The results, in table order, and the load average before and after the run."""

    results: list[PoolResult]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)


def _fail(result: PoolResult, step: str, exc: Exception) -> None:
    result.error = f"{step}: {type(exc).__name__}: {exc}"
    progress(f"  {result.label} failed: {result.error}")


def _cold_start(contender: type[Contender], config: BenchConfig, url: str) -> float:
    """Construct a pool, run one no-op task, close it: seconds to the first result."""
    start = time.perf_counter()
    pool = contender(config.workers, EXECUTOR_START_METHOD, url)
    try:
        pool.apply(noop_item, None)
        return time.perf_counter() - start
    finally:
        pool.close()


def _run_cold(url: str, config: BenchConfig, entries: list[tuple[type[Contender], PoolResult]]) -> None:
    """The cold start rounds, the pools taking turns; each one's median and best."""
    samples: dict[str, list[float]] = {result.key: [] for _, result in entries}
    for _ in range(max(config.start_rounds, config.repeat)):
        for contender, result in entries:
            if result.error:
                continue
            _settle()
            try:
                cold = _cold_start(contender, config, url)
            except Exception as exc:  # noqa: BLE001 - shown in the report's notes
                _fail(result, "cold start", exc)
                continue
            samples[result.key].append(cold)
            progress(f"  {result.label:<30} {'cold start':<28} {cold * 1000:>12.1f} ms")
    for _, result in entries:
        colds = samples[result.key]
        if colds and not result.error:
            result.cold_s, result.cold_best_s = statistics.median(colds), min(colds)


def _busy_cpu() -> float:
    """CPU seconds used so far by this process (its threads: the pools' result handlers,
    dask's scheduler) and its children (the pools' processes, a private redis-server) that
    are still alive."""
    me = psutil.Process()
    total = 0.0
    for child in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = child.cpu_times()
            total += times.user + times.system
    return total


def _settle() -> None:
    """Wait (up to ``SETTLE_LIMIT``) until the pools' processes are idle: a pool's work left
    over from its turn (dask's scheduler releasing thousands of futures) must not be
    measured as the next pool's."""
    deadline = time.monotonic() + SETTLE_LIMIT
    before = _busy_cpu()
    while time.monotonic() < deadline:
        time.sleep(SETTLE_WINDOW)
        now = _busy_cpu()
        if now - before < SETTLE_WINDOW * SETTLE_IDLE:
            return
        before = now


def _warm(pool: Contender, workers: int) -> None:
    """Return once each of the ``workers`` processes has run a task."""
    deadline = time.monotonic() + WARM_TIMEOUT
    pids: set[int] = set()
    while len(pids) < workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(pids)} of {workers} worker processes ran a task "
                               f"within {WARM_TIMEOUT:.0f} s")
        pids.update(pool.map(_pid_item, [0.05] * (2 * workers), 1))
    pool.map(noop_item, range(10 * workers), 1)


def _measure_round(contender: type[Contender], result: PoolResult, url: str, config: BenchConfig) -> None:
    """Start one pool, warm it up, take every measurement once (the best so far counts),
    close it. On a failure the error is recorded and the pool sits out the rest."""
    try:
        pool = contender(config.workers, EXECUTOR_START_METHOD, url)
    except Exception as exc:  # noqa: BLE001 - shown in the report's notes
        _fail(result, "start", exc)
        return
    step = "warm-up"
    try:
        _warm(pool, config.workers)
        for key, step, measure, needs_chunks in MEASUREMENTS:
            if needs_chunks and not result.chunks:
                continue
            _settle()
            began = time.monotonic()
            rate = measure(pool, config)
            result.rates[key] = max(rate, result.rates.get(key, 0.0))
            progress(f"  {result.label:<30} {step:<28} {rate:>12,.0f} tasks/s"
                     f"  ({time.monotonic() - began:.1f} s)")
    except Exception as exc:  # noqa: BLE001 - shown in the report's notes
        _fail(result, step, exc)
    finally:
        pool.close()


def run_pools(url: str, config: BenchConfig) -> PoolReport:
    """Cold start rounds, then ``repeat`` rounds in which each pool in turn is started,
    warmed up, measured on every row and closed (no other pool's processes or threads are
    alive while one is measured); each one's best counts. A pool that fails sits out the
    rest; one not installed is skipped (said on stderr and in the report)."""
    report = PoolReport([], os.getloadavg())
    entries: list[tuple[type[Contender], PoolResult]] = []
    for contender in CONTENDERS:
        result = PoolResult(contender.key, contender.label, contender.chunks, skipped=missing(contender))
        report.results.append(result)
        if result.skipped:
            progress(f"  {result.label}: skipped, {result.skipped}")
        else:
            entries.append((contender, result))
    _run_cold(url, config, entries)
    for _ in range(config.repeat):
        for contender, result in entries:
            if not result.error:
                _measure_round(contender, result, url, config)
    report.load_after = os.getloadavg()
    return report


# -- the report ---

def _baseline(results: list[PoolResult]) -> PoolResult | None:
    return next((r for r in results if r.key == "stdlib"), None)


def _rate_text(rate: float | None) -> str:
    """Tasks/s: whole numbers, with a decimal below 100 (the CPU-bound rates)."""
    return fmt(rate, 1 if rate is not None and rate < 100 else 0)


def format_pool_table(results: list[PoolResult]) -> list[str]:
    """One row per measurement, one column per pool that ran, each but the baseline with
    its ratio to multiprocessing.Pool (cold start: a time ratio, lower is faster; the
    others: tasks/s ratios, higher is faster)."""
    shown = [r for r in results if not r.skipped]
    base = _baseline(shown)
    header = ["measurement"]
    for r in shown:
        header += [r.label] if r is base else [r.label, "vs mp"]
    rows = [tuple(header)]
    cold = ["cold start ms, median (best)"]
    for r in shown:
        text = "error" if r.cold_s is None and r.error else fmt(None if r.cold_s is None else r.cold_s * 1000, 1)
        if r.cold_s is not None and r.cold_best_s is not None:
            text += f" ({r.cold_best_s * 1000:.1f})"
        cold += [text] if r is base else [text, fmt(ratio(r.cold_s, base.cold_s if base else None), 2, "x")]
    rows.append(tuple(cold))
    for key, label, _, needs_chunks in MEASUREMENTS:
        row = [label + " tasks/s"]
        for r in shown:
            rate = r.rates.get(key)
            text = "n/a" if needs_chunks and not r.chunks else (
                "error" if rate is None and r.error else _rate_text(rate))
            row += [text] if r is base else [text, fmt(ratio(rate, base.rates.get(key) if base else None), 2, "x")]
        rows.append(tuple(row))
    return render_table(rows)


def _goal(text: str, value: float | None, goal: float, at_most: bool = False) -> str:
    if value is None:
        return f"  {text:<58} {'n/a':>8}  MISS (no result)"
    met = value <= goal if at_most else value >= goal
    return f"  {text:<58} {value:>7.2f}x  {'PASS' if met else 'MISS'}"


def format_pool_goals(results: list[PoolResult]) -> list[str]:
    """The three pool goals, each PASS or MISS."""
    base = _baseline(results)
    ours = next((r for r in results if r.key == "pressure"), None)
    if base is None or ours is None:
        noop = cpu = cold = None
    else:
        noop = ratio(ours.rates.get("map"), base.rates.get("map"))
        cpu = ratio(ours.rates.get("cpu"), base.rates.get("cpu"))
        cold = ratio(ours.cold_s, base.cold_s)
    return [
        "goals (pool):",
        _goal(f"pressure Pool no-op map, default chunksize >= {MAP_GOAL}x", noop, MAP_GOAL),
        _goal(f"pressure Pool CPU-bound map >= {CPU_GOAL}x", cpu, CPU_GOAL),
        _goal(f"pressure Pool cold start <= {COLD_GOAL:g}x multiprocessing.Pool", cold, COLD_GOAL, at_most=True),
    ]


def _load(load: tuple[float, float, float]) -> str:
    return " ".join(f"{value:.2f}" for value in load)


def print_pool_report(report: PoolReport, config: BenchConfig) -> None:
    """The pool section: settings, table, skipped pools and errors, goals."""
    chunk = default_chunksize(config.pool_map_tasks, config.workers)
    print()
    print(f"pools: {config.workers} worker processes each (multiprocessing '{EXECUTOR_START_METHOD}'); cold "
          f"start (constructor to first result): median of {max(config.start_rounds, config.repeat)} rounds, "
          f"taking turns; then started and warmed up before measuring{rounds_note(config)}")
    print(f"  no-op: map of {config.pool_tasks:,} tasks with chunksize 1, of {config.pool_map_tasks:,} with "
          f"the default chunksize ({chunk:,}; loky is given the same, dask has none), imap_unordered of "
          f"{config.pool_tasks:,}; CPU-bound: map of {config.cpu_tasks:,} tasks, each SHA-256 of "
          f"{config.cpu_mb:,} MiB; load average {_load(report.load_before)} before, "
          f"{_load(report.load_after)} after")
    print_lines(format_pool_table(report.results))
    notes = [f"  - {r.label}: skipped, {r.skipped}" for r in report.results if r.skipped]
    notes += [f"  - {r.label} {r.error}" for r in report.results if r.error]
    if notes:
        print_lines(notes, "notes:")
    print_lines(format_pool_goals(report.results))

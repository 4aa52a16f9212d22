"""How a pressure.Executor's local worker processes end and are replaced: a task that ends
its worker with ``os._exit`` (any status, no signal) is a death like a SIGKILL (the task is
retried, then fails with WorkerLost; the worker is replaced), and ``max_tasks_per_child``
retires a worker after that many tasks, as ProcessPoolExecutor's does (a retirement is no
death: nothing is retried, lost or run twice).

Tasks live in tests/executor_tasks.py and leave evidence of each run in files, so what ran
(and where, and how often) is read independently of the futures.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
from pressure.keys import ExecutorKeys
from tests import executor_tasks as tasks
from tests.test_executor import (  # noqa: F401 - fixtures
    SOON,
    Gate,
    gate,
    keys_under,
    log,
    make_executor,
    outcome,
    wait_for,
)

FORKSERVER = multiprocessing.get_context("forkserver")


def shut_down(executor: pressure.Executor) -> None:
    """``shutdown(wait=True)``, which must return (from a thread: a hang fails the test)."""
    stopper = threading.Thread(target=executor.shutdown, daemon=True)
    stopper.start()
    stopper.join(SOON * 2)
    assert not stopper.is_alive(), "shutdown(wait=True) hung"


# -- a worker that exits without a signal -------------------------------------------------------


@pytest.mark.parametrize("code", [1, 0, 3])
def test_a_task_that_ends_its_worker_with_os_exit_fails_with_worker_lost_and_the_worker_is_replaced(
        make_executor: Callable[..., pressure.Executor], tmp_path: Path, code: int) -> None:
    """``os._exit(code)`` in a task, whatever the code: the worker's end is a death, as a
    SIGKILL is. The task is started max_attempts (2) times, each time in a worker that then
    exits, and fails with WorkerLost; the other tasks complete; each lost worker is replaced
    (the pool has its 2 workers again, none of them one that exited); shutdown returns. (The
    other tasks run 20 ms each, so workers take them one at a time: short tasks prefetched
    with the exiting one would have their replies lost with it, and be retried too.)"""
    ex = make_executor(max_workers=2, max_attempts=2, local_workers=True)
    path = str(tmp_path / "exits")
    exiting = ex.submit(tasks.exit_self, path, code)
    others = [ex.submit(tasks.sleep_then, i, 0.02) for i in range(6)]
    assert [f.result(timeout=SOON * 2) for f in others] == list(range(6))
    assert isinstance(exiting.exception(timeout=90), pressure.WorkerLost)
    assert [f.result(timeout=SOON) for f in [ex.submit(tasks.square, i) for i in range(6)]] == \
        [i * i for i in range(6)]
    exited = {int(line) for line in tasks.read_lines(path)}
    assert len(tasks.read_lines(path)) == 2 and len(exited) == 2
    pool = ex._core._pool
    assert pool is not None
    wait_for(lambda: (pool.alive(), {proc.pid for proc in pool.procs} & exited), lambda got: got == (2, set()))
    assert ex.statistics().lost == 1
    shut_down(ex)


def test_a_task_that_raises_system_exit_fails_with_it_as_in_process_pool_executor(
        make_executor: Callable[..., pressure.Executor]) -> None:
    """``sys.exit(3)`` in a task raises SystemExit, which ProcessPoolExecutor's worker catches
    and reports as the task's exception: so does pressure's (the worker lives on)."""
    import sys

    ex = make_executor(max_workers=1)
    pid = ex.submit(tasks.get_global).result(timeout=SOON)[1]
    with ProcessPoolExecutor(max_workers=1, mp_context=FORKSERVER) as pool:
        theirs = pool.submit(sys.exit, 3).exception(timeout=SOON)
    mine = ex.submit(sys.exit, 3).exception(timeout=SOON)
    assert type(mine) is type(theirs) is SystemExit and mine.args == theirs.args == (3,)
    assert ex.submit(tasks.get_global).result(timeout=SOON)[1] == pid


# -- max_tasks_per_child ------------------------------------------------------------------------


def test_max_tasks_per_child_retires_workers_without_losing_or_repeating_a_task(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, r: redis.Redis,
        log: str, caplog: pytest.LogCaptureFixture) -> None:
    """max_tasks_per_child=2, 2 workers, 10 tasks: every task runs once, no process runs more
    than 2 (so at least 5 processes run them), and a retired worker is no death: nothing is
    retried or lost, nothing is logged as a lost worker, and after shutdown no claim and
    nothing in flight is left."""
    name = "retire"
    ex = make_executor(name, max_workers=2, local_workers=True, max_tasks_per_child=2, mp_context=FORKSERVER)
    with caplog.at_level(logging.WARNING, logger="pressure"):
        futures = [ex.submit(tasks.record_then_sleep, log, f"t{i}", 0.0) for i in range(10)]
        results = [f.result(timeout=SOON * 3) for f in futures]
        assert [token for token, _, _ in results] == [f"t{i}" for i in range(10)]
        pids = [pid for _, _, pid in results]
        assert len(set(pids)) >= 5 and all(pids.count(pid) <= 2 for pid in pids), pids
        stats = ex.statistics()
        assert (stats.done, stats.retried, stats.lost) == (10, 0, 0)
        shut_down(ex)
    assert sorted(line.split()[0] for line in tasks.read_lines(log)) == sorted(f"t{i}" for i in range(10))
    assert r.hlen(ExecutorKeys.build(prefix, name).claims) == 0
    queue = pressure.Queue(f"{name}:tasks", url=url, prefix=prefix, reliable=True)
    try:
        assert queue.in_flight() == [] and queue.qsize() == 0
    finally:
        queue.disconnect()
    assert not [rec for rec in caplog.records if rec.levelno >= logging.WARNING], \
        [rec.getMessage() for rec in caplog.records]


def test_max_tasks_per_child_defaults_to_spawn_as_process_pool_executor_does(
        make_executor: Callable[..., pressure.Executor]) -> None:
    """Without an mp_context, max_tasks_per_child starts workers with 'spawn' (as
    ProcessPoolExecutor does: 'fork' is refused), and they run tasks."""
    ex = make_executor(max_workers=1, local_workers=True, max_tasks_per_child=1)
    pids = [ex.submit(tasks.get_global).result(timeout=SOON * 2)[1] for _ in range(2)]
    assert pids[0] != pids[1]
    assert ex._core._pool is not None and ex._core._pool.context.get_start_method() == "spawn"


BAD_MAX_TASKS = [
    ({"max_tasks_per_child": 0}, "0"),
    ({"max_tasks_per_child": -1}, "negative"),
    ({"max_tasks_per_child": "2"}, "str"),
    ({"max_tasks_per_child": 1.0}, "float"),
    ({"max_tasks_per_child": 1, "mp_context": multiprocessing.get_context("fork")}, "fork"),
    ({"max_tasks_per_child": 0, "mp_context": multiprocessing.get_context("fork")}, "0-fork"),
]


@pytest.mark.parametrize("kwargs", [kw for kw, _ in BAD_MAX_TASKS], ids=[i for _, i in BAD_MAX_TASKS])
def test_a_bad_max_tasks_per_child_raises_as_in_process_pool_executor_and_touches_nothing(
        url: str, prefix: str, r: redis.Redis, kwargs: dict[str, Any]) -> None:
    """The error ProcessPoolExecutor raises (its type and message: ValueError for < 1 or with
    the 'fork' start method, TypeError for a non-integer), before any key is created; from
    WorkerPool too."""
    from pressure.executor.worker import WorkerPool

    theirs = outcome(lambda: ProcessPoolExecutor(**kwargs))
    assert theirs[0] == "raised"
    assert outcome(lambda: pressure.Executor(url=url, prefix=prefix, **kwargs)) == theirs
    assert outcome(lambda: WorkerPool("x", url=url, prefix=prefix, **kwargs)) == theirs
    assert keys_under(r, prefix) == []


def test_max_tasks_per_child_is_keyword_only() -> None:
    import inspect

    for cls in (pressure.Executor, ProcessPoolExecutor):
        parameter = inspect.signature(cls).parameters["max_tasks_per_child"]
        assert (parameter.kind, parameter.default) == (inspect.Parameter.KEYWORD_ONLY, None)


def test_a_worker_near_its_max_tasks_per_child_takes_only_what_it_will_run(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, r: redis.Redis) -> None:
    """A worker with max_tasks_per_child=2 takes (prefetches) at most the 2 tasks it will run
    of 5 queued, then 1 after the first: none is held only to be given back as it retires."""
    from pressure.connection import ConnectionConfig
    from pressure.executor import worker

    name = "take"
    ex = make_executor(name, local_workers=False)
    futures = [ex.submit(tasks.square, i) for i in range(5)]
    wait_for(lambda: int(r.llen(f"{prefix}:{name}:tasks")), lambda n: n == 5)
    where = worker.WorkerConfig(name, ConnectionConfig.resolve(url), prefix, 30.0, max_tasks_per_child=2)
    w = worker._Worker(where, lambda: False)
    try:
        w.short = True  # as after a short task: it takes what is queued, up to what it will run
        w.fetch()
        assert len(w.held) == 2
        step = w.claim_next()
        assert step is not None
        w.done.append((step[0], w.run(*step)))
        assert not w.retired() and w.batch() == 1
        step = w.claim_next()
        assert step is not None
        w.done.append((step[0], w.run(*step)))
        assert w.retired()
        w.finish()
    finally:
        w.backend.disconnect()
    assert [f.result(timeout=SOON) for f in futures[:2]] == [0, 1]
    assert int(r.llen(f"{prefix}:{name}:tasks")) == 3


def test_the_worker_command_retires_its_processes_after_max_tasks_per_child(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, tmp_path: Path) -> None:
    """``python -m pressure worker NAME --processes 1 --max-tasks-per-child 1``: each task runs
    in a new process (replaced as it retires), and none is retried."""
    import contextlib
    import os
    import signal
    import subprocess
    import sys

    from tests.test_executor import REPO_ROOT

    name = "command"
    ex = make_executor(name, local_workers=False)
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pressure", "worker", name, "--url", url, "--prefix", prefix,
             "--processes", "1", "--max-tasks-per-child", "1"],
            start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL, stderr=err)
    try:
        pids = [ex.submit(tasks.get_global).result(timeout=SOON * 2)[1] for _ in range(3)]
        assert len(set(pids)) == 3, pids
        assert ex.statistics().retried == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=SOON) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(SOON)
    logged = (tmp_path / "stderr").read_text(errors="replace")
    assert logged.count("max_tasks_per_child") == 2, logged  # two processes retired (then stopped)
    assert "WARNING" not in logged and "ERROR" not in logged, logged  # no death, no recovery

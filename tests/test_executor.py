"""pressure.Executor against a private redis-server, compared call by call with
ProcessPoolExecutor wherever the two can be driven the same way.

Tasks live in tests/executor_tasks.py so that worker processes can import them.
Tasks that must prove they ran (or never ran) append a line to a file; tasks the
test must keep running block on a "release" file (``Gate``), so nothing here
relies on a sleep being long enough except where a duration is the point.

The failure tests SIGKILL single workers, a task's worker every time it runs, and a
whole worker group started with ``python -m pressure worker`` under another
PRESSURE_HOSTNAME (a stand-in for another host, whose dead workers only the
visibility timeout can reveal).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis

import pressure
from pressure._internal import internal
from pressure.testing import RedisServer
from pressure.executor.worker import WorkerPool
from tests import executor_tasks as tasks

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parent.parent
FORKSERVER = multiprocessing.get_context("forkserver")
#: Upper bound for anything that should happen "soon": generous, never a speed goal.
SOON = 30.0


# -- helpers -----------------------------------------------------------------------------


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """``('ok', value)`` or ``('raised', type, message)``: what a call did, comparable across executors."""
    try:
        return ("ok", call())
    except Exception as exc:  # noqa: BLE001 - the point is to compare it
        return ("raised", type(exc), str(exc))


def wait_for(get: Callable[[], T], predicate: Callable[[T], bool], timeout: float = SOON) -> T:
    """Poll ``get()`` until ``predicate`` holds for its value; return that value, or fail showing
    the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if predicate(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {timeout} s")
        time.sleep(0.05)


def remote_traceback(exc: BaseException) -> str:
    """The remote traceback text an executor attaches as ``__cause__`` (checked for its shape)."""
    cause = exc.__cause__
    assert cause is not None, f"{exc!r} has no __cause__"
    text = str(cause)
    assert text.startswith('\n"""\nTraceback (most recent call last):'), text
    assert text.endswith('"""'), text
    return text


@dataclass
class Gate:
    """Files through which blocking tasks (tasks.hold) report that they started and are let go."""

    started: Path
    release: Path

    def hold(self, executor: concurrent.futures.Executor, value: Any) -> Future[Any]:
        return executor.submit(tasks.hold, str(self.started), str(self.release), value)

    def wait_started(self, count: int) -> list[str]:
        return tasks.wait_for_lines(self.started, count, SOON)

    def open(self) -> None:
        self.release.touch()


@pytest.fixture
def gate(tmp_path: Path) -> Gate:
    return Gate(tmp_path / "started", tmp_path / "release")


@pytest.fixture
def log(tmp_path: Path) -> str:
    """A file tasks append to (tasks.record): the record of what ran."""
    return str(tmp_path / "log")


@pytest.fixture
def make_executor(url: str, prefix: str, gate: Gate) -> Iterator[Callable[..., pressure.Executor]]:
    """Build pressure executors on the private server; shut them all down at the end (held
    tasks are released first, so a failed test cannot hang in teardown)."""
    made: list[pressure.Executor] = []

    def make(name: str | None = None, **kw: Any) -> pressure.Executor:
        kw.setdefault("max_workers", 2)
        executor = pressure.Executor(name, url=url, prefix=prefix, **kw)
        made.append(executor)
        return executor

    yield make
    gate.open()
    for executor in made:
        executor.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def executor(make_executor: Callable[..., pressure.Executor]) -> pressure.Executor:
    return make_executor()


@pytest.fixture
def make_pool(gate: Gate) -> Iterator[Callable[..., ProcessPoolExecutor]]:
    """ProcessPoolExecutors (forkserver, as pressure's local workers) to compare with."""
    made: list[ProcessPoolExecutor] = []

    def make(**kw: Any) -> ProcessPoolExecutor:
        kw.setdefault("max_workers", 2)
        pool = ProcessPoolExecutor(mp_context=FORKSERVER, **kw)
        made.append(pool)
        return pool

    yield make
    gate.open()
    for pool in made:
        pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def pool(make_pool: Callable[..., ProcessPoolExecutor]) -> ProcessPoolExecutor:
    return make_pool()


def make_one(kind: str, request: pytest.FixtureRequest, **kw: Any) -> concurrent.futures.Executor:
    """A ProcessPoolExecutor (``kind="pool"``, the reference) or a pressure.Executor, built by
    the fixtures above (so both are shut down at the end)."""
    factory = request.getfixturevalue("make_pool" if kind == "pool" else "make_executor")
    return factory(**kw)  # type: ignore[no-any-return]


def keys_under(r: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(r.scan_iter(match=f"{prefix}:*"))


# -- submit, map ---------------------------------------------------------------------------


def test_submit_returns_a_real_future_with_the_result(executor: pressure.Executor,
                                                      pool: ProcessPoolExecutor) -> None:
    """submit() gives a concurrent.futures.Future whose result matches ProcessPoolExecutor's,
    positional and keyword arguments alike."""
    for ex in (executor, pool):
        future = ex.submit(tasks.add, 2, b=40)
        assert isinstance(future, Future)
        assert future.result(timeout=SOON) == 42
        assert future.done() and not future.cancelled() and future.exception() is None


def test_keyword_arguments_named_fn_and_self_pass_through(executor: pressure.Executor,
                                                          pool: ProcessPoolExecutor) -> None:
    """fn is positional-only: keyword arguments called fn and self reach the callable."""
    expected = ((1,), {"fn": 2, "self": 3})
    for ex in (executor, pool):
        assert ex.submit(tasks.echo, 1, fn=2, self=3).result(timeout=SOON) == expected


def test_submit_with_fn_as_keyword_raises_type_error(executor: pressure.Executor,
                                                     pool: ProcessPoolExecutor) -> None:
    """submit(fn=...) is a TypeError about the missing positional 'fn', as for ProcessPoolExecutor."""
    for ex in (executor, pool):
        with pytest.raises(TypeError, match=r"missing 1 required positional argument: 'fn'"):
            ex.submit(fn=tasks.square, x=3)  # type: ignore[call-arg]


def test_map_returns_results_in_input_order(executor: pressure.Executor,
                                            pool: ProcessPoolExecutor) -> None:
    """map() yields in input order even when later calls finish first (the first sleeps the
    longest), and stops at the shortest iterable, like ProcessPoolExecutor."""
    values = list(range(6))
    sleeps = [0.3, 0.2, 0.1, 0.0, 0.0, 0.0]
    expected = list(map(tasks.sleep_then, values, sleeps))
    for ex in (executor, pool):
        assert list(ex.map(tasks.sleep_then, values, sleeps + [5.0, 5.0], timeout=SOON)) == expected
        assert list(ex.map(tasks.add, range(10), range(4))) == [0, 2, 4, 6]


def test_map_with_chunksize_three_equals_chunksize_one(executor: pressure.Executor,
                                                       pool: ProcessPoolExecutor) -> None:
    """chunksize=3 gives the same results as chunksize=1 (and as ProcessPoolExecutor), and really
    sends chunks: 17 calls make 6 tasks."""
    expected = [x * x for x in range(17)]
    assert list(executor.map(tasks.square, range(17), chunksize=3)) == expected
    wait_for(executor.statistics, lambda s: s.done == 6)
    assert list(executor.map(tasks.square, range(17), chunksize=1)) == expected
    wait_for(executor.statistics, lambda s: s.done == 6 + 17)
    assert list(pool.map(tasks.square, range(17), chunksize=3)) == expected


def test_map_with_chunksize_below_one_raises_like_process_pool(executor: pressure.Executor,
                                                               pool: ProcessPoolExecutor) -> None:
    """chunksize=0: the same ValueError, with the same message."""
    assert outcome(lambda: executor.map(tasks.square, [1], chunksize=0)) == \
        outcome(lambda: pool.map(tasks.square, [1], chunksize=0)) == \
        ("raised", ValueError, "chunksize must be >= 1.")


def test_map_timeout_raises_builtin_timeout_error_during_iteration(executor: pressure.Executor,
                                                                   pool: ProcessPoolExecutor) -> None:
    """map(timeout=...) returns an iterator at once; iterating past the deadline raises the
    builtin TimeoutError (both executors started first, so their waits overlap)."""
    iterators = [ex.map(tasks.sleep_then, ["late"], [1.0], timeout=0.2) for ex in (executor, pool)]
    for it in iterators:
        with pytest.raises(TimeoutError) as info:
            next(it)
        assert type(info.value) is TimeoutError  # the builtin (concurrent.futures' is an alias)
        assert info.value.__cause__ is None  # the map's own timeout, not a task's exception


def test_task_raising_timeout_error_is_not_a_map_timeout(executor: pressure.Executor,
                                                         pool: ProcessPoolExecutor) -> None:
    """A TimeoutError raised by the task reaches the caller as that exception (its message, a
    remote traceback), not as the map's deadline."""
    for ex in (executor, pool):
        with pytest.raises(TimeoutError, match=r"^the task's own$") as info:
            list(ex.map(tasks.raise_timeout, ["the task's own"], timeout=SOON))
        assert "raise_timeout" in remote_traceback(info.value)


# -- exceptions and pickling -----------------------------------------------------------------


def test_exception_is_reraised_with_the_remote_traceback_as_cause(executor: pressure.Executor,
                                                                  pool: ProcessPoolExecutor) -> None:
    """The task's exception re-raises in the caller with its type and message, and __cause__
    holds the worker's traceback text (down to the nested frame that raised), as with
    ProcessPoolExecutor. An exception class with its own __init__ survives with its attributes."""
    for ex in (executor, pool):
        with pytest.raises(ValueError, match=r"^boom$") as info:
            ex.submit(tasks.fail, "boom").result(timeout=SOON)
        text = remote_traceback(info.value)
        assert "in _deep_failure" in text and "in fail" in text
        assert text.rstrip('"').rstrip().endswith("ValueError: boom")
        custom = ex.submit(tasks.raise_custom, 7, "seven").exception(timeout=SOON)
        assert isinstance(custom, tasks.CustomError)
        assert (custom.code, custom.text, custom.args) == (7, "seven", (7, "seven"))
        assert "CustomError: (7, 'seven')" in remote_traceback(custom)


def test_unpicklable_argument_fails_that_future_not_submit(executor: pressure.Executor,
                                                           pool: ProcessPoolExecutor) -> None:
    """An argument that cannot be pickled fails its future (same exception type and message as
    ProcessPoolExecutor) instead of making submit() raise; the executor keeps working."""
    seen = []
    for ex in (executor, pool):
        future = ex.submit(tasks.echo, threading.Lock())
        exc = future.exception(timeout=SOON)
        seen.append((type(exc), str(exc)))
        assert ex.submit(tasks.square, 5).result(timeout=SOON) == 25
    assert seen[0] == seen[1] == (TypeError, "cannot pickle '_thread.lock' object")


def test_unpicklable_result_fails_that_future_and_the_worker_keeps_working(
        make_executor: Callable[..., pressure.Executor],
        make_pool: Callable[..., ProcessPoolExecutor]) -> None:
    """A result that cannot be pickled fails its future with PicklingError; the single worker
    survives it (the next task runs in the same process) in both executors."""
    for ex in (make_executor(max_workers=1), make_pool(max_workers=1)):
        pid = ex.submit(os.getpid).result(timeout=SOON)
        exc = ex.submit(tasks.return_unpicklable).exception(timeout=SOON)
        assert isinstance(exc, pickle.PicklingError), repr(exc)
        assert ex.submit(os.getpid).result(timeout=SOON) == pid


# -- shutdown ----------------------------------------------------------------------------------


def test_shutdown_wait_true_waits_for_the_work(make_executor: Callable[..., pressure.Executor],
                                               make_pool: Callable[..., ProcessPoolExecutor]) -> None:
    """shutdown(wait=True) returns only once submitted work has finished."""
    for ex in (make_executor(), make_pool()):
        futures = [ex.submit(tasks.sleep_then, i, 0.3) for i in range(3)]
        ex.shutdown(wait=True)
        assert all(f.done() for f in futures)
        assert [f.result() for f in futures] == [0, 1, 2]


def test_shutdown_wait_false_returns_at_once_and_the_work_completes(
        make_executor: Callable[..., pressure.Executor], make_pool: Callable[..., ProcessPoolExecutor],
        r: redis.Redis, prefix: str) -> None:
    """shutdown(wait=False) returns while the work still runs (its future is not done yet), the
    work completes all the same, and the anonymous executor's keys go once it has."""
    executors: list[concurrent.futures.Executor] = [make_executor(), make_pool()]
    futures = [ex.submit(tasks.sleep_then, "finished", 1.0) for ex in executors]
    for ex, future in zip(executors, futures):
        ex.shutdown(wait=False)
        assert not future.done()
    assert [f.result(timeout=SOON) for f in futures] == ["finished", "finished"]
    wait_for(lambda: keys_under(r, prefix), lambda keys: keys == [])


def test_submit_after_shutdown_raises_runtime_error(executor: pressure.Executor,
                                                    pool: ProcessPoolExecutor) -> None:
    """After shutdown, submit raises RuntimeError with the stdlib's message."""
    seen = []
    for ex in (executor, pool):
        ex.submit(tasks.square, 2).result(timeout=SOON)
        ex.shutdown()
        seen.append(outcome(lambda: ex.submit(tasks.square, 2)))  # noqa: B023 - called at once
    assert seen[0] == seen[1] == ("raised", RuntimeError, "cannot schedule new futures after shutdown")


def test_shutdown_cancel_futures_cancels_pending_tasks_which_never_run(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, gate: Gate,
        log: str) -> None:
    """shutdown(cancel_futures=True) cancels every pending future while the running one
    finishes. The worker outlives the executor and reaches the cancelled tasks later; a
    sentinel task sent afterwards through the same (FIFO) task queue runs, and still none of
    the cancelled tasks ever ran."""
    with WorkerPool("jobs", url=url, prefix=prefix, processes=1):
        ex = make_executor("jobs", local_workers=False)
        running = gate.hold(ex, "running")
        pending = [ex.submit(tasks.record, log, f"pending-{i}") for i in range(5)]
        gate.wait_started(1)
        threading.Timer(0.5, gate.open).start()
        ex.shutdown(wait=True, cancel_futures=True)
        assert running.result(timeout=0)[0] == "running"
        assert [f.cancelled() for f in pending] == [True] * 5
        sentinel = make_executor("jobs", local_workers=False)
        assert sentinel.submit(tasks.record, log, "sentinel").result(timeout=SOON) == "sentinel"
        assert tasks.read_lines(log) == ["sentinel"]


def test_shutdown_cancel_futures_in_process_pool_never_runs_cancelled(
        make_pool: Callable[..., ProcessPoolExecutor], gate: Gate, log: str) -> None:
    """The same scenario on ProcessPoolExecutor (reference behaviour): a future is cancelled
    exactly when its call never ran (it sends a few ahead to its workers, which do run)."""
    pool = make_pool(max_workers=1)
    gate.hold(pool, "running")
    pending = [pool.submit(tasks.record, log, f"pending-{i}") for i in range(5)]
    gate.wait_started(1)
    threading.Timer(0.5, gate.open).start()
    pool.shutdown(wait=True, cancel_futures=True)
    ran = set(tasks.read_lines(log))
    assert [f.cancelled() for f in pending] == [f"pending-{i}" not in ran for i in range(5)]
    assert sum(f.cancelled() for f in pending) >= 3


# -- cancel, wait, as_completed ------------------------------------------------------------------


def test_cancel_of_a_running_task_returns_false_and_it_completes(
        make_executor: Callable[..., pressure.Executor], make_pool: Callable[..., ProcessPoolExecutor],
        gate: Gate) -> None:
    """Future.cancel() on a task a worker has started returns False; the task completes."""
    executors: list[concurrent.futures.Executor] = [make_executor(max_workers=1), make_pool(max_workers=1)]
    futures = [gate.hold(ex, name) for ex, name in zip(executors, ["pressure", "pool"])]
    gate.wait_started(2)
    for future in futures:
        assert future.cancel() is False
        assert not future.cancelled() and not future.done()
    gate.open()
    assert [f.result(timeout=SOON)[0] for f in futures] == ["pressure", "pool"]


def test_cancel_of_a_pending_task_returns_true_and_it_never_runs(
        make_executor: Callable[..., pressure.Executor], gate: Gate, log: str) -> None:
    """A pending future cancels (True); the single worker reaches it later and skips it: a task
    queued after it runs, the cancelled one never does."""
    ex = make_executor(max_workers=1)
    gate.hold(ex, "running")
    doomed = ex.submit(tasks.record, log, "doomed")
    after = ex.submit(tasks.record, log, "after")
    gate.wait_started(1)
    assert doomed.cancel() is True
    assert doomed.cancelled() and doomed.done()
    with pytest.raises(concurrent.futures.CancelledError):
        doomed.result()
    gate.open()
    assert after.result(timeout=SOON) == "after"
    assert tasks.read_lines(log) == ["after"]


def test_cancel_of_a_task_being_sent_waits_for_the_send_and_it_never_runs(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, log: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancel() that finds its task being sent (off the outbox, the round trip that marks
    and puts it not answered) waits for that round trip, then cancels it in Redis: True, and
    it never runs. It was False and the task ran (a rare CI failure of
    test_executor_map_current_future_cancel). The sender's round trip is held here, in the
    sender thread only; everything else is real."""
    ex = make_executor("held", local_workers=False)
    first = ex.submit(tasks.record, log, "first")  # sent by submit itself; the sender thread starts
    link = internal(ex._core._tasks)
    held, release = threading.Event(), threading.Event()
    send = link.pipeline

    def held_send(calls: Any, *, pooled: bool = False) -> list[Any]:
        if threading.current_thread().name.startswith("pressure-submit-"):
            held.set()
            assert release.wait(SOON)
        return send(calls, pooled=pooled)

    monkeypatch.setattr(link, "pipeline", held_send)
    doomed = ex.submit(tasks.record, log, "doomed")
    assert held.wait(SOON)
    answer: list[bool] = []
    canceller = threading.Thread(target=lambda: answer.append(doomed.cancel()))
    canceller.start()
    canceller.join(0.2)
    assert canceller.is_alive() and not answer  # waiting for the round trip (it cannot end before)
    release.set()
    canceller.join(SOON)
    assert answer == [True] and doomed.cancelled()
    with WorkerPool("held", url=url, prefix=prefix, processes=1):
        last = ex.submit(tasks.record, log, "last")
        assert (first.result(timeout=SOON), last.result(timeout=SOON)) == ("first", "last")
    assert tasks.read_lines(log) == ["first", "last"]


@pytest.mark.parametrize("kind", ["pool", "pressure"])
def test_wait_and_as_completed_see_a_cancelled_future(kind: str, request: pytest.FixtureRequest,
                                                      gate: Gate) -> None:
    """After a pending future is cancelled, wait() and as_completed() report it as finished
    (ProcessPoolExecutor does so as soon as its queue reaches the cancelled call)."""
    ex = make_one(kind, request, max_workers=1)
    gate.hold(ex, "running")
    pending = [ex.submit(tasks.square, i) for i in range(5)]
    assert pending[-1].cancel() is True
    gate.open()
    done, not_done = concurrent.futures.wait([pending[-1]], timeout=3)
    assert done == {pending[-1]} and not not_done
    assert list(concurrent.futures.as_completed([pending[-1]], timeout=3)) == [pending[-1]]


@pytest.mark.parametrize("kind", ["pool", "pressure"])
def test_running_is_true_while_a_worker_runs_the_task(kind: str, request: pytest.FixtureRequest,
                                                      gate: Gate) -> None:
    """Future.running() is True while a worker runs the call (which can then not be cancelled)."""
    future = gate.hold(make_one(kind, request, max_workers=1), kind)
    gate.wait_started(1)
    wait_for(future.running, bool, timeout=3)
    gate.open()
    assert future.result(timeout=SOON)[0] == kind


def test_wait_and_as_completed_mix_pressure_and_thread_futures(
        executor: pressure.Executor, gate: Gate) -> None:
    """wait() and as_completed() take pressure futures and a ThreadPoolExecutor's futures
    together: FIRST_EXCEPTION stops at a failed pressure task while another is still held,
    as_completed's timeout names the unfinished count in the stdlib's words, and once the
    held task is released every future is reported exactly once. (The held task is
    submitted last, so no worker can hold the others back behind it.)"""
    with ThreadPoolExecutor(2) as threads:
        failing = executor.submit(tasks.fail, "first exception")
        quick = executor.submit(tasks.square, 3)
        held = gate.hold(executor, "held")
        threaded = threads.submit(tasks.square, 4)
        everything = {held, quick, failing, threaded}
        done, not_done = concurrent.futures.wait(everything, timeout=SOON,
                                                 return_when=concurrent.futures.FIRST_EXCEPTION)
        assert failing in done and held in not_done
        yielded = []
        with pytest.raises(TimeoutError, match=r"^1 \(of 2\) futures unfinished$"):
            for future in concurrent.futures.as_completed([held, threaded], timeout=0.5):
                yielded.append(future)  # noqa: PERF402 - those yielded before the timeout
        assert yielded == [threaded]
        gate.open()
        done, not_done = concurrent.futures.wait(everything, timeout=SOON)
        assert done == everything and not not_done
        assert set(concurrent.futures.as_completed(everything, timeout=SOON)) == everything
        assert (held.result()[0], quick.result(), threaded.result()) == ("held", 9, 16)


@pytest.mark.parametrize("kind", ["pool", "pressure"])
def test_an_idle_worker_takes_a_task_queued_behind_a_long_one(kind: str, request: pytest.FixtureRequest,
                                                              gate: Gate) -> None:
    """Two workers, a long task then a quick one submitted together: the quick one completes
    while the long one still runs. ProcessPoolExecutor guarantees this (an idle worker takes
    the next call); without it, two tasks that wait for each other deadlock."""
    ex = make_one(kind, request, max_workers=2)
    held = gate.hold(ex, "held")
    quick = ex.submit(tasks.square, 3)
    assert quick.result(timeout=5) == 9
    assert not held.done()
    gate.open()
    assert held.result(timeout=SOON)[0] == "held"


# -- constructor and initializer ------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{"max_workers": 0}, {"max_workers": -1},
                                    {"initializer": 42}, {"initializer": "not callable"}],
                         ids=["zero-workers", "negative-workers", "int-initializer", "str-initializer"])
def test_constructor_errors_match_process_pool(url: str, prefix: str, kwargs: dict[str, Any]) -> None:
    """Bad max_workers / initializer raise the same exception with the same message."""
    mine = outcome(lambda: pressure.Executor(url=url, prefix=prefix, **kwargs))
    theirs = outcome(lambda: ProcessPoolExecutor(mp_context=FORKSERVER, **kwargs))
    assert mine == theirs
    assert mine[0] == "raised" and mine[2] in ("max_workers must be greater than 0",
                                               "initializer must be a callable")


def test_initializer_runs_in_each_worker(make_executor: Callable[..., pressure.Executor],
                                         make_pool: Callable[..., ProcessPoolExecutor],
                                         tmp_path: Path) -> None:
    """initializer(*initargs) runs in every worker process: two calls that can only return
    together (a barrier; the second sent once the first is running) run in two processes,
    and both see what the initializer set."""
    for n, ex in enumerate([make_executor(max_workers=2, initializer=tasks.set_global,
                                          initargs=("ready",)),
                            make_pool(max_workers=2, initializer=tasks.set_global, initargs=("ready",))]):
        barrier = str(tmp_path / f"barrier-{n}")
        first = ex.submit(tasks.wait_at_barrier, barrier, 2)
        tasks.wait_for_lines(barrier, 1, SOON)  # running (and blocked) before the second is sent
        second = ex.submit(tasks.wait_at_barrier, barrier, 2)
        results = [f.result(timeout=SOON) for f in (first, second)]
        assert [value for value, _ in results] == ["ready", "ready"]
        assert len({pid for _, pid in results}) == 2


def test_failing_initializer_breaks_the_executor(make_executor: Callable[..., pressure.Executor],
                                                 make_pool: Callable[..., ProcessPoolExecutor]) -> None:
    """A failing initializer: the pending future fails with BrokenExecutor, and so does every
    later submit, as with ProcessPoolExecutor (BrokenProcessPool)."""
    mine = make_executor(max_workers=1, initializer=tasks.failing_initializer)
    for ex in (mine, make_pool(max_workers=1, initializer=tasks.failing_initializer)):
        future = ex.submit(tasks.square, 2)
        with pytest.raises(concurrent.futures.BrokenExecutor):
            future.result(timeout=SOON)
        with pytest.raises(concurrent.futures.BrokenExecutor):
            ex.submit(tasks.square, 3)
    with pytest.raises(pressure.BrokenExecutor, match="initializer failed"):
        mine.submit(tasks.square, 4)


# -- statistics and backpressure ----------------------------------------------------------------


def test_statistics_count_queued_running_done_failed_and_workers(executor: pressure.Executor,
                                                                 gate: Gate) -> None:
    """statistics(): two held tasks running and three queued; then 4 done and 1 failed, nothing
    retried or lost, and exactly the two worker processes alive (named by their pids)."""
    held = []
    for i in range(2):  # the second once the first runs: each worker holds one
        held.append(gate.hold(executor, i))
        gate.wait_started(i + 1)
    rest = [executor.submit(tasks.square, 2), executor.submit(tasks.fail, "x"),
            executor.submit(tasks.square, 3)]
    stats = wait_for(executor.statistics, lambda s: s.running == 2 and s.queued == 3)
    assert (stats.done, stats.failed) == (0, 0)
    gate.open()
    concurrent.futures.wait(held + rest, timeout=SOON)
    # a worker's first heartbeat (its record in `workers`) waits for its first replies to go
    # out, or 0.25 s: it may follow them by a round trip or two
    stats = wait_for(executor.statistics, lambda s: (s.done, s.failed) == (4, 1) and len(s.workers) == 2)
    assert (stats.queued, stats.running, stats.retried, stats.lost) == (0, 0, 0, 0)
    pids = {f.result()[1] for f in held}
    assert len(pids) == 2 and len(stats.workers) == 2
    assert {int(worker.split(":")[1]) for worker in stats.workers} == pids
    assert executor.workers_alive() == 2


def test_max_pending_makes_submit_block_until_a_worker_takes_a_task(
        make_executor: Callable[..., pressure.Executor], gate: Gate) -> None:
    """max_pending=2: with the only worker held and two tasks queued, a third submit blocks
    (still blocked 0.5 s later, queue at 2) and returns once the worker takes the next task."""
    ex = make_executor(max_workers=1, max_pending=2)
    held = gate.hold(ex, "held")
    gate.wait_started(1)
    queued = [ex.submit(tasks.square, 2), ex.submit(tasks.square, 3)]
    blocked: list[Future[Any]] = []
    submitter = threading.Thread(target=lambda: blocked.append(ex.submit(tasks.square, 4)))
    submitter.start()
    submitter.join(0.5)
    assert submitter.is_alive() and not blocked
    assert ex.statistics().queued == 2
    gate.open()
    submitter.join(SOON)
    assert not submitter.is_alive()
    assert [f.result(timeout=SOON) for f in [*queued, *blocked]] == [4, 9, 16]
    assert held.result()[0] == "held"


def test_tasks_and_replies_sent_in_one_call_each_meet_a_bound_partway(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, r: redis.Redis) -> None:
    """The sender puts a batch of tasks in one put.lua call, and a worker its replies: when the
    task queue's bound (set here by another client) takes only some, the rest go in the
    patient way, in order; the same for replies meeting a bounded result queue. Every task
    runs once and every future gets its own result."""
    ex = make_executor("bounded-elsewhere", local_workers=False)
    r.set(f"{prefix}:bounded-elsewhere:tasks:bound", 3)
    results_bound = [k for k in keys_under(r, prefix) if b":results:" in k and k.endswith(b":bound")]
    assert len(results_bound) == 1
    r.set(results_bound[0], 2)
    futures = [ex.submit(tasks.square, i) for i in range(12)]
    wait_for(lambda: r.llen(f"{prefix}:bounded-elsewhere:tasks"), lambda n: n == 3)
    time.sleep(0.3)  # the rest wait for room: the bound holds
    assert r.llen(f"{prefix}:bounded-elsewhere:tasks") == 3 and not any(f.done() for f in futures)
    with WorkerPool("bounded-elsewhere", url=url, prefix=prefix, processes=1):
        assert [f.result(timeout=SOON) for f in futures] == [i * i for i in range(12)]
    assert ex.statistics().retried == 0


# -- keys -----------------------------------------------------------------------------------------


def test_anonymous_executor_leaves_no_keys(url: str, prefix: str, r: redis.Redis) -> None:
    """An anonymous executor's keys (task queue, result queue, its bookkeeping) exist while it
    works and are all gone after shutdown."""
    with pressure.Executor(url=url, prefix=prefix, max_workers=1) as ex:
        assert ex.submit(tasks.fail, "counted").exception(timeout=SOON) is not None
        assert ex.submit(tasks.square, 2).result(timeout=SOON) == 4
        during = keys_under(r, prefix)
        assert any(b":tasks" in k for k in during) and any(b":results:" in k for k in during)
        assert any(b":executor:" in k for k in during)
    assert keys_under(r, prefix) == []


def test_named_executor_task_queue_survives_shutdown(make_executor: Callable[..., pressure.Executor],
                                                     url: str, prefix: str, r: redis.Redis) -> None:
    """A named executor with no worker anywhere: shutdown(wait=False) leaves its tasks queued in
    Redis; workers that join later run them and the futures complete; afterwards the task
    queue still exists while this executor's result queue is gone."""
    ex = make_executor("survivor", local_workers=False)
    futures = [ex.submit(tasks.square, i) for i in range(3)]
    ex.shutdown(wait=False)
    wait_for(lambda: r.llen(f"{prefix}:survivor:tasks"), lambda n: n == 3)  # submit sends in the background
    assert not any(f.done() for f in futures)
    with WorkerPool("survivor", url=url, prefix=prefix, processes=1):
        assert [f.result(timeout=SOON) for f in futures] == [0, 1, 4]
    keys = wait_for(lambda: keys_under(r, prefix), lambda ks: not any(b":results:" in k for k in ks))
    assert f"{prefix}:survivor:tasks:bound".encode() in keys


def test_executors_sharing_a_name_share_workers_and_keep_their_own_results(
        make_executor: Callable[..., pressure.Executor]) -> None:
    """A second executor of the same name finds the first one's workers alive and starts
    none; the tasks both submit, interleaved, run in those workers and each result reaches
    the executor that submitted it."""
    first = make_executor("shared", max_workers=1)
    pid = first.submit(os.getpid).result(timeout=SOON)
    wait_for(first.workers_alive, lambda n: n == 1)
    second = make_executor("shared", max_workers=1)
    executors = {"first": first, "second": second}
    futures = [executors[tag].submit(tasks.echo, tag, i) for i in range(5) for tag in executors]
    assert [f.result(timeout=SOON) for f in futures] == [((tag, i), {}) for i in range(5)
                                                         for tag in executors]
    assert second.submit(os.getpid).result(timeout=SOON) == pid
    assert first.workers_alive() == 1


# -- failures -------------------------------------------------------------------------------------


def test_worker_killed_mid_task_is_redelivered_and_completes(executor: pressure.Executor,
                                                             log: str) -> None:
    """A worker SIGKILLed mid-task (pid from the task's own "started" line): the task runs again
    in another process, its future completes, and statistics count the retry."""
    future = executor.submit(tasks.record_then_sleep, log, "victim", 1.0)
    (line,) = tasks.wait_for_lines(log, 1, SOON)
    victim = int(line.split()[2])
    os.kill(victim, signal.SIGKILL)
    token, _, pid = future.result(timeout=SOON)
    assert token == "victim" and pid != victim
    assert [int(line.split()[2]) for line in tasks.read_lines(log)] == [victim, pid]
    stats = executor.statistics()
    assert stats.retried >= 1 and stats.lost == 0 and stats.done == 1


def test_task_that_kills_its_worker_every_time_fails_with_worker_lost(
        make_executor: Callable[..., pressure.Executor], log: str) -> None:
    """A task that SIGKILLs its worker on every run, max_attempts=2: it runs exactly twice, its
    future fails with WorkerLost naming the task, the other tasks complete, and the executor
    is not broken (it accepts and runs new work)."""
    ex = make_executor(max_workers=2, max_attempts=2)
    killer = ex.submit(tasks.kill_self, log)
    others = [ex.submit(tasks.square, i) for i in range(6)]
    exc = killer.exception(timeout=60)
    assert isinstance(exc, pressure.WorkerLost)
    assert isinstance(exc, pressure.BrokenExecutor) and isinstance(exc, concurrent.futures.BrokenExecutor)
    assert killer._task_id in str(exc)  # type: ignore[attr-defined]
    assert [f.result(timeout=SOON) for f in others] == [i * i for i in range(6)]
    assert len(tasks.read_lines(log)) == 2
    assert ex.submit(tasks.square, 9).result(timeout=SOON) == 81
    stats = ex.statistics()
    assert stats.lost == 1 and stats.retried >= 1


def start_worker_group(host: str, name: str, url: str, prefix: str, stderr: Path) -> subprocess.Popen[bytes]:
    """``python -m pressure worker --create`` with two processes (it starts before its executor),
    in its own process group and posing as ``host``."""
    env = {**os.environ, "PRESSURE_HOSTNAME": host, "PYTHONPATH": str(REPO_ROOT)}
    with open(stderr, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "pressure", "worker", name, "--url", url, "--prefix", prefix,
             "--processes", "2", "--visibility-timeout", "3", "--create"],
            start_new_session=True, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=err)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=SOON)


def test_worker_group_killed_on_one_host_its_tasks_complete_on_the_other(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, tmp_path: Path,
        log: str) -> None:
    """Two worker groups posing as host-a and host-b; the executor starts no local worker.
    Four long-ish tasks, one per worker (two on each host); host-a's whole process group is
    SIGKILLed mid-task. Every future still completes, each on host-b (after the visibility
    timeout: host-b cannot see host-a's processes), none is lost, and the retries are
    counted."""
    groups: list[subprocess.Popen[bytes]] = []
    try:
        for host in ("host-a", "host-b"):
            groups.append(start_worker_group(host, "hosts", url, prefix, tmp_path / f"{host}.log"))
        ex = make_executor("hosts", local_workers=False, visibility_timeout=3.0)
        wait_for(lambda: ex.statistics().workers,
                 lambda ws: sorted(w.split(":")[0] for w in ws) == ["host-a"] * 2 + ["host-b"] * 2)
        futures = []
        for i in range(4):  # each sent once the previous one runs: one per worker
            futures.append(ex.submit(tasks.record_then_sleep, log, f"t{i}", 2.0))
            started = tasks.wait_for_lines(log, i + 1, SOON)
        on_a = {line.split()[0] for line in started if line.split()[1] == "host-a"}
        assert len(on_a) == 2, started
        kill_group(groups[0])
        results = [f.result(timeout=SOON) for f in futures]
        assert [token for token, _, _ in results] == [f"t{i}" for i in range(4)]
        assert {host for _, host, _ in results} == {"host-b"}
        runs = [line.split()[0] for line in tasks.read_lines(log)]
        assert sorted(runs) == sorted([f"t{i}" for i in range(4)] + list(on_a))
        stats = ex.statistics()
        assert stats.retried >= len(on_a) and stats.lost == 0
    finally:
        for proc in groups:
            kill_group(proc)


def test_a_redis_restart_loses_no_task_and_breaks_nothing(prefix: str) -> None:
    """Redis (with an append-only file) is killed and restarted while tasks run: the executor's
    result thread and the workers wait for it and carry on; every future completes."""
    with RedisServer(appendonly=True) as srv, \
            pressure.Executor(url=srv.url, prefix=prefix, max_workers=2) as ex:
        first = [ex.submit(tasks.sleep_then, i, 0.05) for i in range(20)]
        assert first[0].result(timeout=SOON) == 0
        srv.restart()
        later = [ex.submit(tasks.square, i) for i in range(20)]
        assert [f.result(timeout=60) for f in first] == list(range(20))
        assert [f.result(timeout=60) for f in later] == [i * i for i in range(20)]
        assert ex.submit(tasks.square, 7).result(timeout=SOON) == 49


def test_a_short_tasks_result_is_not_held_back_by_a_long_task_prefetched_with_it(
        make_executor: Callable[..., pressure.Executor]) -> None:
    """One worker prefetches the second and third tasks together (after a short first one):
    the second's result went out only when the long third one ended (CPython's
    test_map_timeout, run alone, saw it). Now a task running longer than SHORT_TASK sends the
    results finished before it."""
    ex = make_executor(max_workers=1)
    futures = [ex.submit(tasks.sleep_then, i, seconds) for i, seconds in enumerate([0.0, 0.0, 10.0])]
    assert futures[0].result(timeout=60) == 0  # the worker is up
    assert futures[1].result(timeout=6) == 1  # before: only once the 10 s task had ended
    assert not futures[2].done()

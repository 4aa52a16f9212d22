"""Executor start-up and shutdown without polling: a worker waiting for a task, and a get
waiting on a queue, are woken through Redis (wake.lua) when told to stop, instead of at
the end of their wait; nothing is taken from the queue by the wake. Liveness only (no
timing): each wait here would otherwise last an hour."""

from __future__ import annotations

import operator
import os
import threading
from typing import Any

import pytest
import redis

import pressure
from pressure._internal import attach, internal
from pressure.config import ConnectionConfig
from pressure.executor import worker
from pressure.executor._initializer import no_initializer
from pressure.executor.worker import WorkerConfig, WorkerPool, run_worker
from pressure.keys import ExecutorKeys, QueueKeys
from tests.test_executor import SOON, wait_for

HOUR = 3600.0


def _waiter(r: redis.Redis, prefix: str, name: str) -> bytes | None:
    value: bytes | None = r.get(QueueKeys.build(prefix, name).waiter)
    return value


def test_a_waiting_get_ends_when_woken_and_interrupted(url: str, prefix: str, r: redis.Redis) -> None:
    q: pressure.Queue[Any] = pressure.Queue("wake", url=url, prefix=prefix, reliable=True)
    stop = threading.Event()
    outcome: list[Any] = []

    def consume() -> None:
        try:
            outcome.append(internal(q).receive(HOUR, stop.is_set))
        except pressure.Empty as exc:
            outcome.append(exc)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    wait_for(lambda: _waiter(r, prefix, "wake"), bool)
    # woken but not interrupted: it waits on (a wake takes nothing and ends nothing)
    assert internal(q).wake_waiter()
    t.join(0.2)
    assert t.is_alive()
    stop.set()
    wait_for(lambda: internal(q).wake_waiter() or not t.is_alive(), bool)
    t.join(SOON)
    assert not t.is_alive() and isinstance(outcome[0], pressure.Empty)
    # the role is given back and nothing was taken: a put and a get work as before
    q.put("x")
    assert q.get(timeout=SOON) == "x"
    q.task_done()
    assert internal(q).wake_waiter() is False  # nobody waits now


def _two_idle_workers(url: str, prefix: str, name: str
                      ) -> tuple[threading.Event, list[threading.Thread], redis.Redis, str]:
    """Two workers of executor ``name`` in threads of this process, once one of them waits
    for a task: their stop event, their threads, a client, the task queue's name."""
    stop = threading.Event()
    where = WorkerConfig(name, ConnectionConfig.resolve(url), prefix, 30.0)
    threads = [threading.Thread(target=run_worker, args=(where, stop.is_set), daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    r = redis.Redis.from_url(url)
    tasks = ExecutorKeys.build(prefix, name).tasks
    wait_for(lambda: _waiter(r, prefix, tasks), bool)
    return stop, threads, r, tasks


def test_an_idle_worker_stops_when_woken(url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the fix a worker saw the stop only when its 0.5 s wait ended; with that wait
    made an hour long, it stops only if the wake reaches it."""
    monkeypatch.setattr(worker, "_POLL", HOUR)
    stop, threads, r, tasks = _two_idle_workers(url, prefix, "idle")
    stop.set()
    queue = attach(pressure.Queue, tasks, ConnectionConfig.resolve(url), prefix=prefix, reliable=True,
                   create=False)
    # one worker is the waiter; the other waits for the consumer role it gives back (or, if it
    # became the waiter just before it saw the stop, is woken by the next wake: as WorkerPool.stop)
    wait_for(lambda: (internal(queue).wake_waiter(), not any(t.is_alive() for t in threads))[1], bool)
    for t in threads:
        t.join(SOON)
        assert not t.is_alive()
    r.close()


def test_pool_stop_wakes_its_idle_workers(url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "_POLL", HOUR)  # inherited by the forked workers
    pool = WorkerPool("pool", url=url, prefix=prefix, processes=2)
    if pool.context.get_start_method() != "fork":
        pytest.skip("the patched wait reaches only forked workers")
    pool.start()
    r = redis.Redis.from_url(url)
    tasks = ExecutorKeys.build(prefix, "pool").tasks
    try:
        wait_for(lambda: _waiter(r, prefix, tasks), bool)
        pool.stop(timeout=SOON)
        assert [p.exitcode for p in pool.procs] == [0, 0]
    finally:
        for p in pool.procs:
            if p.is_alive():
                os.kill(p.pid, 9)
        r.close()


def test_shutdown_of_an_idle_executor_wakes_everything(url: str, prefix: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The result thread and the workers, each waiting an hour, end at shutdown."""
    from pressure.executor import _core

    monkeypatch.setattr(worker, "_POLL", HOUR)
    monkeypatch.setattr(_core, "_POLL", HOUR)
    ex = pressure.Executor(url=url, prefix=prefix, max_workers=2, local_workers=True)
    if ex._core._pool is None and ex.submit(abs, -1).result(timeout=SOON) != 1:
        raise AssertionError
    pool = ex._core._pool
    assert pool is not None
    if pool.context.get_start_method() != "fork":
        pytest.skip("the patched wait reaches only forked workers")
    done = threading.Event()
    threading.Thread(target=lambda: (ex.shutdown(wait=True), done.set()), daemon=True).start()
    assert done.wait(SOON)
    assert all(p.exitcode == 0 for p in pool.procs)


def _exit_quietly() -> None:
    """A forked child's whole life: it ends as multiprocessing ends it (threading's exit hooks)."""


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="no fork")
def test_a_forked_child_leaves_the_parents_executor_alone(url: str, prefix: str) -> None:
    """Local workers are forked now: a child inherits the parent's executors, and runs
    threading's exit hooks as it ends. Those are the parent's to finish: an executor never
    used must keep its queues (before the fix the child deleted an anonymous one's keys)."""
    import multiprocessing

    ex = pressure.Executor(url=url, prefix=prefix, max_workers=1, local_workers=False)
    child = multiprocessing.get_context("fork").Process(target=_exit_quietly)
    child.start()
    child.join(SOON)
    assert child.exitcode == 0
    assert ex._core._results.exists and ex._core._tasks.exists
    ex.shutdown()


_FORK_AND_EXIT = """
import os, sys, pressure
ex = pressure.Executor(url=sys.argv[1], prefix=sys.argv[2], max_workers=1, local_workers=False)
pid = os.fork()
if pid == 0:
    sys.exit(0)  # ends as a Python program does: threading's and atexit's hooks
os.waitpid(pid, 0)
print(ex._core._results.exists, ex._core._tasks.exists)
ex.shutdown()
"""


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="no fork")
def test_a_child_of_os_fork_exiting_normally_leaves_the_parents_executor_alone(url: str, prefix: str) -> None:
    """The same for a plain os.fork() child that ends with sys.exit (atexit runs the
    Executor's finalizer there)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FORK_AND_EXIT, url, prefix], capture_output=True, text=True,
                         timeout=SOON, check=True)
    assert out.stdout.split() == ["True", "True"], out.stderr


def test_the_first_task_is_queued_before_the_executors_threads_start(
        url: str, prefix: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first submit forks the local workers, then sends its task from the submitting
    thread while they start up, then starts the executor's threads: a worker finds the task
    queued as soon as it looks (it used to wait for the sender thread, started last). Local
    workers of an executor without an initializer do not read one from Redis."""
    from pressure.executor._sender import _Sender

    seen: list[int] = []
    start = _Sender.start

    def observing_start(sender: _Sender, executor_id: str) -> None:
        seen.append(int(r.llen(f"{prefix}:first:tasks")))
        start(sender, executor_id)

    monkeypatch.setattr(_Sender, "start", observing_start)
    # no local workers (nobody takes the task early): the sender thread starts, the task queued
    ex = pressure.Executor("first", url=url, prefix=prefix, max_workers=1, local_workers=False)
    futures = [ex.submit(pow, 2, 5), ex.submit(pow, 3, 2)]
    assert seen == [1]
    with WorkerPool("first", url=url, prefix=prefix, processes=1):
        assert [f.result(timeout=SOON) for f in futures] == [32, 9]
    ex.shutdown()
    with pressure.Executor(url=url, prefix=prefix, max_workers=1, local_workers=True) as ex:
        assert ex.submit(pow, 2, 3).result(timeout=SOON) == 8
        assert ex._core._pool is not None and ex._core._pool.initializer is no_initializer


def test_a_first_task_that_cannot_be_pickled_fails_alone(url: str, prefix: str) -> None:
    """As ProcessPoolExecutor's: the first submit's unpicklable task fails its future, and the
    executor starts and runs the next one."""
    with pressure.Executor(url=url, prefix=prefix, max_workers=1) as ex:
        failed = ex.submit(pow, threading.Lock(), 2)
        assert isinstance(failed.exception(timeout=SOON), TypeError)
        assert ex.submit(pow, 2, 3).result(timeout=SOON) == 8


def test_the_first_task_goes_out_on_the_constructors_connection(
        url: str, prefix: str, r: redis.Redis) -> None:
    """The submitting thread sends the first task on the connection the constructor opened
    (a connection of the backend's pool), not on one of its own: it sends nothing else
    (later tasks go from the sender thread), and a new connection is a connect and a
    handshake while the workers start up."""
    ex = pressure.Executor("own", url=url, prefix=prefix, max_workers=1, local_workers=False)
    try:
        backend = ex._core._backend
        future = ex.submit(pow, 2, 5)
        assert r.llen(f"{prefix}:own:tasks") == 1  # sent, from this thread
        own = backend._thread.connection  # (made for its client id, maybe: never connected)
        assert own is None or own._sock is None
        with WorkerPool("own", url=url, prefix=prefix, processes=1):
            assert future.result(timeout=SOON) == 32
    finally:
        ex.shutdown(cancel_futures=True)


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """Every write to Redis from now on (a round trip each, for code that reads before it
    writes again; a new connection's HELLO is one), by the thread that made it."""
    writes: list[threading.Thread] = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        writes.append(threading.current_thread())
        send(self, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
    return writes


def test_the_constructor_makes_one_round_trip(
        url: str, prefix: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The constructor creates the task queue and the result queue and clears an earlier run's
    broken flag in one round trip after its connection's handshake (it made three), and the
    queues are there, as before."""
    r.set(f"{prefix}:one:executor:broken", "an earlier run's")
    pressure.Executor("warm", url=url, prefix=prefix, max_workers=1, local_workers=False).shutdown()
    writes = _count_writes(monkeypatch)
    ex = pressure.Executor("one", url=url, prefix=prefix, max_workers=1, local_workers=False)
    try:
        assert len(writes) == 2  # HELLO, then the creates and the DEL together
        assert r.get(f"{prefix}:one:executor:broken") is None
        assert ex._core._tasks.exists and ex._core._results.exists
        with WorkerPool("one", url=url, prefix=prefix, processes=1):
            assert ex.submit(pow, 2, 5).result(timeout=SOON) == 32
    finally:
        ex.shutdown(cancel_futures=True)


def test_a_failed_create_leaves_no_result_queue(url: str, prefix: str, r: redis.Redis) -> None:
    """A task queue that cannot be created (a key of the wrong type where it would be) fails
    the constructor, as before, and the result queue created in the same round trip goes
    again: nothing is left of it in Redis."""
    r.hset(f"{prefix}:other:tasks:bound", "not", "a bound")
    with pytest.raises(pressure.PressureError):
        pressure.Executor("other", url=url, prefix=prefix, max_workers=1, local_workers=False)
    assert r.keys(f"{prefix}:other:results*") == []


def test_a_failed_create_leaves_nothing_its_setup_wrote(url: str, prefix: str, r: redis.Redis) -> None:
    """The initializer and the signing key's id, written in the constructor's round trip
    for workers elsewhere, go again with the result queue when the task queue cannot be
    created: the only key left under the name is the one that was there."""
    r.hset(f"{prefix}:other:tasks:bound", "not", "a bound")
    with pytest.raises(pressure.PressureError):
        pressure.Executor("other", url=url, prefix=prefix, max_workers=1, local_workers=False,
                          initializer=print, initargs=("ready",), authkey=b"k" * 32)
    assert r.keys(f"{prefix}:other*") == [f"{prefix}:other:tasks:bound".encode()]


def test_a_worker_takes_its_first_task_on_one_connection(url: str, prefix: str, r: redis.Redis) -> None:
    """A worker checks (or creates) the task queue on its own thread's connection, the one its
    gets go on: none of its backend's pool is opened before its first task (it opened one for
    the check, and a second for the get)."""
    where = WorkerConfig("conn", ConnectionConfig.resolve(url), prefix, 30.0)
    w = worker._Worker(where, lambda: False)
    try:
        tasks = attach(pressure.Queue, ExecutorKeys.build(prefix, "conn").tasks, where.config, prefix=prefix,
                       reliable=True, create=False)
        assert tasks.exists  # it created the queue
        tasks.put(worker.Task("t-1", "nowhere", 1, b""))
        w.fetch()
        assert [d.item.id for d in w.held] == ["t-1"]
        pool = w.backend.client().connection_pool
        assert pool._created_connections == 0  # type: ignore[attr-defined]
        assert w.backend.thread_connection()._sock is not None  # type: ignore[attr-defined]
    finally:
        w.backend.disconnect()


def test_forked_workers_inherit_their_scripts_text_and_hash(url: str, prefix: str) -> None:
    """A pool that forks reads and hashes its workers' scripts once, before it forks: each
    worker does not read and hash them again on its way to its first task."""
    from pressure import _packing
    _packing._script_source.cache_clear()
    _packing._script_sha.cache_clear()
    pool = WorkerPool("inherit", url=url, prefix=prefix, processes=1,
                      mp_context=__import__("multiprocessing").get_context("fork"))
    pool.start()
    pool.stop()
    hits = _packing._script_sha.cache_info().hits
    for name in ("create", "get", "claim", "settle", "put"):
        _packing._script_sha(name)
    assert _packing._script_sha.cache_info().hits == hits + 5


def test_a_lone_result_is_counted_with_the_read_behind_it(
        url: str, prefix: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The result thread posts the count of the result it just read (INCRBY) ahead of the read
    of the results behind it: a lone result is counted and its future completed one round trip
    after it is read, not two, and still counted before its future completes."""
    from pressure.connection import Backend

    calls: list[str] = []
    call = Backend.call

    def recording_call(backend: Backend, what: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(what)
        return call(backend, what, *args, **kwargs)

    monkeypatch.setattr(Backend, "call", recording_call)
    with pressure.Executor("lone", url=url, prefix=prefix, max_workers=1) as ex:
        seen: list[bytes | None] = []
        future = ex.submit(pow, 2, 5)
        future.add_done_callback(lambda f: seen.append(r.get(f"{prefix}:lone:executor:stats:done")))
        assert future.result(timeout=SOON) == 32
        failing = ex.submit(operator.truediv, 1, 0)
        assert isinstance(failing.exception(timeout=SOON), ZeroDivisionError)
        assert ex.statistics().done == 1 and ex.statistics().failed == 1
    assert seen == [b"1"]
    assert "count results" not in calls


def test_a_worker_that_never_ran_a_task_ends_with_its_heartbeat_when_woken(
        url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new worker's heartbeat makes its first beat once the worker's first replies are out
    (or after FIRST_BEAT): a worker told to stop before it ran a task has a heartbeat still
    waiting for that. The worker stopped when woken, then waited for its heartbeat
    (``beat.join``) until FIRST_BEAT ended: an idle shutdown took 0.25 s whenever a worker had
    not run a task yet. With every wait made an hour long, both workers (neither runs a task)
    and their heartbeats end only if the heartbeat's first wait ends with the worker."""
    monkeypatch.setattr(worker, "_POLL", HOUR)
    monkeypatch.setattr(worker, "FIRST_BEAT", HOUR)
    beats: list[threading.Thread] = []
    heartbeat = worker._Worker.heartbeat

    def recorded_heartbeat(self: worker._Worker) -> None:
        beats.append(threading.current_thread())
        heartbeat(self)

    monkeypatch.setattr(worker._Worker, "heartbeat", recorded_heartbeat)
    stop, threads, r, tasks = _two_idle_workers(url, prefix, "cold")
    wait_for(lambda: len(beats), lambda n: n == 2)  # both heartbeats wait for their first beat
    stop.set()
    queue = attach(pressure.Queue, tasks, ConnectionConfig.resolve(url), prefix=prefix, reliable=True,
                   create=False)
    wait_for(lambda: (internal(queue).wake_waiter(), not any(t.is_alive() for t in threads + beats))[1], bool)
    assert not r.hlen(ExecutorKeys.build(prefix, "cold").workers)  # neither recorded itself alive
    queue.disconnect()
    r.close()


def test_shutdown_does_not_wait_for_the_first_beat_of_a_worker_that_ran_no_task(
        url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One task, two local workers: one of them runs no task, and its heartbeat still waits
    for its first beat at shutdown. Every wait is an hour long, the bound on joining a
    heartbeat (HEARTBEAT) too: shutdown ends only if that worker's heartbeat ends with it."""
    from pressure.executor import _core

    for module, constant in ((worker, "_POLL"), (worker, "FIRST_BEAT"), (worker, "HEARTBEAT"), (_core, "_POLL")):
        monkeypatch.setattr(module, constant, HOUR)  # inherited by the forked workers
    ex = pressure.Executor(url=url, prefix=prefix, max_workers=2, local_workers=True)
    pool = ex._core._pool
    try:
        assert ex.submit(abs, -1).result(timeout=SOON) == 1
        pool = ex._core._pool
        assert pool is not None
        if pool.context.get_start_method() != "fork":
            pytest.skip("the patched waits reach only forked workers")
    finally:
        done = threading.Event()
        threading.Thread(target=lambda: (ex.shutdown(wait=True), done.set()), daemon=True).start()
        finished = done.wait(SOON)
        for p in pool.procs if pool is not None else ():
            if p.is_alive():
                os.kill(p.pid, 9)
    assert finished
    assert [p.exitcode for p in pool.procs] == [0, 0]

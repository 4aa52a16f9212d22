"""pressure.Executor under failure: Redis outages while submitting, workers killed between
a decision and its report, a worker killed while holding a lock, foreign items in the task
queue, the worker command stopped while Redis is unreachable, and bad constructor arguments.

Tasks live in tests/executor_tasks.py and leave evidence of each run in files, so what
ran (and how often) is read independently of the futures. Several tests queue every task
before any worker starts and then start one: tasks reach it in a known order. A worker
takes one task at a time at first and a batch of queued tasks once the last one it ran
was short (< 5 ms), so a few short "padding" tasks put it in that mode before the tasks
that matter arrive together in one batch.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
import pressure.executor
from pressure.testing import RedisServer
from pressure.executor.worker import Task, WorkerPool
from tests import executor_tasks as tasks
from tests.test_executor import (  # noqa: F401 - fixtures
    REPO_ROOT,
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


@contextlib.contextmanager
def supervised_pool(name: str, url: str, prefix: str, processes: int = 1) -> Iterator[WorkerPool]:
    """A WorkerPool whose dead processes are replaced (``check()`` every 0.1 s from a thread,
    as ``python -m pressure worker`` does every second). Whatever happens, its processes are
    gone afterwards."""
    pool = WorkerPool(name, url=url, prefix=prefix, processes=processes).start()
    done = threading.Event()

    def supervise() -> None:
        while not done.wait(0.1):
            pool.check()

    supervisor = threading.Thread(target=supervise, daemon=True)
    supervisor.start()
    try:
        yield pool
    finally:
        done.set()
        supervisor.join(SOON)
        stopper = threading.Thread(target=pool.stop, daemon=True)
        stopper.start()
        stopper.join(SOON)
        for proc in pool.procs:
            if proc.is_alive():
                proc.kill()
                proc.join(SOON)
    assert not supervisor.is_alive(), "WorkerPool.check() hung"
    assert not stopper.is_alive(), "WorkerPool.stop() hung"


def queued(r: redis.Redis, prefix: str, name: str) -> int:
    return int(r.llen(f"{prefix}:{name}:tasks"))


# -- 6. submits during a Redis outage -------------------------------------------------------


@pytest.mark.slow
def test_submits_while_redis_is_down_complete_once_it_is_back(prefix: str) -> None:
    """Redis (AOF) is killed before the first submit, and again before a second wave: every
    future of both waves waits (none fails for an outage of about a second, as a restart
    takes) and completes once Redis is back."""
    with RedisServer(appendonly=True) as srv, \
            pressure.Executor(url=srv.url, prefix=prefix, max_workers=2) as ex:
        for wave in range(2):
            srv.kill()
            futures = [ex.submit(tasks.add, wave, i) for i in range(20)]
            time.sleep(1.0)  # the outage
            assert not any(f.done() for f in futures), [f.exception() for f in futures if f.done()]
            srv.start()
            assert [f.result(timeout=60) for f in futures] == [wave + i for i in range(20)]


@pytest.mark.slow
def test_bounded_submits_while_redis_is_down_block_until_it_is_back(prefix: str) -> None:
    """With max_pending, submit puts the task itself: during an outage it blocks, then returns
    once Redis is back, and every future completes."""
    with RedisServer(appendonly=True) as srv, \
            pressure.Executor(url=srv.url, prefix=prefix, max_workers=2, max_pending=4) as ex:
        assert ex.submit(tasks.square, 2).result(timeout=SOON) == 4
        srv.kill()
        futures: list[Future[Any]] = []
        errors: list[BaseException] = []

        def submit_all() -> None:
            try:
                futures.extend(ex.submit(tasks.square, i) for i in range(10))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        submitter = threading.Thread(target=submit_all)
        submitter.start()
        submitter.join(1.0)  # the outage
        srv.start()
        submitter.join(60)
        assert not submitter.is_alive() and errors == []
        assert [f.result(timeout=60) for f in futures] == [i * i for i in range(10)]


@pytest.mark.slow
def test_submits_fail_with_backend_error_once_an_outage_outlasts_the_limit(
        prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond OUTAGE_LIMIT seconds of outage, the futures waiting to be sent fail with
    BackendError; the executor works again once Redis is back."""
    monkeypatch.setattr(pressure.executor, "OUTAGE_LIMIT", 1.0)
    with RedisServer(appendonly=True) as srv, \
            pressure.Executor(url=srv.url, prefix=prefix, max_workers=1) as ex:
        assert ex.submit(tasks.square, 2).result(timeout=SOON) == 4
        srv.kill()
        doomed = [ex.submit(tasks.square, i) for i in range(3)]
        for future in doomed:
            assert isinstance(future.exception(timeout=SOON), pressure.BackendError)
        srv.start()
        assert ex.submit(tasks.square, 5).result(timeout=60) == 25


def test_a_refused_password_fails_waiting_submits_at_once_not_after_the_outage_limit(prefix: str) -> None:
    """A server that starts refusing the executor's password is no outage to ride out: the
    futures waiting to be sent fail with AuthenticationError at once (not after OUTAGE_LIMIT)."""
    with RedisServer(extra_args=("--requirepass", "old-secret")) as srv:
        url = f"redis://:old-secret@127.0.0.1:{srv.port}/0"
        admin = redis.Redis(port=srv.port, password="old-secret")
        with pressure.Executor(url=url, prefix=prefix, max_workers=1) as ex:
            assert ex.submit(tasks.square, 2).result(timeout=SOON) == 4
            admin.config_set("requirepass", "new-secret")
            admin.client_kill_filter(_type="normal", skipme=True)  # everyone reconnects
            admin = redis.Redis(port=srv.port, password="new-secret")
            started = time.monotonic()
            refused = ex.submit(tasks.square, 3)
            error = refused.exception(timeout=SOON)
            assert isinstance(error, pressure.AuthenticationError), error
            assert time.monotonic() - started < pressure.executor.OUTAGE_LIMIT
            assert "old-secret" not in str(error)
            admin.config_set("requirepass", "old-secret")
        admin.close()


def test_a_cancel_redis_cannot_confirm_is_false_and_the_task_still_runs(prefix: str) -> None:
    """cancel() True means the task never runs, so a cancel that Redis cannot confirm (it is
    down; the same holds while the task is being sent) returns False and leaves the future
    pending: the task runs once Redis is back (found by the chaos soak: a cancel answered
    True locally ran anyway)."""
    with RedisServer(appendonly=True) as srv:
        r = redis.Redis.from_url(srv.url)
        with pressure.Executor("unconfirmed", url=srv.url, prefix=prefix, local_workers=False) as ex:
            future = ex.submit(tasks.square, 3)
            wait_for(lambda: queued(r, prefix, "unconfirmed"), lambda n: n == 1)
            srv.kill()
            assert future.cancel() is False
            assert not future.cancelled()
            srv.start()
            with supervised_pool("unconfirmed", srv.url, prefix):
                assert future.result(timeout=60) == 9
        r.delete(*r.keys(f"{prefix}:*"))
        r.close()


def test_a_process_forked_after_the_forkserver_started_starts_local_workers(url: str, prefix: str) -> None:
    """A process forked from one that had started the forkserver (a prefork server, a test
    harness) inherits CPython's forkserver state but not the server as its child: starting
    local workers there failed with ChildProcessError and broke the executor (found by the
    chaos soak in the full suite). It starts a forkserver of its own."""
    started = FORKSERVER.Process(target=time.sleep, args=(0,))
    started.start()
    started.join(SOON)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            pool = WorkerPool("forked", url=url, prefix=prefix, processes=1).start()
            code = 0 if pool.procs[0].pid else 1
            pool.stop(timeout=SOON)
        except BaseException:  # noqa: BLE001 - reported through the exit status
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "WorkerPool.start() failed in the forked process"


def test_a_task_too_large_for_redis_fails_alone(prefix: str) -> None:
    """A task larger than the server accepts fails its own future with ItemTooLarge; the
    tasks sent with it run, and so do later ones (the executor is not broken)."""
    with RedisServer(extra_args=("--proto-max-bulk-len", "1mb")) as srv, \
            pressure.Executor(url=srv.url, prefix=prefix, max_workers=1) as ex:
        small = [ex.submit(tasks.add, 1, i) for i in range(3)]
        big = ex.submit(tasks.add, b"x" * (2 << 20), b"")
        later = [ex.submit(tasks.add, 2, i) for i in range(3)]
        assert isinstance(big.exception(timeout=SOON), pressure.ItemTooLarge)
        assert [f.result(timeout=60) for f in small + later] == [1, 2, 3, 2, 3, 4]


@pytest.mark.slow
def test_a_submit_whose_reply_is_lost_is_sent_again_and_runs_once(prefix: str, tmp_path: Path) -> None:
    """Redis is paused past the client's socket timeout while tasks are submitted: the
    executor cannot know whether its puts ran (OutcomeUnknown) and sends them again; once
    Redis resumes, both tries run, so each task is queued twice. Every future completes, and
    each task runs once."""
    log = str(tmp_path / "log")
    with RedisServer(appendonly=True) as srv, \
            pressure.Executor(url=srv.url, prefix=prefix, max_workers=1) as ex:
        # the first submit sends its task itself; the second goes through the sender thread,
        # whose connection is then open (a connection made while Redis is paused sends nothing)
        assert [f.result(timeout=SOON) for f in [ex.submit(tasks.square, 2), ex.submit(tasks.square, 3)]] == [4, 9]
        srv.pause()
        try:
            futures = [ex.submit(tasks.record, log, f"t{i}") for i in range(5)]
            time.sleep(pressure.connection.SOCKET_TIMEOUT + 1.5)  # the first try times out
        finally:
            srv.resume()
        assert [f.result(timeout=60) for f in futures] == [f"t{i}" for i in range(5)]
        with redis.Redis.from_url(srv.url) as r:
            produced = int(r.get(f"{prefix}:{ex.name}:tasks:stats:produced_messages"))
    assert produced > 2 + 5  # the tasks were queued more than once
    assert sorted(tasks.read_lines(log)) == [f"t{i}" for i in range(5)]


def test_a_task_queued_twice_runs_once(make_executor: Callable[..., pressure.Executor], url: str,
                                       prefix: str, r: redis.Redis, gate: Gate, log: str) -> None:
    """What a retried put leaves when its first try did land after all: each task twice in the
    queue. Each runs once: the second copy of a task still running is dropped (it goes to the
    other worker meanwhile), and so is the second copy of a task already finished."""
    ex = make_executor("twice", local_workers=False)
    held = gate.hold(ex, "held")
    quick = ex.submit(tasks.record, log, "quick")
    wait_for(lambda: queued(r, prefix, "twice"), lambda n: n == 2)
    key = f"{prefix}:twice:tasks"
    r.lpush(key, *reversed(r.lrange(key, 0, -1)))  # queue: held, quick, held, quick
    with supervised_pool("twice", url, prefix, processes=2):
        assert quick.result(timeout=SOON) == "quick"
        gate.wait_started(1)
        sentinel = ex.submit(tasks.record, log, "sentinel")  # queued after both copies
        # either the copy of "held" runs too (then both workers hold it) or the sentinel does
        wait_for(lambda: (sentinel.done(), tasks.read_lines(gate.started)),
                 lambda seen: seen[0] or len(seen[1]) > 1)
        assert len(tasks.read_lines(gate.started)) == 1
        assert sentinel.result(timeout=SOON) == "sentinel"
        gate.open()
        assert held.result(timeout=SOON)[0] == "held"
        wait_for(lambda: queued(r, prefix, "twice") + ex.statistics().running, lambda n: n == 0)
        assert tasks.read_lines(log) == ["quick", "sentinel"]
        assert len(tasks.read_lines(gate.started)) == 1


# -- 7. prefetched tasks are not charged an attempt ------------------------------------------


def test_tasks_a_killed_worker_had_only_prefetched_are_not_charged_an_attempt(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, r: redis.Redis,
        tmp_path: Path, log: str) -> None:
    """max_attempts=1: a task that kills its worker is followed, in the same prefetched batch,
    by five tasks the worker never started. They run (each once) on the next worker; only the
    killer fails with WorkerLost, after its one start."""
    name = "prefetch"
    once = make_executor(name, local_workers=False, max_attempts=1)
    padding = make_executor(name, local_workers=False)
    for i in range(3):
        padding.submit(tasks.square, i)
    wait_for(lambda: queued(r, prefix, name), lambda n: n == 3)
    killer_log = str(tmp_path / "killer")
    killer = once.submit(tasks.kill_self, killer_log)
    later = [once.submit(tasks.record, log, f"t{i}") for i in range(5)]
    wait_for(lambda: queued(r, prefix, name), lambda n: n == 9)
    with supervised_pool(name, url, prefix):
        assert isinstance(killer.exception(timeout=SOON), pressure.WorkerLost)
        assert [outcome(lambda f=f: f.result(timeout=SOON)) for f in later] == \
            [("ok", f"t{i}") for i in range(5)]
    assert len(tasks.read_lines(killer_log)) == 1
    assert sorted(tasks.read_lines(log)) == [f"t{i}" for i in range(5)]


# -- 8. the attempt limit and cancel are durable ----------------------------------------------


def test_a_cancelled_or_given_up_task_stays_so_when_its_worker_dies_before_reporting(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, r: redis.Redis,
        tmp_path: Path) -> None:
    """A worker decides about a task as it reaches it (run it, give up on it after
    max_attempts starts, or drop it: cancelled), and reports a short task's outcome with the
    rest of its batch. Here a task that kills its worker follows those decisions in the same
    batch, every time, so they are never reported and the tasks come back again and again:
    the cancelled task still never runs, the task allowed one start is started once, and the
    killer is started exactly max_attempts (3) times."""
    name = "durable"
    once = make_executor(name, local_workers=False, max_attempts=1)
    thrice = make_executor(name, local_workers=False, max_attempts=3)
    for i in range(5):
        thrice.submit(tasks.square, i)
    wait_for(lambda: queued(r, prefix, name), lambda n: n == 5)
    logs = {tag: str(tmp_path / tag) for tag in ("limited", "cancelled", "killer")}
    limited = once.submit(tasks.record, logs["limited"], "limited")
    cancelled = once.submit(tasks.record, logs["cancelled"], "cancelled")
    wait_for(lambda: queued(r, prefix, name), lambda n: n == 7)
    assert cancelled.cancel() is True
    killer = thrice.submit(tasks.kill_self, logs["killer"])
    wait_for(lambda: queued(r, prefix, name), lambda n: n == 8)
    with supervised_pool(name, url, prefix):
        assert isinstance(killer.exception(timeout=60), pressure.WorkerLost)
        assert isinstance(limited.exception(timeout=SOON), pressure.WorkerLost)
        sentinel = once.submit(tasks.square, 3)  # behind whatever came back
        assert sentinel.result(timeout=SOON) == 9
    assert tasks.read_lines(logs["limited"]) == ["limited"]
    assert tasks.read_lines(logs["cancelled"]) == []
    assert len(tasks.read_lines(logs["killer"])) == 3


def test_a_task_running_longer_than_the_visibility_timeout_is_not_redelivered(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, log: str) -> None:
    """visibility_timeout=1: a task that runs 3 s keeps its delivery (the heartbeat renews
    the running task's, not only those held), so the other, idle worker never gets it."""
    name = "long"
    ex = make_executor(name, local_workers=False)
    with WorkerPool(name, url=url, prefix=prefix, processes=2, visibility_timeout=1.0):
        assert ex.submit(tasks.record_then_sleep, log, "long", 3.0).result(timeout=SOON)[0] == "long"
    assert [line.split()[0] for line in tasks.read_lines(log)] == ["long"]


# -- 9. a worker killed holding a lock ---------------------------------------------------------


def test_a_worker_killed_holding_every_lock_it_can_reach_does_not_hang_the_pool(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, tmp_path: Path) -> None:
    """A task takes every multiprocessing lock its worker process can reach (the pool's stop
    signal's included, if it has one) and SIGKILLs the worker while holding them. The pool
    still replaces it (the next task runs in a new process) and stops."""
    name = "locks"
    ex = make_executor(name, local_workers=False, max_attempts=1)
    path = str(tmp_path / "locks")
    with supervised_pool(name, url, prefix) as pool:
        first = pool.procs[0].pid
        assert isinstance(ex.submit(tasks.die_holding_locks, path).exception(timeout=SOON),
                          pressure.WorkerLost)
        (line,) = tasks.read_lines(path)
        assert int(line.split()[0]) == first
        assert ex.submit(os.getpid).result(timeout=SOON) != first


# -- 10. foreign items in the task queue ------------------------------------------------------


def test_foreign_items_in_the_task_queue_are_dead_lettered_and_workers_live_on(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, r: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    """Garbage bytes, a pickle of something else and a Task with nonsense fields, pushed into
    the task queue with raw redis-py: each goes to the dead-letter list with a log line, the
    real tasks around them run, and no worker process dies."""
    name = "foreign"
    ex = make_executor(name, max_workers=1)
    pid = ex.submit(os.getpid).result(timeout=SOON)
    foreign = [b"\x80\x05garbage, not a pickle", pickle.dumps(42),
               pickle.dumps(Task(5, None, "x", "y"))]  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="pressure"):
        r.lpush(f"{prefix}:{name}:tasks", *foreign)
        assert [f.result(timeout=SOON) for f in [ex.submit(tasks.square, i) for i in range(5)]] == \
            [i * i for i in range(5)]
        assert ex.submit(os.getpid).result(timeout=SOON) == pid
    dead = pressure.Queue(f"{name}:tasks", url=url, prefix=prefix, reliable=True)
    assert sorted(d.payload for d in dead.dead_letters()) == sorted(foreign)
    dead.disconnect()
    assert not [rec for rec in caplog.records if "died" in rec.getMessage()]


# -- 11. the worker command while Redis is unreachable -------------------------------------------


TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_worker_command_stops_on_a_signal_while_redis_is_unreachable(tmp_path: Path, sig: int) -> None:
    """``python -m pressure worker`` against a server that is not running: it says so (with a
    timestamp, less and less often), and a signal stops it within a few seconds."""
    down = RedisServer()  # never started: nothing listens on its port
    stderr = tmp_path / "stderr"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pressure", "worker", "nowhere", "--url", down.url,
             "--processes", "1"],
            start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for(lambda: stderr.read_text(errors="replace"), lambda text: "Error" in text or "refused" in text)
        time.sleep(4.0)  # the retry loop runs on
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(SOON)
        down.cleanup()
    complaints = [line for line in stderr.read_text(errors="replace").splitlines()
                  if "cannot" in line or "refused" in line]
    assert complaints and all(TIMESTAMP.match(line) for line in complaints), complaints
    assert len(complaints) <= 4, complaints  # backed off: not twice a second


# -- 14. bad constructor arguments ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["x", 2.5, 0.5], ids=["str", "float", "small-float"])
def test_max_workers_of_the_wrong_type_raises_like_process_pool_and_touches_nothing(
        url: str, prefix: str, r: redis.Redis, value: Any) -> None:
    """max_workers='x' or 2.5: the TypeError ProcessPoolExecutor raises, with its message, and
    no key is created."""
    mine = outcome(lambda: pressure.Executor(url=url, prefix=prefix, max_workers=value))
    theirs = outcome(lambda: ProcessPoolExecutor(mp_context=FORKSERVER, max_workers=value))
    assert mine == theirs and mine[1] is TypeError
    assert keys_under(r, prefix) == []


BAD_ARGUMENTS = [
    ({"max_pending": "x"}, TypeError, "max_pending must be an integer or None, not str"),
    ({"max_pending": 1.5}, TypeError, "max_pending must be an integer or None, not float"),
    ({"max_pending": True}, TypeError, "max_pending must be an integer or None, not bool"),
    ({"max_attempts": 0}, ValueError, "max_attempts must be a positive integer, not 0"),
    ({"visibility_timeout": -1}, ValueError, "visibility_timeout must be a positive"),
    ({"visibility_timeout": "x"}, TypeError, "visibility_timeout must be a number of seconds, not str"),
    ({"name": 5}, TypeError, "executor name must be a str or None, not int"),
    ({"name": ""}, ValueError, "executor name must not be empty"),
    ({"prefix": 5}, ValueError, "prefix must be a non-empty string"),
]


@pytest.mark.parametrize("kwargs, error, message", BAD_ARGUMENTS,
                         ids=[f"{k}={v!r}" for kwargs, _, _ in BAD_ARGUMENTS for k, v in kwargs.items()])
def test_bad_arguments_raise_before_any_key_is_created(url: str, prefix: str, r: redis.Redis,
                                                       kwargs: dict[str, Any], error: type,
                                                       message: str) -> None:
    """Every argument is checked before the first round trip: a bad one raises a typed error
    naming it, and no key exists afterwards (neither the task queue nor a result queue)."""
    kwargs = {"prefix": prefix, **kwargs}
    # (this test's prefix only: executors of earlier tests may still be settling their own keys)
    before = sorted(r.keys(f"{prefix}*"))
    with pytest.raises(error, match="^" + re.escape(message)):
        pressure.Executor(url=url, **kwargs)
    assert sorted(r.keys(f"{prefix}*")) == before

"""How an executor's local workers start (``pressure/executor/_handles.py``): the executor
loads the scripts of their way to a first reply in its constructor's round trip, and a pool
that forks builds their queue handles and client before it forks, so that a forked worker's
first task is one connect, one get and one claim away. What each saves is measured by the
bench's ``--executor`` (cold start); these tests check what it must not cost: a worker told
a script is loaded still runs it on a server that lost it, a handle built for a forked child
shares no connection with its parent or its siblings."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import pytest
import redis

import pressure
from pressure._scripts import SUBMIT
from pressure._wire import _FOR_CHILD
from pressure.config import ConnectionConfig
from pressure.connection import Backend, _script_sha
from pressure.errors import BrokenExecutor
from pressure.executor import worker
from pressure.executor._handles import WORKER_SCRIPTS, Handles
from pressure.executor.worker import WorkerConfig
from pressure.keys import ExecutorKeys
from pressure.testing import RedisServer
from tests import executor_tasks as tasks
from tests.test_executor import SOON, gate, make_executor  # noqa: F401 - fixtures

forking = pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                             reason="a pool builds its workers' handles only where it forks")


@pytest.fixture(scope="module")
def own_server() -> Iterator[RedisServer]:
    """A server of this module's own: its tests flush the scripts."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def url(own_server: RedisServer) -> str:
    return own_server.url


def _exists(r: redis.Redis, names: tuple[str, ...]) -> list[bool]:
    return [bool(e) for e in r.script_exists(*(_script_sha(name) for name in names))]


class _Monitor:
    """Every command the server runs while it is on, as redis-py's MONITOR parses them."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.commands: list[dict[str, Any]] = []
        self._monitor = self.client.monitor()
        self._monitor.connection.send_command("MONITOR")  # (as Monitor.__enter__ does)
        assert self._monitor.connection.read_response() in (b"OK", "OK")
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        for command in self._monitor.listen():
            if command["command"] == "ECHO monitor-stop":
                return
            self.commands.append(command)

    def stop(self) -> list[dict[str, Any]]:
        self.client.echo("monitor-stop")
        self._thread.join(SOON)
        self._monitor.connection.disconnect()
        self.client.close()
        return self.commands


def _ports(pid: int) -> set[int]:
    """The local ports of process ``pid``'s TCP connections."""
    process = psutil.Process(pid)
    connections = process.net_connections("tcp") if hasattr(process, "net_connections") else process.connections("tcp")
    return {c.laddr.port for c in connections}


def test_the_constructor_loads_the_scripts_of_its_workers_first_task(
        url: str, make_executor: Callable[..., pressure.Executor]) -> None:
    r = redis.Redis.from_url(url)
    r.script_flush()
    make_executor(local_workers=False)
    # workers elsewhere load their own: only the result thread's get is loaded for it
    assert _exists(r, WORKER_SCRIPTS) == [name == "get" for name in WORKER_SCRIPTS]
    r.script_flush()
    make_executor()  # local workers: loaded, in the same round trip as the queues' creation
    assert _exists(r, WORKER_SCRIPTS) == [True] * len(WORKER_SCRIPTS)


def _scripts_run(commands: list[dict[str, Any]]) -> list[str]:
    """The names of the scripts among the commands MONITOR saw (EVALSHA of a known SHA1)."""
    names = {_script_sha(name): name for name in ("info", "set_bound", "create", *WORKER_SCRIPTS)}
    return [names.get(c["command"].split(" ")[1], "?") for c in commands if c["command"].startswith("EVALSHA ")]


def test_max_pending_makes_the_task_queue_bounded_in_the_constructors_round_trip(
        url: str, prefix: str, make_executor: Callable[..., pressure.Executor]) -> None:
    """Before, the constructor read the task queue's bound back (info.lua, a round trip of its
    own) and set it (set_bound.lua, another): the queue is now made with its bound."""
    monitor = _Monitor(url)
    try:
        executor = make_executor("bounded", max_pending=8, local_workers=False)
    finally:
        commands = monitor.stop()
    assert _scripts_run(commands) == ["create", "create"], commands  # the task and result queues
    assert executor._core._tasks.maxsize == 8


@pytest.mark.parametrize(("before", "max_pending", "after", "sets"), [
    (4, 8, 8, True),     # an executor of that name made with another bound: set to this one's
    (4, None, 4, False),  # none asked: left as it is
    (4, 0, 0, True),     # 0 and less: unbounded
    (0, -1, 0, False),   # unbounded already: nothing to set
    (8, 8, 8, False),
])
def test_max_pending_sets_the_bound_of_a_task_queue_made_before(
        url: str, make_executor: Callable[..., pressure.Executor], before: int, max_pending: int | None,
        after: int, sets: bool) -> None:
    make_executor("again", max_pending=before, local_workers=False).shutdown()
    monitor = _Monitor(url)
    try:
        executor = make_executor("again", max_pending=max_pending, local_workers=False)
    finally:
        commands = monitor.stop()
    assert executor._core._tasks.maxsize == after
    assert ("set_bound" in _scripts_run(commands)) == sets, commands


@forking
def test_a_forked_worker_neither_loads_nor_creates_before_its_first_task(
        url: str, make_executor: Callable[..., pressure.Executor]) -> None:
    """Before the change each worker sent a SCRIPT LOAD of create.lua, a create of the task
    queue, and a SCRIPT LOAD of each script on its way to its first task."""
    monitor = _Monitor(url)
    try:
        executor = make_executor(max_workers=1, local_workers=True)
        ran_at = executor.submit(time.time).result(timeout=SOON)
        pool = executor._core._pool
        assert pool is not None
        # the worker's own connections (it holds copies of its parent's sockets too)
        ports = _ports(pool.procs[0].pid) - _ports(os.getpid())
    finally:
        commands = monitor.stop()
    before = [c for c in commands if c["client_port"].isdigit() and int(c["client_port"]) in ports
              and c["time"] <= ran_at]
    assert before, "none of the worker's commands seen before its first task ran"
    sent = [c["command"].split(" ", 2)[:2] for c in before]
    assert not [c for c in sent if c[0] == "SCRIPT"], sent
    assert ["EVALSHA", _script_sha("create")] not in sent, sent
    assert ["EVALSHA", _script_sha("get")] in sent and ["EVALSHA", _script_sha("claim")] in sent, sent


@forking
@pytest.mark.parametrize("workers", [1, 2])
def test_workers_told_their_scripts_are_loaded_run_on_a_server_that_lost_them(
        url: str, make_executor: Callable[..., pressure.Executor], workers: int) -> None:
    """The scripts are flushed between the constructor's load and the workers' first calls
    (a restarted server): each call answers NOSCRIPT and is loaded then; no task is lost or
    run twice."""
    r = redis.Redis.from_url(url)
    executor = make_executor(max_workers=workers, local_workers=True)
    r.script_flush()
    futures = [executor.submit(tasks.square, i) for i in range(20)]
    assert [f.result(timeout=SOON) for f in futures] == [i * i for i in range(20)]
    assert executor.statistics().done == 20


# -- Wire.for_child ------------------------------------------------------------------------


def _child_client_id(backend: Backend, results: Any) -> None:
    client = backend.client()
    results.put((client.client_id(), bool(backend.is_loaded("get"))))


@forking
def test_a_wire_built_for_children_gives_each_its_own_connection(url: str) -> None:
    backend = Backend(ConnectionConfig.resolve(url), loaded=("get",))
    backend.for_child()
    context = multiprocessing.get_context("fork")
    results = context.SimpleQueue()
    children = [context.Process(target=_child_client_id, args=(backend, results)) for _ in range(2)]
    for child in children:
        child.start()
    got = [results.get() for _ in children]
    for child in children:
        child.join(SOON)
        assert child.exitcode == 0
    assert got[0][0] != got[1][0]  # two connections, one per child
    assert [loaded for _, loaded in got] == [True, True]  # trusted on their first connection
    # the parent never connected with it: it is still the children's
    assert backend._pid == _FOR_CHILD
    assert backend._client is not None and not backend._client.connection_pool._created_connections
    assert not list(backend._thread_connections)


def test_a_script_assumed_loaded_runs_on_a_server_that_lost_it(url: str, prefix: str) -> None:
    """A wire told a script is loaded sends its calls without a SCRIPT LOAD in front; on a
    server that does not have it (restarted, flushed), the calls answer NOSCRIPT, did not
    run, and are sent again once it is loaded: each runs once."""
    r = redis.Redis.from_url(url)
    r.script_flush()
    keys = ExecutorKeys.build(prefix, "assumed")
    backend = Backend(ConnectionConfig.resolve(url), loaded=("submit",))
    backend.client()
    assert backend.is_loaded("submit")  # from its first connection on
    assert backend.pipeline([(SUBMIT.command(keys, more=2), ["t1", "t2"])]) == [2]
    assert r.hgetall(keys.claims) == {b"t1": b"q", b"t2": b"q"}
    assert _exists(r, ("submit",)) == [True]


def test_a_pipeline_loads_the_scripts_asked_for(url: str) -> None:
    r = redis.Redis.from_url(url)
    r.script_flush()
    backend = Backend(ConnectionConfig.resolve(url))
    assert backend.pipeline([], load=("claim", "settle")) == []
    assert backend.is_loaded("claim") and backend.is_loaded("settle")
    assert _exists(r, ("claim", "settle")) == [True, True]


# -- the pool's handles --------------------------------------------------------------------


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


@forking
def test_forked_workers_share_nothing_the_pool_built(url: str, prefix: str) -> None:
    """Two workers forked from one pool's handles take a task each at the same time, on
    connections of their own; the pool's handles stay unused."""
    keys = ExecutorKeys.build(prefix, "handles")
    where = WorkerConfig("handles", ConnectionConfig.resolve(url), prefix, 30.0)
    pool = worker.WorkerPool("handles", url=url, prefix=prefix, processes=2)
    pool.start()
    try:
        handles = pool._for_child
        assert isinstance(handles, Handles)
        assert handles.backend._pid == _FOR_CHILD
        executor = pressure.Executor("handles", url=url, prefix=prefix, local_workers=False)
        try:
            futures = [executor.submit(_pid_after, 0.2) for _ in range(4)]
            pids = {f.result(timeout=SOON) for f in futures}
            assert pids == {proc.pid for proc in pool.procs}  # both ran tasks, at the same time
        finally:
            executor.shutdown()
        assert handles.backend._pid == _FOR_CHILD
        assert keys.tasks and where.name == "handles"
    finally:
        pool.stop()


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_workers_started_otherwise_are_prepared_too(
        url: str, make_executor: Callable[..., pressure.Executor], method: str) -> None:
    """Workers that are not forked get what their executor prepared through pickling (no
    handles: they build their own), and skip the create and the loads all the same."""
    r = redis.Redis.from_url(url)
    executor = make_executor(max_workers=2, local_workers=True, mp_context=multiprocessing.get_context(method))
    r.script_flush()  # and they still run on a server that lost the scripts
    futures = [executor.submit(tasks.square, i) for i in range(6)]
    assert [f.result(timeout=SOON) for f in futures] == [i * i for i in range(6)]


@pytest.mark.parametrize("thread", ["result", "sender"])
def test_an_executor_whose_threads_cannot_start_is_broken_not_hung(
        make_executor: Callable[..., pressure.Executor], monkeypatch: pytest.MonkeyPatch, thread: str) -> None:
    """The first submit starts the result thread, then the sender thread. If one cannot start
    (no more threads), that submit raises and every later one raises BrokenExecutor: before,
    a later submit's task waited in the outbox of a sender thread that never ran."""
    cannot = RuntimeError("can't start new thread")

    class Refused(threading.Thread):
        def start(self) -> None:
            if self.name.startswith(f"pressure-{'executor' if thread == 'result' else 'submit'}-"):
                raise cannot
            super().start()

    monkeypatch.setattr(threading, "Thread", Refused)  # as _core and _sender see it
    executor = make_executor(local_workers=False)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        executor.submit(tasks.square, 2)
    with pytest.raises(BrokenExecutor, match="threads could not start"):
        executor.submit(tasks.square, 3)
    executor.shutdown(wait=True)


def test_a_pool_that_cannot_start_every_worker_stops_those_it_started(
        make_executor: Callable[..., pressure.Executor], monkeypatch: pytest.MonkeyPatch) -> None:
    """fork() failing for the second worker (EAGAIN: a process limit) raises from the submit, as
    ProcessPoolExecutor's does; the worker started before it is told to stop. It was left
    running, and the interpreter's exit waits for every process multiprocessing started."""
    started: list[Any] = []
    spawn = worker.WorkerPool._spawn

    def second_fails(self: worker.WorkerPool) -> Any:
        if started:
            raise OSError(11, "Resource temporarily unavailable")
        started.append(spawn(self))
        return started[-1]

    monkeypatch.setattr(worker.WorkerPool, "_spawn", second_fails)
    executor = make_executor(max_workers=2, local_workers=True)
    with pytest.raises(OSError, match="temporarily unavailable"):
        executor.submit(tasks.square, 2)
    started[0].join(SOON)
    assert started[0].exitcode == 0, "the worker started is still running"


def test_a_dead_worker_that_cannot_be_replaced_yet_is_replaced_at_a_later_check(
        url: str, prefix: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """fork() failing as a dead worker is replaced raised from check(): out of the executor's
    result thread (the executor broke) or run_workers (the pool's command ended). It is logged
    (worker_not_replaced) and tried again at the next check."""
    with worker.WorkerPool("replace", url=url, prefix=prefix, processes=1) as pool:
        dead = pool.procs[0]
        dead.kill()
        dead.join(SOON)
        spawn = worker.WorkerPool._spawn

        def fails(self: worker.WorkerPool) -> Any:
            raise OSError(11, "Resource temporarily unavailable")

        monkeypatch.setattr(worker.WorkerPool, "_spawn", fails)
        with caplog.at_level("WARNING", logger="pressure.executor.worker"):
            assert pool.check() == 0
        assert [r.event for r in caplog.records if hasattr(r, "event")] == ["worker_lost", "worker_not_replaced"]
        assert pool.procs == [dead]
        monkeypatch.setattr(worker.WorkerPool, "_spawn", spawn)
        assert pool.check() == 1
        assert pool.procs[0] is not dead and pool.procs[0].is_alive()

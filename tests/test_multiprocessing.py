"""pressure.multiprocessing: multiprocessing's queues in Redis, side by side with the stdlib
where it runs in-process, and across fork and spawn processes."""

from __future__ import annotations

import inspect
import multiprocessing
import multiprocessing.context
import multiprocessing.queues
import os
import pickle
import queue as stdlib_queue
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest
import redis

import pressure
import pressure.multiprocessing as pmp
import pressure.pool

EXTENSIONS = {"name", "delete", "disconnect"}


@dataclass
class Flavour:
    """Builds the queues of one module: the stdlib's, or pressure's on the private server."""

    module: ModuleType
    kwargs: dict[str, Any]
    made: list[Any] = field(default_factory=list)

    def _keep(self, q: Any) -> Any:
        self.made.append(q)
        return q

    def Queue(self, maxsize: Any = 0) -> Any:  # the stdlib's name
        return self._keep(self.module.Queue(maxsize, **self.kwargs))

    def JoinableQueue(self, maxsize: Any = 0) -> Any:
        return self._keep(self.module.JoinableQueue(maxsize, **self.kwargs))

    def SimpleQueue(self) -> Any:
        return self._keep(self.module.SimpleQueue(**self.kwargs))

    def cleanup(self) -> None:
        for q in self.made:
            if isinstance(q, (pmp.Queue, pmp.SimpleQueue)):
                _delete(q)
            elif isinstance(q, multiprocessing.queues.Queue):
                q.close()
                q.join_thread()
            else:
                q.close()


def _delete(q: Any) -> None:
    try:
        q.delete()
    except pressure.QueueDoesNotExist:
        pass
    q.disconnect()


@pytest.fixture(params=["stdlib", "pressure"])
def flavour(request: pytest.FixtureRequest, url: str, prefix: str) -> Iterator[Flavour]:
    """Each side-by-side test runs once with multiprocessing and once with pressure.multiprocessing."""
    if request.param == "stdlib":
        made = Flavour(multiprocessing, {})
    else:
        made = Flavour(pmp, {"url": url, "prefix": prefix})
    yield made
    made.cleanup()


@pytest.fixture
def pq(url: str, prefix: str) -> Iterator[Callable[..., Any]]:
    """pressure.multiprocessing queues on the private server, deleted afterwards."""
    made: list[Any] = []

    def make(cls: Any = pmp.Queue, *args: Any, **kw: Any) -> Any:
        q = cls(*args, url=url, prefix=prefix, **kw)
        made.append(q)
        return q

    yield make
    for q in made:
        _delete(q)


def settle(q: Any) -> None:
    """Wait until an item put is readable: the stdlib's feeder thread writes it later."""
    deadline = time.monotonic() + 10
    while q.empty() and time.monotonic() < deadline:
        time.sleep(0.005)


# -- side by side: Queue ------------------------------------------------------------------

def test_fifo_order_and_sizes(flavour: Flavour) -> None:
    q = flavour.Queue(3)
    assert q.empty() and not q.full() and q.qsize() == 0
    for item in ("a", {"b": 1}, [3]):
        q.put(item)
    settle(q)
    assert q.qsize() == 3 and q.full() and not q.empty()
    assert [q.get(timeout=10), q.get(timeout=10), q.get()] == ["a", {"b": 1}, [3]]
    assert q.qsize() == 0 and not q.full()


def test_full_and_empty_are_the_queue_module_exceptions(flavour: Flavour) -> None:
    q = flavour.Queue(1)
    with pytest.raises(stdlib_queue.Empty):
        q.get_nowait()
    with pytest.raises(stdlib_queue.Empty):
        q.get(timeout=0.05)
    q.put_nowait("only")
    for call in (lambda: q.put_nowait(2), lambda: q.put(2, timeout=0.05), lambda: q.put(2, False, 5)):
        with pytest.raises(stdlib_queue.Full):
            call()
    assert q.get(timeout=10) == "only"


@pytest.mark.parametrize("maxsize", [0, -1, -100])
def test_maxsize_zero_or_negative_is_unbounded(flavour: Flavour, maxsize: int) -> None:
    q = flavour.Queue(maxsize)
    for i in range(200):
        q.put_nowait(i)
    assert not q.full() and q.qsize() == 200


@pytest.mark.parametrize("maxsize", [1.5, "3"])
def test_maxsize_of_the_wrong_type_is_a_type_error(flavour: Flavour, maxsize: Any) -> None:
    with pytest.raises(TypeError):
        flavour.Queue(maxsize)


def test_negative_timeouts_are_expired_timeouts_not_errors(flavour: Flavour) -> None:
    q = flavour.Queue(1)
    with pytest.raises(stdlib_queue.Empty):
        q.get(timeout=-1)
    q.put("x", timeout=-1)  # room: succeeds at once
    with pytest.raises(stdlib_queue.Full):
        q.put("y", timeout=-1)
    with pytest.raises(stdlib_queue.Full):
        q.put("y", False, -1)
    settle(q)
    assert q.get(True, -0.5) == "x"  # an item: succeeds at once
    with pytest.raises(stdlib_queue.Empty):
        q.get(timeout=-1)


def test_close_refuses_put_and_get_on_this_handle(flavour: Flavour) -> None:
    q = flavour.Queue(2)
    q.put("left")
    settle(q)
    q.close()
    q.close()  # twice is fine
    message = f"Queue {q!r} is closed"
    calls = (lambda: q.put(1), lambda: q.put_nowait(1), lambda: q.get(), lambda: q.get_nowait(),
             lambda: q.get(timeout=1))
    for call in calls:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == message
    assert q.qsize() == 1 and not q.full()  # sizes still work


def test_join_thread_requires_close(flavour: Flavour) -> None:
    q = flavour.Queue()
    q.put(1)
    with pytest.raises(AssertionError) as info:
        q.join_thread()
    assert str(info.value) == f"Queue {q!r} not closed"
    q.cancel_join_thread()
    q.close()
    assert q.join_thread() is None
    q.cancel_join_thread()


def test_queue_has_no_task_tracking_shutdown_or_maxsize(flavour: Flavour) -> None:
    q = flavour.Queue(3)
    for attr in ("task_done", "join", "shutdown", "maxsize", "unfinished_tasks"):
        assert not hasattr(q, attr), attr


# -- side by side: JoinableQueue -------------------------------------------------------------

def test_joinable_queue_counts_tasks(flavour: Flavour) -> None:
    q = flavour.JoinableQueue(2)
    with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
        q.task_done()
    q.join()  # nothing unfinished: returns at once
    q.put("a")
    q.put("b")
    assert [q.get(timeout=10), q.get(timeout=10)] == ["a", "b"]
    q.task_done()
    q.task_done()
    q.join()
    with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
        q.task_done()
    q.close()
    with pytest.raises(ValueError) as info:
        q.put("c")
    assert str(info.value) == f"Queue {q!r} is closed"


# -- side by side: SimpleQueue ----------------------------------------------------------------

def test_simple_queue_put_get_empty(flavour: Flavour) -> None:
    q = flavour.SimpleQueue()
    assert q.empty()
    q.put("a")
    q.put({"b": 2})
    assert not q.empty()
    assert [q.get(), q.get()] == ["a", {"b": 2}] and q.empty()
    with pytest.raises(TypeError):
        q.put(1, True)  # no block argument
    with pytest.raises(TypeError):
        q.get(True)
    for attr in ("get_nowait", "put_nowait", "qsize", "full", "join_thread"):
        assert not hasattr(q, attr), attr


def test_simple_queue_close_makes_the_handle_raise_os_error(flavour: Flavour) -> None:
    q = flavour.SimpleQueue()
    q.put("left")
    q.close()
    q.close()
    for call in (lambda: q.put(1), q.get, q.empty):
        with pytest.raises(OSError, match=r"^handle is closed$"):
            call()


# -- the API as a whole --------------------------------------------------------------------

def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def _positional(fn: Any) -> list[tuple[str, Any]]:
    params = inspect.signature(fn).parameters.values()
    return [(p.name, p.default) for p in params if p.kind is not p.KEYWORD_ONLY]


@pytest.mark.parametrize("name", ["Queue", "JoinableQueue", "SimpleQueue"])
def test_public_api_is_the_stdlib_one_plus_name_delete_disconnect(name: str) -> None:
    ours, theirs = getattr(pmp, name), getattr(multiprocessing.queues, name)
    assert _public(ours) == _public(theirs) | EXTENSIONS
    for method in _public(theirs) | {"__init__"}:
        assert _positional(getattr(ours, method)) == _positional(getattr(theirs, method)), method


def test_generic_alias() -> None:
    for cls in (pmp.Queue, pmp.JoinableQueue, pmp.SimpleQueue):
        assert cls[int].__origin__ is cls
    assert issubclass(pmp.JoinableQueue, pmp.Queue)


# -- pressure specifics ------------------------------------------------------------------------

def test_exceptions_are_pressure_subclasses_of_the_stdlib_ones(pq: Any) -> None:
    q = pq(pmp.Queue, 1)
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    q.put(1)
    with pytest.raises(pressure.Full):
        q.put_nowait(2)


def test_negative_timeout_does_not_wait(pq: Any) -> None:
    q = pq(pmp.Queue, 1)
    q.put(1)
    start = time.monotonic()
    with pytest.raises(pressure.Full):
        q.put(2, timeout=-30)
    q.get()
    with pytest.raises(pressure.Empty):
        q.get(timeout=-30)
    assert time.monotonic() - start < 10


def test_close_is_local_never_the_protocol_close(pq: Any, r: redis.Redis) -> None:
    q = pq(pmp.Queue)
    q.put("kept")
    q.close()
    assert not r.exists(q._queue.keys.closed) and r.llen(q._queue.keys.base) == 1
    assert q.qsize() == 1 and not q.full()  # the sizes still read Redis
    with pytest.raises(OSError, match=r"^handle is closed$"):
        q.empty()  # as multiprocessing's after a put: its feeder closed the pipe


def _child_uses_closed_handles(q: pmp.Queue[Any], s: pmp.SimpleQueue[Any], out: pmp.Queue[Any]) -> None:
    q.put("from the child")  # closed in the parent, open here
    s.put("simple from the child")
    q.close()
    try:
        q.put("refused")
    except ValueError as exc:
        out.put("child refused: " + str(exc).split(" ", 1)[0])
    out.put(s.empty())


def test_close_is_per_handle_and_per_process(pq: Any) -> None:
    q = pq(pmp.Queue)
    s = pq(pmp.SimpleQueue)
    out = pq(pmp.Queue)
    twin = pickle.loads(pickle.dumps(q))  # another handle in this process
    attached = pq(pmp.Queue, None, name=q.name)  # maxsize=None: attach as is
    q.close()
    s.close()
    twin.put("twin")
    attached.put("attached")
    p = multiprocessing.get_context("fork").Process(target=_child_uses_closed_handles, args=(q, s, out))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert out.get(timeout=10) == "child refused: Queue"
    assert out.get(timeout=10) is False
    assert [twin.get_nowait() for _ in range(3)] == ["twin", "attached", "from the child"]
    s_copy = pickle.loads(pickle.dumps(s))
    assert s_copy.get() == "simple from the child"
    s_copy.disconnect()
    with pytest.raises(ValueError):
        q.get_nowait()  # still closed here
    twin.close()
    attached.put("the child's and the twin's close did not reach this handle")
    assert attached.get_nowait().startswith("the child's")
    twin.disconnect()


def test_handles_pickle_anywhere_unlike_the_stdlib(pq: Any) -> None:
    with pytest.raises(RuntimeError, match="through inheritance"):
        pickle.dumps(multiprocessing.Queue())
    for cls in (pmp.Queue, pmp.JoinableQueue, pmp.SimpleQueue):
        q = pq(cls)
        copy = pickle.loads(pickle.dumps(q))
        assert type(copy) is cls and copy.name == q.name
        copy.put("through the copy")
        assert q.get() == "through the copy"
        copy.disconnect()


def test_named_queues_attach(pq: Any) -> None:
    first = pq(pmp.Queue, 2, name="jobs")
    first.put(1)
    assert pq(pmp.Queue, None, name="jobs").get_nowait() == 1
    assert pq(pmp.JoinableQueue, 2, name="jobs").full() is False
    # maxsize <= 0 (multiprocessing's default) names no bound: they attach to the bound 2
    assert pq(pmp.Queue, name="jobs").full() is False
    assert pq(pmp.SimpleQueue, name="jobs").empty() is True
    with pytest.raises(pressure.QueueExistsError):
        pq(pmp.Queue, 3, name="jobs")  # a bound named contradicts the stored bound 2
    assert first.name == "jobs"


def test_delete_removes_every_key(pq: Any, r: redis.Redis, prefix: str) -> None:
    q = pq(pmp.Queue)
    q.put(1)
    assert q.name.startswith("{anon-") and r.keys(f"{prefix}:*")
    q.delete()
    assert r.keys(f"{prefix}:*") == []


def test_repr_names_the_queue(pq: Any) -> None:
    q = pq(pmp.JoinableQueue, name="shown")
    assert repr(q).startswith("<pressure.multiprocessing.JoinableQueue name='shown' ")


# -- across processes ------------------------------------------------------------------------

def _produce(q: pmp.Queue[Any], producer: int, count: int) -> None:
    for i in range(count):
        q.put((producer, i))
    q.put(None)


def _consume(q: pmp.Queue[Any], producers: int, out: pmp.Queue[Any]) -> None:
    got, done = [], 0
    while done < producers:
        item = q.get(timeout=60)
        if item is None:
            done += 1
        else:
            got.append(item)
    out.put(got)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_producer_and_consumer_processes_share_an_anonymous_queue(pq: Any, method: str) -> None:
    q, out = pq(pmp.Queue, 20), pq(pmp.Queue)
    assert q.name.startswith("{anon-")
    ctx = multiprocessing.get_context(method)
    procs = [ctx.Process(target=_produce, args=(q, p, 150)) for p in range(2)]
    procs.append(ctx.Process(target=_consume, args=(q, 2, out)))
    for p in procs:
        p.start()
    got = out.get(timeout=90)
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert Counter(got) == Counter((p, i) for p in range(2) for i in range(150))  # exactly once
    for producer in range(2):
        assert [i for (p, i) in got if p == producer] == list(range(150))  # in order
    assert q.empty()


def _worker(q: pmp.JoinableQueue[Any], results: pmp.Queue[Any]) -> None:
    while (item := q.get()) is not None:
        time.sleep(0.01)
        results.put(item * 2)
        q.task_done()
    q.task_done()


def test_spawn_context_joinable_queue_join_across_processes(url: str, prefix: str) -> None:
    ctx = pmp.get_context("spawn")
    q: pmp.JoinableQueue[Any] = ctx.JoinableQueue(url=url, prefix=prefix)
    results: pmp.Queue[Any] = ctx.Queue(url=url, prefix=prefix)
    workers = [ctx.Process(target=_worker, args=(q, results)) for _ in range(2)]
    assert all(isinstance(w, multiprocessing.context.SpawnProcess) for w in workers)
    try:
        for w in workers:
            w.start()
        for i in range(20):
            q.put(i)
        q.join()  # returns only once the workers marked all 20 done
        assert results.qsize() == 20  # each result was put before its task_done
        for _ in workers:
            q.put(None)
        q.join()
        for w in workers:
            w.join(30)
        assert [w.exitcode for w in workers] == [0, 0]
        assert sorted(results.get_nowait() for _ in range(20)) == [2 * i for i in range(20)]
    finally:
        _delete(q)
        _delete(results)


EXIT_SCRIPT = textwrap.dedent("""
    import gc, os, sys, time, weakref
    import pressure.multiprocessing as mp

    def late_get(q, out):
        time.sleep(0.5)
        out.put(q.get(timeout=10))

    if __name__ == "__main__":
        anon = mp.Queue()
        kept = mp.Queue(name="kept")
        anon.put("from the creator")
        print(anon.name, flush=True)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # a plain fork runs the exit hooks too: this child must delete nothing
        os.waitpid(pid, 0)
        mp.get_context("fork").Process(target=late_get, args=(anon, kept)).start()
        dropped = mp.Queue()
        dropped.put(1)
        ref = weakref.ref(dropped)
        del dropped
        gc.collect()
        print("collected" if ref() is None else "alive", flush=True)
        # no join: multiprocessing joins the child at exit, and only then deletes the queues
""")


def test_anonymous_queues_are_deleted_when_their_creator_exits(url: str, prefix: str, r: redis.Redis) -> None:
    env = {**os.environ, "REDIS_URL": url, "PRESSURE_PREFIX": prefix}
    run = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    anon_name, collected = run.stdout.split()
    assert anon_name.startswith("{anon-")
    assert collected == "collected"  # the exit hook keeps no handle alive
    base = f"{prefix}:kept"
    remaining = {k.decode() for k in r.keys(f"{prefix}:*")}
    assert f"{base}:bound" in remaining  # a named queue stays
    assert all(k == base or k.startswith(base + ":") for k in remaining), remaining  # nothing else
    kept: pressure.Queue[str] = pressure.Queue("kept", url=url, prefix=prefix)
    try:
        # the child got the item: the forked child deleted nothing, and the deletion waited for it
        assert kept.get_nowait() == "from the creator"
    finally:
        kept.delete()
        kept.disconnect()


# -- the module ---------------------------------------------------------------------------------

def test_every_other_name_is_the_stdlib_modules() -> None:
    own = {"Queue", "JoinableQueue", "SimpleQueue", "Pool", "get_context"}
    assert set(multiprocessing.__all__) <= set(pmp.__all__)
    for name in set(multiprocessing.__all__) - own:
        assert getattr(pmp, name) is getattr(multiprocessing, name), name
    assert pmp.Pool is pressure.pool.Pool and "Pool" in dir(pmp)
    for name in ("Process", "Manager", "cpu_count", "current_process", "Event", "TimeoutError"):
        assert name in dir(pmp) and getattr(pmp, name) is getattr(multiprocessing, name)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pmp.nope
    with pytest.raises(AttributeError):
        pmp.__path__  # never the stdlib package's: no stdlib submodule under our name


def test_star_import() -> None:
    namespace: dict[str, Any] = {}
    exec("from pressure.multiprocessing import *", namespace)
    assert namespace["Queue"] is pmp.Queue and namespace["Process"] is multiprocessing.Process
    assert namespace["get_context"] is pmp.get_context


def test_get_context_wraps_the_stdlib_context() -> None:
    ctx = pmp.get_context("spawn")
    stdlib_ctx = multiprocessing.get_context("spawn")
    assert ctx.stdlib is stdlib_ctx and ctx.get_start_method() == "spawn"
    assert ctx.Queue is pmp.Queue and ctx.JoinableQueue is pmp.JoinableQueue
    assert ctx.SimpleQueue is pmp.SimpleQueue
    assert ctx.Process is stdlib_ctx.Process and ctx.Event == stdlib_ctx.Event
    assert ctx.Pool.__func__ is pmp.Context.Pool  # pressure's Pool, with this context's start method
    fork = ctx.get_context("fork")
    assert isinstance(fork, pmp.Context) and fork.get_start_method() == "fork"
    default = pmp.get_context()
    assert default.stdlib is multiprocessing.get_context()
    assert {"Queue", "Process", "Pool"} <= set(dir(ctx))
    with pytest.raises(AttributeError):
        ctx.nope


def test_contexts_are_made_once_with_the_stdlibs_identities_and_names() -> None:
    """As multiprocessing.get_context(): one context per start method, the same object at
    every call, a context's own get_context() is itself, and the stdlib's class names."""
    for method in multiprocessing.get_all_start_methods():
        ctx, stdlib_ctx = pmp.get_context(method), multiprocessing.get_context(method)
        assert ctx is pmp.get_context(method) and stdlib_ctx is multiprocessing.get_context(method)
        assert ctx.get_context() is ctx and stdlib_ctx.get_context() is stdlib_ctx
        assert ctx.get_context(None) is ctx and ctx.stdlib is stdlib_ctx
        assert type(ctx).__name__ == type(stdlib_ctx).__name__, (type(ctx), type(stdlib_ctx))
        assert isinstance(ctx, pmp.Context)
        for other in multiprocessing.get_all_start_methods():
            assert ctx.get_context(other) is pmp.get_context(other)
        with pytest.raises(ValueError, match="cannot set start method of concrete context"):
            ctx.set_start_method(method)
    assert pmp.get_context() is pmp.get_context(None) is pmp.get_context(multiprocessing.get_start_method())
    assert multiprocessing.get_context() is multiprocessing.get_context(multiprocessing.get_start_method())
    with pytest.raises(ValueError, match="cannot find context for 'nope'"):
        pmp.get_context("nope")
    default = multiprocessing.context._default_context
    assert type(pmp._default_context).__name__ == type(default).__name__ == "DefaultContext"
    assert pmp._default_context.stdlib is default


def test_the_default_context_follows_set_start_method() -> None:
    """In a fresh interpreter (set_start_method is once per process): get_context() is the
    context of the method set, through pressure's module or the stdlib's alike."""
    code = ("import multiprocessing as mp, pressure.multiprocessing as pmp\n"
            "assert pmp.get_start_method(allow_none=True) is None\n"
            "pmp.set_start_method('spawn')\n"
            "assert mp.get_start_method() == pmp.get_start_method() == 'spawn'\n"
            "assert pmp.get_context() is pmp.get_context('spawn') and pmp.get_context().stdlib is mp.get_context()\n"
            "assert type(pmp.get_context()).__name__ == 'SpawnContext'\n"
            "try:\n    pmp.set_start_method('fork')\nexcept RuntimeError as e:\n    assert 'already been set' in str(e)\n"
            "else:\n    raise AssertionError('set twice')\n"
            "pmp.set_start_method('forkserver', force=True)\n"
            "assert pmp.get_context() is pmp.get_context('forkserver')\n"
            "print('ok')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert run.stdout.strip() == "ok", run.stderr


def test_import_pressure_does_not_import_the_module() -> None:
    code = ("import sys, pressure; assert 'pressure.multiprocessing' not in sys.modules; "
            "from pressure import multiprocessing as a; import pressure.multiprocessing as b; "
            "assert a is b is pressure.multiprocessing and a.Queue.__module__ == a.__name__; "
            "print('ok')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "ok", run.stderr
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        pressure.nope  # type: ignore[attr-defined]


def _child_gets_and_reads_its_record(q: pressure.Queue[Any], url: str, out: Any) -> None:
    item = q.get(timeout=10)
    record = redis.Redis.from_url(url).hget(q.keys.consumers, q._consumer.id())
    out.put((item, record))


def test_a_forked_child_gets_under_its_own_record_with_the_handles_client_id(make_queue: Any, url: str) -> None:
    """A backlog's gets send one call packed once (get.lua 'nowait'); a handle with its own
    client_id names the same consumer in a forked child, whose call must carry the child's
    record (its pid), not the one packed in the parent: recovery reads the pid there."""
    q = make_queue(client_id="fixed-id")
    for i in range(4):
        q.put(i)
    assert q.get() == 0  # items left queued: the next get sends the packed 'nowait' call
    assert q.get() == 1
    out = multiprocessing.get_context("fork").SimpleQueue()
    p = multiprocessing.get_context("fork").Process(target=_child_gets_and_reads_its_record, args=(q, url, out))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    item, record = out.get()
    assert item == 2
    assert record is not None and record.split(b"|")[1] == str(p.pid).encode()
    assert q.get() == 3  # the parent's own call, packed for it, still names it
    own = redis.Redis.from_url(url).hget(q.keys.consumers, q._consumer.id())
    assert isinstance(own, bytes) and own.split(b"|")[1] == str(os.getpid()).encode()

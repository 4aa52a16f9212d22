"""pressure.pool.Pool (pressure.multiprocessing.Pool) against a private redis-server: the
stdlib's surface, call by call, and three failures of multiprocessing.Pool it does not share
(each shown failing with the stdlib first): a SIGKILLed worker (gh-66587), imap reading all
its input first (gh-84291), a task its worker cannot unpickle.

Tasks live in tests/executor_tasks.py so that worker processes can import them."""

from __future__ import annotations

import gc
import itertools
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

import pressure
import pressure.multiprocessing as pmp
from pressure.pool import Pool
from pressure.pool._feeding import limit
from tests import executor_tasks as tasks

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Upper bound for anything that should happen "soon": generous, never a speed goal.
SOON = 30.0


@pytest.fixture
def make_pool(url: str, prefix: str) -> Iterator[Callable[..., Pool]]:
    """Pools on the private server under this test's prefix; terminated and joined at the end."""
    made: list[Pool] = []

    def make(processes: int | None = 2, *args: Any, **kw: Any) -> Pool:
        kw.setdefault("url", url)
        kw.setdefault("prefix", prefix)
        pool = Pool(processes, *args, **kw)
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.terminate()
        pool.join()


@pytest.fixture
def pool(make_pool: Callable[..., Pool]) -> Pool:
    return make_pool()


def keys_under(r: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(r.scan_iter(match=f"{prefix}:*"))


def run_stdlib(tmp_path: Path, body: str, timeout: float) -> subprocess.CompletedProcess[str] | None:
    """``body`` run by a fresh interpreter (multiprocessing.Pool, fork); None if it was still
    running after ``timeout`` seconds (then it is killed, with its children)."""
    script = tmp_path / "stdlib_pool.py"
    script.write_text(textwrap.dedent(body))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# -- the surface ---------------------------------------------------------------------------


def test_map_starmap_apply_and_their_async_forms(pool: Pool) -> None:
    with multiprocessing.get_context("forkserver").Pool(2) as stdlib:
        for p in (pool, stdlib):
            assert p.map(tasks.square, range(10)) == [x * x for x in range(10)]
            assert p.map(tasks.square, iter(range(7)), chunksize=3) == [x * x for x in range(7)]
            assert p.map(tasks.square, []) == []
            assert p.starmap(tasks.add, [(1, 2), [3, 4]]) == [3, 7]
            assert p.apply(tasks.add, (2,), {"b": 40}) == 42
            assert p.apply_async(tasks.echo, (1,), {"self": 2}).get(SOON) == ((1,), {"self": 2})
            assert p.map_async(tasks.square, range(5)).get(SOON) == [0, 1, 4, 9, 16]
            assert p.starmap_async(tasks.add, [(1, 1)] * 3, 2).get(SOON) == [2, 2, 2]
            assert list(p.imap(tasks.square, range(6))) == [0, 1, 4, 9, 16, 25]
            assert list(p.imap(tasks.square, range(6), chunksize=4)) == [0, 1, 4, 9, 16, 25]
            assert sorted(p.imap_unordered(tasks.square, range(6))) == [0, 1, 4, 9, 16, 25]
            assert sorted(p.imap_unordered(tasks.square, range(6), 5)) == [0, 1, 4, 9, 16, 25]
            assert list(p.imap(tasks.square, [])) == []


def test_map_chunksize_default_is_the_stdlibs(make_pool: Callable[..., Pool]) -> None:
    """divmod(len, processes * 4), rounded up: 10 items on 2 processes are 5 chunks of 2, each
    one task of the executor."""
    pool = make_pool(2)
    result = pool.map_async(tasks.square, range(10))
    assert result._chunksize == 2 and result.get(SOON) == [x * x for x in range(10)]
    ones = pool.map_async(tasks.square, range(8))
    assert ones._chunksize == 1 and ones.get(SOON) == [x * x for x in range(8)]
    assert pool._executor.statistics().done == 5 + 8


def test_results_wait_ready_successful_and_timeouts(pool: Pool, tmp_path: Path) -> None:
    release = tmp_path / "release"
    held = pool.apply_async(tasks.hold, (str(tmp_path / "started"), str(release), "v"))
    with pytest.raises(ValueError, match="not ready"):
        held.successful()
    assert not held.ready()
    with pytest.raises(multiprocessing.TimeoutError):
        held.get(timeout=0.1)
    held.wait(0.05)
    assert not held.ready()
    imap = pool.imap(tasks.sleep_then, iter([("a", 0)]))  # one argument, the tuple: it fails
    with pytest.raises(TypeError):
        imap.next(SOON)
    release.touch()
    value, _pid = held.get(SOON)
    assert value == "v" and held.ready() and held.successful()
    failed = pool.apply_async(tasks.fail, ("boom",))
    failed.wait(SOON)
    assert failed.ready() and not failed.successful()
    with pytest.raises(ValueError, match="boom"):
        failed.get()


def test_imap_next_timeout_raises_multiprocessing_timeout(pool: Pool, tmp_path: Path) -> None:
    release = tmp_path / "release"
    it = pool.imap(_HoldArgs(str(tmp_path / "started"), str(release)), ["x", "y"])
    with pytest.raises(multiprocessing.TimeoutError):
        it.next(timeout=0.1)
    release.touch()
    assert [v for v, _ in it] == ["x", "y"]


class _HoldArgs:
    """tasks.hold with its files bound (picklable): a one-argument function for imap."""

    def __init__(self, started: str, release: str) -> None:
        self.started, self.release = started, release

    def __call__(self, value: Any) -> Any:
        return tasks.hold(self.started, self.release, value)


def test_map_fails_as_a_whole_with_the_first_error(pool: Pool) -> None:
    with multiprocessing.get_context("forkserver").Pool(2) as stdlib:
        for p in (pool, stdlib):
            with pytest.raises(ValueError, match="bad"):
                p.map(tasks.fail, ["bad"], chunksize=1)
            result = p.map_async(tasks.square, [1, "x", 3], chunksize=1)
            with pytest.raises(TypeError):
                result.get(SOON)
            assert result.ready() and not result.successful()
            it = p.imap(tasks.square, [1, "x", 3])
            assert next(it) == 1
            with pytest.raises(TypeError):
                next(it)
            assert next(it) == 9


def test_an_input_iterable_that_raises_ends_the_imap_with_its_error(pool: Pool) -> None:
    def numbers() -> Iterator[int]:
        yield 1
        yield 2
        raise LookupError("input failed")

    with multiprocessing.get_context("forkserver").Pool(2) as stdlib:
        for p in (pool, stdlib):
            for method in (p.imap, p.imap_unordered):
                not_iterable = method(tasks.square, 5)  # type: ignore[arg-type]
                with pytest.raises(TypeError, match="not iterable"):
                    next(not_iterable)
            it = p.imap(tasks.square, numbers())
            assert [next(it), next(it)] == [1, 4]
            with pytest.raises(LookupError, match="input failed"):
                next(it)
            with pytest.raises(StopIteration):
                next(it)


def test_callbacks_run_in_one_thread_one_at_a_time(pool: Pool) -> None:
    seen: list[tuple[Any, str]] = []
    threads: set[int] = set()
    busy = threading.Lock()
    overlaps: list[bool] = []

    def callback(value: Any) -> None:
        overlaps.append(not busy.acquire(blocking=False))
        try:
            threads.add(threading.get_ident())
            time.sleep(0.01)
            seen.append((value, "ok"))
        finally:
            busy.release()

    def error_callback(exc: BaseException) -> None:
        threads.add(threading.get_ident())
        seen.append((str(exc), "error"))

    results = [pool.apply_async(tasks.square, (i,), callback=callback, error_callback=error_callback)
               for i in range(8)]
    results.append(pool.apply_async(tasks.fail, ("nope",), callback=callback, error_callback=error_callback))
    results.append(pool.map_async(tasks.square, range(4), callback=callback, error_callback=error_callback))
    results.append(pool.map_async(tasks.fail, ["m"], callback=callback, error_callback=error_callback))
    for result in results:
        result.wait(SOON)
    assert sorted(v for v, kind in seen if kind == "ok" and isinstance(v, int)) == [i * i for i in range(8)]
    assert ([0, 1, 4, 9], "ok") in seen and ("nope", "error") in seen and ("m", "error") in seen
    assert len(threads) == 1 and threading.get_ident() not in threads and not any(overlaps)


def test_a_callback_that_raises_leaves_the_pool_working(pool: Pool, caplog: pytest.LogCaptureFixture,
                                                        tmp_path: Path) -> None:
    """multiprocessing's result-handler thread dies of it: no result comes any more."""
    stdlib = run_stdlib(tmp_path, """
        import multiprocessing
        from tests import executor_tasks as tasks
        def bad(value):
            raise RuntimeError("callback bug")
        if __name__ == "__main__":
            pool = multiprocessing.get_context("fork").Pool(1)
            for callback in (bad, None):
                try:
                    print(pool.apply_async(tasks.square, (3,), callback=callback).get(timeout=2))
                except multiprocessing.TimeoutError:
                    print("timed out")
            pool.close()
        """, timeout=SOON)
    assert stdlib is not None and stdlib.stdout.split() == ["timed", "out", "timed", "out"], stdlib

    def bad(value: Any) -> None:
        raise RuntimeError("callback bug")

    result = pool.apply_async(tasks.square, (3,), callback=bad)
    assert result.get(SOON) == 9  # ready, though its callback raised (the stdlib hangs here)
    assert pool.apply(tasks.square, (4,)) == 16
    assert "a callback raised" in caplog.text


# -- validation, states -------------------------------------------------------------------


def test_bad_arguments_raise_the_stdlibs_errors(url: str, prefix: str, r: redis.Redis) -> None:
    for make in (lambda **kw: multiprocessing.Pool(**kw), lambda **kw: Pool(url=url, prefix=prefix, **kw)):
        with pytest.raises(ValueError, match="^Number of processes must be at least 1$"):
            make(processes=0)
        with pytest.raises(ValueError, match="^maxtasksperchild must be a positive int or None$"):
            make(processes=1, maxtasksperchild=0)
        with pytest.raises(ValueError, match="^maxtasksperchild must be a positive int or None$"):
            make(processes=1, maxtasksperchild=1.5)
        with pytest.raises(TypeError, match="^initializer must be a callable$"):
            make(processes=1, initializer=3)
    assert keys_under(r, prefix) == []  # nothing created


def test_method_argument_errors(pool: Pool) -> None:
    with multiprocessing.get_context("forkserver").Pool(1) as stdlib:
        for p in (pool, stdlib):
            with pytest.raises(ValueError, match=r"^Chunksize must be 1\+, not 0$"):
                p.imap(tasks.square, [1], chunksize=0)
            with pytest.raises(ValueError, match=r"^Chunksize must be 1\+, not -1$"):
                p.imap_unordered(tasks.square, [1], chunksize=-1)
    for bad, error in (("2", TypeError), (2.0, TypeError), (0, ValueError), (-1, ValueError)):
        for method in (pool.imap, pool.imap_unordered):
            with pytest.raises(error, match="buffersize must be"):
                method(tasks.square, [1], buffersize=bad)


def test_close_join_terminate_states(make_pool: Callable[..., Pool], url: str, prefix: str,
                                     r: redis.Redis) -> None:
    pool = make_pool(2)
    with pytest.raises(ValueError, match="^Pool is still running$"):
        pool.join()
    result = pool.starmap_async(tasks.sleep_then, [(i, 0.05) for i in range(6)], chunksize=1)
    pool.close()
    assert "state=CLOSE" in repr(pool)
    for call in (lambda: pool.apply_async(tasks.square, (1,)), lambda: pool.map(tasks.square, [1]),
                 lambda: pool.imap(tasks.square, [1]), lambda: pool.imap_unordered(tasks.square, [1]),
                 lambda: pool.starmap_async(tasks.add, [(1, 2)]), lambda: pool.__enter__()):
        with pytest.raises(ValueError, match="^Pool not running$"):
            call()
    pool.join()  # the outstanding work finishes first
    assert result.get(0) == list(range(6))
    assert pool._pool == [] and keys_under(r, prefix) == []  # an anonymous pool's keys are gone
    pool.close()  # twice: nothing
    pool.terminate()
    pool.join()


def test_terminate_stops_now_and_fails_what_is_outstanding(make_pool: Callable[..., Pool],
                                                           tmp_path: Path, prefix: str,
                                                           r: redis.Redis) -> None:
    pool = make_pool(2)
    pids = [p.pid for p in pool._pool]
    assert len(pids) == 2 and all(psutil.pid_exists(pid) for pid in pids)
    held = [pool.apply_async(tasks.hold, (str(tmp_path / "s"), str(tmp_path / "never"), i)) for i in range(2)]
    many = pool.map_async(tasks.square, range(1000), chunksize=1)
    endless = pool.imap(tasks.square, itertools.count())
    tasks.wait_for_lines(tmp_path / "s", 2, SOON)
    pool.terminate()
    assert "state=TERMINATE" in repr(pool)
    for result in (*held, many):
        assert result.ready()
        with pytest.raises(pressure.BrokenExecutor, match="the pool was terminated"):
            result.get(0)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in pids)
    del endless
    pool.join()
    with pytest.raises(ValueError, match="^Pool not running$"):
        pool.apply_async(tasks.square, (1,))
    assert keys_under(r, prefix) == []


def test_context_manager_terminates(make_pool: Callable[..., Pool]) -> None:
    with make_pool(1) as pool:
        assert pool.apply(tasks.square, (5,)) == 25
    assert "state=TERMINATE" in repr(pool)
    with pytest.raises(ValueError, match="^Pool not running$"):
        pool.map(tasks.square, [1])


def test_a_pool_does_not_pickle(pool: Pool) -> None:
    with pytest.raises(NotImplementedError, match="^pool objects cannot be passed between processes or pickled$"):
        pickle.dumps(pool)


def test_an_unclosed_running_pool_warns_when_collected(make_pool: Callable[..., Pool], url: str,
                                                       prefix: str) -> None:
    pool = Pool(1, url=url, prefix=prefix, local_workers=False)
    closed = make_pool(1, local_workers=False)
    closed.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del pool
        gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning
            and "unclosed running multiprocessing pool" in str(w.message)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        del closed
        gc.collect()


def test_initializer_and_maxtasksperchild(make_pool: Callable[..., Pool]) -> None:
    pool = make_pool(1, tasks.set_global, ("init",))
    value, _ = pool.apply(tasks.get_global)
    assert value == "init"
    retiring = make_pool(1, maxtasksperchild=1)
    # a 'fork' context is changed for 'forkserver': retired workers are replaced from there
    default = multiprocessing.get_context().get_start_method()
    assert retiring._ctx.get_start_method() == ("forkserver" if default == "fork" else default)
    pids = {retiring.apply(tasks.get_global)[1] for _ in range(3)}
    assert len(pids) == 3  # each task ran in a new worker


def test_get_context_spawn_pool(url: str, prefix: str) -> None:
    ctx = pmp.get_context("spawn")
    pool = ctx.Pool(1, url=url, prefix=prefix)
    try:
        assert isinstance(pool, Pool) and pool._ctx.get_start_method() == "spawn"
        assert pool.map(tasks.square, [1, 2, 3]) == [1, 4, 9]
        assert pool._pool[0]._popen.method == "spawn"  # type: ignore[union-attr]
    finally:
        pool.close()
        pool.join()
    assert pmp.Pool is Pool and pressure.pool.Pool is Pool


# -- better than the stdlib ---------------------------------------------------------------


@pytest.mark.slow
def test_a_sigkilled_worker_hangs_the_stdlib_map_not_this_pool(make_pool: Callable[..., Pool],
                                                               tmp_path: Path) -> None:
    """gh-66587: multiprocessing.Pool.map waits forever for a task whose worker was killed
    (the OOM killer's SIGKILL). Here the task runs again, up to max_attempts, then fails
    with WorkerLost; the pool goes on."""
    log = tmp_path / "runs"
    stdlib = run_stdlib(tmp_path, f"""
        import multiprocessing
        from tests import executor_tasks as tasks
        if __name__ == "__main__":
            with multiprocessing.get_context("fork").Pool(2) as pool:
                pool.map(tasks.kill_self, [{str(log)!r}])
            print("returned")
        """, timeout=10)
    assert stdlib is None, stdlib  # still waiting after 10 s: it hangs
    assert len(tasks.read_lines(log)) == 1  # its task ran once
    pool = make_pool(2, max_attempts=2)
    mine = tmp_path / "mine"
    with pytest.raises(pressure.WorkerLost):
        pool.map(tasks.kill_self, [str(mine)])
    assert len(tasks.read_lines(mine)) == 2
    assert pool.map(tasks.square, range(4)) == [0, 1, 4, 9]


def counted(limit: int | None, seen: list[int]) -> Iterator[int]:
    """0, 1, ... (up to ``limit``), each appended to ``seen`` as it is read."""
    for i in itertools.count() if limit is None else range(limit):
        seen.append(i)
        yield i


def test_imap_reads_its_input_only_a_bounded_amount_ahead(pool: Pool, tmp_path: Path) -> None:
    """gh-84291: multiprocessing's imap reads the whole input before the first result (an
    endless one: until memory runs out). Here it reads at most processes + buffersize tasks
    ahead of the results taken (by default 2 + 256 on 2 processes), results in order."""
    stdlib = run_stdlib(tmp_path, """
        import multiprocessing, time
        from tests import executor_tasks as tasks
        seen = []
        def counted():
            for i in range(5000):
                seen.append(i)
                yield i
        if __name__ == "__main__":
            with multiprocessing.get_context("fork").Pool(2) as pool:
                it = pool.imap(tasks.square, counted())
                assert next(it) == 0
                time.sleep(1)
                print(len(seen))
        """, timeout=SOON)
    assert stdlib is not None and stdlib.returncode == 0, stdlib
    assert int(stdlib.stdout) == 5000  # all of it read for one result
    for kind in (pool.imap, pool.imap_unordered):
        seen: list[int] = []
        it = kind(tasks.square, counted(None, seen))
        got = [next(it) for _ in range(100)]
        window = limit(2, None)
        assert window == 2 + 256
        if kind == pool.imap:
            assert got == [i * i for i in range(100)]
        else:  # the first 100 to finish, of the at most 100 + window submitted
            assert len(set(got)) == 100 and all(x in {i * i for i in range(100 + window)} for x in got)
        time.sleep(0.2)
        assert len(seen) <= 100 + window
        seen2: list[int] = []
        small = kind(tasks.square, counted(None, seen2), buffersize=1)
        assert next(small) in (0, 1, 4)
        time.sleep(0.2)
        assert len(seen2) <= 1 + 2 + 1
        chunks: list[int] = []
        chunked = kind(tasks.square, counted(None, chunks), chunksize=5, buffersize=2)
        next(chunked)
        time.sleep(0.2)
        assert len(chunks) <= 5 * (2 + 2 + 1)
    assert list(pool.imap(tasks.square, counted(500, []))) == [i * i for i in range(500)]


def test_close_then_join_lets_a_default_imap_read_the_rest(make_pool: Callable[..., Pool]) -> None:
    """As the stdlib: imap, close, join, then iterate: every result is there."""
    pool = make_pool(2)
    seen: list[int] = []
    it = pool.imap(tasks.square, counted(1000, seen))  # more than the read-ahead's window
    pool.close()
    pool.join()
    assert len(seen) == 1000 and list(it) == [i * i for i in range(1000)]
    bounded = make_pool(1)
    it = bounded.imap(tasks.square, counted(10, []), buffersize=1)
    bounded.close()  # a buffersize given stays a bound: the results must be taken to go on
    assert list(it) == [i * i for i in range(10)]
    bounded.join()


def test_a_task_its_worker_cannot_unpickle_fails_alone(pool: Pool, tmp_path: Path) -> None:
    """multiprocessing's worker dies on a task it cannot unpickle, and the result never comes
    (get() times out); here that result fails and the pool goes on. A task that cannot be
    pickled fails its own result too (as the stdlib's)."""
    stdlib = run_stdlib(tmp_path, """
        import multiprocessing
        from tests import executor_tasks as tasks
        if __name__ == "__main__":
            with multiprocessing.get_context("fork").Pool(1) as pool:
                result = pool.apply_async(tasks.square, (tasks.ErrorAtUnpickle(),))
                try:
                    result.get(timeout=3)
                except multiprocessing.TimeoutError:
                    print("timed out")
                print(pool.map(tasks.square, [1, 2]))
        """, timeout=SOON)
    assert stdlib is not None and stdlib.stdout.split("\n")[0] == "timed out", stdlib
    result = pool.apply_async(tasks.square, (tasks.ErrorAtUnpickle(),))
    with pytest.raises(pressure.BrokenExecutor, match="refused to unpickle"):
        result.get(SOON)
    with pytest.raises(pressure.BrokenExecutor, match="refused to unpickle"):
        pool.map(tasks.square, [1, tasks.ErrorAtUnpickle(), 3], chunksize=1)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        pool.apply(lambda: 1)
    it = pool.imap(tasks.square, [2, threading.Lock(), 4])
    assert next(it) == 4
    with pytest.raises(TypeError):
        next(it)
    assert next(it) == 16
    assert pool.map(tasks.square, range(3)) == [0, 1, 4]


# -- workers on other hosts ---------------------------------------------------------------


def _worker_group(name: str, url: str, prefix: str, host: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "pressure", "worker", name, "--url", url, "--prefix", prefix,
                             "--processes", "1", "--create"],
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "PRESSURE_HOSTNAME": host},
                            cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


@pytest.mark.slow
def test_a_named_pool_served_by_workers_on_two_hosts(make_pool: Callable[..., Pool], url: str,
                                                     prefix: str, tmp_path: Path) -> None:
    """Pool(local_workers=False, name=...) starts no worker; two groups started with
    ``python -m pressure worker NAME`` (two stand-in hosts) run its tasks, together."""
    pool = make_pool(2, name="shared", local_workers=False)
    assert pool._pool == [] and pool.name == "shared"
    groups = [_worker_group("shared", url, prefix, f"host{i}") for i in range(2)]
    try:
        barrier = str(tmp_path / "barrier")
        pids = pool.starmap(tasks.wait_at_barrier, [(barrier, 2)] * 2, chunksize=1)
        parents = {psutil.Process(pid).ppid() for _, pid in pids}
        assert parents == {g.pid for g in groups}  # one task in each group, at the same time
        assert pool.map(tasks.square, range(20)) == [x * x for x in range(20)]
        assert sorted(pool.imap_unordered(tasks.square, range(5))) == [0, 1, 4, 9, 16]
    finally:
        pool.close()
        pool.join()
        for group in groups:
            os.killpg(group.pid, signal.SIGTERM)
        for group in groups:
            try:
                group.wait(timeout=SOON)
            except subprocess.TimeoutExpired:
                os.killpg(group.pid, signal.SIGKILL)
                group.wait()




def test_errors_are_the_stdlibs_remote_traceback_and_maybe_encoding_error(pool: Pool) -> None:
    """A worker's traceback is a multiprocessing.pool.RemoteTraceback (the ``__cause__``); a
    result that cannot be pickled fails with MaybeEncodingError, its ``exc`` and ``value`` the
    reprs, as the stdlib's."""
    with multiprocessing.get_context("forkserver").Pool(1) as stdlib:
        for p in (pool, stdlib):
            with pytest.raises(ValueError, match="deep") as raised:
                p.apply(tasks.fail, ("deep",))
            cause = raised.value.__cause__
            assert type(cause) is multiprocessing.pool.RemoteTraceback  # type: ignore[attr-defined]
            assert "Traceback (most recent call last)" in cause.tb and "deep" in cause.tb
            errors: list[BaseException] = []
            result = p.apply_async(tasks.return_unpicklable, error_callback=errors.append)
            with pytest.raises(multiprocessing.pool.MaybeEncodingError) as encoding:  # type: ignore[attr-defined]
                result.get(SOON)
            assert errors == [encoding.value]
            assert encoding.value.value.startswith("<function <lambda>") and "pickle" in encoding.value.exc
            assert str(encoding.value).startswith("Error sending result: '<function <lambda>")
            assert p.apply(tasks.square, (3,)) == 9


def test_processes_default_and_local_workers(make_pool: Callable[..., Pool]) -> None:
    """``processes=None`` is the stdlib's count; that many local workers start with the pool,
    none with ``local_workers=False``."""
    remote_only = make_pool(None, local_workers=False)
    assert remote_only._processes == (getattr(os, "process_cpu_count", os.cpu_count)() or 1)
    assert remote_only._pool == [] and remote_only._executor.workers_alive() == 0
    local = make_pool(1)
    assert len(local._pool) == 1 and local._pool[0].is_alive()  # started with the pool, not at first use


def test_a_failing_initializer_breaks_the_pool(make_pool: Callable[..., Pool]) -> None:
    """multiprocessing starts worker after worker, each failing, and the results never come;
    here the pool is broken: every result fails with BrokenExecutor, naming the error."""
    pool = make_pool(1, tasks.failing_initializer)
    with pytest.raises(pressure.BrokenExecutor, match="this initializer always fails"):
        pool.apply(tasks.square, (2,))
    with pytest.raises(pressure.BrokenExecutor):
        pool.map(tasks.square, range(3))
    with pytest.raises(pressure.BrokenExecutor):
        pool.apply_async(tasks.square, (2,))
    pool.close()
    pool.join()  # nothing is outstanding


def test_the_executors_keywords_pass_through(make_pool: Callable[..., Pool]) -> None:
    """serializer='cloudpickle' sends a lambda (pickle cannot); a signed pool's tasks run (its
    local workers have its key: signing itself is tests/test_signing_executor.py's);
    max_attempts is checked as the Executor's."""
    pool = make_pool(1, serializer="cloudpickle", authkey="k" * 32, name="signed")
    assert pool.map(lambda x: x + 1, [1, 2]) == [2, 3]
    with pytest.raises((pickle.PicklingError, AttributeError)):
        make_pool(1).apply(lambda: 1)
    with pytest.raises(ValueError, match="max_attempts must be a positive integer"):
        make_pool(1, max_attempts=0)

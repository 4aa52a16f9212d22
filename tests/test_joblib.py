"""pressure.joblib: joblib.Parallel (and scikit-learn's ``n_jobs=``) on pressure workers.

Each test runs ``joblib.Parallel`` inside ``joblib.parallel_backend("pressure", ...)`` on the
private redis-server, under the test's own prefix; its batches run in the workers the call's
Executor starts (forked children) or, with ``local_workers=False``, in ``python -m pressure
worker`` groups posing as two hosts. Tasks that must run at the same time wait at a barrier
(tests/executor_tasks.py), those that must still be running wait for a file.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import joblib
import psutil
import pytest
import redis
from joblib import Parallel, delayed

import pressure
import pressure.joblib
from tests import executor_tasks as tasks
from tests import joblib_tasks
from tests.test_executor import keys_under, kill_group, start_worker_group, wait_for


@pytest.fixture
def backend(url: str, prefix: str) -> Callable[..., Any]:
    """``joblib.parallel_backend("pressure", ...)`` on the private server, under this test's
    prefix."""
    def make(**kw: Any) -> Any:
        kw.setdefault("url", url)
        kw.setdefault("prefix", prefix)
        return joblib.parallel_backend("pressure", **kw)
    return make


@pytest.fixture
def children() -> Iterator[Callable[[], set[int]]]:
    """The pids of this process's children started since the test began (the session's
    redis-server is not one)."""
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield lambda: {p.pid for p in me.children(recursive=True)} - before


def square_in(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


# -- results -------------------------------------------------------------------------------


def test_results_come_back_in_order_from_worker_processes(backend: Callable[..., Any]) -> None:
    """Parallel(n_jobs=2) returns what the calls return, in the order of the inputs, computed
    in worker processes (not this one); a lambda and a function of the test module go as they
    are (cloudpickle, the backend's default serializer)."""
    with backend():
        out = Parallel(n_jobs=2, batch_size=1)(delayed(square_in)(i) for i in range(30))
        lambdas = Parallel(n_jobs=2)(delayed(lambda x: -x)(i) for i in range(30))
    assert [value for value, _ in out] == [i * i for i in range(30)]
    assert os.getpid() not in {pid for _, pid in out}
    assert lambdas == [-i for i in range(30)]


def test_parallel_config_selects_the_backend_too(url: str, prefix: str, r: redis.Redis) -> None:
    """joblib.parallel_config(backend="pressure", ...) takes the same arguments."""
    with joblib.parallel_config(backend="pressure", n_jobs=2, url=url, prefix=prefix):
        out = Parallel()(delayed(square_in)(i) for i in range(6))
    assert [v for v, _ in out] == [i * i for i in range(6)] and os.getpid() not in {p for _, p in out}
    assert keys_under(r, prefix) == []


def test_return_as_generator_and_generator_unordered(backend: Callable[..., Any], tmp_path: Path) -> None:
    """return_as="generator" yields in input order; "generator_unordered" as the batches
    finish: the first task waits until the second has run, so the second comes first."""
    done = str(tmp_path / "second-done")
    calls = [delayed(tasks.hold)(str(tmp_path / "started"), done, 0), delayed(tasks.record)(done, "1")]
    with backend():
        ordered = Parallel(n_jobs=2, return_as="generator")(delayed(pow)(i, 2) for i in range(10))
        assert not isinstance(ordered, list)
        assert list(ordered) == [i * i for i in range(10)]
        unordered = list(Parallel(n_jobs=2, batch_size=1, return_as="generator_unordered")(calls))
    assert unordered[0] == "1" and unordered[1][0] == 0


def test_a_managed_backend_runs_several_calls_on_one_executor(backend: Callable[..., Any], r: redis.Redis,
                                                               prefix: str) -> None:
    """``with Parallel(...) as parallel``: the calls share the workers; its keys go at the end."""
    with backend():
        with Parallel(n_jobs=2, batch_size=1) as parallel:
            first = parallel(delayed(square_in)(i) for i in range(4))
            second = parallel(delayed(square_in)(i) for i in range(4, 8))
            assert keys_under(r, prefix) != []
    assert [v for v, _ in first + second] == [i * i for i in range(8)]
    assert {pid for _, pid in first} & {pid for _, pid in second}
    assert keys_under(r, prefix) == []


def test_nested_parallel_calls_run_on_threads_in_the_worker(backend: Callable[..., Any]) -> None:
    """A Parallel call inside a task runs on joblib's threading backend in that worker (a task
    never waits for tasks of its own executor)."""
    with backend():
        out = Parallel(n_jobs=2)(delayed(joblib_tasks.nested_powers)(b, 4) for b in range(2, 5))
    assert out == [([b ** k for k in range(4)], "ThreadingBackend") for b in range(2, 5)]


# -- n_jobs --------------------------------------------------------------------------------


def test_n_jobs_counts_back_from_the_cpus_for_local_workers(backend: Callable[..., Any]) -> None:
    """Anonymous (local workers only): -1 is cpu_count(), -2 one fewer (at least 1), positive
    values are themselves, 0 is joblib's ValueError; n_jobs=None is -1 (dask's default, not
    loky's 1)."""
    cpus = joblib.cpu_count()
    with backend():
        assert joblib.effective_n_jobs(-1) == cpus
        assert joblib.effective_n_jobs(-2) == max(cpus - 1, 1)
        assert joblib.effective_n_jobs(3) == 3
        assert joblib.effective_n_jobs(None) == cpus
        with pytest.raises(ValueError, match="n_jobs == 0 in Parallel has no meaning"):
            joblib.effective_n_jobs(0)


def test_n_jobs_1_runs_in_this_process(backend: Callable[..., Any], r: redis.Redis, prefix: str,
                                       children: Callable[[], set[int]]) -> None:
    """n_jobs=1 runs the calls here, as with every joblib backend: no executor is made."""
    with backend():
        out = Parallel(n_jobs=1)(delayed(square_in)(i) for i in range(3))
    assert out == [(i * i, os.getpid()) for i in range(3)]
    assert keys_under(r, prefix) == [] and children() == set()


def test_n_jobs_minus_1_without_workers_and_local_workers_false_times_out(
        backend: Callable[..., Any], r: redis.Redis, prefix: str) -> None:
    """local_workers=False, n_jobs=-1 and no worker of the name alive: TimeoutError after
    wait_for_workers_timeout, naming the command that starts workers; nothing is made."""
    with backend(name="nobody", local_workers=False, wait_for_workers_timeout=0.3):
        with pytest.raises(TimeoutError, match="python -m pressure worker nobody"):
            Parallel(n_jobs=-1)(delayed(pow)(i, 2) for i in range(3))
    assert keys_under(r, prefix) == []


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"serializer": "json"}, ValueError, "serializer must be 'pickle' or 'cloudpickle', not 'json'"),
    ({"name": 3}, TypeError, "executor name must be a str or None, not int"),
    ({"name": ""}, ValueError, "executor name must not be empty"),
    ({"local_workers": "no"}, TypeError, "local_workers must be True, False or None"),
    ({"wait_for_workers_timeout": -1}, ValueError, "wait_for_workers_timeout must be a positive"),
    ({"local_workers": False}, ValueError, "local_workers=False needs a name"),
    ({"max_attempts": 0}, ValueError, "max_attempts must be a positive integer, not 0"),
    ({"visibility_timeout": 0}, ValueError, "visibility_timeout must be a positive"),
    ({"prefix": ""}, ValueError, "prefix must be a non-empty string"),
    ({"initializer": 3}, TypeError, "initializer must be a callable"),
    ({"mp_context": multiprocessing.get_context("fork"), "max_tasks_per_child": 2}, ValueError,
     "max_tasks_per_child is incompatible with the 'fork' multiprocessing start method"),
    ({"max_workers": 2}, TypeError, "unexpected keyword argument 'max_workers'"),
])
def test_bad_arguments_fail_when_the_backend_is_chosen(backend: Callable[..., Any], r: redis.Redis, prefix: str,
                                                       kwargs: dict[str, Any], error: type[Exception],
                                                       message: str) -> None:
    """A bad argument raises in parallel_backend(...) itself, before anything is made."""
    with pytest.raises(error, match=message):
        backend(**kwargs)
    assert keys_under(r, prefix) == []


def test_unsigned_pickle_to_another_host_is_refused_then_signed_batches_run(
        backend: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, r: redis.Redis, prefix: str) -> None:
    """With Redis on another host (every server counts as one here) and no authkey, the
    backend refuses in parallel_backend(...), as the Executor does; with an authkey its
    batches run (signed)."""
    monkeypatch.setenv("PRESSURE_LOCAL_HOSTS", "none")
    for var in ("PRESSURE_AUTHKEY", "PRESSURE_INSECURE_PICKLE", "PRESSURE_REQUIRE_AUTHKEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(pressure.UnsignedPickle):
        backend()
    assert keys_under(r, prefix) == []
    with backend(authkey=b"k" * 32):
        assert Parallel(n_jobs=2)(delayed(pow)(i, 2) for i in range(6)) == [i * i for i in range(6)]


# -- errors --------------------------------------------------------------------------------


def test_a_task_error_propagates_with_its_type(backend: Callable[..., Any]) -> None:
    """An exception raised in a task is raised by Parallel as the sequential backend raises
    it (type and arguments), with the worker's traceback as its cause."""
    calls = [delayed(tasks.square)(1), delayed(tasks.raise_custom)(7, "seven"), delayed(tasks.square)(2)]
    with pytest.raises(tasks.CustomError) as sequential:
        Parallel(n_jobs=1)(calls)
    with backend(), pytest.raises(tasks.CustomError) as remote:
        Parallel(n_jobs=2)(calls)
    assert remote.value.args == sequential.value.args == (7, "seven")
    assert "raise_custom" in str(remote.value.__cause__)


def test_the_first_error_cancels_the_tasks_not_started(backend: Callable[..., Any], tmp_path: Path,
                                                       r: redis.Redis, prefix: str,
                                                       children: Callable[[], set[int]]) -> None:
    """One task fails while the others wait (held): Parallel raises at once; the tasks no
    worker had started are cancelled and never run; once the held ones are let go, the
    workers stop and the keys go."""
    started, release = str(tmp_path / "started"), str(tmp_path / "release")
    calls = [delayed(tasks.fail)("first")] + [delayed(tasks.hold)(started, release, i) for i in range(40)]
    try:
        with backend(), pytest.raises(ValueError, match="first"):
            Parallel(n_jobs=2, batch_size=1, pre_dispatch="all")(calls)
        assert children() != set()  # raised without waiting for the held tasks
    finally:
        Path(release).touch()
    wait_for(lambda: keys_under(r, prefix), lambda keys: keys == [])
    wait_for(children, lambda pids: pids == set())
    assert len(tasks.read_lines(started)) < 40


def test_timeout_raises_timeout_error(backend: Callable[..., Any], tmp_path: Path, r: redis.Redis,
                                      prefix: str) -> None:
    """Parallel(timeout=...) raises joblib's TimeoutError (multiprocessing's, as with loky)
    for a batch still running by then."""
    release = str(tmp_path / "release")
    try:
        with backend(), pytest.raises(multiprocessing.TimeoutError):
            Parallel(n_jobs=2, timeout=0.5)(delayed(tasks.hold)(str(tmp_path / "started"), release, i)
                                            for i in range(2))
    finally:
        Path(release).touch()
    wait_for(lambda: keys_under(r, prefix), lambda keys: keys == [])


@pytest.mark.slow
def test_a_killed_worker_s_task_runs_again_then_worker_lost(backend: Callable[..., Any], tmp_path: Path) -> None:
    """A task whose worker is SIGKILLed runs again on another (its result comes back); one
    that kills every worker running it fails, after max_attempts starts, with
    pressure.WorkerLost (a BrokenExecutor)."""
    once = str(tmp_path / "once")
    with backend(max_attempts=2):
        out = Parallel(n_jobs=2, batch_size=1)(
            [delayed(joblib_tasks.kill_worker_once)(once, 41)] + [delayed(tasks.square)(i) for i in range(4)])
        assert out == [41, 0, 1, 4, 9]
        log = str(tmp_path / "always")
        with pytest.raises(pressure.WorkerLost):
            Parallel(n_jobs=2, batch_size=1)([delayed(tasks.kill_self)(log), delayed(tasks.square)(3)])
    assert len(tasks.read_lines(once)) == 1
    assert len(tasks.read_lines(log)) == 2


# -- clean shutdown ------------------------------------------------------------------------


def test_an_anonymous_backend_leaves_no_worker_and_no_key(backend: Callable[..., Any], r: redis.Redis,
                                                          prefix: str, children: Callable[[], set[int]]) -> None:
    """When Parallel returns, its local workers are gone and its keys deleted."""
    with backend():
        assert Parallel(n_jobs=2)(delayed(pow)(i, 3) for i in range(10)) == [i ** 3 for i in range(10)]
        assert keys_under(r, prefix) == []
        assert children() == set()


# -- scikit-learn --------------------------------------------------------------------------


def test_scikit_learn_cross_val_score_and_grid_search(backend: Callable[..., Any]) -> None:
    """cross_val_score and GridSearchCV with n_jobs=2 on the backend give the sequential
    results."""
    from sklearn.datasets import load_iris  # (the test extra has scikit-learn: never skipped)
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, cross_val_score

    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500)
    expected = cross_val_score(model, X, y, cv=3)
    sequential = GridSearchCV(model, {"C": [0.1, 1.0, 10.0]}, cv=3).fit(X, y)
    with backend():
        scores = cross_val_score(model, X, y, cv=3, n_jobs=2)
        search = GridSearchCV(model, {"C": [0.1, 1.0, 10.0]}, cv=3, n_jobs=2).fit(X, y)
    assert list(scores) == list(expected)
    assert search.best_params_ == sequential.best_params_
    assert list(search.cv_results_["mean_test_score"]) == list(sequential.cv_results_["mean_test_score"])


# -- workers on other hosts ----------------------------------------------------------------


@pytest.mark.slow
def test_workers_on_two_hosts_run_the_batches(backend: Callable[..., Any], url: str, prefix: str, tmp_path: Path,
                                              r: redis.Redis, children: Callable[[], set[int]]) -> None:
    """Two ``python -m pressure worker`` groups posing as host-a and host-b (two processes
    each); the backend, named as they are and with local_workers=False, starts no worker:
    n_jobs=-1 is their four, and four calls that can only finish together (a barrier) run on
    both hosts. The named executor's keys stay for its workers."""
    groups: list[subprocess.Popen[bytes]] = []
    try:
        for host in ("host-a", "host-b"):
            groups.append(start_worker_group(host, "hosts", url, prefix, tmp_path / f"{host}.log"))
        with backend(name="hosts", local_workers=False):
            wait_for(lambda: joblib.effective_n_jobs(-1), lambda n: n == 4)
            before = children()
            barrier = str(tmp_path / "barrier")
            out = Parallel(n_jobs=-1, batch_size=1)(
                delayed(joblib_tasks.host_at_barrier)(barrier, 4) for _ in range(4))
            assert children() == before  # (the two groups)
        assert sorted(host for host, _ in out) == ["host-a", "host-a", "host-b", "host-b"]
        assert len({pid for _, pid in out}) == 4
        assert any(b":hosts:tasks" in key for key in keys_under(r, prefix))
    finally:
        for proc in groups:
            kill_group(proc)

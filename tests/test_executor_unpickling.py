"""A task whose function or arguments cannot be unpickled in the worker, or whose result
cannot be unpickled in the submitter: ProcessPoolExecutor fails the future with
``BrokenProcessPool`` (and breaks the pool); pressure fails that future alone with a
``BrokenExecutor``, which is a ``BrokenProcessPool``, the unpickling's own exception as its
``__cause__``, and goes on running tasks. Compared side by side with ProcessPoolExecutor."""

from __future__ import annotations

import multiprocessing
import pickle
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pytest

import pressure
from pressure.executor.worker import _RemoteTraceback
from tests import executor_tasks as tasks

SOON = 60

#: (function, argument, the exception the unpickling raises, where it is unpickled)
CASES = {
    "task-error": (id, tasks.ErrorAtUnpickle(), pickle.UnpicklingError, "worker"),
    "task-exit": (id, tasks.ExitAtUnpickle(), SystemExit, "worker"),
    "result-error": (tasks.return_instance, tasks.ErrorAtUnpickle, pickle.UnpicklingError, "submitter"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unpickling_failure_is_a_broken_process_pool_for_that_future_alone(
        case: str, url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn, arg, raised, where = CASES[case]
    monkeypatch.setattr(sys, "stderr", sys.stderr)  # the pool's unpickling may replace it
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("forkserver")) as pool:
        reference = pool.submit(fn, arg).exception(timeout=SOON)
    assert isinstance(reference, BrokenProcessPool), repr(reference)

    with pressure.Executor("unpickle", url=url, prefix=prefix, max_workers=1) as ex:
        exc = ex.submit(fn, arg).exception(timeout=SOON)
        assert isinstance(exc, BrokenProcessPool) and isinstance(exc, pressure.BrokenExecutor), repr(exc)
        assert not isinstance(exc, pressure.WorkerLost)
        assert isinstance(exc.__cause__, raised), repr(exc.__cause__)
        if where == "worker":  # the worker's traceback of it, as for a task's own exception
            assert isinstance(exc.__cause__.__cause__, _RemoteTraceback)
            assert raised.__name__ in exc.__cause__.__cause__.tb
        assert ex.submit(pow, 2, 8).result(timeout=SOON) == 256  # the executor goes on


def test_a_broken_executor_pickles_with_its_cause() -> None:
    broken = pressure.BrokenExecutor("could not")
    broken.__cause__ = pickle.UnpicklingError("why")
    again: Any = pickle.loads(pickle.dumps(broken))
    assert type(again) is pressure.BrokenExecutor and again.args == ("could not",)
    assert type(again.__cause__) is pickle.UnpicklingError and again.__cause__.args == ("why",)
    lost: Callable[..., Any] = pressure.WorkerLost
    assert isinstance(pickle.loads(pickle.dumps(lost("x"))), BrokenProcessPool)

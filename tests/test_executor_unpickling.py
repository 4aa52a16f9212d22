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


#: A script run as __main__ that submits a function it defines to workers in other processes
#: (``python -m pressure worker``, whose __main__ is pressure's): what the future says.
SCRIPT = '''
import json, sys
from concurrent.futures.process import BrokenProcessPool
import pressure

def cube(x):
    return x ** 3

url, prefix, serializer = sys.argv[1:4]
with pressure.Executor("main", url=url, prefix=prefix, local_workers=False, serializer=serializer) as ex:
    future = ex.submit(cube, 3)
    exc = future.exception(timeout=60)
    print(json.dumps({
        "broken": isinstance(exc, BrokenProcessPool) and isinstance(exc, pressure.BrokenExecutor),
        "cause": type(exc.__cause__).__name__ if exc is not None else None,
        "message": str(exc) if exc is not None else None,
        "result": future.result() if exc is None else None,
    }))
'''


def _worker(url: str, prefix: str) -> Any:
    import subprocess

    return subprocess.Popen([sys.executable, "-m", "pressure", "worker", "main", "--url", url, "--prefix", prefix,
                             "--processes", "1", "--create"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


@pytest.mark.parametrize("serializer", ["pickle", "cloudpickle"])
def test_a_function_defined_in_the_submitting_script_says_what_to_do(
        serializer: str, url: str, prefix: str, tmp_path: Any) -> None:
    import json
    import os
    import signal
    import subprocess

    if serializer == "cloudpickle":
        pytest.importorskip("cloudpickle")
    script = tmp_path / "submit.py"
    script.write_text(SCRIPT)
    worker = _worker(url, prefix)
    try:
        done = subprocess.run([sys.executable, str(script), url, prefix, serializer], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if serializer == "cloudpickle":  # sent by value: it runs
        assert got == {"broken": False, "cause": None, "message": None, "result": 27}
        return
    assert got["broken"] and got["cause"] == "AttributeError", got  # the types stay what they were
    assert "Can't get attribute 'cube'" in got["message"]
    assert ("defined in the submitting program's __main__, a script, which the workers do not have: "
            "define it in a module the workers can import, or submit with "
            "Executor(..., serializer=\"cloudpickle\")") in got["message"], got["message"]

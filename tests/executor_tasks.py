"""Task functions for tests/test_executor.py.

Worker processes (forkserver children, or ``python -m pressure worker`` groups)
import these by name, as ProcessPoolExecutor's workers would, so they live in a
small module that imports nothing heavy. Tasks that must leave evidence of
having run append a line to a file (``record``): the tests read those files to
prove what ran, where, and how often, independently of the futures.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

__all__ = [
    "UNPICKLABLE",
    "CustomError",
    "ErrorAtUnpickle",
    "ExitAtUnpickle",
    "die_holding_locks",
    "add",
    "echo",
    "exit_self",
    "fail",
    "failing_initializer",
    "get_global",
    "hold",
    "kill_self",
    "raise_custom",
    "raise_timeout",
    "read_lines",
    "record",
    "record_then_sleep",
    "return_instance",
    "return_unpicklable",
    "set_global",
    "sleep_then",
    "square",
    "start_then_sleep",
    "wait_at_barrier",
    "wait_for_lines",
]

#: A module-level lambda: pickle looks it up by the name ``<lambda>`` and fails with
#: PicklingError (in the caller and in workers alike).
UNPICKLABLE = lambda: None

#: Set by ``set_global`` (an initializer) in each worker process.
_GLOBAL: Any = None


class CustomError(Exception):
    """An exception class of the task module: it must pickle back with its arguments."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(code, text)
        self.code = code
        self.text = text


def square(x: int) -> int:
    return x * x


def add(a: int, b: int) -> int:
    return a + b


def echo(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Return exactly what it was called with (keyword arguments named ``fn``/``self`` included)."""
    return args, kwargs


def _deep_failure(message: str) -> None:
    raise ValueError(message)


def fail(message: str) -> None:
    """Raise ValueError(message) from a nested frame whose name the remote traceback must show."""
    _deep_failure(message)


def raise_custom(code: int, text: str) -> None:
    raise CustomError(code, text)


def raise_timeout(message: str) -> None:
    """Raise the builtin TimeoutError: a task's own, not a map timeout."""
    raise TimeoutError(message)


def return_unpicklable() -> Any:
    return UNPICKLABLE


def sleep_then(value: Any, seconds: float) -> Any:
    time.sleep(seconds)
    return value


def record(path: str, token: str) -> str:
    """Append ``token`` to the file ``path`` (proof that this call ran) and return it."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{token}\n")
    return token


def record_then_sleep(path: str, token: str, seconds: float) -> tuple[str, str, int]:
    """Append ``token host pid`` to ``path`` when starting (the "started" marker, naming the
    process to kill), sleep, and return ``(token, host, pid)`` of the process that finished."""
    host = os.environ.get("PRESSURE_HOSTNAME", "local")
    record(path, f"{token} {host} {os.getpid()}")
    time.sleep(seconds)
    return token, host, os.getpid()


def start_then_sleep(directory: str, token: str, seconds: float) -> str:
    """Append ``token pid time`` to ``<directory>/<pid>.starts`` as it starts (a record kept
    outside Redis, so it survives Redis restarts; one file per process, so no two writers
    share one), sleep, and return ``token``."""
    with open(os.path.join(directory, f"{os.getpid()}.starts"), "a", encoding="utf-8") as f:
        f.write(f"{token} {os.getpid()} {time.monotonic():.6f}\n")
    time.sleep(seconds)
    return token


def _wait_for_file(path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout} s")
        time.sleep(0.02)


def hold(started: str, release: str, value: Any, timeout: float = 60.0) -> tuple[Any, int]:
    """Append ``value pid`` to ``started``, then block until the file ``release`` exists: a task
    the test keeps running for as long as it needs. Returns ``(value, pid)``."""
    record(started, f"{value} {os.getpid()}")
    _wait_for_file(release, timeout)
    return value, os.getpid()


def wait_at_barrier(path: str, parties: int, timeout: float = 60.0) -> tuple[Any, int]:
    """Append this pid to ``path`` and wait until ``parties`` lines are there: ``parties`` calls
    can only all return if they run at the same time, in different processes. Returns
    ``(the initializer's global, pid)``."""
    record(path, str(os.getpid()))
    deadline = time.monotonic() + timeout
    while len(read_lines(path)) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(read_lines(path))} of {parties} parties arrived")
        time.sleep(0.02)
    return _GLOBAL, os.getpid()


def read_lines(path: str | Path) -> list[str]:
    """The lines of ``path`` (none if it does not exist yet)."""
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


def wait_for_lines(path: str | Path, count: int, timeout: float = 30.0) -> list[str]:
    """Wait until ``path`` holds at least ``count`` lines; return them (raise on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = read_lines(path)
        if len(lines) >= count:
            return lines
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: {len(lines)} lines after {timeout} s, wanted {count}: {lines}")
        time.sleep(0.02)


def set_global(value: Any) -> None:
    """An initializer: store ``value`` in this worker process."""
    global _GLOBAL
    _GLOBAL = value


def get_global() -> tuple[Any, int]:
    """What the initializer stored in this process, and the process id."""
    return _GLOBAL, os.getpid()


def failing_initializer() -> None:
    raise RuntimeError("this initializer always fails")


def kill_self(path: str) -> None:
    """Record this run in ``path``, then kill the worker running it (every time it runs)."""
    record(path, str(os.getpid()))
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # never reached


def exit_self(path: str, code: int) -> None:
    """Record this run in ``path``, then end the worker running it with ``os._exit(code)`` (no
    signal, no cleanup: the exit status alone tells how it ended), every time it runs."""
    record(path, str(os.getpid()))
    os._exit(code)


def die_holding_locks(path: str) -> None:
    """Record this run in ``path``, take every multiprocessing lock this worker process can
    reach (without waiting: a lock it cannot take is someone else's), then SIGKILL the process
    while it holds them: a lock shared with the supervisor stays taken forever."""
    import gc
    import multiprocessing.synchronize

    taken = 0
    for obj in gc.get_objects():
        if isinstance(obj, multiprocessing.synchronize.SemLock):
            try:
                taken += bool(obj.acquire(False))
            except Exception:  # noqa: BLE001 - a lock of a dead owner, an unusable one: not ours
                pass
    record(path, f"{os.getpid()} {taken}")
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # never reached


def _unpickling_error(message: str) -> None:
    import pickle

    raise pickle.UnpicklingError(message)


class ErrorAtUnpickle:
    """Pickles, but raises UnpicklingError when unpickled."""

    def __reduce__(self) -> Any:
        return _unpickling_error, ("refused to unpickle",)


class ExitAtUnpickle:
    """Pickles, but raises SystemExit when unpickled."""

    def __reduce__(self) -> Any:
        import sys

        return sys.exit, (3,)


def return_instance(cls: type) -> Any:
    """An instance of ``cls`` as the result (made in the worker)."""
    return cls()

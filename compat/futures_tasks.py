"""Task functions for compat/test_futures_cpython.py, importable by worker processes.

``pressure.Executor`` workers are forkserver/spawn children that unpickle each task by
reference, so the functions CPython's tests define in ``Lib/test/test_concurrent_futures/``
(``mul``, ``capture``, ``sleep_and_raise``, ``init``, ``_crash``, the ``*AtPickle`` classes,
...) live here, at module level, under their CPython names. Keep this module light: every
worker imports it.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import time
from logging.handlers import QueueHandler
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "CrashAtPickle", "CrashAtUnpickle", "ErrorAtPickle", "ErrorAtUnpickle", "EventfulGCObj",
    "ExitAtPickle", "ExitAtUnpickle", "MyObject", "RaisesWithComment", "_crash",
    "_crash_with_data", "_exit", "_raise_error", "_raise_error_ignore_stderr",
    "_return_instance", "acquire_and_getpid", "capture", "get_init_status", "init", "init_fail",
    "log_n_wait", "make_dummy_object", "mul", "record_finished", "record_pid_then_sleep",
    "sleep_and_print", "sleep_and_raise",
]


# -- executor.py / test_wait.py / test_as_completed.py -------------------------------------

def mul(x: Any, y: Any) -> Any:
    return x * y


def capture(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return args, kwargs


class MyObject:
    def my_method(self) -> None:
        pass


def make_dummy_object(_: object) -> MyObject:
    return MyObject()


def sleep_and_raise(t: float) -> NoReturn:
    time.sleep(t)
    raise Exception("this is an exception")  # noqa: TRY002 - CPython's


# -- test_thread_pool.py (its executor-generic tests) ----------------------------------------

def record_finished(finished: Any, n: int) -> None:
    """Append ``n`` to a (manager) list."""
    finished.append(n)


def log_n_wait(log: Any, stop_event: Any, ident: str) -> None:
    """Log the start, wait for a (manager) Event, log the end."""
    log.append(f"{ident=} started")
    try:
        stop_event.wait()
    finally:
        log.append(f"{ident=} stopped")


# -- test_shutdown.py ------------------------------------------------------------------------

def sleep_and_print(t: float, msg: str) -> None:
    time.sleep(t)
    print(msg)
    sys.stdout.flush()


# -- test_init.py ------------------------------------------------------------------------------

INITIALIZER_STATUS = "uninitialized"


def init(x: str) -> None:
    global INITIALIZER_STATUS
    INITIALIZER_STATUS = x


def get_init_status() -> str:
    return INITIALIZER_STATUS


def init_fail(log_queue: Any = None) -> NoReturn:
    """CPython's ``init_fail``, listening to the logger pressure's workers report on
    (``pressure`` at ERROR; ProcessPoolExecutor uses ``concurrent.futures`` at CRITICAL)."""
    if log_queue is not None:
        logger = logging.getLogger("pressure")
        logger.addHandler(QueueHandler(log_queue))
        logger.setLevel("ERROR")
        logger.propagate = False
    time.sleep(0.1)  # let some futures be scheduled
    raise ValueError("error in initializer")


# -- test_process_pool.py ----------------------------------------------------------------------

class EventfulGCObj:
    """Sets a manager Event when collected (in whichever process holds the copy)."""

    def __init__(self, mgr: Any) -> None:
        self.event = mgr.Event()

    def __del__(self) -> None:
        self.event.set()


class RaisesWithComment:
    """Home of CPython's ``_test_traceback`` classmethod (a test class there)."""

    @classmethod
    def _test_traceback(cls) -> NoReturn:
        raise RuntimeError(123) # some comment


def record_pid_then_sleep(path: str, seconds: float) -> int:
    """The first run writes its pid to ``path`` and sleeps (long enough to be killed); a rerun
    (after the first runner was killed) returns at once. Returns the runner's pid."""
    target = Path(path)
    if target.exists():
        return os.getpid()
    scratch = target.with_suffix(".tmp")
    scratch.write_text(str(os.getpid()))
    scratch.rename(target)
    time.sleep(seconds)
    return os.getpid()


def acquire_and_getpid(sem: Any) -> int:
    """Block on a (manager) semaphore, then say which process ran this."""
    sem.acquire()
    return os.getpid()


# -- test_deadlock.py ----------------------------------------------------------------------------

def _crash(delay: float | None = None) -> None:
    """Induces a segfault."""
    if delay:
        time.sleep(delay)
    import faulthandler
    faulthandler.disable()
    faulthandler._sigsegv()  # type: ignore[attr-defined]


def _crash_with_data(data: object) -> None:
    """Induces a segfault with dummy data in input."""
    _crash()


def _exit() -> NoReturn:
    """Induces a sys exit with exitcode 1."""
    sys.exit(1)


def _raise_error(Err: type[BaseException]) -> NoReturn:
    """Function that raises an Exception in process."""
    raise Err()


def _raise_error_ignore_stderr(Err: type[BaseException]) -> NoReturn:
    """Function that raises an Exception in process and ignores stderr."""
    sys.stderr = io.StringIO()
    raise Err()


def _return_instance(cls: type[Any]) -> Any:
    """Function that returns a instance of cls."""
    return cls()


class CrashAtPickle:
    """Bad object that triggers a segfault at pickling time."""

    def __reduce__(self) -> Any:
        _crash()


class CrashAtUnpickle:
    """Bad object that triggers a segfault at unpickling time."""

    def __reduce__(self) -> Any:
        return _crash, ()


class ExitAtPickle:
    """Bad object that triggers a process exit at pickling time."""

    def __reduce__(self) -> Any:
        _exit()


class ExitAtUnpickle:
    """Bad object that triggers a process exit at unpickling time."""

    def __reduce__(self) -> Any:
        return _exit, ()


class ErrorAtPickle:
    """Bad object that triggers an error at pickling time."""

    def __reduce__(self) -> Any:
        from pickle import PicklingError
        raise PicklingError("Error in pickle")


class ErrorAtUnpickle:
    """Bad object that triggers an error at unpickling time."""

    def __reduce__(self) -> Any:
        from pickle import UnpicklingError
        return _raise_error_ignore_stderr, (UnpicklingError, )

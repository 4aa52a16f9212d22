"""Task functions for compat/test_pool_cpython.py, importable by pool worker processes.

``pressure.multiprocessing.Pool`` workers import each task's function by module, so the
functions CPython's ``_test_multiprocessing.py`` defines for its Pool tests (``sqr``,
``mul``, ``identity``, ``CountedObject``, ``raising``, ...) live here, at module level, under
their CPython names; its classmethods ``_TestPool._test_traceback`` and
``_test_wrapped_exception`` become functions of the same names (the source line
``test_traceback`` looks for is kept verbatim). Keep this module light: every worker
imports it.
"""

from __future__ import annotations

import os
import threading
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

__all__ = [
    "CountedObject", "ErrorAtUnpickle", "SayWhenError", "UnpicklableError", "_afunc", "_test_traceback", "_test_wrapped_exception",
    "exception_throwing_generator", "identity", "initializer", "kill_own_worker", "mul",
    "pool_in_process", "raise_large_valuerror", "raise_unpicklable_error", "raising", "sqr", "unpickleable_result",
]


def sqr(x: Any, wait: float = 0.0, event: Any = None) -> Any:
    if event is None:
        time.sleep(wait)
    else:
        event.wait(wait)
    return x * x


def mul(x: Any, y: Any) -> Any:
    return x * y


def raise_large_valuerror(wait: float) -> NoReturn:
    time.sleep(wait)
    raise ValueError("x" * 1024**2)


def identity(x: Any) -> Any:
    return x


class CountedObject:
    n_instances = 0

    def __new__(cls) -> CountedObject:
        cls.n_instances += 1
        return object.__new__(cls)

    def __del__(self) -> None:
        type(self).n_instances -= 1


class SayWhenError(ValueError):
    pass


def exception_throwing_generator(total: int, when: int) -> Iterator[int]:
    if when == -1:
        raise SayWhenError("Somebody said when")
    for i in range(total):
        if i == when:
            raise SayWhenError("Somebody said when")
        yield i


def _test_traceback() -> NoReturn:
    raise RuntimeError(123) # some comment  # noqa: E261 - the line test_traceback looks for


def _test_wrapped_exception() -> NoReturn:
    raise RuntimeError("foo")


def raising() -> NoReturn:
    raise KeyError("key")


def unpickleable_result() -> Callable[[], int]:
    return lambda: 42


# -- TestInitializers --------------------------------------------------------------------------

def initializer(ns: Any) -> None:
    ns.test += 1


# -- added: a worker killed by its task ----------------------------------------------------------

def kill_own_worker() -> NoReturn:
    """SIGKILL the worker process running this task (the stdlib's pool then waits forever)."""
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


# -- TestStdinBadfiledescriptor ------------------------------------------------------------------

def _afunc(x: Any) -> Any:
    return x * x


def pool_in_process(url: str | None = None, prefix: str | None = None) -> None:
    """A pool made and used in a child process (CPython's takes no arguments: its pool is the
    stdlib's; with a ``url``, pressure's on that server)."""
    if url is None:
        import multiprocessing
        pool: Any = multiprocessing.Pool(processes=4)
    else:
        from pressure import multiprocessing as pressure_multiprocessing
        pool = pressure_multiprocessing.Pool(processes=4, url=url, prefix=prefix)
    x = pool.map(_afunc, [1, 2, 3, 4, 5, 6, 7])
    assert x == [1, 4, 9, 16, 25, 36, 49], x
    pool.close()
    pool.join()


# -- added: a task its worker cannot unpickle ----------------------------------------------------

def _raise_at_unpickle() -> NoReturn:
    raise RuntimeError("error at task unpickle")


class ErrorAtUnpickle:
    """Pickles; unpickling it (in the worker) raises."""

    def __reduce__(self) -> tuple[Callable[[], NoReturn], tuple[()]]:
        return _raise_at_unpickle, ()


# -- added: an exception that cannot be pickled ------------------------------------------------

class UnpicklableError(Exception):
    """An exception with a lock in it: it cannot be pickled back to the caller."""

    def __init__(self) -> None:
        super().__init__("unpicklable")
        self.lock = threading.Lock()


def raise_unpicklable_error() -> NoReturn:
    raise UnpicklableError

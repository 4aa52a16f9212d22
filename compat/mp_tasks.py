"""Process targets for compat/test_mp_cpython.py, importable by spawned children.

CPython's ``_test_multiprocessing.py`` defines these as classmethods of its test classes
(``_TestQueue._test_put``, ``TestStartMethod._check_context``, ...) or module functions
(``close_queue``, ``_test_process``); a spawned child finds them here, at module level,
under their CPython names. Keep this module light: every spawned child imports it.
"""

from __future__ import annotations

import queue as pyqueue
import time
from typing import Any

from pressure import multiprocessing

__all__ = [
    "DELTA", "SHORT_TIMEOUT", "_check_context", "_put_one_in_queue", "_put_two_and_nest_once",
    "_test_empty", "_test_fork", "_test_get", "_test_process", "_test_put", "_test_task_done",
    "_this_sub_process", "close_queue",
]

#: CPython's ``DELTA``.
DELTA = 0.1
#: CPython's ``support.SHORT_TIMEOUT`` is 30 s; no wait here needs more than this.
SHORT_TIMEOUT = 20.0


def close_queue(queue: Any) -> None:
    """CPython's ``close_queue``: close a process queue and join its feeder thread."""
    if isinstance(queue, multiprocessing.Queue):
        queue.close()
        queue.join_thread()


# -- _TestQueue -------------------------------------------------------------------------------

def _test_put(queue: Any, child_can_start: Any, parent_can_continue: Any) -> None:
    assert child_can_start.wait(SHORT_TIMEOUT)
    for _ in range(6):
        queue.get()
    parent_can_continue.set()


def _test_get(queue: Any, child_can_start: Any, parent_can_continue: Any) -> None:
    assert child_can_start.wait(SHORT_TIMEOUT)
    # queue.put(1)
    queue.put(2)
    queue.put(3)
    queue.put(4)
    queue.put(5)
    parent_can_continue.set()


def _test_fork(queue: Any) -> None:
    for i in range(10, 20):
        queue.put(i)


def _test_task_done(q: Any) -> None:
    for _obj in iter(q.get, None):
        time.sleep(DELTA)
        q.task_done()


# -- TestSimpleQueue --------------------------------------------------------------------------

def _test_empty(queue: Any, child_can_start: Any, parent_can_continue: Any) -> None:
    assert child_can_start.wait(SHORT_TIMEOUT)
    # issue 30301, could fail under spawn and forkserver
    try:
        queue.put(queue.empty())
        queue.put(queue.empty())
    finally:
        parent_can_continue.set()


# -- TestStartMethod --------------------------------------------------------------------------

def _check_context(conn: Any) -> None:
    conn.send(multiprocessing.get_start_method())


def _put_one_in_queue(queue: Any) -> None:
    queue.put(1)


def _put_two_and_nest_once(queue: Any) -> None:
    queue.put(2)
    process = multiprocessing.Process(target=_put_one_in_queue, args=(queue,))
    process.start()
    process.join()


# -- TestStdinBadfiledescriptor ---------------------------------------------------------------

def _this_sub_process(q: Any) -> None:
    try:
        q.get(block=False)
    except pyqueue.Empty:
        pass


def _test_process() -> None:
    """A queue made in a child (no url: ``REDIS_URL``/``PRESSURE_PREFIX`` of the environment)."""
    queue: multiprocessing.Queue[Any] = multiprocessing.Queue()
    sub_proc = multiprocessing.Process(target=_this_sub_process, args=(queue,))
    sub_proc.daemon = True
    sub_proc.start()
    sub_proc.join()

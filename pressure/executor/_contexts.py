"""How a ``WorkerPool``'s processes start: the multiprocessing context (and the checks of
``max_tasks_per_child`` that go with it, as ProcessPoolExecutor's), and a forkserver of this
process's own."""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

__all__ = ["own_forkserver", "pool_context"]


def own_forkserver() -> None:
    """Make the forkserver this process's own. CPython's forkserver state survives a fork,
    but the server is not the forked child's child, so starting a process there fails
    with ChildProcessError (ensure_running waits on the server's pid): a process forked
    after its parent started the forkserver (a prefork server, a test harness) forgets
    the inherited one and starts its own."""
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver
    with server._lock:
        pid = server._forkserver_pid
        if pid is None:
            return
        try:
            os.waitpid(pid, os.WNOHANG)
            return  # our child: the stdlib looks after it
        except ChildProcessError:
            pass
        if server._forkserver_alive_fd is not None:
            os.close(server._forkserver_alive_fd)  # our copy only: the parent keeps its own
        server._forkserver_pid = server._forkserver_address = server._forkserver_alive_fd = None


def pool_context(mp_context: Any, max_tasks_per_child: int | None) -> Any:
    """The multiprocessing context worker processes start with, and ``max_tasks_per_child``
    checked, as ProcessPoolExecutor does both: ``mp_context``, else 'spawn' with
    ``max_tasks_per_child`` and the platform's default without; 'fork' is refused with it
    (a process is forked to replace a retired worker while the parent runs threads)."""
    if mp_context is None:
        mp_context = multiprocessing.get_context("spawn" if max_tasks_per_child is not None else None)
    if max_tasks_per_child is not None:
        if not isinstance(max_tasks_per_child, int):
            raise TypeError("max_tasks_per_child must be an integer")
        if max_tasks_per_child <= 0:
            raise ValueError("max_tasks_per_child must be >= 1")
        if mp_context.get_start_method(allow_none=False) == "fork":
            raise ValueError("max_tasks_per_child is incompatible with the 'fork' multiprocessing start "
                             "method; supply a different mp_context.")
    return mp_context

"""Task functions for tests/test_joblib.py that workers on other "hosts" (``python -m pressure
worker`` groups with ``PYTHONPATH`` at the repository) import by name."""

from __future__ import annotations

import os
import signal

import joblib

from tests.executor_tasks import record, wait_at_barrier

__all__ = ["host_at_barrier", "kill_worker_once", "nested_powers"]


def host_at_barrier(path: str, parties: int) -> tuple[str, int]:
    """Wait until ``parties`` calls run at once (each in its own worker), then return
    ``(host, pid)`` of the worker that ran this one."""
    _, pid = wait_at_barrier(path, parties)
    return os.environ.get("PRESSURE_HOSTNAME", "local"), pid


def kill_worker_once(path: str, value: int) -> int:
    """SIGKILL the worker running it the first time (the file ``path`` records that run),
    return ``value`` when it runs again."""
    if not os.path.exists(path):
        record(path, str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def nested_powers(base: int, n: int) -> tuple[list[int], str]:
    """A joblib.Parallel call inside a task: ``base ** k`` for k < n, with the name of the
    backend the nested call ran on."""
    backend, _ = joblib.parallel.get_active_backend()
    powers = joblib.Parallel(n_jobs=2)(joblib.delayed(pow)(base, k) for k in range(n))
    return powers, type(backend).__name__

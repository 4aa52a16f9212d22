"""The client identifier the protocol writes to ``:producer`` / ``:consumer``.

By default it is ``hostname:pid:thread`` (the native thread id, as ``top``
and ``py-spy`` show it), computed per operation so that a forked child or a
new thread gets its own. Only the hostname is cached.

``PRESSURE_HOSTNAME`` overrides the host name: containers that share a pid
namespace view but not a host name, or (in the tests) process groups that
stand in for separate hosts, whose death only the leases and visibility
timeouts can reveal.
"""

from __future__ import annotations

import functools
import os
import socket
import threading

import psutil

__all__ = ["client_id", "hostname", "process_record", "is_alive", "pid_exists"]


@functools.cache
def hostname() -> str:
    """The host name (or ``PRESSURE_HOSTNAME``), read once: it does not change under a
    running process."""
    return os.environ.get("PRESSURE_HOSTNAME") or socket.gethostname()


def client_id() -> str:
    """Return ``hostname:pid:thread`` for the calling thread."""
    return f"{hostname()}:{os.getpid()}:{threading.get_native_id()}"


@functools.cache
def _start_time(pid: int) -> str:
    return repr(psutil.Process(pid).create_time())


def process_record() -> tuple[str, int, str]:
    """(host, pid, start time) of this process: with the start time, a reused pid is told apart."""
    pid = os.getpid()
    return hostname(), pid, _start_time(pid)


def is_alive(pid: int, start: str) -> bool:
    """Whether the process ``pid`` that started at ``start`` (on this host) still runs."""
    try:
        process = psutil.Process(pid)
        return repr(process.create_time()) == start and process.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.Error:
        return True  # cannot tell (permissions): never treat a holder as dead on a guess


def pid_exists(pid: int) -> bool:
    """Whether any process ``pid`` runs on this host (no start time known: a plain spec client)."""
    return bool(psutil.pid_exists(pid))

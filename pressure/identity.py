"""The client identifier the protocol writes to ``:producer`` / ``:consumer``.

By default it is ``hostname:pid:thread`` (the native thread id, as ``top``
and ``py-spy`` show it), computed per operation so that a forked child or a
new thread gets its own. Only the hostname is cached.
"""

from __future__ import annotations

import functools
import os
import socket
import threading

__all__ = ["client_id", "hostname"]


@functools.cache
def hostname() -> str:
    """The host name, read once: it does not change under a running process."""
    return socket.gethostname()


def client_id() -> str:
    """Return ``hostname:pid:thread`` for the calling thread."""
    return f"{hostname()}:{os.getpid()}:{threading.get_native_id()}"

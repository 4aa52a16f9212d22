"""Errors no retry mends, as workers meet them, and the first round trip of ``run_workers``.

A wrong password, an ACL that refuses a command or a key, a TLS certificate not trusted,
keys of the wrong type, unsigned pickles refused: waiting does not fix them. A worker
process that meets one stops and says why (``say``: a buffer of shared memory, written
once as it ends, read by its pool once it has ended: no lock), and its pool does not
replace it (``WorkerPool.check``): ``run_workers``, and so ``pressure worker``, stops the
others and raises the error. Redis restarting, unreachable, loading its data or failing
over is retried, as ever.

Before any process starts, ``run_workers`` makes one round trip (``reach_executor``): it
finds the executor's task queue (the Executor creates it), or creates it (``create``), so
that an executor that does not exist (unless ``create``), a wrong password or a refused key
says so at once, before any worker runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from .. import _log, errors
from .._internal import internal
from ..connection import Backend
from ..errors import (AuthenticationError, PermissionDenied, PressureError, ProtocolError, QueueDoesNotExist,
                      TLSError, UnsignedPickle)
from ..keys import ExecutorKeys
from ..outage import Complaint, pause
from ._handles import Handles, WorkerConfig

__all__ = ["PERMANENT", "REFUSED_FOR_GOOD", "MESSAGE_SIZE", "permanent", "say", "heard", "reach_executor"]

#: What no retry mends: a worker that meets one stops, and is not replaced.
PERMANENT: tuple[type[PressureError], ...] = (AuthenticationError, PermissionDenied, TLSError, ProtocolError,
                                              UnsignedPickle)
#: The redis-py errors of a wrong password or user, and of an ACL that refuses (raised by a
#: plain redis-py client; pressure's own calls raise them as AuthenticationError, PermissionDenied).
REFUSED_FOR_GOOD = (redis.exceptions.AuthenticationError, redis.exceptions.NoPermissionError)
#: The bytes of shared memory a worker process says its error in (longer messages are cut).
MESSAGE_SIZE = 2048
#: How long the first round trip waits before it tries again, while Redis cannot be reached.
RETRY = 0.5


def permanent(exc: BaseException) -> bool:
    """Whether no retry mends ``exc``."""
    return isinstance(exc, PERMANENT)


def say(buffer: Any, exc: BaseException) -> None:
    """Write ``exc`` (its class and message) into ``buffer``, a ``RawArray('c', MESSAGE_SIZE)``."""
    data = f"{type(exc).__name__}\n{exc}".encode(errors="replace")[:MESSAGE_SIZE - 1]
    buffer.value = data


def heard(buffer: Any) -> PressureError:
    """The error ``say`` wrote into ``buffer``, made again (of its class, if pressure's)."""
    name, _, message = bytes(buffer.value).decode(errors="ignore").partition("\n")
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, PressureError):
        try:
            return cls(message)
        except TypeError:  # a class with other arguments
            pass
    return PressureError(message or "a worker process stopped on an error no retry mends")


def reach_executor(where: WorkerConfig, create: bool, stop: Callable[[], bool]) -> bool:
    """Find the executor's task queue (QueueDoesNotExist if it does not exist), or with
    ``create`` create it (empty, unbounded: the Executor that starts later uses it, and
    sets its bound), in one round trip; raise what no retry mends. While Redis cannot be
    reached, try again (saying so, less and less often) until it can: True; or until
    ``stop()``: False."""
    backend = Backend(where.config)
    keys = ExecutorKeys.build(where.prefix, where.name)
    backend.route(keys.claims, f"executor {where.name!r}")  # on a cluster: its slot
    tasks = Handles.build(where, backend).tasks
    link = internal(tasks)
    complaint = Complaint(_log.WORKER, f"workers of executor {where.name!r}: cannot reach Redis yet")
    try:
        while not stop():
            try:
                if create:
                    [created] = link.pipeline([link.create_call()])
                    link.created(created)
                elif not backend.call(f"look for executor {where.name!r}", backend.client().exists,
                                      tasks.keys.bound):
                    raise QueueDoesNotExist(
                        f"executor {where.name!r} does not exist on {where.config.url} under prefix "
                        f"{where.prefix!r}: start it (pressure.Executor({where.name!r}, ...)), or let the "
                        f"workers create its task queue (create=True)")
                complaint.succeeded()
                return True
            except PressureError as exc:
                if permanent(exc) or isinstance(exc, QueueDoesNotExist):
                    raise
                complaint.failed(exc)  # Redis restarting or unreachable: wait for it
                pause(RETRY, stop)
        return False
    finally:
        tasks.disconnect()
        backend.disconnect()

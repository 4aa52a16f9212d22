"""Exceptions raised by pressure.

Every exception shares one base, and those with a stdlib meaning also derive
from the stdlib class, so existing ``except queue.Full:`` handlers keep working::

    PressureError(Exception)
    ├── Full(PressureError, queue.Full)
    ├── Empty(PressureError, queue.Empty)
    ├── ShutDown(PressureError, queue.ShutDown)   # stand-in class before 3.13
    │   └── QueueDoesNotExist(ShutDown, LookupError)  # never created, or deleted
    ├── QueueExistsError(PressureError, ValueError)   # maxsize contradicts the stored bound
    ├── SerializationError(PressureError, ValueError) # item could not be (de)serialized
    │   └── DeserializationError                      # carries the raw bytes
    │       └── IntegrityError                        # signature missing or wrong: never loaded
    ├── ItemTooLarge(PressureError, ValueError)       # larger than the server accepts: not sent
    ├── UnsignedPickle(PressureError, ValueError)     # pickle from another host, unsigned: refused
    ├── ProtocolError(PressureError)                  # keys hold what the protocol forbids
    ├── BackendError(PressureError)                   # Redis failed; redis error on __cause__
    │   ├── OutcomeUnknown                            # the command may or may not have run
    │   │   └── NotReplicated                         # ran, but too few replicas confirmed it
    │   ├── AuthenticationError                       # password missing or refused: nothing ran
    │   ├── PermissionDenied                          # the ACL user may not: nothing ran
    │   └── TLSError                                  # the TLS handshake failed: nothing sent
    └── BrokenExecutor(PressureError, concurrent.futures.process.BrokenProcessPool)
        └── WorkerLost                                # a task's workers died max_attempts times

All of them pickle with their arguments, so they survive crossing processes (a
``BrokenExecutor`` with its ``__cause__``).
"""

from __future__ import annotations

import concurrent.futures.process as _futures_process
import queue as _stdlib_queue
import sys
from typing import Any

__all__ = [
    "PressureError",
    "Full",
    "Empty",
    "ShutDown",
    "QueueDoesNotExist",
    "QueueExistsError",
    "SerializationError",
    "DeserializationError",
    "IntegrityError",
    "ItemTooLarge",
    "UnsignedPickle",
    "ProtocolError",
    "BackendError",
    "OutcomeUnknown",
    "NotReplicated",
    "AuthenticationError",
    "PermissionDenied",
    "TLSError",
    "BrokenExecutor",
    "WorkerLost",
]


class PressureError(Exception):
    """Base class of every exception pressure raises."""

    #: Set on the Full or ShutDown that ends a ``put_many`` early: how many of its items
    #: (the first ones) went in before.
    items_put: int | None = None


class Full(PressureError, _stdlib_queue.Full):
    """Raised by a non-blocking or timed-out ``put`` when the queue is at its bound."""


class Empty(PressureError, _stdlib_queue.Empty):
    """Raised by a non-blocking or timed-out ``get`` when the queue has no item."""


if sys.version_info >= (3, 13):
    from queue import ShutDown as _ShutDownBase
else:

    class _ShutDownBase(Exception):
        """Stand-in for ``queue.ShutDown`` (added in Python 3.13)."""


class ShutDown(PressureError, _ShutDownBase):
    """Raised when putting to a shut-down queue, or getting from one that is shut down and empty."""


class QueueDoesNotExist(ShutDown, LookupError):
    """Raised when the queue's ``:bound`` key is missing: it was deleted (or never created)."""


class QueueExistsError(PressureError, ValueError):
    """Raised when an explicit ``maxsize`` contradicts the bound stored for an existing queue."""


class SerializationError(PressureError, ValueError):
    """Raised when an item cannot be serialized; the queue is left untouched."""


class DeserializationError(SerializationError):
    """Raised when a got payload cannot be deserialized; ``payload`` holds the raw bytes."""

    def __init__(self, message: str, payload: bytes = b"") -> None:
        super().__init__(message, payload)
        self.payload = payload

    def __str__(self) -> str:
        return str(self.args[0])


class IntegrityError(DeserializationError):
    """Raised for an item whose signature does not verify (the handle has an authkey, and the
    item is unsigned, altered, forged, signed for another queue or with a key it does not hold):
    it never reached the serializer. ``payload`` holds the raw bytes."""


class ItemTooLarge(PressureError, ValueError):
    """Raised when a serialized item is larger than the server accepts as one argument (its
    ``proto-max-bulk-len``, 512 MiB by default): checked before sending, so nothing is put.
    ``size`` and ``limit`` are in bytes."""

    def __init__(self, message: str, size: int = 0, limit: int = 0) -> None:
        super().__init__(message, size, limit)
        self.size = size
        self.limit = limit

    def __str__(self) -> str:
        return str(self.args[0])


class UnsignedPickle(PressureError, ValueError):
    """Raised when a handle (a queue, an Executor, its workers) would unpickle unsigned items
    from a Redis server that is not on this host: whoever can write its keys could run code in
    this process. Raised by the constructor, before anything is sent. Set an authkey on every
    host (``PRESSURE_AUTHKEY``, or ``authkey=``), choose a data-only serializer, or opt out with
    ``insecure_pickle=True`` (``PRESSURE_INSECURE_PICKLE=1``)."""


class ProtocolError(PressureError):
    """Raised when the queue's keys hold something the pressure protocol does not allow."""


class BackendError(PressureError):
    """Raised when Redis cannot be reached or fails; the redis-py error is ``__cause__``."""


class OutcomeUnknown(BackendError):
    """Raised when the connection broke after a command was sent: it may or may not have run."""


class NotReplicated(OutcomeUnknown):
    """Raised with ``durability=`` when a write ran on the master but fewer replicas than asked
    confirmed it within the timeout (``confirmed`` of ``wanted``): it stays done unless the
    master fails before a replica has it, when it is lost. So whether it lasts is unknown:
    doing it again may do it twice."""

    def __init__(self, message: str, confirmed: int = 0, wanted: int = 0) -> None:
        super().__init__(message, confirmed, wanted)
        self.confirmed = confirmed
        self.wanted = wanted

    def __str__(self) -> str:
        return str(self.args[0])


class AuthenticationError(BackendError):
    """Raised when the server refuses the connection's credentials (a missing or wrong password,
    an unknown or disabled user): the command did not run. The password is never shown."""


class TLSError(BackendError):
    """Raised when the TLS handshake fails: the server's certificate is not trusted (a rogue
    CA, another host's name) or the server refuses this client (no client certificate, or one
    signed by a CA it does not trust). Nothing was sent; the message says which."""


class PermissionDenied(BackendError):
    """Raised when the server's ACL does not let the connection's user run a command or touch
    a key: the command was refused, so it did not run."""


class BrokenExecutor(PressureError, _futures_process.BrokenProcessPool):
    """Raised when a ``pressure.Executor`` cannot run tasks (e.g. a worker initializer failed);
    a future fails with it when its task's function or arguments could not be unpickled in the
    worker, or its result in the submitter (that future alone: the executor goes on), the
    unpickling's exception as ``__cause__``. A ``BrokenProcessPool``, as ProcessPoolExecutor
    raises in each of these cases."""

    def __reduce__(self) -> tuple[Any, ...]:
        state = dict(self.__dict__)
        if self.__cause__ is not None:  # e.g. the UnpicklingError a worker got, to its submitter
            state["__cause__"] = self.__cause__
        return type(self), self.args, state

    def __setstate__(self, state: dict[str, Any] | None) -> None:
        state = dict(state or {})
        self.__cause__ = state.pop("__cause__", None)
        self.__dict__.update(state)


class WorkerLost(BrokenExecutor):
    """A task's future fails with this when its worker died mid-task ``max_attempts`` times."""

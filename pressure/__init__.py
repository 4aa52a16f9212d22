"""pressure: distributed, bounded, blocking FIFO queues on Redis.

A cross-host drop-in for ``queue.Queue`` and ``multiprocessing.Queue`` that
speaks the pressure protocol v0.15, so any conforming client shares its queues::

    import pressure
    q = pressure.Queue("jobs", maxsize=100)   # create or attach
    q.put({"n": 1}); q.get()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import AuthenticationError as AuthenticationError
from .errors import BackendError as BackendError
from .errors import DeserializationError as DeserializationError
from .errors import Empty as Empty
from .errors import Full as Full
from .errors import IntegrityError as IntegrityError
from .errors import ItemTooLarge as ItemTooLarge
from .errors import UnsignedPickle as UnsignedPickle
from .durability import Durability as Durability
from .errors import NotReplicated as NotReplicated
from .errors import OutcomeUnknown as OutcomeUnknown
from .errors import PermissionDenied as PermissionDenied
from .errors import PressureError as PressureError
from .errors import ProtocolError as ProtocolError
from .errors import QueueDoesNotExist as QueueDoesNotExist
from .errors import QueueExistsError as QueueExistsError
from .errors import SerializationError as SerializationError
from .errors import ShutDown as ShutDown
from .errors import TLSError as TLSError
from .keys import QueueKeys as QueueKeys
from .ordered import LifoQueue as LifoQueue
from .ordered import PriorityQueue as PriorityQueue
from .queue import DeadLetter as DeadLetter
from .queue import Delivery as Delivery
from .queue import InFlight as InFlight
from .queue import Queue as Queue
from .queue import QueueStatistics as QueueStatistics
from .sharded import ShardedQueue as ShardedQueue
from .sharded import ShardedStatistics as ShardedStatistics
from .simple import SimpleQueue as SimpleQueue

__version__ = "0.1.0"

__all__ = [
    "Queue",
    "LifoQueue",
    "PriorityQueue",
    "SimpleQueue",
    "ShardedQueue",
    "ShardedStatistics",
    "QueueStatistics",
    "Delivery",
    "DeadLetter",
    "InFlight",
    "QueueKeys",
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
    "Durability",
    "AuthenticationError",
    "PermissionDenied",
    "TLSError",
    "Executor",
    "ExecutorStatistics",
    "BrokenExecutor",
    "WorkerLost",
]

if TYPE_CHECKING:
    from . import aio as aio
    from . import multiprocessing as multiprocessing
    from .errors import BrokenExecutor as BrokenExecutor
    from .errors import WorkerLost as WorkerLost
    from .executor import Executor as Executor
    from .executor import ExecutorStatistics as ExecutorStatistics
else:
    _LAZY = {
        "multiprocessing": (".multiprocessing", None),
        "aio": (".aio", None),
        "Executor": (".executor", "Executor"),
        "ExecutorStatistics": (".executor", "ExecutorStatistics"),
        "BrokenExecutor": (".errors", "BrokenExecutor"),
        "WorkerLost": (".errors", "WorkerLost"),
    }

    def __getattr__(name: str) -> object:
        """``pressure.multiprocessing`` and the executor are imported on first use, never by
        ``import pressure`` (as concurrent.futures loads its executors)."""
        if name in _LAZY:
            import importlib

            module, attribute = _LAZY[name]
            loaded = importlib.import_module(module, __name__)
            return loaded if attribute is None else getattr(loaded, attribute)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""What a worker process starts with: where its executor is and how it works
(``WorkerConfig``), the handles of its executor's queues, and what the executor that started
it prepared for it.

An executor that starts local workers loads the scripts of their way to a first reply in its
constructor's round trip (``WORKER_SCRIPTS``), and a pool that forks its workers builds their
queue handles before it forks (``Handles``, on a backend whose client is built for the child:
``Wire.for_child``): built in a child just forked they would cost it about 2 ms more, since
every page a child touches first is copied. So a forked worker's first task is one connect,
one get and one claim away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._internal import attach
from .._scripts import CLAIM, COUNT_START, GET, PUT, SETTLE
from ..connection import Backend, ConnectionConfig
from ..keys import ExecutorKeys
from ..queue import Queue

if TYPE_CHECKING:
    from .worker import Task

__all__ = ["PREFETCH", "WORKER_SCRIPTS", "Handles", "Prepared", "WorkerConfig"]

#: How many queued short tasks a worker takes, and claims, at once (one round trip for their
#: get and claim, one for their replies and the next get): at most PREFETCH * SHORT_TASK
#: (worker.py; 80 ms) of work held from idle workers; a cancel() of one held returns False, as
#: for a task in ProcessPoolExecutor's call queue. 8 ran no-op tasks about 20% slower (the
#: bench's ``--executor``). A take is also no more than ceil(queued / workers alive)
#: (worker.py: ``_Worker.alive``).
PREFETCH = 16


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """Where a worker finds its executor, and how it works (picklable: passed to worker
    processes)."""

    name: str
    config: ConnectionConfig
    prefix: str
    visibility_timeout: float
    #: How many queued tasks a worker takes at once while tasks are short (it runs them one
    #: at a time); after a task that ran SHORT_TASK or longer it takes one at a time, so
    #: that long tasks spread over all workers.
    prefetch: int = PREFETCH
    #: The keys tasks, replies and the stored initializer are signed with (never shown).
    authkey: tuple[bytes, ...] = field(default=(), repr=False)
    #: How many tasks a worker runs before it ends (None: no limit); its pool starts another.
    max_tasks_per_child: int | None = None
    #: Unsigned tasks from a server not on this host are run all the same (pressure/signing.py).
    insecure_pickle: bool = False


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the executor starting a pool did for its workers in its constructor's round trip:
    it made the task queue (they do not create it again) and loaded ``scripts`` on the server
    (they call them without a SCRIPT LOAD in front; a server that lost them meanwhile
    answers NOSCRIPT, and they are loaded then)."""

    scripts: frozenset[str] = frozenset()
    #: the name of the executor's result queue (the workers' first replies go there)
    results: str = ""


#: The scripts a worker calls on its way to its first reply, and the one that counts the starts
#: of the tasks it claimed together (the executor loads them for its local workers: see
#: Prepared).
WORKER_SCRIPTS = (GET.name, CLAIM.name, COUNT_START.name, SETTLE.name, PUT.name)


@dataclass
class Handles:
    """A worker's handles of its executor's queues, all on one backend (replies and settlements
    share a round trip): the task queue, and the result queues it replies to by name (added as
    tasks name them). None is created here."""

    backend: Backend
    tasks: Queue[Task]
    replies: dict[str, Queue[bytes]]

    @classmethod
    def build(cls, where: WorkerConfig, backend: Backend, replies: tuple[str, ...] = ()) -> Handles:
        tasks: Queue[Task] = attach(
            Queue, ExecutorKeys.build(where.prefix, where.name).tasks, where.config, prefix=where.prefix,
            reliable=True, visibility_timeout=where.visibility_timeout, max_deliveries=None, backend=backend,
            authkey=where.authkey, create=False, insecure_pickle=where.insecure_pickle)
        handles = cls(backend, tasks, {})
        for name in replies:
            handles.reply_queue(where, name)
        return handles

    def reply_queue(self, where: WorkerConfig, name: str) -> Queue[bytes]:
        """The handle of the result queue ``name``."""
        queue = self.replies.get(name)
        if queue is None:
            queue = self.replies[name] = attach(
                Queue, name, where.config, prefix=where.prefix, serializer="bytes", create=False,
                backend=self.backend, authkey=where.authkey)
        return queue

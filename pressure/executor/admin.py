"""Operating on an Executor's keys from outside it: ``delete_executor``.

A named ``pressure.Executor`` leaves its keys in Redis when it shuts down (its task queue
``<name>:tasks``, and under ``<prefix>:<name>:executor:`` its claims, worker heartbeats,
initializer and counters), so that later executors and workers of that name share them.
``delete_executor`` removes them all, with the result queues (``<name>:results:<id>``)
that executors which did not shut down cleanly left behind.
"""

from __future__ import annotations

import redis
import redis.cluster

from .._internal import attach
from ..connection import Backend, ConnectionConfig
from ..errors import PressureError, QueueDoesNotExist
from ..keys import ExecutorKeys, QueueKeys, resolve_prefix
from ..queue import Queue
from .worker import ALIVE_FOR

__all__ = ["delete_executor", "executor_workers_alive"]


def _glob_escape(text: str) -> str:
    """``text`` with the characters SCAN MATCH reads as a pattern escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _queue_names(client: redis.Redis, prefix: str, pattern: str) -> list[str]:
    """The names of the FIFO queues under ``prefix`` whose name matches the glob ``pattern``
    (found by their ``:bound`` keys with SCAN)."""
    start = len(prefix) + 1
    names = []
    for key in client.scan_iter(match=f"{_glob_escape(prefix)}:{pattern}:bound", count=1000):
        text = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
        names.append(text[start:-len(":bound")])
    return sorted(names)


def executor_workers_alive(backend: Backend, keys: ExecutorKeys) -> list[str]:
    """The workers of an executor heard from in the last ALIVE_FOR seconds (server time)."""
    client = backend.client()
    pipe = client.pipeline(transaction=False)
    pipe.time()
    pipe.hgetall(keys.workers)
    (seconds, micros), workers = backend.call("executor workers", pipe.execute)
    now = seconds * 1000 + micros // 1000
    return sorted(w.decode(errors="replace") for w, ms in workers.items()
                  if now - int(ms) < ALIVE_FOR * 1000)


def delete_executor(name: str, *, url: str | None = None, connection: redis.Redis | redis.cluster.RedisCluster | None = None,
                    prefix: str | None = None, force: bool = False) -> int:
    """Delete every key of the ``pressure.Executor`` named ``name``: its task queue (tasks
    not run yet are lost), the result queues left by its executors, and its own bookkeeping
    (claims, worker heartbeats, initializer, counters). Returns how many queues and keys
    were deleted: 0 if there was no such executor.

    Refuses (PressureError) while workers of that name are alive on any host, unless
    ``force``: stop them first (their ``python -m pressure worker`` processes, or the
    executor that started them). An executor still running with that name loses its
    pending futures' tasks and results; delete an executor only once it is shut down.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("executor name must be a non-empty string")
    prefix = resolve_prefix(prefix)
    keys = ExecutorKeys.build(prefix, name)
    config = ConnectionConfig.resolve(url, connection)
    backend = Backend(config, connection)
    backend.route(keys.claims, f"executor {name!r}")  # on a cluster: its slot
    try:
        alive = executor_workers_alive(backend, keys)
        if alive and not force:
            raise PressureError(
                f"executor {name!r} has {len(alive)} worker(s) alive ({', '.join(alive)}): stop them "
                f"first, or force the deletion")
        client = backend.client()
        queues = [keys.tasks, *_queue_names(client, prefix, _glob_escape(keys.results_prefix) + "*")]
        deleted = 0
        for queue_name in queues:
            QueueKeys.build(prefix, queue_name)  # a name that could not be a queue's fails here
            queue: Queue[bytes] = attach(Queue, queue_name, config, prefix=prefix, serializer="bytes",
                                         create=False, backend=backend)
            try:
                queue.delete()  # wakes whoever waits on it; they raise QueueDoesNotExist
                deleted += 1
            except QueueDoesNotExist:
                pass
        deleted += int(backend.call("delete the executor's keys", client.delete, *keys.all_keys(),
                                    mutating=True))
        return deleted
    finally:
        backend.disconnect()

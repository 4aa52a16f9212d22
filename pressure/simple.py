"""``pressure.SimpleQueue``: the ``queue.SimpleQueue`` API over a pressure queue.

An unbounded FIFO queue in Redis, shared by every process and host that names
it. It is an ordinary protocol queue with bound 0 (same keys as
``pressure.Queue``), so any pressure client can put into it or get from it::

    import pressure
    q = pressure.SimpleQueue("events")      # create or attach
    q.put({"n": 1}); q.get()

Like ``queue.SimpleQueue`` it has no ``full``, ``task_done``, ``join``,
``shutdown`` or ``maxsize``, and ``put`` never blocks. Everything else is
done by the ``pressure.Queue`` it wraps.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import redis
import redis.cluster

from . import serializers
from .keys import QueueKeys
from .queue import Queue
from .signing import Authkey

__all__ = ["SimpleQueue"]

T = TypeVar("T")


class SimpleQueue(Generic[T]):
    """Simple, unbounded FIFO queue in Redis.

    ``SimpleQueue(name)`` creates the queue (bound 0) if it does not exist
    and attaches to it otherwise; attaching to a queue that another client
    created with a bound raises ``QueueExistsError`` (a ValueError), since a
    SimpleQueue's put must never block. ``name=None`` makes an anonymous
    queue with a unique name: pass the handle (it pickles) to reach it from
    other processes. The keyword-only arguments are those of
    ``pressure.Queue``.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        url: str | None = None,
        connection: redis.Redis | redis.cluster.RedisCluster | None = None,
        prefix: str | None = None,
        serializer: str | serializers.Serializer = "pickle",
        client_id: str | None = None,
        authkey: Authkey | None = None,
        insecure_pickle: bool = False,
    ) -> None:
        self._queue: Queue[T] = Queue(
            name=name, maxsize=0, url=url, connection=connection, prefix=prefix,
            serializer=serializer, client_id=client_id, authkey=authkey, insecure_pickle=insecure_pickle,
        )

    # -- the queue.SimpleQueue API ------------------------------------------------------

    def put(self, item: T, block: bool = True, timeout: float | None = None) -> None:
        """Put the item on the queue.

        The optional 'block' and 'timeout' arguments are ignored, as this method
        never blocks.  They are provided for compatibility with the Queue class.
        """
        self._queue.put(item)

    def put_nowait(self, item: T) -> None:
        """Put an item into the queue without blocking.

        This is exactly equivalent to `put(item)` and is only provided
        for compatibility with the Queue class.
        """
        self._queue.put(item)

    def get(self, block: bool = True, timeout: float | None = None) -> T:
        """Remove and return an item from the queue.

        If optional args 'block' is true and 'timeout' is None (the default),
        block if necessary until an item is available. If 'timeout' is
        a non-negative number, it blocks at most 'timeout' seconds and raises
        the Empty exception if no item was available within that time.
        Otherwise ('block' is false), return an item if one is immediately
        available, else raise the Empty exception ('timeout' is ignored
        in that case).
        """
        return self._queue.get(block, timeout)

    def get_nowait(self) -> T:
        """Remove and return an item from the queue without blocking.

        Only get an item if one is immediately available. Otherwise
        raise the Empty exception.
        """
        return self._queue.get(block=False)

    def qsize(self) -> int:
        """Return the approximate size of the queue (not reliable!)."""
        return self._queue.qsize()

    def empty(self) -> bool:
        """Return True if the queue is empty, False otherwise (not reliable!)."""
        return self._queue.empty()

    # -- pressure extensions ------------------------------------------------------------

    @property
    def name(self) -> str:
        """The queue's protocol name."""
        return self._queue.name

    @property
    def keys(self) -> QueueKeys:
        """The Redis key names of this queue."""
        return self._queue.keys

    def delete(self) -> None:
        """Delete the queue and every key it has (protocol Delete); unread items are lost."""
        self._queue.delete()

    def disconnect(self) -> None:
        """Close this handle's connections (the queue itself is untouched). The handle
        reconnects if used again."""
        self._queue.disconnect()

    def __enter__(self) -> SimpleQueue[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.disconnect()

    def __repr__(self) -> str:
        q = self._queue
        return f"<pressure.SimpleQueue name={q.name!r} prefix={q.prefix!r} url={q.url!r}>"

    # -- pickling: the wrapped handle travels as configuration, never as a socket -------

    def __getstate__(self) -> dict[str, Any]:
        return {"queue": self._queue}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._queue = state["queue"]

"""pressure for asyncio: ``AsyncQueue``, ``AsyncLifoQueue`` and ``AsyncPriorityQueue`` on
``redis.asyncio``, with the sync client's scripts and keys, so async and sync clients (and
any pressure-protocol client) share one queue::

    from pressure.aio import AsyncQueue

    async with AsyncQueue("jobs", maxsize=100, url="redis://...") as q:
        await q.put({"n": 1})
        item = await q.get()                    # cancellation-safe
        async with asyncio.timeout(5):          # or get(timeout=5), or asyncio.wait_for
            item = await q.get()
        async for item in q:                    # until the queue is closed and drained
            ...

The names are ``asyncio.Queue``'s; every call that asks the server is a coroutine (also
``qsize``, ``empty``, ``full``, ``put_nowait``, ``get_nowait`` and ``task_done``, plain
methods on ``asyncio.Queue``), and ``maxsize`` is a coroutine method. ``Empty`` and
``Full`` are pressure's (``pressure.Empty``, ``queue.Empty``...) and asyncio's
(``asyncio.QueueEmpty``/``QueueFull``); ``ShutDown`` is ``pressure.ShutDown``.

``reliable=True`` is the sync handle's reliable mode: items stay in Redis until
``task_done()`` (or ``await delivery.ack()`` of an ``AsyncDelivery`` from ``receive()``).

The rest of ``pressure.Queue``'s surface is here too, with the same names, arguments, defaults
and errors, awaited: puts take ``delay``, ``ttl``, ``ttr`` and ``key``; ``delete()``;
``statistics()``, ``peek``, ``peek_item``, ``delete_item``, ``in_flight``, ``dead_letters``,
``kick``, ``purge_dead``, ``repair``; ``exists()``, ``closed()`` and ``unfinished_tasks()``
(properties on the sync handle, coroutine methods here, as ``maxsize()``); anonymous queues
(``AsyncQueue()``, ``AsyncQueue(10)``); ``create=False``; ``durability=``; ``ttl=`` and
``dead_letter_expired=``; Sentinel (``redis+sentinel://`` URLs, or a
``redis.asyncio.sentinel.Sentinel(...).master_for(name)`` client). An ``AsyncDelivery`` has
``task_id``, ``ack()``, ``release(delay=...)``, ``bury()``, ``delete()`` and ``touch()``.
``import pressure`` never imports this package (nor ``redis.asyncio``).
"""

from __future__ import annotations

from ..errors import ShutDown as ShutDown
from ._errors import Empty as Empty
from ._errors import Full as Full
from ._queue import AsyncLifoQueue as AsyncLifoQueue
from ._queue import AsyncPriorityQueue as AsyncPriorityQueue
from ._queue import AsyncQueue as AsyncQueue
from ._reliable import AsyncDelivery as AsyncDelivery

__all__ = ["AsyncQueue", "AsyncLifoQueue", "AsyncPriorityQueue", "AsyncDelivery", "Empty", "Full", "ShutDown"]

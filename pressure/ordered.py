"""``LifoQueue`` and ``PriorityQueue``: ``queue.LifoQueue`` and ``queue.PriorityQueue`` in Redis.

Both are pressure queues in every other respect: the same role tokens,
``:not_full`` permit, ``:closed`` marker and ``:stats:*`` counters, so the
same blocking, bounding, shutdown, task tracking and reliable mode. They
differ in where their items live (a pressure extension of the protocol):

* keys under ``<prefix>:lifo:<name>`` / ``<prefix>:priority:<name>``, with
  ``:pressure:kind`` naming the kind; attaching to a queue of another kind
  raises ``QueueExistsError``;
* the items in a sorted set at that base key, each score 0 and each member
  ``<order key><16-digit sequence><payload><8-digit order key length>``
  (lua/items_zset.lua), so Redis hands out the smallest member first.

LIFO: the order key is empty and the sequence falls with every put, so the
newest item is next. Priority: the order key encodes the item itself
(pressure/ordering.py), so the lowest item is next, as ``heapq`` would give,
and equal ones come out first in, first out. An item handed back (release,
a dead consumer, an expired visibility timeout, ``kick``) returns to its
place in that order.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ._reading import peek_items, peek_read
from .ordering import order_key
from .queue import Queue

__all__ = ["LifoQueue", "PriorityQueue", "queue_class"]

T = TypeVar("T")


class _OrderedQueue(Queue[T]):
    """What LIFO and priority queues share: items in a sorted set."""

    _STORES_PAYLOADS = False

    def _order_keys(self, items: list[T] | tuple[T, ...]) -> list[bytes] | None:
        return [self._order_key(item) for item in items]

    def _unwrap(self, item: bytes) -> bytes:
        length = int(item[-8:])
        return item[length + 16:-8]

    def _peek_items(self, n: int) -> list[bytes]:
        client = self._backend.client()
        return peek_items(False, self._backend.call("ZRANGE", client.execute_command,
                                                    *peek_read(False, self._keys.base, n)))


class LifoQueue(_OrderedQueue[T]):
    """A LIFO queue in Redis: the item put last is got first (``queue.LifoQueue``).

    Same constructor and methods as ``pressure.Queue``; its keys live under
    ``<prefix>:lifo:<name>``.
    """

    _KIND = "lifo"


class PriorityQueue(_OrderedQueue[T]):
    """A priority queue in Redis: the lowest item is got first (``queue.PriorityQueue``).

    Items are ordered by value, as the stdlib orders them, typically
    ``(priority, data)`` tuples: numbers, str, bytes, tuples and lists of
    them, and ``order=True`` dataclasses (see pressure.ordering). Equal items
    come out in the order they were put, and so do tuples equal up to an
    element that cannot be ordered (``(1, some_object)``), where the stdlib
    would raise ``TypeError``. An item with no orderable part raises
    ``TypeError`` in ``put``, and the queue is left untouched. Same
    constructor and methods as ``pressure.Queue``; its keys live under
    ``<prefix>:priority:<name>``.
    """

    _KIND = "priority"

    def _order_key(self, item: Any) -> bytes:
        return order_key(item)


def queue_class(kind: str) -> type[Queue[Any]]:
    """The handle class of a kind of queue ('fifo', 'lifo' or 'priority')."""
    classes: dict[str, type[Queue[Any]]] = {"fifo": Queue, "lifo": LifoQueue, "priority": PriorityQueue}
    return classes[kind]

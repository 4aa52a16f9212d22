"""Inspection: what a queue handle reads about its queue without changing it.

``Inspection`` is the half of a queue handle that looks and does not touch: the next items
(``peek``), the size and the bound (``qsize``, ``empty``, ``full``, ``maxsize``; assigning
``maxsize`` is the one write, of the stored bound), the state (``exists``, ``closed``,
``is_shutdown``) and the counters (``statistics``): ``pressure.Queue`` inherits it.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from . import serializers
from ._reading import statistics_of, statistics_reads
from ._records import QueueStatistics
from ._scripts import INFO, SET_BOUND, STATS, QueueScript, SetBoundStatus
from ._validate import Options, _count, _maxsize_value
from .connection import Backend
from .errors import ProtocolError, QueueDoesNotExist
from .keys import QueueKeys

__all__ = ["Inspection"]

T = TypeVar("T")


class Inspection(Generic[T]):
    """The next items, the size, the bound, the state and the counters: a base class of Queue."""

    # what it uses of the queue handle (set by Queue._setup)
    _name: str
    _keys: QueueKeys
    _backend: Backend
    _options: Options
    _serializer: serializers.Serializer

    def _unwrap(self, item: bytes) -> bytes:
        raise NotImplementedError

    def _peek_items(self, n: int) -> list[bytes]:
        raise NotImplementedError

    def _missing(self, forget: bool = True) -> QueueDoesNotExist:
        raise NotImplementedError

    def _call(self, script: QueueScript, *args: Any, mutating: bool = True) -> Any:
        raise NotImplementedError

    def _own_posted(self) -> None:
        raise NotImplementedError

    # -- inspection ----------------------------------------------------------------

    def peek(self, n: int = 1) -> list[T]:
        """Return the next ``n`` items, next-out first, without consuming them."""
        n = _count("n", n)
        if n == 0:
            return []
        self._own_posted()
        return [serializers.loads(self._serializer, self._unwrap(p)) for p in self._peek_items(n)]

    # -- size and state -----------------------------------------------------------

    def _parse_bound(self, raw: bytes | str) -> int:
        """Read :bound as the scripts do: ASCII digits only, at most 15 of them."""
        text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
        if not (text.isascii() and text.isdigit() and len(text) <= 15):
            raise ProtocolError(f"{self._keys.bound} holds {raw!r}, not a non-negative integer")
        return int(text)

    def _info(self, most: int | None = 1) -> tuple[int, int, int, bool, int]:
        """(exists, ready, bound, closed, held) in one read-only round trip (lua/info.lua):
        ``ready`` the items a get would hand out now (due delayed items in, items past their
        ttl out), counted up to ``most`` (None: all); ``held`` what the bound holds, as a put
        counts it (queued and delayed items)."""
        exists, ready, bound, closed, held = self._call(INFO, "" if most is None else most, mutating=False)
        if not exists:
            raise self._missing(forget=False)
        return exists, ready, self._parse_bound(bound), bool(closed), held

    def qsize(self) -> int:
        """Return the approximate size of the queue (not reliable!)."""
        return self._info(None)[1]

    def empty(self) -> bool:
        """Return True if the queue is empty, False otherwise (not reliable!)."""
        return self._info()[1] == 0

    def full(self) -> bool:
        """Return True if the queue is full, False otherwise (not reliable!)."""
        _, _, bound, _, held = self._info()
        return 0 < bound <= held

    @property
    def maxsize(self) -> int:
        """The bound stored in Redis (0 = unbounded), read on every access.

        Assigning it changes the bound for every client at once; values <= 0
        mean unbounded, as for queue.Queue.
        """
        return self._info()[2]

    @maxsize.setter
    def maxsize(self, value: int) -> None:
        bound = _maxsize_value(value)
        if self._call(SET_BOUND, bound, "") == SetBoundStatus.NO_QUEUE:
            raise self._missing()

    @property
    def exists(self) -> bool:
        """Whether the queue exists (protocol Exists)."""
        return bool(self._call(INFO, 1, mutating=False)[0])

    @property
    def closed(self) -> bool:
        """Whether the queue has been closed (protocol Closed). True is permanent."""
        return self._info()[3]

    @property
    def is_shutdown(self) -> bool:
        """Same as ``closed``, under queue.Queue's 3.13 name."""
        return self._info()[3]

    def statistics(self) -> QueueStatistics:
        """Return a snapshot of the queue's counters (one atomic round trip)."""
        self._own_posted()  # this handle's own get's drop, task_done()s count
        k = self._keys
        pipe = self._backend.client().pipeline(transaction=True)
        for read in statistics_reads(k):
            pipe.execute_command(*read)  # type: ignore[no-untyped-call]
        values, closed, dead = self._backend.call("statistics", pipe.execute)
        if values[0] is None:
            raise self._missing(forget=False)
        # the items by state (counted as info.lua counts them for qsize()) and the lifecycle's
        # figures: a second atomic step (lua/stats.lua)
        stats = self._call(STATS, k.inbox_prefix, k.inflight_prefix, k.held_prefix, mutating=False)
        return statistics_of(self._name, k, values, closed, dead, stats, self._parse_bound)

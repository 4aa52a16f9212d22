"""A replayable log of items taken from a queue: what a streaming reader needs.

A queue hands each item out once. A stream processor such as Spark plans a
batch by offsets, may run it twice (a task retried, a query restarted from its
checkpoint) and says only later that it is done with it. ``QueueLog`` bridges
the two: ``take(n)`` moves up to ``n`` queued items into the log of a named
group, numbering them 1, 2, 3...; ``read(after, upto)`` reads a range of
numbers as often as asked; ``commit(upto)`` drops what is done.

Each ``take`` is two atomic steps: a reliable get of the items (they wait in
this consumer's in-flight list, see ``Queue.receive``) and ``log_append.lua``,
which moves exactly those still in flight into the log. A process that dies
between the two leaves the items in flight, and they are requeued (at once if
the process is seen dead on its host, else after the visibility timeout): an
item is either in the queue, in flight, or in the log, never lost and never in
two of them. The log lives beside the queue (``<base>:pressure:logs:<group>``,
a stream) and goes when the queue is deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import redis

from .._internal import attach, internal
from .._scripts import LOG_APPEND, LOG_COMMIT, LOG_READ
from ..connection import ConnectionConfig
from ..errors import PressureError
from ..keys import KINDS, resolve_prefix
from ..ordered import queue_class
from ..queue import Queue
from ..signing import resolve_authkey

__all__ = ["LogChunk", "LogEntry", "QueueLog"]

#: Items per round trip taken into the log (get.lua returns at most 1000 at once).
_CHUNK = 1000
#: Entries per round trip read from the log (log_read.lua: one reply of three strings).
_READ_CHUNK = 2000


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One logged item."""

    #: Its number in the log (1, 2, 3...).
    number: int
    #: The payload, as its producer serialized it.
    payload: bytes
    #: The queue's delivery number when it was taken (rises in the order items left the queue).
    seq: int
    #: How many times the item had been delivered, this time included.
    deliveries: int
    #: When it was taken (Unix time, the server's clock).
    taken_at: float
    #: The identifier of the queue's producer at that time (``:producer``: the last client
    #: that took the producer role, so the item's own producer only if it was the last).
    producer: str


@dataclass(frozen=True, slots=True)
class LogChunk:
    """Consecutive logged items, as columns (what ``LogEntry`` holds, one list per field)."""

    numbers: range
    payloads: list[bytes]
    seqs: list[int]
    deliveries: list[int]
    #: When each was taken, in milliseconds (Unix time, the server's clock).
    taken_ms: list[int]
    producers: list[str]

    def __len__(self) -> int:
        return len(self.numbers)

    def entries(self) -> Iterator[LogEntry]:
        """The chunk's entries, one by one."""
        for number, payload, seq, deliveries, ms, producer in zip(
                self.numbers, self.payloads, self.seqs, self.deliveries, self.taken_ms, self.producers):
            yield LogEntry(number, payload, seq, deliveries, ms / 1000, producer)


def _slices(blob: bytes, lengths: list[int]) -> list[bytes]:
    """``blob`` cut into consecutive pieces of ``lengths``."""
    ends = list(accumulate(lengths))
    return list(map(blob.__getitem__, map(slice, [0, *ends[:-1]], ends)))


class QueueLog:
    """The log of consumer group ``group`` on queue ``name`` (which must exist).

    Picklable (as its configuration); connects lazily in each process.
    """

    def __init__(self, name: str, group: str, *, url: str | None = None,
                 connection: redis.Redis | None = None, prefix: str | None = None,
                 kind: str = "fifo", visibility_timeout: float = 30.0) -> None:
        if not isinstance(group, str) or not group:
            raise ValueError("group must be a non-empty string")
        if group.rsplit(":", 1)[-1] in ("tail", "committed") and ":" in group:
            # '<logs>:<g>:tail' is group g's tail: a group of that name would share its keys
            raise ValueError(f"group {group!r} would share keys with group {group.rsplit(':', 1)[0]!r}: "
                             f"a group name may not end in ':tail' or ':committed'")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        self.__setstate__({"name": name, "group": group, "kind": kind,
                           "prefix": resolve_prefix(prefix), "visibility_timeout": visibility_timeout,
                           "config": ConnectionConfig.resolve(url, connection)})

    @classmethod
    def _from_config(cls, name: str, group: str, config: ConnectionConfig, *, prefix: str,
                     kind: str = "fifo", visibility_timeout: float = 30.0) -> QueueLog:
        """A log from a ``ConnectionConfig`` (what it pickles as), for pressure's own readers."""
        log = cls.__new__(cls)
        log.__setstate__({"name": name, "group": group, "kind": kind, "prefix": prefix,
                          "visibility_timeout": visibility_timeout, "config": config})
        return log

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self._name, "group": self._group, "kind": self._kind, "prefix": self._prefix,
                "visibility_timeout": self._visibility_timeout, "config": self._config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._name: str = state["name"]
        self._group: str = state["group"]
        self._kind: str = state["kind"]
        self._prefix: str = state["prefix"]
        self._config: ConnectionConfig = state["config"]
        self._visibility_timeout: float = state["visibility_timeout"]
        self._queue: Queue[bytes] = attach(
            queue_class(self._kind), self._name, self._config, prefix=self._prefix, serializer="bytes", create=False,
            reliable=True, visibility_timeout=self._visibility_timeout,
            authkey=resolve_authkey(None))  # PRESSURE_AUTHKEY: what it takes is verified
        self._log = f"{self._queue.keys.logs}:{self._group}"
        self._tail_key = f"{self._log}:tail"
        self._committed_key = f"{self._log}:committed"

    @property
    def queue(self) -> Queue[bytes]:
        """The handle the log takes items with (serializer 'bytes', reliable mode)."""
        return self._queue

    @property
    def group(self) -> str:
        return self._group

    def _int(self, key: str) -> int:
        raw = internal(self._queue).call("GET", "get", key)
        return int(raw) if raw is not None else 0

    def tail(self) -> int:
        """The number of the last item logged (0 if none ever was)."""
        return self._int(self._tail_key)

    def committed(self) -> int:
        """The number up to which the log is committed (0 if never)."""
        return self._int(self._committed_key)

    def take(self, n: int) -> int:
        """Move up to ``n`` items queued now into the log; never waits. Returns the tail.

        Fewer are taken when fewer are queued, or while another consumer holds the
        queue's consumer role (as ``get_many`` does). Raises QueueDoesNotExist if the
        queue is gone."""
        if n < 0:
            raise ValueError(f"n must not be negative, not {n}")
        link = internal(self._queue)
        k = self._queue.keys
        tail = None
        left = n
        while left > 0:
            # acknowledged by log_append, not by task_done: left out of its line
            got = link.receive_many(min(left, _CHUNK), track=False)
            if not got:
                break
            tail = int(link.run(LOG_APPEND.name, LOG_APPEND.keys(k.inflight(got[0].consumer), self._log,
                                                                self._tail_key, k.producer, k.logs),
                                LOG_APPEND.check((self._group, *(d.id for d in got)))))
            left -= len(got)
        if tail is None:  # nothing queued (a queue that is gone raised QueueDoesNotExist)
            return self.tail()
        return tail

    def read(self, after: int, upto: int) -> Iterator[LogEntry]:
        """The entries numbered ``after + 1`` to ``upto``, in order, as often as asked until
        committed. Raises PressureError if some of them were committed already."""
        for chunk in self.read_chunks(after, upto):
            yield from chunk.entries()

    def read_chunks(self, after: int, upto: int) -> Iterator[LogChunk]:
        """What ``read`` reads, a chunk of consecutive entries per round trip (the way to read
        many: a few list operations per chunk, not a dozen reply elements per entry)."""
        if upto <= after:
            return
        link = internal(self._queue)
        unwrap = link.unwrap
        keys = LOG_READ.keys(self._log)
        expected = after + 1
        while expected <= upto:
            meta_raw, items, producers = link.run(
                LOG_READ.name, keys, LOG_READ.check((expected, upto, _READ_CHUNK)), mutating=False)
            meta = list(map(int, meta_raw.split()))
            numbers = range(expected, expected + len(meta) // 6)
            if not numbers or meta[0::6] != list(numbers):
                break  # the next one expected is gone (committed): said below
            payloads = _slices(items, meta[4::6])
            if not self._queue._STORES_PAYLOADS:
                payloads = list(map(unwrap, payloads))
            raw = _slices(producers, meta[5::6])
            names = {p: p.decode(errors="replace") for p in set(raw)}  # mostly one producer
            yield LogChunk(numbers, payloads, meta[1::6], meta[2::6], meta[3::6],
                           list(map(names.__getitem__, raw)))
            expected = numbers.stop
        if expected <= upto:
            raise PressureError(
                f"log {self._group!r} of queue {self._name!r} no longer holds entry {expected} "
                f"(committed up to {self.committed()}): it was committed, or the queue was deleted")

    def bury(self, number: int) -> bool:
        """Copy entry ``number`` to the queue's dead-letter list (see ``Queue.dead_letters``),
        once however often it is buried: for an item no reader can use, which a stream must
        step over. False if the log no longer holds it."""
        call = internal(self._queue).call
        found = call("XRANGE", "xrange", self._log, f"{number}-0", f"{number}-0")
        if not found:
            return False
        fields = found[0][1]
        entry = b":".join((fields[b"s"], fields[b"d"], fields[b"t"], fields[b"i"]))
        dead = self._queue.keys.dead
        if call("LPOS", "lpos", dead, entry) is None:
            call("LPUSH", "lpush", dead, entry, mutating=True)
        return True

    def commit(self, upto: int) -> int:
        """Drop the entries up to ``upto``; returns the committed number (commits only move forward)."""
        return int(internal(self._queue).run(LOG_COMMIT.name, LOG_COMMIT.keys(self._log, self._committed_key),
                                             LOG_COMMIT.check((int(upto),))))

    def disconnect(self) -> None:
        self._queue.disconnect()

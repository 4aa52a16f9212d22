"""A replayable log of items taken from a queue: what a streaming reader needs.

A queue hands each item out once. A stream processor such as Spark plans a
batch by offsets, may run it twice (a task retried, a query restarted from its
checkpoint) and says only later that it is done with it. ``QueueLog`` bridges
the two: ``take(n)`` moves up to ``n`` queued items into the log of a named
group, numbering them 1, 2, 3...; ``read(after, upto)`` reads a range of
numbers as often as asked; ``commit(upto)`` drops what is done.

Each round trip of a ``take`` moves up to 1000 items from the queue into the log in one
atomic step (get.lua 'log'): an item is either in the queue or in the log, never lost
and never in both. On a signed queue (an authkey) each item must be verified before it is
logged, so there it is two steps: a reliable get of the items (they wait in this
consumer's in-flight list, see ``Queue.receive``; one whose signature is bad is
dead-lettered) and ``log_append.lua``, which moves exactly those still in flight into
the log. A process that dies between the two leaves the items in flight, and they are
requeued (at once if the process is seen dead on its host, else after the visibility
timeout). Either way a logged item leaves the queue's care, as a default-mode get's
does: its ttl, ttr and utube key go (the key's next item comes in). The log lives beside
the queue (``<base>:pressure:logs:<group>``, a stream) and goes when the queue is deleted.

Each round trip stores what it logs as one stream entry, a chunk (up to
1000 items: their lengths, delivery numbers, deliveries and times as text, the items
concatenated), and ``log_read.lua`` hands chunks back as they are stored: the server
does no work per item, and a reader cuts the chunks itself. A log written when there
was an entry per item reads the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate, repeat
from typing import Any, NamedTuple

import redis

from .._internal import attach, internal
from .._scripts import LOG_APPEND, LOG_COMMIT, LOG_READ, GetStatus
from ..connection import ConnectionConfig
from ..errors import PressureError
from ..keys import KINDS, resolve_prefix
from ..ordered import queue_class
from ..queue import Queue
from ..signing import resolve_authkey

__all__ = ["LogChunk", "LogEntry", "QueueLog"]

#: Items per round trip taken into the log (get.lua returns at most 1000 at once).
_CHUNK = 1000
#: Items per round trip read from the log (log_read.lua adds no chunk once it has this many).
_READ_ENOUGH = 4000


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


class _Part(NamedTuple):
    """The items ``start`` to ``stop`` (as slice bounds) of a chunk of the log: the text of
    its metadata columns (space-separated numbers) and its producer."""

    start: int
    stop: int
    seqs: bytes
    deliveries: bytes
    taken_ms: bytes
    producer: bytes


class LogChunk:
    """Consecutive logged items, as columns (what ``LogEntry`` holds, one list per field).
    The metadata columns are parsed when first asked for: a reader that wants only the
    payloads never pays for them."""

    __slots__ = ("numbers", "payloads", "_parts", "_parsed")

    def __init__(self, numbers: range, payloads: list[bytes], parts: list[_Part]) -> None:
        self.numbers = numbers
        self.payloads = payloads
        self._parts = parts
        self._parsed: dict[str, list[Any]] = {}

    def _ints(self, field: str) -> list[int]:
        column = self._parsed.get(field)
        if column is None:
            column = []
            for part in self._parts:
                column += list(map(int, getattr(part, field).split()))[part.start:part.stop]
            self._parsed[field] = column
        return column

    @property
    def seqs(self) -> list[int]:
        """The queue's delivery number of each item when it was taken."""
        return self._ints("seqs")

    @property
    def deliveries(self) -> list[int]:
        """How many times each item had been delivered, that time included."""
        return self._ints("deliveries")

    @property
    def taken_ms(self) -> list[int]:
        """When each was taken, in milliseconds (Unix time, the server's clock)."""
        return self._ints("taken_ms")

    @property
    def producers(self) -> list[str]:
        """The queue's producer when each was taken (see ``LogEntry.producer``)."""
        column = self._parsed.get("producers")
        if column is None:
            column = []
            for part in self._parts:
                column += repeat(part.producer.decode(errors="replace"), part.stop - part.start)
            self._parsed["producers"] = column
        return column

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
        signed = link.signed
        tail = None
        left = n
        while left > 0:
            logged = GetStatus.ENTRIES_WAITING if signed else link.logged(min(left, _CHUNK), self._group)
            if logged == GetStatus.EMPTY:
                break
            if isinstance(logged, tuple):
                tail, count = logged
            else:  # verified first (a signed queue), or entries delivered before: two steps
                taken = self._append(min(left, _CHUNK))
                if taken is None:
                    break
                tail, count = taken
            left -= count
        if tail is None:  # nothing queued (a queue that is gone raised QueueDoesNotExist)
            return self.tail()
        return tail

    def _append(self, n: int) -> tuple[int, int] | None:
        """Up to ``n`` items into the log in two steps: a reliable get (``receive_ids``: a
        signed item is verified, one whose signature is bad dead-lettered), then
        log_append.lua. (the tail, how many were logged: 0 if all it took were
        dead-lettered), or None if none were queued."""
        link = internal(self._queue)
        k = self._queue.keys
        # acknowledged by log_append, not by task_done: left out of its line
        cid, got, taken = link.receive_ids(n)
        if not got:
            return None if taken == 0 else (self.tail(), 0)  # forged ones only: take goes on
        tail = int(link.run(LOG_APPEND.name, LOG_APPEND.keys(k.inflight(cid), self._log, self._tail_key,
                                                            k.producer, k.logs, k.meta),
                            LOG_APPEND.check((self._group, *got))))
        return tail, len(got)

    def read(self, after: int, upto: int) -> Iterator[LogEntry]:
        """The entries numbered ``after + 1`` to ``upto``, in order, as often as asked until
        committed. Raises PressureError if some of them were committed already."""
        for chunk in self.read_chunks(after, upto):
            yield from chunk.entries()

    def read_chunks(self, after: int, upto: int) -> Iterator[LogChunk]:
        """What ``read`` reads, a ``LogChunk`` of consecutive entries per round trip (the way to
        read many: the log's chunks come as they are stored, a few strings per 1000 items)."""
        if upto <= after:
            return
        link = internal(self._queue)
        unwrap = link.unwrap
        keys = LOG_READ.keys(self._log, self._committed_key)
        expected = after + 1
        while expected <= upto:
            reply = link.run(LOG_READ.name, keys, LOG_READ.check((expected, upto, _READ_ENOUGH)),
                             mutating=False)
            if int(reply[0]) >= expected:
                break  # committed: said below
            first = expected
            payloads: list[bytes] = []
            parts: list[_Part] = []
            for at in range(1, len(reply), 7):
                last, lengths, seqs, deliveries, taken_ms, producer, items = reply[at:at + 7]
                sizes = list(map(int, lengths.split()))
                begin = int(last) - len(sizes) + 1  # the number of the chunk's first item
                if begin > expected:
                    break  # the next one expected is gone (the queue was deleted): said below
                start, stop = expected - begin, min(int(last), upto) - begin + 1
                payloads += _slices(items, sizes)[start:stop]
                parts.append(_Part(start, stop, seqs, deliveries, taken_ms, producer))
                expected = begin + stop
            if not parts:
                break
            if not self._queue._STORES_PAYLOADS:
                payloads = list(map(unwrap, payloads))
            yield LogChunk(range(first, expected), payloads, parts)
        if expected <= upto:
            raise PressureError(
                f"log {self._group!r} of queue {self._name!r} no longer holds entry {expected} "
                f"(committed up to {self.committed()}): it was committed, or the queue was deleted")

    def bury(self, number: int) -> bool:
        """Copy entry ``number`` to the queue's dead-letter list (see ``Queue.dead_letters``),
        once however often it is buried: for an item no reader can use, which a stream must
        step over. False if the log no longer holds it."""
        link = internal(self._queue)
        reply = link.run(LOG_READ.name, LOG_READ.keys(self._log, self._committed_key),
                         LOG_READ.check((number, number, 1)), mutating=False)
        if int(reply[0]) >= number or len(reply) < 8:
            return False  # committed (its chunk may be there still, with later ones), or gone
        last, lengths, seqs, deliveries, taken_ms, _, items = reply[1:8]
        sizes = list(map(int, lengths.split()))
        at = number - (int(last) - len(sizes) + 1)
        if at < 0:
            return False
        item = _slices(items, sizes)[at]  # as the queue stores it
        dead = self._queue.keys.dead
        entry = b":".join((seqs.split()[at], deliveries.split()[at], taken_ms.split()[at], item))
        if link.call("LPOS", "lpos", dead, entry) is None:
            link.call("LPUSH", "lpush", dead, entry, mutating=True)
        return True

    def commit(self, upto: int) -> int:
        """Drop the entries up to ``upto``; returns the committed number (commits only move forward)."""
        return int(internal(self._queue).run(LOG_COMMIT.name, LOG_COMMIT.keys(self._log, self._committed_key),
                                             LOG_COMMIT.check((int(upto),))))

    def disconnect(self) -> None:
        self._queue.disconnect()

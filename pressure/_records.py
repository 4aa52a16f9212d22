"""What the server hands back, as Python values: script result codes, delivery entries and
batch headers parsed, and the records that inspection returns (statistics, in-flight items,
dead letters, repair reports)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Generic, TypeVar

from ._scripts import GetStatus, PutStatus

__all__ = ["QueueStatistics", "InFlight", "DeadLetter", "RepairReport", "TaskInfo"]

T = TypeVar("T")

# put.lua's and get.lua's results under their old names, for pressure.aio (pressure/_scripts.py
# has each script's Status; the rest of pressure uses those)
_DELIVERED, _FULL, _BUSY, _CLOSED, _NO_QUEUE = (GetStatus.DELIVERED, PutStatus.FULL, GetStatus.BUSY,
                                               GetStatus.CLOSED, GetStatus.NO_QUEUE)
_EMPTY, _WAITING, _NEGATIVE, _UNDRAINED = GetStatus.EMPTY, GetStatus.WAITING, GetStatus.NEGATIVE, GetStatus.UNDRAINED
_DELIVERED_MORE = GetStatus.DELIVERED_MORE


def _parse_entry(entry: bytes) -> tuple[str, int, int, bytes]:
    """Split a delivery entry '<seq>:<deliveries>:<ms>:<payload>'."""
    seq, deliveries, ms, payload = entry.split(b":", 3)
    return seq.decode(), int(deliveries), int(ms), payload


def _batch_header(header: bytes) -> tuple[int, int, list[int] | None]:
    """Split a batch header 'h:<first seq>:<ms>:<deliveries>' (get.lua 'batch'): the first
    delivery number, the delivery time, and each item's delivery count (None: all first)."""
    _, first, ms, counts = header.split(b":", 3)
    return int(first), int(ms), [int(c) for c in counts.split(b",")] if counts else None


def _held_entries(header: bytes, items: list[bytes]) -> list[tuple[str, int, int, bytes]]:
    """The (seq, deliveries, ms, item) of a held batch's items, oldest first."""
    first, ms, counts = _batch_header(header)
    return [(str(first + i), counts[i] if counts else 1, ms, item) for i, item in enumerate(items)]



class _Listed:
    """What an in-flight record and a dead letter share: the payload's task id, and the item
    read from it by the queue that listed it."""

    __slots__ = ()
    payload: bytes
    _loads: Callable[[bytes], Any] | None

    @property
    def task_id(self) -> str:
        """Its task id (hex SHA1 of the payload): see ``Queue.peek_item``."""
        return hashlib.sha1(self.payload).hexdigest()

    @property
    def item(self) -> Any:
        """The item, deserialized from ``payload`` on each access, as ``get()`` would: with an
        authkey, verified first. A payload that does not decode raises what ``get()`` raises
        for it (``DeserializationError`` carrying the raw bytes; ``IntegrityError``, a
        subclass, for a signature that does not verify), here only: listing never fails on
        one bad payload."""
        if self._loads is None:
            raise TypeError("this record was not listed by a queue: it has no serializer to read its payload")
        return self._loads(self.payload)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled without its serializer (which may hold an authkey)."""
        return type(self), tuple(getattr(self, f.name) for f in fields(self) if f.name != "_loads")  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class InFlight(_Listed):
    """An item delivered and not yet acknowledged."""

    #: The consumer holding it.
    consumer: str
    #: The delivery number.
    id: str
    #: How many times it has been delivered.
    deliveries: int
    #: Seconds since this delivery.
    age: float
    #: The raw payload.
    payload: bytes
    #: How the queue that listed it reads a payload (its serializer, verifying first with an
    #: authkey); None for a record made by hand.
    _loads: Callable[[bytes], Any] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class DeadLetter(_Listed):
    """An item moved to the dead-letter list: after too many deliveries (or a payload that
    cannot be read), buried (``Delivery.bury()``) or expired (its ttl passed)."""

    #: The delivery number of its last delivery ('buried.<n>' if buried, 'expired' if expired).
    id: str
    #: How many times it was delivered.
    deliveries: int
    #: Seconds since its last delivery.
    age: float
    #: The raw payload.
    payload: bytes
    #: How the queue that listed it reads a payload (its serializer, verifying first with an
    #: authkey); None for a record made by hand.
    _loads: Callable[[bytes], Any] | None = field(default=None, repr=False, compare=False)

    @property
    def reason(self) -> str:
        """Why it is here: 'buried', 'expired', or 'deliveries' (max_deliveries, or unreadable)."""
        if self.id == "expired":
            return "expired"
        return "buried" if self.id.startswith("buried.") else "deliveries"


@dataclass(frozen=True, slots=True)
class TaskInfo(Generic[T]):
    """One item and its state (``Queue.peek_item``, ``Queue.delete_item``)."""

    #: Its task id (hex SHA1 of its payload).
    id: str
    #: 'taken' (a consumer holds it), 'ready' (queued), 'delayed' or 'buried' (a dead letter).
    state: str
    #: The item.
    item: T
    #: How many times it has been delivered (taken, buried); 0 where that is not kept.
    deliveries: int
    #: The consumer holding it (taken), else None.
    consumer: str | None
    #: Its delivery number (taken; buried: the last one, as ``DeadLetter.id``), else None.
    delivery: str | None


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What ``repair()`` changed."""

    #: Keys reset to the protocol invariants, with what they held before.
    reset: dict[str, str]
    #: Consumers found dead whose deliveries went back to the queue.
    recovered: list[str]


@dataclass(frozen=True, slots=True)
class QueueStatistics:
    """A snapshot of a queue's counters, read atomically in one round trip."""

    name: str
    #: Items the gets would hand out now, as ``qsize()`` counts them (due delayed items in,
    #: items past their ttl out).
    size: int
    #: The bound (0 = unbounded).
    maxsize: int
    #: Whether the queue has been closed (shut down).
    closed: bool
    #: Items ever put (``:stats:produced_messages``), by any client.
    produced_messages: int
    #: Payload bytes ever put (``:stats:produced_bytes``).
    produced_bytes: int
    #: Items ever got (``:stats:consumed_messages``).
    consumed_messages: int
    #: Payload bytes ever got (``:stats:consumed_bytes``).
    consumed_bytes: int
    #: Items discarded by ``shutdown(immediate=True)``.
    discarded_messages: int
    #: Items put whose processing has not ended (docs: reliability.md, Counting rules): what
    #: ``join()`` waits for.
    unfinished_tasks: int
    #: Items in the dead-letter list.
    dead_letters: int
    #: Identifier of the client that last took the producer role.
    producer: str | None
    #: Identifier of the client that last took the consumer role.
    consumer: str | None
    # the task lifecycle (docs: reliability.md, Task lifecycle), as tarantool/queue's
    # statistics() counts it
    #: Items put with a delay, not due yet (not in ``size``).
    delayed: int = 0
    #: Items a consumer holds: delivered, not acknowledged or given back (in flight; wake-up
    #: entries are not items). The CLI's "in flight" and the metric ``pressure_queue_in_flight``.
    taken: int = 0
    #: Tasks done: every item whose processing ended (docs: reliability.md, Counting rules).
    done: int = 0
    #: Items dropped or dead-lettered because their ttl passed before anyone took them (those
    #: a get has not reached yet too).
    expired: int = 0
    #: Calls by kind: put, take, ack, release, bury, kick, delete (items they moved).
    calls: dict[str, int] = field(default_factory=dict)
    #: Registered consumers: those that got from the queue and have neither left nor been
    #: found dead (their items taken back). The CLI's "consumers", ``pressure_queue_consumers``.
    consumers: int = 0

    @property
    def tasks(self) -> dict[str, int]:
        """The tasks by state, as tarantool/queue names them: total (every item the queue
        holds in any state), ready (``size``), taken, delayed, buried (``dead_letters``), done,
        expired."""
        return {"total": self.size + self.taken + self.delayed + self.dead_letters, "ready": self.size,
                "taken": self.taken, "delayed": self.delayed, "buried": self.dead_letters,
                "done": self.done, "expired": self.expired}


"""``pressure.Queue``: a pressure-protocol queue with the ``queue.Queue`` API.

Every step that holds a role token runs as one Lua script, so the non-blocking
path is one round trip and a token is never held across round trips, with one
exception that the protocol itself requires: a consumer waiting on an empty
queue holds the consumer role. Waiting happens outside scripts, in finite
slices (a server-side timeout of 0 would mean forever):

* a blocking get sends get.lua and ``BLMOVE <inbox> <inflight> RIGHT LEFT`` in
  one pipeline. If an item is there, the script puts a delivery entry in the
  caller's private inbox and the BLMOVE moves it to the caller's in-flight
  list and returns it: one round trip. If the queue is empty, the script
  registers the caller as the waiter (it now holds the consumer role, under a
  lease it renews every slice) and the BLMOVE waits; the next put.lua hands
  its item straight to the waiter's inbox and does the consumer's bookkeeping
  (stats, role given back), so the waiter needs no further round trip. Close
  and delete wake the waiter with an ``s:`` entry in its inbox;
* an entry stays in the in-flight list until acknowledged: at once (sent
  without waiting for the reply) in the default mode, on ``task_done()`` or
  ``Delivery.ack()`` in reliable mode. A reply lost on a dropped connection
  therefore loses nothing: the next get takes the entry back;
* a producer waiting for room pops ``:not_full`` as a wake-up and re-runs
  put.lua, which decides from the length and the bound read there and then
  (so a lost wake-up costs one slice, never the queue);
* a client waiting for a role held by someone else waits with
  ``BLMOVE x x RIGHT RIGHT``, which wakes when the token is back but leaves
  it in place, then re-runs its script. While it waits it checks the holder:
  a dead process on this host (pid and start time), or a lease that expired,
  and the role and everything the holder had in flight are taken back
  (requeue.lua 'recover', atomic, only if the holder is still the dead one).

Timeline of a blocking get on an empty queue::

    consumer A: [get.lua -> -6 (A is the waiter, holds :consumer_free),
                 BLMOVE inbox:A inflight:A RIGHT LEFT 1.0 ...]   one round trip
    producer P: put.lua -> LPUSH inbox:A entry, stats, role back, waiter gone
    consumer A: BLMOVE answers with the entry; A sends its acknowledgement

If A's wait ends any other way (deadline, error, interrupt), get.lua 'cancel'
unregisters A and gives the role back, and only if A is still the waiter; an
entry handed over in that instant stays in A's inbox for A's next get.
"""

from __future__ import annotations

import collections
import logging
import math
import multiprocessing.util
import numbers
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, NoReturn, TypeVar, cast

import redis

from . import identity, serializers
from .connection import (
    SMALLEST_BULK_LIMIT,
    Backend,
    ConnectionConfig,
    PackedScript,
    pack_command,
    refused_for_now,
)
from .durability import Durability
from .errors import (
    BackendError,
    DeserializationError,
    Empty,
    Full,
    OutcomeUnknown,
    PressureError,
    ProtocolError,
    QueueDoesNotExist,
    QueueExistsError,
    ShutDown,
)
from .keys import QueueKeys, resolve_prefix

__all__ = ["Queue", "QueueStatistics", "Delivery", "InFlight", "DeadLetter", "RepairReport"]

T = TypeVar("T")
logger = logging.getLogger("pressure")

_TIMEOUT_MESSAGE = "'timeout' must be a non-negative number"
#: How long create-or-attach waits for a Delete in progress to finish.
_CREATE_WAIT = 5.0
#: The shortest server-side wait: never let a small timeout round down to 0.
_MIN_WAIT = 0.005
#: The most items put_many sends in one round trip (one script call).
_BATCH = 1000
#: How often, at most, the clients of a queue sweep it for expired deliveries.
_SWEEP_INTERVAL = 1.0
#: How often a get on a closed, empty queue looks again whether others still hold items
#: (an acknowledgement wakes nobody; an item given back wakes the waiter at once).
_UNDRAINED_POLL = 0.1
#: multiprocessing runs exit finalizers of priority < 0 after joining its child processes
#: (and its own queues' feeder threads, at -5): anonymous queues are deleted after those.
_EXIT_PRIORITY = -10
#: A plain spec client's dead-looking holder must look dead this long before its token is restored
#: (a live one may be between taking the token and writing its identifier).
_SPEC_HOLDER_GRACE = 0.5

# script results (see the headers in pressure/lua/)
_DELIVERED, _FULL, _BUSY, _CLOSED, _NO_QUEUE, _EMPTY, _WAITING, _NEGATIVE = 1, -1, -2, -3, -4, -5, -6, -7
#: closed and empty, but another consumer holds items that may come back (get.lua)
_UNDRAINED = -8


def _wait_time(slice_: float, deadline: float) -> float:
    """One server-side wait: at most a slice, never past the deadline, never 0 (= forever)."""
    return max(min(slice_, deadline - time.monotonic()), _MIN_WAIT)


def _timeout_value(timeout: Any) -> float | None:
    """Validate a timeout: None waits forever; negative values are returned as given."""
    if timeout is None:
        return None
    if not isinstance(timeout, numbers.Real):
        raise TypeError(f"'timeout' must be a number or None, not {type(timeout).__name__}")
    value = float(timeout)
    if math.isnan(value):
        raise ValueError(_TIMEOUT_MESSAGE)
    if value == math.inf:
        return None
    return value


#: The largest bound: 15 digits, exact in the Lua number every script reads it as.
MAX_BOUND = 10**15 - 1


def _maxsize_value(maxsize: Any) -> int:
    """Validate a maxsize the way queue.Queue reads it: <= 0 means unbounded."""
    if isinstance(maxsize, bool) or not isinstance(maxsize, numbers.Real):
        raise TypeError(f"maxsize must be an integer, not {type(maxsize).__name__}")
    if isinstance(maxsize, numbers.Integral):
        value = int(maxsize)
    else:
        number = float(maxsize)
        if not math.isfinite(number) or number != int(number):
            raise ValueError(f"maxsize must be an integer, not {maxsize!r}")
        value = int(number)
    if value > MAX_BOUND:
        raise ValueError(f"maxsize must be at most {MAX_BOUND}, not {maxsize!r}")
    return max(value, 0)


def _seconds(name: str, value: Any, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0 or seconds < minimum:
        least = f" of at least {minimum:g}" if minimum else ""
        raise ValueError(f"{name} must be a positive, finite number of seconds{least}, not {value!r}")
    return seconds


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be non-negative, not {value}")
    return int(value)


def _delete_at_exit(cls: type[Queue[Any]], state: dict[str, Any]) -> None:
    """Delete an anonymous queue as its creator exits, through a new handle built from
    the original's configuration; a failure is logged, never raised."""
    queue = cls.__new__(cls)
    queue.__setstate__(state)
    try:
        queue.delete()
    except QueueDoesNotExist:
        pass  # deleted already
    except PressureError as exc:
        logger.warning("could not delete anonymous queue %r at exit: %s", queue.name, exc)
    finally:
        queue.disconnect()


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


@dataclass(eq=False)
class Delivery(Generic[T]):
    """One delivery of an item: acknowledge it, or release it for redelivery.

    ``get()`` hides this object; ``receive()`` returns it, for code that
    acknowledges out of order. Until acknowledged, the item stays in Redis
    in this consumer's in-flight list (reliable mode).
    """

    #: The item.
    item: T
    #: The delivery number (unique per queue).
    id: str
    #: How many times the item has been delivered, this one included.
    deliveries: int
    #: When it was delivered (Unix time, by the server's clock).
    delivered_at: float
    #: The identifier of the consumer it was delivered to.
    consumer: str
    _queue: Queue[T] = field(repr=False)
    #: A task_done() for it may have run (its reply was lost): another counts only if not.
    _unsure: bool = field(default=False, repr=False)

    def ack(self) -> bool:
        """Acknowledge: the item leaves Redis. False if it was already acknowledged or requeued."""
        return self._queue._ack(self, task_done=False)

    def release(self) -> bool:
        """Give the item back: it returns to the head of the queue (or, past max_deliveries,
        to the dead-letter list). False if it was already acknowledged or requeued."""
        return self._queue._release(self)

    def _ack_call(self) -> tuple[PackedScript, list[bytes | str]]:
        """This acknowledgement, as a call for ``Backend.pipeline``."""
        q = self._queue
        q._forget(self)
        return q._ack_command, [q._keys.inflight(self.consumer), self.id, "0"]

    def touch(self) -> bool:
        """Restart this delivery's visibility timeout (reliable mode): call it while
        processing takes longer than the timeout, so the item is not redelivered
        meanwhile. False if it was already acknowledged or requeued."""
        return bool(self._queue._run("touch", (self._queue._keys.inflight(self.consumer),), (self.id,)))


@dataclass(frozen=True, slots=True)
class InFlight:
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


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An item moved to the dead-letter list after too many deliveries."""

    #: The delivery number of its last delivery.
    id: str
    #: How many times it was delivered.
    deliveries: int
    #: Seconds since its last delivery.
    age: float
    #: The raw payload.
    payload: bytes


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
    #: Items in the queue now.
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
    #: Items put and not yet marked done with ``task_done()``.
    unfinished_tasks: int
    #: Items in the dead-letter list.
    dead_letters: int
    #: Identifier of the client that last took the producer role.
    producer: str | None
    #: Identifier of the client that last took the consumer role.
    consumer: str | None


class Queue(Generic[T]):
    """A FIFO queue in Redis, shared by every process and host that names it.

    ``Queue(name, maxsize)`` creates the queue if it does not exist (protocol
    Create) and attaches to it otherwise; an explicit ``maxsize`` that
    contradicts the stored bound raises ``QueueExistsError`` (a ValueError).
    ``name=None`` makes an anonymous queue with a unique name: pass the handle
    (it pickles) to reach it from other processes. An anonymous queue lives as
    long as the process that created it, as a ``queue.Queue`` does: its keys are
    deleted when that process exits (after multiprocessing has joined its
    children), never by a copy of the handle in another process. An integer
    in place of the name is the maxsize of an anonymous queue, so
    ``queue.Queue(10)`` keeps working after ``import pressure as queue``.

    ``durability=pressure.Durability(replicas=1, timeout=1.0)`` makes each put and
    acknowledgement wait (WAIT, in the same round trip) until that many replicas have it,
    and raise ``NotReplicated`` if they do not confirm in time (see pressure.durability).
    """

    #: The kind of queue (its key layout and order): 'fifo', 'lifo' or 'priority'.
    _KIND = "fifo"
    #: Deletes an anonymous queue when its creating process exits (None otherwise).
    _exit_delete: multiprocessing.util.Finalize[None] | None

    def __init__(
        self,
        name: str | int | None = None,
        maxsize: int | None = None,
        *,
        url: str | None = None,
        connection: redis.Redis | None = None,
        prefix: str | None = None,
        serializer: str | serializers.Serializer = "pickle",
        client_id: str | None = None,
        reliable: bool = False,
        visibility_timeout: float = 30.0,
        lease: float = 10.0,
        max_deliveries: int | None = 10,
        durability: Durability | None = None,
    ) -> None:
        if durability is not None and not isinstance(durability, Durability):
            raise TypeError(f"durability must be a pressure.Durability or None, not {type(durability).__name__}")
        if url is not None and connection is not None:
            raise ValueError("pass either url or connection, not both")
        if isinstance(name, numbers.Integral) and not isinstance(name, bool) and maxsize is None:
            name, maxsize = None, int(name)  # Queue(10), as queue.Queue(maxsize) is called
        anonymous = name is None
        if name is None:
            name = f"{{anon-{uuid.uuid4().hex}}}"
        elif not isinstance(name, str):
            raise TypeError(f"queue name must be a str, not {type(name).__name__}")
        elif not name:
            raise ValueError("queue name must not be empty")
        if prefix is None:
            prefix = resolve_prefix(None)
        elif not isinstance(prefix, str) or not prefix:
            raise ValueError("prefix must be a non-empty string")
        if client_id is not None and (not isinstance(client_id, str) or not client_id):
            raise ValueError("client_id must be a non-empty string")
        bound = None if maxsize is None else _maxsize_value(maxsize)
        config = ConnectionConfig.resolve(url, connection)
        options = self._options_of(reliable, visibility_timeout, lease, max_deliveries)
        options["durability"] = durability
        self._setup(name, prefix, serializer, client_id, Backend(config, connection), options)
        self._create(bound)
        if anonymous:
            # holds the configuration only, never this handle; runs in this process only
            self._exit_delete = multiprocessing.util.Finalize(
                None, _delete_at_exit, args=(type(self), self.__getstate__()),
                exitpriority=_EXIT_PRIORITY)

    @classmethod
    def _from_config(cls, name: str, config: ConnectionConfig, *, prefix: str,
                     serializer: str | serializers.Serializer = "pickle", create: bool = True,
                     reliable: bool = False, visibility_timeout: float = 30.0,
                     max_deliveries: int | None = 10, backend: Backend | None = None) -> Queue[Any]:
        """A handle from a ``ConnectionConfig`` (what a handle pickles as), for pressure's own
        processes (executor workers). ``create=False`` attaches only: a queue that does not
        exist is never made, and using the handle raises QueueDoesNotExist. Handles given one
        ``backend`` share its connections, so their calls can share a pipeline."""
        q: Queue[Any] = cls.__new__(cls)
        options = cls._options_of(reliable, visibility_timeout, 10.0, max_deliveries)
        q._setup(name, prefix, serializer, None, backend or Backend(config), options)
        if create:
            q._create(None)
        return q

    @classmethod
    def _options_of(cls, reliable: bool, visibility_timeout: float, lease: float,
                    max_deliveries: int | None) -> dict[str, Any]:
        """The reliability options, validated (what a handle pickles with)."""
        return {
            "reliable": bool(reliable),
            "visibility_timeout": _seconds("visibility_timeout", visibility_timeout),
            "lease": _seconds("lease", lease, minimum=1.0),
            "max_deliveries": cls._check_max_deliveries(max_deliveries),
        }

    @staticmethod
    def _check_max_deliveries(value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"max_deliveries must be an integer or None, not {type(value).__name__}")
        if value < 1:
            raise ValueError(f"max_deliveries must be at least 1, not {value}")
        return int(value)

    def _setup(self, name: str, prefix: str, serializer: str | serializers.Serializer,
               client_id: str | None, backend: Backend, options: dict[str, Any]) -> None:
        self._options = options
        #: WAIT for replicas after each put and acknowledgement (pressure.Durability), or None
        self._durability: Durability | None = options.get("durability")
        self._exit_delete = None
        self._reliable: bool = options["reliable"]
        self._lease_ms = int(options["lease"] * 1000)
        # rounded up: a visibility of 0 ms would read as "never expires"
        self._visibility_ms = (math.ceil(options["visibility_timeout"] * 1000) if self._reliable
                               else self._lease_ms)
        self._max_deliveries = str(options["max_deliveries"] or 0)
        self._unacked: collections.deque[Delivery[T]] = collections.deque()
        self._drop_commands: dict[str, bytes] = {}  # consumer id -> its DEL (_drop_received)
        #: whether this handle's last blocking get had to wait (then the next one sends 'woken')
        self._waited = True
        self._last_received: dict[str, list[str]] = {}
        self._record: tuple[int, str] = (-1, "")
        self._last_sweep = 0.0
        self._suspects: dict[str, tuple[str, float]] = {}
        # this handle's own consumer lists: two handles in one thread never share them
        self._token = uuid.uuid4().hex[:8]
        self._name = name
        self._prefix = prefix
        self._serializer_spec = serializer
        self._serializer = serializers.resolve(serializer)
        self._bytes = isinstance(self._serializer, serializers.BytesSerializer)
        # bytes on a FIFO queue: a stored item is the item itself (get_many skips the serializer)
        self._plain = self._bytes and type(self)._unwrap is Queue._unwrap
        self._client_id = client_id
        self._backend = backend
        self._pending_cancel: list[str] = []
        k = self._keys = QueueKeys.build(prefix, name, self._KIND)
        self._variant = "" if self._KIND == "fifo" else "@" + self._KIND
        self._put_keys = (k.base, k.bound, k.producer_free, k.producer, k.closed, k.not_full,
                          k.produced_messages, k.produced_bytes, k.waiter, k.lease, k.delivery_seq)
        self._get_keys = (k.base, k.bound, k.consumer_free, k.consumer, k.closed, k.not_full,
                          k.consumed_messages, k.consumed_bytes, k.waiter, k.lease, k.consumers,
                          k.redeliveries, k.delivery_seq)
        self._requeue_keys = (k.base, k.consumed_messages, k.consumed_bytes, k.consumer_free,
                              k.waiter, k.lease, k.consumers, k.redeliveries, k.dead, k.sweep,
                              k.bound, k.not_full)
        self._info_keys = (k.base, k.bound, k.closed)
        self._task_keys = (k.bound, k.produced_messages, k.tasks_done, k.all_tasks_done)
        # the hot paths send pre-encoded commands: see PackedScript
        self._put_command = PackedScript("put" + self._variant, self._put_keys, 0, 6)
        self._get_command = PackedScript("get" + self._variant, self._get_keys, 3, 6)
        self._get_many_command = PackedScript("get" + self._variant, self._get_keys, 3, 7)
        self._ack_command = PackedScript("ack" + self._variant, self._task_keys, 1, 2)

    def _run(self, script: str, keys: tuple[str, ...] | list[str], args: tuple[Any, ...] | list[Any],
             *, mutating: bool = True) -> Any:
        """Run one of this kind of queue's scripts (see connection._script_source)."""
        return self._backend.run(script + self._variant, keys, args, mutating=mutating)

    # -- the kind of queue: FIFO here; LIFO and priority override (pressure/ordered.py) ---

    def _order_key(self, item: Any) -> bytes:
        """The order key sent with a put (see lua/items_zset.lua); FIFO has none."""
        return b""

    def _unwrap(self, item: bytes) -> bytes:
        """The payload inside a stored item (FIFO stores the payload itself)."""
        return item

    def _peek_items(self, n: int) -> list[bytes]:
        """The next ``n`` stored items, next-out first."""
        raw = self._backend.call("LRANGE", self._backend.client().lrange, self._keys.base, -n, -1)
        return list(reversed(raw))

    def _count_items(self, pipe: Any) -> None:
        """Queue the command that counts the stored items on a pipeline."""
        pipe.llen(self._keys.base)

    # -- identity and configuration -------------------------------------------------

    @property
    def name(self) -> str:
        """The queue's protocol name."""
        return self._name

    @property
    def prefix(self) -> str:
        """The key prefix (``PRESSURE_PREFIX``)."""
        return self._prefix

    @property
    def keys(self) -> QueueKeys:
        """The Redis key names of this queue."""
        return self._keys

    @property
    def client_id(self) -> str:
        """The identifier written to ``:producer``/``:consumer`` by the calling thread."""
        return self._client_id or self._backend.thread_client_id()

    @property
    def url(self) -> str:
        """The Redis server, as a URL without the password."""
        return self._backend.config.url

    def __repr__(self) -> str:
        return (f"<pressure.{type(self).__name__} name={self._name!r} prefix={self._prefix!r} "
                f"url={self.url!r}>")

    def __class_getitem__(cls, item: Any) -> Any:
        return super().__class_getitem__(item)  # type: ignore[misc]

    # -- pickling: the handle travels as configuration, never as a socket -----------

    def __getstate__(self) -> dict[str, Any]:
        return {
            "name": self._name,
            "prefix": self._prefix,
            "serializer": self._serializer_spec,
            "client_id": self._client_id,
            "config": self._backend.config,
            "options": self._options,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["name"], state["prefix"], state["serializer"], state["client_id"],
                    Backend(state["config"]), state["options"])

    # -- create-or-attach -----------------------------------------------------------

    def _create(self, maxsize: int | None) -> None:
        k = self._keys
        deadline = time.monotonic() + _CREATE_WAIT
        while True:
            status, stored = self._run(
                "create", (k.bound, k.producer_free, k.consumer_free, k.not_full, k.closed, k.kind,
                           k.consumers, *(key for key in k.extension_keys()
                                          if key not in (k.kind, k.consumers))),
                (0 if maxsize is None else maxsize, self._KIND, k.inbox_prefix, k.inflight_prefix,
                 k.held_prefix, k.logs),
            )
            if status == -2:
                kind = stored.decode() if isinstance(stored, bytes) else str(stored)
                raise QueueExistsError(
                    f"queue {self._name!r} already exists as a {kind} queue, not a {self._KIND} queue"
                )
            if status != -1:
                break
            if time.monotonic() > deadline:
                raise PressureError(
                    f"queue {self._name!r} is being deleted, or an interrupted delete left "
                    f"its keys behind: cannot create it now"
                )
            time.sleep(0.02)
        bound = self._parse_bound(stored)
        if status == 0 and maxsize is not None and bound != maxsize:
            raise QueueExistsError(
                f"queue {self._name!r} already exists with maxsize={bound}, not {maxsize}"
            )

    def _parse_bound(self, raw: bytes | str) -> int:
        """Read :bound as the scripts do: ASCII digits only, at most 15 of them."""
        text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
        if not (text.isascii() and text.isdigit() and len(text) <= 15):
            raise ProtocolError(f"{self._keys.bound} holds {raw!r}, not a non-negative integer")
        return int(text)

    def _missing(self, forget: bool = True) -> QueueDoesNotExist:
        """The error for a queue that is gone. Mutating calls (``forget``) first remove
        what pressure kept beside it, which a plain spec client's Delete leaves behind;
        inspection never changes anything. Best effort: the error is what matters."""
        if forget:
            k = self._keys
            try:
                self._run("forget", (k.bound, k.producer_free, k.consumer_free, k.waiter, k.consumers,
                                     *(key for key in k.extension_keys()
                                       if key not in (k.waiter, k.consumers))),
                          (k.inbox_prefix, k.inflight_prefix, k.held_prefix, k.logs))
            except PressureError:
                pass
        return QueueDoesNotExist(f"queue {self._name!r} does not exist")

    def _raise_for(self, result: int) -> None:
        """Raise what a script result that ends the call means (closed, deleted, bad timeout)."""
        if result == _CLOSED:
            raise ShutDown(f"queue {self._name!r} is shut down")
        if result == _NO_QUEUE:
            raise self._missing()
        if result == _NEGATIVE:
            raise ValueError(_TIMEOUT_MESSAGE)

    # -- put ----------------------------------------------------------------------

    def put(self, item: T, block: bool = True, timeout: float | None = None) -> None:
        """Put an item into the queue.

        If optional args 'block' is true and 'timeout' is None (the default),
        block if necessary until a free slot is available. If 'timeout' is
        a non-negative number, it blocks at most 'timeout' seconds and raises
        the Full exception if no free slot was available within that time.
        Otherwise ('block' is false), put an item on the queue if a free slot
        is immediately available, else raise the Full exception ('timeout'
        is ignored in that case). Raises ShutDown if the queue is shut down.
        The item is serialized first: if that fails, SerializationError is
        raised and the queue is not touched.
        """
        payload = serializers.dumps(self._serializer, item)
        if len(payload) >= SMALLEST_BULK_LIMIT:
            self._backend.check_sizes([payload])
        wait = _timeout_value(timeout) if block else None
        negative = block and wait is not None and wait < 0
        backend = self._backend
        if self._pending_cancel:
            self._retry_cancels()
        args: list[bytes | str] = [self.client_id, payload, "1" if negative else "0", "0",
                                   self._keys.inbox_prefix, self._order_key(item)]
        result = backend.script(self._put_command, args, durability=self._durability)
        if result >= 0:
            return
        self._put_pending([payload], None if self._KIND == "fifo" else [self._order_key(item)],
                          negative, block, wait, result)

    def put_many(self, items: Iterable[T], block: bool = True, timeout: float | None = None) -> None:
        """Put several items into the queue, in order, many per round trip.

        Every item is serialized first: if one cannot be, SerializationError is raised and
        nothing is put (ItemTooLarge likewise for one larger than the server accepts). Then as
        many as the bound leaves room for go in at once (atomically: stats and tokens as for
        single puts), and the rest wait for room as ``put`` waits, 'block' and 'timeout'
        meaning what they mean there (the timeout covers the whole batch). If the queue stays
        full or is shut down before all are in, Full or ShutDown is raised with ``items_put``
        set to how many of the items (the first ones) went in. Other producers' items may come
        between the batch's round trips, never inside one; a round trip carries at most 1000
        items, and no more bytes than the server accepts for one item.
        """
        items = items if isinstance(items, (list, tuple)) else list(items)
        payloads = self._dumps_all(items)
        orders = None if self._KIND == "fifo" else [self._order_key(item) for item in items]
        if not payloads:
            return
        self._backend.check_sizes(payloads)
        wait = _timeout_value(timeout) if block else None
        negative = block and wait is not None and wait < 0
        if self._pending_cancel:
            self._retry_cancels()
        total = len(payloads)
        try:
            self._put_pending(payloads, orders, negative, block, wait, None)
        except (Full, ShutDown) as exc:
            exc.items_put = total - len(payloads)
            raise

    def _dumps_all(self, items: list[T] | tuple[T, ...]) -> list[bytes]:
        """Every item serialized, in a new list; SerializationError for the first that cannot be."""
        if self._bytes and all(type(item) is bytes for item in items):
            return list(items)  # type: ignore[arg-type]  # bytes travel untouched
        dumps = self._serializer.dumps
        try:
            payloads = [dumps(item) for item in items]
            if all(type(payload) is bytes for payload in payloads):
                return payloads
        except Exception:  # noqa: BLE001 - the slow path below raises it as SerializationError
            pass
        return [serializers.dumps(self._serializer, item) for item in items]

    def _put_pending(self, payloads: list[bytes], orders: list[bytes] | None, negative: bool,
                     block: bool, wait: float | None, result: Any) -> None:
        """Put ``payloads`` with their order keys ``orders`` (None on a FIFO queue, which has
        none), removing each from the lists as it goes in: up to _BATCH per round trip,
        waiting for room or for the producer role as ``block``/``wait`` allow. ``result``
        is put.lua's answer to a first try, if made."""
        backend = self._backend
        took = "0"
        deadline = busy_deadline = math.inf
        now = time.monotonic()
        if not block:
            deadline = now
        elif wait is not None:
            deadline = now + max(wait, 0.0)
        # a role held by another client is waited for like a mutex, even by put_nowait
        busy_deadline = max(deadline, now + backend.slice)
        client = None
        while True:
            if result is None:
                count = backend.batch_count(payloads, _BATCH)
                args: list[bytes | str] = [self.client_id, payloads[0], "1" if negative else "0", took,
                                           self._keys.inbox_prefix, orders[0] if orders else b""]
                # put.lua's ARGV[7..]: a FIFO item is its payload, an ordered one payload and order key
                more = payloads[1:count] if orders is None else [
                    arg for pair in zip(payloads[1:count], orders[1:count]) for arg in pair]
                result = backend.script(self._put_command, args, items=more, durability=self._durability)
            if isinstance(result, list):
                result, went = result
            else:
                went = 1 if result >= 0 else 0
            del payloads[:went]
            if orders is not None:
                del orders[:went]
            if not payloads:
                return
            if went:
                result, took = None, "0"
                continue
            self._raise_for(result)
            now = time.monotonic()
            if result == _FULL:
                if now >= deadline:
                    raise Full(f"queue {self._name!r} is full")
                client = client or backend.client()
                took = "1" if backend.call(
                    "BRPOP :not_full", client.brpop, [self._keys.not_full],
                    timeout=max(min(backend.slice, deadline - now), _MIN_WAIT),
                ) else "0"  # a lost reply costs a wake-up, never an item or a token: not "mutating"
            elif result == _BUSY:
                if now >= busy_deadline:
                    holder = self._read(self._keys.producer)
                    raise Full(f"queue {self._name!r}: the producer role is held by {holder}")
                self._recover_spec_holder(self._keys.producer_free, self._keys.producer)
                self._wait_token(self._keys.producer_free, busy_deadline - now)
                took = "0"
            else:
                raise ProtocolError(f"put script returned {result!r}")
            result = None

    def put_nowait(self, item: T) -> None:
        """Put an item into the queue without blocking.

        Only enqueue the item if a free slot is immediately available.
        Otherwise raise the Full exception.
        """
        self.put(item, block=False)

    def _put_call(self, item: T) -> tuple[PackedScript, list[bytes | str]]:
        """A non-blocking put of ``item``, as a call for ``Backend.pipeline`` (its reply is
        put.lua's: the new length, or a negative status to pass to ``put`` itself)."""
        payload = serializers.dumps(self._serializer, item)
        if len(payload) >= SMALLEST_BULK_LIMIT:
            self._backend.check_sizes([payload])
        return self._put_command, [self.client_id, payload, "0", "0", self._keys.inbox_prefix,
                                   self._order_key(item)]

    # -- get ----------------------------------------------------------------------

    def get(self, block: bool = True, timeout: float | None = None) -> T:
        """Remove and return an item from the queue.

        If optional args 'block' is true and 'timeout' is None (the default),
        block if necessary until an item is available. If 'timeout' is
        a non-negative number, it blocks at most 'timeout' seconds and raises
        the Empty exception if no item was available within that time.
        Otherwise ('block' is false), return an item if one is immediately
        available, else raise the Empty exception ('timeout' is ignored
        in that case). Raises ShutDown if the queue has been shut down and
        is drained: empty, with nothing that other consumers hold left to come
        back (until then it waits, or raises Empty, as on an open, empty queue).
        A payload that cannot be deserialized raises
        DeserializationError carrying the raw bytes; the item goes to the
        dead-letter list.

        In reliable mode the item stays in Redis until ``task_done()``
        acknowledges it (the oldest unacknowledged item of this handle first).
        """
        delivery = self.receive(block, timeout)
        if self._reliable:
            self._unacked.append(delivery)
        return delivery.item

    def get_many(self, max_items: int, block: bool = True, timeout: float | None = None) -> list[T]:
        """Remove and return up to ``max_items`` items (at most 1000 per call), next-out first,
        in one round trip when items are queued (atomically: stats and tokens as for single
        gets).

        Returns at once with what is there, however few. With none there, it behaves as
        ``get``: 'block' and 'timeout' mean what they mean there, Empty and ShutDown are
        raised as there, and once one item arrives it is returned with whatever came with
        it. In reliable mode each item is acknowledged by its own ``task_done()``; in the
        default mode the next get acknowledges them all.
        """
        max_items = _count("max_items", max_items)
        if max_items < 1:
            raise ValueError(f"max_items must be at least 1, not {max_items}")
        if block:
            wait = _timeout_value(timeout)
            if wait is not None and wait < 0:
                self._refuse_negative_timeout()
        if self._reliable:
            got = self._receive_more(max_items)
            if not got:
                got = [self.receive(block, timeout)]
                self._unacked.append(got[0])
                if max_items > 1:
                    got += self._more_after_first(self._receive_more, max_items - 1) or []
            return [delivery.item for delivery in got]
        items = self._take_batch(max_items)
        if not items:
            first = self._receive(block, timeout)  # kept in flight until the batch is in hand
            items = [first.item]
            if max_items > 1:
                more = self._more_after_first(lambda n: self._take_batch(n, keep=True), max_items - 1)
                if more is None:
                    # what the lost reply took waits in our lists, with the first item, for our
                    # next get's cancel to sort out: dropping them now would lose it
                    return items
                items += more
        self._drop_received(self._consumer_id())
        return items

    def _more_after_first(self, take: Callable[[int], list[Any]], n: int) -> list[Any] | None:
        """What ``take(n)`` gets after get_many has received its first item, or None if it
        fails: the first item is the caller's already (the failure, if it lasts, is raised by
        the next call, and anything a lost reply took waits in this consumer's lists for it)."""
        try:
            return take(n)
        except PressureError:
            return None

    def get_nowait(self) -> T:
        """Remove and return an item from the queue without blocking.

        Only get an item if one is immediately available. Otherwise
        raise the Empty exception.
        """
        return self.get(block=False)

    def receive(self, block: bool = True, timeout: float | None = None) -> Delivery[T]:
        """Like ``get()``, but return the Delivery, to acknowledge or release explicitly.

        In reliable mode the item stays in this consumer's in-flight list until
        ``Delivery.ack()`` (or ``release()``, or its visibility timeout passes,
        or this consumer dies). In the default mode it is acknowledged at once.
        """
        delivery = self._receive(block, timeout)
        if not self._reliable:
            self._drop_received(delivery.consumer)
        return delivery

    def _receive(self, block: bool, timeout: float | None) -> Delivery[T]:
        """``receive()``, except that a default-mode delivery stays in Redis (in flight) until
        ``_drop_received``: one the process dies before returning is requeued."""
        wait = _timeout_value(timeout) if block else None
        if wait is not None and wait < 0:
            self._refuse_negative_timeout()
        if self._pending_cancel:
            self._retry_cancels()
        cid = self._consumer_id()
        if time.monotonic() - self._last_sweep > _SWEEP_INTERVAL:
            self._sweep()
        entry = self._get_entry(cid, block, wait) if block else self._get_nowait(cid)
        delivery = self._delivery(cid, entry)
        # default mode: received is acknowledged (this consumer's next get drops it)
        self._last_received[cid] = [delivery.id]
        return delivery

    def _refuse_negative_timeout(self) -> NoReturn:
        """A blocking get with a negative timeout: ValueError as queue.Queue raises it, after
        the ShutDown it checks first (closed and empty), with one read-only round trip, so
        no key changes (no consumer record, no wake-up entry, no sweep)."""
        _, length, _, closed = self._info()
        if closed and length == 0:
            raise ShutDown(f"queue {self._name!r} is shut down")
        raise ValueError(_TIMEOUT_MESSAGE)

    def _drop_received(self, cid: str) -> None:
        """Default mode: the items of this get are in hand, about to be returned: drop what
        consumer ``cid`` holds in Redis (its in-flight list and held batch), without waiting
        for the reply. Until then, a consumer that dies has them requeued; from then on they
        are its own, as a queue.Queue get's are (if the command is lost, the next get drops them)."""
        command = self._drop_commands.get(cid)
        if command is None:
            command = self._drop_commands[cid] = pack_command("DEL", self._keys.inflight(cid),
                                                              self._keys.held(cid))
        self._backend.post(command)

    def _delivery(self, cid: str, entry: bytes) -> Delivery[T]:
        """The Delivery of an entry this consumer received."""
        seq, deliveries, ms, payload = _parse_entry(entry)
        try:
            item = serializers.loads(self._serializer, self._unwrap(payload))
        except DeserializationError:
            # it will never load with this serializer: to the dead-letter list, not lost
            self._dead_letter(cid, seq)
            raise
        return Delivery(item, seq, deliveries, ms / 1000, cid, self)

    def _receive_more(self, n: int) -> list[Delivery[T]]:
        """Up to ``n`` items (at most 1000) that are queued now, in one round trip (get.lua 'many');
        [] if there are none (or another consumer holds the role). Never waits. In reliable
        mode each stays in flight until acknowledged, as after ``receive()``; in the default
        mode they are acknowledged at once, as there."""
        cid, result = self._get_queued("many", n)
        if not result:
            return []
        deliveries = self._deliveries(cid, result)
        if not self._reliable:
            self._drop_received(cid)  # in hand: acknowledged, as after receive()
        return deliveries

    def _get_queued(self, mode: str, n: int, keep: bool = False) -> tuple[str, list[bytes]]:
        """get.lua 'many' or 'batch': up to ``n`` items queued now, in one round trip, as
        (this consumer's id, the reply); the reply is [] if there are none (or another
        consumer holds the role). Never waits. ``keep`` ('batch'): leave what the in-flight
        list holds (the first item of the same get_many)."""
        if self._pending_cancel:
            self._retry_cancels()
        cid = self._consumer_id()
        if time.monotonic() - self._last_sweep > _SWEEP_INTERVAL:
            self._sweep()  # as receive() does: a consumer of batches also recovers dead peers
        k = self._keys
        tail = (k.inbox(cid), k.inflight(cid), k.held(cid), cid, mode, "k" if keep else "0",
                self._consumer_record(), self._lease_ms, self.client_id, n)
        try:
            result = self._backend.script(self._get_many_command, tail)
        except BackendError:
            self._pending_cancel.append(cid)  # a lost reply: what it took waits in our lists
            raise
        if not isinstance(result, list):
            if result in (_EMPTY, _BUSY, _UNDRAINED):
                return cid, []
            self._raise_for(result)
            raise ProtocolError(f"get script returned {result!r}")
        return cid, result

    def _deliveries(self, cid: str, entries: list[bytes]) -> list[Delivery[T]]:
        """The Deliveries of entries this consumer received (get.lua 'many'); an item that
        cannot be deserialized is dead-lettered and left out."""
        deliveries = []
        for entry in entries:
            try:
                deliveries.append(self._delivery(cid, entry))
            except DeserializationError as exc:  # dead-lettered; the others are still ours
                logger.error("queue %r: %s (moved to the dead-letter list)", self._name, exc)
        self._last_received[cid] = [d.id for d in deliveries]
        if self._reliable:
            self._unacked.extend(deliveries)
        return deliveries

    def _take_batch(self, n: int, keep: bool = False) -> list[T]:
        """Up to ``n`` items (at most 1000) that are queued now, in one round trip, for get_many
        in the default mode (get.lua 'batch'): the items come as they are stored, with one
        header, and no Delivery is made. [] if there are none (or another consumer holds the
        role). Never waits. ``keep``: see ``_get_queued``. What it takes stays in Redis until
        ``_drop_received``."""
        cid, result = self._get_queued("batch", n, keep)
        if not result:
            return []
        header = result.pop()
        if not header.startswith(b"h:"):  # an entry delivered earlier, from our inbox
            return [d.item for d in self._deliveries(cid, [*result, header])]
        # received: from now on a cancel leaves the batch alone (our next get drops it)
        self._last_received[cid] = ["h" + header.split(b":", 2)[1].decode()]
        if self._plain:
            return cast("list[T]", result)  # bytes: the stored items are the items
        loads, unwrap = self._serializer.loads, self._unwrap
        try:
            return [loads(unwrap(item)) for item in result]
        except Exception:
            return self._load_each(cid, header, result)

    def _load_each(self, cid: str, header: bytes, stored: list[bytes]) -> list[T]:
        """Deserialize a batch's items one by one: one that cannot be is dead-lettered (as
        ``_delivery`` does) and left out; the others are returned."""
        first, _, _ = _batch_header(header)
        # releasing an item turns the held batch into in-flight entries: all received
        self._last_received[cid] = ["h%d" % first, *(str(first + i) for i in range(len(stored)))]
        items = []
        for i, item in enumerate(stored):
            try:
                items.append(serializers.loads(self._serializer, self._unwrap(item)))
            except DeserializationError as exc:
                self._dead_letter(cid, str(first + i))
                logger.error("queue %r: %s (moved to the dead-letter list)", self._name, exc)
        return items

    def _consumer_id(self) -> str:
        """'<client id>#<token>': names this handle's inbox and in-flight list in this thread."""
        return f"{self.client_id}#{self._token}"

    def _slice(self) -> float:
        """One wait: a third of the lease at most, so a live waiter always renews it in time."""
        return min(self._backend.slice, self._lease_ms / 3000)

    def _consumer_record(self) -> str:
        """'host|pid|start|ms|mode' of this process, for :pressure:consumers: the
        visibility timeout and 'r' in reliable mode, the lease and 'd' otherwise."""
        pid = os.getpid()
        if self._record[0] != pid:
            host, pid, start = identity.process_record()
            mode = "r" if self._reliable else "d"
            self._record = (pid, f"{host}|{pid}|{start}|{self._visibility_ms}|{mode}")
        return self._record[1]

    def _get_entry(self, cid: str, block: bool, wait: float | None) -> bytes:
        now = time.monotonic()
        deadline = math.inf if wait is None else now + max(wait, 0.0)
        busy_deadline = max(deadline, now + self._backend.slice)
        inbox, inflight, held = self._keys.inbox(cid), self._keys.inflight(cid), self._keys.held(cid)
        backend = self._backend
        command = self._get_command
        record = self._consumer_record()
        tail = [inbox, inflight, held, cid, "block", "1" if wait is not None and wait < 0 else "0",
                record, self._lease_ms, self.client_id]
        # behind the BLMOVE: takes the item a put announced to us, the waiter, as soon as the
        # BLMOVE returns (one round trip); left out while gets find items queued (it would
        # find nothing to do), at the cost of one more round trip the first time one waits
        woken: list[bytes | str | int] = [inbox, inflight, held, cid, "woken", "0", record,
                                          self._lease_ms, self.client_id]
        maybe_waiting = True  # we may hold the consumer role as the registered waiter
        waited, self._waited = self._waited, True
        try:
            status, reply, taken = backend.script_then_blmove(
                command, tail, inbox, inflight, _wait_time(self._slice(), deadline),
                woken if waited else None)
            first = True
            while True:
                tail[5] = "0"
                if reply is not None and not reply.startswith(b"s:"):  # not a wake-up
                    maybe_waiting = False  # a delivery ends the wait (get.lua unregistered us)
                    self._waited = not first
                    return reply  # type: ignore[no-any-return]
                if isinstance(taken, bytes):  # woken, and 'woken' took the item for us
                    maybe_waiting = False
                    return taken
                if isinstance(status, redis.RedisError):
                    if refused_for_now(status):  # LOADING, BUSY...: the script did not run, and
                        self._cancel(cid)  # what the BLMOVE may have moved goes back to our inbox
                    elif not isinstance(status, redis.exceptions.NoScriptError):
                        backend.raise_error(status, "script get", True)
                elif status == _WAITING:
                    if reply is None:
                        if time.monotonic() >= deadline:
                            return self._cancel_wait(cid)
                        self._sweep()  # a slice ended: requeue what expired meanwhile
                    # woken by close or delete, or a slice ended: look again (and renew the lease)
                elif status == _UNDRAINED:
                    # closed and empty, but items others hold may come back: take back what
                    # dead ones hold, else wait for the others as on an open, empty queue
                    maybe_waiting = False
                    holders = self._recover_holders(cid)
                    if holders == "drained":
                        raise ShutDown(f"queue {self._name!r} is shut down")
                    if holders == "wait":
                        if time.monotonic() >= deadline:
                            raise Empty(f"queue {self._name!r} is empty")
                        tail[5] = "w"
                else:
                    maybe_waiting = False
                    if status == _NO_QUEUE:  # deleted: our own lists are all that is left
                        backend.call("DEL", backend.client().delete, inbox, inflight, held, mutating=True)
                    self._raise_for(status)
                    if status == _BUSY:
                        now = time.monotonic()
                        if now >= busy_deadline:
                            raise Empty(f"queue {self._name!r} is empty")
                        self._recover_waiter()
                        self._wait_token(self._keys.consumer_free, busy_deadline - now)
                    elif status != _DELIVERED:
                        raise ProtocolError(f"get script returned {status!r}")
                maybe_waiting = True
                first = False
                status, reply, taken = backend.script_then_blmove(
                    command, tail, inbox, inflight,
                    _wait_time(_UNDRAINED_POLL if tail[5] == "w" else self._slice(), deadline), woken)
        except BaseException as exc:
            if maybe_waiting:
                # an unresponsive or refusing server: do not wait out another socket timeout now
                timed_out = isinstance(exc, BackendError) and (
                    isinstance(exc.__cause__, redis.TimeoutError) or refused_for_now(exc.__cause__))
                self._cancel_after_error(cid, now=not timed_out)
            raise

    def _get_nowait(self, cid: str) -> bytes:
        tail = (self._keys.inbox(cid), self._keys.inflight(cid), self._keys.held(cid), cid, "nowait", "0",
                self._consumer_record(), self._lease_ms, self.client_id)
        backend = self._backend
        busy_deadline = time.monotonic() + backend.slice
        recovered = False
        try:
            while True:
                result = backend.script(self._get_command, tail)
                if isinstance(result, bytes):
                    return result
                self._raise_for(result)
                if result == _UNDRAINED and not recovered:
                    recovered = True  # closed and empty, but others hold items: dead ones' first
                    holders = self._recover_holders(cid)
                    if holders == "drained":
                        raise ShutDown(f"queue {self._name!r} is shut down")
                    if holders == "recovered":
                        continue
                if result in (_EMPTY, _UNDRAINED):
                    raise Empty(f"queue {self._name!r} is empty")
                if result != _BUSY:
                    raise ProtocolError(f"get script returned {result!r}")
                # another consumer is mid-step while items wait: wait for it like a mutex
                now = time.monotonic()
                if now >= busy_deadline:
                    raise Empty(f"queue {self._name!r}: the consumer role is held by "
                                f"{self._read(self._keys.consumer)}")
                self._recover_waiter()
                self._wait_token(self._keys.consumer_free, busy_deadline - now)
        except BackendError:
            self._pending_cancel.append(cid)  # a lost reply: the entry waits in our in-flight list
            raise

    def _cancel(self, cid: str) -> Any:
        """Stop waiting; entries in our in-flight list never received go back to our inbox."""
        if self._reliable:
            received = [d.id for d in self._unacked if d.consumer == cid]
        else:
            received = self._last_received.get(cid, [])
        keys = (*self._get_keys, self._keys.inbox(cid), self._keys.inflight(cid), self._keys.held(cid))
        client_id = cid.rpartition("#")[0]
        return self._run("get", keys, (cid, "cancel", "0", self._consumer_record(),
                                               self._lease_ms, client_id, *received))

    def _cancel_wait(self, cid: str) -> bytes:
        """The deadline passed while waiting: stop waiting; take an item delivered meanwhile."""
        if self._cancel(cid) == _DELIVERED:
            return self._get_nowait(cid)  # served from our inbox first
        raise Empty(f"queue {self._name!r} is empty")

    def _cancel_after_error(self, cid: str, now: bool = True) -> None:
        """Give the consumer role back after a failed wait; if Redis is unreachable, on the next call.

        An item delivered meanwhile stays in this client's inbox: its next get returns it.
        """
        if now:
            try:
                self._cancel(cid)
                return
            except BackendError:
                pass
        self._pending_cancel.append(cid)

    def _retry_cancels(self) -> None:
        while self._pending_cancel:
            self._cancel(self._pending_cancel[0])
            self._pending_cancel.pop(0)

    # -- acknowledgements and recovery ------------------------------------------------

    def _ack(self, delivery: Delivery[T], task_done: bool) -> bool:
        """Acknowledge ``delivery`` (ack.lua). With ``task_done``, count the task exactly once
        across lost replies: after a reply lost on a broken connection, the acknowledgement
        is sent again at once in the form that counts the task only if the delivery is still
        in flight (i.e. the lost one did not run). If that fails too, OutcomeUnknown is raised
        and the delivery stays first in line, marked: task_done() again is exact."""
        inflight = self._keys.inflight(delivery.consumer)
        if not task_done:
            acked, unfinished = self._backend.script(self._ack_command, (inflight, delivery.id, "0"),
                                                     durability=self._durability)
        else:
            try:
                acked, unfinished = self._backend.script(
                    self._ack_command, (inflight, delivery.id, "2" if delivery._unsure else "1"),
                    durability=self._durability)
            except OutcomeUnknown as exc:
                delivery._unsure = True
                if isinstance(exc.__cause__, redis.TimeoutError):
                    raise  # an unresponsive server: do not wait out another socket timeout now
                try:
                    acked, unfinished = self._backend.script(self._ack_command, (inflight, delivery.id, "2"),
                                                             durability=self._durability)
                except BackendError:
                    raise exc from exc.__cause__  # still unknown: task_done() again will tell
        self._forget(delivery)
        if unfinished == -1:
            raise ValueError("task_done() called too many times")
        if unfinished == _NO_QUEUE:
            raise self._missing()
        return bool(acked)

    def _release(self, delivery: Delivery[T]) -> bool:
        requeued, dead = self._run("requeue", self._requeue_keys, (
            "release", self._keys.inbox_prefix, self._keys.inflight_prefix, self._max_deliveries,
            delivery.consumer, delivery.id, "", self._keys.held_prefix))
        self._forget(delivery)
        return bool(requeued or dead)

    def _settle_all(self, cid: str, ack: bool) -> int:
        """Acknowledge (``ack``) or give back every delivery this handle's consumer ``cid``
        holds, in one step whatever their number: for a reader that takes many items and
        settles them together (pressure.spark). Returns how many were settled."""
        self._unacked.clear()
        if ack:
            held, _ = self._backend.script(self._ack_command, (self._keys.inflight(cid), "*", "0"),
                                           durability=self._durability)
            return int(held)
        requeued, dead = self._run("requeue", self._requeue_keys, (
            "recover", self._keys.inbox_prefix, self._keys.inflight_prefix, self._max_deliveries,
            cid, self._consumer_record(), "", self._keys.held_prefix))
        return max(0, int(requeued)) + int(dead)

    def _dead_letter(self, cid: str, seq: str) -> bool:
        """Move delivery ``seq`` of consumer ``cid`` straight to the dead-letter list (an item
        its reader cannot use): a release that counts as the last delivery allowed."""
        _, dead = self._run("requeue", self._requeue_keys, (
            "release", self._keys.inbox_prefix, self._keys.inflight_prefix, "1", cid, seq, "",
            self._keys.held_prefix))
        return bool(dead)

    def _bury(self, delivery: Delivery[T]) -> bool:
        """Move a delivery straight to the dead-letter list (an item its reader cannot use)."""
        self._forget(delivery)
        return self._dead_letter(delivery.consumer, delivery.id)

    def _touch_all(self, cid: str) -> int:
        """Restart the visibility timeout of every delivery consumer ``cid`` holds (one step)."""
        return int(self._run("touch", (self._keys.inflight(cid),), ("*",)))

    def _forget(self, delivery: Delivery[T]) -> None:
        try:
            self._unacked.remove(delivery)
        except ValueError:
            pass

    def _sweep(self) -> None:
        """Requeue deliveries whose visibility timeout or lease passed (at most once a second
        across all clients), and recover consumers on this host whose process is gone."""
        self._last_sweep = time.monotonic()
        result = self._run("requeue", self._requeue_keys, (
            "sweep", self._keys.inbox_prefix, self._keys.inflight_prefix, self._max_deliveries,
            "", "", int(_SWEEP_INTERVAL * 1000), self._keys.held_prefix))
        if result[0] > 0 or result[1] > 0:
            logger.warning("queue %r: requeued %d expired deliveries, dead-lettered %d",
                           self._name, result[0], result[1])
        records = result[2:]
        for i in range(0, len(records), 2):
            self._recover_if_dead(records[i].decode(errors="replace"), records[i + 1].decode(errors="replace"))

    def _recover_if_dead(self, consumer: str, record: str) -> bool:
        """If ``consumer`` ran on this host in a process that is gone, take back what it held."""
        host, _, rest = record.partition("|")
        pid, _, rest = rest.partition("|")
        start, _, _ = rest.partition("|")
        if host != identity.hostname() or not pid.isdigit() or identity.is_alive(int(pid), start):
            return False
        requeued, dead = self._run("requeue", self._requeue_keys, (
            "recover", self._keys.inbox_prefix, self._keys.inflight_prefix, self._max_deliveries,
            consumer, record, "", self._keys.held_prefix))
        if requeued >= 0:
            logger.warning("queue %r: consumer %s (%s) is dead: its role and %d deliveries taken "
                           "back (%d dead-lettered)", self._name, consumer, record, requeued, dead)
        return bool(requeued >= 0)

    def _recover_holders(self, cid: str) -> str:
        """On a closed, empty queue whose items other consumers hold (get.lua -8): take back
        what consumers on this host whose process is gone hold, and say what is left:
        'recovered' (look again now), 'wait' (items may still come back: unacknowledged, in
        an inbox, or held by a consumer elsewhere, alive or not), or 'drained' (the holders
        are default-mode consumers alive on this host: what they hold, a get returned or is
        returning, its drop on the way)."""
        backend, k = self._backend, self._keys
        records = backend.call("HGETALL", backend.client().hgetall, k.consumers)
        others = [(c.decode(errors="replace"), r.decode(errors="replace")) for c, r in records.items()]
        others = [(consumer, record) for consumer, record in others if consumer != cid]
        if any([self._recover_if_dead(consumer, record) for consumer, record in others]):
            return "recovered"
        if time.monotonic() - self._last_sweep > _SWEEP_INTERVAL:
            self._sweep()  # what expired elsewhere (a get looks again after a wait)
        pipe = backend.client().pipeline(transaction=False)
        for consumer, _ in others:
            for key in (k.inbox(consumer), k.inflight(consumer)):
                pipe.llen(key)
                pipe.lpos(key, "s:", count=0)  # wake-ups hold nothing
            pipe.exists(k.held(consumer))
        replies = backend.call("look at the holders", pipe.execute)
        here = identity.hostname()
        for i, (_, record) in enumerate(others):
            n_inbox, wake_inbox, n_inflight, wake_inflight, held = replies[5 * i:5 * i + 5]
            if n_inbox > len(wake_inbox):
                return "wait"  # never received: its consumer's next get, or a sweep, brings it back
            if n_inflight > len(wake_inflight) or held:
                host, _, rest = record.partition("|")
                if not (rest.endswith("|d") and host == here):
                    return "wait"  # unacknowledged, or a default-mode get elsewhere (maybe dead)
        return "drained"

    def _recover_waiter(self) -> None:
        """The consumer role is taken: if its holder is a dead process on this host, recover it.
        (A holder on another host is recovered when its lease expires, by the sweep.)"""
        k = self._keys
        client = self._backend.client()
        pipe = client.pipeline(transaction=False)
        pipe.get(k.waiter)
        pipe.hgetall(k.consumers)
        waiter, records = self._backend.call("read the waiter", pipe.execute)
        if waiter is None:
            self._recover_spec_holder(k.consumer_free, k.consumer)
            return
        record = records.get(waiter)
        if record is not None and self._recover_if_dead(waiter.decode(errors="replace"),
                                                        record.decode(errors="replace")):
            return
        if time.monotonic() - self._last_sweep > _SWEEP_INTERVAL:
            self._sweep()  # a waiter elsewhere whose lease expired

    def _recover_spec_holder(self, free_key: str, role_key: str) -> None:
        """A role held by a plain spec client: if its identifier names a process on this host
        that is gone (seen twice, apart), give the token back."""
        holder = self._read(role_key)
        parts = (holder or "").split(":")
        if len(parts) < 2 or parts[0] != identity.hostname() or not parts[1].isdigit():
            return
        if identity.pid_exists(int(parts[1])):
            self._suspects.pop(free_key, None)
            return
        seen = self._suspects.get(free_key)
        now = time.monotonic()
        if seen is None or seen[0] != holder:
            self._suspects[free_key] = (holder or "", now)
        elif now - seen[1] >= _SPEC_HOLDER_GRACE:
            if self._run("restore", (free_key, role_key), (holder,)):
                logger.warning("queue %r: %s was held by dead client %s: token restored",
                               self._name, free_key, holder)
            self._suspects.pop(free_key, None)

    def repair(self) -> RepairReport:
        """Reset the queue's role tokens to the protocol invariants, for operators.

        Every role token list is set to exactly one element, ``:not_full``
        agrees with the length and bound, ``:closed`` has two elements if it
        has any, and a registered waiter is cleared (a live one registers
        again). Consumers on this host whose process is gone give back what
        they held. Items are never lost. Run it when no client should be
        holding a role: it does not ask.
        """
        k = self._keys
        result = self._run("repair", (k.base, k.bound, k.producer_free, k.consumer_free,
                                              k.not_full, k.closed, k.waiter, k.lease), ())
        if result == [_NO_QUEUE]:
            raise self._missing()
        reset = {result[i].decode(): result[i + 1].decode() for i in range(0, len(result), 2)}
        recovered = []
        records = self._backend.call("HGETALL", self._backend.client().hgetall, k.consumers)
        for consumer, record in records.items():
            if self._recover_if_dead(consumer.decode(errors="replace"), record.decode(errors="replace")):
                recovered.append(consumer.decode(errors="replace"))
        if reset or recovered:
            logger.warning("queue %r repaired: reset %s, recovered %s", self._name, reset, recovered)
        return RepairReport(reset, recovered)

    # -- inspection ----------------------------------------------------------------

    def peek(self, n: int = 1) -> list[T]:
        """Return the next ``n`` items, next-out first, without consuming them."""
        n = _count("n", n)
        if n == 0:
            return []
        return [serializers.loads(self._serializer, self._unwrap(p)) for p in self._peek_items(n)]

    def in_flight(self) -> list[InFlight]:
        """Every item delivered and not yet acknowledged, with its consumer, age and delivery count."""
        k = self._keys
        client = self._backend.client()
        consumers = self._backend.call("HGETALL", client.hgetall, k.consumers)
        pipe = client.pipeline(transaction=True)
        pipe.time()
        for consumer in consumers:
            name = consumer.decode(errors="replace")
            pipe.lrange(k.inflight(name), 0, -1)
            pipe.lrange(k.inbox(name), 0, -1)
            pipe.lrange(k.held(name), 0, -1)
        replies = self._backend.call("in_flight", pipe.execute)
        now_s, now_us = replies[0]
        now = now_s + now_us / 1e6
        out: list[InFlight] = []
        for i, consumer in enumerate(consumers):
            inflight, inbox, held = replies[1 + 3 * i:4 + 3 * i]
            entries = [_parse_entry(e) for e in inflight + inbox if not e.startswith(b"s:")]
            if held:
                entries += _held_entries(held[0], held[:0:-1])
            for seq, deliveries, ms, payload in entries:
                out.append(InFlight(consumer.decode(errors="replace"), seq, deliveries,
                                    max(now - ms / 1000, 0.0), self._unwrap(payload)))
        return out

    def dead_letters(self) -> list[DeadLetter]:
        """The dead-letter list, oldest first: items delivered ``max_deliveries`` times."""
        client = self._backend.client()
        pipe = client.pipeline(transaction=True)
        pipe.time()
        pipe.lrange(self._keys.dead, 0, -1)
        (now_s, now_us), entries = self._backend.call("dead_letters", pipe.execute)
        now = now_s + now_us / 1e6
        out = []
        for entry in reversed(entries):
            seq, deliveries, ms, payload = _parse_entry(entry)
            out.append(DeadLetter(seq, deliveries, max(now - ms / 1000, 0.0), self._unwrap(payload)))
        return out

    def kick(self, n: int | None = None) -> int:
        """Move up to ``n`` dead letters (all if None), oldest first, back to the head of the
        queue with a fresh delivery count. Returns how many moved."""
        k = self._keys
        count = -1 if n is None else _count("n", n)
        return int(self._run("kick", (k.dead, k.base, k.consumed_messages, k.consumed_bytes,
                                              k.bound, k.not_full), (count,)))

    def purge_dead(self) -> int:
        """Delete the dead-letter list; return how many items it held."""
        pipe = self._backend.client().pipeline(transaction=True)
        pipe.llen(self._keys.dead)
        pipe.delete(self._keys.dead)
        return int(self._backend.call("purge_dead", pipe.execute, mutating=True)[0])

    # -- role tokens --------------------------------------------------------------

    def _wait_token(self, free_key: str, limit: float) -> None:
        """Wait until a role token is back, without taking it (BLMOVE x x RIGHT RIGHT)."""
        backend = self._backend
        backend.call(
            "BLMOVE role token", backend.client().blmove, free_key, free_key,
            max(min(backend.slice, limit), _MIN_WAIT), "RIGHT", "RIGHT",
        )

    def _read(self, key: str) -> str | None:
        value = self._backend.call("GET", self._backend.client().get, key)
        return None if value is None else value.decode(errors="replace")

    # -- size and state -----------------------------------------------------------

    def _info(self) -> tuple[int, int, int, bool]:
        exists, length, bound, closed = self._run("info", self._info_keys, (), mutating=False)
        if not exists:
            raise self._missing(forget=False)
        return exists, length, self._parse_bound(bound), bool(closed)

    def qsize(self) -> int:
        """Return the approximate size of the queue (not reliable!)."""
        return self._info()[1]

    def empty(self) -> bool:
        """Return True if the queue is empty, False otherwise (not reliable!)."""
        return self._info()[1] == 0

    def full(self) -> bool:
        """Return True if the queue is full, False otherwise (not reliable!)."""
        _, length, bound, _ = self._info()
        return 0 < bound <= length

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
        k = self._keys
        if self._run("set_bound", (k.base, k.bound, k.not_full), (bound,)) == _NO_QUEUE:
            raise self._missing()

    @property
    def exists(self) -> bool:
        """Whether the queue exists (protocol Exists)."""
        return bool(self._run("info", self._info_keys, (), mutating=False)[0])

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
        k = self._keys
        client = self._backend.client()
        pipe = client.pipeline(transaction=True)
        pipe.mget(k.bound, k.produced_messages, k.produced_bytes, k.consumed_messages,
                  k.consumed_bytes, k.tasks_done, k.discarded, k.producer, k.consumer)
        self._count_items(pipe)
        pipe.exists(k.closed)
        pipe.llen(k.dead)
        values, length, closed, dead = self._backend.call("statistics", pipe.execute)
        bound_raw, *counters, producer, consumer = values
        if bound_raw is None:
            raise self._missing(forget=False)
        names = (k.produced_messages, k.produced_bytes, k.consumed_messages, k.consumed_bytes,
                 k.tasks_done, k.discarded)
        for name, value in zip(names, counters):
            if value is not None and not value.lstrip(b"-").isdigit():
                raise ProtocolError(f"{name} holds {value!r}, not an integer")
        pm, pb, cm, cb, done, discarded = (int(v or 0) for v in counters)
        return QueueStatistics(
            name=self._name, size=length, maxsize=self._parse_bound(bound_raw), closed=bool(closed),
            produced_messages=pm, produced_bytes=pb, consumed_messages=cm, consumed_bytes=cb,
            discarded_messages=discarded, unfinished_tasks=max(pm - done, 0), dead_letters=dead,
            producer=None if producer is None else producer.decode(errors="replace"),
            consumer=None if consumer is None else consumer.decode(errors="replace"),
        )

    # -- task tracking ------------------------------------------------------------

    def task_done(self) -> None:
        """Indicate that a formerly enqueued task is complete.

        Used by queue consumer threads or processes, on any host. For each
        get() used to fetch a task, a subsequent call to task_done() tells the
        queue that the processing on the task is complete. If a join() is
        currently blocking, it will resume when all items have been processed.
        Raises a ValueError if called more times than there were items
        placed in the queue.

        In reliable mode it acknowledges this handle's oldest delivery, exactly once: if
        it raises (e.g. OutcomeUnknown after a lost reply), calling it again finishes
        that same delivery's count, never a second one.
        """
        if self._reliable and self._unacked:
            self._ack(self._unacked[0], task_done=True)  # acknowledges the oldest delivery
            return
        _, unfinished = self._backend.script(
            self._ack_command, (self._keys.inflight(self._consumer_id()), "-", "1"))
        if unfinished == -1:
            raise ValueError("task_done() called too many times")
        if unfinished == _NO_QUEUE:
            raise self._missing()

    @property
    def unfinished_tasks(self) -> int:
        """Items put (by any client) and not yet marked done."""
        unfinished, _ = self._run("join_check", self._task_keys, (), mutating=False)
        if unfinished == _NO_QUEUE:
            raise self._missing(forget=False)
        return int(unfinished)

    def join(self) -> None:
        """Blocks until all items in the queue have been gotten and processed.

        The count of unfinished tasks goes up whenever an item is added to the
        queue, by any client. The count goes down whenever a consumer calls
        task_done() to indicate that the item was retrieved and all work on it
        is complete. When the count of unfinished tasks drops to zero, join()
        unblocks.
        """
        backend = self._backend
        stream = self._keys.all_tasks_done
        while True:
            unfinished, last = self._run("join_check", self._task_keys, (), mutating=False)
            if unfinished == _NO_QUEUE:
                raise self._missing(forget=False)
            if unfinished <= 0:
                return
            backend.call("XREAD", backend.client().xread, {stream: last},
                         block=max(int(backend.slice * 1000), 1))

    # -- close, shutdown, delete ----------------------------------------------------

    def close(self) -> None:
        """Close the queue for every client (protocol Close): ``shutdown(immediate=False)``.

        Further puts raise ShutDown; consumers drain what is left (and what other
        consumers give back or leave at their death), then get raises ShutDown,
        and blocked consumers and producers wake. Closing a
        closed queue does nothing. Unlike multiprocessing.Queue.close(), this
        acts on the shared queue, not on this handle: see ``disconnect()``.
        """
        k = self._keys
        while True:
            result = self._backend.run(
                "close", (k.bound, k.producer_free, k.producer, k.closed, k.not_full,
                          k.consumer_free, k.waiter, k.lease),
                (self.client_id, k.inbox_prefix),
            )
            if result == _NO_QUEUE:
                raise self._missing()
            if result != _BUSY:
                return
            self._recover_spec_holder(k.producer_free, k.producer)
            self._wait_token(k.producer_free, self._backend.slice)

    def shutdown(self, immediate: bool = False) -> None:
        """Shut-down the queue, making queue gets and puts raise ShutDown.

        By default, gets will only raise once the queue is empty. Set
        'immediate' to True to make gets raise immediately instead, discarding
        what is queued (unfinished tasks drop by the number discarded).
        All blocked callers of put() and get() will be unblocked.
        """
        self.close()
        if not immediate:
            return
        k = self._keys
        keys = (k.base, k.bound, k.consumer_free, k.consumer, k.not_full, k.produced_messages,
                k.tasks_done, k.discarded, k.all_tasks_done)
        while True:
            result = self._run("drain", keys, (self.client_id,))
            if result == _NO_QUEUE:
                raise self._missing()
            if result != _BUSY:
                return
            self._recover_waiter()
            self._wait_token(k.consumer_free, self._backend.slice)

    def delete(self) -> None:
        """Delete the queue and every key it has (protocol Delete); unread items are lost.

        Blocked clients wake (producers and consumers raise QueueDoesNotExist);
        the keys go in one step once neither role is held.
        """
        k = self._keys
        first = (k.bound, k.not_full, k.closed, k.producer_free, k.consumer_free, k.waiter, k.lease,
                 k.consumers)
        keys = (*first, *(key for key in k.all_keys() if key not in first))
        result = self._run("delete", keys, ("begin", k.inbox_prefix, k.inflight_prefix, k.held_prefix,
                                            k.logs))
        if self._exit_delete is not None:
            self._exit_delete.cancel()
            self._exit_delete = None
        while True:
            if result == 1:
                return
            if result == _NO_QUEUE:
                raise self._missing()
            if result == -8:
                raise PressureError(f"queue {self._name!r} was created again while being deleted")
            if result == -10:
                self._recover_spec_holder(k.producer_free, k.producer)
                self._wait_token(k.producer_free, self._backend.slice)
            else:
                self._recover_waiter()
                self._wait_token(k.consumer_free, self._backend.slice)
            result = self._run("delete", keys, ("finish", k.inbox_prefix, k.inflight_prefix,
                                                k.held_prefix, k.logs))

    # -- iteration and resources ----------------------------------------------------

    def __iter__(self) -> Iterator[T]:
        """Yield items until the queue is closed and drained."""
        while True:
            try:
                yield self.get()
            except ShutDown:
                return

    def disconnect(self) -> None:
        """Close this handle's connections (the queue itself is untouched; never closes a
        ``connection`` passed in). The handle reconnects if used again."""
        self._backend.disconnect()

    def __enter__(self) -> Queue[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.disconnect()

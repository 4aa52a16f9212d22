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

A handle is made of parts with one idea each: ``_producer`` (put.lua, batches, waiting
for room), ``_consumer`` (get.lua's modes, waiting, cancelling), ``_roles`` (role tokens,
dead holders, the sweep), ``reliable`` (``Delivery`` and settling, task_done and join,
in_flight, dead letters, repair: a base class of ``Queue``), ``_inspect`` (peek, size,
bound, state and statistics: a base class too), ``_lifecycle`` (create-or-attach, close,
shutdown, delete, pickling and disconnecting: a base class too), ``_records`` (what the server
replies), ``_scripts`` (the lifecycle scripts' bindings) and ``_validate`` (argument checks). This module is the ``queue.Queue``-shaped surface over
them; ``LifoQueue`` and ``PriorityQueue`` (pressure/ordered.py) override its kind hooks
only. pressure's own layers (executor, Spark) drive a handle through ``_internal``.
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing.util
import numbers
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import redis
import redis.cluster

from . import serializers
from ._consumer import _Consumer
from ._inspect import Inspection
from ._lifecycle import _EXIT_PRIORITY, Lifecycle, _delete_at_exit
from ._producer import _Producer
from ._reading import peek_items, peek_read
from ._records import DeadLetter, InFlight, QueueStatistics, RepairReport
from ._scripts import ACK, FORGET, GET, PUT, PutStatus, QueueScript
from ._roles import _Roles
from ._validate import MAX_BOUND as MAX_BOUND  # the largest maxsize, importable from here too
from ._validate import _TIMEOUT_MESSAGE, Options, _count, _maxsize_value, _put_args, _timeout_value, _ttl_value
from .connection import Backend, ConnectionConfig
from .errors import Full, PressureError, QueueDoesNotExist, ShutDown
from .durability import Durability
from .keys import QueueKeys, resolve_prefix
from .signing import Authkey, payload_serializer, resolve_authkey
from .reliable import Delivery, Reliability

__all__ = ["Queue", "QueueStatistics", "Delivery", "InFlight", "DeadLetter", "RepairReport"]

T = TypeVar("T")


class Queue(Reliability[T], Inspection[T], Lifecycle[T]):
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
    ``create=False`` attaches only: a queue that does not exist raises
    ``QueueDoesNotExist`` at once (a consumer with a typo in its queue's name
    fails instead of waiting on a new, empty queue).
    """

    #: The kind of queue (its key layout and order): 'fifo', 'lifo' or 'priority'.
    _KIND = "fifo"
    #: Whether a stored item is the payload itself (else ``_unwrap`` finds it inside).
    _STORES_PAYLOADS = True

    def __init__(
        self,
        name: str | int | None = None,
        maxsize: int | None = None,
        *,
        url: str | None = None,
        connection: redis.Redis | redis.cluster.RedisCluster | None = None,
        prefix: str | None = None,
        serializer: str | serializers.Serializer = "pickle",
        client_id: str | None = None,
        reliable: bool = False,
        visibility_timeout: float = 30.0,
        lease: float = 10.0,
        max_deliveries: int | None = 10,
        authkey: Authkey | None = None,
        durability: Durability | None = None,
        create: bool = True,
        ttl: float | None = None,
        dead_letter_expired: bool = False,
        insecure_pickle: bool = False,
    ) -> None:
        if durability is not None and not isinstance(durability, Durability):
            raise TypeError(f"durability must be a pressure.Durability or None, not {type(durability).__name__}")
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
        options = dataclasses.replace(Options.of(reliable, visibility_timeout, lease, max_deliveries),
                                      durability=durability, dead_letter_expired=bool(dead_letter_expired),
                                      ttl=_ttl_value(ttl), insecure_pickle=bool(insecure_pickle))
        keys = resolve_authkey(authkey)
        self._setup(name, prefix, serializer, client_id, Backend(config, connection), options, keys)
        if create or anonymous:
            self._create(bound)
        else:
            self._attach(bound)
        if anonymous:
            # holds the configuration only, never this handle; runs in this process only
            self._exit_delete = multiprocessing.util.Finalize(
                None, _delete_at_exit, args=(type(self), {**self.__getstate__(), "signed": False}),
                exitpriority=_EXIT_PRIORITY)

    def _setup(self, name: str, prefix: str, serializer: str | serializers.Serializer,
               client_id: str | None, backend: Backend, options: Options,
               authkey: tuple[bytes, ...] = ()) -> None:
        self._options = options
        self._exit_delete = None
        self._name = name
        self._prefix = prefix
        self._serializer_spec = serializer
        self._authkey = authkey
        k = self._keys = QueueKeys.build(prefix, name, self._KIND)
        # before anything is sent: no unsigned pickle from another host unless asked for
        self._serializer = payload_serializer(serializers.resolve(serializer), authkey, k.base, backend.config,
                                              options.insecure_pickle, f"queue {name!r}")
        self._client_id = client_id
        # on a Redis Cluster: every command to the master of the queue's slot (ValueError now
        # if its keys would not share one: the name needs a hash tag, see pressure/cluster.py)
        backend.route(k.base, f"queue {name!r}")
        self._backend = backend
        self._variant = "" if self._KIND == "fifo" else "@" + self._KIND  # the scripts' names
        self._get_keys = GET.keys(k)
        # the hot paths send pre-encoded commands, built once per handle: see PackedScript
        self._put_command = PUT.command(k, variant=self._variant)
        self._get_command = GET.command(k, variant=self._variant)
        self._get_many_command = GET.command(k, variant=self._variant, more=1)  # ARGV[7]: how many
        self._ack_command = ACK.command(k, variant=self._variant)
        self._ack_sized_command = ACK.command(k, variant=self._variant, more=1)
        self._roles = _Roles(backend, k, name, options, self._run)
        self._producer: _Producer[T] = _Producer(self)
        self._consumer: _Consumer[T] = _Consumer(self)

    def _run(self, script: str, keys: tuple[str, ...] | list[str], args: tuple[Any, ...] | list[Any],
             *, mutating: bool = True) -> Any:
        """Run one of this kind of queue's scripts (see connection._script_source)."""
        return self._backend.run(script + self._variant, keys, args, mutating=mutating)

    def _call(self, script: QueueScript, *args: Any, mutating: bool = True) -> Any:
        """Run one of this kind of queue's scripts through its binding (pressure/_scripts.py),
        after what this thread posted (``_own_posted``): a handle sees its own effects."""
        self._own_posted()
        return script.run(self._backend, self._keys, self._variant, *args, mutating=mutating)

    def _own_posted(self) -> None:
        """Let the commands this thread posted (a default-mode get's drop of what it took,
        task_done()'s count or acknowledgement: ``Backend.post``) run before this handle's next
        step on another connection: their replies read (their checks see them), one round trip
        if any are unread, else nothing. Every script outside the hot path (``_call``) and each
        read of the handle that is not a script (statistics(), peek(), in_flight(), ...) come
        after it; the hot path's own commands go on this thread's connection, behind them."""
        self._backend.flush()

    # -- the kind of queue: FIFO here; LIFO and priority override (pressure/ordered.py) ---

    def _order_key(self, item: Any) -> bytes:
        """The order key sent with a put (see lua/items_zset.lua); FIFO has none."""
        return b""

    def _order_keys(self, items: list[T] | tuple[T, ...]) -> list[bytes] | None:
        """The order keys of several items, or None where the kind has none (put.lua then
        takes each item as its payload alone)."""
        return None

    def _unwrap(self, item: bytes) -> bytes:
        """The payload inside a stored item (FIFO stores the payload itself)."""
        return item

    def _peek_items(self, n: int) -> list[bytes]:
        """The next ``n`` stored items, next-out first."""
        client = self._backend.client()
        return peek_items(True, self._backend.call("LRANGE", client.execute_command,
                                                   *peek_read(True, self._keys.base, n)))

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

    def _missing(self, forget: bool = True) -> QueueDoesNotExist:
        """The error for a queue that is gone. Mutating calls (``forget``) first remove
        what pressure kept beside it, which a plain spec client's Delete leaves behind;
        inspection never changes anything. Best effort: the error is what matters."""
        if forget:
            k = self._keys
            try:
                self._call(FORGET, k.inbox_prefix, k.inflight_prefix, k.held_prefix, k.logs)
            except PressureError:
                pass
        return QueueDoesNotExist(f"queue {self._name!r} does not exist")

    def _raise_for(self, result: int) -> None:
        """Raise what a put.lua or get.lua result that ends the call means (closed, deleted,
        bad timeout: the same codes in both, PutStatus and GetStatus)."""
        if result == PutStatus.CLOSED:
            raise ShutDown(f"queue {self._name!r} is shut down")
        if result == PutStatus.NO_QUEUE:
            raise self._missing()
        if result == PutStatus.NEGATIVE:
            raise ValueError(_TIMEOUT_MESSAGE)

    # -- put ----------------------------------------------------------------------

    def put(self, item: T, block: bool = True, timeout: float | None = None, *,
            delay: float | None = None, ttl: float | None = None, ttr: float | None = None,
            key: str | None = None) -> None:
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

        ``delay`` (seconds): the item stays invisible until then, and then enters the queue
        in due order (docs: reliability.md, Task lifecycle). It counts against ``maxsize``
        meanwhile.
        ``ttl`` (seconds; default: the handle's ``ttl``): dropped if not taken by then (counted
        from when it is due). ``ttr`` (seconds): its visibility timeout once delivered, in
        place of the consumer's ``visibility_timeout``. ``key`` (utube; FIFO queues): items of
        one key are handed out one at a time, in order, each once the previous one is done.
        """
        delay_ms, meta = _put_args(self._KIND, self._options, delay, ttl, ttr, key)
        payload = self._producer.payload(item)
        wait = _timeout_value(timeout) if block else None
        negative = block and wait is not None and wait < 0
        self._consumer.retry_cancels()
        orders = self._order_keys([item])
        first = self._producer.wait_first(block, wait)
        began = time.monotonic() if first else 0.0
        result = self._producer.send([payload], 1, orders, negative, "0", delay_ms, meta, first)
        if result >= 0:
            return
        if first and wait is not None:
            wait = max(wait - (time.monotonic() - began), 0.0)
        self._producer.put_pending([payload], orders, negative, block, wait, result, delay_ms, meta)

    def put_many(self, items: Iterable[T], block: bool = True, timeout: float | None = None, *,
                 delay: float | None = None, ttl: float | None = None, ttr: float | None = None,
                 key: str | None = None) -> None:
        """Put several items into the queue, in order, many per round trip.

        Every item is serialized first: if one cannot be, SerializationError is raised and
        nothing is put (ItemTooLarge likewise for one larger than the server accepts). Then as
        many as the bound leaves room for go in at once (atomically: stats and tokens as for
        single puts), and the rest wait for room as ``put`` waits, 'block' and 'timeout'
        meaning what they mean there (the timeout covers the whole batch). If the queue stays
        full or is shut down before all are in, Full or ShutDown is raised with ``items_put``
        set to how many of the items (the first ones) went in. Other producers' items may come
        between the batch's round trips, never inside one; a round trip carries at most 1000
        items, and no more bytes than the server accepts for one item. ``delay`` delays every
        item as ``put`` does (same due time, in order); ``ttl``, ``ttr`` and ``key`` apply to each.
        """
        delay_ms, meta = _put_args(self._KIND, self._options, delay, ttl, ttr, key)
        items = items if isinstance(items, (list, tuple)) else list(items)
        payloads = self._producer.dumps_all(items)
        orders = self._order_keys(items)
        if not payloads:
            return
        self._backend.check_sizes(payloads)
        wait = _timeout_value(timeout) if block else None
        negative = block and wait is not None and wait < 0
        self._consumer.retry_cancels()
        total = len(payloads)
        try:
            self._producer.put_pending(payloads, orders, negative, block, wait, None, delay_ms, meta)
        except (Full, ShutDown) as exc:
            exc.items_put = total - len(payloads)
            raise

    def put_nowait(self, item: T, *, delay: float | None = None, ttl: float | None = None,
                   ttr: float | None = None, key: str | None = None) -> None:
        """Put an item into the queue without blocking.

        Only enqueue the item if a free slot is immediately available.
        Otherwise raise the Full exception. ``delay``, ``ttl``, ``ttr`` and ``key``: see ``put``.
        """
        self.put(item, block=False, delay=delay, ttl=ttl, ttr=ttr, key=key)

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
        if self._options.reliable:
            self._consumer.unacked.append(delivery)
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
        consumer = self._consumer
        if block:
            wait = _timeout_value(timeout)
            if wait is not None and wait < 0:
                consumer.refuse_negative_timeout()
        if self._options.reliable:
            self._settle_owed()
            got = consumer.many(max_items)
            if not got:
                got = [self.receive(block, timeout)]
                consumer.unacked.append(got[0])
                if max_items > 1:
                    got += self._more_after_first(consumer.many, max_items - 1) or []
            return [delivery.item for delivery in got]
        self._settle_owed()
        items = consumer.batch(max_items)
        if not items:
            # kept in flight until the batch is in hand (not natively: in the held list its batch uses)
            first = consumer.receive(block, timeout, native=False)
            items = [first.item]
            if max_items > 1:
                more = self._more_after_first(lambda n: consumer.batch(n, keep=True), max_items - 1)
                if more is None:
                    # what the lost reply took waits in our lists, with the first item, for our
                    # next get's cancel to sort out: dropping them now would lose it
                    consumer.owing.append(None)
                    return items
                items += more
        consumer.drop_received(consumer.id())
        consumer.owing.extend(itertools.repeat(None, len(items)))  # their task_done()s may post
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
        self._settle_owed()  # what the last task_done() posted, if its reply said so
        delivery = self._consumer.receive(block, timeout)
        if not self._options.reliable:
            self._consumer.drop_received(delivery.consumer)
            self._consumer.owing.append(None)  # its task_done() may post its count
        return delivery

    # -- iteration --------------------------------------------------------------------

    def __iter__(self) -> Iterator[T]:
        """Yield items until the queue is closed and drained."""
        while True:
            try:
                yield self.get()
            except ShutDown:
                return

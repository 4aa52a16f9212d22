"""The interface pressure's own layers use to drive a queue handle beyond its public API.

The executor and its workers (pressure/executor/), the Spark source and its log
(pressure/spark/) need a few things ``queue.Queue`` has no name for: a handle built from a
``ConnectionConfig`` (``attach``), deliveries taken many at a time without waiting, puts
sent as calls of a shared pipeline, every delivery of a consumer touched or settled in one
step. They use exactly these, through ``internal(queue)``, and never the handle's private
attributes, so that the queue's internals can change behind this one surface::

    from pressure._internal import attach, internal

    tasks = attach(Queue, name, config, prefix=prefix, reliable=True)
    link = internal(tasks)
    for delivery in link.receive_many(10):
        ...
    link.settle_all(link.consumer_id(), ack=True)

Nothing here is public API: it may change in any release, with its users.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, NoReturn, TypeVar

import redis

from . import serializers
from ._packing import Call
from ._producer import BATCH
from ._scripts import WAKE, GetStatus, PutStatus, WakeStatus
from ._validate import Options
from .connection import Backend, ConnectionConfig, PackedScript
from .queue import Queue
from .reliable import Delivery

__all__ = ["Internal", "attach", "internal"]

T = TypeVar("T")
Q = TypeVar("Q", bound=Queue[Any])


def attach(cls: type[Q], name: str, config: ConnectionConfig, *, prefix: str,
           serializer: str | serializers.Serializer = "pickle", create: bool = True,
           reliable: bool = False, visibility_timeout: float = 30.0,
           max_deliveries: int | None = 10, backend: Backend | None = None,
           authkey: tuple[bytes, ...] = (), insecure_pickle: bool = False) -> Q:
    """A handle of class ``cls`` from a ``ConnectionConfig`` (what a handle pickles as), for
    pressure's own processes (executor workers, Spark tasks). ``create=False`` attaches only:
    a queue that does not exist is never made, and using the handle raises QueueDoesNotExist.
    Handles given one ``backend`` share its connections, so their calls can share a pipeline.
    ``authkey``: the keys its payloads are signed and verified with (pressure/signing.py);
    without, a pickle handle on a server not on this host needs ``insecure_pickle``."""
    q = cls.__new__(cls)
    options = dataclasses.replace(Options.of(reliable, visibility_timeout, 10.0, max_deliveries),
                                  insecure_pickle=insecure_pickle)
    q._setup(name, prefix, serializer, None, backend or Backend(config), options, authkey)
    if create:
        q._create(None)
    return q


def internal(queue: Queue[T]) -> Internal[T]:
    """The internal interface of ``queue`` (one per handle)."""
    link: Internal[T] | None = queue.__dict__.get("_internal")
    if link is None:
        link = queue.__dict__["_internal"] = Internal(queue)
    return link


class Internal(Generic[T]):
    """What pressure's executor, workers and Spark source do with a queue handle beyond its
    public API. Get one with ``internal(queue)``."""

    def __init__(self, queue: Queue[T]) -> None:
        self._queue = queue

    # -- creating ---------------------------------------------------------------------

    def create(self, maxsize: int | None) -> None:
        """Create the queue with bound ``maxsize``, or check the stored bound (QueueExistsError)."""
        self._queue._create(maxsize)

    def create_call(self, maxsize: int | None = None) -> Call:
        """``create(maxsize)`` as a call for ``pipeline``: it shares a round trip with other
        commands; pass its reply to ``created``."""
        return self._queue._create_call(maxsize)

    def created(self, reply: Any, maxsize: int | None = None) -> int:
        """Check the reply of ``create_call``'s call, as ``create`` does (an error reply raised
        as the PressureError it means); a Delete running meanwhile: ``create`` (which waits).
        The queue's bound, as made or as found (``maxsize``, if given, or QueueExistsError)."""
        if isinstance(reply, redis.RedisError):
            self.raise_error(reply, "script create")
        bound = self._queue._created(reply, maxsize)
        return self._queue._create(maxsize) if bound is None else bound

    # -- consuming --------------------------------------------------------------------

    def consumer_id(self) -> str:
        """This handle's consumer in the calling thread: it names the in-flight list that holds
        what ``receive_many`` and ``receive`` return."""
        return self._queue._consumer.id()

    def receive_many(self, n: int, *, track: bool = True, share: int = 1) -> list[Delivery[T]]:
        """Up to ``n`` items (at most 1000) queued now, in one round trip (get.lua 'many'); []
        if there are none (or another consumer holds the role). Never waits. In reliable mode
        each stays in flight until settled; ``track=False`` leaves them out of the handle's
        task_done() line, for a reader that settles them all at once (``settle_all``, or a
        script of its own). In the default mode they are acknowledged at once. ``share`` k:
        no more than ceil(queued / k) of the items queued now (a consumer among k)."""
        consumer = self._queue._consumer
        got = consumer.many_after((), n, share)[1]
        if not track:
            consumer.unacked.clear()
        return got

    def receive_many_after(self, before: Sequence[Call], n: int,
                           share: int = 1) -> tuple[list[Any], list[Delivery[T]]]:
        """``receive_many(n, share=share)`` with the script calls ``before`` ahead of it, in the
        same round trip: (their replies, an error reply as the exception; the deliveries)."""
        return self._queue._consumer.many_after(before, n, share)

    def receive_ids(self, n: int) -> tuple[str, list[bytes], int]:
        """``receive_many(n, track=False)`` for a reader whose own script settles what it takes
        (QueueLog's log_append), on a reliable handle: (the consumer id, the delivery numbers,
        how many items it took from the queue). With serializer 'bytes' on a FIFO queue and no
        authkey no Delivery is made; otherwise an item whose signature is bad (or that does
        not load) is dead-lettered and left out of the numbers, and counted in the items
        taken: none taken means none were queued."""
        consumer = self._queue._consumer
        if consumer.plain:
            cid, ids = consumer.many_ids(n)
            return cid, ids, len(ids)
        cid, _, entries = consumer.queued_after((), "many", n)
        got = consumer.deliveries(cid, entries) if entries else []
        consumer.unacked.clear()  # settled by the reader's script, not by task_done()
        for delivery in got:
            consumer.forget(delivery, in_line=False)
        return cid, [d.id.encode() for d in got], len(entries)

    @property
    def signed(self) -> bool:
        """Whether the queue's items are signed (an authkey): each verified before it is used."""
        return bool(self._queue._authkey)

    def logged(self, n: int, group: str) -> tuple[int, int] | GetStatus:
        """Up to ``n`` items queued now straight into the log of ``group`` (QueueLog's), in one
        round trip: (the log's tail, how many), or GetStatus EMPTY / ENTRIES_WAITING (see
        ``_Consumer.logged``). Not on a signed queue."""
        return self._queue._consumer.logged(n, group)

    def receive(self, timeout: float | None, interrupt: Callable[[], bool]) -> Delivery[T]:
        """``queue.receive(timeout=timeout)``, except that the wait also ends (Empty) once
        ``interrupt()`` is true when it is woken: by ``wake_waiter`` (another process's), a
        slice's end, or the consumer role given back."""
        queue = self._queue
        delivery = queue._consumer.receive(True, timeout, interrupt)
        if not queue._options.reliable:
            queue._consumer.drop_received(delivery.consumer)
        return delivery

    def wake_waiter(self) -> bool:
        """Wake the consumer waiting on this queue now, if any (wake.lua, one round trip): its
        get looks again (and ends, if its ``interrupt`` says so). Whether one was woken."""
        queue = self._queue
        keys = queue._keys
        return bool(WAKE.call(queue._backend, WAKE.keys(keys), (keys.inbox_prefix,)) == WakeStatus.WOKEN)

    def forget(self, delivery: Delivery[T]) -> None:
        """``delivery`` was settled by a script of the caller's own (it leaves task_done()'s line)."""
        self._queue._consumer.forget(delivery)

    def bury(self, delivery: Delivery[T]) -> bool:
        """Move ``delivery`` straight to the dead-letter list (an item its reader cannot use)."""
        return self._queue._bury(delivery)

    def sweep_later(self) -> None:
        """The next get does not sweep (requeue expired deliveries, recover dead consumers on
        this host) as a handle's first get does: the caller sweeps (``sweep``) when it likes."""
        self._queue._roles.last_sweep = time.monotonic()

    def sweep(self) -> None:
        """Requeue deliveries whose visibility timeout or lease passed, and recover consumers
        on this host whose process is gone (what a get does once a second)."""
        self._queue._roles.sweep()

    def touch_all(self, cid: str) -> int:
        """Restart the visibility timeout of every delivery consumer ``cid`` holds (one step)."""
        return self._queue._touch(cid, "*")

    def settle_all(self, cid: str, ack: bool) -> int:
        """Acknowledge (``ack``) or give back every delivery consumer ``cid`` holds, in one step
        whatever their number. Returns how many were settled."""
        return self._queue._settle_all(cid, ack)

    def unwrap(self, stored: bytes) -> bytes:
        """The payload inside an item as the queue stores it."""
        return self._queue._unwrap(stored)

    # -- producing ----------------------------------------------------------------------

    def put_call(self, item: T) -> tuple[PackedScript, list[bytes | str]]:
        """A non-blocking put of ``item``, as a call for ``pipeline`` (its reply is put.lua's:
        the new length, or a negative status: -1 full and -2 busy, for ``put`` to do the
        patient way; -3 closed, -4 gone). SerializationError and ItemTooLarge are raised here."""
        return self._queue._producer.call(item)

    def payload(self, item: T) -> bytes:
        """``item`` as a put sends it (SerializationError, or ItemTooLarge, if it cannot go)."""
        return self._queue._producer.payload(item)

    def put_many_calls(self, items: Sequence[T], payloads: Sequence[bytes]) -> list[tuple[Call, int]]:
        """Non-blocking puts of ``items`` in order, serialized as ``payloads`` (``payload``),
        as calls for ``pipeline``, each with how many of the items it carries: one call, or
        more if they are too large for one command. Each reply is put.lua's: for one item
        the new length, for more ``[length, how many went in]`` (the first ones, as far as
        the bound leaves room); or a negative status, none in (as ``put_call``'s)."""
        producer, backend = self._queue._producer, self._queue._backend
        rest = list(payloads)
        orders = self._queue._order_keys(list(items))
        calls: list[tuple[Call, int]] = []
        while rest:
            count = backend.batch_count(rest, BATCH)
            calls.append((producer.many_call(rest[:count], orders[:count] if orders is not None else None),
                          count))
            del rest[:count]
            if orders is not None:
                del orders[:count]
        return calls

    @staticmethod
    def put_outcome(reply: Any, count: int) -> tuple[int, Any]:
        """What a reply of a ``put_many_calls`` call carrying ``count`` items says: how many
        of them went in (the first ones), and what stopped the rest: put.lua's status (an
        int: -1 full, -2 busy, -3 closed, -4 gone), or the error reply (a redis.RedisError);
        None if all went in."""
        if isinstance(reply, list):
            went = int(reply[1])
            return went, None if went >= count else int(PutStatus.FULL)
        if isinstance(reply, int):
            return (1, None) if reply >= 0 else (0, reply)
        return 0, reply

    # -- the connection -------------------------------------------------------------------

    def pipeline(self, calls: Sequence[Call], *, pooled: bool = False) -> list[Any]:
        """Send ``calls`` (of handles sharing this one's backend) in one round trip; their
        replies, an error as a ``redis.RedisError`` in its place (see ``raise_error``).
        ``pooled``: on a connection of the backend's pool, not one of the calling thread's
        own (a thread that sends once)."""
        return self._queue._backend.pipeline(calls, pooled=pooled)

    def raise_error(self, error: redis.RedisError, what: str) -> NoReturn:
        """Raise a pipeline reply's error as the PressureError it means."""
        self._queue._backend.raise_error(error, what, True)

    def run(self, script: str, keys: Sequence[str], args: Sequence[Any], *, mutating: bool = True) -> Any:
        """Run script ``script`` (pressure/lua/<script>.lua, the variant for this kind of queue)."""
        return self._queue._run(script, list(keys), list(args), mutating=mutating)

    def call(self, what: str, command: str, *args: Any, mutating: bool = False, **kwargs: Any) -> Any:
        """A redis-py client command (``command`` names its method), with the handle's error
        handling and retries (``mutating``: see ``Backend.call``)."""
        backend = self._queue._backend
        return backend.call(what, getattr(backend.client(), command), *args, mutating=mutating, **kwargs)

    def client(self) -> redis.Redis:
        """The handle's redis-py client (for commands pipelined on the caller's side)."""
        return self._queue._backend.client()

    def read(self, key: str) -> str | None:
        """A string key, decoded (a role holder's identifier)."""
        return self._queue._roles.read(key)

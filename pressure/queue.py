"""``pressure.Queue``: a pressure-protocol queue with the ``queue.Queue`` API.

Every step that holds a role token runs as one Lua script, so the non-blocking
path is one round trip and a token is never held across round trips, with one
exception that the protocol itself requires: a consumer blocked on an empty
queue holds the consumer role while it waits in ``BRPOP <list> <:closed>``.
Waiting otherwise happens outside scripts, in finite slices:

* a producer waiting for room pops ``:not_full`` as a wake-up and re-runs the
  put script, which decides from the length and the bound read there and
  then (so a lost wake-up only costs one slice, never the queue);
* a client waiting for a role held by someone else waits with
  ``BLMOVE x x RIGHT RIGHT``, which wakes when the token is back but leaves
  it in place, and then re-runs its script.

Timeline of a blocking get (the only cross-round-trip hold)::

    consumer A: get.lua -> -6 (queue empty, A now holds :consumer_free)
    consumer A: BRPOP list :closed 1.0 ...            (blocked, role held)
    producer P: put.lua -> LPUSH list                 (A's BRPOP answers)
    consumer A: get_finish.lua -> stats, :not_full, role given back

If A's wait ends any other way (timeout, error, interrupt) it gives the role
back in ``finally`` with release.lua, which acts only if A is still the holder.
"""

from __future__ import annotations

import math
import numbers
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis

from . import identity, serializers
from .connection import Backend, ConnectionConfig
from .errors import (
    BackendError,
    Empty,
    Full,
    PressureError,
    ProtocolError,
    QueueDoesNotExist,
    QueueExistsError,
    ShutDown,
)
from .keys import DEFAULT_PREFIX, QueueKeys

__all__ = ["Queue", "QueueStatistics"]

T = TypeVar("T")

_TIMEOUT_MESSAGE = "'timeout' must be a non-negative number"
#: How long create-or-attach waits for a Delete in progress to finish.
_CREATE_WAIT = 5.0
#: The shortest server-side wait: never let a small timeout round down to 0.
_MIN_WAIT = 0.005

# script results (see the headers in pressure/lua/)
_FULL, _BUSY, _CLOSED, _NO_QUEUE, _EMPTY, _HOLDING, _NEGATIVE = -1, -2, -3, -4, -5, -6, -7


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


def _maxsize_value(maxsize: Any) -> int:
    """Validate a maxsize the way queue.Queue reads it: <= 0 means unbounded."""
    if isinstance(maxsize, bool) or not isinstance(maxsize, numbers.Real):
        raise TypeError(f"maxsize must be an integer, not {type(maxsize).__name__}")
    if isinstance(maxsize, numbers.Integral):
        return max(int(maxsize), 0)
    value = float(maxsize)
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"maxsize must be an integer, not {maxsize!r}")
    return max(int(value), 0)


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
    (it pickles) to reach it from other processes.
    """

    def __init__(
        self,
        name: str | None = None,
        maxsize: int | None = None,
        *,
        url: str | None = None,
        connection: redis.Redis | None = None,
        prefix: str | None = None,
        serializer: str | serializers.Serializer = "pickle",
        client_id: str | None = None,
    ) -> None:
        if url is not None and connection is not None:
            raise ValueError("pass either url or connection, not both")
        if name is None:
            name = f"{{anon-{uuid.uuid4().hex}}}"
        elif not isinstance(name, str):
            raise TypeError(f"queue name must be a str, not {type(name).__name__}")
        elif not name:
            raise ValueError("queue name must not be empty")
        if prefix is None:
            prefix = os.environ.get("PRESSURE_PREFIX") or DEFAULT_PREFIX
        elif not isinstance(prefix, str) or not prefix:
            raise ValueError("prefix must be a non-empty string")
        if client_id is not None and (not isinstance(client_id, str) or not client_id):
            raise ValueError("client_id must be a non-empty string")
        bound = None if maxsize is None else _maxsize_value(maxsize)
        if connection is not None:
            config = ConnectionConfig.from_pool(connection.connection_pool)
        elif url is not None:
            config = ConnectionConfig.from_url(url)
        else:
            config = ConnectionConfig.from_environment()
        self._setup(name, prefix, serializer, client_id, Backend(config, connection))
        self._create(bound)

    def _setup(self, name: str, prefix: str, serializer: str | serializers.Serializer,
               client_id: str | None, backend: Backend) -> None:
        self._name = name
        self._prefix = prefix
        self._serializer_spec = serializer
        self._serializer = serializers.resolve(serializer)
        self._client_id = client_id
        self._backend = backend
        self._pending_release: list[tuple[str, str, str]] = []
        k = self._keys = QueueKeys.build(prefix, name)
        self._base_key = k.base.encode()
        self._put_keys = (k.base, k.bound, k.producer_free, k.producer, k.closed, k.not_full,
                          k.produced_messages, k.produced_bytes)
        self._get_keys = (k.base, k.bound, k.consumer_free, k.consumer, k.closed, k.not_full,
                          k.consumed_messages, k.consumed_bytes)
        self._info_keys = (k.base, k.bound, k.closed)
        self._task_keys = (k.bound, k.produced_messages, k.tasks_done, k.all_tasks_done)

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
        return self._client_id or identity.client_id()

    @property
    def url(self) -> str:
        """The Redis server, as a URL without the password."""
        return self._backend.config.url

    def __repr__(self) -> str:
        return f"<pressure.Queue name={self._name!r} prefix={self._prefix!r} url={self.url!r}>"

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
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["name"], state["prefix"], state["serializer"], state["client_id"],
                    Backend(state["config"]))

    # -- create-or-attach -----------------------------------------------------------

    def _create(self, maxsize: int | None) -> None:
        k = self._keys
        deadline = time.monotonic() + _CREATE_WAIT
        while True:
            status, stored = self._backend.run(
                "create", (k.bound, k.producer_free, k.consumer_free, k.not_full, k.closed),
                (0 if maxsize is None else maxsize,),
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
        try:
            bound = int(raw)
        except (TypeError, ValueError):
            bound = -1
        if bound < 0:
            raise ProtocolError(f"{self._keys.bound} holds {raw!r}, not a non-negative integer")
        return bound

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
        wait = _timeout_value(timeout) if block else None
        negative = block and wait is not None and wait < 0
        backend = self._backend
        if self._pending_release:
            self._retry_releases()
        args = [self.client_id, payload, "1" if negative else "0", "0"]
        result = backend.run("put", self._put_keys, args)
        if result > 0:
            return
        now = time.monotonic()
        if not block:
            deadline = now
        elif wait is None:
            deadline = math.inf
        else:
            deadline = now + max(wait, 0.0)
        # a role held by another client is waited for like a mutex, even by put_nowait
        busy_deadline = max(deadline, now + backend.slice)
        client = backend.client()
        while True:
            if result == _CLOSED:
                raise ShutDown(f"queue {self._name!r} is shut down")
            if result == _NO_QUEUE:
                raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
            if result == _NEGATIVE:
                raise ValueError(_TIMEOUT_MESSAGE)
            now = time.monotonic()
            if result == _FULL:
                if now >= deadline:
                    raise Full(f"queue {self._name!r} is full")
                took = backend.call(
                    "BRPOP :not_full", client.brpop, [self._keys.not_full],
                    timeout=max(min(backend.slice, deadline - now), _MIN_WAIT),
                )  # not "mutating": nothing of ours is lost if this reply is
                args[3] = "1" if took else "0"
            elif result == _BUSY:
                if now >= busy_deadline:
                    holder = self._read(self._keys.producer)
                    raise Full(f"queue {self._name!r}: the producer role is held by {holder}")
                self._wait_token(self._keys.producer_free, busy_deadline - now)
                args[3] = "0"
            else:
                raise ProtocolError(f"put script returned {result!r}")
            args[0] = self.client_id
            result = backend.run("put", self._put_keys, args)
            if result > 0:
                return

    def put_nowait(self, item: T) -> None:
        """Put an item into the queue without blocking.

        Only enqueue the item if a free slot is immediately available.
        Otherwise raise the Full exception.
        """
        self.put(item, block=False)

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
        is empty. A payload that cannot be deserialized raises
        DeserializationError carrying the raw bytes.
        """
        payload = self._get_payload(block, timeout)
        return serializers.loads(self._serializer, payload)  # type: ignore[no-any-return]

    def get_nowait(self) -> T:
        """Remove and return an item from the queue without blocking.

        Only get an item if one is immediately available. Otherwise
        raise the Empty exception.
        """
        return self.get(block=False)

    def _get_payload(self, block: bool, timeout: Any) -> bytes:
        wait = _timeout_value(timeout) if block else None
        negative = block and wait is not None and wait < 0
        backend = self._backend
        if self._pending_release:
            self._retry_releases()
        cid = self.client_id
        args = (cid, "1" if block else "0", "1" if negative else "0")
        result = backend.run("get", self._get_keys, args)
        if isinstance(result, bytes):
            return result
        now = time.monotonic()
        if not block:
            deadline = now
        elif wait is None:
            deadline = math.inf
        else:
            deadline = now + max(wait, 0.0)
        busy_deadline = max(deadline, now + backend.slice)
        while True:
            if result == _HOLDING:
                return self._wait_item(cid, deadline)
            if result == _CLOSED:
                raise ShutDown(f"queue {self._name!r} is shut down")
            if result == _NO_QUEUE:
                raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
            if result == _NEGATIVE:
                raise ValueError(_TIMEOUT_MESSAGE)
            now = time.monotonic()
            if result == _EMPTY:
                raise Empty(f"queue {self._name!r} is empty")
            if result != _BUSY:
                raise ProtocolError(f"get script returned {result!r}")
            if now >= busy_deadline:
                raise Empty(f"queue {self._name!r}: the consumer role is held by "
                            f"{self._read(self._keys.consumer)}")
            self._wait_token(self._keys.consumer_free, busy_deadline - now)
            cid = self.client_id
            result = backend.run("get", self._get_keys, (cid, args[1], args[2]))
            if isinstance(result, bytes):
                return result

    def _wait_item(self, cid: str, deadline: float) -> bytes:
        """Wait in BRPOP <list> <:closed> while holding the consumer role."""
        backend = self._backend
        client = backend.client()
        wait_keys = [self._keys.base, self._keys.closed]
        finished = False
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Empty(f"queue {self._name!r} is empty")
                reply = backend.call(
                    "BRPOP queue", client.brpop, wait_keys,
                    timeout=max(min(backend.slice, remaining), _MIN_WAIT), mutating=True,
                )
                if reply is None:
                    continue
                key, value = reply
                if key == self._base_key:
                    backend.run("get_finish", self._get_keys, (cid, "item", len(value)))
                    finished = True
                    return value  # type: ignore[no-any-return]
                result = backend.run("get_finish", self._get_keys, (cid, "closed", 0))
                finished = True
                if result == _NO_QUEUE:
                    raise QueueDoesNotExist(f"queue {self._name!r} was deleted")
                raise ShutDown(f"queue {self._name!r} is shut down")
        finally:
            if not finished:
                self._release(self._keys.consumer_free, self._keys.consumer, cid)

    # -- role tokens --------------------------------------------------------------

    def _wait_token(self, free_key: str, limit: float) -> None:
        """Wait until a role token is back, without taking it (BLMOVE x x RIGHT RIGHT)."""
        backend = self._backend
        backend.call(
            "BLMOVE role token", backend.client().blmove, free_key, free_key,
            max(min(backend.slice, limit), _MIN_WAIT), "RIGHT", "RIGHT",
        )

    def _release(self, free_key: str, role_key: str, cid: str) -> None:
        """Give back a role token we hold; if Redis is unreachable, retry on the next call."""
        try:
            self._backend.run("release", (free_key, role_key), (cid,))
        except BackendError:
            self._pending_release.append((free_key, role_key, cid))
            raise

    def _retry_releases(self) -> None:
        while self._pending_release:
            free_key, role_key, cid = self._pending_release[0]
            self._backend.run("release", (free_key, role_key), (cid,))
            self._pending_release.pop(0)

    def _read(self, key: str) -> str | None:
        value = self._backend.call("GET", self._backend.client().get, key)
        return None if value is None else value.decode(errors="replace")

    # -- size and state -----------------------------------------------------------

    def _info(self) -> tuple[int, int, int, bool]:
        exists, length, bound, closed = self._backend.run("info", self._info_keys, (), mutating=False)
        if not exists:
            raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
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
        if self._backend.run("set_bound", (k.base, k.bound, k.not_full), (bound,)) == _NO_QUEUE:
            raise QueueDoesNotExist(f"queue {self._name!r} does not exist")

    @property
    def exists(self) -> bool:
        """Whether the queue exists (protocol Exists)."""
        return bool(self._backend.run("info", self._info_keys, (), mutating=False)[0])

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
        pipe.llen(k.base)
        pipe.exists(k.closed)
        values, length, closed = self._backend.call("statistics", pipe.execute)
        bound_raw, *counters, producer, consumer = values
        if bound_raw is None:
            raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
        pm, pb, cm, cb, done, discarded = (int(v or 0) for v in counters)
        return QueueStatistics(
            name=self._name, size=length, maxsize=self._parse_bound(bound_raw), closed=bool(closed),
            produced_messages=pm, produced_bytes=pb, consumed_messages=cm, consumed_bytes=cb,
            discarded_messages=discarded, unfinished_tasks=max(pm - done, 0),
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
        """
        result = self._backend.run("task_done", self._task_keys, ())
        if result == -1:
            raise ValueError("task_done() called too many times")
        if result == _NO_QUEUE:
            raise QueueDoesNotExist(f"queue {self._name!r} does not exist")

    @property
    def unfinished_tasks(self) -> int:
        """Items put (by any client) and not yet marked done."""
        unfinished, _ = self._backend.run("join_check", self._task_keys, (), mutating=False)
        if unfinished == _NO_QUEUE:
            raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
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
            unfinished, last = backend.run("join_check", self._task_keys, (), mutating=False)
            if unfinished == _NO_QUEUE:
                raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
            if unfinished <= 0:
                return
            backend.call("XREAD", backend.client().xread, {stream: last},
                         block=max(int(backend.slice * 1000), 1))

    # -- close, shutdown, delete ----------------------------------------------------

    def close(self) -> None:
        """Close the queue for every client (protocol Close): ``shutdown(immediate=False)``.

        Further puts raise ShutDown; consumers drain what is left, then get
        raises ShutDown, and blocked consumers and producers wake. Closing a
        closed queue does nothing. Unlike multiprocessing.Queue.close(), this
        acts on the shared queue, not on this handle: see ``disconnect()``.
        """
        k = self._keys
        while True:
            result = self._backend.run(
                "close", (k.bound, k.producer_free, k.producer, k.closed, k.not_full),
                (self.client_id,),
            )
            if result == _NO_QUEUE:
                raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
            if result != _BUSY:
                return
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
            result = self._backend.run("drain", keys, (self.client_id,))
            if result == _NO_QUEUE:
                raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
            if result != _BUSY:
                return
            self._wait_token(k.consumer_free, self._backend.slice)

    def delete(self) -> None:
        """Delete the queue and every key it has (protocol Delete); unread items are lost.

        Blocked clients wake (producers and consumers raise QueueDoesNotExist);
        the keys go in one step once neither role is held.
        """
        k = self._keys
        rest = tuple(key for key in k.all_keys()
                     if key not in (k.bound, k.not_full, k.closed, k.producer_free, k.consumer_free))
        keys = (k.bound, k.not_full, k.closed, k.producer_free, k.consumer_free, *rest)
        result = self._backend.run("delete", keys, ("begin",))
        while True:
            if result == 1:
                return
            if result == _NO_QUEUE:
                raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
            if result == -8:
                raise PressureError(f"queue {self._name!r} was created again while being deleted")
            waiting = k.producer_free if result == -10 else k.consumer_free
            self._wait_token(waiting, self._backend.slice)
            result = self._backend.run("delete", keys, ("finish",))

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

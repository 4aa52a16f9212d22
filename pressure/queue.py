"""``pressure.Queue``: a pressure-protocol queue with the ``queue.Queue`` API.

Every step that holds a role token runs as one Lua script, so the non-blocking
path is one round trip and a token is never held across round trips, with one
exception that the protocol itself requires: a consumer waiting on an empty
queue holds the consumer role. Waiting happens outside scripts, in finite
slices (a server-side timeout of 0 would mean forever):

* a blocking get sends get.lua and ``BRPOP <inbox> <signal>`` in one pipeline.
  If an item is there, the script moves it to the caller's private inbox and
  the BRPOP returns it at once: one round trip. If the queue is empty, the
  script registers the caller as the waiter (it now holds the consumer role)
  and the BRPOP waits; the next put.lua hands its item straight to the
  waiter's inbox and does the consumer's bookkeeping (stats, role given back),
  so the waiter needs no further round trip. Close and delete wake the waiter
  through its signal list;
* a producer waiting for room pops ``:not_full`` as a wake-up and re-runs
  put.lua, which decides from the length and the bound read there and then
  (so a lost wake-up costs one slice, never the queue);
* a client waiting for a role held by someone else waits with
  ``BLMOVE x x RIGHT RIGHT``, which wakes when the token is back but leaves
  it in place, then re-runs its script.

Timeline of a blocking get on an empty queue::

    consumer A: [get.lua -> -6 (A is the waiter, holds :consumer_free),
                 BRPOP inbox:A signal:A 1.0 ...]             one round trip
    producer P: put.lua -> LPUSH inbox:A item, stats, role back, waiter gone
    consumer A: BRPOP answers with the item

If A's wait ends any other way (deadline, error, interrupt), get.lua 'cancel'
unregisters A and gives the role back, and only if A is still the waiter; an
item delivered in that instant stays in A's inbox and A's next get returns it.
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

from . import serializers
from .connection import Backend, ConnectionConfig, PackedScript
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
_DELIVERED, _FULL, _BUSY, _CLOSED, _NO_QUEUE, _EMPTY, _WAITING, _NEGATIVE = 1, -1, -2, -3, -4, -5, -6, -7


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
        self._pending_cancel: list[str] = []
        k = self._keys = QueueKeys.build(prefix, name)
        self._put_keys = (k.base, k.bound, k.producer_free, k.producer, k.closed, k.not_full,
                          k.produced_messages, k.produced_bytes, k.consumer_free,
                          k.consumed_messages, k.consumed_bytes, k.waiter)
        self._get_keys = (k.base, k.bound, k.consumer_free, k.consumer, k.closed, k.not_full,
                          k.consumed_messages, k.consumed_bytes, k.waiter)
        self._info_keys = (k.base, k.bound, k.closed)
        # the hot paths send pre-encoded commands: see PackedScript
        self._put_command = PackedScript("put", self._put_keys, 0, 5)
        self._get_command = PackedScript("get", self._get_keys, 2, 3)
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
        return self._client_id or self._backend.thread_client_id()

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

    def _raise_for(self, result: int) -> None:
        """Raise what a script result that ends the call means (closed, deleted, bad timeout)."""
        if result == _CLOSED:
            raise ShutDown(f"queue {self._name!r} is shut down")
        if result == _NO_QUEUE:
            raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
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
        wait = _timeout_value(timeout) if block else None
        negative = block and wait is not None and wait < 0
        backend = self._backend
        if self._pending_cancel:
            self._retry_cancels()
        args: list[bytes | str] = [self.client_id, payload, "1" if negative else "0", "0",
                                   self._keys.inbox_prefix]
        result = backend.script(self._put_command, args)
        if result >= 0:
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
            self._raise_for(result)
            now = time.monotonic()
            if result == _FULL:
                if now >= deadline:
                    raise Full(f"queue {self._name!r} is full")
                took = backend.call(
                    "BRPOP :not_full", client.brpop, [self._keys.not_full],
                    timeout=max(min(backend.slice, deadline - now), _MIN_WAIT),
                )  # a lost reply costs a wake-up, never an item or a token: not "mutating"
                args[3] = "1" if took else "0"
            elif result == _BUSY:
                if now >= busy_deadline:
                    holder = self._read(self._keys.producer)
                    raise Full(f"queue {self._name!r}: the producer role is held by {holder}")
                self._wait_token(self._keys.producer_free, busy_deadline - now)
                args[3] = "0"
            else:
                raise ProtocolError(f"put script returned {result!r}")
            result = backend.script(self._put_command, args)
            if result >= 0:
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
        if self._pending_cancel:
            self._retry_cancels()
        if not block:
            return self._get_nowait()
        now = time.monotonic()
        deadline = math.inf if wait is None else now + max(wait, 0.0)
        busy_deadline = max(deadline, now + self._backend.slice)
        cid = self.client_id
        wait_keys = (self._keys.inbox(cid), self._keys.signal(cid))
        inbox = wait_keys[0].encode()
        backend = self._backend
        command = self._get_command
        tail = (*wait_keys, cid, "block", "1" if wait is not None and wait < 0 else "0")
        maybe_waiting = True  # we may hold the consumer role as the registered waiter
        try:
            status, reply = backend.script_then_brpop(
                command, tail, wait_keys, _wait_time(backend.slice, deadline))
            while True:
                if reply is not None and reply[0] == inbox:
                    maybe_waiting = False  # a delivery ends the wait (put.lua unregistered us)
                    return reply[1]  # type: ignore[no-any-return]
                if isinstance(status, redis.RedisError):
                    if not isinstance(status, redis.exceptions.NoScriptError):
                        backend.raise_error(status, "script get", True)
                elif status == _WAITING:
                    if reply is None and time.monotonic() >= deadline:
                        return self._cancel_wait(cid)
                    # woken by a signal (close, delete) or a slice ended: look again
                else:
                    maybe_waiting = False
                    self._raise_for(status)
                    if status == _BUSY:
                        now = time.monotonic()
                        if now >= busy_deadline:
                            raise Empty(f"queue {self._name!r} is empty")
                        self._wait_token(self._keys.consumer_free, busy_deadline - now)
                    elif status != _DELIVERED:
                        raise ProtocolError(f"get script returned {status!r}")
                maybe_waiting = True
                status, reply = backend.script_then_brpop(
                    command, (*wait_keys, cid, "block", "0"), wait_keys,
                    _wait_time(backend.slice, deadline))
        except BaseException:
            if maybe_waiting:
                self._cancel_after_error(cid)
            raise

    def _get_nowait(self) -> bytes:
        cid = self.client_id
        tail = (self._keys.inbox(cid), self._keys.signal(cid), cid, "nowait", "0")
        backend = self._backend
        busy_deadline = time.monotonic() + backend.slice
        while True:
            result = backend.script(self._get_command, tail)
            if isinstance(result, bytes):
                return result
            self._raise_for(result)
            if result == _EMPTY:
                raise Empty(f"queue {self._name!r} is empty")
            if result != _BUSY:
                raise ProtocolError(f"get script returned {result!r}")
            # another consumer is mid-step while items wait: wait for it like a mutex
            now = time.monotonic()
            if now >= busy_deadline:
                raise Empty(f"queue {self._name!r}: the consumer role is held by "
                            f"{self._read(self._keys.consumer)}")
            self._wait_token(self._keys.consumer_free, busy_deadline - now)

    def _cancel(self, cid: str) -> Any:
        tail = (self._keys.inbox(cid), self._keys.signal(cid), cid, "cancel", "0")
        return self._backend.script(self._get_command, tail)

    def _cancel_wait(self, cid: str) -> bytes:
        """The deadline passed while waiting: stop waiting; take an item delivered meanwhile."""
        if self._cancel(cid) == _DELIVERED:
            item = self._backend.call("RPOP inbox", self._backend.client().rpop,
                                      self._keys.inbox(cid), mutating=True)
            if item is not None:
                return item  # type: ignore[no-any-return]
        raise Empty(f"queue {self._name!r} is empty")

    def _cancel_after_error(self, cid: str) -> None:
        """Give the consumer role back after a failed wait; if Redis is unreachable, on the next call.

        An item delivered meanwhile stays in this client's inbox: its next get returns it.
        """
        try:
            self._cancel(cid)
        except BackendError:
            self._pending_cancel.append(cid)

    def _retry_cancels(self) -> None:
        while self._pending_cancel:
            self._cancel(self._pending_cancel[0])
            self._pending_cancel.pop(0)

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
                "close", (k.bound, k.producer_free, k.producer, k.closed, k.not_full,
                          k.consumer_free, k.waiter),
                (self.client_id, k.signal_prefix),
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
        first = (k.bound, k.not_full, k.closed, k.producer_free, k.consumer_free, k.waiter)
        keys = (*first, *(key for key in k.all_keys() if key not in first))
        result = self._backend.run("delete", keys, ("begin", k.signal_prefix))
        while True:
            if result == 1:
                return
            if result == _NO_QUEUE:
                raise QueueDoesNotExist(f"queue {self._name!r} does not exist")
            if result == -8:
                raise PressureError(f"queue {self._name!r} was created again while being deleted")
            waiting = k.producer_free if result == -10 else k.consumer_free
            self._wait_token(waiting, self._backend.slice)
            result = self._backend.run("delete", keys, ("finish", k.signal_prefix))

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

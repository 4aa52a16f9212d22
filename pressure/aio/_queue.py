"""``AsyncQueue``: a pressure queue for asyncio, on ``redis.asyncio``, with the sync handle's
scripts and keys (so sync and async clients share one queue).

What is re-implemented here rather than reused, and why: the sync consumer and producer
(pressure/_consumer.py, pressure/_producer.py) are written around blocking calls on a
per-thread connection, so their loops (the blocking get's pipeline of get.lua, BLMOVE and
'woken'; put.lua's retries while full or busy) are mirrored here with ``await``, step for
step, with the same scripts, arguments and status codes (the get side in _getting.py, the
put side in _putting.py: base classes of ``AsyncQueue``). What involves no waiting on the
hot path is reused as it is: the script sources and SHA1s, ``PackedScript``, ``QueueKeys``,
the serializers and signing, the entry parsers (``_records``) and, through a thread
(``asyncio.to_thread``), the rare recovery steps of ``_roles._Roles`` (the sweep, dead
holders, waiting for a role token held by another client).

One consumer per handle: a handle's gets are served one at a time (an ``asyncio.Lock``,
first come first served), each through the handle's own consumer lists and its own
connection, as one thread's gets are in the sync client. Concurrent gets on one handle wait
for each other in the process rather than contending for the consumer role in Redis (only
one consumer can be the registered waiter anyway); use several handles for several
consumers.

Cancellation: a get cancelled at any point (``task.cancel()``, ``asyncio.timeout``,
``asyncio.wait_for``) loses nothing and leaves no waiter behind. Its exchange with the
server is never interrupted halfway (see _link.py); a clean-up task, holding the handle's
consumer lock, unblocks the BLMOVE (``CLIENT UNBLOCK``), lets the exchange end, and runs
get.lua 'cancel', which unregisters the waiter and returns what the handle never received
to its inbox, where its next get takes it first.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import redis

from .. import identity, serializers
from .._records import _BUSY, _CLOSED, _NEGATIVE, _NO_QUEUE
from .._scripts import ACK, CLOSE, CREATE, DRAIN, FORGET, GET, INFO, JOIN_CHECK, PUT, QueueScript
from .._roles import CONSUMER, PRODUCER, _Roles
from .._validate import _TIMEOUT_MESSAGE, Options, _count, _maxsize_value, _timeout_value
from .._consumer_state import OWING_MOST
from .._departure import Departure
from ..connection import Backend, ConnectionConfig, _script_sha, pack_command
from ..reliable import _posted_count_check
from ..errors import (
    PressureError,
    ProtocolError,
    QueueDoesNotExist,
    QueueExistsError,
    ShutDown,
)
from ..keys import QueueKeys, resolve_prefix
from ..ordering import order_key
from ..signing import Authkey, payload_serializer, recorded_name, resolve_authkey
from ._getconn import _Conn
from ._getting import _Getting
from ._link import _Link, config_of_client
from ._putting import _Putting
from ._reliable import AsyncDelivery, _Settling

T = TypeVar("T")

#: How long to wait to create a queue that is being deleted.
_CREATE_WAIT = 5.0


class AsyncQueue(_Getting[T], _Settling[T], _Putting[T]):
    """A FIFO pressure queue for asyncio: ``pressure.Queue``'s keys, scripts and semantics
    (the default mode, or ``reliable=True``), ``asyncio.Queue``'s names.

    ``AsyncQueue(name, maxsize)`` makes the handle without touching the server; the queue is
    created (or attached to) by ``async with``, by ``await q.open()``, or by the first
    call that needs it. Calls that ask the server are coroutines, including those that are
    plain methods on ``asyncio.Queue`` (``qsize``, ``empty``, ``full``, ``put_nowait``,
    ``get_nowait``, ``task_done``): each is a round trip.
    """

    #: The kind of queue (its key layout and order): 'fifo', 'lifo' or 'priority'.
    _KIND = "fifo"

    def __init__(
        self,
        name: str,
        maxsize: int | None = None,
        *,
        url: str | None = None,
        connection: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster | None = None,
        prefix: str | None = None,
        serializer: str | serializers.Serializer = "pickle",
        client_id: str | None = None,
        reliable: bool = False,
        visibility_timeout: float = 30.0,
        lease: float = 10.0,
        max_deliveries: int | None = 10,
        authkey: Authkey | None = None,
        insecure_pickle: bool = False,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"queue name must be a str, not {type(name).__name__}")
        if not name:
            raise ValueError("queue name must not be empty")
        if prefix is None:
            prefix = resolve_prefix(None)
        elif not isinstance(prefix, str) or not prefix:
            raise ValueError("prefix must be a non-empty string")
        if client_id is not None and (not isinstance(client_id, str) or not client_id):
            raise ValueError("client_id must be a non-empty string")
        if url is not None and connection is not None:
            raise ValueError("pass either url or connection, not both")
        self._bound = None if maxsize is None else _maxsize_value(maxsize)
        config = config_of_client(connection) if connection is not None else ConnectionConfig.resolve(url)
        self._link = _Link(config, connection)
        self._name, self._prefix = name, prefix
        self._options = dataclasses.replace(Options.of(reliable, visibility_timeout, lease, max_deliveries),
                                            insecure_pickle=bool(insecure_pickle))
        keys = resolve_authkey(authkey)
        k = self._keys = QueueKeys.build(prefix, name, self._KIND)
        # before anything is sent: no unsigned pickle from another host unless asked for
        self._serializer = payload_serializer(serializers.resolve(serializer), keys, k.base, config,
                                              self._options.insecure_pickle, f"queue {name!r}")
        self._client_id = client_id or identity.client_id()
        self._cid = f"{self._client_id}#{uuid.uuid4().hex[:8]}"
        self._variant = "" if self._KIND == "fifo" else "@" + self._KIND
        self._get_keys = GET.keys(k)
        self._put_command = PUT.command(k, variant=self._variant)
        self._get_command = GET.command(k, variant=self._variant)
        self._get_many_command = GET.command(k, variant=self._variant, more=1)  # ARGV[7]: how many
        # on a Redis Cluster: every command to the master of the queue's slot (ValueError now
        # if the name has no hash tag, as for the sync handles)
        self._link.route(k.base, f"queue {name!r}")
        sync = Backend(config)  # the rare recovery steps, in a thread (see the module's docstring)
        sync.route(k.base, f"queue {name!r}")
        self._roles = _Roles(sync, k, name, self._options,
                             lambda script, keys, args, mutating=True: sync.run(
                                 script + self._variant, keys, args, mutating=mutating))
        host, pid, start = identity.process_record()
        mode = "r" if self._options.reliable else "d"
        self._record = f"{host}|{pid}|{start}|{self._options.visibility_ms}|{mode}"
        self._opened = False
        self._lock = asyncio.Lock()  # the handle's gets, one at a time
        self._conn = _Conn(self._link, self._variant)
        #: whether the consumer may be the registered waiter or hold entries it never received
        self._dirty = False
        self._owes_cancel = False
        #: this handle's consumer, and its leave (disconnect, collection, exit)
        self._departure = Departure(sync, k, self._variant, self._options)
        self._received = []
        self._waited = True
        #: reliable mode: the deliveries of get()/get_many() not acknowledged, oldest first
        #: (task_done acknowledges the first); and every delivery held, receive()'s included
        self._unacked: collections.deque[AsyncDelivery[T]] = collections.deque()
        self._holding: dict[str, AsyncDelivery[T]] = {}
        self._settle_lock = asyncio.Lock()
        #: posted acknowledgements (reliable) whose reply is unread; those owed again
        self._posted: collections.deque[AsyncDelivery[T]] = collections.deque()
        self._owed: list[AsyncDelivery[T]] = []
        self._departure.acknowledged += [self._posted, self._owed]  # its leave acknowledges them
        #: the errors posted calls answered, for the next call to raise (None: queue gone)
        self._ack_errors: list[Exception | None] = []
        #: default mode: a token per item get()/get_many() returned (its task_done() may post
        #: its count, as the sync handle's: _ConsumerState.owing); posted counts whose reply is
        #: unread; and those that did not run (counted again, waiting, by the next call)
        self._owing: collections.deque[None] = collections.deque(maxlen=OWING_MOST)
        self._counting: collections.deque[None] = collections.deque()
        self._counts_owed: collections.deque[None] = collections.deque()

    # -- the kind of queue: FIFO here; LIFO and priority override ----------------------

    def _order_key(self, item: Any) -> bytes:
        return b""

    def _unwrap(self, item: bytes) -> bytes:
        return item

    # -- identity ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The queue's protocol name."""
        return self._name

    @property
    def prefix(self) -> str:
        """The key prefix."""
        return self._prefix

    @property
    def keys(self) -> QueueKeys:
        """The Redis key names of this queue (the same as a sync handle's)."""
        return self._keys

    @property
    def client_id(self) -> str:
        """The identifier this handle writes to ``:producer``/``:consumer``."""
        return self._client_id

    def __repr__(self) -> str:
        return (f"<pressure.aio.{type(self).__name__} name={self._name!r} prefix={self._prefix!r} "
                f"url={self._link.config.url!r}>")

    # -- scripts ----------------------------------------------------------------------

    async def _run(self, script: str, keys: tuple[str, ...] | list[str], args: tuple[Any, ...] | list[Any],
                   *, mutating: bool = True) -> Any:
        await self.open()
        return await self._link.run(script + self._variant, keys, args, mutating=mutating)

    async def _call(self, script: QueueScript, *args: Any, call_keys: tuple[str, ...] = (),
                    mutating: bool = True) -> Any:
        """Run one of this kind of queue's scripts through its binding (pressure/_scripts.py),
        as ``pressure.Queue._call`` does: its fixed KEYS from the queue's keys, then
        ``call_keys``; ``args`` in the order of its ARGV (checked)."""
        if len(call_keys) != len(script.call_keys):
            raise TypeError(f"script {script.name} takes {len(script.call_keys)} keys per call, "
                            f"not {len(call_keys)}")
        return await self._run(script.name, (*script.keys(self._keys), *call_keys), script.check(args),
                               mutating=mutating)

    async def open(self) -> AsyncQueue[T]:
        """Create the queue if it does not exist, else attach to it (QueueExistsError if
        ``maxsize`` was given and differs, or the queue is of another kind). Idempotent."""
        if self._opened:
            return self
        k = self._keys
        deadline = time.monotonic() + _CREATE_WAIT
        while True:
            # (a bound not named: see Lifecycle._create)
            status, stored = await self._link.run(
                "create" + self._variant, CREATE.keys(k), CREATE.check(
                    (0 if self._bound is None else self._bound, self._KIND, k.inbox_prefix,
                     k.inflight_prefix, k.held_prefix, k.logs, "" if self._bound is None else "1",
                     recorded_name(self._serializer))))
            if status == -2:
                kind = stored.decode() if isinstance(stored, bytes) else str(stored)
                raise QueueExistsError(f"queue {self._name!r} already exists as a {kind} queue, "
                                       f"not a {self._KIND} queue")
            if status != -1:
                break
            if time.monotonic() > deadline:
                raise PressureError(f"queue {self._name!r} is being deleted, or an interrupted delete "
                                    f"left its keys behind: cannot create it now")
            await asyncio.sleep(0.02)
        bound = self._parse_bound(stored)
        if status == 0 and self._bound is not None and bound != self._bound:
            raise QueueExistsError(f"queue {self._name!r} already exists with maxsize={bound}, "
                                   f"not {self._bound}")
        self._opened = True
        return self

    def _parse_bound(self, raw: bytes | str) -> int:
        text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
        if not (text.isascii() and text.isdigit() and len(text) <= 15):
            raise ProtocolError(f"{self._keys.bound} holds {raw!r}, not a non-negative integer")
        return int(text)

    async def _missing(self, forget: bool = True) -> QueueDoesNotExist:
        """The error for a queue that is gone (first removing what pressure kept beside it,
        as the sync handle does, on mutating calls)."""
        if forget:
            k = self._keys
            try:
                await self._link.run(FORGET.name + self._variant, FORGET.keys(k), FORGET.check(
                    (k.inbox_prefix, k.inflight_prefix, k.held_prefix, k.logs)))
            except PressureError:
                pass
        return QueueDoesNotExist(f"queue {self._name!r} does not exist")

    async def _raise_for(self, result: int) -> None:
        if result == _CLOSED:
            raise ShutDown(f"queue {self._name!r} is shut down")
        if result == _NO_QUEUE:
            raise await self._missing()
        if result == _NEGATIVE:
            raise ValueError(_TIMEOUT_MESSAGE)

    # -- get --------------------------------------------------------------------------

    async def get(self, block: bool = True, timeout: float | None = None) -> T:
        """Remove and return an item, waiting for one (at most ``timeout`` seconds, then
        Empty; ``block=False``: Empty at once). ShutDown once the queue is closed and drained.

        Cancellation-safe: cancelled at any point (also by ``asyncio.timeout`` or
        ``asyncio.wait_for``), it loses nothing and leaves no waiter behind: an item it was
        handed goes back to this handle's inbox, for its next get."""
        return (await self._receive_one(block, timeout, True)).item

    async def get_nowait(self) -> T:
        """Remove and return an item queued now, else raise Empty (a round trip: awaitable)."""
        return await self.get(block=False)

    async def get_many(self, max_items: int, block: bool = True, timeout: float | None = None) -> list[T]:
        """Remove and return up to ``max_items`` items (at most 1000 a call) in one round trip
        when items are queued; with none there, wait as ``get`` does for the first one, and
        return it with whatever came with it. Cancellation-safe as ``get``."""
        max_items = _count("max_items", max_items)
        if max_items < 1:
            raise ValueError(f"max_items must be at least 1, not {max_items}")
        wait = _timeout_value(timeout) if block else None
        if wait is not None and wait < 0:
            await self._refuse_negative_timeout()
        return await self._consume(lambda: self._receive_many(max_items, block, wait))

    # -- size, state, tasks -------------------------------------------------------------

    async def _info(self, most: int | None = 1) -> tuple[int, int, int, bool, int]:
        """(exists, ready, bound, closed, held), as ``pressure.Queue._info`` reads them."""
        exists, ready, bound, closed, held = await self._call(INFO, "" if most is None else most, mutating=False)
        if not exists:
            raise await self._missing(forget=False)
        return exists, ready, self._parse_bound(bound), bool(closed), held

    async def qsize(self) -> int:
        """The number of items a get would hand out now (a round trip: awaitable, unlike
        asyncio.Queue's)."""
        return (await self._info(None))[1]

    async def empty(self) -> bool:
        """Whether a get would find no item now (awaitable)."""
        return (await self._info())[1] == 0

    async def full(self) -> bool:
        """Whether the queue is at its bound now, as a put counts it (awaitable)."""
        _, _, bound, _, held = await self._info()
        return 0 < bound <= held

    async def maxsize(self) -> int:
        """The bound stored in Redis, 0 for none (awaitable: a method, not asyncio.Queue's
        attribute, since every client may change it)."""
        return (await self._info())[2]

    async def is_shutdown(self) -> bool:
        """Whether the queue is closed (asyncio.Queue's 3.13 name; awaitable)."""
        return (await self._info())[3]

    async def task_done(self) -> None:
        """Mark one item as processed (by any client, for every client's ``join``). Awaitable,
        unlike asyncio.Queue's; ValueError if called more times than items were put. In
        reliable mode it acknowledges this handle's oldest delivery of ``get``/``get_many``,
        exactly once (if it raises, calling it again finishes that same delivery's count;
        ValueError if the handle holds none: see ``Queue.unfinished_tasks``);
        cancelled, it still completes. While no get uses the handle's connection, the
        acknowledgement (reliable mode), or the count of an item this handle's gets returned
        (default mode), is posted: no round trip of its own (``_Settling._post_ack``,
        ``_post_count``); what it answers comes out at the handle's next call."""
        await self.open()
        await self._settle_owed(False)
        if self._options.reliable:
            if self._unacked and not self._settle_lock.locked() and self._post_ack(self._unacked[0]):
                self._forget(self._unacked[0])  # posted: nothing awaited, so nothing to shield
                return
            if await self._link.shielded(self._task_done_reliable()):
                return
            # every delivery counts once as its processing ends (README, Counting): one this
            # handle's gets did not return has nothing left to count
            raise ValueError("task_done() called too many times")
        # the default mode: a task_done() for an item this
        # handle's gets returned posts its count; one for none (a call too many, or another
        # handle's item) waits for its reply, so that its ValueError comes from the call itself
        try:
            self._owing.popleft()
        except IndexError:
            # this handle's posted counts first: they went on its get connection, this count
            # goes on a pooled one, and Redis may run it before them (a call too many would
            # then count, and a later call raise its ValueError); a round trip only if any
            await self._settle_owed(True)
            await self._count_done()
            return
        if self._post_count():
            return
        try:
            await self._count_done()
        except (ValueError, QueueDoesNotExist):
            raise  # answered
        except BaseException:
            self._owing.appendleft(None)
            raise

    async def _count_done(self) -> None:
        """Count one task done (ack.lua '-'), waiting for the reply."""
        _, unfinished = await self._call(ACK, "-", "1", call_keys=(self._keys.inflight(self._cid),))
        if unfinished == -1:
            raise ValueError("task_done() called too many times")
        if unfinished == _NO_QUEUE:
            raise await self._missing()

    def _post_count(self) -> bool:
        """``_count_done`` without waiting, on the handle's get connection while no get uses
        it (the next exchange there reads the reply: ``_posted_count_check`` deals with it);
        not with ``durability`` (its WAIT is a reply to wait for), nor before ack.lua is known
        loaded (a posted call is never loaded). False if not posted."""
        name = ACK.name + self._variant
        if self._options.durability is not None or name not in self._link.loaded:
            return False
        k = self._keys
        keys = (*ACK.keys(k), k.inflight(self._cid))
        check = _posted_count_check(self._counting, self._counts_owed, self._ack_errors, self._link.errors,
                                    self._link.loaded, name)
        if not self._post(pack_command("EVALSHA", _script_sha(name), len(keys), *keys, "-", "1"), check):
            return False
        self._counting.append(None)
        return True

    async def join(self) -> None:
        """Wait until every item put (by any client) has been marked done."""
        await self.open()
        await self._settle_owed(True)  # this handle's own task_done()s first
        stream = self._keys.all_tasks_done
        while True:
            unfinished, last = await self._call(JOIN_CHECK, mutating=False)
            if unfinished == _NO_QUEUE:
                raise await self._missing(forget=False)
            if unfinished <= 0:
                return
            await self._link.command("XREAD", "XREAD", "BLOCK", max(int(self._link.slice * 1000), 1),
                                     "STREAMS", stream, last)

    # -- close, shutdown, delete, the handle ------------------------------------------------

    async def close(self) -> None:
        """Close the queue for every client (protocol Close), as ``pressure.Queue.close``:
        puts raise ShutDown, gets drain what is left, then raise ShutDown."""
        k = self._keys
        while True:
            result = await self._call(CLOSE, self._client_id, k.inbox_prefix)
            if result == _NO_QUEUE:
                raise await self._missing()
            if result != _BUSY:
                return
            await asyncio.to_thread(self._roles.wait_for_role, PRODUCER, self._link.slice)

    async def shutdown(self, immediate: bool = False) -> None:
        """``close()``; with ``immediate``, also discard what is queued (gets raise ShutDown
        at once), as ``pressure.Queue.shutdown``."""
        await self.close()
        if not immediate:
            return
        while True:
            result = await self._call(DRAIN, self._client_id)
            if result == _NO_QUEUE:
                raise await self._missing()
            if result != _BUSY:
                return
            await asyncio.to_thread(self._roles.wait_for_role, CONSUMER, self._link.slice)

    async def disconnect(self) -> None:
        """Let what cancelled calls left running end (clean-ups included), then close this
        handle's connections (never a ``connection`` passed in). The queue is untouched."""
        async with self._lock:
            pass  # a clean-up holds it until done
        with contextlib.suppress(PressureError, ValueError):  # posted acknowledgements: read, and
            await self._settle_owed(True)              # those that did not run sent again
        # the consumer leaves: what it holds goes back at once (see Departure; never raises)
        await asyncio.to_thread(self._departure.leave)
        self._unacked.clear()  # what it held went back: none of it is its to settle now
        self._holding.clear()
        await self._link.close()
        conn, self._conn.conn = self._conn.conn, None
        if conn is not None:
            await conn.disconnect()
        await asyncio.to_thread(self._roles.backend.disconnect)

    async def __aenter__(self) -> AsyncQueue[T]:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.disconnect()

    def __aiter__(self) -> AsyncIterator[T]:
        return self._items()

    async def _items(self) -> AsyncIterator[T]:
        """Items until the queue is closed and drained (ShutDown ends the iteration)."""
        while True:
            try:
                item = await self.get()
            except ShutDown:
                return
            yield item


class AsyncLifoQueue(AsyncQueue[T]):
    """``pressure.LifoQueue`` for asyncio: the newest item first (keys under
    ``<prefix>:lifo:<name>``)."""

    _KIND = "lifo"

    def _unwrap(self, item: bytes) -> bytes:  # as pressure.ordered._OrderedQueue._unwrap
        length = int(item[-8:])
        return item[length + 16:-8]


class AsyncPriorityQueue(AsyncLifoQueue[T]):
    """``pressure.PriorityQueue`` for asyncio: the lowest item first, as ``heapq`` gives."""

    _KIND = "priority"

    def _order_key(self, item: Any) -> bytes:
        return order_key(item)

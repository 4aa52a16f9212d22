"""The get side of ``AsyncQueue``: one handle's consumer (pressure/aio/_queue.py's docstring
tells how gets wait, are cancelled and clean up). ``_Getting`` is a base class of
``AsyncQueue``: its methods use the handle's state, declared below, and the few handle
methods named at the end of the declarations."""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import redis

from .. import _log, serializers
from .._departure import Departure
from .._records import (
    _BUSY,
    _DELIVERED,
    _DELIVERED_MORE,
    _EMPTY,
    _NO_QUEUE,
    _UNDRAINED,
    _WAITING,
    _batch_header,
    _parse_entry,
)
from .._roles import CONSUMER, MIN_WAIT, SWEEP_INTERVAL, _Roles
from .._scripts import GET_FLAG, REQUEUE
from .._validate import _TIMEOUT_MESSAGE, Options, _timeout_value
from ..connection import PackedScript, _script_sha, pack_command
from ..errors import DeserializationError, IntegrityError, PressureError, ProtocolError, ShutDown
from ..keys import QueueKeys
from ._errors import Empty
from ._getconn import _Conn
from ._link import _Link

if TYPE_CHECKING:
    from ._queue import AsyncQueue
    from ._reliable import AsyncDelivery

T = TypeVar("T")

#: How often a get on a closed, empty queue looks again whether others still hold items.
UNDRAINED_POLL = 0.1
#: How often a clean-up asks the server to unblock a cancelled get's BLMOVE.
_UNBLOCK_EVERY = 0.05


def _wait_time(slice_: float, deadline: float) -> float:
    """One server-side wait: at most a slice, never past the deadline, never 0 (= forever)."""
    return max(min(slice_, deadline - time.monotonic()), MIN_WAIT)


class _Getting(Generic[T]):
    """The consumer of one ``AsyncQueue`` handle (its gets, one at a time)."""

    # the handle's state (set by AsyncQueue.__init__)
    _link: _Link
    _roles: _Roles
    _name: str
    _keys: QueueKeys
    _options: Options
    _serializer: serializers.Serializer
    _client_id: str
    _cid: str
    _variant: str
    _record: str
    _get_keys: tuple[str, ...]
    _get_command: PackedScript
    _get_many_command: PackedScript
    _lock: asyncio.Lock
    _conn: _Conn
    _dirty: bool
    _owes_cancel: bool
    _departure: Departure
    _waited: bool
    _owing: collections.deque[None]
    # and the handle's methods it calls
    open: Callable[[], Awaitable[AsyncQueue[T]]]
    _info: Callable[[], Awaitable[tuple[int, int, int, bool, int]]]
    _raise_for: Callable[[int], Awaitable[None]]
    _unwrap: Callable[[bytes], bytes]
    _delivery: Callable[[bytes, Any], AsyncDelivery[T]]
    _received_ids: Callable[[list[str]], list[str]]
    _hold: Callable[[list[AsyncDelivery[T]], bool], None]
    _settle_owed: Callable[[bool], Coroutine[Any, Any, None]]

    async def receive(self, block: bool = True, timeout: float | None = None) -> AsyncDelivery[T]:
        """As ``get()``, but return the AsyncDelivery, to acknowledge (``await d.ack()``) or
        release explicitly, in any order (reliable mode; in the default mode it is
        acknowledged at once, as ``pressure.Queue.receive``'s). ``task_done()`` never
        acknowledges it. Cancellation-safe as ``get``."""
        return await self._receive_one(block, timeout, False)

    async def _receive_one(self, block: bool, timeout: float | None, track: bool) -> AsyncDelivery[T]:
        wait = _timeout_value(timeout) if block else None
        if wait is not None and wait < 0:
            await self._refuse_negative_timeout()
        deliveries = await self._consume(lambda: self._receive(block, wait, track))
        return cast("AsyncDelivery[T]", deliveries[0])

    async def _refuse_negative_timeout(self) -> None:
        _, ready, _, closed, _ = await self._info()
        if closed and ready == 0:
            raise ShutDown(f"queue {self._name!r} is shut down")
        raise ValueError(_TIMEOUT_MESSAGE)

    async def _consume(self, op: Any) -> list[T]:
        """Run a get (``op``) holding the handle's consumer lock. If it ends with an error or
        is cancelled while the consumer may be the waiter or hold entries it never received,
        a clean-up task takes over the lock and gives everything back (``_abandon``)."""
        await self.open()
        await self._settle_owed(False)  # what posted acknowledgements left (reliable mode)
        await self._lock.acquire()  # cancelled here: nothing was done
        handed_over = False
        try:
            if self._owes_cancel:
                self._dirty = True
                await self._conn.exchange(self._cancel_data())
                self._owes_cancel = self._dirty = False
            return cast("list[T]", await op())
        except BaseException:
            if self._dirty:
                self._link.keep(asyncio.ensure_future(self._abandon()))
                handed_over = True
            raise
        finally:
            if not handed_over:
                self._lock.release()

    async def _abandon(self) -> None:
        """A get ended without returning what it may have been handed: let its exchange end
        (unblocking a BLMOVE), then give the role and the entries back (get.lua 'cancel'),
        and release the consumer lock. Runs as a task of its own, never cancelled."""
        try:
            pending = self._conn.pending
            while pending is not None and not pending.done():
                if self._conn.redis_id is not None:
                    try:
                        await self._link.command("CLIENT UNBLOCK", "CLIENT", "UNBLOCK", self._conn.redis_id)
                    except PressureError:
                        pass  # e.g. refused by an ACL: the BLMOVE ends within a slice anyway
                await asyncio.wait({pending}, timeout=_UNBLOCK_EVERY)
            try:
                await self._conn.exchange(self._cancel_data())
                self._dirty = False
            except PressureError:
                self._owes_cancel = True  # sent again before this handle's next get
        finally:
            self._lock.release()

    @property
    def _received(self) -> list[str]:
        """The delivery numbers the last get returned (get.lua 'cancel' leaves them alone, and
        the consumer's leave drops them: see Departure)."""
        return self._departure.received.get(self._cid, [])

    @_received.setter
    def _received(self, value: list[str]) -> None:
        self._departure.received[self._cid] = value

    def _tail(self, mode: str, flag: str) -> list[bytes | str | int]:
        departure = self._departure
        if not departure.joined or departure.pid != os.getpid():
            departure.join(self, self._cid, self._record)  # it leaves with the handle
        return [self._cid, mode, flag, self._record, self._options.lease_ms, self._client_id]

    def _cancel_data(self) -> list[bytes]:
        script = "get" + self._variant
        return [pack_command("EVALSHA", _script_sha(script), len(self._get_keys), *self._get_keys,
                             self._cid, "cancel", "0", self._record,
                             self._options.lease_ms, self._client_id, *self._received_ids(self._received))]

    def _post_drop(self) -> None:
        """The items of this get are in hand: drop what the consumer holds in Redis (its
        in-flight list and held batch), without waiting for the reply, as the sync client
        does; its reply is read with the next exchange. If it cannot be sent, the next get
        drops them."""
        k = self._keys
        self._conn.post(pack_command("DEL", k.inflight(self._cid), k.held(self._cid)), None)

    def _post(self, command: bytes, check: Callable[[Any], None]) -> bool:
        """Send ``command`` on the handle's get connection without waiting for its reply
        (``_Conn.post``): only while no get uses the connection (a BLMOVE there would hold the
        command back) and it is connected to the slot's current master. False if not sent."""
        c = self._conn
        if (self._lock.locked() or (c.pending is not None and not c.pending.done())
                or c.generation != self._link.generation):
            return False
        return c.post(command, check)

    async def _sweep_if_due(self) -> None:
        if time.monotonic() - self._roles.last_sweep > SWEEP_INTERVAL:
            self._roles.last_sweep = time.monotonic()
            await asyncio.to_thread(self._roles.sweep)

    def _load(self, entry: bytes) -> tuple[str, T]:
        seq, _, _, payload = _parse_entry(entry)
        return seq, cast("T", serializers.loads(self._serializer, self._unwrap(payload)))

    async def _dead_letter(self, seq: str, exc: DeserializationError) -> None:
        await self._roles_run_requeue("release", self._cid, seq)
        bad = isinstance(exc, IntegrityError)
        _log.event(_log.QUEUE, logging.WARNING if bad else logging.ERROR, "dead_letter",
                   "queue %r: %s (moved to the dead-letter list)", self._name, exc, queue=self._name,
                   key=self._keys.base, count=1, reason="bad_signature" if bad else "undeserializable")

    async def _roles_run_requeue(self, mode: str, consumer: str, which: str) -> None:
        k = self._keys
        await self._link.run("requeue" + self._variant, REQUEUE.keys(k), REQUEUE.check(
            (mode, k.inbox_prefix, k.inflight_prefix, "1", consumer, which, "", k.held_prefix, "", "")))

    async def _receive(self, block: bool, wait: float | None, track: bool = True) -> list[AsyncDelivery[T]]:
        """One delivery, in hand (marked received; its drop posted, or in reliable mode held
        for acknowledgement: by ``task_done`` if ``track``)."""
        await self._sweep_if_due()
        while True:
            entry = await (self._block(wait) if block else self._nowait())
            seq = _parse_entry(entry)[0]
            try:
                _, item = self._load(entry)
            except DeserializationError as exc:
                self._dirty = False
                await self._dead_letter(seq, exc)  # never loads with this serializer: not lost
                self._received = []
                raise
            delivery = self._delivery(entry, item)
            self._received = [seq]
            self._hold([delivery], track)
            self._dirty = False
            if not self._options.reliable:
                self._post_drop()
                if track:
                    self._owing.append(None)  # its task_done() may post its count
            return [delivery]

    async def _receive_many(self, n: int, block: bool, wait: float | None) -> list[T]:
        await self._sweep_if_due()
        items, received, deliveries = await self._batch(n, keep=False)
        if not items:
            entry = await (self._block(wait) if block else self._nowait())
            seq = _parse_entry(entry)[0]
            try:
                _, first = self._load(entry)
            except DeserializationError as exc:
                self._dirty = False
                await self._dead_letter(seq, exc)
                self._received = []
                raise
            items, received, deliveries = [first], [seq], [self._delivery(entry, first)]
            if n > 1:
                self._dirty = True  # the first item is not returned yet: a cancel gives it back
                more, also, later = await self._batch(n - 1, keep=True)
                items += more
                received += also
                deliveries += later
        self._received = received
        if self._options.reliable:
            self._hold(deliveries, True)
        self._dirty = False
        if not self._options.reliable:
            self._post_drop()
            self._owing.extend(itertools.repeat(None, len(items)))  # their task_done()s may post
        return items

    async def _batch(self, n: int, keep: bool) -> tuple[list[T], list[str], list[AsyncDelivery[T]]]:
        """get.lua 'batch': up to ``n`` items queued now, the delivery numbers received, and
        their deliveries (in reliable mode, where 'batch' hands out entries as 'many' does)."""
        self._dirty = True
        (result,) = await self._conn.exchange([self._get_many_command.pack(
            [*self._tail("batch", "k" if keep else "0"), n])])
        if isinstance(result, redis.RedisError):
            self._link.check(result, "script get", True)
        if not isinstance(result, list):
            self._dirty = keep
            if result in (_EMPTY, _BUSY, _UNDRAINED):
                return [], [], []
            await self._raise_for(result)
            raise ProtocolError(f"get script returned {result!r}")
        header = result.pop()
        if not header.startswith(b"h:"):  # entries delivered earlier, from our inbox
            entries = [*result, header]
            items, seqs, deliveries = [], [], []
            for entry in entries:
                try:
                    seq, item = self._load(entry)
                except DeserializationError as exc:  # dead-lettered; the others are still ours
                    await self._dead_letter(_parse_entry(entry)[0], exc)
                    continue
                items.append(item)
                seqs.append(seq)
                deliveries.append(self._delivery(entry, item))
            return items, seqs, deliveries
        first, _, _ = _batch_header(header)
        loads, unwrap = self._serializer.loads, self._unwrap
        try:
            return [loads(unwrap(item)) for item in result], ["h%d" % first], []
        except Exception:  # noqa: BLE001 - one by one, as the sync consumer's load_each
            pass
        # releasing an item turns the held batch into in-flight entries: all received
        seqs = self._received = ["h%d" % first, *(str(first + i) for i in range(len(result)))]
        items = []
        for i, stored in enumerate(result):
            try:
                items.append(serializers.loads(self._serializer, unwrap(stored)))
            except DeserializationError as exc:
                await self._dead_letter(str(first + i), exc)
        return items, seqs, []

    async def _nowait(self) -> bytes:
        """get.lua 'nowait' (the sync consumer's ``nowait``)."""
        busy_deadline = time.monotonic() + self._link.slice
        recovered = False
        while True:
            self._dirty = True
            (result,) = await self._conn.exchange([self._get_command.pack(self._tail("nowait", "0"))])
            if isinstance(result, bytes):
                return result
            if isinstance(result, redis.RedisError):
                self._link.check(result, "script get", True)
            self._dirty = False
            await self._raise_for(result)
            if result == _UNDRAINED and not recovered:
                recovered = True
                holders = await asyncio.to_thread(self._roles.recover_holders, self._cid)
                if holders == "drained":
                    raise ShutDown(f"queue {self._name!r} is shut down")
                if holders == "recovered":
                    continue
            if result in (_EMPTY, _UNDRAINED):
                raise Empty(f"queue {self._name!r} is empty")
            if result != _BUSY:
                raise ProtocolError(f"get script returned {result!r}")
            now = time.monotonic()
            if now >= busy_deadline:
                raise Empty(f"queue {self._name!r}: the consumer role is held by another client")
            await asyncio.to_thread(self._roles.wait_for_role, CONSUMER, busy_deadline - now)

    async def _block(self, wait: float | None) -> bytes:
        """get.lua 'block' and BLMOVE (and 'woken'), pipelined: the sync consumer's ``block``."""
        now = time.monotonic()
        deadline = math.inf if wait is None else now + max(wait, 0.0)
        busy_deadline = max(deadline, now + self._link.slice)
        k, cid = self._keys, self._cid
        inbox, inflight = k.inbox(cid), k.inflight(cid)
        waited, self._waited = self._waited, True
        if not waited:  # the last get left items queued: 'nowait' alone first (see the sync one)
            self._dirty = True
            (got,) = await self._conn.exchange([self._get_command.pack(self._tail("nowait", "n"))])
            if isinstance(got, list):
                self._waited = not got[1]
                return cast(bytes, got[0])
            if isinstance(got, redis.RedisError) and not isinstance(got, redis.exceptions.NoScriptError):
                self._link.check(got, "script get", True)
            waited = True  # empty, busy, closed or gone: the pipeline below tells which
        tail = self._tail("block", "0")
        woken = self._get_command.pack(self._tail("woken", "0"))
        first = True
        slice_ = min(self._link.slice, self._options.lease_ms / 3000)
        timeout = _wait_time(slice_, deadline)
        while True:
            self._dirty = True
            with_woken = waited or not first
            blmove = pack_command("BLMOVE", inbox, inflight, "RIGHT", "LEFT", repr(timeout))
            replies = await self._conn.exchange(
                [self._get_command.pack(tail) + blmove + (woken if with_woken else b"")],
                3 if with_woken else 2)
            status, reply = replies[0], replies[1]
            taken = replies[2] if with_woken else None
            tail[GET_FLAG] = "0"
            if isinstance(reply, redis.RedisError):
                self._link.check(reply, "BLMOVE after script get", True)
            if reply is not None and not reply.startswith(b"s:"):
                self._waited = not (first and status == _DELIVERED_MORE)
                return cast(bytes, reply)
            if isinstance(taken, bytes):
                return taken
            if isinstance(status, redis.RedisError):
                if not isinstance(status, redis.exceptions.NoScriptError):
                    self._link.check(status, "script get", True)
            elif status == _WAITING:
                if reply is None:
                    if time.monotonic() >= deadline:
                        return await self._cancel_wait()
                    await asyncio.to_thread(self._roles.sweep)  # requeue what expired meanwhile
            elif status == _UNDRAINED:
                self._dirty = False
                holders = await asyncio.to_thread(self._roles.recover_holders, cid)
                if holders == "drained":
                    raise ShutDown(f"queue {self._name!r} is shut down")
                if holders == "wait":
                    if time.monotonic() >= deadline:
                        raise Empty(f"queue {self._name!r} is empty")
                    tail[GET_FLAG] = "w"
            else:
                self._dirty = False
                if status == _NO_QUEUE:  # deleted: our own lists are all that is left
                    await self._link.command("DEL", "DEL", inbox, inflight, k.held(cid), mutating=True)
                await self._raise_for(status)
                if status == _BUSY:
                    now = time.monotonic()
                    if now >= busy_deadline:
                        raise Empty(f"queue {self._name!r} is empty")
                    await asyncio.to_thread(self._roles.wait_for_role, CONSUMER, busy_deadline - now)
                elif status not in (_DELIVERED, _DELIVERED_MORE):
                    raise ProtocolError(f"get script returned {status!r}")
            first = False
            timeout = _wait_time(UNDRAINED_POLL if tail[GET_FLAG] == "w" else slice_, deadline)

    async def _cancel_wait(self) -> bytes:
        """The deadline passed while waiting: stop waiting; take an item delivered meanwhile."""
        (result,) = await self._conn.exchange(self._cancel_data())
        self._link.check(result, "script get", True)
        self._dirty = False
        if result == _DELIVERED:
            return await self._nowait()
        raise Empty(f"queue {self._name!r} is empty")


"""Reliable mode for ``AsyncQueue`` (``reliable=True``): what a get returns stays in the
handle's in-flight list in Redis until acknowledged, exactly as with the sync
``pressure.Queue(reliable=True)`` (pressure/reliable.py), with the same scripts (ack.lua,
requeue.lua, touch.lua through their pressure._scripts bindings) and the same keys, so sync
and async reliable consumers share one queue.

``AsyncDelivery`` is ``pressure.Delivery`` with awaitable ``ack()``, ``release()`` and
``touch()``. ``task_done()`` acknowledges the handle's oldest delivery; each settlement is
one script, shielded: cancelling the caller never leaves it half done (it completes, and
its bookkeeping with it). ``task_done()``'s is posted on the handle's get connection when no
get uses it (``_post_ack``): its reply is read with the next exchange there, and what it
says is dealt with by the handle's next call (``_settle_owed``). A get cancelled before it returned names the deliveries the
handle holds to get.lua 'cancel', which returns only the others (never received) to the
handle's inbox.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import redis

from .. import _log
from .._packing import PING
from .._records import _parse_entry
from .._scripts import ACK, REQUEUE, TOUCH, AckStatus
from ..connection import _script_sha, pack_command
from ..reliable import _note_ack_status, _posted_ack_check
from .._validate import Options, _delay_ms
from ..errors import BackendError, OutcomeUnknown
from ..keys import QueueKeys
from ._link import _Link

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from ..errors import QueueDoesNotExist
    from ._getconn import _Conn

T = TypeVar("T")

#: How often join() and the counts look whether a get in progress has read the replies of
#: this handle's posted acknowledgements.
_FLUSH_POLL = 0.005


@dataclass(eq=False)
class AsyncDelivery(Generic[T]):
    """One delivery of an item (``pressure.Delivery`` for asyncio): ``await d.ack()``,
    ``await d.release()``, ``await d.touch()``. In reliable mode the item stays in Redis,
    in this handle's in-flight list, until it is acknowledged or released (or its
    visibility timeout passes, or the handle's process dies)."""

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
    _queue: _Settling[T] = field(repr=False)
    #: A task_done() for it may have run (its reply was lost): another counts only if not.
    _unsure: bool = field(default=False, repr=False)
    #: The payload it came in (its task id is the SHA1 of it).
    _payload: bytes = field(default=b"", repr=False)

    @property
    def task_id(self) -> str:
        """The item's task id (the hex SHA1 of its payload), for ``q.peek_item`` and
        ``q.delete_item``: the same in every state the item goes through."""
        return hashlib.sha1(self._payload).hexdigest()

    async def ack(self) -> bool:
        """Acknowledge: the item leaves Redis. False if it was already acknowledged or requeued."""
        return await self._queue._settle(self, "ack")

    async def release(self, *, delay: float | None = None) -> bool:
        """Give the item back, to the head of the queue (past ``max_deliveries``, to the
        dead-letter list). False if it was already acknowledged or requeued. ``delay``
        (seconds): it waits that long among the delayed items first, as
        ``pressure.Delivery.release(delay=...)``."""
        return await self._queue._settle(self, "release", _delay_ms("delay", delay))

    async def bury(self) -> bool:
        """Park a poisoned item among the dead letters (reason "buried") until ``q.kick()``,
        whatever its delivery count. False if it was already acknowledged or requeued."""
        return await self._queue._settle(self, "bury")

    async def delete(self) -> bool:
        """Remove the item for good, wherever it is now (``pressure.Delivery.delete``). False
        if it is gone already (acknowledged)."""
        queue = self._queue
        queue._forget(self)
        return await queue._find_item("delete", self.task_id, self.id) is not None

    async def touch(self) -> bool:
        """Restart this delivery's visibility timeout (while processing takes longer than
        it). False if it was already acknowledged or requeued."""
        queue = self._queue
        await queue.open()
        return bool(await queue._link.run(TOUCH.name + queue._variant, (queue._keys.inflight(self.consumer),),
                                          TOUCH.check((self.id,))))


class _Settling(Generic[T]):
    """Settling deliveries: a base class of ``AsyncQueue`` (its state is the handle's)."""

    _link: _Link
    _name: str
    _keys: QueueKeys
    _options: Options
    _variant: str
    _cid: str
    _unacked: collections.deque[AsyncDelivery[T]]
    _holding: dict[str, AsyncDelivery[T]]
    _settle_lock: asyncio.Lock
    _lock: asyncio.Lock
    #: posted acknowledgements whose reply is unread; those to send again (they did not run, or
    #: their reply was lost); the errors posted ones answered, for the next call to raise
    _posted: collections.deque[AsyncDelivery[T]]
    _owed: list[AsyncDelivery[T]]
    _ack_errors: list[Exception | None]
    #: the default mode's posted counts whose reply is unread, and those that did not run
    _counting: collections.deque[None]
    _counts_owed: collections.deque[None]
    open: Callable[[], Awaitable[Any]]
    _unwrap: Callable[[bytes], bytes]
    _find_item: Callable[..., Coroutine[Any, Any, Any]]
    _count_done: Callable[[], Coroutine[Any, Any, None]]
    _missing: Callable[..., Awaitable[QueueDoesNotExist]]
    _post: Callable[[bytes, Callable[[Any], None]], bool]
    _conn: _Conn

    def _delivery(self, entry: bytes, item: T) -> AsyncDelivery[T]:
        seq, deliveries, ms, payload = _parse_entry(entry)
        if deliveries > 1:
            _log.event(_log.QUEUE, logging.INFO, "redelivery", "queue %r: delivery %s is delivered again "
                       "(delivery %d)", self._name, seq, deliveries, queue=self._name, key=self._keys.base,
                       delivery=seq, deliveries=deliveries, consumer=self._cid)
        return AsyncDelivery(item, seq, deliveries, ms / 1000, self._cid, self,
                             _payload=self._unwrap(payload))

    def _hold(self, deliveries: list[AsyncDelivery[T]], track: bool) -> None:
        """Reliable mode: the handle holds ``deliveries`` until they are settled (``track``:
        task_done acknowledges them, oldest first)."""
        if not self._options.reliable:
            return
        for delivery in deliveries:
            self._holding[delivery.id] = delivery
        if track:
            self._unacked.extend(deliveries)

    def _received_ids(self, last: list[str]) -> list[str]:
        """The delivery numbers get.lua 'cancel' must leave in the in-flight list: in
        reliable mode every delivery the handle holds, those a posted task_done() acknowledges
        (its reply unread: it may not have run) and those owed again; else those the last get
        returned."""
        if self._options.reliable:
            return [*self._holding, *(d.id for d in self._posted), *(d.id for d in self._owed)]
        return last

    def _forget(self, delivery: AsyncDelivery[T]) -> None:
        self._holding.pop(delivery.id, None)
        try:
            self._unacked.remove(delivery)
        except ValueError:
            pass

    async def _settle(self, delivery: AsyncDelivery[T], how: str, delay_ms: str = "") -> bool:
        """Ack, release or bury ``delivery``: one script and its bookkeeping, shielded together."""
        await self.open()
        return bool(await self._link.shielded(self._settle_now(delivery, how, delay_ms)))

    async def _settle_now(self, delivery: AsyncDelivery[T], how: str, delay_ms: str = "") -> bool:
        k, variant = self._keys, self._variant
        if how == "ack":
            acked, _ = await self._link.run(ACK.name + variant, (*ACK.keys(k), k.inflight(delivery.consumer)),
                                            ACK.check((delivery.id, "0")), durability=self._options.durability)
            self._forget(delivery)
            return bool(acked)
        # release or bury: requeue.lua 'release', as the sync handle's _Roles.requeue sends it
        requeued, dead = await self._link.run(REQUEUE.name + variant, REQUEUE.keys(k), REQUEUE.check((
            "release", k.inbox_prefix, k.inflight_prefix, self._options.max_deliveries_arg,
            delivery.consumer, delivery.id, "", k.held_prefix, delay_ms, "buried" if how == "bury" else "")))
        self._forget(delivery)
        return bool(dead) if how == "bury" else bool(requeued or dead)

    async def _task_done_reliable(self) -> bool:
        """task_done() in reliable mode: acknowledge the oldest delivery and count its task,
        exactly once across lost replies (as the sync handle: after a lost reply, ask again
        in the form that counts only if the first did not run). Posted, where it can be
        (``_post_ack``): no round trip of its own. False if the handle holds no delivery
        (then task_done is a call too many, as the sync handle's)."""
        async with self._settle_lock:
            if not self._unacked:
                return False
            delivery = self._unacked[0]
            if self._post_ack(delivery):
                self._forget(delivery)
                return True
            unfinished = await self._ack_counted(delivery)
            self._forget(delivery)
        if unfinished == AckStatus.TOO_MANY:
            raise ValueError("task_done() called too many times")
        if unfinished == AckStatus.NO_QUEUE:
            raise await self._missing()
        return True

    async def _ack_counted(self, delivery: AsyncDelivery[T]) -> int:
        """Acknowledge ``delivery`` and count its task, waiting for the reply, exactly once
        across lost replies; what ack.lua says of the unfinished tasks."""
        variant = self._variant
        keys = self._ack_keys(delivery)
        try:
            _, unfinished = await self._link.run(ACK.name + variant, keys, ACK.check(
                (delivery.id, "2" if delivery._unsure else "1")), durability=self._options.durability)
        except OutcomeUnknown as exc:
            delivery._unsure = True
            if isinstance(exc.__cause__, redis.TimeoutError):
                raise
            try:
                _, unfinished = await self._link.run(ACK.name + variant, keys, ACK.check((delivery.id, "2")),
                                                     durability=self._options.durability)
            except BackendError:
                raise exc from exc.__cause__  # still unknown: task_done() again will tell
        return int(unfinished)

    def _ack_keys(self, delivery: AsyncDelivery[T]) -> tuple[str, ...]:
        return (*ACK.keys(self._keys), self._keys.inflight(delivery.consumer))

    def _post_ack(self, delivery: AsyncDelivery[T]) -> bool:
        """Send ``delivery``'s acknowledgement (ack.lua, counting its task) on the handle's get
        connection without waiting: the next get's exchange reads its reply first (one round
        trip per item, as the sync handle). Only a delivery not in doubt, and with the script
        known loaded (a posted call is never loaded on NOSCRIPT), while no get uses the
        connection. What the reply says is dealt with by the next call (``_settle_owed``); a
        process that dies first has the item redelivered. False if not posted."""
        name = ACK.name + self._variant
        if delivery._unsure or self._options.durability is not None or name not in self._link.loaded:
            return False  # (durability: its WAIT is a reply to wait for)
        keys = self._ack_keys(delivery)
        command = pack_command("EVALSHA", _script_sha(name), len(keys), *keys, delivery.id, "1")
        check = _posted_ack_check(delivery, self._posted, self._owed, self._ack_errors, self._link.loaded, name)
        if not self._post(command, check):
            return False
        self._posted.append(delivery)
        return True

    async def _settle_owed(self, flush: bool) -> None:
        """What posted acknowledgements left, before the handle's next call: send again those
        that did not run or whose reply was lost (exactly), then raise the first error one
        answered. ``flush``: first read the replies still unread (for join() and the counts,
        which must see this handle's own task_done()s): a round trip, only if there are any."""
        if flush:
            while self._posted or self._counting:
                if self._lock.locked():  # a get: its exchange reads them first
                    await asyncio.sleep(_FLUSH_POLL)
                    continue
                async with self._lock:
                    await self._conn.exchange([PING], 1, None)
        while self._owed:
            # it stays owed until answered: until then a get's clean-up (get.lua 'cancel') must
            # leave its entry in flight; if this raises, the next call tries again (_unsure)
            delivery = self._owed[0]
            unfinished = await self._link.shielded(self._ack_counted(delivery))
            try:
                self._owed.remove(delivery)
            except ValueError:
                pass  # another call of this handle's settled it meanwhile
            _note_ack_status(self._ack_errors, unfinished)
        while self._counts_owed:  # the default mode's posted counts that did not run
            self._counts_owed.popleft()
            try:
                await self._link.shielded(self._count_done())
            except OutcomeUnknown:
                raise  # it may have run: not owed any more
            except BackendError:  # it did not run: owed still
                self._counts_owed.appendleft(None)
                raise
        if self._ack_errors:
            error = self._ack_errors.pop(0)
            raise error if error is not None else await self._missing()

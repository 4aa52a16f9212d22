"""The put side of ``AsyncQueue``: put.lua's batches, and waiting for room or for the producer
role, as the sync producer (pressure/_producer.py) does, awaited. ``_Putting`` is a base class
of ``AsyncQueue``: its methods use the handle's state, declared below, and the few handle
methods named at the end of the declarations."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .. import serializers
from .._records import _BUSY, _FULL
from .._roles import MIN_WAIT, PRODUCER, _Roles
from .._validate import Options, _put_args, _timeout_value
from ..connection import PackedScript
from ..errors import ProtocolError, ShutDown
from ..keys import QueueKeys
from ._errors import Full
from ._link import _Link

if TYPE_CHECKING:
    from ._queue import AsyncQueue

T = TypeVar("T")

#: The most items put_many sends in one round trip (as the sync client).
BATCH = 1000


class _Putting(Generic[T]):
    """The producer of one ``AsyncQueue`` handle (its puts)."""

    # the handle's state (set by AsyncQueue.__init__)
    _KIND: str
    _link: _Link
    _roles: _Roles
    _name: str
    _options: Options
    _keys: QueueKeys
    _serializer: serializers.Serializer
    _client_id: str
    _put_command: PackedScript
    # and the handle's methods it calls
    open: Callable[[], Awaitable[AsyncQueue[T]]]
    _raise_for: Callable[[int], Awaitable[None]]
    _order_key: Callable[[Any], bytes]

    def _put_argv(self, payload: bytes, order: bytes, negative: bool, took: str, delay_ms: str = "",
                  meta: str = "") -> list[bytes | str]:
        """put.lua's ARGV[1..8] for one item, as the sync producer's ``args``."""
        return [self._client_id, payload, "1" if negative else "0", took, self._keys.inbox_prefix, order,
                delay_ms, meta]

    async def put(self, item: T, block: bool = True, timeout: float | None = None, *,
                  delay: float | None = None, ttl: float | None = None, ttr: float | None = None,
                  key: str | None = None) -> None:
        """Put ``item`` into the queue, waiting for room if it is full (at most ``timeout``
        seconds, then Full; ``block=False``: Full at once). ShutDown if closed.

        ``delay``, ``ttl``, ``ttr`` and ``key`` are ``pressure.Queue.put``'s (the same checks
        and errors, before any round trip): ``delay`` seconds invisible (counting against
        ``maxsize``); dropped if not taken within ``ttl`` seconds of being due (default: the
        handle's ``ttl``); ``ttr`` its visibility timeout once delivered; ``key`` (utube, FIFO
        queues): items of one key handed out one at a time, in order.

        Cancellation-safe: the put is one script on the server, so a cancelled put either
        put the item or did not, never half (it may have put it if cancelled while the
        script's reply was on its way)."""
        await self.put_many([item], block, timeout, delay=delay, ttl=ttl, ttr=ttr, key=key)

    async def put_nowait(self, item: T, *, delay: float | None = None, ttl: float | None = None,
                         ttr: float | None = None, key: str | None = None) -> None:
        """Put ``item`` if there is room now, else raise Full (a round trip: awaitable)."""
        await self.put(item, block=False, delay=delay, ttl=ttl, ttr=ttr, key=key)

    async def put_many(self, items: Iterable[T], block: bool = True, timeout: float | None = None, *,
                       delay: float | None = None, ttl: float | None = None, ttr: float | None = None,
                       key: str | None = None) -> None:
        """Put several items, in order, up to 1000 a round trip, as ``pressure.Queue.put_many``:
        Full or ShutDown that ends it early carries ``items_put``. ``delay`` delays every item
        as ``put`` does (same due time, in order); ``ttl``, ``ttr`` and ``key`` apply to each."""
        delay_ms, meta = _put_args(self._KIND, self._options, delay, ttl, ttr, key)
        items = items if isinstance(items, (list, tuple)) else list(items)
        payloads = [serializers.dumps(self._serializer, item) for item in items]
        if not payloads:
            return
        self._link.errors.check_sizes(payloads)
        orders = None if self._KIND == "fifo" else [self._order_key(item) for item in items]
        wait = _timeout_value(timeout) if block else None
        negative = block and wait is not None and wait < 0
        await self.open()
        total = len(payloads)
        try:
            await self._put_pending(payloads, orders, negative, block, wait, delay_ms, meta)
        except (Full, ShutDown) as exc:
            exc.items_put = total - len(payloads)
            raise

    async def _put_pending(self, payloads: list[bytes], orders: list[bytes] | None, negative: bool,
                           block: bool, wait: float | None, delay_ms: str = "", meta: str = "") -> None:
        """The sync producer's ``put_pending``, awaited (see pressure/_producer.py)."""
        link = self._link
        took = "0"
        now = time.monotonic()
        deadline = now if not block else math.inf if wait is None else now + max(wait, 0.0)
        busy_deadline = max(deadline, now + link.slice)
        command = self._put_command
        while True:
            count = min(len(payloads), BATCH)
            count = self._link.errors.batch_count(payloads, count) if count > 1 else count
            args = self._put_argv(payloads[0], orders[0] if orders else b"", negative, took, delay_ms, meta)
            more = payloads[1:count] if orders is None else [
                arg for pair in zip(payloads[1:count], orders[1:count]) for arg in pair]
            data = command.pack_items(args, more) if more else [command.pack(args)]
            result = await link.shielded(link.pooled_script(command.name, data, durability=self._options.durability))
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
                took = "0"
                continue
            await self._raise_for(result)
            now = time.monotonic()
            if result == _FULL:
                if now >= deadline:
                    raise Full(f"queue {self._name!r} is full")
                # a lost reply (or a cancelled put) costs a wake-up, never an item or a token
                popped = await link.command("BRPOP :not_full", "BRPOP", self._keys.not_full,
                                            repr(max(min(link.slice, deadline - now), MIN_WAIT)))
                took = "1" if popped else "0"
            elif result == _BUSY:
                if now >= busy_deadline:
                    raise Full(f"queue {self._name!r}: the producer role is held by another client")
                await asyncio.to_thread(self._roles.wait_for_role, PRODUCER, busy_deadline - now)
                took = "0"
            else:
                raise ProtocolError(f"put script returned {result!r}")

"""Inspection and repair for ``AsyncQueue``: ``pressure.Queue``'s ``statistics()``, ``peek``,
``peek_item``, ``delete_item``, ``in_flight``, ``dead_letters``, ``kick``, ``purge_dead``,
``repair``, ``unfinished_tasks`` and ``exists``, awaited. The commands, the scripts (through
their pressure._scripts bindings), the argument checks and the parsing of the replies are the
sync handle's (pressure/_reading.py); only the I/O is asyncio's: each step that the sync handle
sends as one MULTI/EXEC pipeline is one exchange here too (``_Link.transaction``).
``_Inspecting`` is a base class of ``AsyncQueue``."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from .. import serializers
from .._packing import PING
from .._reading import (check_task_id, dead_letters_of, in_flight_of, in_flight_reads, log_kick, log_purge,
                        log_repaired, peek_items, peek_read, repair_reset, statistics_of, statistics_reads,
                        task_info_of)
from .._records import DeadLetter, InFlight, QueueStatistics, RepairReport, TaskInfo
from .._roles import _Roles
from .._scripts import FIND_ITEM, INFO, JOIN_CHECK, KICK, REPAIR, STATS, FindStatus, JoinCheckStatus, RepairStatus
from .._validate import _count
from ..keys import QueueKeys
from ._getconn import _Conn
from ._link import _Link

if TYPE_CHECKING:
    from ..errors import QueueDoesNotExist

T = TypeVar("T")


def _pairs(reply: Any) -> list[tuple[bytes, bytes]]:
    """An HGETALL reply's fields and values (a map in RESP3, a flat list in RESP2)."""
    if isinstance(reply, dict):
        return list(reply.items())
    return list(zip(reply[::2], reply[1::2]))


class _Inspecting(Generic[T]):
    """What an ``AsyncQueue`` reads about its queue, and the dead letters' repair."""

    # the handle's state (set by AsyncQueue.__init__)
    _KIND: str
    _link: _Link
    _conn: _Conn
    _roles: _Roles
    _name: str
    _keys: QueueKeys
    _serializer: serializers.Serializer
    _lock: asyncio.Lock
    # and the handle's methods it calls
    open: Callable[[], Awaitable[Any]]
    _call: Callable[..., Coroutine[Any, Any, Any]]
    _missing: Callable[..., Awaitable[QueueDoesNotExist]]
    _settle_owed: Callable[[bool], Coroutine[Any, Any, None]]
    _parse_bound: Callable[[bytes | str], int]
    _unwrap: Callable[[bytes], bytes]

    async def _own_posted(self) -> None:
        """Let what this handle posted on its get connection (a default-mode get's drop, a
        task_done()'s count or acknowledgement) run first: a handle sees its own effects, as a
        sync handle's reads do. A round trip only if a reply is unread."""
        await self.open()
        while self._conn.unread:
            if self._lock.locked():  # a get: its exchange reads them first
                await asyncio.sleep(0.005)
                continue
            async with self._lock:
                if self._conn.unread:
                    await self._conn.exchange([PING], 1, None)

    def _loads(self) -> Callable[[bytes], Any]:
        return functools.partial(serializers.loads, self._serializer)

    async def exists(self) -> bool:
        """Whether the queue exists (protocol Exists; awaitable, a property on ``pressure.Queue``).
        The handle's first call creates the queue, as every first call does."""
        await self.open()
        return bool((await self._call(INFO, 1, mutating=False))[0])

    async def closed(self) -> bool:
        """Whether the queue has been closed (``is_shutdown()``; a property on ``pressure.Queue``)."""
        return cast(bool, await cast(Any, self).is_shutdown())

    async def unfinished_tasks(self) -> int:
        """Items put (by any client) whose processing has not ended: what ``join()`` waits for
        (awaitable; a property on ``pressure.Queue``, which says what ends one)."""
        await self.open()
        await self._settle_owed(True)
        unfinished, _ = await self._call(JOIN_CHECK, mutating=False)
        if unfinished == JoinCheckStatus.NO_QUEUE:
            raise await self._missing(forget=False)
        return int(unfinished)

    async def statistics(self) -> QueueStatistics:
        """A snapshot of the queue's counters: ``pressure.Queue.statistics()``, awaited."""
        await self._own_posted()
        k = self._keys
        values, closed, dead = await self._link.transaction("statistics", statistics_reads(k))
        if values[0] is None:
            raise await self._missing(forget=False)
        stats = await self._call(STATS, k.inbox_prefix, k.inflight_prefix, k.held_prefix, mutating=False)
        return statistics_of(self._name, k, values, closed, dead, stats, self._parse_bound)

    async def peek(self, n: int = 1) -> list[T]:
        """The next ``n`` items, next-out first, without consuming them."""
        n = _count("n", n)
        if n == 0:
            return []
        await self._own_posted()
        fifo = self._KIND == "fifo"
        raw = await self._link.command("peek", *peek_read(fifo, self._keys.base, n))
        return [serializers.loads(self._serializer, self._unwrap(p)) for p in peek_items(fifo, raw)]

    async def in_flight(self) -> list[InFlight]:
        """Every item delivered and not yet acknowledged, with its consumer, age, delivery count
        and ``item``."""
        await self.open()
        await self._settle_owed(True)
        await self._own_posted()
        consumers = [name for name, _ in _pairs(await self._link.command("HGETALL", "HGETALL", self._keys.consumers))]
        replies = await self._link.transaction("in_flight", in_flight_reads(self._keys, consumers))
        return in_flight_of(consumers, replies, self._unwrap, self._loads())

    async def dead_letters(self) -> list[DeadLetter]:
        """The dead-letter list, oldest first, each with its ``item`` and ``reason``."""
        await self._own_posted()
        time, entries = await self._link.transaction("dead_letters", [("TIME",), ("LRANGE", self._keys.dead,
                                                                                  "0", "-1")])
        return dead_letters_of(time, entries, self._unwrap, self._loads())

    async def peek_item(self, task_id: str) -> TaskInfo[T] | None:
        """One item by its task id (``AsyncDelivery.task_id``, ``InFlight.task_id``...) and its
        state, without changing anything; None if there is no such item. O(n)."""
        return await self._find_item("peek", task_id)

    async def delete_item(self, task_id: str) -> TaskInfo[T] | None:
        """Remove one item by its task id, in any state, and return what it was (None if there
        is no such item): ``pressure.Queue.delete_item``. O(n)."""
        return await self._find_item("delete", task_id)

    async def _find_item(self, mode: str, task_id: str, own: str = "") -> TaskInfo[T] | None:
        task_id = check_task_id(task_id)
        await self._own_posted()
        k = self._keys
        found = await self._call(FIND_ITEM, mode, task_id, k.inbox_prefix, k.inflight_prefix, own,
                                 mutating=mode == "delete")
        if found == FindStatus.NOT_FOUND:
            return None
        return cast("TaskInfo[T]", task_info_of(task_id, found, self._serializer))

    async def kick(self, n: int | None = None) -> int:
        """Move up to ``n`` dead letters (all if None), oldest first, back to the head of the
        queue with a fresh delivery count; how many moved."""
        count = -1 if n is None else _count("n", n)
        kicked = int(await self._call(KICK, count))
        log_kick(self._name, self._keys, kicked)
        return kicked

    async def purge_dead(self) -> int:
        """Delete the dead-letter list; how many items it held."""
        await self.open()
        purged = int((await self._link.transaction("purge_dead", [("LLEN", self._keys.dead),
                                                                  ("DEL", self._keys.dead)], mutating=True))[0])
        log_purge(self._name, self._keys, purged)
        return purged

    async def repair(self) -> RepairReport:
        """Reset the queue's role tokens to the protocol invariants, for operators
        (``pressure.Queue.repair``); consumers on this host whose process is gone give back
        what they held (in a thread, as the handle's other recovery steps)."""
        result = await self._call(REPAIR)
        if result == [RepairStatus.NO_QUEUE]:
            raise await self._missing()
        reset = repair_reset(result)
        records = _pairs(await self._link.command("HGETALL", "HGETALL", self._keys.consumers))
        recovered = []
        for consumer, record in records:
            name = consumer.decode(errors="replace")
            if await asyncio.to_thread(self._roles.recover_if_dead, name, record.decode(errors="replace")):
                recovered.append(name)
        log_repaired(self._name, self._keys, reset, recovered)
        return RepairReport(reset, recovered)

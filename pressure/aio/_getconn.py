"""The connection an ``AsyncQueue`` handle's gets use (a BLMOVE blocks it): ``_Conn``, and how
a get exchanges commands on it, in a task the caller's cancellation never interrupts, reading
the replies of the commands posted on it (sent without waiting) with its own."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any, cast

import redis

from .._wire import LOST
from ..connection import pack_command, refused_for_now
from ..errors import PressureError
from ._link import _FIRST_PAUSE, _LAST_PAUSE, _Link, _Rerouted, closed_by_server, socket_readable


async def _arrived(conn: Any) -> bool:
    """Whether data waits to be read on ``conn`` (or the server closed it), without waiting
    and without reading it: read by the event loop already (redis-py 8's ``can_read``) or
    still in the kernel (``socket_readable``). Before redis-py 8 the only check was
    ``can_read_destructive``, which may consume what it finds: then True, so the posted
    replies are read first, in a round trip of their own (correct, one round trip slower)."""
    check = getattr(conn, "can_read", None)
    if check is None:
        return True
    try:
        return bool(await check()) or socket_readable(conn)  # read by the loop, or not yet
    except (redis.RedisError, OSError):
        return True  # broken: reading shows how (and drops it)


class _Conn:
    """The handle's own connection for its gets, on ``link``, with its server-side id (for
    CLIENT UNBLOCK) and the replies of commands sent without waiting (``post``); the scripts
    it calls are of the handle's kind (``variant``: '' for FIFO, '@lifo', '@priority')."""

    def __init__(self, link: _Link, variant: str) -> None:
        self.link = link
        self.variant = variant
        self.conn: Any = None
        self.redis_id: int | None = None
        self.unread = 0
        #: for each unread reply, in order: what to tell of it (a posted acknowledgement's
        #: check: the reply, an error reply as the exception, or ``LOST``), or None
        self.checks: collections.deque[Callable[[Any], None] | None] = collections.deque()
        #: the _Link.generation it was made in (on a cluster: a new master means a new connection)
        self.generation = 0
        #: the exchange in progress, if any (a clean-up waits for it to end)
        self.pending: asyncio.Task[Any] | None = None

    def post(self, command: bytes, check: Callable[[Any], None] | None) -> bool:
        """Write ``command`` without waiting for its reply: the next exchange on this
        connection reads it and gives it to ``check`` (``LOST`` if it never will be). False if
        not connected, or if the write fails (then it did not run)."""
        writer = getattr(self.conn, "_writer", None)
        if writer is None or not self.conn.is_connected:
            return False
        try:
            writer.write(command)
        except Exception:  # noqa: BLE001 - not sent: did not run
            return False
        self.unread += 1
        self.checks.append(check)
        return True

    def answered(self, replies: list[Any] | None, count: int | None = None) -> None:
        """The replies of the first ``count`` posted commands not yet answered (all of them if
        None), read (None: lost with the connection): each to its check."""
        count = self.unread if count is None else min(count, self.unread)
        checks = [self.checks.popleft() for _ in range(count)]
        self.unread -= count
        for i, check in enumerate(checks):
            if check is not None:
                check(replies[i] if replies is not None and i < len(replies) else LOST)

    async def exchange(self, data: list[bytes], replies: int = 1, script: str | None = "get") -> list[Any]:
        """Send ``data`` and read its replies, in a task the caller's cancellation never
        interrupts (kept in ``pending``). ``script``: the data starts with a call of that
        script (of this kind): loaded first if need be. One exchange at a time: one a
        cancelled caller left running ends first."""
        pending = self.pending
        while pending is not None and not pending.done():
            await asyncio.wait({pending})
            pending = self.pending
        task = asyncio.ensure_future(self._exchange_once(data, replies, script))
        self.pending = task
        return cast("list[Any]", await self.link.shielded_task(task))

    async def _exchange_once(self, data: list[bytes], replies: int, script: str | None) -> list[Any]:
        """``_exchange_one``; on a Redis Cluster, sent again to the slot's new master while a
        node that no longer serves it refuses every command (none ran), for up to the
        socket timeout."""
        link = self.link
        deadline = None
        pause = _FIRST_PAUSE
        while True:
            try:
                out = await self._exchange_one(data, replies, script)
                if not (out and all(refused_for_now(r) for r in out) and link.reroute(out[0])):
                    return out
                error = cast(redis.RedisError, out[0])
            except _Rerouted as rerouted:  # not sent
                error = rerouted.error
            now = asyncio.get_running_loop().time()
            deadline = now + link.refused_for if deadline is None else deadline
            if now >= deadline:
                link.errors.raise_error(error, "script get", False)
            await asyncio.sleep(min(pause, deadline - now))
            pause = min(2 * pause, _LAST_PAUSE)

    async def _exchange_one(self, data: list[bytes], replies: int, script: str | None) -> list[Any]:
        link = self.link
        await link.ensure_owner()
        if self.conn is not None and self.generation != link.generation:  # the slot moved: a new master
            await self.conn.disconnect()
            self.conn = None
            self.answered(None)
        if self.conn is None:
            pool = link.client().connection_pool
            self.conn = pool.connection_class(**pool.connection_kwargs)
            self.generation = link.generation
        conn = self.conn
        name = None if script is None else script + self.variant
        # the replies of posted commands are read with this exchange's (one round trip); those
        # that have arrived already are read first, one by one while more has arrived (never
        # waiting for one: a server that closed the connection shows here, and the command
        # then goes on a new one, unambiguously); all of them first if a script is to be loaded
        if self.unread and conn.is_connected:
            try:
                if name is not None and name not in link.loaded:
                    self.answered(await link.exchange(conn, [], self.unread, "a posted command", False))
                while self.unread and await _arrived(conn):
                    (reply,) = await link.exchange(conn, [], 1, "a posted command", False)
                    self.answered([reply], 1)
            except PressureError:
                pass  # the connection was dropped: the command below goes on a new one
        if self.unread and not conn.is_connected:
            self.answered(None)  # lost with the connection
        elif not self.unread and conn.is_connected and closed_by_server(conn):
            await conn.disconnect()  # closed while idle: the command goes on a new connection
        if not conn.is_connected:
            (self.redis_id,) = await link.exchange(conn, [pack_command("CLIENT", "ID")], 1, "CLIENT ID", False)
            if not isinstance(self.redis_id, int):
                self.redis_id = None
        if name is not None and name not in link.loaded:
            await link.load(conn, name)
            link.loaded.add(name)
        unread = self.unread
        try:
            out = await link.exchange(conn, data, unread + replies, "script get", True)
        except BaseException:
            if unread:
                self.answered(None)  # lost with the connection (exchange dropped it)
            raise
        if unread:
            self.answered(out[:unread])
            out = out[unread:]
        if name is not None and isinstance(out[0], redis.exceptions.NoScriptError):
            link.loaded.discard(name)
        return out

"""The asyncio side of pressure's connection layer: one handle's ``redis.asyncio`` pool, its
dedicated connections (one per concurrent blocking call, as the sync handle has one per
thread), script calls by SHA1 with the same sources as the sync client
(``connection._script_source``), and the one rule that makes it cancellation-safe:

Every exchange with the server (a send and the reads of its replies) runs in a task of its
own that the caller awaits through ``asyncio.shield``. A cancelled caller never interrupts
an exchange halfway, so no connection is ever left with a reply half read, and the
exchange's outcome is known to whoever cleans up after the caller (see
``AsyncQueue._abandon``). An exchange left running by a cancelled caller is kept
(``_Link.background``) until it ends; ``AsyncQueue.disconnect`` waits for those.

Error replies and failures are translated exactly as the sync client translates them
(``connection.Backend.raise_error``), so the same exceptions reach the caller.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.connection
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.sentinel
from redis.backoff import NoBackoff

from .. import _log
from ..cluster import settings_of_cluster
from ..sentinel import settings_of_sentinel_pool
from ..durability import Durability
from ..errors import BackendError
from .._wire import _peek, _readable
from ..connection import (
    BLOCK_SLICE,
    PASSWORD_ENV,
    SOCKET_CONNECT_TIMEOUT,
    SOCKET_TIMEOUT,
    Backend,
    ConnectionConfig,
    _script_sha,
    _script_source,
    pack_command,
    refused_for_now,
)

_R = TypeVar("_R")

#: The connection classes of redis-py's sync client and of its asyncio client, paired: a
#: handle's ConnectionConfig names the first (it is the sync handles' description of a server).
_CLASSES: tuple[tuple[type[Any], type[Any]], ...] = (
    # (a Sentinel-managed connection first: it is a subclass of the plain one)
    (redis.sentinel.SentinelManagedSSLConnection, redis.asyncio.sentinel.SentinelManagedSSLConnection),
    (redis.sentinel.SentinelManagedConnection, redis.asyncio.sentinel.SentinelManagedConnection),
    (redis.SSLConnection, redis.asyncio.connection.SSLConnection),
    (redis.UnixDomainSocketConnection, redis.asyncio.connection.UnixDomainSocketConnection),
    (redis.Connection, redis.asyncio.connection.Connection),
)
#: The pauses between sends of a command the server refused for now (LOADING, BUSY...).
_FIRST_PAUSE, _LAST_PAUSE = 0.01, 0.25


def config_of_client(client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster) -> ConnectionConfig:
    """The ConnectionConfig (sync classes) of the server an asyncio client connects to; of a
    ``RedisCluster``: its nodes and connection options (the handle makes its own
    connections to its slot's master, as a sync handle does)."""
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        settings, connection_class, options = settings_of_cluster(client)
        for sync_class, async_cls in _CLASSES:
            if issubclass(connection_class, async_cls):
                return ConnectionConfig(sync_class, options, cluster=settings, origin="connection=")
        raise ValueError(f"pressure.aio does not support {connection_class.__name__} connections")
    pool = client.connection_pool
    # a Sentinel master's pool: its sentinels (the master's address is theirs to give, never copied)
    sentinel = (settings_of_sentinel_pool(pool) if isinstance(pool, redis.asyncio.sentinel.SentinelConnectionPool)
                else None)
    for sync_class, async_class in _CLASSES:
        if issubclass(pool.connection_class, async_class):
            kwargs = {k: v for k, v in pool.connection_kwargs.items()
                      if isinstance(v, (str, int, float, bool, bytes, type(None)))
                      and (sentinel is None or k not in ("host", "port"))}
            return ConnectionConfig(sync_class, tuple(sorted(kwargs.items())), sentinel, origin="connection=")
    raise ValueError(f"pressure.aio does not support {pool.connection_class.__name__} connections")


def async_class(config: ConnectionConfig) -> type[Any]:
    """The redis.asyncio connection class for a handle's server."""
    for sync_class, async_cls in _CLASSES:
        if issubclass(config.connection_class, sync_class):
            return async_cls
    raise ValueError(f"pressure.aio does not support {config.url!r} ({config.connection_class.__name__} "
                     f"connections)")


class _Link:
    """One asyncio handle's connections to its server."""

    def __init__(self, config: ConnectionConfig,
                 client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster | None = None) -> None:
        self.config = config
        # on a cluster, the handle connects to its slot's master itself (with the client's options)
        self._given = client if isinstance(client, redis.asyncio.Redis) and config.cluster is None else None
        self._client: redis.asyncio.Redis | None = None
        #: translates errors as the sync client does; it never connects
        self.errors = Backend(config)
        #: the longest server-side wait: half the socket timeout at most, as in the sync client
        self.slice = BLOCK_SLICE
        self.refused_for = SOCKET_TIMEOUT
        #: exchanges and clean-ups left running by cancelled callers
        self.background: set[asyncio.Future[Any]] = set()
        #: the scripts loaded on the server (as far as this handle knows)
        self.loaded: set[str] = set()
        #: on a Redis Cluster: the master of the handle's slot (None: to be asked of the nodes),
        #: and how many times it changed (a dedicated connection made before is dropped)
        self._owner: tuple[str, int] | None = None
        self.generation = 0

    # -- a Redis Cluster: the slot's master ------------------------------------------

    def route(self, key: str, what: str) -> None:
        """On a Redis Cluster, send everything to the master of ``key``'s slot (ValueError
        at once if the key has no hash tag: see pressure.cluster.placed_slot)."""
        self.errors.route(key, what)

    async def ensure_owner(self) -> None:
        """On a Redis Cluster: know the slot's master (asked of the nodes, in a thread)."""
        if self.config.cluster is not None and self._owner is None:
            self._owner = await asyncio.to_thread(self.errors._owner_of_slot)

    def reroute(self, error: object) -> bool:
        """On a Redis Cluster, after a refusal or a failure: point the handle at the slot's new
        master (a MOVED names it; a node not reached, CLUSTERDOWN or READONLY: ask the nodes
        again). True if the next command goes elsewhere (ASK and TRYAGAIN change nothing)."""
        if self.config.cluster is None:
            return False
        if isinstance(error, redis.exceptions.MovedError):
            owner: tuple[str, int] | None = (error.host or (self._owner or ("127.0.0.1", 0))[0], int(error.port))
            if owner == self._owner:
                return False
        elif isinstance(error, (redis.exceptions.AskError, redis.exceptions.TryAgainError)):
            return False
        elif isinstance(error, (redis.ConnectionError, redis.exceptions.ClusterDownError,
                                redis.exceptions.ReadOnlyError)):
            owner = None
        else:
            return False
        self._owner = owner
        self.generation += 1
        self.loaded = set()
        client, self._client = self._client, None
        if client is not None and client is not self._given:
            self.keep(asyncio.ensure_future(_close(client)))
        return True

    def client(self) -> redis.asyncio.Redis:
        """The pool client (built on first use)."""
        client = self._client
        if client is None:
            if self._given is not None:
                client = self._given
            else:
                import os

                kw = dict(self.config.kwargs)
                if self.config.cluster is not None:
                    if self._owner is None:
                        raise BackendError(f"the master of the queue's slot on {self.config.url} was "
                                           f"not asked yet (ensure_owner)")
                    kw["host"], kw["port"] = self._owner
                if not kw.get("password") and os.environ.get(PASSWORD_ENV):
                    kw["password"] = os.environ[PASSWORD_ENV]
                kw.setdefault("socket_connect_timeout", SOCKET_CONNECT_TIMEOUT)
                if kw.get("socket_timeout") is None:
                    kw["socket_timeout"] = SOCKET_TIMEOUT
                if self.config.sentinel is not None:
                    client = _sentinel_master(self.config, kw)
                else:
                    pool = redis.asyncio.ConnectionPool(connection_class=async_class(self.config), **kw)
                    client = redis.asyncio.Redis(connection_pool=pool)
            timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
            # a blocking command must end on the server before the socket gives up on it
            self.slice = BLOCK_SLICE if not timeout else min(BLOCK_SLICE, float(timeout) / 2)
            self.refused_for = float(timeout) if timeout else SOCKET_TIMEOUT
            self._client = client
        return client

    # -- shielded exchanges ---------------------------------------------------------

    async def shielded(self, coro: Coroutine[Any, Any, _R]) -> _R:
        """Await ``coro`` in a task of its own that the caller's cancellation never interrupts
        (it runs to its end, kept in ``background``)."""
        return await self.shielded_task(asyncio.ensure_future(coro))

    async def shielded_task(self, task: asyncio.Future[_R]) -> _R:
        """Await ``task`` through ``asyncio.shield``; if the caller is cancelled, keep it."""
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self.keep(task)
            raise

    def keep(self, task: asyncio.Future[Any]) -> None:
        """Hold a reference to a task until it ends (its outcome is someone else's concern)."""
        if task.done():
            _consume(task)
            return
        self.background.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Future[Any]) -> None:
        self.background.discard(task)
        _consume(task)

    async def exchange(self, conn: Any, data: Sequence[bytes], replies: int, what: str,
                       mutating: bool = True) -> list[Any]:
        """Send ``data`` on ``conn`` and read ``replies`` replies; an error reply is returned
        as the exception object (the replies behind it are still read). A failure to send
        raises BackendError (it did not run); a failure to read raises OutcomeUnknown if
        ``mutating`` (else BackendError), and drops the connection."""
        try:
            if not conn.is_connected:
                await conn.connect()
            if data:
                await conn.send_packed_command(list(data), check_health=False)
        except redis.RedisError as exc:
            await conn.disconnect()
            if self.reroute(exc):
                raise _Rerouted(exc) from exc  # not sent: it did not run, and may elsewhere
            self.errors.raise_error(exc, what, False)  # not sent: it did not run
        except BaseException:
            await conn.disconnect()
            raise
        out: list[Any] = []
        try:
            for _ in range(replies):
                try:
                    out.append(await conn.read_response())
                except redis.ResponseError as exc:  # an error reply: the connection is fine
                    out.append(exc)
        except redis.RedisError as exc:
            await conn.disconnect()
            if refused_for_now(exc):
                out += [exc] * (replies - len(out))
                return out
            self.reroute(exc)  # the next command asks where the slot is served now
            self.errors.raise_error(exc, what, mutating)
        except BaseException:
            await conn.disconnect()
            raise
        return out

    async def load(self, conn: Any, name: str) -> None:
        """SCRIPT LOAD script ``name`` (the sync client's own source) on ``conn``."""
        what = f"SCRIPT LOAD {name}"
        (reply,) = await self.exchange(conn, [pack_command("SCRIPT", "LOAD", _script_source(name))], 1,
                                       what, False)
        self.check(reply, what, False)

    def check(self, reply: Any, what: str, mutating: bool) -> Any:
        """A reply, or its error raised as pressure's."""
        if isinstance(reply, redis.RedisError):
            self.errors.raise_error(reply, what, mutating)
        return reply

    async def until_served(self, what: str, attempt: Any) -> Any:
        """``await attempt()``, again after a pause while the server refuses it for now (its
        reply is such an error), for up to ``refused_for`` seconds."""
        deadline = None
        pause = _FIRST_PAUSE
        while True:
            reply = await attempt()
            if not refused_for_now(reply):
                return reply
            if self.reroute(reply):
                raise _Rerouted(cast(redis.RedisError, reply))  # it did not run: sent again on a connection to the new master
            now = asyncio.get_running_loop().time()
            if deadline is None:
                deadline = now + self.refused_for
                _log.event(_log.CONNECTION, logging.WARNING, "retry", "%s on %s refused for now (%s): sent "
                           "again for up to %g s", what, self.config.url, reply, self.refused_for,
                           server=self.config.url, command=what, error=str(reply))
            if now >= deadline:
                self.errors.raise_error(reply, what, False)
            await asyncio.sleep(min(pause, deadline - now))
            pause = min(2 * pause, _LAST_PAUSE)

    async def script_on(self, conn: Any, name: str, data: Sequence[bytes], *,
                        mutating: bool = True, durability: Durability | None = None) -> Any:
        """Run one script call (packed, maybe in chunks) on ``conn``, loading the script on
        NOSCRIPT; with ``durability``, a WAIT behind it in the same send (NotReplicated as
        the sync client raises it). Not shielded: run it inside ``shielded``."""
        what = f"script {name}"
        sent = [*data, pack_command("WAIT", durability.replicas, durability.timeout_ms)] if durability else data
        confirmed: list[Any] = [None]

        async def attempt() -> Any:
            replies = await self.exchange(conn, sent, len(sent) - len(data) + 1, what, mutating)
            if isinstance(replies[0], redis.exceptions.NoScriptError):
                await self.load(conn, name)
                replies = await self.exchange(conn, sent, len(sent) - len(data) + 1, what, mutating)
            reply = replies[0]
            confirmed[0] = replies[1] if len(replies) > 1 else None
            if not isinstance(reply, redis.RedisError):
                self.loaded.add(name)  # a call of it ran: it is there (posted calls may use it)
            return reply

        result = self.check(await self.until_served(what, attempt), what, mutating)
        if durability is not None:
            self.errors.check_replicated(what, confirmed[0], durability)
        return result

    async def pooled_script(self, name: str, data: Sequence[bytes], *, mutating: bool = True,
                            durability: Durability | None = None) -> Any:
        """A script call (packed) on a pool connection. Not shielded."""
        return await self._pooled(f"script {name}", lambda conn: self.script_on(
            conn, name, data, mutating=mutating, durability=durability))

    async def run(self, name: str, keys: Sequence[str], args: Sequence[Any], *,
                  mutating: bool = True, durability: Durability | None = None) -> Any:
        """Run script ``name`` on a pool connection, shielded (``durability``: see ``script_on``)."""
        data = pack_command("EVALSHA", _script_sha(name), len(keys), *keys, *args)
        return await self.shielded(self.pooled_script(name, [data], mutating=mutating, durability=durability))

    async def command(self, what: str, *args: bytes | str | int, mutating: bool = False) -> Any:
        """Run one plain command on a pool connection, shielded."""
        data = pack_command(*args)

        async def one(conn: Any) -> Any:
            (reply,) = await self.exchange(conn, [data], 1, what, mutating)
            return reply

        return self.check(await self.shielded(self._pooled(what, one)), what, mutating)

    async def transaction(self, what: str, commands: Sequence[Sequence[bytes | str | int]], *,
                          mutating: bool = False) -> list[Any]:
        """Run ``commands`` atomically (MULTI ... EXEC, one exchange on a pool connection,
        shielded), as a sync handle's ``pipeline(transaction=True)``: their replies, as the
        server sends them; an error reply raised as pressure's."""
        data = [pack_command("MULTI"), *(pack_command(*command) for command in commands), pack_command("EXEC")]

        async def one(conn: Any) -> Any:
            replies = await self.exchange(conn, data, len(data), what, mutating)
            for reply in replies[:-1]:  # MULTI's OK and QUEUED, or why a command was refused
                self.check(reply, what, mutating)
            return replies[-1]

        replies = self.check(await self.shielded(self._pooled(what, one)), what, mutating)
        for reply in replies:
            self.check(reply, what, mutating)
        return list(replies)

    async def _pooled(self, what: str, work: Any) -> Any:
        """``await work(conn)`` with a pool connection. Connecting is part of taking one (the
        pool connects it): a failure there sent nothing, so it is a BackendError, and on a
        Redis Cluster it points the handle at the slot's new master, as a failure to send
        does. Sent again while the command did not run for such a reason (a new master, or a
        server that refuses for now), for up to ``refused_for`` seconds."""
        deadline = None
        pause = _FIRST_PAUSE
        while True:
            await self.ensure_owner()
            pool = self.client().connection_pool
            try:
                conn = await pool.get_connection()  # type: ignore[no-untyped-call]
            except redis.RedisError as exc:  # not connected (the pool took it back): nothing sent
                if not (self.reroute(exc) or refused_for_now(exc)):
                    self.errors.raise_error(exc, what, False)
                error: redis.RedisError = exc
            else:
                try:
                    if closed_by_server(conn):
                        await conn.disconnect()  # work's exchange connects it again, first
                    return await work(conn)
                except _Rerouted as rerouted:  # on a cluster: it did not run; again on the new master
                    error = rerouted.error
                finally:
                    await pool.release(conn)
            now = asyncio.get_running_loop().time()
            deadline = now + self.refused_for if deadline is None else deadline
            if now >= deadline:
                self.errors.raise_error(error, what, False)
            await asyncio.sleep(min(pause, deadline - now))
            pause = min(2 * pause, _LAST_PAUSE)

    async def close(self) -> None:
        """Wait for what cancelled callers left running, then close the pool (never a client
        passed in)."""
        while self.background:
            await asyncio.gather(*list(self.background), return_exceptions=True)
        client, self._client = self._client, None
        if client is not None and client is not self._given:
            await _close(client)


def _sentinel_master(config: ConnectionConfig, kw: dict[str, Any]) -> redis.asyncio.Redis:
    """A redis.asyncio client of the master that ``config``'s sentinels name (asked again on
    each new connection, so after a failover too), as the sync ``ConnectionConfig.new_client``
    makes one: a sentinel that does not answer is skipped for the next one."""
    settings = config.sentinel
    assert settings is not None
    skw = settings.sentinel_kwargs(kw)
    skw["retry"] = redis.asyncio.retry.Retry(NoBackoff(), 0)
    make: Any = redis.asyncio.sentinel.Sentinel  # untyped in redis-py
    sentinel = make(list(settings.addresses), min_other_sentinels=settings.min_other_sentinels,
                    sentinel_kwargs=skw, force_master_ip=settings.force_master_ip)
    master: redis.asyncio.Redis = sentinel.master_for(settings.service, connection_class=async_class(config),
                                                      retry=redis.asyncio.retry.Retry(NoBackoff(), 0), **kw)
    return master


def _raw_socket(conn: Any) -> Any:
    writer = getattr(conn, "_writer", None)
    return writer.transport.get_extra_info("socket") if writer is not None else None


def socket_readable(conn: Any) -> bool:
    """Whether the kernel holds data or an end of file for ``conn`` that the event loop may not
    have read yet (a zero-timeout poll: nothing is read)."""
    raw = _raw_socket(conn)
    if raw is None:
        return False
    try:
        return _readable(raw.fileno())
    except (OSError, ValueError):
        return True  # gone: reading shows how


def closed_by_server(conn: Any) -> bool:
    """Whether the server has closed ``conn`` while it sat idle with nothing to read (a
    restart, a CLIENT KILL, an idle timeout): its end of file waits on the socket, which the
    event loop may not have read yet (redis-py's own check, made when the pool hands a
    connection out, sees only what the loop has read). A poll, then a peek (``_peek``, as the
    sync handle's): nothing is read. A command sent into such a connection fails only when its
    reply is read, as OutcomeUnknown; found here, it goes on a new connection, unambiguously."""
    if not socket_readable(conn):  # the usual case, with nothing more than a poll
        return False
    raw = _raw_socket(conn)
    try:
        sock = socket.socket(raw.family, raw.type, fileno=raw.fileno())  # the same socket, not a copy
    except (OSError, AttributeError, ValueError):
        return True  # gone: the command goes on a new connection
    try:
        return _peek(sock) == b""
    finally:
        sock.detach()  # the transport's: never closed here


class _Rerouted(Exception):
    """On a Redis Cluster: a command that did not run, refused or not sent by a node that no
    longer serves the slot; the handle now points at the new master (``_Link.reroute``)."""

    def __init__(self, error: redis.RedisError) -> None:
        super().__init__(str(error))
        self.error = error


async def _close(client: redis.asyncio.Redis) -> None:
    await client.aclose()
    await client.connection_pool.disconnect()  # a pool passed to Redis() is not closed with it
    manager = getattr(client.connection_pool, "sentinel_manager", None)
    for sentinel in getattr(manager, "sentinels", ()):  # a Sentinel master's: its sentinels' clients too
        await sentinel.aclose()


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()

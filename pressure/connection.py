"""Where the queue's Redis is, and one process's connection to it.

``ConnectionConfig`` is a picklable description of the server (so a queue
handle can cross to another process or host); ``Backend`` turns it into
connections once per process (and thread), runs the Lua scripts with EVALSHA
(loading them on NOSCRIPT), and turns redis-py errors into pressure's typed
errors.

Our own clients never retry a command by themselves: redis-py 8 retries on
timeouts by default, and re-sending a script whose reply was lost would
push an item twice. A client passed in as ``connection`` keeps its own
settings; give it ``retry=Retry(NoBackoff(), 0)`` for the same guarantee.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import os
import select
import socket
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import identity
from .errors import BackendError, OutcomeUnknown, ProtocolError

__all__ = ["ConnectionConfig", "Backend", "PackedScript", "SCRIPT_NAMES"]

#: The longest single server-side wait; blocking calls loop over such waits,
#: re-checking their deadline, so no wait is ever "0 = forever".
BLOCK_SLICE = 1.0
#: Defaults for clients pressure builds itself.
SOCKET_CONNECT_TIMEOUT = 3.0
SOCKET_TIMEOUT = 5.0

SCRIPT_NAMES = (
    "create",
    "put",
    "get",
    "ack",
    "requeue",
    "restore",
    "repair",
    "kick",
    "close",
    "drain",
    "join_check",
    "info",
    "set_bound",
    "delete",
    "forget",
    "touch",
    "claim",
    "unclaim",
    "cancel",
    "log_append",
    "log_commit",
)

# connection kwargs that are plain data and survive pickling
_PLAIN = (str, int, float, bool, bytes, type(None))
_DROP = {"retry", "retry_on_error", "connection_pool", "orig_host_address", "orig_socket_timeout",
         "orig_socket_connect_timeout"}


@functools.cache
def _script_source(name: str) -> str:
    """The text of script ``<script>`` (a FIFO queue's) or ``<script>@lifo`` /
    ``<script>@priority``: the shared functions of lua/lib.lua, the item
    functions for the queue's kind (lua/items_list.lua or lua/items_zset.lua),
    then the script itself. Each kind is a script of its own (its own SHA1),
    so no script asks at run time what kind of queue it serves."""
    script, _, kind = name.partition("@")
    folder = importlib.resources.files("pressure") / "lua"
    if kind in ("", "fifo"):
        items = (folder / "items_list.lua").read_text("utf-8")
    elif kind in ("lifo", "priority"):
        items = f"local LIFO = {'true' if kind == 'lifo' else 'false'}\n" + (
            folder / "items_zset.lua").read_text("utf-8")
    else:
        raise ValueError(f"no such kind of queue: {kind!r}")
    return "\n".join(((folder / "lib.lua").read_text("utf-8"), items,
                       (folder / f"{script}.lua").read_text("utf-8")))


@functools.cache
def _script_sha(name: str) -> str:
    return hashlib.sha1(_script_source(name).encode()).hexdigest()


#: An argument at least this long is sent as it is, not copied into the command's buffer.
_LARGE = 16384


def _bulk(value: bytes | str | int) -> bytes:
    if isinstance(value, (str, int)):
        return _bulk_name(value)
    return b"$%d\r\n%b\r\n" % (len(value), value)  # a payload: never cached


@functools.lru_cache(maxsize=1024)
def _bulk_name(value: str | int) -> bytes:
    """A key, identifier, mode or number, encoded once: the same few recur on every call."""
    data = value.encode() if isinstance(value, str) else b"%d" % value
    return b"$%d\r\n%b\r\n" % (len(data), data)


class PackedScript:
    """A script call whose constant part is encoded once: the RESP array header,
    EVALSHA, the script's SHA1, the key count and the queue's fixed keys. Each
    call appends only what varies (per-thread keys and ARGV)."""

    __slots__ = ("name", "_head", "_tail_len", "_parts", "_count")

    def __init__(self, name: str, fixed_keys: Sequence[str], extra_keys: int, args: int) -> None:
        self.name = name
        parts = [b"EVALSHA", _script_sha(name).encode(), b"%d" % (len(fixed_keys) + extra_keys),
                 *(key.encode() for key in fixed_keys)]
        self._tail_len = extra_keys + args
        self._count = len(parts)
        self._parts = b"".join(map(_bulk, parts))
        self._head = b"*%d\r\n" % (self._count + self._tail_len) + self._parts

    def pack(self, tail: Sequence[bytes | str | int]) -> bytes:
        """The whole command, ``tail`` being the per-call keys and arguments."""
        if len(tail) != self._tail_len:
            raise TypeError(f"script {self.name} takes {self._tail_len} more arguments, not {len(tail)}")
        return self._head + b"".join(map(_bulk, tail))

    def pack_items(self, tail: Sequence[bytes | str | int], items: Sequence[bytes]) -> list[bytes]:
        """The whole command with the usual arguments and then ``items`` (put_many's), as
        chunks to send one after the other: small items are joined, a large one is a chunk
        of its own, never copied."""
        if len(tail) != self._tail_len:
            raise TypeError(f"script {self.name} takes {self._tail_len} more arguments, not {len(tail)}")
        chunks: list[bytes] = []
        small = [b"*%d\r\n" % (self._count + len(tail) + len(items)), self._parts, *map(_bulk, tail)]
        for item in items:
            if len(item) < _LARGE:
                small.append(b"$%d\r\n%b\r\n" % (len(item), item))
            else:
                small.append(b"$%d\r\n" % len(item))
                chunks += (b"".join(small), item)
                small = [b"\r\n"]
        chunks.append(b"".join(small))
        return chunks


def _closed_by_peer(conn: redis.connection.AbstractConnection) -> bool:
    """Whether the server has already closed this idle connection (a pending EOF).

    A zero-timeout poll first (a socket with a timeout would otherwise wait that long
    inside recv), then a peek: nothing is read, and a healthy idle connection has
    nothing to read.
    """
    sock = getattr(conn, "_sock", None)
    if not isinstance(sock, socket.socket):  # not connected (or an in-process fake)
        return False
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False
        return bool(sock.recv(1, socket.MSG_PEEK) == b"")
    except OSError:
        return True


class _ThreadState(threading.local):
    pid = -1
    connection: redis.connection.AbstractConnection | None = None
    client_id: str | None = None


@dataclass(frozen=True)
class ConnectionConfig:
    """A picklable description of a Redis server: a connection class and its plain kwargs."""

    connection_class: type[redis.connection.AbstractConnection]
    kwargs: tuple[tuple[str, Any], ...] = field(default=())

    @classmethod
    def resolve(cls, url: str | None = None, connection: redis.Redis | None = None) -> ConnectionConfig:
        """The server of a handle: ``url``, or the pool of ``connection`` (not both), else
        ``from_environment()``."""
        if url is not None and connection is not None:
            raise ValueError("pass either url or connection, not both")
        if connection is not None:
            return cls.from_pool(connection.connection_pool)
        if url is not None:
            return cls.from_url(url)
        return cls.from_environment()

    @classmethod
    def from_url(cls, url: str) -> ConnectionConfig:
        """Parse a ``redis://``, ``rediss://`` or ``unix://`` URL."""
        try:
            pool = redis.ConnectionPool.from_url(url)
        except ValueError as exc:
            raise ValueError(f"invalid Redis URL {url!r}: {exc}") from None
        return cls.from_pool(pool)

    @classmethod
    def from_pool(cls, pool: redis.ConnectionPool) -> ConnectionConfig:
        kwargs = {
            k: v
            for k, v in pool.connection_kwargs.items()
            if k not in _DROP and isinstance(v, _PLAIN)
        }
        return cls(pool.connection_class, tuple(sorted(kwargs.items())))

    @classmethod
    def from_environment(cls, env: os._Environ[str] | dict[str, str] = os.environ) -> ConnectionConfig:
        """``REDIS_URL``, else the spec's ``REDIS_SERVER``/``REDIS_PORT``/``REDIS_DB``, else defaults."""
        if env.get("REDIS_URL"):
            return cls.from_url(env["REDIS_URL"])
        host = env.get("REDIS_SERVER") or "127.0.0.1"
        port = env.get("REDIS_PORT") or "6379"
        db = env.get("REDIS_DB") or "0"
        for var, value in (("REDIS_PORT", port), ("REDIS_DB", db)):
            if not value.isdigit():
                raise ValueError(f"{var} must be a non-negative integer, not {value!r}")
        return cls(redis.Connection, (("db", int(db)), ("host", host), ("port", int(port))))

    @property
    def url(self) -> str:
        """A URL naming the server, without the password."""
        kw = dict(self.kwargs)
        db = kw.get("db", 0)
        if "path" in kw:
            return f"unix://{kw['path']}?db={db}"
        scheme = "rediss" if issubclass(self.connection_class, redis.SSLConnection) else "redis"
        user = f"{quote(str(kw['username']))}@" if kw.get("username") else ""
        return f"{scheme}://{user}{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{db}"

    def new_client(self) -> redis.Redis:
        kw = dict(self.kwargs)
        kw.setdefault("socket_connect_timeout", SOCKET_CONNECT_TIMEOUT)
        if kw.get("socket_timeout") is None:
            kw["socket_timeout"] = SOCKET_TIMEOUT
        pool = redis.ConnectionPool(
            connection_class=self.connection_class, retry=Retry(NoBackoff(), 0), **kw
        )
        return redis.Redis(connection_pool=pool)


class Backend:
    """One process's connections to one server: a redis-py client for occasional
    commands, and one connection per thread for the hot paths (no pool lock).

    A forked child notices the pid change and builds its own, so no socket is
    ever shared across processes. A client passed in by the user is used as is
    (its settings also make the per-thread connections) and never closed.
    """

    def __init__(self, config: ConnectionConfig, client: redis.Redis | None = None) -> None:
        self.config = config
        self._given = client
        self._given_pid = os.getpid()
        self._lock = threading.Lock()
        self._pid = -1
        self._client: redis.Redis | None = None
        self._loaded: set[str] = set()
        self._thread = _ThreadState()
        self._thread_connections: weakref.WeakSet[redis.connection.AbstractConnection] = weakref.WeakSet()
        self.slice = BLOCK_SLICE

    def client(self) -> redis.Redis:
        """The client for this process (built on first use, and again after a fork)."""
        client = self._client
        if client is None or self._pid != os.getpid():
            client = self._connect()
        return client

    def _connect(self) -> redis.Redis:
        with self._lock:
            pid = os.getpid()
            if self._client is not None and self._pid == pid:
                return self._client
            if self._given is not None and pid == self._given_pid:
                client = self._given
            else:
                client = self.config.new_client()
            timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
            # a blocking command must end on the server before the socket gives up,
            # or its reply (maybe a popped token or item) is lost
            self.slice = BLOCK_SLICE if not timeout else min(BLOCK_SLICE, float(timeout) / 2)
            self._loaded = set()
            self._client, self._pid = client, pid
            return client

    def run(self, name: str, keys: tuple[str, ...] | list[str], args: tuple[Any, ...] | list[Any],
            *, mutating: bool = True) -> Any:
        """Run one script with EVALSHA (loaded on NOSCRIPT), translating errors."""
        client = self._client
        if client is None or self._pid != os.getpid():
            client = self._connect()
        try:
            try:
                return client.execute_command("EVALSHA", _script_sha(name), len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                self._load_on(self.thread_connection(), name)  # scripts are loaded server-wide
                return client.execute_command("EVALSHA", _script_sha(name), len(keys), *keys, *args)
        except redis.RedisError as exc:
            self.raise_error(exc, f"script {name}", mutating)

    def thread_connection(self) -> redis.connection.AbstractConnection:
        """This thread's own connection: the hot path takes no pool lock."""
        state = self._thread
        conn = state.connection
        if conn is None or state.pid != os.getpid():
            pool = self.client().connection_pool
            conn = pool.connection_class(**pool.connection_kwargs)
            self._thread_connections.add(conn)
            state.connection, state.pid = conn, os.getpid()
        return conn

    def thread_client_id(self) -> str:
        """The default client identifier of the calling thread (cached per thread and process)."""
        state = self._thread
        if state.client_id is None or state.pid != os.getpid():
            self.thread_connection()
            state.client_id = identity.client_id()
        return state.client_id

    def _send(self, conn: redis.connection.AbstractConnection, data: list[bytes], what: str) -> None:
        """Send a whole command. If sending fails, the server never got all of it, so it never
        ran: on a stale connection (a restarted server, a killed connection) try once more on
        a fresh one; any failure is a BackendError, never OutcomeUnknown."""
        if _closed_by_peer(conn):
            conn.disconnect()  # e.g. the server restarted: reconnect rather than send into it
            self._loaded.clear()  # and a restarted server has no scripts loaded
        try:
            conn.send_packed_command(data, check_health=False)
            return
        except redis.ConnectionError:
            pass  # redis-py closed it: the next send connects again
        except redis.RedisError as exc:  # a timeout writing to an unresponsive server
            self.raise_error(exc, what, False)
        try:
            conn.send_packed_command(data, check_health=False)
        except redis.RedisError as exc:
            self.raise_error(exc, what, False)

    def _read(self, conn: redis.connection.AbstractConnection, what: str, mutating: bool) -> Any:
        """Read one reply; after an error reply that ends the connection, drop it."""
        try:
            return conn.read_response()
        except redis.exceptions.NoScriptError:
            raise
        except redis.ResponseError as exc:
            if str(exc).startswith("Protocol error"):
                conn.disconnect()  # the server closes the connection after it
            self.raise_error(exc, what, mutating)
        except redis.RedisError as exc:
            self.raise_error(exc, what, mutating)

    def script(self, command: PackedScript, tail: Sequence[bytes | str | int], *,
               mutating: bool = True, items: Sequence[bytes] = ()) -> Any:
        """Run a packed script on this thread's connection (one round trip), loading it on
        NOSCRIPT. ``items``: more arguments after the usual ones (PackedScript.pack_items)."""
        conn = self.thread_connection()
        data = command.pack_items(tail, items) if items else [command.pack(tail)]
        what = f"script {command.name}"
        self._send(conn, data, what)
        try:
            return self._read(conn, what, mutating)
        except redis.exceptions.NoScriptError:
            self._load_on(conn, command.name)
            self._send(conn, data, what)
            return self._read(conn, what, mutating)

    def pipeline(self, calls: Sequence[tuple[PackedScript, Sequence[bytes | str | int]]]) -> list[Any]:
        """Run several packed scripts in one round trip on this thread's connection, in order.

        Returns one reply per call; a script's error reply is returned as the exception
        object (the others still ran). Scripts not loaded on the server are loaded first,
        and calls refused with NOSCRIPT (they did not run: a restarted or flushed server)
        are sent again once their scripts are loaded.
        """
        conn = self.thread_connection()
        for command, _ in calls:
            if command.name not in self._loaded:
                self._load_on(conn, command.name)
        replies = self._pipeline_once(conn, calls)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, redis.exceptions.NoScriptError)]
        if missing:
            self._loaded.clear()
            for name in {calls[i][0].name for i in missing}:
                self._load_on(conn, name)
            again = self._pipeline_once(conn, [calls[i] for i in missing])
            for i, reply in zip(missing, again):
                replies[i] = reply
        return replies

    def _pipeline_once(self, conn: redis.connection.AbstractConnection,
                       calls: Sequence[tuple[PackedScript, Sequence[bytes | str | int]]]) -> list[Any]:
        what = "pipelined scripts " + ", ".join(command.name for command, _ in calls)
        self._send(conn, [b"".join(command.pack(tail) for command, tail in calls)], what)
        replies: list[Any] = []
        try:
            for _ in calls:
                try:
                    replies.append(conn.read_response())
                except redis.ResponseError as exc:
                    replies.append(exc)
        except redis.RedisError as exc:
            self.raise_error(exc, what, True)
        return replies

    def script_then_blmove(self, command: PackedScript, tail: Sequence[bytes | str | int],
                           source: str, destination: str, timeout: float) -> tuple[Any, Any]:
        """Send a script and ``BLMOVE source destination RIGHT LEFT timeout`` in one
        pipeline (one round trip) on this thread's connection.

        Returns ``(script result, BLMOVE reply)``; a script error reply is
        returned as the exception object, after the BLMOVE has answered. The
        script must leave something in ``source`` unless the caller is meant
        to wait there, or the BLMOVE waits ``timeout``. Used for the blocking get.
        """
        conn = self.thread_connection()
        data = [command.pack(tail) + b"*6\r\n$6\r\nBLMOVE\r\n" + _bulk(source) + _bulk(destination)
                + b"$5\r\nRIGHT\r\n$4\r\nLEFT\r\n" + _bulk(repr(timeout))]
        what = f"script {command.name} and BLMOVE"
        if command.name not in self._loaded:  # a NOSCRIPT here would cost a whole BLMOVE wait
            self._load_on(conn, command.name)
        self._send(conn, data, what)
        first: Any
        try:
            try:
                first = conn.read_response()
            except redis.ResponseError as exc:
                first = exc
            second = conn.read_response()
        except redis.RedisError as exc:
            self.raise_error(exc, what, True)
        if isinstance(first, redis.exceptions.NoScriptError):
            self._loaded.discard(command.name)
        return first, second

    def _load_on(self, conn: redis.connection.AbstractConnection, name: str) -> None:
        what = f"SCRIPT LOAD {name}"
        self._send(conn, [b"".join(conn.pack_command("SCRIPT", "LOAD", _script_source(name)))], what)
        if self._read(conn, what, False) not in (_script_sha(name), _script_sha(name).encode()):
            raise ProtocolError(f"the server hashed script {name} differently")
        self._loaded.add(name)

    def call(self, what: str, fn: Any, *args: Any, mutating: bool = False, **kwargs: Any) -> Any:
        """Call a redis-py method, translating errors."""
        try:
            return fn(*args, **kwargs)
        except redis.RedisError as exc:
            self.raise_error(exc, what, mutating)

    def raise_error(self, exc: redis.RedisError, what: str, mutating: bool) -> NoReturn:
        where = self.config.url
        if isinstance(exc, redis.ResponseError):
            text = str(exc)
            if "invalid bulk length" in text:
                raise BackendError(f"{what} on {where}: the server refused the command as larger than "
                                   f"it accepts (its proto-max-bulk-len): {text}") from exc
            if "WRONGTYPE" in text or text.startswith("PRESSURE") or "PRESSURE " in text:
                raise ProtocolError(f"{what} on {where}: {text}") from exc
            raise BackendError(f"{what} on {where} failed: {text}") from exc
        text = str(exc)
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            self._loaded.clear()  # a restarted or failed-over server has no scripts loaded
        never_sent = "connecting to" in text or "connect" in text.lower() and "refused" in text.lower()
        if mutating and not never_sent and isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            raise OutcomeUnknown(
                f"{what} on {where}: the connection failed after the command was sent, "
                f"so it may or may not have run ({text})"
            ) from exc
        raise BackendError(f"{what} on {where} failed: {text}") from exc

    def disconnect(self) -> None:
        """Close the connections this backend opened (never a client passed in)."""
        with self._lock:
            client, self._client, self._pid = self._client, None, -1
            connections = list(self._thread_connections)
            self._thread_connections = weakref.WeakSet()
            self._thread = _ThreadState()
        for conn in connections:
            conn.disconnect()
        if client is not None and client is not self._given:
            client.connection_pool.disconnect()

"""Where the queue's Redis is, and one process's connection to it.

``ConnectionConfig`` is a picklable description of the server (so a queue
handle can cross to another process or host); ``Backend`` turns it into a
redis-py client once per process, registers the Lua scripts on it, and turns
redis-py errors into pressure's typed errors.

Our own clients never retry a command by themselves: redis-py 8 retries on
timeouts by default, and re-sending a script whose reply was lost would
push an item twice. A client passed in as ``connection`` keeps its own
settings; give it ``retry=Retry(NoBackoff(), 0)`` for the same guarantee.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import threading
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.commands.core import Script
from redis.retry import Retry

from .errors import BackendError, OutcomeUnknown, ProtocolError

__all__ = ["ConnectionConfig", "Backend", "SCRIPT_NAMES"]

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
    "get_finish",
    "release",
    "close",
    "drain",
    "task_done",
    "join_check",
    "info",
    "set_bound",
    "delete",
)

# connection kwargs that are plain data and survive pickling
_PLAIN = (str, int, float, bool, bytes, type(None))
_DROP = {"retry", "retry_on_error", "connection_pool", "orig_host_address", "orig_socket_timeout",
         "orig_socket_connect_timeout"}


@functools.cache
def _script_source(name: str) -> str:
    return (importlib.resources.files("pressure") / "lua" / f"{name}.lua").read_text("utf-8")


@dataclass(frozen=True)
class ConnectionConfig:
    """A picklable description of a Redis server: a connection class and its plain kwargs."""

    connection_class: type[redis.connection.AbstractConnection]
    kwargs: tuple[tuple[str, Any], ...] = field(default=())

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
    """One process's client for one server, with the Lua scripts registered on it.

    A forked child notices the pid change and builds its own client, so no
    socket is ever shared across processes. A client passed in by the user is
    used as is and never closed.
    """

    def __init__(self, config: ConnectionConfig, client: redis.Redis | None = None) -> None:
        self.config = config
        self._given = client
        self._given_pid = os.getpid()
        self._lock = threading.Lock()
        self._pid = -1
        self._client: redis.Redis | None = None
        self.scripts: dict[str, Script] = {}
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
            self.scripts = {name: client.register_script(_script_source(name)) for name in SCRIPT_NAMES}
            self._client, self._pid = client, pid
            return client

    def run(self, name: str, keys: tuple[str, ...] | list[str], args: tuple[Any, ...] | list[Any],
            *, mutating: bool = True) -> Any:
        """Run one script (EVALSHA, reloaded on NOSCRIPT), translating errors."""
        if self._client is None or self._pid != os.getpid():
            self._connect()
        try:
            return self.scripts[name](keys, args)
        except redis.RedisError as exc:
            self.raise_error(exc, f"script {name}", mutating)

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
            if "WRONGTYPE" in text or text.startswith("PRESSURE") or "PRESSURE " in text:
                raise ProtocolError(f"{what} on {where}: {text}") from exc
            raise BackendError(f"{what} on {where} failed: {text}") from exc
        text = str(exc)
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
        if client is not None and client is not self._given:
            client.connection_pool.disconnect()

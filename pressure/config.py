"""Where the queue's Redis is: ``ConnectionConfig``, a picklable description of the
server (so a queue handle can cross to another process or host), resolved from ``url=``, a
``connection=`` client's pool or the environment (``REDIS_URL``, or the spec's
``REDIS_SERVER``/``REDIS_PORT``/``REDIS_DB``), and the clients pressure builds from it
(never retrying a command by themselves: see pressure.connection).

``pressure.connection`` re-exports every name here.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import redis
import redis.cluster
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import cluster as _cluster
from .cluster import ClusterSettings, SlotPool
from .sentinel import SCHEMES as SENTINEL_SCHEMES
from .sentinel import SentinelSettings, parse_sentinel_url, settings_of_pool

__all__ = ["ConnectionConfig", "without_password", "PASSWORD_ENV", "SOCKET_CONNECT_TIMEOUT", "SOCKET_TIMEOUT"]

#: Defaults for clients pressure builds itself.
SOCKET_CONNECT_TIMEOUT = 3.0
SOCKET_TIMEOUT = 5.0

# connection kwargs that are plain data and survive pickling
_PLAIN = (str, int, float, bool, bytes, type(None))
_DROP = {"retry", "retry_on_error", "connection_pool", "orig_host_address", "orig_socket_timeout",
         "orig_socket_connect_timeout"}


def without_password(text: str) -> str:
    """``text`` with the password of any URL in it masked: ``redis://user:***@host``, and a
    Sentinel URL's ``sentinel_password=***``."""
    text = re.sub(r"(://[^:/@\s]*:)[^/\s]*@", r"\1***@", text)
    return re.sub(r"([?&]sentinel_password=)[^&#\s]*", r"\1***", text)


@dataclass(frozen=True)
class ConnectionConfig:
    """A picklable description of a Redis server: a connection class and its plain kwargs,
    and for a Sentinel deployment the sentinels that name the master (``sentinel``): then
    ``kwargs`` are the options of connections to the master, whose address only the
    sentinels give; for a Redis Cluster, the nodes to ask where a slot lives (``cluster``:
    ``kwargs`` are then the options of connections to the nodes, see pressure.cluster)."""

    connection_class: type[redis.connection.AbstractConnection]
    kwargs: tuple[tuple[str, Any], ...] = field(default=())
    sentinel: SentinelSettings | None = None
    cluster: ClusterSettings | None = None
    #: Which setting chose this server (``url=``, ``REDIS_URL``...): errors say so
    origin: str = field(default="", compare=False)

    def __repr__(self) -> str:  # never the password
        kwargs = tuple((k, "***" if k == "password" and v else v) for k, v in self.kwargs)
        more = "" if self.sentinel is None else f", sentinel={self.sentinel!r}"
        more += "" if self.cluster is None else f", cluster={self.cluster!r}"
        return f"ConnectionConfig(connection_class={self.connection_class.__name__}, kwargs={kwargs!r}{more})"

    @classmethod
    def resolve(cls, url: str | None = None,
                connection: redis.Redis | redis.cluster.RedisCluster | None = None) -> ConnectionConfig:
        """The server of a handle: ``url``, or the pool of ``connection`` (not both), else
        ``from_environment()``. A ``RedisCluster`` gives its nodes and connection options."""
        if url is not None and not isinstance(url, str):
            raise TypeError(f"url must be a str, not {type(url).__name__}")
        if connection is not None and not isinstance(connection, (redis.Redis, redis.cluster.RedisCluster)):
            raise TypeError(f"connection must be a redis.Redis or redis.cluster.RedisCluster client, "
                            f"not {type(connection).__name__}")
        if url is not None and connection is not None:
            raise ValueError("pass either url or connection, not both")
        if isinstance(connection, redis.cluster.RedisCluster):
            settings, connection_class, kwargs = _cluster.settings_of_cluster(connection)
            return cls(connection_class, kwargs, cluster=settings, origin="connection=")
        if connection is not None:
            return dataclasses.replace(cls.from_pool(connection.connection_pool), origin="connection=")
        if url is not None:
            return dataclasses.replace(cls.from_url(url), origin="url=")
        return cls.from_environment()

    @classmethod
    def from_url(cls, url: str) -> ConnectionConfig:
        """Parse a ``redis://``, ``rediss://`` or ``unix://`` URL, or a Sentinel deployment's
        ``redis+sentinel://[user:pass@]host:port[,host:port...]/service[/db]`` (and
        ``rediss+sentinel://``: see pressure.sentinel.parse_sentinel_url), or a Redis Cluster's
        ``redis+cluster://[user:pass@]host:port[,host:port...][/0]`` (and ``rediss+cluster://``:
        see pressure.cluster)."""
        if not isinstance(url, str):
            raise TypeError(f"url must be a str, not {type(url).__name__}")
        try:
            if url.partition("://")[0].lower() in SENTINEL_SCHEMES:
                settings, kwargs = parse_sentinel_url(url)
                tls = url.lower().startswith("rediss")
                connection_class = (redis.sentinel.SentinelManagedSSLConnection if tls
                                    else redis.sentinel.SentinelManagedConnection)
                return cls(connection_class, tuple(sorted(kwargs.items())), settings)
            if url.partition("://")[0].lower() in _cluster.SCHEMES:
                nodes, kwargs = _cluster.parse_cluster_url(url)
                tls = url.lower().startswith("rediss")
                return cls(redis.SSLConnection if tls else redis.Connection,
                           tuple(sorted(kwargs.items())), cluster=nodes)
            pool = redis.ConnectionPool.from_url(url)
        except ValueError as exc:
            raise ValueError(f"invalid Redis URL {without_password(url)!r}: "
                             f"{without_password(str(exc))}") from None
        return cls.from_pool(pool)

    @classmethod
    def from_pool(cls, pool: redis.ConnectionPool) -> ConnectionConfig:
        """The description of the server ``pool`` connects to; for a Sentinel master's pool,
        its sentinels (the master's address is theirs to give, never copied)."""
        settings = settings_of_pool(pool)
        drop = _DROP if settings is None else _DROP | {"host", "port"}
        kwargs = {
            k: v
            for k, v in pool.connection_kwargs.items()
            if k not in drop and isinstance(v, _PLAIN)
        }
        return cls(pool.connection_class, tuple(sorted(kwargs.items())), settings)

    @classmethod
    def from_environment(cls, env: os._Environ[str] | dict[str, str] = os.environ) -> ConnectionConfig:
        """``REDIS_URL``, else the spec's ``REDIS_SERVER``/``REDIS_PORT``/``REDIS_DB``, else defaults."""
        if env.get("REDIS_URL"):
            return dataclasses.replace(cls.from_url(env["REDIS_URL"]), origin="REDIS_URL")
        host = env.get("REDIS_SERVER") or "127.0.0.1"
        port = env.get("REDIS_PORT") or "6379"
        db = env.get("REDIS_DB") or "0"
        for var, value in (("REDIS_PORT", port), ("REDIS_DB", db)):
            if not value.isdigit():
                raise ValueError(f"{var} must be a non-negative integer, not {value!r}")
        named = [var for var in ("REDIS_SERVER", "REDIS_PORT", "REDIS_DB") if env.get(var)]
        origin = (", ".join(named) + " (the rest defaults)" if named else
                  "the default: no url= or connection=, and no REDIS_URL or REDIS_SERVER in the environment")
        return cls(redis.Connection, (("db", int(db)), ("host", host), ("port", int(port))), origin=origin)

    @property
    def url(self) -> str:
        """A URL naming the server, without the password."""
        kw = dict(self.kwargs)
        db = kw.get("db", 0)
        if self.cluster is not None:
            return self.cluster.url(issubclass(self.connection_class, redis.SSLConnection), kw.get("username"))
        if self.sentinel is not None:
            return self.sentinel.url(issubclass(self.connection_class, redis.SSLConnection),
                                     kw.get("username"), db)
        if "path" in kw:
            return f"unix://{kw['path']}?db={db}"
        scheme = "rediss" if issubclass(self.connection_class, redis.SSLConnection) else "redis"
        user = f"{quote(str(kw['username']))}@" if kw.get("username") else ""
        return f"{scheme}://{user}{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{db}"

    def _kwargs(self) -> dict[str, Any]:
        """The options of the connections pressure makes (the password from the environment
        if none is given, pressure's timeouts unless set)."""
        kw = dict(self.kwargs)
        if not kw.get("password") and os.environ.get(PASSWORD_ENV):
            # read here, in each process, never stored: a pickled handle does not carry it
            kw["password"] = os.environ[PASSWORD_ENV]
        kw.setdefault("socket_connect_timeout", SOCKET_CONNECT_TIMEOUT)
        if kw.get("socket_timeout") is None:
            kw["socket_timeout"] = SOCKET_TIMEOUT
        # the handshake is HELLO alone (one round trip, not four): see _QUIET_HANDSHAKE
        if not {"driver_info", "lib_name", "lib_version"} & kw.keys():
            kw.update(_QUIET_HANDSHAKE)
        if _NO_MAINT_NOTIFICATIONS is not None:
            kw.setdefault("maint_notifications_config", _NO_MAINT_NOTIFICATIONS)
        return kw

    def node_client(self, address: tuple[str, int]) -> redis.Redis:
        """For a Redis Cluster: a client of the node at ``address``, on a ``SlotPool`` (which
        ``retarget`` points at another node when the slot moves)."""
        pool = SlotPool(connection_class=self.connection_class, retry=Retry(NoBackoff(), 0),
                        host=address[0], port=address[1], **self._kwargs())
        return redis.Redis(connection_pool=pool)

    def new_client(self) -> redis.Redis:
        """A client of the server (for a Redis Cluster: see ``node_client``)."""
        if self.cluster is not None:
            raise ValueError("a Redis Cluster has no one server: connect to a node (node_client)")
        kw = self._kwargs()
        if self.sentinel is not None:
            sentinel: Any = self.sentinel.sentinel(**kw)
            master: redis.Redis = sentinel.master_for(
                self.sentinel.service, connection_class=self.connection_class,
                retry=Retry(NoBackoff(), 0), **kw)
            return master
        pool = redis.ConnectionPool(
            connection_class=self.connection_class, retry=Retry(NoBackoff(), 0), **kw
        )
        return redis.Redis(connection_pool=pool)


def _quiet_handshake() -> dict[str, Any]:
    """Connection options that leave out redis-py's ``CLIENT SETINFO LIB-NAME`` and
    ``LIB-VER``: two round trips (and two errors before Redis 7.2) on every connection
    pressure makes, each process making a few (a worker three before its first reply).
    redis-py 8 takes ``driver_info=None``; 5 to 7, ``lib_name=None, lib_version=None``."""
    try:
        from redis.driver_info import DriverInfo  # noqa: F401 - redis-py 8 and later
    except ImportError:
        return {"lib_name": None, "lib_version": None}
    return {"driver_info": None}


def _no_maint_notifications() -> Any:
    """redis-py 7+ sends ``CLIENT MAINT_NOTIFICATIONS ON`` on every new RESP3 connection (a
    round trip; an error on servers without it, which it ignores): pressure reads the
    replies on its own connections and rides out a moved or dropped server itself, so its
    connections go without (None: a redis-py that has no such handshake)."""
    try:
        from redis.maint_notifications import MaintNotificationsConfig
    except ImportError:
        return None
    return MaintNotificationsConfig(enabled=False)


_QUIET_HANDSHAKE = _quiet_handshake()
_NO_MAINT_NOTIFICATIONS = _no_maint_notifications()


#: The password of a URL (or connection) that names none, read from the environment of each
#: process that connects: it never travels with a pickled handle, as a URL's password does.
PASSWORD_ENV = "PRESSURE_REDIS_PASSWORD"

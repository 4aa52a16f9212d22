"""Redis Sentinel: where the sentinels are, as picklable data, and the URL that names them.

A handle given ``connection=Sentinel(...).master_for(service)`` or a URL
``redis+sentinel://[user:pass@]host:port[,host:port...]/service[/db]`` keeps a
``SentinelSettings`` in its ``ConnectionConfig``: the sentinels' addresses, the service name and
the sentinels' own connection options. A copy of the handle in another process (a pickled
handle, an executor worker, a Spark executor) builds its own ``Sentinel`` from them and asks
the sentinels for the master, as the original does: never a server derived from copied
connection settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import redis
import redis.sentinel

__all__ = ["SCHEMES", "SentinelSettings", "parse_sentinel_url", "settings_of_pool", "settings_of_sentinel_pool"]

#: The URL schemes of a Sentinel deployment (the second: TLS to the sentinels and the servers).
SCHEMES = ("redis+sentinel", "rediss+sentinel")
#: Where a sentinel listens unless the URL says otherwise.
DEFAULT_PORT = 26379

# connection options of the data servers that also apply to the sentinels (as redis-py's
# Sentinel does when given no sentinel_kwargs): timeouts, keepalive and TLS settings
_SHARED_PREFIXES = ("socket_", "ssl")

_PLAIN = (str, int, float, bool, bytes, type(None))


def plain(kwargs: dict[str, Any], drop: set[str] | frozenset[str] = frozenset()) -> tuple[tuple[str, Any], ...]:
    """The picklable part of connection options, sorted: plain values only."""
    return tuple(sorted((k, v) for k, v in kwargs.items() if k not in drop and isinstance(v, _PLAIN)))


def _masked(kwargs: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    return tuple((k, "***" if k == "password" and v else v) for k, v in kwargs)


@dataclass(frozen=True)
class SentinelSettings:
    """The sentinels of a deployment and the service (master) name they watch."""

    service: str
    addresses: tuple[tuple[str, int], ...]
    #: the sentinels' own connection options (redis-py's ``sentinel_kwargs``), plain values
    kwargs: tuple[tuple[str, Any], ...] = field(default=())
    min_other_sentinels: int = 0
    force_master_ip: str | None = None

    def __repr__(self) -> str:  # never the password
        return (f"SentinelSettings(service={self.service!r}, addresses={self.addresses!r}, "
                f"kwargs={_masked(self.kwargs)!r})")

    def sentinel(self, **connection_kwargs: Any) -> redis.sentinel.Sentinel:
        """A new redis-py ``Sentinel`` of these sentinels (``connection_kwargs``: the data
        servers' options). A sentinel that does not answer is skipped for the next one, so
        its clients never retry by themselves."""
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        kw = self.sentinel_kwargs(connection_kwargs)
        kw["retry"] = Retry(NoBackoff(), 0)
        make: Any = redis.sentinel.Sentinel  # untyped in redis-py
        sentinel: redis.sentinel.Sentinel = make(
            list(self.addresses), min_other_sentinels=self.min_other_sentinels,
            sentinel_kwargs=kw, force_master_ip=self.force_master_ip)
        return sentinel

    def sentinel_kwargs(self, connection_kwargs: dict[str, Any]) -> dict[str, Any]:
        """The sentinels' own connection options (redis-py's ``sentinel_kwargs``), their
        timeouts those of the data servers' (``connection_kwargs``) unless set. (The sync
        handles' ``sentinel()`` and pressure.aio's.)"""
        kw = dict(self.kwargs)
        kw.setdefault("socket_connect_timeout", connection_kwargs.get("socket_connect_timeout", 3.0))
        kw.setdefault("socket_timeout", connection_kwargs.get("socket_timeout", 5.0))
        return kw

    def url(self, tls: bool, username: str | None, db: int) -> str:
        """The ``redis+sentinel://`` URL of this deployment, without any password."""
        scheme = SCHEMES[1] if tls else SCHEMES[0]
        user = f"{quote(username)}@" if username else ""
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.addresses)
        return f"{scheme}://{user}{hosts}/{quote(self.service)}/{db}"


def settings_of_pool(pool: redis.ConnectionPool) -> SentinelSettings | None:
    """The ``SentinelSettings`` of a ``Sentinel(...).master_for()`` client's pool; None for
    any other pool. A replica's pool (``slave_for``) is refused: pressure writes."""
    if not isinstance(pool, redis.sentinel.SentinelConnectionPool):
        return None
    return settings_of_sentinel_pool(pool)


def settings_of_sentinel_pool(pool: Any) -> SentinelSettings:
    """``settings_of_pool`` of a Sentinel pool, redis-py's or redis.asyncio's (the same
    attributes): ValueError for a replica's pool."""
    if not pool.is_master:
        raise ValueError(f"connection is a replica client of Sentinel service {pool.service_name!r} "
                         f"(slave_for): pressure writes, so give it master_for({pool.service_name!r})")
    manager = pool.sentinel_manager
    addresses = []
    for client in manager.sentinels:
        kw = client.connection_pool.connection_kwargs
        if "host" not in kw:
            raise ValueError(f"a sentinel of {pool.service_name!r} is not on TCP: {kw.get('path')!r}")
        addresses.append((str(kw["host"]), int(kw.get("port", DEFAULT_PORT))))
    return SentinelSettings(str(pool.service_name), tuple(addresses),
                            plain(dict(manager.sentinel_kwargs or {}), {"retry", "retry_on_error"}),
                            int(manager.min_other_sentinels),
                            getattr(manager, "_force_master_ip", None))


def parse_sentinel_url(url: str) -> tuple[SentinelSettings, dict[str, Any]]:
    """``redis+sentinel://[user:pass@]host[:port][,host[:port]...]/service[/db][?options]``
    (``rediss+sentinel://`` for TLS): the sentinels, and the options of connections to the
    servers (credentials, db, and redis-py's URL options: ``socket_timeout``...). The
    credentials are the servers'; the sentinels get theirs from ``sentinel_username`` /
    ``sentinel_password`` options, if they need any. The servers' socket and TLS options
    also apply to the sentinels. Raises ValueError (never showing the password)."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ValueError(f"not a Sentinel URL scheme: {parts.scheme!r}")
    tls = parts.scheme == SCHEMES[1]
    userinfo, _, hosts = parts.netloc.rpartition("@")
    addresses = tuple(_address(host) for host in hosts.split(","))
    path = [unquote(p) for p in parts.path.split("/")[1:]]
    if path and path[-1] == "":
        path.pop()
    if len(path) not in (1, 2) or not path[0]:
        raise ValueError("a Sentinel URL names the service after the sentinels: "
                         "redis+sentinel://host:port[,host:port...]/service[/db]")
    service = path[0]
    query = parse_qsl(parts.query, keep_blank_values=True)
    sentinel_kw: dict[str, Any] = {k[len("sentinel_"):]: v for k, v in query if k in ("sentinel_username", "sentinel_password")}
    min_other = [v for k, v in query if k == "min_other_sentinels"]
    rest = [(k, v) for k, v in query
            if k not in ("sentinel_username", "sentinel_password", "min_other_sentinels")]
    db = path[1] if len(path) == 2 else "0"
    if not db.isdigit():
        raise ValueError(f"the database in a Sentinel URL is a number, not {db!r}")
    # redis-py reads the credentials and the options (typed) from an equivalent plain URL
    simple = f"{'rediss' if tls else 'redis'}://{userinfo + '@' if userinfo else ''}localhost/{db}"
    parse: Any = redis.connection.parse_url  # untyped in redis-py
    kwargs: dict[str, Any] = parse(simple + ("?" + urlencode(rest) if rest else ""))
    for key in ("host", "port", "connection_class"):
        kwargs.pop(key, None)
    for key, value in kwargs.items():
        if key.startswith(_SHARED_PREFIXES):
            sentinel_kw.setdefault(key, value)
    if tls:
        sentinel_kw["ssl"] = True
    if min_other and not min_other[0].isdigit():
        raise ValueError(f"min_other_sentinels must be a non-negative integer, not {min_other[0]!r}")
    return (SentinelSettings(service, addresses, plain(sentinel_kw),
                             int(min_other[0]) if min_other else 0), kwargs)


def parse_address(text: str, default_port: int, what: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` from a URL's list of ``what`` (e.g. "sentinel"),
    ``default_port`` when none is given (shared with pressure/cluster.py's node lists)."""
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        port = port[1:] if port.startswith(":") else port
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if not host:
        raise ValueError(f"a {'Sentinel' if what == 'sentinel' else 'Redis Cluster'} URL lists its "
                         f"{what}s as host:port[,host:port...]")
    if port and not port.isdigit():
        raise ValueError(f"a {what}'s port is a number, not {port!r}")
    return unquote(host), int(port) if port else default_port


def _address(text: str) -> tuple[str, int]:
    return parse_address(text, DEFAULT_PORT, "sentinel")

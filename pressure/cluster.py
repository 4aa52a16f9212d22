"""Redis Cluster: where a queue's slot lives, as picklable data, and the URL that names it.

A queue's scripts touch many of its keys at once (and per-consumer lists), so on a cluster
all of them must share one hash slot. pressure does not rename anything to get there: the
queue's base key ``<prefix>:<name>`` must hold a *hash tag* (``{...}``: Redis hashes only
the text between the first ``{`` and the next ``}``), in the name (``Queue("{jobs}")``,
``Queue("orders:{eu}")``) or in the prefix (every queue then shares one slot). A spec client
given the same name (``{jobs}``) shares the queue: to it, the braces are part of the name.
A name without a tag is refused at once on a cluster (``ValueError``, before any round
trip); anonymous queues and executors are named ``{anon-<uuid>}`` / ``{exec-<uuid>}``, so
each gets a slot of its own. An Executor's queues and keys all follow its name's tag.

A handle on a cluster (``connection=RedisCluster(...)``, or a URL
``redis+cluster://[user:pass@]host:port[,host:port...][/0][?options]``, ``rediss+cluster://``
for TLS) keeps a ``ClusterSettings`` in its ``ConnectionConfig``: the nodes it may ask
where a slot lives. Its connections all go to the one master that owns its queue's slot
(asked with CLUSTER SLOTS on first use), and follow the slot: a ``MOVED`` reply (a slot
resharded, a replica promoted) names the new owner, and a master that cannot be reached
makes the handle ask the nodes again; ``ASK`` (a slot being migrated) and ``TRYAGAIN`` are
sent again after a pause until the migration ends. Each of these commands did not run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import redis
from redis.crc import key_slot as _crc_slot

from .sentinel import parse_address

__all__ = ["SCHEMES", "ClusterSettings", "SlotPool", "hash_tag", "key_slot", "placed_slot",
           "parse_cluster_url", "settings_of_cluster", "discover_owner", "master_slots"]

#: The URL schemes of a Redis Cluster (the second: TLS).
SCHEMES = ("redis+cluster", "rediss+cluster")
DEFAULT_PORT = 6379

_PLAIN = (str, int, float, bool, bytes, type(None))
_DROP = {"host", "port", "connection_class", "retry", "retry_on_error", "connection_pool",
         "startup_nodes", "cache", "cache_config", "event_dispatcher"}


def hash_tag(key: str) -> str | None:
    """The hash tag Redis Cluster hashes ``key`` by, or None if it hashes the whole key: the
    text between the first ``{`` and the next ``}``, if there is such a ``}`` and the text
    is not empty."""
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    if end <= start + 1:
        return None
    return key[start + 1:end]


def key_slot(key: str) -> int:
    """The hash slot (0-16383) of ``key``."""
    return int(_crc_slot(key.encode("utf-8")))


def placed_slot(base: str, what: str) -> int:
    """The slot of every key below ``base`` (a queue's or an Executor's), or ValueError if
    they would not share one: ``base`` must hold a complete hash tag (``what`` names the
    queue or executor in the message)."""
    if hash_tag(base) is None:
        raise ValueError(
            f"{what} cannot be placed on a Redis Cluster: its keys ({base!r}, {base + ':bound'!r}, ...) "
            f"must all hash to one slot, so the name (or the prefix) must hold a hash tag: a non-empty "
            f"'{{...}}', e.g. '{{jobs}}' or 'orders:{{eu}}' (Redis hashes only the text between the first "
            f"'{{' and the next '}}'). A spec client uses the same name, braces included")
    return key_slot(base)


def _plain(kwargs: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, v) for k, v in kwargs.items() if k not in _DROP and isinstance(v, _PLAIN)))


@dataclass(frozen=True)
class ClusterSettings:
    """The nodes of a cluster a handle may ask where its slot lives (any of them will do)."""

    addresses: tuple[tuple[str, int], ...]

    def url(self, tls: bool, username: str | None) -> str:
        """The ``redis+cluster://`` URL of these nodes, without any password."""
        scheme = SCHEMES[1] if tls else SCHEMES[0]
        user = f"{quote(username)}@" if username else ""
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.addresses)
        return f"{scheme}://{user}{hosts}/0"


def parse_cluster_url(url: str) -> tuple[ClusterSettings, dict[str, Any]]:
    """``redis+cluster://[user:pass@]host[:port][,host[:port]...][/0][?options]``: the nodes to
    start from, and the options of connections to the nodes (credentials and redis-py's URL
    options). A cluster has only database 0. Raises ValueError."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ValueError(f"not a Redis Cluster URL scheme: {parts.scheme!r}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    addresses = tuple(_address(host) for host in hosts.split(","))
    path = parts.path.strip("/")
    if path not in ("", "0"):
        raise ValueError(f"a Redis Cluster has only database 0, not {unquote(path)!r}")
    tls = parts.scheme == SCHEMES[1]
    query = parse_qsl(parts.query, keep_blank_values=True)
    simple = f"{'rediss' if tls else 'redis'}://{userinfo + '@' if userinfo else ''}localhost/0"
    parse: Any = redis.connection.parse_url  # untyped in redis-py
    kwargs: dict[str, Any] = parse(simple + ("?" + urlencode(query) if query else ""))
    for key in ("host", "port", "connection_class", "db"):
        kwargs.pop(key, None)
    return ClusterSettings(addresses), kwargs


def _address(text: str) -> tuple[str, int]:
    return parse_address(text, DEFAULT_PORT, "node")


def settings_of_cluster(client: Any) -> tuple[ClusterSettings, type[redis.connection.AbstractConnection],
                                              tuple[tuple[str, Any], ...]]:
    """The nodes, connection class and plain connection options of a redis-py
    ``RedisCluster`` (its known nodes first, then its startup nodes)."""
    manager = client.nodes_manager
    addresses: list[tuple[str, int]] = []
    for node in [*client.get_nodes(), *manager.startup_nodes.values()]:
        address = (str(node.host), int(node.port))
        if address not in addresses:
            addresses.append(address)
    kwargs = dict(manager.connection_kwargs)
    connection_class = kwargs.get("connection_class") or redis.Connection
    return ClusterSettings(tuple(addresses)), connection_class, _plain(kwargs)


# nodes learned from CLUSTER SLOTS replies, per cluster (by its settings), in this process:
# a handle still finds its slot when the nodes it was given are gone
_LEARNED: dict[ClusterSettings, list[tuple[str, int]]] = {}
_LEARNED_LOCK = threading.Lock()


def discover_owner(settings: ClusterSettings, slot: int,
                   make: Any) -> tuple[tuple[str, int] | None, list[str]]:
    """The address of the master serving ``slot``, asked with CLUSTER SLOTS of the nodes in
    turn (``make(host, port)`` gives a connected-on-use ``redis.Redis``); None if no node
    answered with an owner, and then why, one line per node."""
    with _LEARNED_LOCK:
        candidates = list(dict.fromkeys([*settings.addresses, *_LEARNED.get(settings, [])]))
    problems: list[str] = []
    for host, port, ranges in _slots_of_each(candidates, make, problems):
        owner = None
        learned: list[tuple[str, int]] = []
        for (start, end), nodes in _slot_ranges(ranges):
            for node in nodes:
                learned.append((node[0] or host, int(node[1])))
            if start <= slot <= end and nodes:
                owner = (nodes[0][0] or host, int(nodes[0][1]))
        with _LEARNED_LOCK:
            known = _LEARNED.setdefault(settings, [])
            known.extend(a for a in learned if a not in known)
        if owner is not None:
            return owner, problems
        problems.append(f"{host}:{port}: no master serves slot {slot}")
    return None, problems


def master_slots(settings: ClusterSettings, make: Any) -> tuple[list[int], list[str]]:
    """A slot of each master of the cluster (the lowest it serves), from the CLUSTER SLOTS of
    the first node that answers (``make`` as for ``discover_owner``); [] if none does, and
    then why, one line per node."""
    problems: list[str] = []
    for host, port, ranges in _slots_of_each(settings.addresses, make, problems):
        first: dict[tuple[str, int], int] = {}
        for (start, _), nodes in _slot_ranges(ranges):
            if nodes:
                master = (nodes[0][0] or host, nodes[0][1])
                first[master] = min(start, first.get(master, start))
        return sorted(first.values()), problems
    return [], problems


def _slots_of_each(addresses: Iterable[tuple[str, int]], make: Any,
                   problems: list[str]) -> Iterator[tuple[str, int, Any]]:
    """``(host, port, CLUSTER SLOTS reply)`` of each node of ``addresses`` that answers, one
    at a time, as the caller asks for the next (``make`` as for ``discover_owner``); a node
    that does not answer adds a line to ``problems``."""
    for host, port in addresses:
        client = make(host, port)
        try:
            ranges = client.execute_command("CLUSTER SLOTS")
        except redis.RedisError as exc:
            problems.append(f"{host}:{port}: {exc}")
            continue
        finally:
            client.close()
            client.connection_pool.disconnect()
        yield host, port, ranges


def _slot_ranges(reply: Any) -> list[tuple[tuple[int, int], list[tuple[str, int]]]]:
    """CLUSTER SLOTS as ``[((start, end), [(host, port) of the master, then replicas...])]``,
    whether redis-py parsed it (a dict) or not (a list)."""
    out: list[tuple[tuple[int, int], list[tuple[str, int]]]] = []
    if isinstance(reply, dict):
        for (start, end), info in reply.items():
            nodes = [info["primary"], *info.get("replicas", [])]
            out.append(((int(start), int(end)), [(_text(h), int(p)) for h, p, *_ in nodes]))
        return out
    for entry in reply:
        start, end, *nodes = entry
        out.append(((int(start), int(end)), [(_text(n[0]), int(n[1])) for n in nodes]))
    return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SlotPool(redis.ConnectionPool):
    """A connection pool to whichever master owns a slot now: ``retarget`` points it at a new
    one (idle connections are closed and reconnect there; those in use are dropped as they
    come back, as a Sentinel pool drops connections to a demoted master)."""

    @property
    def address(self) -> tuple[str, int]:
        return str(self.connection_kwargs["host"]), int(self.connection_kwargs["port"])

    def retarget(self, address: tuple[str, int]) -> None:
        with self._lock:
            self.connection_kwargs["host"], self.connection_kwargs["port"] = address
            idle: list[Any] = list(self._available_connections)
            for conn in idle:
                conn.disconnect()
                conn.host, conn.port = address

    def owns_connection(self, connection: Any) -> int:
        return bool(super().owns_connection(connection)) and (
            (getattr(connection, "host", None), getattr(connection, "port", None)) == self.address)

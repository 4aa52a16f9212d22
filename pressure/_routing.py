"""Routing: on a Redis Cluster, which master a wire's commands go to.

``Routing`` is the part of ``Wire`` (pressure/_wire.py) that places a wire on one hash slot
(``route``), makes wires like it for other slots (``for_slot``, ``master_slots``), asks the
nodes which master serves the slot, and follows the slot when it moves (``_reroute``, after
a refusal). Elsewhere than on a Redis Cluster it does nothing. ``Wire`` inherits it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Self, cast

import redis
import redis.cluster
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import cluster as _cluster
from .config import ConnectionConfig
from .errors import BackendError

if TYPE_CHECKING:
    from ._wire import Wire

__all__ = ["Routing"]


class Routing:
    """The hash slot a wire serves on a Redis Cluster, and that slot's master: a base class
    of Wire."""

    # what it uses of the wire (set by Wire.__init__)
    config: ConnectionConfig
    _slot: int | None
    _owner: tuple[str, int] | None
    _siblings: dict[int, Any]
    _lock: threading.Lock
    _client: redis.Redis | None
    _loaded: set[str]

    if TYPE_CHECKING:
        # Wire's constructor, which for_slot calls: declared for the type checker only
        def __init__(self, config: ConnectionConfig,
                     client: redis.Redis | redis.cluster.RedisCluster | None = None) -> None: ...


    def route(self, key: str, what: str) -> Wire:
        """On a Redis Cluster, send every command to the master of ``key``'s slot (the key of
        a queue or an Executor, whose other keys share its hash tag: ValueError at once if
        they would not, see pressure.cluster.placed_slot). Elsewhere, nothing to do."""
        wire = cast("Wire", self)  # a base class of Wire only
        if self.config.cluster is None:
            return wire
        slot = _cluster.placed_slot(key, what)
        if self._slot is not None and self._slot != slot:
            raise ValueError(f"{what} is in hash slot {slot}, and shares its connections with keys of "
                             f"slot {self._slot}: on a Redis Cluster, give them one hash tag")
        self._slot = slot
        return wire

    def for_slot(self, slot: int) -> Self:
        """On a Redis Cluster: a wire like this one whose commands all go to the master of
        ``slot`` (made once per slot, and disconnected with this one), for code that reads
        keys of many queues (the command line's inventory). Elsewhere: this wire."""
        if self.config.cluster is None:
            return self
        with self._lock:
            sibling = self._siblings.get(slot)
            if sibling is None:
                sibling = self._siblings[slot] = type(self)(self.config)
                sibling._slot = slot
        return cast(Self, sibling)

    def master_slots(self) -> list[int]:
        """On a Redis Cluster: a slot of each master (the first it serves), asked of the
        nodes, so that ``for_slot`` reaches every master (a SCAN of every node); BackendError
        if no node answers. Elsewhere: []."""
        settings = self.config.cluster
        if settings is None:
            return []
        kw = self.config._kwargs()

        def make(host: str, port: int) -> redis.Redis:
            return redis.Redis(connection_pool=redis.ConnectionPool(
                connection_class=self.config.connection_class, host=host, port=port,
                retry=Retry(NoBackoff(), 0), **kw))

        slots, problems = _cluster.master_slots(settings, make)
        if not slots:
            raise BackendError(f"no node of the Redis Cluster {self.config.url} answered CLUSTER SLOTS: "
                               + "; ".join(problems))
        return slots

    def _owner_of_slot(self) -> tuple[str, int]:
        """The address of the master serving this wire's slot (any node for a wire with no
        slot), asked of the cluster's nodes; BackendError if none says."""
        settings = self.config.cluster
        assert settings is not None
        kw = self.config._kwargs()

        def make(host: str, port: int) -> redis.Redis:
            return redis.Redis(connection_pool=redis.ConnectionPool(
                connection_class=self.config.connection_class, host=host, port=port,
                retry=Retry(NoBackoff(), 0), **kw))

        owner, problems = _cluster.discover_owner(settings, 0 if self._slot is None else self._slot, make)
        if owner is None:
            raise BackendError(f"no node of the Redis Cluster {self.config.url} names the master of hash "
                               f"slot {self._slot}: " + "; ".join(problems))
        return owner

    def _reroute(self, error: object) -> None:
        """On a cluster, after a refusal: follow a MOVED to the slot's new master; after a
        node that could not be reached, a CLUSTERDOWN or a READONLY (a demoted master), ask
        the nodes again. ASK and TRYAGAIN (a slot being migrated) change nothing: the
        command is sent to the same master again after a pause."""
        if isinstance(error, redis.exceptions.MovedError):
            address = (error.host or (self._owner or ("", 0))[0], int(error.port))
        elif isinstance(error, (redis.exceptions.AskError, redis.exceptions.TryAgainError)):
            return
        else:
            try:
                address = self._owner_of_slot()
            except BackendError:
                return  # no node answers yet: the next attempt tries the same master again
        if address == self._owner:
            return
        with self._lock:
            self._owner = address
            self._loaded = set()  # the new master may not have our scripts
            client = self._client
            if client is not None and isinstance(client.connection_pool, _cluster.SlotPool):
                client.connection_pool.retarget(address)

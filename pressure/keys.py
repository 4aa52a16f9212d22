"""Every Redis key name pressure uses, built in one place.

The first twelve are the protocol's, spelled exactly as the v0.15 key list
names them (``:stats:*``, not the pseudocode's ``:produced_messages``), so any
conforming client shares the queue. The rest are pressure's own extensions,
all below ``<base>:pressure:``; a plain spec client neither reads nor needs them.

LIFO and priority queues (a pressure extension) keep the same keys under
their own base, ``<prefix>:lifo:<name>`` and ``<prefix>:priority:<name>``, hold
their items in a sorted set there instead of a list, and record their kind in
``:pressure:kind``. A plain spec client asked for queue ``<name>`` finds no
``:bound`` (no such queue); one pointed at ``lifo:<name>`` meets a sorted set
where it expects a list and fails with WRONGTYPE: neither can mistake an
ordered queue for a FIFO one.

Redis Cluster: multi-key scripts need every key in one hash slot, so the base key
``<prefix>:<name>`` must hold a hash tag there (``{jobs}``), in the name or the prefix;
anonymous queues and executors get one by default. Handles on a cluster refuse a name
without one (pressure/cluster.py placed_slot).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["QueueKeys", "ExecutorKeys", "DEFAULT_PREFIX", "KINDS", "check_name", "resolve_prefix"]

DEFAULT_PREFIX = "__pressure__"
#: The kinds of queue: the protocol's FIFO, and the two ordered extensions.
KINDS = ("fifo", "lifo", "priority")


#: The key suffixes of a queue ``<base>``: ``<base>:<suffix>`` (the protocol's eleven side keys).
_SUFFIXES = frozenset({
    "bound", "producer", "consumer", "producer_free", "consumer_free", "not_full", "closed",
    "stats:produced_messages", "stats:produced_bytes", "stats:consumed_messages", "stats:consumed_bytes",
})
#: Segments that open a whole family of keys below a queue's (or an Executor's) base.
_FAMILIES = frozenset({"stats", "pressure", "executor"})


def check_name(name: str, what: str = "queue") -> None:
    """Refuse a name whose keys would be another queue's: ``jobs:closed`` is the key that says
    queue ``jobs`` is closed, and ``jobs:bound`` its bound, so a queue of that name would shut
    ``jobs`` or delete its keys. A name is refused if, after any ``:``, what follows is one
    of the protocol's suffixes (``bound``, ``closed``, ``stats:produced_messages``...), or
    starts with ``stats``, ``pressure`` (pressure's own keys) or ``executor`` (an Executor's).
    Ordinary names, and names with those words elsewhere (``consumer:eu``, ``jobs:consumer:eu``),
    are left alone, so spec clients keep sharing them."""
    parts = name.split(":")
    for i in range(1, len(parts)):
        rest = ":".join(parts[i:])
        if rest in _SUFFIXES or parts[i] in _FAMILIES:
            owner = ":".join(parts[:i])
            raise ValueError(
                f"{what} name {name!r} would share keys with queue {owner!r}: a name may not end in "
                f"{', '.join(':' + x for x in sorted(_SUFFIXES))} (a queue's side keys), nor have a "
                f"part after a ':' that is {', '.join(sorted(_FAMILIES))}")


def resolve_prefix(prefix: str | None) -> str:
    """The key prefix: ``prefix``, else ``PRESSURE_PREFIX``, else ``__pressure__``."""
    return prefix or os.environ.get("PRESSURE_PREFIX") or DEFAULT_PREFIX


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """The key names of one queue: ``<prefix>:<name>`` and its side keys."""

    base: str
    bound: str
    producer: str
    consumer: str
    producer_free: str
    consumer_free: str
    produced_messages: str
    produced_bytes: str
    consumed_messages: str
    consumed_bytes: str
    not_full: str
    closed: str
    # pressure extensions (not part of the protocol)
    tasks_done: str
    discarded: str
    all_tasks_done: str
    waiter: str
    lease: str
    consumers: str
    #: hash: sha1(stored item) -> the state of its queued copy, or '#<n>' for n copies' states in
    #: the list '<redeliveries>:<sha1>', in the order they leave (lua/lib.lua copies_push)
    redeliveries: str
    delivery_seq: str
    dead: str
    sweep: str
    kind: str
    #: exists while the bound is 0 because no handle that created the queue named one: the
    #: first handle naming one sets it (lua/create.lua)
    bound_unset: str
    #: sorted set of delayed items by due time (put(..., delay=), Delivery.release(delay=))
    delayed: str
    #: hash: the ttl, ttr and utube key of taken copies ('d<delivery>') and the state of delayed
    #: ones ('z<sequence>') (lua/lib.lua state_of)
    meta: str
    #: hash: utube key -> its items in the queue; '<utube>:<key>' the list of those waiting
    utube: str
    #: hash of lifecycle counters: expired, release, bury, kick (kick_expired: those of them
    #: that had expired), delete... (statistics())
    counts: str
    #: the set of groups that keep a log beside the queue (pressure/spark/log.py); a group's
    #: log is '<logs>:<group>', with ':tail' and ':committed'
    logs: str
    #: the name of the serializer the queue was created with ('pickle', 'json', 'signed pickle'...:
    #: lua/create.lua); missing if unknown (a spec client's queue, a serializer with no name)
    serializer: str
    inbox_prefix: str
    inflight_prefix: str
    held_prefix: str
    #: the items list's name for the length of one transaction: a put whose payloads move
    #: natively (lua/put.lua ARGV[3] 'm'); never left behind, so not among ``extension_keys``
    gate: str

    @classmethod
    def build(cls, prefix: str, name: str, kind: str = "fifo") -> QueueKeys:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        check_name(name)
        base = f"{prefix}:{name}" if kind == "fifo" else f"{prefix}:{kind}:{name}"
        ext = f"{base}:pressure"
        return cls(
            base=base,
            bound=f"{base}:bound",
            producer=f"{base}:producer",
            consumer=f"{base}:consumer",
            producer_free=f"{base}:producer_free",
            consumer_free=f"{base}:consumer_free",
            produced_messages=f"{base}:stats:produced_messages",
            produced_bytes=f"{base}:stats:produced_bytes",
            consumed_messages=f"{base}:stats:consumed_messages",
            consumed_bytes=f"{base}:stats:consumed_bytes",
            not_full=f"{base}:not_full",
            closed=f"{base}:closed",
            tasks_done=f"{ext}:tasks_done",
            discarded=f"{ext}:discarded",
            all_tasks_done=f"{ext}:all_tasks_done",
            waiter=f"{ext}:waiter",
            lease=f"{ext}:lease",
            consumers=f"{ext}:consumers",
            redeliveries=f"{ext}:redeliveries",
            delivery_seq=f"{ext}:delivery_seq",
            dead=f"{ext}:dead",
            sweep=f"{ext}:sweep",
            kind=f"{ext}:kind",
            bound_unset=f"{ext}:bound_unset",
            delayed=f"{ext}:delayed",
            meta=f"{ext}:meta",
            counts=f"{ext}:counts",
            utube=f"{ext}:utube",
            logs=f"{ext}:logs",
            serializer=f"{ext}:serializer",
            inbox_prefix=f"{ext}:inbox:",
            inflight_prefix=f"{ext}:inflight:",
            held_prefix=f"{ext}:held:",
            gate=f"{ext}:gate",
        )

    def protocol_keys(self) -> tuple[str, ...]:
        """The protocol's twelve keys, in the order of the spec's key list."""
        return (
            self.base,
            self.bound,
            self.producer,
            self.consumer,
            self.producer_free,
            self.consumer_free,
            self.produced_messages,
            self.produced_bytes,
            self.consumed_messages,
            self.consumed_bytes,
            self.not_full,
            self.closed,
        )

    def extension_keys(self) -> tuple[str, ...]:
        """pressure's own fixed keys for this queue (not the per-consumer inbox, in-flight and held
        lists)."""
        return (self.tasks_done, self.discarded, self.all_tasks_done, self.waiter, self.lease,
                self.consumers, self.redeliveries, self.delivery_seq, self.dead, self.sweep, self.kind, self.logs, self.delayed,
                self.meta, self.counts, self.utube, self.bound_unset, self.serializer)

    def inbox(self, client_id: str) -> str:
        """The list through which a consumer receives its items."""
        return self.inbox_prefix + client_id

    def inflight(self, client_id: str) -> str:
        """The list of a consumer's deliveries not yet acknowledged."""
        return self.inflight_prefix + client_id

    def held(self, client_id: str) -> str:
        """The list holding a default-mode consumer's last batch (get_many) until its next get."""
        return self.held_prefix + client_id

    def all_keys(self) -> tuple[str, ...]:
        return self.protocol_keys() + self.extension_keys()


@dataclass(frozen=True, slots=True)
class ExecutorKeys:
    """The keys of a ``pressure.Executor`` named ``<name>``: two pressure queues
    (``<name>:tasks``, and ``<name>:results:<executor id>`` per executor) and,
    under ``<prefix>:<name>:executor:``, its own bookkeeping."""

    #: The task queue's name (a reliable pressure queue).
    tasks: str
    #: The prefix of each executor's result queue name.
    results_prefix: str
    #: Hash: task id -> its state while it is in the task queue: 'q' submitted, 'cancel',
    #: 'run:<starts>:<consumer>:<delivery>' started, 'lost:...' given up on (lua/claim.lua).
    claims: str
    #: Hash: worker id -> its last heartbeat, in ms (server time).
    workers: str
    #: The pickled (initializer, initargs) for workers that join from elsewhere.
    config: str
    #: Why the executor is broken (a worker's initializer failed), if it is.
    broken: str
    #: The id of the key tasks are signed with (pressure/signing.py key_id, hex), if any.
    signed: str
    #: Counters: tasks done, failed (raised), retried (delivered again), lost.
    done: str
    failed: str
    retried: str
    lost: str

    @classmethod
    def build(cls, prefix: str, name: str) -> ExecutorKeys:
        check_name(name, "executor")
        ext = f"{prefix}:{name}:executor"
        return cls(
            tasks=f"{name}:tasks",
            results_prefix=f"{name}:results:",
            claims=f"{ext}:claims",
            workers=f"{ext}:workers",
            config=f"{ext}:config",
            broken=f"{ext}:broken",
            signed=f"{ext}:signed",
            done=f"{ext}:stats:done",
            failed=f"{ext}:stats:failed",
            retried=f"{ext}:stats:retried",
            lost=f"{ext}:stats:lost",
        )

    def all_keys(self) -> tuple[str, ...]:
        """Its own keys (not those of its queues)."""
        return (self.claims, self.workers, self.config, self.broken, self.signed, self.done, self.failed,
                self.retried, self.lost)

"""Role tokens and their holders: waiting for a token, and taking back what the dead hold.

A client that finds a role (``:producer_free`` / ``:consumer_free``) taken waits for the
token with ``BLMOVE x x RIGHT RIGHT``, which wakes when it is back but leaves it in place,
and meanwhile checks the holder (``wait_for_role``): a dead process on this host (pid and
start time), or a lease that expired (the sweep), and the role and everything the holder
had in flight are taken back (requeue.lua 'recover', atomic, only if the holder is still
the dead one). A plain spec client, which leaves no consumer record, is recognised by its
``host:pid:...`` identifier and gets its token restored (restore.lua).

The sweep (requeue.lua 'sweep') requeues deliveries whose visibility timeout or lease
passed, at most once a second across all clients of a queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from . import _log, identity
from ._scripts import REQUEUE, RESTORE, RestoreStatus
from ._validate import Options
from .connection import Backend
from .keys import QueueKeys

#: The shortest server-side wait: never let a small timeout round down to 0.
MIN_WAIT = 0.005
#: How often, at most, the clients of a queue sweep it for expired deliveries.
SWEEP_INTERVAL = 1.0
#: A plain spec client's dead-looking holder must look dead this long before its token is restored
#: (a live one may be between taking the token and writing its identifier).
SPEC_HOLDER_GRACE = 0.5

#: The two roles, as given to ``wait_for_role``.
PRODUCER, CONSUMER = "producer", "consumer"


class _Roles:
    """One handle's dealings with the holders of its queue's role tokens.

    It borrows from its queue handle the connections (``backend``), the key names
    (``keys``), the name used in log lines, the reliability options, and ``run``, which
    runs one of the queue's scripts (the variant for its kind).
    """

    def __init__(self, backend: Backend, keys: QueueKeys, name: str, options: Options,
                 run: Callable[..., Any]) -> None:
        self.backend = backend
        self.keys = keys
        self.name = name
        self.options = options
        self.run = run
        self.requeue_keys = REQUEUE.keys(keys)
        #: when this handle last swept the queue (monotonic)
        self.last_sweep = 0.0
        #: free key -> (holder, first seen dead): plain spec clients that look dead
        self.suspects: dict[str, tuple[str, float]] = {}

    # -- waiting for a role ----------------------------------------------------------

    def wait_for_role(self, role: str, limit: float) -> None:
        """A script found ``role`` taken: take it back if its holder is dead, then wait (at
        most a slice, at most ``limit``) until the token is back; the caller then retries."""
        k = self.keys
        if role == PRODUCER:
            self.recover_spec_holder(k.producer_free, k.producer)
            free_key = k.producer_free
        else:
            self.recover_waiter()
            free_key = k.consumer_free
        self.wait_token(free_key, limit)

    def wait_token(self, free_key: str, limit: float) -> None:
        """Wait until a role token is back, without taking it (BLMOVE x x RIGHT RIGHT)."""
        backend = self.backend
        backend.call(
            "BLMOVE role token", backend.client().blmove, free_key, free_key,
            max(min(backend.slice, limit), MIN_WAIT), "RIGHT", "RIGHT",
        )

    def read(self, key: str) -> str | None:
        """A string key (a role holder's identifier), decoded."""
        value = self.backend.call("GET", self.backend.client().get, key)
        return None if value is None else value.decode(errors="replace")

    # -- requeueing -----------------------------------------------------------------

    def requeue(self, mode: str, consumer: str = "", which: str = "", *, every_ms: int | str = "",
                max_deliveries: str | None = None, delay_ms: str = "", reason: str = "") -> Any:
        """requeue.lua in ``mode``: 'release' (delivery ``which`` of ``consumer``), 'recover'
        (everything ``consumer`` holds, if its record is still ``which``) or 'sweep' (what
        expired, at most once per ``every_ms``). ``max_deliveries`` overrides the queue's;
        ``delay_ms`` ('release') delays the item instead of returning it to the head;
        ``reason`` 'buried' ('release') dead-letters it as buried."""
        k = self.keys
        if max_deliveries is None:
            max_deliveries = self.options.max_deliveries_arg
        return self.run(REQUEUE.name, self.requeue_keys, REQUEUE.check(
            (mode, k.inbox_prefix, k.inflight_prefix, max_deliveries, consumer, which, every_ms,
             k.held_prefix, delay_ms, reason)))

    def sweep_if_due(self) -> None:
        """Sweep, if this handle has not in the last SWEEP_INTERVAL."""
        if time.monotonic() - self.last_sweep > SWEEP_INTERVAL:
            self.sweep()

    def sweep(self) -> None:
        """Requeue deliveries whose visibility timeout or lease passed (at most once a second
        across all clients), and recover consumers on this host whose process is gone."""
        self.last_sweep = time.monotonic()
        result = self.requeue("sweep", every_ms=int(SWEEP_INTERVAL * 1000))
        if result[0] > 0:
            _log.event(_log.QUEUE, logging.WARNING, "requeue",
                       "queue %r: requeued %d deliveries whose visibility timeout or lease passed",
                       self.name, result[0], queue=self.name, key=self.keys.base, count=result[0],
                       reason="expired")
        if result[1] > 0:
            _log.event(_log.QUEUE, logging.WARNING, "dead_letter",
                       "queue %r: dead-lettered %d expired deliveries (delivered max_deliveries times)",
                       self.name, result[1], queue=self.name, key=self.keys.base, count=result[1],
                       reason="max_deliveries")
        records = result[2:]
        for i in range(0, len(records), 2):
            self.recover_if_dead(records[i].decode(errors="replace"), records[i + 1].decode(errors="replace"))

    # -- dead holders ---------------------------------------------------------------

    def recover_if_dead(self, consumer: str, record: str) -> bool:
        """If ``consumer`` ran on this host in a process that is gone, take back what it held."""
        host, _, rest = record.partition("|")
        pid, _, rest = rest.partition("|")
        start, _, _ = rest.partition("|")
        if host != identity.hostname() or not pid.isdigit() or identity.is_alive(int(pid), start):
            return False
        requeued, dead = self.requeue("recover", consumer, record)
        if requeued >= 0:
            _log.event(_log.QUEUE, logging.WARNING, "consumer_recovered",
                       "queue %r: consumer %s (%s) is dead: its role and %d deliveries taken back "
                       "(%d dead-lettered)", self.name, consumer, record, requeued, dead,
                       queue=self.name, key=self.keys.base, consumer=consumer, record=record, count=requeued,
                       dead=dead)
        return bool(requeued >= 0)

    def recover_holders(self, cid: str) -> str:
        """On a closed, empty queue whose items other consumers hold (get.lua -8): take back
        what consumers on this host whose process is gone hold, and say what is left:
        'recovered' (look again now: also when an item came back, or the consumers changed,
        since get.lua looked), 'wait' (items may still come back: unacknowledged, in an
        inbox, or held by a consumer elsewhere, alive or not; or delayed items wait, or a
        utube key's current item is someone else's), or 'drained' (the holders are
        default-mode consumers alive on this host: what they hold, a get returned or is
        returning, its drop on the way; the utube keys left are those whose current item
        ``cid`` holds, as get.lua judges: its own deliveries never make it wait).

        What it judges 'drained' is read in one MULTI, the queue's own items with the
        holders' lists: read apart, an item given back between the two reads (a release,
        a requeue) would be seen in neither place, and the get would end in ShutDown with
        the item queued."""
        backend, k = self.backend, self.keys
        records = backend.call("HGETALL", backend.client().hgetall, k.consumers)
        others = [(c.decode(errors="replace"), r.decode(errors="replace")) for c, r in records.items()]
        others = [(consumer, record) for consumer, record in others if consumer != cid]
        if any([self.recover_if_dead(consumer, record) for consumer, record in others]):
            return "recovered"
        self.sweep_if_due()  # what expired elsewhere (a get looks again after a wait)
        pipe = backend.client().pipeline(transaction=True)
        pipe.hkeys(k.consumers)
        pipe.exists(k.base)  # an item back in the queue (a list's or a sorted set's)
        pipe.exists(k.delayed)
        pipe.hkeys(k.utube)
        pipe.lrange(k.inflight(cid), 0, -1)
        for consumer, _ in others:
            for key in (k.inbox(consumer), k.inflight(consumer)):
                pipe.llen(key)
                pipe.lpos(key, "s:", count=0)  # wake-ups hold nothing
            pipe.exists(k.held(consumer))
        consumers, queued, waiting, keys, mine, *replies = backend.call("look at the holders", pipe.execute)
        if queued or set(consumers) != set(records):
            return "recovered"  # given back, or another consumer came or went: look again
        if waiting:
            return "wait"  # delayed items: they enter when due
        if keys and not set(keys) <= self._own_keys(mine):
            return "wait"  # a utube key's current item is another's (a spec client's: no record)
        here = identity.hostname()
        for i, (_, record) in enumerate(others):
            n_inbox, wake_inbox, n_inflight, wake_inflight, held = replies[5 * i:5 * i + 5]
            if n_inbox > len(wake_inbox):
                return "wait"  # never received: its consumer's next get, or a sweep, brings it back
            if n_inflight > len(wake_inflight) or held:
                host, _, rest = record.partition("|")
                if not (rest.endswith("|d") and host == here):
                    return "wait"  # unacknowledged, or a default-mode get elsewhere (maybe dead)
        return "drained"

    def _own_keys(self, entries: list[bytes]) -> set[bytes]:
        """The utube keys of the in-flight ``entries`` '<seq>:...' of one consumer (their
        states, '<count>|<expires>|<ttr>|<d>|<key>' without the count, are in :pressure:meta
        under 'd<seq>': lib.lua state_of). Read after the entries: a state gone meanwhile
        (settled) only leaves its key out, and a get then waits and looks again."""
        seqs = [entry.partition(b":")[0] for entry in entries if not entry.startswith(b"s:")]
        if not seqs:
            return set()
        meta = self.keys.meta
        states = self.backend.call("HMGET", self.backend.client().hmget, meta, [b"d" + s for s in seqs])
        return {state.split(b"|", 4)[4] for state in states if state and state.count(b"|") >= 4} - {b""}

    def recover_waiter(self) -> None:
        """The consumer role is taken: if its holder is a dead process on this host, recover it.
        (A holder on another host is recovered when its lease expires, by the sweep.)"""
        k = self.keys
        client = self.backend.client()
        pipe = client.pipeline(transaction=False)
        pipe.get(k.waiter)
        pipe.hgetall(k.consumers)
        waiter, records = self.backend.call("read the waiter", pipe.execute)
        if waiter is None:
            self.recover_spec_holder(k.consumer_free, k.consumer)
            return
        record = records.get(waiter)
        if record is not None and self.recover_if_dead(waiter.decode(errors="replace"),
                                                       record.decode(errors="replace")):
            return
        self.sweep_if_due()  # a waiter elsewhere whose lease expired

    def recover_spec_holder(self, free_key: str, role_key: str) -> None:
        """A role held by a plain spec client: if its identifier names a process on this host
        that is gone (seen twice, apart), give the token back."""
        holder = self.read(role_key)
        parts = (holder or "").split(":")
        if len(parts) < 2 or parts[0] != identity.hostname() or not parts[1].isdigit():
            return
        if identity.pid_exists(int(parts[1])):
            self.suspects.pop(free_key, None)
            return
        seen = self.suspects.get(free_key)
        now = time.monotonic()
        if seen is None or seen[0] != holder:
            self.suspects[free_key] = (holder or "", now)
        elif now - seen[1] >= SPEC_HOLDER_GRACE:
            if self.run(RESTORE.name, RESTORE.keys(free_key, role_key),
                        RESTORE.check((holder,))) == RestoreStatus.RESTORED:
                _log.event(_log.QUEUE, logging.WARNING, "role_restored",
                           "queue %r: %s was held by dead client %s: token restored",
                           self.name, free_key, holder, queue=self.name, key=self.keys.base, role=free_key,
                           holder=holder)
            self.suspects.pop(free_key, None)

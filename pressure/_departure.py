"""A consumer's clean leave: ``Departure``, what one handle's consumers are in this process,
and how they deregister when the handle is done with them.

A get registers its consumer in ``:pressure:consumers`` (a record naming its host, process
and mode); a consumer whose process is gone and whose record is still there is a death
(pressure/_roles.py takes back what it held and says so, at WARNING). A consumer that ends
normally leaves instead: when its handle is disconnected (``disconnect()``), garbage
collected, or its process exits (a ``multiprocessing.util.Finalize``: it runs at the exit
of a process, a multiprocessing child's included, and when the handle is collected). Its
leave is requeue.lua 'recover', the step a death gets, run quietly: what the consumer still
holds goes back exactly as at a death (its inbox, never received; in reliable mode what it
did not acknowledge, at once rather than after the visibility timeout), except what its
default-mode gets returned, which is in its hands and is dropped; the role, if it waits;
its record. A leave that cannot reach the server is given up silently (the consumer is
then taken for dead later, as before): it never blocks longer than a command, nor raises.
"""

from __future__ import annotations

import multiprocessing.util
import os
import threading
from collections.abc import Collection
from typing import Any

from ._scripts import REQUEUE
from ._validate import Options
from .connection import Backend
from .keys import QueueKeys

#: multiprocessing runs exit finalizers of priority >= 0 first, before it joins the child
#: processes; a leave needs nothing of them (an anonymous queue is deleted at -10, after)
_LEAVE_PRIORITY = 0


class Departure:
    """The consumers one queue handle registered in this process, and their leave.

    It holds no reference to the handle (its finalizer must let the handle be collected):
    the wire, the key names, the variant of the scripts and the options only."""

    def __init__(self, backend: Backend, keys: QueueKeys, variant: str, options: Options) -> None:
        self.backend = backend
        self.keys = keys
        self.variant = variant
        self.reliable = options.reliable
        self.max_deliveries = options.max_deliveries_arg
        self.pid = os.getpid()
        #: consumer id -> its record, for each consumer of the handle in this process
        self.joined: dict[str, str] = {}
        #: default mode: consumer id -> the delivery numbers its last get returned (shared
        #: with the consumer, which keeps it up to date): in its hands, never requeued
        self.received: dict[str, list[str]] = {}
        #: reliable mode: the handle's deliveries acknowledged but maybe not yet on the server
        #: (task_done()'s posted acknowledgements, their replies unread, and those owed again:
        #: the consumer's own collections, shared): the leave acknowledges them itself, since
        #: its script runs on another connection and could overtake them
        self.acknowledged: list[Collection[Any]] = []
        self.lock = threading.RLock()
        self.finalizer: multiprocessing.util.Finalize[None] | None = None

    def join(self, owner: object, cid: str, record: str) -> None:
        """Consumer ``cid`` (with ``record``) of handle ``owner`` is about to register: it
        leaves when ``owner`` is collected, or this process exits, if not before."""
        with self.lock:
            if self.pid != os.getpid():  # forked: the parent's consumers are the parent's
                self.pid, self.finalizer = os.getpid(), None
                self.joined.clear()
                self.received.clear()
            self.joined[cid] = record
            if self.finalizer is None:
                self.finalizer = multiprocessing.util.Finalize(owner, self.leave, exitpriority=_LEAVE_PRIORITY)

    def leave(self) -> None:
        """Deregister this process's consumers of the handle, giving back what they hold
        (see the module's docstring). Never raises; a consumer it cannot reach is left as
        it is (after one that did not answer, the others are not tried: each would wait as
        long)."""
        with self.lock:
            if self.pid != os.getpid() or not self.joined:
                return
            joined, self.joined = self.joined, {}
        held = self.received
        k = self.keys
        reached = True
        for cid, record in joined.items():
            returned: list[str] = (
                [d.id for acks in self.acknowledged for d in list(acks) if d.consumer == cid] if self.reliable
                else list(held.pop(cid, ())))
            if not reached:
                continue  # the server did not answer the last one: none waits for it again
            try:
                self.backend.run(REQUEUE.name + self.variant, REQUEUE.keys(k), REQUEUE.check(
                    ("recover", k.inbox_prefix, k.inflight_prefix, self.max_deliveries, cid, record, "",
                     k.held_prefix, "", "", *returned)), patient=False)
            except Exception:  # noqa: BLE001 - unreachable, gone, at exit: taken for dead later, as before
                reached = False

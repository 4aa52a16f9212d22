"""What one handle's consumer holds, and how it gives it back: ``_ConsumerState``, the base
of ``_Consumer`` (pressure/_consumer.py: how gets take items and wait). Its lists in Redis
(an inbox, an in-flight list and a held batch, named by ``id()``: one set per handle and
thread), the deliveries it made of what it received (and the dead-lettering of those that
cannot be loaded), what reliable mode holds unacknowledged, and the cancels (get.lua
'cancel') that give the consumer role and anything never received back, including those a
dropped connection left owing, sent again before the consumer's next call.
"""

from __future__ import annotations

import collections
import logging
import os
import uuid
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import _log, identity, serializers
from ._departure import Departure
from ._records import _batch_header, _parse_entry
from ._scripts import GET
from .connection import NATIVE_BYTES, pack_command, pack_get_moves
from .errors import BackendError, DeserializationError, IntegrityError
from .reliable import Delivery

if TYPE_CHECKING:
    from .queue import Queue

T = TypeVar("T")

#: What a native get (lua/get.lua flag 'N') received: its delivery number, deliveries, time
#: (ms) and the payload, which came apart from them (the BLMOVE's reply).
Native = tuple[str, int, int, bytes]

#: The most default-mode task_done() tokens a handle keeps (see _ConsumerState.owing).
OWING_MOST = 10_000


class _ConsumerState(Generic[T]):
    """The consumer state of one queue handle: its lists in Redis (named by ``id()``, one
    set per handle and thread), the deliveries it holds unacknowledged, and the cancels it
    still owes."""

    def __init__(self, queue: Queue[T]) -> None:
        # what it borrows from its queue handle
        self.queue = queue  # its Deliveries point back to it, and its client_id is per thread
        self.backend = queue._backend
        self.keys = queue._keys
        self.name = queue._name
        self.options = queue._options
        self.roles = queue._roles
        self.serializer = queue._serializer
        self.unwrap = queue._unwrap
        #: the stored items are the items themselves (bytes on a queue that stores payloads)
        self.plain = isinstance(self.serializer, serializers.BytesSerializer) and queue._STORES_PAYLOADS
        self.variant = queue._variant
        self.raise_for = queue._raise_for
        self.missing = queue._missing
        self.get_command = queue._get_command
        self.get_many_command = queue._get_many_command
        #: get.lua 'many' with a share (ARGV[8]): built once, for the consumers that use it
        self.get_share_command = GET.command(self.keys, variant=self.variant, more=2)
        self.get_keys = queue._get_keys
        # its own state
        #: reliable mode: the deliveries of get()/get_many() not yet acknowledged, oldest
        #: first (task_done() acknowledges the first)
        self.unacked: collections.deque[Delivery[T]] = collections.deque()
        #: reliable mode: every delivery this handle holds unsettled, receive()'s included, by
        #: delivery number: a cancel leaves them in flight (``cancel``)
        self.holding: dict[str, Delivery[T]] = {}
        #: task_done()s posted whose acknowledgement did not run or lost its reply: sent
        #: again by the next call (Reliability._settle_owed); errors posted ones replied
        #: (None: the queue was gone), raised by the next call
        self.owed: list[Delivery[T]] = []
        #: task_done()s posted whose reply has not been read yet: still this handle's (a
        #: cancel must not take them for entries never received), as the owed ones are
        self.posted: list[Delivery[T]] = []
        self.ack_errors: list[Exception | None] = []
        #: default mode: one token per item this handle's gets returned and no task_done()
        #: has answered yet (a deque: appends and pops are atomic across threads); a
        #: task_done() that takes one posts its count (see Reliability.task_done). Bounded:
        #: a consumer that never calls task_done() keeps the last OWING_MOST only (a
        #: task_done() finding none waits for its reply, as before)
        self.owing: collections.deque[None] = collections.deque(maxlen=OWING_MOST)
        #: default mode: posted task_done() counts that did not run (refused, NOSCRIPT):
        #: counted again by the next call
        self.counts_owed: collections.deque[None] = collections.deque()
        #: default mode: posted task_done() counts whose reply has not been read yet
        self.counting: collections.deque[None] = collections.deque()
        self.drop_commands: dict[str, bytes] = {}  # consumer id -> its DEL (drop_received)
        #: FIFO gets can move payloads natively (get.lua flag 'N')
        self.native = self.variant == ""
        #: whether the last payload received was large: the next get moves its item natively
        self.large = False
        #: (consumer id, items) -> its native get's commands behind the script (``get_moves``)
        self.moves: dict[tuple[str, int], bytes] = {}
        #: consumer id -> (delivery number, bytes) of what its last native get returned, for
        #: its drop to count (``drop_received``)
        self.native_received: dict[str, tuple[str, int]] = {}
        #: whether this handle's last blocking get had to wait (then the next one sends 'woken')
        self.waited = True
        #: this handle's consumers in this process, and their leave (disconnect, collection, exit)
        self.departure = Departure(queue._backend, queue._keys, queue._variant, queue._options)
        #: consumer id -> the delivery numbers its last get returned (the leave drops them)
        self.last_received: dict[str, list[str]] = self.departure.received
        self.departure.acknowledged += [self.posted, self.owed]
        self.record_cache: tuple[int, str] = (-1, "")
        #: (consumer id, mode, flag) -> get.lua's call packed (``packed_get``), made with the
        #: record ``packed_for``
        self.packed_gets: dict[tuple[str, str, str], list[bytes]] = {}
        #: consumer id -> get.lua 'drop' packed around its delivery number and bytes (``packed_drop``)
        self.drop_parts: dict[str, list[bytes]] = {}
        self.packed_for = ""
        # this handle's own consumer lists: two handles in one thread never share them
        self.token = uuid.uuid4().hex[:8]
        #: consumers whose cancel failed: retried before the next call
        self.pending_cancel: list[str] = []

    # -- its lists and its record -----------------------------------------------------

    def id(self) -> str:
        """'<client id>#<token>': names this handle's inbox and in-flight list in this thread
        (a consumer of this handle from now on: it leaves with the handle, see Departure)."""
        cid = f"{self.queue.client_id}#{self.token}"
        departure = self.departure
        if cid not in departure.joined or departure.pid != os.getpid():
            departure.join(self.queue, cid, self.record())
        return cid

    def slice(self) -> float:
        """One wait: a third of the lease at most, so a live waiter always renews it in time."""
        return min(self.backend.slice, self.options.lease_ms / 3000)

    def record(self) -> str:
        """'host|pid|start|ms|mode' of this process, for :pressure:consumers: the
        visibility timeout and 'r' in reliable mode, the lease and 'd' otherwise."""
        pid = os.getpid()
        if self.record_cache[0] != pid:
            host, pid, start = identity.process_record()
            mode = "r" if self.options.reliable else "d"
            self.record_cache = (pid, f"{host}|{pid}|{start}|{self.options.visibility_ms}|{mode}")
        return self.record_cache[1]

    def packed_get(self, cid: str, mode: str, flag: str) -> list[bytes]:
        """get.lua's whole call for consumer ``cid`` in ``mode`` with ``flag`` (``_tail``), for
        ``Backend.packed_script``: packed once, for as long as this process's record stands
        (the client identifier is part of ``cid``, or the handle's own). A backlog's gets send
        the same call every time."""
        self._packed_fresh()
        key = (cid, mode, flag)
        packed = self.packed_gets.get(key)
        if packed is None:
            if len(self.packed_gets) >= 16:  # the threads, modes and flags met are few: keep the last
                self.packed_gets.pop(next(iter(self.packed_gets)))
            packed = self.packed_gets[key] = [self.get_command.pack(self._tail(cid, mode, flag))]
        return packed

    def packed_drop(self, cid: str, seq: str, size: int) -> bytes:
        """get.lua 'drop' of consumer ``cid``'s native delivery ``seq`` of ``size`` bytes
        (``drop_received``), packed: all but those two once (as ``packed_get``)."""
        self._packed_fresh()
        parts = self.drop_parts.get(cid)
        if parts is None:
            if len(self.drop_parts) >= 16:  # the threads met are few: keep the last ones
                self.drop_parts.pop(next(iter(self.drop_parts)))
            # around ARGV[3] (the delivery number) and ARGV[7] (the bytes)
            parts = self.drop_parts[cid] = self.get_many_command.split([*self._tail(cid, "drop", ""), 0], 2, 6)
        first, count = seq.encode(), b"%d" % size
        return b"%b$%d\r\n%b\r\n%b$%d\r\n%b\r\n%b" % (parts[0], len(first), first, parts[1], len(count), count,
                                                          parts[2])

    def _packed_fresh(self) -> None:
        """Forget the calls packed for another process (a forked child's handle): they carry
        its record."""
        record = self.record()
        if record is not self.packed_for:
            self.packed_gets.clear()
            self.drop_parts.clear()
            self.packed_for = record

    def _tail(self, cid: str, mode: str, flag: str) -> list[bytes | str | int]:
        """get.lua's ARGV for consumer ``cid`` in ``mode`` (its one key, the queue's, is fixed:
        it names the consumer's lists from ``cid``)."""
        return [cid, mode, flag, self.record(), self.options.lease_ms, self.queue.client_id]

    # -- what it received -------------------------------------------------------------

    def get_moves(self, cid: str, count: int = 1) -> bytes:
        """The commands behind consumer ``cid``'s native get of up to ``count`` items in its MULTI
        (``pack_get_moves``)."""
        moves = self.moves.get((cid, count))
        if moves is None:
            if len(self.moves) >= 16:  # the counts a consumer asks for are few: keep the last ones
                self.moves.pop(next(iter(self.moves)))
            moves = self.moves[(cid, count)] = pack_get_moves(self.keys.gate, self.keys.base,
                                                              self.keys.held(cid), count)
        return moves

    def delivery(self, cid: str, entry: bytes | Native) -> Delivery[T]:
        """The Delivery of an entry this consumer received, or of what a native get received."""
        if isinstance(entry, tuple):
            seq, deliveries, ms, payload = entry
            if not self.options.reliable:  # (a reliable one's bytes are counted by its ack)
                self.native_received[cid] = (seq, len(payload))
        else:
            seq, deliveries, ms, payload = _parse_entry(entry)
        self.large = self.native and len(payload) >= NATIVE_BYTES
        payload = self.unwrap(payload)
        try:
            item = serializers.loads(self.serializer, payload)
        except DeserializationError as exc:
            # it will never load with this serializer: to the dead-letter list, not lost
            self.dead_letter(cid, seq)
            self.log_dead_letter(exc)
            raise
        if deliveries > 1:
            self.redelivered(cid, seq, deliveries)
        delivery = Delivery(item, seq, deliveries, ms / 1000, cid, self.queue, _payload=payload)
        if self.options.reliable:
            self.holding[seq] = delivery  # received: held until settled
        return delivery

    def redelivered(self, cid: str, seq: str, deliveries: int) -> None:
        """The event of an item consumer ``cid`` took that was delivered before."""
        _log.event(_log.QUEUE, logging.INFO, "redelivery", "queue %r: delivery %s is delivered again "
                   "(delivery %d)", self.name, seq, deliveries, queue=self.name, key=self.keys.base,
                   delivery=seq, deliveries=deliveries, consumer=cid)

    def deliveries(self, cid: str, entries: list[bytes]) -> list[Delivery[T]]:
        """The Deliveries of entries this consumer received (get.lua 'many'); an item that
        cannot be deserialized is dead-lettered and left out."""
        deliveries = []
        for entry in entries:
            try:
                deliveries.append(self.delivery(cid, entry))
            except DeserializationError:  # dead-lettered (and logged); the others are still ours
                pass
        self.last_received[cid] = [d.id for d in deliveries]
        if self.options.reliable:
            self.unacked.extend(deliveries)
        return deliveries

    def load_each(self, cid: str, header: bytes, stored: list[bytes]) -> list[T]:
        """Deserialize a batch's items one by one: one that cannot be is dead-lettered (as
        ``delivery`` does) and left out; the others are returned."""
        first, _, _ = _batch_header(header)
        # releasing an item turns the held batch into in-flight entries: all received
        self.last_received[cid] = ["h%d" % first, *(str(first + i) for i in range(len(stored)))]
        items = []
        for i, item in enumerate(stored):
            try:
                items.append(serializers.loads(self.serializer, self.unwrap(item)))
            except DeserializationError as exc:
                self.dead_letter(cid, str(first + i))
                self.log_dead_letter(exc)
        return items

    def drop_received(self, cid: str) -> None:
        """Default mode: the items of this get are in hand, about to be returned: drop what
        consumer ``cid`` holds in Redis (its in-flight list and held batch), without waiting
        for the reply. Until then, a consumer that dies has them requeued; from then on they
        are its own, as a queue.Queue get's are (if the command is lost, the next get drops them)."""
        native = self.native_received.pop(cid, None)
        if native is not None:
            # a native get's batch of one: counted in :stats:consumed_bytes as it goes (get.lua
            # 'drop'); if this is lost, the next get counts and drops it
            seq, size = native
            self.backend.post(self.packed_drop(cid, seq, size))
            return
        command = self.drop_commands.get(cid)
        if command is None:
            command = self.drop_commands[cid] = pack_command("DEL", self.keys.inflight(cid),
                                                             self.keys.held(cid))
        self.backend.post(command)

    def log_dead_letter(self, exc: DeserializationError) -> None:
        """Log an item dead-lettered because it cannot be loaded (or its signature is bad)."""
        _log.event(_log.QUEUE, logging.WARNING if isinstance(exc, IntegrityError) else logging.ERROR,
                   "dead_letter", "queue %r: %s (moved to the dead-letter list)", self.name, exc,
                   queue=self.name, key=self.keys.base, count=1,
                   reason="bad_signature" if isinstance(exc, IntegrityError) else "undeserializable")

    def dead_letter(self, cid: str, seq: str) -> bool:
        """Move delivery ``seq`` of consumer ``cid`` straight to the dead-letter list (an item
        its reader cannot use): a release that counts as the last delivery allowed."""
        _, dead = self.roles.requeue("release", cid, seq, max_deliveries="1")
        return bool(dead)

    # -- giving back: stopping a wait -------------------------------------------------

    def cancel(self, cid: str) -> Any:
        """Stop waiting; entries in our in-flight list never received go back to our inbox."""
        if self.options.reliable:
            # what gets and receives returned and is not settled yet: held, acknowledged by
            # a posted task_done() not yet run (its reply unread), or owed again
            held = [*self.holding.values(), *self.posted, *self.owed]
            received = [d.id for d in held if d.consumer == cid]
        else:
            received = self.last_received.get(cid, [])
        client_id = cid.rpartition("#")[0]
        return GET.call(self.backend, self.get_keys, (cid, "cancel", "0", self.record(), self.options.lease_ms,
                                                      client_id, *received), variant=self.variant)

    def cancel_after_error(self, cid: str, now: bool = True) -> None:
        """Give the consumer role back after a failed wait; if Redis is unreachable, on the next call.

        An item delivered meanwhile stays in this client's inbox: its next get returns it.
        """
        if now:
            try:
                self.cancel(cid)
                return
            except BackendError:
                pass
        self.pending_cancel.append(cid)

    def retry_cancels(self) -> None:
        """Send the cancels a failed call left owing (before anything else this consumer does)."""
        while self.pending_cancel:
            self.cancel(self.pending_cancel[0])
            self.pending_cancel.pop(0)

    # -- reliable mode ----------------------------------------------------------------

    def forget(self, delivery: Delivery[T], in_line: bool = True) -> None:
        """``delivery`` is settled: no longer this handle's to acknowledge. ``in_line``: it may
        still be in task_done()'s line (False: task_done() took it out already)."""
        if self.holding.get(delivery.id) is delivery:  # not a later delivery of the same number
            self.holding.pop(delivery.id, None)
        if in_line:
            try:
                self.unacked.remove(delivery)
            except ValueError:
                pass

    def forget_all(self, cid: str) -> None:
        """Every delivery consumer ``cid`` holds is settled (or settled by the caller's own
        script): none is this handle's to acknowledge, nor task_done()'s line any more."""
        self.unacked.clear()
        for delivery in list(self.holding.values()):
            if delivery.consumer == cid:
                self.forget(delivery, in_line=False)

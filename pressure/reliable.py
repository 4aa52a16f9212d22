"""Reliable mode: a ``Delivery`` stays in its consumer's in-flight list until acknowledged.

``Reliability`` is the half of a queue handle that settles deliveries (acknowledge,
release, touch, bury; ack.lua, requeue.lua, touch.lua), counts the tasks settled
(``task_done``, ``unfinished_tasks``, ``join``) and inspects and repairs what is
delivered and not settled (``in_flight``, ``dead_letters``, ``kick``, ``purge_dead``,
``repair``): ``pressure.Queue`` inherits it.
"""

from __future__ import annotations

import collections
import functools
import hashlib
from dataclasses import dataclass, field
from collections.abc import Callable, MutableSequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import redis

from . import serializers
from ._scripts import (FIND_ITEM, JOIN_CHECK, KICK, REPAIR, TOUCH, AckStatus, FindStatus, JoinCheckStatus,
                       QueueScript, RepairStatus)
from ._reading import (check_task_id, dead_letters_of, in_flight_of, in_flight_reads, log_kick, log_purge,
                       log_repaired, repair_reset, task_info_of)
from ._records import DeadLetter, InFlight, RepairReport, TaskInfo
from ._validate import Options, _count, _delay_ms
from .connection import Backend, PackedScript, refused_for_now
from .errors import BackendError, OutcomeUnknown, QueueDoesNotExist
from .keys import QueueKeys

if TYPE_CHECKING:
    from ._consumer import _Consumer
    from ._roles import _Roles
    from .queue import Queue

__all__ = ["Delivery", "Reliability"]

T = TypeVar("T")


@dataclass(eq=False)
class Delivery(Generic[T]):
    """One delivery of an item: acknowledge it, or release it for redelivery.

    ``get()`` hides this object; ``receive()`` returns it, for code that
    acknowledges out of order. Until acknowledged, the item stays in Redis
    in this consumer's in-flight list (reliable mode).
    """

    #: The item.
    item: T
    #: The delivery number (unique per queue).
    id: str
    #: How many times the item has been delivered, this one included.
    deliveries: int
    #: When it was delivered (Unix time, by the server's clock).
    delivered_at: float
    #: The identifier of the consumer it was delivered to.
    consumer: str
    _queue: Queue[T] = field(repr=False)
    #: A task_done() for it may have run (its reply was lost): another counts only if not.
    _unsure: bool = field(default=False, repr=False)
    #: The payload it came in (its task id is the SHA1 of it).
    _payload: bytes = field(default=b"", repr=False)

    @property
    def task_id(self) -> str:
        """The item's task id (the hex SHA1 of its payload), for ``q.peek_item`` and
        ``q.delete_item``: the same in every state the item goes through."""
        return hashlib.sha1(self._payload).hexdigest()

    def delete(self) -> bool:
        """Remove the item for good, wherever it is now (tarantool's ``delete``): this delivery
        while it is in flight; once given back, its task id's copy that is queued (the next
        out), delayed or buried. False if it is gone already (acknowledged)."""
        self._queue._consumer.forget(self)
        return self._queue._find_item("delete", self.task_id, self.id) is not None

    def ack(self) -> bool:
        """Acknowledge: the item leaves Redis, and counts as done for ``join()``. False if it was
        already acknowledged or requeued (then nothing is counted)."""
        return self._queue._ack(self, task_done=False)

    def release(self, *, delay: float | None = None) -> bool:
        """Give the item back: it returns to the head of the queue (or, past max_deliveries,
        to the dead-letter list). False if it was already acknowledged or requeued.
        ``delay`` (seconds): it waits that long among the delayed items, then enters the
        queue as a delayed put does (tarantool's ``release(id, {delay = ...})``), keeping its
        delivery count."""
        return self._queue._release(self, _delay_ms("delay", delay))

    def bury(self) -> bool:
        """Park a poisoned item: it goes to the dead letters with reason "buried"
        (tarantool's ``bury``), whatever its delivery count, until ``q.kick()`` restores it.
        False if it was already acknowledged or requeued."""
        return self._queue._bury_delivery(self)

    def _ack_call(self) -> tuple[PackedScript, list[bytes | str | int]]:
        """This acknowledgement, as a call for ``Backend.pipeline``."""
        return self._queue._ack_call(self)

    def touch(self) -> bool:
        """Restart this delivery's visibility timeout (reliable mode): call it while
        processing takes longer than the timeout, so the item is not redelivered
        meanwhile. False if it was already acknowledged or requeued."""
        return bool(self._queue._touch(self.consumer, self.id))



def _answered(ack_errors: list[Exception | None], reply: Any, loaded: set[str], name: str) -> bool:
    """Whether ``reply``, a posted ack.lua call's, is its answer (it ran); its error, if it
    says one, is kept in ``ack_errors`` for the handle's next call to raise (None: the queue
    is gone). A NOSCRIPT takes script ``name`` off ``loaded``. (The sync handles' and
    AsyncQueue's posted acknowledgements and counts alike.)"""
    if not (isinstance(reply, list) and len(reply) == 2):
        if isinstance(reply, redis.exceptions.NoScriptError):
            loaded.discard(name)
        return False
    _note_ack_status(ack_errors, reply[1])
    return True


def _note_ack_status(ack_errors: list[Exception | None], unfinished: int) -> None:
    """Keep the error ack.lua's count answer says, if any, in ``ack_errors``."""
    if unfinished == AckStatus.TOO_MANY:
        ack_errors.append(ValueError("task_done() called too many times"))
    elif unfinished == AckStatus.NO_QUEUE:
        ack_errors.append(None)  # the queue is gone: _missing() then


class _Acknowledged(Protocol):
    _unsure: bool


def _posted_ack_check(delivery: _Acknowledged, posted: MutableSequence[Any], owed: MutableSequence[Any],
                      ack_errors: list[Exception | None], loaded: set[str], name: str) -> Callable[[Any], None]:
    """The check of a posted acknowledgement's reply (no I/O: it runs in the middle of
    another command's exchange): ``delivery`` leaves ``posted``; an answer is read
    (``_answered``); none (lost with the connection: it may have run; refused: it did not)
    puts the delivery in doubt and in ``owed``, sent again by the next call in ack.lua's exact
    form. (Sync handles and AsyncQueue.)"""
    def check(reply: Any) -> None:
        try:
            posted.remove(delivery)
        except ValueError:
            pass
        if _answered(ack_errors, reply, loaded, name):
            return
        delivery._unsure = True
        owed.append(delivery)

    return check


def _posted_count_check(counting: collections.deque[None], counts_owed: collections.deque[None],
                        ack_errors: list[Exception | None], backend: Backend, loaded: set[str],
                        name: str) -> Callable[[Any], None]:
    """The check of a posted default-mode count's reply (ack.lua '-'; no I/O): one leaves
    ``counting``; an answer is read (``_answered``); a count that did not run (NOSCRIPT, or
    refused for now) is owed (``counts_owed``: counted again, waiting, by the next call); a
    script that failed, or a reply lost with the connection (it may or may not have counted:
    OutcomeUnknown, as a task_done() that waited would have raised), is an error the next
    call raises (``ack_errors``). (Sync handles and AsyncQueue.)"""
    def check(reply: Any) -> None:
        try:
            counting.popleft()
        except IndexError:
            pass
        if _answered(ack_errors, reply, loaded, name):
            return
        if isinstance(reply, redis.exceptions.NoScriptError) or refused_for_now(reply):
            counts_owed.append(None)  # it did not run: counted again
        elif isinstance(reply, redis.RedisError):  # the script failed (what it did stays done)
            try:
                backend.raise_error(reply, "task_done()", True)
            except Exception as exc:  # noqa: BLE001 - the error it stands for, raised later
                ack_errors.append(exc)
        else:  # LOST
            ack_errors.append(OutcomeUnknown(
                f"task_done() on {backend.config.url}: the connection was lost with its reply: it "
                f"may or may not have counted"))

    return check


class Reliability(Generic[T]):
    """Settling deliveries, and what is delivered and not settled: a base class of Queue."""

    # what it uses of the queue handle (set by Queue._setup)
    _name: str
    _keys: QueueKeys
    _backend: Backend
    _options: Options
    _consumer: _Consumer[T]
    _roles: _Roles
    _ack_command: PackedScript
    #: ack.lua with ARGV[3], the delivery's bytes (a native delivery's are counted as it is acknowledged)
    _ack_sized_command: PackedScript

    _variant: str
    _serializer: serializers.Serializer

    def _unwrap(self, item: bytes) -> bytes:
        raise NotImplementedError

    def _missing(self, forget: bool = True) -> QueueDoesNotExist:
        raise NotImplementedError

    def _call(self, script: QueueScript, *args: Any, mutating: bool = True) -> Any:
        raise NotImplementedError

    def _own_posted(self) -> None:
        raise NotImplementedError

    # -- settling one delivery --------------------------------------------------------

    def _ack(self, delivery: Delivery[T], task_done: bool, *, in_line: bool = True) -> bool:
        """Acknowledge ``delivery`` (ack.lua). With ``task_done``, count the task exactly once
        across lost replies: after a reply lost on a broken connection, the acknowledgement
        is sent again at once in the form that counts the task only if the delivery is still
        in flight (i.e. the lost one did not run). If that fails too, OutcomeUnknown is raised
        and the delivery stays first in line, marked: task_done() again is exact."""
        inflight = self._keys.inflight(delivery.consumer)
        if not task_done:
            acked, unfinished = self._backend.script(self._ack_sized_command, (inflight, delivery.id, "0",
                                                     len(delivery._payload)), durability=self._options.durability)
        else:
            try:
                acked, unfinished = self._backend.script(
                    self._ack_sized_command,
                    (inflight, delivery.id, "2" if delivery._unsure else "1", len(delivery._payload)),
                    durability=self._options.durability)
            except OutcomeUnknown as exc:
                delivery._unsure = True
                if isinstance(exc.__cause__, redis.TimeoutError):
                    raise  # an unresponsive server: do not wait out another socket timeout now
                try:
                    acked, unfinished = self._backend.script(
                        self._ack_sized_command, (inflight, delivery.id, "2", len(delivery._payload)),
                        durability=self._options.durability)
                except BackendError:
                    raise exc from exc.__cause__  # still unknown: task_done() again will tell
        # in_line=False: task_done() took it out of its line already (no need to look there)
        self._consumer.forget(delivery, in_line=in_line)
        if unfinished == AckStatus.TOO_MANY:
            raise ValueError("task_done() called too many times")
        if unfinished == AckStatus.NO_QUEUE:
            raise self._missing()
        return bool(acked)

    def _ack_call(self, delivery: Delivery[T]) -> tuple[PackedScript, list[bytes | str | int]]:
        """The acknowledgement of ``delivery``, as a call for ``Backend.pipeline``."""
        self._consumer.forget(delivery)
        return self._ack_sized_command, [self._keys.inflight(delivery.consumer), delivery.id, "0",
                                         len(delivery._payload)]

    def _release(self, delivery: Delivery[T], delay_ms: str = "") -> bool:
        requeued, dead = self._roles.requeue("release", delivery.consumer, delivery.id, delay_ms=delay_ms)
        self._consumer.forget(delivery)
        return bool(requeued or dead)

    def _touch(self, cid: str, seq: str) -> int:
        """Restart the visibility timeout of delivery ``seq`` of consumer ``cid`` ('*': all it
        holds); how many were touched."""
        return int(TOUCH.call(self._backend, (self._keys.inflight(cid),), (seq,), variant=self._variant))

    def _bury(self, delivery: Delivery[T]) -> bool:
        """Move a delivery straight to the dead-letter list (an item its reader cannot use)."""
        self._consumer.forget(delivery)
        return self._consumer.dead_letter(delivery.consumer, delivery.id)

    def _bury_delivery(self, delivery: Delivery[T]) -> bool:
        """``Delivery.bury()``: to the dead letters, marked buried (requeue.lua 'release')."""
        _, dead = self._roles.requeue("release", delivery.consumer, delivery.id, reason="buried")
        self._consumer.forget(delivery)
        return bool(dead)

    # -- posted acknowledgements (task_done in reliable mode) ----------------------------

    def _can_post(self, delivery: Delivery[T]) -> bool:
        """Whether task_done() may post ``delivery``'s acknowledgement instead of waiting for
        it: no durability to wait for (WAIT needs the reply) and the delivery not in doubt (an
        acknowledgement refused with NOSCRIPT, on a server that lost its scripts, is sent again
        by the next call), and its script loaded on the server: a posted call is never loaded
        on NOSCRIPT, so the first acknowledgement waits for its reply (which loads it); else
        a handle that took many items and then called task_done() for each posted every
        acknowledgement into NOSCRIPT and sent each again, one round trip apiece."""
        return (self._options.durability is None and not delivery._unsure
                and self._backend.is_loaded(self._ack_command.name))

    def _post_ack(self, delivery: Delivery[T]) -> None:
        """task_done() for ``delivery`` without a round trip of its own: its ack.lua call goes
        out with this thread's next command (``Backend.post``), whose round trip brings its
        reply back. What the reply says is dealt with by ``_settle_owed`` at this handle's
        next call: an error is raised there; an acknowledgement that did not run (refused,
        NOSCRIPT) or whose reply was lost with the connection is sent again there, in the
        exact form (counted only if the first did not run). If the process dies first, the
        delivery is still in flight and is redelivered: at least once, never lost."""
        consumer = self._consumer
        backend = self._backend
        check = _posted_ack_check(delivery, consumer.posted, consumer.owed, consumer.ack_errors,
                                  backend._loaded, self._ack_command.name)
        consumer.posted.append(delivery)
        backend.post(self._ack_sized_command.pack((self._keys.inflight(delivery.consumer), delivery.id, "1",
                                                   len(delivery._payload))), check)

    def _settle_owed(self, flush: bool = False) -> None:
        """Deal with what posted acknowledgements left: send again those that did not run or
        whose reply was lost, then raise the first error one replied. ``flush``: first read
        the replies still unread (one round trip, only if there are any): for join() and the
        counts, which must see this handle's own task_done()s."""
        consumer = self._consumer
        if flush:
            self._own_posted()
        while consumer.counts_owed:  # the default mode's posted counts that did not run
            try:
                consumer.counts_owed.popleft()
            except IndexError:  # another thread of this handle took the last one
                break
            try:
                self._count_done()
            except OutcomeUnknown:
                raise  # it may have run: not owed any more
            except BackendError:  # it did not run: owed still
                consumer.counts_owed.appendleft(None)
                raise
        while consumer.owed:
            try:
                delivery = consumer.owed.pop(0)
            except IndexError:  # another thread of this handle took the last one
                break
            try:
                self._ack(delivery, task_done=True, in_line=False)
            except BackendError:  # still unknown (_unsure): the next call tries again
                consumer.owed.insert(0, delivery)
                raise
        if consumer.ack_errors:
            error = consumer.ack_errors.pop(0)
            raise error if error is not None else self._missing()

    # -- settling all at once ---------------------------------------------------------

    def _settle_all(self, cid: str, ack: bool) -> int:
        """Acknowledge (``ack``) or give back every delivery this handle's consumer ``cid``
        holds, in one step whatever their number: for a reader that takes many items and
        settles them together (pressure.spark). Returns how many were settled."""
        self._consumer.forget_all(cid)
        if ack:
            held, _ = self._backend.script(self._ack_command, (self._keys.inflight(cid), "*", "0"),
                                           durability=self._options.durability)
            return int(held)
        requeued, dead = self._roles.requeue("recover", cid, self._consumer.record())
        return max(0, int(requeued)) + int(dead)

    # -- task tracking: tasks settled, counted across every client ---------------------

    def task_done(self) -> None:
        """Indicate that a formerly enqueued task is complete.

        Used by queue consumer threads or processes, on any host. For each
        get() used to fetch a task, a subsequent call to task_done() tells the
        queue that the processing on the task is complete. If a join() is
        currently blocking, it will resume when all items have been processed.
        Raises a ValueError if called more times than there were items
        placed in the queue.

        In reliable mode it acknowledges this handle's oldest delivery of ``get()`` /
        ``get_many()``, exactly once: if it raises (e.g. OutcomeUnknown after a lost
        reply), calling it again finishes that same delivery's count, never a second one.
        A delivery counts once however its processing ends (see ``unfinished_tasks``), so
        with none held (``receive()``'s deliveries are settled by their own ``ack()``...)
        it raises ValueError, as a call too many.
        """
        unacked = self._consumer.unacked
        self._settle_owed()
        if self._options.reliable:
            try:  # the oldest delivery: this call's alone (threads share the handle's deque)
                delivery = unacked.popleft()
            except IndexError:
                pass
            else:
                try:
                    if self._can_post(delivery):
                        self._post_ack(delivery)  # no round trip: it goes with the next command
                        self._consumer.forget(delivery, in_line=False)  # held as posted until answered
                    else:
                        self._ack(delivery, task_done=True, in_line=False)
                except (ValueError, QueueDoesNotExist):
                    raise  # answered: the delivery is settled or gone
                except BaseException:
                    unacked.appendleft(delivery)  # still first in line: task_done() again is exact
                    raise
                return
            # every delivery counts once as its processing ends (ack, release, ...: docs,
            # reliability.md, Counting rules): one this handle's gets did not return has
            # nothing left to count
            raise ValueError("task_done() called too many times")
        # the default mode: a task_done() for an item this handle's gets returned posts its
        # count (no round trip of its own, as in reliable mode); one for none (a call too
        # many, or another handle's item) waits for its reply, so that the ValueError of a
        # call too many comes from the call itself, as with queue.Queue
        owing = self._consumer.owing
        try:
            owing.popleft()
        except IndexError:
            self._count_done()
            return
        if self._options.durability is None and self._backend.is_loaded(self._ack_command.name):
            self._post_count()
            return
        try:
            self._count_done()
        except (ValueError, QueueDoesNotExist):
            raise  # answered
        except BaseException:
            owing.appendleft(None)
            raise

    def _count_done(self) -> None:
        """task_done() without a delivery: count one task done (ack.lua '-'), waiting for it."""
        _, unfinished = self._backend.script(
            self._ack_command, (self._keys.inflight(self._consumer.id()), "-", "1"))
        if unfinished == AckStatus.TOO_MANY:
            raise ValueError("task_done() called too many times")
        if unfinished == AckStatus.NO_QUEUE:
            raise self._missing()

    def _post_count(self) -> None:
        """``_count_done`` without waiting: the call goes with this thread's next command, and
        what its reply says is dealt with by ``_settle_owed`` at this handle's next call: an
        error is raised there; a count that did not run (refused, NOSCRIPT) is sent again
        there; one whose reply was lost with the connection (it may or may not have run) is
        OutcomeUnknown there, as a task_done() that waited would have raised."""
        consumer = self._consumer
        backend = self._backend
        check = _posted_count_check(consumer.counting, consumer.counts_owed, consumer.ack_errors,
                                    backend, backend._loaded, self._ack_command.name)
        consumer.counting.append(None)
        backend.post(self._ack_command.pack((self._keys.inflight(consumer.id()), "-", "1")), check)

    @property
    def unfinished_tasks(self) -> int:
        """Items put (by any client) whose processing has not ended: what ``join()`` waits for.

        Each item counts once, as its processing ends: acknowledged (``task_done()``,
        ``Delivery.ack()``, an Executor's worker settling it), deleted (``Delivery.delete()``,
        ``delete_item()``), expired, dead-lettered (``Delivery.bury()``, ``max_deliveries``
        reached, an item that cannot be loaded or verified), discarded
        (``shutdown(immediate=True)``), or, in the default mode, marked done by
        ``task_done()`` (the get handed it over). An item that comes back (released,
        requeued from a dead consumer or past its visibility timeout) is not done; a dead
        letter ``kick()`` restores is unfinished again. (docs: reliability.md, Counting rules.)"""
        self._settle_owed(flush=True)
        unfinished, _ = self._call(JOIN_CHECK, mutating=False)
        if unfinished == JoinCheckStatus.NO_QUEUE:
            raise self._missing(forget=False)
        return int(unfinished)

    def join(self) -> None:
        """Blocks until all items in the queue have been gotten and processed.

        The count of unfinished tasks goes up whenever an item is added to the
        queue, by any client. The count goes down whenever a consumer calls
        task_done() to indicate that the item was retrieved and all work on it
        is complete, and whenever an item's processing ends another way
        (``Delivery.ack()``, a dead letter, a deletion...: see ``unfinished_tasks``).
        When the count of unfinished tasks drops to zero, join() unblocks.
        """
        self._settle_owed(flush=True)  # this handle's own task_done()s count first
        backend = self._backend
        stream = self._keys.all_tasks_done
        while True:
            unfinished, last = self._call(JOIN_CHECK, mutating=False)
            if unfinished == JoinCheckStatus.NO_QUEUE:
                raise self._missing(forget=False)
            if unfinished <= 0:
                return
            backend.call("XREAD", backend.client().xread, {stream: last},
                         block=max(int(backend.slice * 1000), 1))

    # -- inspection and repair --------------------------------------------------------

    def in_flight(self) -> list[InFlight]:
        """Every item delivered and not yet acknowledged, with its consumer, age and delivery count."""
        self._settle_owed(flush=True)
        client = self._backend.client()
        consumers = list(self._backend.call("HGETALL", client.hgetall, self._keys.consumers))
        pipe = client.pipeline(transaction=True)
        for read in in_flight_reads(self._keys, consumers):
            pipe.execute_command(*read)  # type: ignore[no-untyped-call]
        replies = self._backend.call("in_flight", pipe.execute)
        return in_flight_of(consumers, replies, self._unwrap, self._item_loads())

    def dead_letters(self) -> list[DeadLetter]:
        """The dead-letter list, oldest first: items delivered ``max_deliveries`` times."""
        client = self._backend.client()
        pipe = client.pipeline(transaction=True)
        pipe.time()
        pipe.lrange(self._keys.dead, 0, -1)
        time, entries = self._backend.call("dead_letters", pipe.execute)
        return dead_letters_of(time, entries, self._unwrap, self._item_loads())

    def _item_loads(self) -> Callable[[bytes], Any]:
        """How a listed record reads its ``item`` (``InFlight.item``, ``DeadLetter.item``): as
        ``get()`` reads a payload (DeserializationError, IntegrityError), holding the
        serializer, never the handle."""
        return functools.partial(serializers.loads, self._serializer)

    def peek_item(self, task_id: str) -> TaskInfo[T] | None:
        """One item by its task id (``Delivery.task_id``, ``InFlight.task_id``,
        ``DeadLetter.task_id``) and its state ('taken', 'ready', 'delayed', 'buried'), without
        changing anything (tarantool's ``peek``); None if there is no such item. O(n)."""
        return self._find_item("peek", task_id)

    def delete_item(self, task_id: str) -> TaskInfo[T] | None:
        """Remove one item by its task id, in any state (tarantool's ``delete``), and return
        what it was; None if there is no such item. It counts as done (``unfinished_tasks``),
        once: a taken one's ``ack()`` then counts nothing; a dead letter counted already. O(n)."""
        return self._find_item("delete", task_id)

    def _find_item(self, mode: str, task_id: str, own: str = "") -> TaskInfo[T] | None:
        task_id = check_task_id(task_id)
        k = self._keys
        found = self._call(FIND_ITEM, mode, task_id, k.inbox_prefix, k.inflight_prefix, own,
                           mutating=mode == "delete")
        if found == FindStatus.NOT_FOUND:
            return None
        return task_info_of(task_id, found, self._serializer)

    def kick(self, n: int | None = None) -> int:
        """Move up to ``n`` dead letters (all if None), oldest first, back to the head of the
        queue with a fresh delivery count. Returns how many moved."""
        count = -1 if n is None else _count("n", n)
        kicked = int(self._call(KICK, count))
        log_kick(self._name, self._keys, kicked)
        return kicked

    def purge_dead(self) -> int:
        """Delete the dead-letter list; return how many items it held."""
        pipe = self._backend.client().pipeline(transaction=True)
        pipe.llen(self._keys.dead)
        pipe.delete(self._keys.dead)
        purged = int(self._backend.call("purge_dead", pipe.execute, mutating=True)[0])
        log_purge(self._name, self._keys, purged)
        return purged

    def repair(self) -> RepairReport:
        """Reset the queue's role tokens to the protocol invariants, for operators.

        Every role token list is set to exactly one element, ``:not_full``
        agrees with the length and bound, ``:closed`` has two elements if it
        has any, and a registered waiter is cleared (a live one registers
        again). Consumers on this host whose process is gone give back what
        they held. Items are never lost. Run it when no client should be
        holding a role: it does not ask.
        """
        k = self._keys
        result = self._call(REPAIR)
        if result == [RepairStatus.NO_QUEUE]:
            raise self._missing()
        reset = repair_reset(result)
        recovered = []
        records = self._backend.call("HGETALL", self._backend.client().hgetall, k.consumers)
        for consumer, record in records.items():
            if self._roles.recover_if_dead(consumer.decode(errors="replace"), record.decode(errors="replace")):
                recovered.append(consumer.decode(errors="replace"))
        log_repaired(self._name, k, reset, recovered)
        return RepairReport(reset, recovered)

"""One handle's consumer: how a get takes items, waits for them, and stops waiting.

Every get sends get.lua in one of its modes (see its header):

* 'nowait' (``nowait``) and 'block' (``block``): one item; 'block' sends the script and
  ``BLMOVE <inbox> <inflight> RIGHT LEFT`` in one pipeline. If the queue is empty the
  script registers this consumer as the waiter (it then holds the consumer role, under a
  lease it renews every slice) and the BLMOVE waits; the next put.lua hands its item
  straight to the waiter's inbox. 'woken', sent behind the BLMOVE once a get has waited,
  takes such an item in the same round trip. A blocking get after one that left items
  queued (a backlog) sends 'nowait' alone first: no BLMOVE, no reply of it, per item;
* 'many' (``many``): up to n items queued now, each a Delivery; 'batch' (``batch``): up
  to n items as they are stored, under one header, for get_many in the default mode;
  'log' (``logged``): up to n items straight into a stream reader's log (QueueLog's);
* flag 'N' (``native_call``, ``queued_after``): once the last payload received was large,
  'nowait', 'block', 'woken' and (default mode) 'batch' go in a MULTI with the BLMOVEs that move
  the items into this consumer's held list, so that no payload enters Lua (a reliable consumer
  holds one such delivery at a time);
* 'cancel' (``cancel``): stop waiting, give the role back (only if still the waiter) and
  return what the in-flight list holds that was never received to the inbox. A cancel
  that fails on a dropped connection is kept and retried before this consumer's next call
  (``retry_cancels``), so the role is never left held. The cancels, the consumer's lists
  and the deliveries it makes are its base's, ``_ConsumerState`` (pressure/_consumer_state.py).

An entry stays in this consumer's in-flight list until acknowledged: at once (sent
without waiting for the reply, ``drop_received``) in the default mode, on ``task_done()``
or ``Delivery.ack()`` in reliable mode. A reply lost on a dropped connection therefore
loses nothing: the next get takes the entry back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar, cast

import redis

from ._consumer_state import Native, _ConsumerState
from ._packing import Call
from ._roles import CONSUMER, MIN_WAIT
from ._scripts import GET_FLAG, GetStatus
from ._validate import _TIMEOUT_MESSAGE, _timeout_value
from .connection import NATIVE_BYTES, _NotTransacted, refused_for_now
from .errors import BackendError, Empty, IntegrityError, ProtocolError, ShutDown
from .reliable import Delivery

T = TypeVar("T")

#: How often a get on a closed, empty queue looks again whether others still hold items
#: (an acknowledgement wakes nobody; an item given back wakes the waiter at once).
UNDRAINED_POLL = 0.1


def _wait_time(slice_: float, deadline: float) -> float:
    """One server-side wait: at most a slice, never past the deadline, never 0 (= forever)."""
    return max(min(slice_, deadline - time.monotonic()), MIN_WAIT)


class _Consumer(_ConsumerState[T]):
    """The consumer of one queue handle: its gets (its state, and the cancels that give it
    back: ``_ConsumerState``). The queue handle owns one; so do the executor's and Spark's
    readers, through the handle (see pressure._internal)."""

    # -- one item ---------------------------------------------------------------------

    def receive(self, block: bool, timeout: float | None,
                interrupt: Callable[[], bool] | None = None, native: bool = True) -> Delivery[T]:
        """``receive()``, except that a default-mode delivery stays in Redis (in flight) until
        ``drop_received``: one the process dies before returning is requeued. ``interrupt``:
        checked each time a blocking wait is woken (``Internal.wake_waiter``, a slice's end, a
        role given back); once true, the wait ends as if its timeout had passed (Empty).
        ``native``: the item may move natively (get.lua flag 'N') when the last payload was
        large; not for a get_many's first item, which its batch's call keeps in flight."""
        wait = _timeout_value(timeout) if block else None
        if wait is not None and wait < 0:
            self.refuse_negative_timeout()
        self.retry_cancels()
        cid = self.id()
        self.roles.sweep_if_due()
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            native = native and self.large and self.backend.transactions(self.keys.gate)
            entry = self.block(cid, wait, interrupt, native) if block else self.nowait(cid, native)
            try:
                delivery = self.delivery(cid, entry)
            except IntegrityError:  # never loaded: dead-lettered (and logged); wait for the next item
                self.last_received[cid] = []
                if deadline is not None:
                    wait = max(0.0, deadline - time.monotonic())
                continue
            # default mode: received is acknowledged (this consumer's next get drops it); a
            # native get's item is a held batch of one
            self.last_received[cid] = ["h" + delivery.id if isinstance(entry, tuple) else delivery.id]
            return delivery

    def refuse_negative_timeout(self) -> NoReturn:
        """A blocking get with a negative timeout: ValueError as queue.Queue raises it, after
        the ShutDown it checks first (closed and empty), with one read-only round trip, so
        no key changes (no consumer record, no wake-up entry, no sweep)."""
        _, ready, _, closed, _ = self.queue._info()
        if closed and ready == 0:
            raise ShutDown(f"queue {self.name!r} is shut down")
        raise ValueError(_TIMEOUT_MESSAGE)

    def native_call(self, cid: str) -> Any:
        """get.lua 'nowait' with flag 'N' in a MULTI with the commands that move the item
        natively (``get_moves``): what a native take received (``Native``), or the script's
        reply as without it (with 'n': {entry, items still queued}, or a status)."""
        backend, command = self.backend, self.get_command
        try:
            result, payload, _ = backend.script_moving(command, (), [self.get_moves(cid)], 2, all_replies=True,
                                                       packed=self.packed_get(cid, "nowait", "N")[0])
        except _NotTransacted:  # the ACL changed: nothing ran; the script's way
            return backend.packed_script(command.name, self.packed_get(cid, "nowait", "n"))
        return self.native_result(result, payload)

    @staticmethod
    def native_taken(result: Any, moved: Sequence[Any]) -> tuple[int, int, list[bytes], int] | None:
        """If ``result``, get.lua's reply to a call with flag 'N', says it moved items natively:
        (the first delivery number, the delivery time in ms, the payloads: the replies ``moved``
        of the BLMOVEs behind it, items still queued); else None."""
        if not (isinstance(result, list) and len(result) == 4 and isinstance(result[0], int)):
            return None
        first, count, ms, left = result
        payloads = list(moved[:count])
        if len(payloads) != count or not all(isinstance(payload, bytes) for payload in payloads):
            raise ProtocolError(f"get script took {count} items natively, but BLMOVE answered {payloads!r}")
        return first, ms, payloads, left

    @classmethod
    def native_result(cls, result: Any, payload: Any) -> Any:
        """get.lua's reply to a call with flag 'N' and the BLMOVE's behind it: [a ``Native``,
        items still queued] if the item moved natively, else the script's reply."""
        taken = cls.native_taken(result, [payload])
        if taken is None:
            return result
        first, ms, (moved,), left = taken
        return [(str(first), 1, ms, moved), left]

    def block(self, cid: str, wait: float | None, interrupt: Callable[[], bool] | None = None,
              native: bool = False) -> bytes | Native:
        """get.lua 'block' (and 'woken'): wait up to ``wait`` seconds (None: forever), or until
        ``interrupt()`` is true when the wait is woken. ``native``: the item moves natively
        (get.lua flag 'N': 'nowait', 'block' and 'woken' each in a MULTI with the BLMOVE that
        moves it)."""
        now = time.monotonic()
        backend = self.backend
        deadline = math.inf if wait is None else now + max(wait, 0.0)
        busy_deadline = max(deadline, now + backend.slice)
        command = self.get_command
        waited, self.waited = self.waited, True
        if not waited:
            # the last get left items queued (a backlog): 'nowait' takes the next one with the
            # script alone, without the BLMOVE behind it (one command and one reply less,
            # client and server), and says whether more are queued; finding none (another
            # consumer took them), the pipeline below as before
            try:
                if native:
                    got = self.native_call(cid)
                else:
                    got = backend.packed_script(command.name, self.packed_get(cid, "nowait", "n"))
            except BackendError:
                self.pending_cancel.append(cid)  # a lost reply: the entry waits in our in-flight list
                raise
            if isinstance(got, list):
                entry, more = got
                self.waited = not more  # none left: the next get sends the pipeline (and 'woken')
                return entry  # type: ignore[no-any-return]
            waited = True  # empty, busy, closed or gone: the pipeline below tells which
        inbox, inflight, held = self.keys.inbox(cid), self.keys.inflight(cid), self.keys.held(cid)
        idle = "N" if native else "0"  # get.lua's flag for 'block' (a native one may move the item)
        tail = self._tail(cid, "block", "1" if wait is not None and wait < 0 else idle)
        # behind the BLMOVE: takes the item a put announced to us, the waiter, as soon as the
        # BLMOVE returns (one round trip); left out while gets find items queued (it would
        # find nothing to do), at the cost of one more round trip the first time one waits
        woken = self._tail(cid, "woken", "N" if native else "0")
        moves = self.get_moves(cid) if native else b""

        def blmove(wait_for: float, then: list[bytes | str | int] | None) -> tuple[Any, Any, Any]:
            status, reply, taken = backend.script_then_blmove(command, tail, inbox, inflight, wait_for, then,
                                                              moves, 2)
            if moves and isinstance(status, list):  # the EXEC's replies: get.lua's, then BLMOVE's
                status = self.native_result(status[0], status[1])  # [Native, left], or a status
            if moves and isinstance(taken, list):
                taken = self.native_result(taken[0], taken[1])
                taken = taken[0] if isinstance(taken, list) else taken  # ('n': {entry or Native, left})
            return status, reply, taken

        maybe_waiting = True  # we may hold the consumer role as the registered waiter
        try:
            status, reply, taken = blmove(_wait_time(self.slice(), deadline), woken if waited else None)
            first = True
            while True:
                tail[GET_FLAG] = idle
                if isinstance(status, list):  # 'block' moved an item queued natively
                    maybe_waiting = False
                    self.waited = not (first and status[1] > 0)  # more queued: 'nowait' next
                    return status[0]  # type: ignore[no-any-return]
                if reply is not None and not reply.startswith(b"s:"):  # not a wake-up
                    maybe_waiting = False  # a delivery ends the wait (get.lua unregistered us)
                    # found queued with more behind it: the next get tries 'nowait' alone
                    self.waited = not (first and status == GetStatus.DELIVERED_MORE)
                    return reply  # type: ignore[no-any-return]
                if isinstance(taken, (bytes, tuple)):  # woken, and 'woken' took the item for us
                    maybe_waiting = False
                    return taken
                if isinstance(status, redis.RedisError):
                    if refused_for_now(status):  # LOADING, BUSY...: the script did not run, and
                        self.cancel(cid)  # what the BLMOVE may have moved goes back to our inbox
                    elif not isinstance(status, redis.exceptions.NoScriptError):
                        backend.raise_error(status, "script get", True)
                elif status == GetStatus.WAITING:
                    if interrupt is not None and interrupt():
                        return self.cancel_wait(cid)  # as when the deadline passes
                    if reply is None:
                        if time.monotonic() >= deadline:
                            return self.cancel_wait(cid)
                        self.roles.sweep()  # a slice ended: requeue what expired meanwhile
                    # woken by close or delete, or a slice ended: look again (and renew the lease)
                elif status == GetStatus.UNDRAINED:
                    # closed and empty, but items others hold may come back: take back what
                    # dead ones hold, else wait for the others as on an open, empty queue
                    maybe_waiting = False
                    holders = self.roles.recover_holders(cid)
                    if holders == "drained":
                        raise ShutDown(f"queue {self.name!r} is shut down")
                    if holders == "wait":
                        if time.monotonic() >= deadline:
                            raise Empty(f"queue {self.name!r} is empty")
                        tail[GET_FLAG] = "w"
                else:
                    maybe_waiting = False
                    if status == GetStatus.NO_QUEUE:  # deleted: our own lists are all that is left
                        backend.call("DEL", backend.client().delete, inbox, inflight, held, mutating=True)
                    self.raise_for(status)
                    if status == GetStatus.BUSY:
                        now = time.monotonic()
                        if now >= busy_deadline:
                            raise Empty(f"queue {self.name!r} is empty")
                        # (it takes the role back from a dead holder first, interrupted or not)
                        self.roles.wait_for_role(CONSUMER, busy_deadline - now)
                        if interrupt is not None and interrupt():
                            raise Empty(f"queue {self.name!r}: the wait was interrupted")
                    elif status not in (GetStatus.DELIVERED, GetStatus.DELIVERED_MORE):
                        raise ProtocolError(f"get script returned {status!r}")
                maybe_waiting = True
                first = False
                status, reply, taken = blmove(
                    _wait_time(UNDRAINED_POLL if tail[GET_FLAG] == "w" else self.slice(), deadline), woken)
        except BaseException as exc:
            if maybe_waiting:
                # an unresponsive or refusing server: do not wait out another socket timeout now
                timed_out = isinstance(exc, BackendError) and (
                    isinstance(exc.__cause__, redis.TimeoutError) or refused_for_now(exc.__cause__))
                self.cancel_after_error(cid, now=not timed_out)
            raise

    def nowait(self, cid: str, native: bool = False) -> bytes | Native:
        """get.lua 'nowait': an item queued now, else Empty (ShutDown if closed and drained).
        ``native``: it moves natively (get.lua flag 'N')."""
        backend = self.backend
        busy_deadline = time.monotonic() + backend.slice
        recovered = False
        try:
            while True:
                if native:
                    result = self.native_call(cid)
                    if isinstance(result, list):  # {entry or Native, items still queued}
                        result = result[0]
                else:
                    result = backend.packed_script(self.get_command.name, self.packed_get(cid, "nowait", "0"))
                if isinstance(result, (bytes, tuple)):
                    return result
                self.raise_for(result)
                if result == GetStatus.UNDRAINED and not recovered:
                    recovered = True  # closed and empty, but others hold items: dead ones' first
                    holders = self.roles.recover_holders(cid)
                    if holders == "drained":
                        raise ShutDown(f"queue {self.name!r} is shut down")
                    if holders == "recovered":
                        continue
                if result in (GetStatus.EMPTY, GetStatus.UNDRAINED):
                    raise Empty(f"queue {self.name!r} is empty")
                if result != GetStatus.BUSY:
                    raise ProtocolError(f"get script returned {result!r}")
                # another consumer is mid-step while items wait: wait for it like a mutex
                now = time.monotonic()
                if now >= busy_deadline:
                    raise Empty(f"queue {self.name!r}: the consumer role is held by "
                                f"{self.roles.read(self.keys.consumer)}")
                self.roles.wait_for_role(CONSUMER, busy_deadline - now)
        except BackendError:
            self.pending_cancel.append(cid)  # a lost reply: the entry waits in our in-flight list
            raise

    # -- many items -------------------------------------------------------------------

    def many(self, n: int) -> list[Delivery[T]]:
        """Up to ``n`` items (at most 1000) that are queued now, in one round trip (get.lua 'many');
        [] if there are none (or another consumer holds the role). Never waits. In reliable
        mode each stays in flight until acknowledged, as after ``receive()``; in the default
        mode they are acknowledged at once, as there."""
        return self.many_after((), n)[1]

    def many_after(self, before: Sequence[Call], n: int, share: int = 1) -> tuple[list[Any], list[Delivery[T]]]:
        """``many(n)``, the script calls ``before`` going ahead of it in the same round trip:
        (their replies, an error reply as the exception; what ``many`` returns). With
        ``share`` k > 1, no more than ceil(queued / k) of the items queued now."""
        cid, replies, result = self.queued_after(before, "many", n, share=share)
        if not result:
            return replies, []
        deliveries = self.deliveries(cid, result)
        if not self.options.reliable:
            self.drop_received(cid)  # in hand: acknowledged, as after receive()
        return replies, deliveries

    def many_ids(self, n: int) -> tuple[str, list[bytes]]:
        """What ``many(n)`` takes (reliable mode), as this consumer's id and the delivery
        numbers only, for a reader whose own script settles them; no Delivery is made, nor is
        any put in task_done()'s line. Only where the items need no loading (``plain``: nothing
        to deserialize or verify, so nothing to dead-letter here)."""
        if not (self.plain and self.options.reliable):
            raise ValueError("many_ids() is for a reliable handle of stored payloads ('bytes', FIFO)")
        cid, result = self.queued("many", n)
        ids: list[bytes] = []
        for entry in result:
            seq, deliveries, _ = entry.split(b":", 2)
            ids.append(seq)
            if deliveries != b"1":
                self.redelivered(cid, seq.decode(), int(deliveries))
        self.last_received[cid] = [i.decode() for i in ids]
        return cid, ids

    def logged(self, n: int, group: str) -> tuple[int, int] | GetStatus:
        """get.lua 'log': up to ``n`` items (at most 1000) queued now straight into the log of
        consumer group ``group`` (pressure/spark/log.py), in one round trip and one step: nothing
        waits in flight, and the items leave the queue's care as a default-mode get's do.
        (the log's tail, how many), or GetStatus.EMPTY if none were (none queued, or another
        consumer holds the role), or ENTRIES_WAITING: entries delivered to this consumer
        before wait in its inbox (``many_ids`` takes them). Never waits. Not for a signed
        queue (an item must be verified before it is logged: ``many_ids``)."""
        if self.queue._authkey:
            raise ValueError("logged() is for a queue whose items are not signed")
        self.retry_cancels()
        cid = self.id()
        self.roles.sweep_if_due()  # as queued() does
        tail = [*self._tail(cid, "log", "0"), n]
        result = self.backend.script(self.get_many_command, tail, items=[group.encode()])
        if not isinstance(result, list):
            if result in (GetStatus.EMPTY, GetStatus.BUSY, GetStatus.UNDRAINED):
                return GetStatus.EMPTY
            if result == GetStatus.ENTRIES_WAITING:
                return GetStatus.ENTRIES_WAITING
            self.raise_for(result)
            raise ProtocolError(f"get script returned {result!r}")
        for at in range(2, len(result), 2):
            self.redelivered(cid, str(result[at]), int(result[at + 1]))
        return int(result[0]), int(result[1])

    def queued(self, mode: str, n: int, keep: bool = False) -> tuple[str, list[bytes]]:
        """get.lua 'many' or 'batch': up to ``n`` items queued now, in one round trip, as
        (this consumer's id, the reply); the reply is [] if there are none (or another
        consumer holds the role). Never waits. ``keep`` ('batch'): leave what the in-flight
        list holds (the first item of the same get_many)."""
        cid, _, result = self.queued_after((), mode, n, keep)
        return cid, result

    def queued_after(self, before: Sequence[Call], mode: str, n: int, keep: bool = False, share: int = 1,
                     native: bool = False) -> tuple[str, list[Any], Any]:
        """``queued``, the script calls ``before`` going ahead of it in the same round trip
        (``Backend.pipeline``), as one transaction (all or none of them run): (this consumer's
        id, their replies, the get's reply). ``share`` ('many'): see ``many_after``. ``native``
        ('batch', nothing ``before``): in a MULTI with ``n`` BLMOVEs behind it (get.lua flag 'N');
        the get's reply is then (a header 'n:<first>:<ms>:', the payloads) if they moved."""
        self.retry_cancels()
        cid = self.id()
        self.roles.sweep_if_due()  # as receive() does: a consumer of batches also recovers dead peers
        tail = [*self._tail(cid, mode, ("K" if keep else "N") if native else ("k" if keep else "0")), n]
        command = self.get_many_command
        if share > 1 and mode == "many":
            command = self.get_share_command
            tail.append(share)
        replies: list[Any] = []
        try:
            if native:
                try:
                    result, *moved = self.backend.script_moving(command, tail, [self.get_moves(cid, n)], n + 1,
                                                                all_replies=True)
                except _NotTransacted:  # the ACL changed: nothing ran; the script's way
                    tail[GET_FLAG] = "k" if keep else "0"
                    result, moved = self.backend.script(command, tail), []
                taken = self.native_taken(result, moved)
                if taken is not None:
                    first, ms, payloads, _ = taken
                    return cid, replies, (b"n:%d:%d:" % (first, ms), payloads)
            elif before:
                *replies, result = self.backend.pipeline([*before, (command, tail)], atomic=len(before))
                if isinstance(result, redis.RedisError):
                    self.backend.raise_error(result, "script get", True)
            else:
                result = self.backend.script(command, tail)
        except BackendError:
            self.pending_cancel.append(cid)  # a lost reply: what it took waits in our lists
            raise
        if not isinstance(result, list):
            if result in (GetStatus.EMPTY, GetStatus.BUSY, GetStatus.UNDRAINED):
                return cid, replies, []
            self.raise_for(result)
            raise ProtocolError(f"get script returned {result!r}")
        return cid, replies, result

    def batch(self, n: int, keep: bool = False) -> list[T]:
        """Up to ``n`` items (at most 1000) that are queued now, in one round trip, for get_many
        in the default mode (get.lua 'batch'): the items come as they are stored, with one
        header, and no Delivery is made. [] if there are none (or another consumer holds the
        role). Never waits. ``keep``: see ``queued``. What it takes stays in Redis until
        ``drop_received``. Once the last payload received was large, the items move natively
        (get.lua flag 'N')."""
        native = self.large and self.backend.transactions(self.keys.gate)
        cid, _, result = self.queued_after((), "batch", min(n, 1000) if native else n, keep, native=native)
        if not result:
            return []
        if isinstance(result, tuple):  # natively: (header, the payloads)
            header, result = result
            self.native_received[cid] = (header.split(b":", 2)[1].decode(), sum(map(len, result)))
        else:
            header = result.pop()
        if not header.startswith((b"h:", b"n:")):  # an entry delivered earlier, from our inbox
            return [d.item for d in self.deliveries(cid, [*result, header])]
        self.large = self.native and len(result[-1]) >= NATIVE_BYTES
        # received: from now on a cancel leaves the batch alone (our next get drops it)
        self.last_received[cid] = ["h" + header.split(b":", 2)[1].decode()]
        if self.plain:
            return cast("list[T]", result)  # bytes: the stored items are the items
        loads, unwrap = self.serializer.loads, self.unwrap
        try:
            return [loads(unwrap(item)) for item in result]
        except Exception:
            return self.load_each(cid, header, result)

    # -- stopping a wait at its deadline ----------------------------------------------

    def cancel_wait(self, cid: str) -> bytes | Native:
        """The deadline passed while waiting: stop waiting; take an item delivered meanwhile."""
        if self.cancel(cid) == GetStatus.DELIVERED:
            return self.nowait(cid)  # served from our inbox first
        raise Empty(f"queue {self.name!r} is empty")

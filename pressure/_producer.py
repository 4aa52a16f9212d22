"""One handle's producer: put.lua, many items a round trip, waiting for room or for the role.

A put is one put.lua call: the item goes in if there is room (or straight to the waiting
consumer's inbox), else the script answers Full (-1) or Busy (-2, the producer role is
held by another client). A producer waiting for room pops ``:not_full`` as a wake-up and
re-runs put.lua, which decides from the length and the bound read there and then (so a
lost wake-up costs one slice, never the queue); one waiting for the role waits for the
token (``_Roles.wait_for_role``). A producer that has waited for room knows how full the
queue gets: its next put that finds it that full sends the pop (a short one,
``PREDICTED_WAIT``) and put.lua in one round trip, as the protocol's blocking Put does,
rather than a put that answers Full, a pop, and the put again.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import serializers
from ._scripts import PUT, PutStatus
from ._roles import MIN_WAIT, PRODUCER
from .connection import NATIVE_BYTES, SMALLEST_BULK_LIMIT, PackedScript, _NotTransacted, pack_command, pack_moves
from .errors import Full, ProtocolError

if TYPE_CHECKING:
    from .queue import Queue

T = TypeVar("T")

#: The most items put_many sends in one round trip (one script call).
BATCH = 1000

#: How long a put that expects a full queue (``_Producer.wait_first``) waits for room before
#: its script runs: a wrong guess (a queue with room has a permit in :not_full) costs nothing
#: but the BRPOP, a queue still full after it the usual wait.
PREDICTED_WAIT = 0.02


class _Producer(Generic[T]):
    """The producer side of one queue handle."""

    def __init__(self, queue: Queue[T]) -> None:
        # what it borrows from its queue handle
        self.queue = queue  # its client_id is per thread
        self.backend = queue._backend
        self.keys = queue._keys
        self.name = queue._name
        self.serializer = queue._serializer
        self.order_key = queue._order_key
        self.roles = queue._roles
        self.raise_for = queue._raise_for
        self.command = queue._put_command
        self.durability = queue._options.durability
        #: bytes travel untouched
        self.bytes = isinstance(self.serializer, serializers.BytesSerializer)
        #: put.lua with ARGV[9..], packed once per number of extra arguments (``many_call``)
        self._many: dict[int, PackedScript] = {}
        #: (client identifier, ARGV[3], took) -> put.lua's call packed around ARGV[2] (``_around``)
        self._parts: dict[tuple[str, str, str], list[bytes]] = {}
        #: the last wait for room packed: (seconds, ``BRPOP :not_full <seconds>``) (``wait_command``)
        self._wait: tuple[float, bytes] = (0.0, b"")
        #: whether payloads can move natively (FIFO items: the protocol's list)
        self.native = queue._variant == ""
        #: the size of the last batch a native put could not put whole (NOT_ALL: the bound left
        #: room for part of it), until a put sent as arguments takes a whole batch at least as
        #: big (the queue drains); 0: none. Meanwhile puts go as arguments (``send``), or a bounded
        #: queue kept near full, or a put_many above its bound, would pay two round trips a
        #: batch, the native one that fails and the one that puts what fits
        self.short = 0
        #: the length a put found the queue full at, as the put that went in after it told (0:
        #: not met yet), and the length the last put left: a put that finds it that full waits
        #: for room in the same round trip (``send``'s ``wait_first``)
        self.full_at = 0
        self.last_len = -1

    def payload(self, item: T) -> bytes:
        """``item`` serialized (SerializationError if it cannot be; ItemTooLarge if too large)."""
        payload = serializers.dumps(self.serializer, item)
        if len(payload) >= SMALLEST_BULK_LIMIT:
            self.backend.check_sizes([payload])
        return payload

    def args(self, payload: bytes, order: bytes, negative: bool = False,
             took: str = "0", delay_ms: str = "", meta: str = "") -> list[bytes | str]:
        """put.lua's ARGV[1..8] for one item (``delay_ms``, ``meta``: see ``_validate``)."""
        return [self.queue.client_id, payload, "1" if negative else "0", took,
                self.keys.inbox_prefix, order, delay_ms, meta]

    def packed(self, payload: bytes, negative: bool, took: str) -> list[bytes]:
        """put.lua's call of one FIFO item with no delay or state (``args``), for
        ``Backend.packed_script``: all but the payload packed once per client identifier and
        flags (what a thread's puts send every time)."""
        return [self._around(payload, "1" if negative else "0", took)]

    def _around(self, second: bytes, flag: str, took: str) -> bytes:
        """put.lua's call with ARGV[2] ``second`` and ARGV[3] ``flag`` ('0'/'1', or a native
        put's 'm'/'M'), the rest as ``args`` makes them (no order key, delay or state): all but
        ARGV[2] packed once per client identifier and flags."""
        key = (self.queue.client_id, flag, took)
        parts = self._parts.get(key)
        if parts is None:
            if len(self._parts) >= 16:  # the threads and flags met are few: keep the last ones
                self._parts.pop(next(iter(self._parts)))
            tail = self.args(b"", b"", False, took)
            tail[2] = flag
            parts = self._parts[key] = self.command.split(tail, 1)
        return b"%b$%d\r\n%b\r\n%b" % (parts[0], len(second), second, parts[1])

    def call(self, item: T) -> tuple[PackedScript, list[bytes | str]]:
        """A non-blocking put of ``item``, as a call for ``Backend.pipeline`` (its reply is
        put.lua's: the new length, or a negative status to pass to ``put`` itself)."""
        return self.command, self.args(self.payload(item), self.order_key(item))

    def many_call(self, payloads: list[bytes], orders: list[bytes] | None) -> tuple[PackedScript, list[bytes | str]]:
        """A non-blocking put of all of ``payloads`` (serialized, with their order keys
        ``orders``, None where the kind has none), as one call for ``Backend.pipeline``; the
        caller keeps them within what one command takes (``Backend.batch_count``). Its reply
        is put.lua's: for one item as ``call``'s; for more, ``[length, how many went in]``
        (the first ones, in order, as far as the bound leaves room), or a negative status
        (none went in)."""
        order = orders[0] if orders else b""
        args = self.args(payloads[0], order)
        if len(payloads) == 1:
            return self.command, args
        more: list[bytes] = payloads[1:] if orders is None else [
            arg for pair in zip(payloads[1:], orders[1:]) for arg in pair]
        command = self._many.get(len(more))
        if command is None:
            if len(self._many) >= 16:  # the lengths a sender meets are few: keep the last ones
                self._many.pop(next(iter(self._many)))
            command = self._many[len(more)] = PUT.command(self.keys, variant=self.queue._variant, more=len(more))
        return command, [*args, *more]

    def dumps_all(self, items: list[T] | tuple[T, ...]) -> list[bytes]:
        """Every item serialized, in a new list; SerializationError for the first that cannot be."""
        if self.bytes and all(type(item) is bytes for item in items):
            return list(items)  # type: ignore[arg-type]  # bytes travel untouched
        dumps = self.serializer.dumps
        try:
            payloads = [dumps(item) for item in items]
            if all(type(payload) is bytes for payload in payloads):
                return payloads
        except Exception:  # noqa: BLE001 - the slow path below raises it as SerializationError
            pass
        return [serializers.dumps(self.serializer, item) for item in items]

    def send(self, payloads: list[bytes], count: int, orders: list[bytes] | None, negative: bool,
             took: str = "0", delay_ms: str = "", meta: str = "", wait_first: float = 0.0) -> Any:
        """One put.lua call for the first ``count`` of ``payloads`` (``count`` within what one
        command takes: ``Backend.batch_count``), in one round trip; its reply (see
        ``put_pending``). FIFO items with no delay or state, ``NATIVE_BYTES`` or more in all,
        move natively (``Backend.script_moving``, where the server runs transactions and the
        commands that move payloads for this user); where the bound leaves room for only some of
        a batch, they are sent again as arguments, which put as many as fit."""
        ahead = b""
        if wait_first:
            ahead, took = self.wait_command(wait_first), "1"
        result = self._send(payloads, count, orders, negative, took, delay_ms, meta, ahead)
        if isinstance(result, list) or result >= 0:
            self.last_len = result[0] if isinstance(result, list) else result
            if self.last_len > self.full_at:
                self.full_at = 0  # room past it (a bound raised since): learnt again at the next wait
        return result

    def wait_command(self, wait: float) -> bytes:
        """``BRPOP :not_full <wait>`` packed (``send``'s ``wait_first``): the last one kept (the
        waits are PREDICTED_WAIT but for the last of a put's timeout)."""
        if self._wait[0] != wait:
            self._wait = (wait, pack_command("BRPOP", self.keys.not_full, repr(wait)))
        return self._wait[1]

    def _send(self, payloads: list[bytes], count: int, orders: list[bytes] | None, negative: bool,
              took: str, delay_ms: str, meta: str, ahead: bytes = b"") -> Any:
        """``send``'s call, with ``ahead`` (its wait for room, ``took`` '1') sent in front of a
        single item's script in the same write, or posted before any other call."""
        first = payloads[0]
        native = self.native and not self.short and not delay_ms and not meta
        size = sum(map(len, payloads[:count])) if native else 0
        moving = size >= NATIVE_BYTES and self.backend.transactions(self.keys.gate)
        single = count == 1 and orders is None and not delay_ms and not meta and self.durability is None
        if ahead and (moving or not single):  # only a single item's packed call carries it
            if not self.backend.post(ahead):
                took = "0"  # it did not run
            ahead = b""
        if moving:
            moves, commands = pack_moves(self.keys.gate, self.keys.base, payloads[:count])
            call = self._around(b"%d:%d" % (count, size), "M" if negative else "m", took)
            try:
                result = self.backend.script_moving(self.command, (), moves, commands,
                                                    durability=self.durability, packed=call)
            except _NotTransacted:  # the ACL changed since transactions() asked: nothing ran
                result = PutStatus.NOT_ALL
            if result != PutStatus.NOT_ALL:
                return result
            self.short = count  # (see __init__)
        if single:
            result = self.backend.packed_script(self.command.name, self.packed(first, negative, took),
                                                ahead=ahead)
        else:
            args = self.args(first, orders[0] if orders else b"", negative, took, delay_ms, meta)
            # put.lua's ARGV[9..]: a FIFO item is its payload, an ordered one payload and order key
            more = payloads[1:count] if orders is None else [
                arg for pair in zip(payloads[1:count], orders[1:count]) for arg in pair]
            result = self.backend.script(self.command, args, items=more, durability=self.durability)
        if self.short and count >= self.short and (
                result[1] == count if isinstance(result, list) else result >= 0 and count == 1):
            self.short = 0  # a whole batch as big fitted: the next one may move natively again
        return result

    def wait_first(self, block: bool, wait: float | None) -> float:
        """How long a blocking put (``wait``: its timeout, None: none) waits for room in the
        same round trip (``send``'s ``wait_first``): 0 unless the last put left the queue as
        full as a put found it (``full_at``)."""
        if not block or not self.full_at or self.last_len < self.full_at:
            return 0.0
        if wait is None:
            return PREDICTED_WAIT
        return min(PREDICTED_WAIT, wait) if wait > 0 else 0.0

    def put_pending(self, payloads: list[bytes], orders: list[bytes] | None, negative: bool,
                    block: bool, wait: float | None, result: Any, delay_ms: str = "",
                    meta: str = "") -> None:
        """Put ``payloads`` with their order keys ``orders`` (None where the kind has none),
        removing each from the lists as it goes in: up to BATCH per round trip, waiting for
        room or for the producer role as ``block``/``wait`` allow. ``result`` is put.lua's
        answer to a first try, if made; ``delay_ms`` delays every item (put.lua ARGV[7]), and
        ``meta`` gives each its ttl and ttr (ARGV[8])."""
        backend = self.backend
        took = "0"
        deadline = busy_deadline = math.inf
        now = time.monotonic()
        if not block:
            deadline = now
        elif wait is not None:
            deadline = now + max(wait, 0.0)
        # a role held by another client is waited for like a mutex, even by put_nowait
        busy_deadline = max(deadline, now + backend.slice)
        waited = False
        while True:
            if result is None:
                result = self.send(payloads, backend.batch_count(payloads, BATCH), orders, negative, took,
                                   delay_ms, meta)
            if isinstance(result, list):
                result, went = result
            else:
                went = 1 if result >= 0 else 0
            del payloads[:went]
            if orders is not None:
                del orders[:went]
            if went and waited:  # the length it found full at, as far as this put knows
                self.full_at, waited = self.last_len, False
            if not payloads:
                return
            if went:
                result, took = None, "0"
                continue
            self.raise_for(result)
            now = time.monotonic()
            if result == PutStatus.FULL:
                if now >= deadline:
                    raise Full(f"queue {self.name!r} is full")
                waited = True
                took = "1" if backend.pop_wait(self.keys.not_full, max(min(backend.slice, deadline - now),
                                                                       MIN_WAIT)) else "0"
            elif result == PutStatus.BUSY:
                if now >= busy_deadline:
                    holder = self.roles.read(self.keys.producer)
                    raise Full(f"queue {self.name!r}: the producer role is held by {holder}")
                self.roles.wait_for_role(PRODUCER, busy_deadline - now)
                took = "0"
            else:
                raise ProtocolError(f"put script returned {result!r}")
            result = None

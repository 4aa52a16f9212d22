"""Reliable mode: a ``Delivery`` stays in its consumer's in-flight list until acknowledged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from .connection import PackedScript

if TYPE_CHECKING:
    from .queue import Queue

__all__ = ["Delivery"]

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

    def ack(self) -> bool:
        """Acknowledge: the item leaves Redis. False if it was already acknowledged or requeued."""
        return self._queue._ack(self, task_done=False)

    def release(self) -> bool:
        """Give the item back: it returns to the head of the queue (or, past max_deliveries,
        to the dead-letter list). False if it was already acknowledged or requeued."""
        return self._queue._release(self)

    def _ack_call(self) -> tuple[PackedScript, list[bytes | str]]:
        """This acknowledgement, as a call for ``Backend.pipeline``."""
        q = self._queue
        q._forget(self)
        return q._ack_command, [q._keys.inflight(self.consumer), self.id, "0"]

    def touch(self) -> bool:
        """Restart this delivery's visibility timeout (reliable mode): call it while
        processing takes longer than the timeout, so the item is not redelivered
        meanwhile. False if it was already acknowledged or requeued."""
        return bool(self._queue._run("touch", (self._queue._keys.inflight(self.consumer),), (self.id,)))


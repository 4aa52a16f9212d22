"""``durability=``: a put or an acknowledgement returns only once replicas have it.

Redis replicates asynchronously: a master that dies (or is demoted by a failover) may take
its last writes with it, though their callers were told they succeeded. With
``durability=Durability(replicas=1, timeout=1.0)`` a queue handle sends ``WAIT 1 1000`` in
the same round trip as each put and acknowledgement script (one packet, no extra round trip
of the client's: the cost is the replica's confirmation) and raises ``NotReplicated`` when
fewer replicas than asked confirmed the write within ``timeout``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Durability"]


@dataclass(frozen=True)
class Durability:
    """How many replicas must confirm a write (``replicas``, at least 1) and how long to wait
    for them (``timeout`` seconds, more than 0: Redis's ``WAIT ... 0`` would wait forever)."""

    replicas: int = 1
    timeout: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int) or self.replicas < 1:
            raise ValueError(f"Durability.replicas must be a positive integer, not {self.replicas!r}")
        if (isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float))
                or not math.isfinite(self.timeout) or self.timeout <= 0):
            raise ValueError(f"Durability.timeout must be a positive number of seconds, not {self.timeout!r}")

    @property
    def timeout_ms(self) -> int:
        """WAIT's timeout: whole milliseconds, at least 1."""
        return max(1, math.ceil(self.timeout * 1000))

"""A deliberately literal pressure-protocol client, written from the spec's pseudocode.

It exists to test ``pressure`` against an independent reading of the spec, not
to be used: every operation is the command sequence of the "reference
implementation" at the end of spec v0.15 (seed 001; v0.1 is seed 000), one
Redis command per round trip, no Lua, no MULTI, no pipelines. It does exactly
what an honest third-party client written from that text would do, including
the races the spec has (F2, F4, F5: see the errata list in compat/README.md).

Only the pseudocode defects that make a literal client unusable are fixed, each
marked with a comment naming the erratum:

* E7 - the closed check runs after the producer token is taken (pseudocode order),
  so a Close cannot slip in between the check and the push.
* P1 - every token taken is returned in a ``finally``; otherwise the first error
  deadlocks the queue for good.
* P3 - v0.15 Get re-arms ``:not_full`` only below the bound, as the prose says.
* P4 - the counters are the ``:stats:*`` keys of the key list, which Delete removes.
* P5 - only valid commands: BRPOP always has a timeout, RPOP takes one key and no
  count, LPUSH always has a value.
* P6 - a non-blocking Get on an empty open queue raises ``QueueEmpty``, not nil.
* P7 - a ``:bound`` missing when Put re-reads it means "deleted meanwhile".
* F8 - blocking pops use finite timeouts in a loop (never ``BRPOP ... 0``), so a
  socket timeout can never drop a popped token. ``timeout=`` on put/get is the
  prose's "return an error after some fixed timeout" (QueueInUse while waiting
  for the role, QueueFull / QueueEmpty after).

``version="0.1"`` reproduces spec 0.1: ``LTRIM :not_full 0 1`` (P2, kept: it is the
point of the v0.1 tests), an unconditional re-arm in Get, and no Exists, Length,
Closed or non-blocking operations (they came in 0.13).

Give it a redis-py client that returns bytes (the default, ``decode_responses=False``).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis

__all__ = ["QueueAlreadyExists", "QueueClosed", "QueueDoesNotExist", "QueueEmpty", "QueueFull",
           "QueueInUse", "SpecClient", "SpecError"]

#: The longest single server-side wait (F8): blocking calls loop over waits this long.
SLICE = 0.25
_VERSIONS = ("0.1", "0.15")


class SpecError(Exception):
    """Base class of the spec client's errors."""


class QueueDoesNotExist(SpecError):
    """``:bound`` is missing."""


class QueueAlreadyExists(SpecError):
    """Create found ``:bound`` already set."""


class QueueClosed(SpecError):
    """Put or Close on a closed queue, or Get on a closed, empty one."""


class QueueFull(SpecError):
    """No ``:not_full`` permit (at once, or within the timeout)."""


class QueueEmpty(SpecError):
    """No item (at once, or within the timeout)."""


class QueueInUse(SpecError):
    """The role token is held by another client (at once, or within the timeout)."""


class SpecClient:
    """One queue, seen through the literal spec command sequences."""

    def __init__(self, redis_client: redis.Redis, name: str, prefix: str = "__pressure__",
                 version: str = "0.15") -> None:
        if version not in _VERSIONS:
            raise ValueError(f"version must be one of {_VERSIONS}, not {version!r}")
        self.r, self.name, self.version = redis_client, name, version
        self.k = f"{prefix}:{name}"
        # v0.1's LTRIM keeps two elements (P2); v0.15 keeps one
        self._trim_end = 1 if version == "0.1" else 0

    @property
    def client_id(self) -> str:
        return f"spec:{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()}"

    def _since(self, feature: str) -> None:
        if self.version == "0.1":
            raise NotImplementedError(f"{feature} does not exist in pressure protocol v0.1")

    def _check_bound(self) -> None:
        if not self.r.exists(f"{self.k}:bound"):
            raise QueueDoesNotExist(self.name)

    def _pop(self, keys: list[str], block: bool, deadline: float | None) -> tuple[bytes, bytes] | None:
        """(key, element) popped from the right, or None. Blocking: BRPOP in finite slices
        (P5, F8) until the deadline (None: forever). Non-blocking: RPOP of the first key
        only (P5: RPOP takes one key and no count; the pseudocode's trailing 0 is a count)."""
        if not block:
            value = self.r.rpop(keys[0])
            return None if value is None else (keys[0].encode(), value)  # type: ignore[return-value]
        while True:
            wait = SLICE if deadline is None else min(SLICE, deadline - time.monotonic())
            if wait <= 0:
                return None
            reply = self.r.brpop(keys, timeout=max(wait, 0.01))
            if reply is not None:
                return reply  # type: ignore[return-value]

    @contextmanager
    def _role(self, role: str, block: bool, deadline: float | None) -> Iterator[None]:
        """Take the role token, write our id, and give the token back however we leave (P1)."""
        free = f"{self.k}:{role}_free"
        if self._pop([free], block, deadline) is None:
            raise QueueInUse(f"{self.name}: the {role} role is taken")
        try:
            self.r.set(f"{self.k}:{role}", self.client_id)
            yield
        finally:
            self.r.lpush(free, 0)  # P1: the pseudocode skips this on every raise

    def _rearm(self) -> None:
        """LPUSH :not_full, then trim to 0 0 (v0.15) or 0 1 (v0.1, P2)."""
        self.r.lpush(f"{self.k}:not_full", 0)  # P5: LPUSH needs a value
        self.r.ltrim(f"{self.k}:not_full", 0, self._trim_end)

    # -- operations ---------------------------------------------------------------

    def create(self, bound: int) -> None:
        if not self.r.setnx(f"{self.k}:bound", bound):
            raise QueueAlreadyExists(self.name)
        for key in ("producer_free", "consumer_free", "not_full"):
            self.r.lpush(f"{self.k}:{key}", 1)

    def exists(self) -> bool:
        self._since("Exists")
        return bool(self.r.exists(f"{self.k}:bound"))

    def length(self) -> int:
        self._since("Length")
        self._check_bound()
        return int(self.r.llen(self.k))

    def closed(self) -> bool:
        self._since("Closed")
        self._check_bound()
        return bool(self.r.exists(f"{self.k}:closed"))

    def put(self, data: bytes, block: bool = True, timeout: float | None = None) -> None:
        if not block:
            self._since("Put (Non-Blocking)")
        deadline = None if timeout is None else time.monotonic() + timeout
        self._check_bound()
        with self._role("producer", block, deadline):
            if self.r.exists(f"{self.k}:closed"):  # E7: after taking the token
                raise QueueClosed(self.name)
            if self._pop([f"{self.k}:not_full"], block, deadline) is None:
                raise QueueFull(self.name)
            length = self.r.lpush(self.k, data)
            bound = self.r.get(f"{self.k}:bound")
            if bound is None:  # P7: deleted while we waited; Delete will discard the item
                raise QueueDoesNotExist(self.name)
            if int(bound) == 0 or length < int(bound):
                self._rearm()
            self.r.incr(f"{self.k}:stats:produced_messages")  # P4: :stats:*
            self.r.incrby(f"{self.k}:stats:produced_bytes", len(data))

    def put_nowait(self, data: bytes) -> None:
        self.put(data, block=False)

    def get(self, block: bool = True, timeout: float | None = None) -> bytes:
        if not block:
            self._since("Get (Non-Blocking)")
        deadline = None if timeout is None else time.monotonic() + timeout
        closed_key = f"{self.k}:closed"
        self._check_bound()
        with self._role("consumer", block, deadline):
            if self.r.exists(closed_key):
                if self.r.llen(self.k) == 0:
                    raise QueueClosed(self.name)
                reply = self._pop([self.k], block, deadline)
            else:
                reply = self._pop([self.k, closed_key], block, deadline)
            if reply is None:
                raise QueueEmpty(self.name)  # P6 (non-blocking), or the timeout passed
            if reply[0] == closed_key.encode():
                raise QueueClosed(self.name)
            data = reply[1]
            if self.version == "0.1":
                self._rearm()  # v0.1: unconditionally
            else:
                bound = self.r.get(f"{self.k}:bound")
                # P3: only below the bound (prose); a missing bound (deleted meanwhile) re-arms nothing
                if bound is not None and (int(bound) == 0 or self.r.llen(self.k) < int(bound)):
                    self._rearm()
            self.r.incr(f"{self.k}:stats:consumed_messages")  # P4: :stats:*
            self.r.incrby(f"{self.k}:stats:consumed_bytes", len(data))
            return data

    def get_nowait(self) -> bytes:
        return self.get(block=False)

    def close(self) -> None:
        self._check_bound()
        with self._role("producer", True, None):
            if self.r.exists(f"{self.k}:closed"):
                raise QueueClosed(self.name)
            self.r.lpush(f"{self.k}:closed", 0, 0)

    def delete(self) -> None:
        self._check_bound()
        k = self.k
        self.r.delete(f"{k}:bound")
        self.r.lpush(f"{k}:not_full", 0)
        self.r.lpush(f"{k}:closed", 0, 0)
        for role in ("producer", "consumer"):
            self._pop([f"{k}:{role}_free"], True, None)  # F8: finite waits, forever
            self.r.delete(f"{k}:{role}")
            self.r.delete(f"{k}:{role}_free")
        for key in ("not_full", "closed", "stats:produced_messages", "stats:produced_bytes",
                    "stats:consumed_messages", "stats:consumed_bytes"):
            self.r.delete(f"{k}:{key}")
        self.r.delete(k)

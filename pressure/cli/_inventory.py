"""What the command line reads from Redis: the queues and executors under a prefix, and
snapshots of their figures, each in a few pipelined round trips whatever their number.

Queues are found by their ``:bound`` keys (SCAN, never KEYS); a LIFO or priority queue
is told from a FIFO one by its ``:pressure:kind`` key (pressure/keys.py). Executors are
found by their own keys (``<prefix>:<name>:executor:*``) or by a task queue
``<name>:tasks`` that has result queues ``<name>:results:*`` beside it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..connection import Backend
from ..executor.admin import _glob_escape
from ..executor.worker import ALIVE_FOR
from ..keys import KINDS, ExecutorKeys, QueueKeys

__all__ = ["QueueRef", "QueueRow", "ExecutorRow", "find_queues", "find_queue", "queue_rows",
           "find_executors", "executor_rows"]


@dataclass(frozen=True, slots=True)
class QueueRef:
    """A queue found under a prefix: its name and kind, as ``Queue``/``LifoQueue``/... name it."""

    name: str
    kind: str

    def keys(self, prefix: str) -> QueueKeys:
        return QueueKeys.build(prefix, self.name, self.kind)


@dataclass(frozen=True, slots=True)
class QueueRow:
    """A queue's figures at one moment (one MULTI: consistent with each other)."""

    name: str
    kind: str
    size: int
    bound: int
    closed: bool
    consumers: int
    in_flight: int
    dead_letters: int
    #: items given back after a delivery, waiting to be delivered again (:pressure:redeliveries)
    redelivered: int
    produced: int
    consumed: int
    #: when it was read (time.monotonic(), for rates)
    at: float


@dataclass(frozen=True, slots=True)
class ExecutorRow:
    """An executor's figures at one moment."""

    name: str
    workers: tuple[str, ...]
    queued: int
    running: int
    done: int
    failed: int
    retried: int
    lost: int


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _int(value: bytes | str | None) -> int:
    text = _text(value) if value is not None else "0"
    return int(text) if text.lstrip("-").isdigit() else 0


def _scan(backend: Backend, pattern: str) -> list[str]:
    client = backend.client()
    keys = backend.call("SCAN", lambda: list(client.scan_iter(match=pattern, count=1000)))
    return sorted({_text(k) for k in keys})


def _is_queue_name(name: str) -> bool:
    try:
        QueueKeys.build("p", name)
    except ValueError:
        return False
    return bool(name)


def find_queues(backend: Backend, prefix: str, names: Iterable[str] | None = None) -> list[QueueRef]:
    """The queues under ``prefix`` (only those named in ``names`` if given), by kind and name."""
    bases = [key[:-len(":bound")] for key in _scan(backend, f"{_glob_escape(prefix)}:*:bound")]
    pipe = backend.client().pipeline(transaction=False)
    for base in bases:
        pipe.get(f"{base}:pressure:kind")
    kinds = backend.call("queue kinds", pipe.execute) if bases else []
    found = []
    for base, stored in zip(bases, kinds):
        rest = base[len(prefix) + 1:]
        kind = "fifo"
        stored_kind = _text(stored) if stored is not None else "fifo"
        if stored_kind in KINDS and stored_kind != "fifo" and rest.startswith(stored_kind + ":"):
            kind, rest = stored_kind, rest[len(stored_kind) + 1:]
        if _is_queue_name(rest):
            found.append(QueueRef(rest, kind))
    if names is not None:
        wanted = set(names)
        found = [q for q in found if q.name in wanted]
    return sorted(found, key=lambda q: (q.name, KINDS.index(q.kind)))


def find_queue(backend: Backend, prefix: str, name: str, kind: str | None = None) -> QueueRef | None:
    """The queue ``name`` under ``prefix`` (of ``kind`` if given), in one round trip; None if
    there is none. LookupError if several kinds of queue have that name and no kind is given."""
    QueueKeys.build(prefix, name)  # ValueError for a name no queue can have
    candidates = [kind] if kind is not None else list(KINDS)
    pipe = backend.client().pipeline(transaction=False)
    for k in candidates:
        keys = QueueKeys.build(prefix, name, k)
        pipe.exists(keys.bound)
        pipe.get(keys.kind)
    replies = backend.call("find the queue", pipe.execute)
    found = []
    for i, k in enumerate(candidates):
        exists, stored = replies[2 * i], replies[2 * i + 1]
        if exists and (_text(stored) if stored is not None else "fifo") == k:
            found.append(k)
    if len(found) > 1:
        raise LookupError(f"there are queues named {name!r} of kinds {', '.join(found)}: "
                          f"choose one with --kind")
    return QueueRef(name, found[0]) if found else None


def queue_rows(backend: Backend, prefix: str, refs: list[QueueRef]) -> list[QueueRow]:
    """The figures of the queues ``refs`` (those deleted meanwhile left out): two round trips."""
    if not refs:
        return []
    client = backend.client()
    all_keys = [ref.keys(prefix) for ref in refs]
    pipe = client.pipeline(transaction=False)
    for k in all_keys:
        pipe.hkeys(k.consumers)
    consumers = backend.call("queue consumers", pipe.execute)
    pipe = client.pipeline(transaction=True)
    for ref, k, cids in zip(refs, all_keys, consumers):
        pipe.mget(k.bound, k.produced_messages, k.consumed_messages)
        if ref.kind == "fifo":
            pipe.llen(k.base)
        else:
            pipe.zcard(k.base)
        pipe.exists(k.closed)
        pipe.llen(k.dead)
        pipe.hlen(k.redeliveries)
        for cid in cids:
            pipe.llen(k.inflight(_text(cid)))
            pipe.lrange(k.inbox(_text(cid)), 0, -1)
            pipe.llen(k.held(_text(cid)))
    replies = iter(backend.call("queue figures", pipe.execute))
    now = time.monotonic()
    rows = []
    for ref, cids in zip(refs, consumers):
        (bound, produced, consumed), size, closed, dead, redelivered = (next(replies) for _ in range(5))
        in_flight = 0
        for _ in cids:
            inflight, inbox, held = next(replies), next(replies), next(replies)
            in_flight += inflight + sum(1 for e in inbox if not e.startswith(b"s:")) + max(held - 1, 0)
        if bound is None:
            continue  # deleted since it was found
        rows.append(QueueRow(ref.name, ref.kind, size, _int(bound), bool(closed), len(cids), in_flight,
                             dead, redelivered, _int(produced), _int(consumed), now))
    return rows


def find_executors(backend: Backend, prefix: str) -> list[str]:
    """The names of the executors under ``prefix``: with keys of their own, or a task queue
    with result queues beside it."""
    start = len(prefix) + 1
    names = set()
    for key in _scan(backend, f"{_glob_escape(prefix)}:*:executor:*"):
        end = key.find(":executor:", start)
        if end > start:
            names.add(key[start:end])
    queues = {ref.name for ref in find_queues(backend, prefix) if ref.kind == "fifo"}
    for queue in queues:
        if queue.endswith(":tasks"):
            name = queue[:-len(":tasks")]
            if any(q.startswith(f"{name}:results:") for q in queues):
                names.add(name)
    return sorted(n for n in names if _executor_name(n))


def _executor_name(name: str) -> bool:
    try:
        ExecutorKeys.build("p", name)
    except ValueError:
        return False
    return bool(name)


def executor_rows(backend: Backend, prefix: str, names: list[str]) -> list[ExecutorRow]:
    """The figures of the executors ``names``: three round trips in all."""
    if not names:
        return []
    all_keys = [ExecutorKeys.build(prefix, name) for name in names]
    tasks = {row.name: row for row in queue_rows(backend, prefix, [QueueRef(k.tasks, "fifo")
                                                                    for k in all_keys])}
    pipe = backend.client().pipeline(transaction=False)
    pipe.time()
    for k in all_keys:
        pipe.hgetall(k.workers)
        pipe.mget(k.done, k.failed, k.retried, k.lost)
    (seconds, micros), *replies = backend.call("executor figures", pipe.execute)
    now = seconds * 1000 + micros // 1000
    rows = []
    for i, (name, k) in enumerate(zip(names, all_keys)):
        workers: dict[Any, Any] = replies[2 * i]
        done, failed, retried, lost = (_int(v) for v in replies[2 * i + 1])
        alive = tuple(sorted(_text(w) for w, ms in workers.items() if now - _int(ms) < ALIVE_FOR * 1000))
        queue = tasks.get(k.tasks)
        rows.append(ExecutorRow(name, alive, queue.size if queue else 0, queue.in_flight if queue else 0,
                                done, failed, retried, lost))
    return rows

"""What the command line reads from Redis: the queues and executors under a prefix, and
snapshots of their figures, each in a few pipelined round trips whatever their number.

On a Redis Cluster every master is scanned, and each queue's keys are read from the master
of their slot (one pipeline per slot: ``_pipelined``).

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

import redis

from .._packing import _script_sha, _script_source
from .._scripts import STATS, QueueScript
from ..cluster import key_slot
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
    #: the items a get would find now, and the delayed ones not yet due (stats.lua: ready and
    #: delayed, as ``Queue.statistics()`` has them in ``size`` and ``delayed``)
    size: int
    delayed: int
    bound: int
    closed: bool
    #: these four as ``Queue.statistics()`` counts them (lua/stats.lua): registered consumers,
    #: items they hold (delivered, not settled), dead letters, and unfinished tasks
    consumers: int
    in_flight: int
    dead_letters: int
    #: items waiting in the queue with a state of their own: given back after a delivery, kicked, or
    #: put with a ttl, ttr or key (stats.lua: each of identical copies counts)
    redelivered: int
    produced: int
    consumed: int
    unfinished: int
    #: the name of the serializer the queue was created with (``<base>:pressure:serializer``), None
    #: if not recorded (a spec client's queue, or one created before the record existed)
    serializer: str | None
    #: why the queue's figures could not be read (a key of the wrong type...): its figures are
    #: then 0 and mean nothing; None for a queue read as it should be
    error: str | None
    #: when it was read (time.monotonic(), for rates)
    at: float

    #: the figures (not the name, kind, error and time) ``error`` leaves unknown
    FIGURES = ("size", "delayed", "bound", "closed", "consumers", "in_flight", "dead_letters", "redelivered",
               "produced", "consumed", "unfinished", "serializer")


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
    #: why its figures (or those of its task queue) could not be read; None if they were
    error: str | None = None


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _int(value: bytes | str | None) -> int:
    text = _text(value) if value is not None else "0"
    return int(text) if text.lstrip("-").isdigit() else 0


def _scan(backend: Backend, pattern: str) -> list[str]:
    """The keys matching ``pattern``: on a Redis Cluster, on every master."""
    keys: set[str] = set()
    for wire in [backend.for_slot(slot) for slot in backend.master_slots()] or [backend]:
        client = wire.client()
        keys.update(_text(k) for k in wire.call("SCAN", lambda: list(client.scan_iter(match=pattern, count=1000))))
    return sorted(keys)


#: a command for ``_pipelined``: the key that places it, the redis-py method (or "script": see
#: ``_script_call``), its arguments
_Call = tuple[str, str, tuple[Any, ...]]


def _script_call(script: QueueScript, ref: QueueRef, keys: QueueKeys, *args: Any) -> _Call:
    """A call of one of a queue's scripts (``_pipelined`` sends it as an EVALSHA, the script
    loaded in front)."""
    fixed = script.keys(keys)
    return keys.base, "script", (script.name + ("" if ref.kind == "fifo" else "@" + ref.kind), len(fixed),
                                 *fixed, *script.check(args))


def _pipelined(backend: Backend, calls: list[_Call], what: str, transaction: bool = False,
               errors: bool = False) -> list[Any]:
    """The replies of ``calls``, in their order, sent in one pipeline (a MULTI if
    ``transaction``); on a Redis Cluster, one per hash slot, to its master. The scripts that
    calls made by ``_script_call`` run are loaded at the head of the pipeline (a SCRIPT LOAD of a
    script the server has already costs it a hash of the text), so none is ever missing.
    ``errors``: a command the server answers with an error (WRONGTYPE: a key of the wrong type)
    has that error (a ``redis.ResponseError``) as its reply, and the others their own; else the
    first such error raises."""
    groups: dict[int, list[int]] = {}
    for i, (key, _, _) in enumerate(calls):
        groups.setdefault(key_slot(key) if backend.config.cluster is not None else 0, []).append(i)
    replies: list[Any] = [None] * len(calls)
    for slot, indexes in groups.items():
        wire = backend.for_slot(slot)
        pipe = wire.client().pipeline(transaction=transaction)
        scripts = list(dict.fromkeys(calls[i][2][0] for i in indexes if calls[i][1] == "script"))
        for name in scripts:
            pipe.script_load(_script_source(name))
        for i in indexes:
            _, method, args = calls[i]
            if method == "script":
                pipe.evalsha(_script_sha(args[0]), *args[1:])
            else:
                getattr(pipe, method)(*args)
        answered = wire.call(what, pipe.execute, raise_on_error=not errors)
        for reply in answered[:len(scripts)]:
            if isinstance(reply, redis.RedisError):  # not about one queue: the whole step failed
                wire.raise_error(reply, what, False)
        for i, reply in zip(indexes, answered[len(scripts):]):
            replies[i] = reply
    return replies


def error_line(exc: Exception) -> str:
    """A server's error reply as one line, without redis-py's note of where in a script it was
    raised (``script: <sha>, on @user_script:12.``)."""
    text = " ".join(str(exc).split())
    return text.split(" script: ")[0].rstrip(".") or type(exc).__name__


def _is_queue_name(name: str) -> bool:
    try:
        QueueKeys.build("p", name)
    except ValueError:
        return False
    return bool(name)


def find_queues(backend: Backend, prefix: str, names: Iterable[str] | None = None) -> list[QueueRef]:
    """The queues under ``prefix`` (only those named in ``names`` if given), by kind and name."""
    bases = [key[:-len(":bound")] for key in _scan(backend, f"{_glob_escape(prefix)}:*:bound")]
    # (a kind key of the wrong type reads as none: queue_rows then says what is wrong)
    kinds = _pipelined(backend, [(f"{b}:pressure:kind", "get", (f"{b}:pressure:kind",)) for b in bases],
                       "queue kinds", errors=True)
    found = []
    for base, stored in zip(bases, kinds):
        rest = base[len(prefix) + 1:]
        kind = "fifo"
        stored_kind = _text(stored) if isinstance(stored, (bytes, str)) else "fifo"
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
    calls: list[_Call] = []
    for k in candidates:
        keys = QueueKeys.build(prefix, name, k)
        calls += [(keys.bound, "exists", (keys.bound,)), (keys.kind, "get", (keys.kind,))]
    replies = _pipelined(backend, calls, "find the queue")
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
    """The figures of the queues ``refs`` (those deleted meanwhile left out): one round trip
    (one per hash slot on a cluster). The consumers, the items they hold, the dead letters and
    the unfinished tasks are stats.lua's, as ``Queue.statistics()`` reads them."""
    if not refs:
        return []
    calls: list[_Call] = []
    for ref in refs:
        k = ref.keys(prefix)
        b = k.base  # every key of a queue is in its base's slot
        calls += [(b, "mget", (k.bound, k.produced_messages, k.consumed_messages, k.serializer)),
                  (b, "exists", (k.closed,)),
                  # the size as qsize() counts it, and what every view counts as statistics() does
                  _script_call(STATS, ref, k, k.inbox_prefix, k.inflight_prefix, k.held_prefix)]
    # a queue with a key of the wrong type has its error, the others their figures
    replies = iter(_pipelined(backend, calls, "queue figures", transaction=True, errors=True))
    now = time.monotonic()
    rows = []
    for ref in refs:
        figures, closed, stats = next(replies), next(replies), next(replies)
        failed = [reply for reply in (figures, closed, stats) if isinstance(reply, Exception)]
        if failed:
            rows.append(QueueRow(ref.name, ref.kind, 0, 0, 0, False, 0, 0, 0, 0, 0, 0, 0, None,
                                 error_line(failed[0]), now))
            continue
        bound, produced, consumed, serializer = figures
        size, delayed, in_flight, dead, consumers, unfinished, redelivered, *_ = stats
        if bound is None:
            continue  # deleted since it was found
        rows.append(QueueRow(ref.name, ref.kind, size, delayed, _int(bound), bool(closed), consumers,
                             in_flight, dead, redelivered, _int(produced), _int(consumed), unfinished,
                             None if serializer is None else _text(serializer), None, now))
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
    calls: list[_Call] = [(all_keys[0].workers, "time", ())]
    for k in all_keys:
        calls += [(k.workers, "hgetall", (k.workers,)), (k.workers, "mget", (k.done, k.failed, k.retried, k.lost))]
    (seconds, micros), *replies = _pipelined(backend, calls, "executor figures", errors=True)
    now = seconds * 1000 + micros // 1000
    rows = []
    for i, (name, k) in enumerate(zip(names, all_keys)):
        workers, counters = replies[2 * i], replies[2 * i + 1]
        queue = tasks.get(k.tasks)
        failed = [error_line(r) for r in (workers, counters) if isinstance(r, Exception)]
        if queue is not None and queue.error is not None:
            failed.append(f"its task queue {k.tasks!r}: {queue.error}")
        if failed:
            rows.append(ExecutorRow(name, (), 0, 0, 0, 0, 0, 0, failed[0]))
            continue
        done, failed_count, retried, lost = (_int(v) for v in counters)
        alive = tuple(sorted(_text(w) for w, ms in workers.items() if now - _int(ms) < ALIVE_FOR * 1000))
        rows.append(ExecutorRow(name, alive, queue.size if queue else 0, queue.in_flight if queue else 0,
                                done, failed_count, retried, lost))
    return rows

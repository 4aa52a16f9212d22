"""What inspection reads, and how its replies are parsed: the commands and parsers that the
sync handles (pressure/_inspect.py, pressure/reliable.py) and the asyncio ones
(pressure/aio/_inspect.py) share, so that each rule is written once. Each function here takes
replies as the server sends them (a TIME reply as two numbers, bytes or int; an HGETALL as
the names of its fields) and does no I/O."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from . import _log, serializers
from ._records import DeadLetter, InFlight, QueueStatistics, TaskInfo, _held_entries, _parse_entry
from .errors import ProtocolError
from .keys import QueueKeys

__all__ = ["statistics_reads", "statistics_of", "peek_read", "peek_items", "in_flight_reads", "in_flight_of",
           "dead_letters_of", "check_task_id", "task_info_of", "repair_reset", "log_repaired", "log_kick",
           "log_purge"]


def _now(reply: Sequence[Any]) -> float:
    """A TIME reply as Unix time."""
    seconds, micros = reply
    return int(seconds) + int(micros) / 1e6


def statistics_reads(k: QueueKeys) -> list[tuple[str, ...]]:
    """statistics()'s first atomic step (MULTI ... EXEC): the bound and counters, whether the
    queue is closed, how many dead letters."""
    return [("MGET", k.bound, k.produced_messages, k.produced_bytes, k.consumed_messages, k.consumed_bytes,
             k.tasks_done, k.discarded, k.producer, k.consumer),
            ("EXISTS", k.closed), ("LLEN", k.dead)]


def statistics_of(name: str, k: QueueKeys, values: Sequence[bytes | None], closed: int, dead: int,
                  stats: Sequence[Any], parse_bound: Callable[[bytes | str], int]) -> QueueStatistics:
    """The statistics from the replies of ``statistics_reads`` and of stats.lua (the second,
    atomic step: the items by state and the lifecycle's figures). The caller has checked that
    the bound is there (else the queue does not exist)."""
    bound_raw, *counters, producer, consumer = values
    assert bound_raw is not None
    names = (k.produced_messages, k.produced_bytes, k.consumed_messages, k.consumed_bytes, k.tasks_done,
             k.discarded)
    for key, value in zip(names, counters):
        if value is not None and not value.lstrip(b"-").isdigit():
            raise ProtocolError(f"{key} holds {value!r}, not an integer")
    pm, pb, cm, cb, done, discarded = (int(v or 0) for v in counters)
    ready, delayed, taken, _, consumers, unfinished, _, *flat = stats
    counts = {(flat[i].decode() if isinstance(flat[i], bytes) else str(flat[i])): int(flat[i + 1])
              for i in range(0, len(flat), 2)}
    # every take ends given back (returned), dead-lettered, deleted, still taken, or settled:
    # acknowledged (in the default mode and by a spec client, as the get returned it); a
    # kick takes its dead letters back out of cm, but for those that expired, never taken
    take = cm + counts.get("returned", 0) + counts.get("kick", 0) - counts.get("kick_expired", 0)
    ack = take - counts.get("returned", 0) - counts.get("dead", 0) - counts.get("delete_taken", 0) - taken
    calls = {"put": pm, "take": take, "ack": max(ack, 0),
             **{call: counts.get(call, 0) for call in ("release", "bury", "kick", "delete")}}
    return QueueStatistics(
        name=name, size=ready, maxsize=parse_bound(bound_raw), closed=bool(closed),
        produced_messages=pm, produced_bytes=pb, consumed_messages=cm, consumed_bytes=cb,
        discarded_messages=discarded, unfinished_tasks=unfinished, dead_letters=dead,
        producer=None if producer is None else producer.decode(errors="replace"),
        consumer=None if consumer is None else consumer.decode(errors="replace"),
        delayed=delayed, taken=taken, done=done, expired=counts.get("expired", 0), calls=calls,
        consumers=consumers,
    )


def in_flight_reads(k: QueueKeys, consumers: Sequence[bytes]) -> list[tuple[str, ...]]:
    """in_flight()'s atomic step, for the registered ``consumers``: the server's time, then
    each one's in-flight list, inbox and held batch."""
    reads: list[tuple[str, ...]] = [("TIME",)]
    for consumer in consumers:
        name = consumer.decode(errors="replace")
        reads += [("LRANGE", k.inflight(name), "0", "-1"), ("LRANGE", k.inbox(name), "0", "-1"),
                  ("LRANGE", k.held(name), "0", "-1")]
    return reads


def in_flight_of(consumers: Sequence[bytes], replies: Sequence[Any], unwrap: Callable[[bytes], bytes],
                 loads: Callable[[bytes], Any]) -> list[InFlight]:
    """The records of what ``consumers`` hold, from the replies of ``in_flight_reads``."""
    now = _now(replies[0])
    out: list[InFlight] = []
    for i, consumer in enumerate(consumers):
        inflight, inbox, held = replies[1 + 3 * i:4 + 3 * i]
        entries = [_parse_entry(e) for e in inflight + inbox if not e.startswith(b"s:")]
        if held:  # a get_many's batch holds its items newest first, a native get's oldest first
            entries += _held_entries(held[0], held[1:] if held[0].startswith(b"n:") else held[:0:-1])
        for seq, deliveries, ms, payload in entries:
            out.append(InFlight(consumer.decode(errors="replace"), seq, deliveries,
                                max(now - ms / 1000, 0.0), unwrap(payload), loads))
    return out


def dead_letters_of(time: Sequence[Any], entries: Sequence[bytes], unwrap: Callable[[bytes], bytes],
                    loads: Callable[[bytes], Any]) -> list[DeadLetter]:
    """The dead letters, oldest first, from a TIME reply and the dead-letter list's LRANGE."""
    now = _now(time)
    out = []
    for entry in reversed(entries):
        seq, deliveries, ms, payload = _parse_entry(entry)
        out.append(DeadLetter(seq, deliveries, max(now - ms / 1000, 0.0), unwrap(payload), loads))
    return out


def peek_read(fifo: bool, base: str, n: int) -> tuple[str, ...]:
    """The read of a queue's next ``n`` stored items: a FIFO list's tail, an ordered queue's
    sorted set's head (``peek_items`` orders them next-out first)."""
    return ("LRANGE", base, str(-n), "-1") if fifo else ("ZRANGE", base, "0", str(n - 1))


def peek_items(fifo: bool, raw: Sequence[bytes]) -> list[bytes]:
    """The reply of ``peek_read``, next-out first."""
    return list(reversed(raw)) if fifo else list(raw)


def check_task_id(task_id: Any) -> str:
    """A task id as peek_item and delete_item take it: TypeError/ValueError before any round trip."""
    if not isinstance(task_id, str):
        raise TypeError(f"task_id must be a str, not {type(task_id).__name__}")
    if len(task_id) != 40 or any(c not in "0123456789abcdef" for c in task_id):
        raise ValueError(f"task_id must be 40 lowercase hex digits, not {task_id!r}")
    return task_id


def task_info_of(task_id: str, found: Sequence[Any], serializer: serializers.Serializer) -> TaskInfo[Any]:
    """find_item.lua's record of an item (found: not FindStatus.NOT_FOUND)."""
    state, payload, deliveries, consumer, delivery = found
    return TaskInfo(task_id, state.decode(), serializers.loads(serializer, payload), int(deliveries),
                    consumer.decode(errors="replace") or None, delivery.decode() or None)


def repair_reset(result: Sequence[bytes]) -> dict[str, str]:
    """repair.lua's reply (the queue exists): the keys it reset, with what they held."""
    return {result[i].decode(): result[i + 1].decode() for i in range(0, len(result), 2)}


def log_repaired(name: str, k: QueueKeys, reset: dict[str, str], recovered: list[str]) -> None:
    if reset or recovered:
        done = [f"reset {key} (it held {before})" for key, before in sorted(reset.items())]
        done += [f"took back what dead consumer {consumer} held" for consumer in recovered]
        _log.event(_log.QUEUE, logging.WARNING, "repaired", "queue %r repaired: %s", name, "; ".join(done),
                   queue=name, key=k.base, reset=reset, recovered=recovered)


def log_kick(name: str, k: QueueKeys, kicked: int) -> None:
    if kicked:
        _log.event(_log.QUEUE, logging.INFO, "kick", "queue %r: %d dead letters moved back to the queue",
                   name, kicked, queue=name, key=k.base, count=kicked)


def log_purge(name: str, k: QueueKeys, purged: int) -> None:
    if purged:
        _log.event(_log.QUEUE, logging.INFO, "purge_dead", "queue %r: %d dead letters deleted",
                   name, purged, queue=name, key=k.base, count=purged)

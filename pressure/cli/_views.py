"""The command's tables: ``ls``, ``watch``'s frames and ``executors``, from the rows of
pressure/cli/_inventory.py (whose figures are the library's: stats.lua, as
``Queue.statistics()`` counts them; nothing is counted a second way here).

A queue whose keys cannot be read (a key of the wrong type: WRONGTYPE) keeps its line,
with ``?`` for its figures and, at the end, ``! `` and the server's error; the others are
shown as usual. A queue named to ``watch`` that is deleted meanwhile shows ``! deleted``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ._inventory import ExecutorRow, QueueRow

__all__ = ["table", "bar", "rate", "ls_table", "queue_json", "watch_table", "executors_table", "NO_RATE"]

_BAR = 20
#: a rate not known yet (the first frame of ``watch``: a rate needs two readings)
NO_RATE = "-"
_UNKNOWN = "?"


def table(headers: list[str], rows: list[list[str]], left: int = 1, note: bool = False) -> str:
    """Aligned columns: the first ``left`` left-aligned, the others right-aligned; ``note``: the
    last column is a note (left-aligned, not padded: one may be long)."""
    body = [r[:-1] for r in rows] if note else rows
    heads = headers[:-1] if note else headers
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(heads)]

    def line(cells: list[str], extra: str) -> str:
        text = "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        return (text + ("  " + extra if extra else "")).rstrip()

    return "\n".join([line(heads, headers[-1] if note else ""),
                      *(line(b, r[-1] if note else "") for b, r in zip(body, rows))])


def bar(size: int, bound: int) -> str:
    if bound <= 0:
        return "unbounded".center(_BAR + 2)
    filled = min(_BAR, round(_BAR * size / bound))
    return "[" + "#" * filled + "-" * (_BAR - filled) + "]"


def rate(count: int, before: int, seconds: float) -> float:
    return max(count - before, 0) / seconds if seconds > 0 else 0.0


def _note(row: QueueRow) -> str:
    return f"! {row.error}" if row.error is not None else ("closed" if row.closed else "")


_LS_HEADERS = ["NAME", "KIND", "SIZE", "DELAYED", "BOUND", "CLOSED", "CONSUMERS", "IN FLIGHT", "DEAD", ""]


def ls_table(rows: list[QueueRow]) -> str:
    lines = []
    for row in rows:
        if row.error is not None:
            lines.append([row.name, row.kind, *[_UNKNOWN] * 7, _note(row)])
            continue
        lines.append([row.name, row.kind, str(row.size), str(row.delayed), str(row.bound) if row.bound else "-",
                      "yes" if row.closed else "no", str(row.consumers), str(row.in_flight),
                      str(row.dead_letters), ""])
    return table(_LS_HEADERS, lines, left=2, note=True)


def queue_json(row: QueueRow) -> dict[str, Any]:
    """A row for ``ls --json``: its figures (null where ``error`` says they could not be read)."""
    figures = {k: v for k, v in asdict(row).items() if k != "at"}
    if row.error is not None:
        figures.update(dict.fromkeys(QueueRow.FIGURES))
    return figures


_WATCH_HEADERS = ["NAME", "KIND", "SIZE", "DELAYED", "BOUND", "FILL", "PUT/S", "GET/S", "IN FLIGHT", "DEAD", ""]


def watch_table(rows: list[QueueRow], before: dict[tuple[str, str], QueueRow],
                deleted: list[tuple[str, str]]) -> str:
    """A frame's table: ``rows`` (their rates from ``before``, the rows of the frame before, by
    name and kind: ``-`` where there is none), and a line for each queue of ``deleted``."""
    lines = []
    for row in rows:
        if row.error is not None:
            lines.append([row.name, row.kind, *[_UNKNOWN] * 3, "", *[_UNKNOWN] * 4, _note(row)])
            continue
        prev = before.get((row.name, row.kind))
        if prev is None or prev.error is not None:
            put = get = NO_RATE
        else:
            seconds = row.at - prev.at
            put = f"{rate(row.produced, prev.produced, seconds):.1f}"
            get = f"{rate(row.consumed, prev.consumed, seconds):.1f}"
        lines.append([row.name, row.kind, str(row.size), str(row.delayed), str(row.bound) if row.bound else "-",
                      bar(row.size, row.bound), put, get, str(row.in_flight), str(row.dead_letters), _note(row)])
    for name, kind in deleted:
        lines.append([name, kind, *["-"] * 3, "", *["-"] * 4, "! deleted"])
    lines.sort(key=lambda cells: (cells[0], cells[1]))
    return table(_WATCH_HEADERS, lines, left=2, note=True)


def executors_table(rows: list[ExecutorRow]) -> str:
    lines = []
    for row in rows:
        if row.error is not None:
            lines.append([row.name, *[_UNKNOWN] * 7, f"! {row.error}"])
            continue
        lines.append([row.name, str(len(row.workers)), str(row.queued), str(row.running), str(row.done),
                      str(row.failed), str(row.retried), str(row.lost), ""])
    return table(["NAME", "WORKERS", "QUEUED", "RUNNING", "DONE", "FAILED", "RETRIED", "LOST", ""], lines,
                 note=True)

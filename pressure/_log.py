"""pressure's operational log records: structured, and rate-limited so that a flood (a
thousand dead letters, a failover seen by every call) cannot drown a log.

Every recovery, requeue, dead letter and worker lifecycle event is logged by ``event``, on
a logger of a fixed hierarchy (``pressure.queue``, ``pressure.executor``,
``pressure.executor.worker``, ``pressure.connection``, ``pressure.metrics``), as a plain message for humans and
with its fields as attributes of the record (``extra=``) for machines: ``record.event``
(a stable name such as ``"dead_letter"``), the event's own fields (``queue``, ``count``...)
and ``record.fields``, a dict of all of them (for a JSON formatter). The docs' "Logging"
section (docs/pages/metrics.md) lists the events and their fields.

Rate limit: at most ``BURST`` records of one event about one thing (a queue: its name and
``key``; an executor: its name and ``prefix``; a server) per ``INTERVAL`` seconds; the
records beyond are counted, not logged, and the first record of that event about that thing
after the interval is preceded by a summary record (event ``"suppressed"``) saying how many
were left out. Summaries still owed at interpreter exit are logged then.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["QUEUE", "EXECUTOR", "WORKER", "CONNECTION", "SECURITY", "METRICS", "RateLimiter", "event", "flush",
           "limiter"]

#: Queues: consumers recovered, deliveries requeued and dead-lettered, roles restored, repairs.
QUEUE = logging.getLogger("pressure.queue")
#: Executors (the submitting side).
EXECUTOR = logging.getLogger("pressure.executor")
#: Executor workers and worker pools: start, stop, lost, tasks given up, foreign items.
WORKER = logging.getLogger("pressure.executor.worker")
#: The connection layer: commands the server refused for now (failover, restart), retried.
CONNECTION = logging.getLogger("pressure.connection")

#: Security warnings (unsigned pickle from a remote server).
SECURITY = logging.getLogger("pressure.security")

#: The Prometheus exporter (pressure serve-metrics): queues it cannot read, scrapes that fail.
METRICS = logging.getLogger("pressure.metrics")

#: The most records of one event, for one queue or executor, per INTERVAL.
BURST = 10
#: Seconds of one rate-limiting window.
INTERVAL = 60.0
#: Windows kept before the idle ones (ended, nothing suppressed) are dropped.
_MAX_WINDOWS = 4096

#: The fields that name what a record is about: the rate limit is per event and per these.
_SCOPES = ("queue", "key", "executor", "prefix", "server")
#: (logger name, event, the scope fields of the record and their values)
_Key = tuple[str, str, tuple[tuple[str, str], ...]]


class _Window:
    __slots__ = ("start", "emitted", "suppressed")

    def __init__(self, start: float) -> None:
        self.start = start
        self.emitted = 1
        self.suppressed = 0


class RateLimiter:
    """At most ``burst`` records per key per ``interval`` seconds; counts the rest."""

    def __init__(self, burst: int = BURST, interval: float = INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.interval = interval
        self.clock = clock
        self._windows: dict[_Key, _Window] = {}
        self._lock = threading.Lock()

    def admit(self, key: _Key) -> tuple[bool, int, float]:
        """Whether a record for ``key`` may be logged now; and, when this opens a new window,
        how many records the window before suppressed and how long it lasted."""
        now = self.clock()
        with self._lock:
            window = self._windows.get(key)
            if window is None or now - window.start >= self.interval:
                if window is None and len(self._windows) >= _MAX_WINDOWS:
                    self._prune(now)
                self._windows[key] = _Window(now)
                if window is None:
                    return True, 0, 0.0
                return True, window.suppressed, now - window.start
            if window.emitted < self.burst:
                window.emitted += 1
                return True, 0, 0.0
            window.suppressed += 1
            return False, 0, 0.0

    def _prune(self, now: float) -> None:
        for key in [key for key, w in self._windows.items()
                    if now - w.start >= self.interval and not w.suppressed]:
            del self._windows[key]
        if len(self._windows) >= _MAX_WINDOWS:  # all busy: forget the oldest half
            for key in sorted(self._windows, key=lambda k: self._windows[k].start)[:_MAX_WINDOWS // 2]:
                del self._windows[key]

    def owed(self) -> list[tuple[_Key, int, float]]:
        """The windows with suppressed records (key, count, seconds so far), reset."""
        now = self.clock()
        with self._lock:
            out = [(key, w.suppressed, now - w.start) for key, w in self._windows.items() if w.suppressed]
            for key, _, _ in out:
                self._windows[key].suppressed = 0
        return out


#: The process's limiter (tests may replace it).
limiter = RateLimiter()


def _scope(fields: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((name, str(fields[name])) for name in _SCOPES if fields.get(name) is not None)


def event(logger: logging.Logger, level: int, name: str, msg: str, *args: object,
          exc_info: bool = False, limit: bool = True, **fields: Any) -> None:
    """Log ``msg % args`` on ``logger`` as event ``name`` with ``fields`` as record
    attributes, unless the rate limit for this event and queue (or executor) is reached
    (``limit=False``: for records already spaced out by their caller)."""
    if not logger.isEnabledFor(level):
        return
    if not limit:
        record = {"event": name, **fields}
        logger.log(level, msg, *args, exc_info=exc_info, extra={**record, "fields": record}, stacklevel=2)
        return
    scope = _scope(fields)
    allowed, suppressed, span = limiter.admit((logger.name, name, scope))
    if suppressed:
        _summary(logger, level, name, scope, suppressed, span)
    if allowed:
        record = {"event": name, **fields}
        logger.log(level, msg, *args, exc_info=exc_info, extra={**record, "fields": record}, stacklevel=2)


def _summary(logger: logging.Logger, level: int, name: str, scope: tuple[tuple[str, str], ...],
             suppressed: int, span: float) -> None:
    record: dict[str, Any] = {"event": "suppressed", "suppressed": suppressed, "of_event": name, **dict(scope)}
    where = "".join(f"{field} {value!r}: " for field, value in scope[:1])
    logger.log(level, "%s%d similar %r records suppressed in the last %.0f s", where, suppressed, name, span,
               extra={**record, "fields": record}, stacklevel=3)


def flush() -> None:
    """Log the summaries still owed (records suppressed in windows not yet over)."""
    for (logger_name, name, scope), suppressed, span in limiter.owed():
        logger = logging.getLogger(logger_name)
        if logger.isEnabledFor(logging.WARNING):
            _summary(logger, logging.WARNING, name, scope, suppressed, span)


atexit.register(flush)

"""Riding out a Redis outage: waiting that a stop request cuts short, and complaining
about a failure that repeats without flooding the log.

The executor's threads and its workers retry while Redis restarts or is unreachable.
``Complaint`` logs the first failure at once and then less and less often (after 1, 2,
4 ... up to 60 seconds, each line counting the failures since the first), and says when
Redis answers again; ``pause`` sleeps in short steps so that a stop request (a signal,
``shutdown``) is noticed within a tenth of a second.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from . import _log

__all__ = ["Complaint", "pause", "LOG_FORMAT"]

#: The log format of pressure's command-line tools and worker processes: timestamped.
LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


def pause(seconds: float, stop: Callable[[], bool]) -> bool:
    """Sleep ``seconds``, or less if ``stop()`` becomes true (checked every 0.1 s); whether
    it did."""
    deadline = time.monotonic() + seconds
    while not stop():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, 0.1))
    return True


class Complaint:
    """A repeating failure, logged with exponential backoff (see the module's docstring)."""

    def __init__(self, logger: logging.Logger, what: str, *, first: float = 1.0,
                 longest: float = 60.0) -> None:
        self.logger = logger
        self.what = what
        self.first = first
        self.longest = longest
        self.since: float | None = None  # when the current run of failures began
        self.count = 0
        self.next_at = 0.0
        self.interval = first

    def failed(self, exc: BaseException) -> None:
        """One more failure: logged if its turn has come."""
        now = time.monotonic()
        if self.since is None:
            self.since, self.count, self.next_at, self.interval = now, 0, now, self.first
        self.count += 1
        if now < self.next_at:
            return
        # spaced out here already: not rate-limited again
        if self.count == 1:
            _log.event(self.logger, logging.WARNING, "outage", "%s: %s", self.what, exc, limit=False,
                       what=self.what, failures=1, seconds=0.0, error=str(exc))
        else:
            _log.event(self.logger, logging.WARNING, "outage", "%s: %s (%d failures in %.0f s)", self.what, exc,
                       self.count, now - self.since, limit=False, what=self.what, failures=self.count,
                       seconds=now - self.since, error=str(exc))
        self.next_at = now + self.interval
        self.interval = min(self.interval * 2, self.longest)

    def succeeded(self) -> None:
        """It works again: say so if the failure was reported."""
        if self.since is None:
            return
        seconds = time.monotonic() - self.since
        _log.event(self.logger, logging.WARNING, "outage_over", "%s: working again after %.1f s (%d failures)",
                   self.what, seconds, self.count, limit=False, what=self.what, failures=self.count,
                   seconds=seconds)
        self.since = None

    @property
    def failing_for(self) -> float:
        """Seconds since the current run of failures began (0 if it works)."""
        return 0.0 if self.since is None else time.monotonic() - self.since

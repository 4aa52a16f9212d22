"""Argument checks shared by the queue handles: each returns the value as the scripts read it,
or raises the TypeError/ValueError the stdlib raises for it."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .durability import Durability

_TIMEOUT_MESSAGE = "'timeout' must be a non-negative number"


def _timeout_value(timeout: Any) -> float | None:
    """Validate a timeout: None waits forever; negative values are returned as given."""
    if timeout is None:
        return None
    if not isinstance(timeout, numbers.Real):
        raise TypeError(f"'timeout' must be a number or None, not {type(timeout).__name__}")
    value = float(timeout)
    if math.isnan(value):
        raise ValueError(_TIMEOUT_MESSAGE)
    if value == math.inf:
        return None
    return value


#: The largest bound: 15 digits, exact in the Lua number every script reads it as.
MAX_BOUND = 10**15 - 1


def _maxsize_value(maxsize: Any) -> int:
    """Validate a maxsize the way queue.Queue reads it: <= 0 means unbounded."""
    if isinstance(maxsize, bool) or not isinstance(maxsize, numbers.Real):
        raise TypeError(f"maxsize must be an integer, not {type(maxsize).__name__}")
    if isinstance(maxsize, numbers.Integral):
        value = int(maxsize)
    else:
        number = float(maxsize)
        if not math.isfinite(number) or number != int(number):
            raise ValueError(f"maxsize must be an integer, not {maxsize!r}")
        value = int(number)
    if value > MAX_BOUND:
        raise ValueError(f"maxsize must be at most {MAX_BOUND}, not {maxsize!r}")
    return max(value, 0)


def _seconds(name: str, value: Any, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0 or seconds < minimum:
        least = f" of at least {minimum:g}" if minimum else ""
        raise ValueError(f"{name} must be a positive, finite number of seconds{least}, not {value!r}")
    return seconds


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be non-negative, not {value}")
    return int(value)


def _check_max_deliveries(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"max_deliveries must be an integer or None, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"max_deliveries must be at least 1, not {value}")
    return int(value)


@dataclass(frozen=True, slots=True)
class Options:
    """A handle's reliability options, validated (what a handle pickles with); the scripts'
    forms of them are derived here, never stored beside them."""

    reliable: bool = False
    visibility_timeout: float = 30.0
    lease: float = 10.0
    max_deliveries: int | None = 10
    #: WAIT for replicas after each put and acknowledgement (pressure.Durability), or None
    durability: Durability | None = None
    #: the ttl of every item this handle puts without one (seconds), or None: no limit
    ttl: float | None = None
    #: dead-letter (reason "expired") rather than drop the items this handle puts that expire
    dead_letter_expired: bool = False
    #: unpickle unsigned items from a server not on this host all the same (pressure/signing.py)
    insecure_pickle: bool = False

    @classmethod
    def of(cls, reliable: Any, visibility_timeout: Any, lease: Any, max_deliveries: Any) -> Options:
        """Validate the constructor's arguments."""
        return cls(bool(reliable), _seconds("visibility_timeout", visibility_timeout),
                   _seconds("lease", lease, minimum=1.0), _check_max_deliveries(max_deliveries))

    @property
    def lease_ms(self) -> int:
        return int(self.lease * 1000)

    @property
    def visibility_ms(self) -> int:
        """How long a delivery may stay unacknowledged: the visibility timeout in reliable mode
        (rounded up: 0 ms would read as "never expires"), else the lease."""
        return math.ceil(self.visibility_timeout * 1000) if self.reliable else self.lease_ms

    @property
    def max_deliveries_arg(self) -> str:
        """max_deliveries as requeue.lua reads it ('0': no limit)."""
        return str(self.max_deliveries or 0)


#: The longest delay (or ttl): about 31 years in ms, exact in the scripts' Lua numbers.
MAX_DELAY = 10**12 / 1000


def _delay_ms(name: str, value: Any) -> str:
    """A delay of ``value`` seconds (None or 0: none) as the scripts read it: whole ms, '' for none."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of seconds or None, not {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_DELAY:
        raise ValueError(f"{name} must be a finite number of seconds from 0 to {MAX_DELAY:g}, not {value!r}")
    ms = math.ceil(seconds * 1000)
    return str(ms) if ms > 0 else ""


def _meta_arg(ttl: Any, ttr: Any, default_ttl: float | None, dead: bool, key: Any = None) -> str:
    """put.lua's ARGV[8] for an item's ``ttl`` and ``ttr`` (seconds; the handle's ttl when
    ``ttl`` is None) and utube ``key``: '' for none, else '<ttl ms>|<ttr ms>|<d>|<key>'."""
    if key is not None and (not isinstance(key, str) or not key):
        raise TypeError(f"key must be a non-empty str or None, not {key!r}")
    ttl_ms = _delay_ms("ttl", default_ttl if ttl is None else ttl)
    ttr_ms = _delay_ms("ttr", ttr)
    if ttl is not None and not ttl_ms:
        raise ValueError(f"ttl must be a positive number of seconds, not {ttl!r}")
    if ttr is not None and not ttr_ms:
        raise ValueError(f"ttr must be a positive number of seconds, not {ttr!r}")
    if not ttl_ms and not ttr_ms and key is None:
        return ""
    return f"{ttl_ms}|{ttr_ms}|{'d' if dead and ttl_ms else ''}|{key or ''}"


def _put_args(kind: str, options: Options, delay: Any, ttl: Any, ttr: Any, key: Any) -> tuple[str, str]:
    """A put's ``delay``, ``ttl``, ``ttr`` and ``key`` as put.lua reads them (ARGV[7] and [8]),
    for a handle of ``kind`` with ``options`` (its default ttl): ValueError/TypeError before
    any round trip. (The sync and asyncio handles alike.)"""
    delay_ms = _delay_ms("delay", delay)
    if ttl is None and ttr is None and key is None and options.ttl is None:
        return delay_ms, ""
    if key is not None and kind != "fifo":
        raise ValueError(f"key= (utube) is for FIFO queues, not {kind} ones")
    if key is not None and delay_ms:
        raise ValueError("key= (utube) and delay= cannot be combined")
    return delay_ms, _meta_arg(ttl, ttr, options.ttl, options.dead_letter_expired, key)


def _ttl_value(ttl: Any) -> float | None:
    """A queue's default ttl (seconds), or None."""
    if ttl is None:
        return None
    if not _delay_ms("ttl", ttl):
        raise ValueError(f"ttl must be a positive number of seconds, not {ttl!r}")
    return float(ttl)

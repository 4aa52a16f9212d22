"""Helpers of CPython's test support that the adapted CPython test files share
(test_mp_cpython.py, test_futures_cpython.py, test_pool_cpython.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["TimingWrapper", "eventually"]


class TimingWrapper:
    """CPython's ``TimingWrapper``: records the time the call took."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.elapsed: float | None = None

    def __call__(self, *args: Any, **kwds: Any) -> Any:
        t = time.monotonic()
        try:
            return self.func(*args, **kwds)
        finally:
            self.elapsed = time.monotonic() - t


def eventually(predicate: Callable[[], bool], timeout: float) -> bool:
    """Poll ``predicate`` (CPython's ``support.sleeping_retry``); whether it came true."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True

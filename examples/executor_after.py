"""Executor migration (after): ``executor_before.py`` with its tasks run by pressure workers.

The diff: ``import pressure``, and ``pressure.Executor`` in place of
``concurrent.futures.ProcessPoolExecutor``; ``as_completed``, ``map`` and the
futures are the stdlib's. Redis is ``REDIS_URL`` (default
``redis://127.0.0.1:6379/0``), keys go under ``PRESSURE_PREFIX`` if set.

Alone, it starts its own ``WORKERS`` local worker processes (an anonymous
executor: every key is deleted at the end)::

    REDIS_URL=redis://127.0.0.1:6379/0 python examples/executor_after.py

With ``EXECUTOR_NAME`` set it starts none and uses the workers of that name,
on any host (``examples/executor_two_hosts.sh`` starts two groups)::

    PYTHONPATH=examples python -m pressure worker primes --processes 2   # on each host
    EXECUTOR_NAME=primes python examples/executor_after.py

Workers import the task functions by module name, so this file must be
importable on every worker host (hence ``PYTHONPATH=examples``); ``main()``
runs from the module imported by its own name, so the tasks pickle as
``executor_after.count_primes``, not ``__main__.count_primes``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import math
import os
import socket

import pressure

LIMIT = 500_000
CHUNK = 25_000
WORKERS = 2
NAME = os.environ.get("EXECUTOR_NAME")  # None: an anonymous executor with local workers


def is_prime(n: int) -> bool:
    """Trial division: slow on purpose, this is the CPU-bound work."""
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


def count_primes(start: int, stop: int) -> int:
    """How many primes p with start <= p < stop."""
    return sum(map(is_prime, range(start, stop)))


def host() -> str:
    """The name of the host this runs on (``PRESSURE_HOSTNAME`` stands in for it where set,
    as for pressure's workers: two worker groups on one machine can play two hosts)."""
    return os.environ.get("PRESSURE_HOSTNAME") or socket.gethostname()


def count_twins(start: int, stop: int) -> tuple[int, str]:
    """How many twin primes (p, p + 2) with start <= p < stop, and the host that counted."""
    return sum(is_prime(p) and is_prime(p + 2) for p in range(start, stop)), host()


def main() -> None:
    starts = range(0, LIMIT, CHUNK)
    stops = [min(start + CHUNK, LIMIT) for start in starts]
    chunks_by_host: collections.Counter[str] = collections.Counter()
    with pressure.Executor(NAME, max_workers=WORKERS, local_workers=False if NAME else None) as executor:
        primes = sum(executor.map(count_primes, starts, stops, chunksize=2))
        futures = [executor.submit(count_twins, start, stop) for start, stop in zip(starts, stops)]
        twins = 0
        for future in concurrent.futures.as_completed(futures):
            count, where = future.result()
            twins += count
            chunks_by_host[where] += 1
    print(f"below {LIMIT}: {primes} primes, {twins} twin prime pairs, {len(starts)} chunks")
    print("chunks by host: " + ", ".join(f"{h} {n}" for h, n in sorted(chunks_by_host.items())))


if __name__ == "__main__":
    import executor_after  # this file, by its module name (see the docstring)

    executor_after.main()

"""Executor migration (before): count primes and twin primes with a ProcessPoolExecutor.

The numbers below ``LIMIT`` are cut into chunks: ``map`` counts each chunk's
primes, ``submit`` and ``as_completed`` count its twin primes (p and p + 2
both prime) and say which host did the work. Stdlib only::

    python examples/executor_before.py

``executor_after.py`` is this file with one import added and the executor
changed. The task functions are module-level, as ProcessPoolExecutor requires;
``main()`` runs from this file imported by its own name, so the tasks pickle as
``executor_before.count_primes``, not ``__main__.count_primes``: a worker
anywhere that can import the module can run them.
"""

from __future__ import annotations

import collections
import concurrent.futures
import math
import os
import socket

LIMIT = 500_000
CHUNK = 25_000
WORKERS = 2


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
    with concurrent.futures.ProcessPoolExecutor(max_workers=WORKERS) as executor:
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
    import executor_before  # this file, by its module name (see the docstring)

    executor_before.main()

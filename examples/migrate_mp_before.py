"""Migration guide, pair 1 (before): worker processes fed through a multiprocessing.Queue.

A producer puts numbers into a bounded task queue, worker processes square
them and send the results back through a second queue, and one ``None``
sentinel per worker stops them. Stdlib only::

    python examples/migrate_mp_before.py

``migrate_mp_after.py`` is this file with one import changed.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

TASKS = 100
WORKERS = 3


def worker(tasks: Any, results: Any) -> None:
    """Square numbers until the ``None`` sentinel arrives."""
    for n in iter(tasks.get, None):
        results.put((n, n * n))


def main() -> None:
    tasks = multiprocessing.Queue(maxsize=10)
    results = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=worker, args=(tasks, results))
               for _ in range(WORKERS)]
    for w in workers:
        w.start()
    for n in range(TASKS):
        tasks.put(n)  # blocks while 10 tasks are waiting
    for _ in workers:
        tasks.put(None)  # one sentinel per worker: stop
    # collect before joining: a worker exits only once its results are sent
    done = dict(results.get(timeout=30) for _ in range(TASKS))
    for w in workers:
        w.join()
    tasks.close()  # this process is done with both queues
    results.close()
    squares = sum(done.values())
    print(f"{len(done)} tasks done by {WORKERS} worker processes, sum of squares {squares}")


if __name__ == "__main__":
    main()

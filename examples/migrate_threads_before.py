"""Migration guide, pair 2 (before): worker threads, a bounded queue.Queue, task_done() and join().

The main thread puts numbers into a queue bounded at 10, worker threads square
them and mark each task done, ``join()`` waits until every task is done, and
one ``None`` sentinel per thread stops them. Stdlib only::

    python examples/migrate_threads_before.py

``migrate_threads_after.py`` is this file with one import changed.
"""

from __future__ import annotations

import queue
import threading

TASKS = 100
THREADS = 4


def worker(tasks: queue.Queue[int | None], squares: list[int]) -> None:
    """Square numbers until the ``None`` sentinel; every get() is matched by a task_done()."""
    while (n := tasks.get()) is not None:
        squares.append(n * n)  # list.append is atomic: no lock needed
        tasks.task_done()
    tasks.task_done()


def main() -> None:
    tasks: queue.Queue[int | None] = queue.Queue(maxsize=10)
    squares: list[int] = []
    threads = [threading.Thread(target=worker, args=(tasks, squares)) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for n in range(TASKS):
        tasks.put(n)  # blocks while 10 tasks are waiting
    tasks.join()  # returns once task_done() was called for every task
    print(f"{len(squares)} tasks done by {THREADS} threads, sum of squares {sum(squares)}")
    for _ in threads:
        tasks.put(None)  # one sentinel per thread: stop
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()

"""Migration guide, pair 2 (after): ``migrate_threads_before.py`` with its queue in Redis.

``import pressure as queue`` makes ``queue.Queue(maxsize=10)`` an anonymous
pressure queue; the rest runs unchanged, ``task_done()`` and ``join()``
included. Like a ``queue.Queue``, an anonymous queue lives as long as the
process that made it: its keys leave Redis when it exits. Redis is
``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``)::

    REDIS_URL=redis://127.0.0.1:6379/0 python examples/migrate_threads_after.py
"""

from __future__ import annotations

import pressure as queue
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

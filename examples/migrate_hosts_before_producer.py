"""Migration guide, pair 3 (before): the producer host of a queue shared across hosts.

The stdlib's only cross-host queue: the consumer host serves a ``queue.Queue``
over TCP with ``multiprocessing.managers``; this producer connects to it, puts
100 jobs and then a ``None`` sentinel. Start the consumer first::

    python examples/migrate_hosts_before_consumer.py 0.0.0.0:50000
    python examples/migrate_hosts_before_producer.py consumer-host:50000

The address comes from argv, else ``QUEUE_ADDRESS``; both sides need the same
``QUEUE_AUTHKEY`` (default ``secret``).
"""

from __future__ import annotations

import os
import sys
from multiprocessing.managers import BaseManager

JOBS = 100


class QueueManager(BaseManager):
    """A BaseManager that reaches the consumer host's job queue."""


def main() -> None:
    address = sys.argv[1] if sys.argv[1:] else os.environ.get("QUEUE_ADDRESS", "127.0.0.1:50000")
    host, port = address.rsplit(":", 1)
    QueueManager.register("jobs")
    authkey = os.environ.get("QUEUE_AUTHKEY", "secret").encode()
    manager = QueueManager(address=(host, int(port)), authkey=authkey)
    manager.connect()
    jobs = manager.jobs()
    total = 0
    for n in range(JOBS):
        jobs.put({"n": n})  # blocks while 10 jobs are waiting
        total += n
    jobs.put(None)  # sentinel: no more jobs
    print(f"produced {JOBS} items, sum {total}")


if __name__ == "__main__":
    main()

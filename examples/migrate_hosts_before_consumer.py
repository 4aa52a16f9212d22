"""Migration guide, pair 3 (before): the consumer host of a queue shared across hosts.

The stdlib's only cross-host queue: this consumer serves a ``queue.Queue``
(bounded at 10) over TCP with ``multiprocessing.managers`` and takes jobs
from it until the producer's ``None`` sentinel. Start it first::

    python examples/migrate_hosts_before_consumer.py 0.0.0.0:50000
    python examples/migrate_hosts_before_producer.py consumer-host:50000

The address comes from argv, else ``QUEUE_ADDRESS`` (port 0: any free port,
printed); both sides need the same ``QUEUE_AUTHKEY`` (default ``secret``).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from multiprocessing.managers import BaseManager


class QueueManager(BaseManager):
    """A BaseManager that serves this host's job queue to other hosts."""


def main() -> None:
    address = sys.argv[1] if sys.argv[1:] else os.environ.get("QUEUE_ADDRESS", "127.0.0.1:50000")
    host, port = address.rsplit(":", 1)
    jobs: queue.Queue[dict[str, int] | None] = queue.Queue(maxsize=10)
    QueueManager.register("jobs", callable=lambda: jobs)
    authkey = os.environ.get("QUEUE_AUTHKEY", "secret").encode()
    manager = QueueManager(address=(host, int(port)), authkey=authkey)
    server = manager.get_server()  # listening from here on
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("serving jobs on %s:%d" % server.address, flush=True)
    count = total = 0
    for item in iter(jobs.get, None):  # until the producer's None sentinel
        count += 1
        total += item["n"]
    print(f"consumed {count} items, sum {total}")


if __name__ == "__main__":
    main()

"""Migration guide, pair 3 (after): the producer host, the queue in Redis.

``migrate_hosts_before_producer.py`` with the manager replaced by a named
pressure queue: every host that names "jobs" on the same Redis shares it, so
no host has to serve it and either side may start first. The producer creates
the queue (or attaches to it) and closes it when done::

    export PRESSURE_AUTHKEY=...   # on both hosts: the same key, from `python -m pressure keygen`
    REDIS_URL=redis://redis-host:6379/0 python examples/migrate_hosts_after_consumer.py
    REDIS_URL=redis://redis-host:6379/0 python examples/migrate_hosts_after_producer.py

Across hosts the items (pickled) are signed with that key and checked before they are
unpickled, as a multiprocessing manager checks its authkey; without one, a handle on a Redis
that is not on this host refuses to start (pressure.UnsignedPickle). On one host (the
default URL) no key is needed.

Redis comes from argv, else ``REDIS_URL``, else ``redis://127.0.0.1:6379/0``.
"""

from __future__ import annotations

import os
import sys

import pressure

JOBS = 100


def main() -> None:
    url = sys.argv[1] if sys.argv[1:] else os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    jobs: pressure.Queue[dict[str, int]] = pressure.Queue("jobs", maxsize=10, url=url)
    total = 0
    for n in range(JOBS):
        jobs.put({"n": n})  # blocks while 10 jobs are waiting
        total += n
    jobs.close()  # no more jobs: consumers drain what is left, then stop
    print(f"produced {JOBS} items, sum {total}")


if __name__ == "__main__":
    main()

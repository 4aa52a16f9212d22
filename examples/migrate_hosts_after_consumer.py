"""Migration guide, pair 3 (after): the consumer host, the queue in Redis.

``migrate_hosts_before_consumer.py`` with the manager replaced by a named
pressure queue: nothing to serve, the consumer names "jobs" on the shared
Redis, takes jobs until the producer has closed the queue and it is drained,
then deletes it (the protocol's rule: the producer creates and closes, the
consumer deletes)::

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


def main() -> None:
    url = sys.argv[1] if sys.argv[1:] else os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    jobs: pressure.Queue[dict[str, int]] = pressure.Queue("jobs", maxsize=10, url=url)
    count = total = 0
    for item in jobs:  # until the producer close()s the queue and it is drained
        count += 1
        total += item["n"]
    jobs.delete()  # every key of "jobs" leaves Redis
    print(f"consumed {count} items, sum {total}")


if __name__ == "__main__":
    main()

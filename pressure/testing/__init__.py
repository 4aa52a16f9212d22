"""pressure.testing: tools for testing code that uses pressure (trio.testing in spirit).

* ``RedisServer`` - a private ``redis-server`` on a free loopback port in its own temporary
  directory, which can be killed (SIGKILL), paused (SIGSTOP), resumed and restarted in place;
  ``find_redis_server`` finds the binary, ``ServerUnavailable`` says why there is none.
  pressure's own tests, demo and benchmark use it; never point a test at a server you did
  not start.
* ``SentinelTopology`` - a master, a replica and three sentinels (``redis-server --sentinel``)
  on private ports, with ``failover()``, ``kill_master()`` and ``pause_replication()`` for
  the failover tests; ``url`` is its ``redis+sentinel://`` URL.
* ``ClusterTopology`` - a Redis Cluster of 3 masters, each with a replica, on private ports,
  with ``migrate_slot()``, ``failover()`` and ``kill_master()`` for the cluster tests; ``url``
  is its ``redis+cluster://`` URL.
* ``pressure.testing.pytest_plugin`` - pytest fixtures built on it (``redis_server``,
  ``redis_url``, ``redis_server_factory``); enable them with
  ``pytest_plugins = ["pressure.testing.pytest_plugin"]`` in a ``conftest.py``.
* ``pressure.testing.spec_client`` - ``SpecClient``, a deliberately literal pressure-protocol
  client written from the spec's pseudocode, one Redis command per round trip: an independent
  reading of the spec to test against (the compatibility kit's interoperability tests) and the
  benchmark's "spec literal" baseline. Its names are not re-exported here: its errors
  (``QueueDoesNotExist``...) are the spec's, not pressure's.
"""

from __future__ import annotations

from ._server import RedisServer as RedisServer
from ._server import ServerUnavailable as ServerUnavailable
from ._server import find_redis_server as find_redis_server
from ._cluster import ClusterTopology as ClusterTopology
from ._sentinel import SentinelTopology as SentinelTopology

__all__ = ["ClusterTopology", "RedisServer", "SentinelTopology", "ServerUnavailable", "find_redis_server"]

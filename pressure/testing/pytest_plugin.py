"""pytest fixtures for tests of code that uses pressure: private redis-server processes.

Enable them in your ``conftest.py``::

    pytest_plugins = ["pressure.testing.pytest_plugin"]

(or with ``-p pressure.testing.pytest_plugin`` on the command line). The plugin is never
loaded on its own: installing pressure changes no test suite.

* ``redis_server`` (session scope): one private ``RedisServer`` for the whole run, on a free
  loopback port in its own temporary directory, stopped and removed at the end;
* ``redis_url``: that server's URL, for ``pressure.Queue(..., url=redis_url)``;
* ``redis_server_factory``: ``redis_server_factory(**options)`` starts one more server with
  ``RedisServer``'s keyword options (``appendonly=True``, ``extra_args=(...)``) for a test
  that kills, pauses or restarts it; every server it made is stopped and removed when the
  test ends.

Give each test its own key prefix or queue names rather than flushing the shared server.
With no redis-server binary (``PATH``, ``$PRESSURE_REDIS_SERVER`` or the ``server`` extra)
the fixtures fail with ``ServerUnavailable``, saying how to get one; they never fall back
to a server the tests did not start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ._server import RedisServer

__all__ = ["redis_server", "redis_server_factory", "redis_url"]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One private redis-server for the whole test session."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of the session's private redis-server."""
    return redis_server.url


@pytest.fixture
def redis_server_factory() -> Iterator[Callable[..., RedisServer]]:
    """Start more private servers in a test (``RedisServer``'s keyword options); each is
    stopped and its directory removed when the test ends, whatever it did to them."""
    made: list[RedisServer] = []

    def make(**options: Any) -> RedisServer:
        server = RedisServer(**options)
        made.append(server)
        return server.start()

    yield make
    for server in made:
        server.cleanup()

"""Fixtures: a private redis-server per test session (never the one on 6379),
a unique key prefix per test (so nothing is ever flushed), and a fakeredis
backend for the non-blocking unit tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import pressure
from pressure.testing import RedisServer
from pressure.testing.pytest_plugin import redis_server

__all__ = ["any_queue", "make_queue", "prefix", "r", "redis_server", "url"]


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def r(url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(url)
    yield client
    client.close()


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def make_queue(url: str, prefix: str) -> Iterator[Any]:
    """Build queues on the private server under this test's own prefix."""
    made: list[pressure.Queue[Any]] = []

    def make(name: str | None = "q", maxsize: int | None = None, **kw: Any) -> pressure.Queue[Any]:
        kw.setdefault("url", url)
        kw.setdefault("prefix", prefix)
        q: pressure.Queue[Any] = pressure.Queue(name, maxsize, **kw)
        made.append(q)
        return q

    yield make
    for q in made:
        q.disconnect()


@pytest.fixture(params=["redis", "fakeredis"])
def any_queue(request: pytest.FixtureRequest, url: str, prefix: str) -> Iterator[Any]:
    """Queues on a real server and on fakeredis (for tests that never block)."""
    if request.param == "redis":
        conn: Any = redis.Redis.from_url(url)
    else:
        fakeredis = pytest.importorskip("fakeredis")
        conn = fakeredis.FakeRedis(server=fakeredis.FakeServer())

    def make(name: str = "q", maxsize: int | None = None, **kw: Any) -> pressure.Queue[Any]:
        return pressure.Queue(name, maxsize, connection=conn, prefix=prefix, **kw)

    make.redis = conn  # type: ignore[attr-defined]
    yield make
    conn.close()


# -- figures of the chaos soak (tests/test_chaos.py), shown whatever the capture mode ------

CHAOS_FIGURES = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session")
def chaos_figures(request: pytest.FixtureRequest) -> list[str]:
    """Lines a chaos scenario adds; printed in the terminal summary (also without -s)."""
    return request.config.stash.setdefault(CHAOS_FIGURES, [])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = config.stash.get(CHAOS_FIGURES, [])
    if lines:
        terminalreporter.section("chaos soak figures")
        for line in lines:
            terminalreporter.write_line(line)

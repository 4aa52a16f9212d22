"""Fixtures for the compatibility kit: one private redis-server per session
(never the one on 6379) and a unique key prefix per test, so nothing is ever
flushed and tests never see each other's queues."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from pressure.server import RedisServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


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
    return f"c{uuid.uuid4().hex[:12]}"

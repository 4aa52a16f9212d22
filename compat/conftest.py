"""Fixtures for the compatibility kit: the same as the unit tests' (one private
redis-server per session, never the one on 6379; a unique key prefix per test,
so nothing is ever flushed and tests never see each other's queues)."""

from __future__ import annotations

from tests.conftest import prefix, r, redis_server, url

__all__ = ["prefix", "r", "redis_server", "url"]

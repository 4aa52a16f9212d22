"""Where the queue's Redis is: url, connection, environment variables, failures."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

import pressure
from pressure.connection import ConnectionConfig
from pressure.testing import RedisServer


def test_url_forms(redis_server: RedisServer, prefix: str) -> None:
    q: pressure.Queue[int] = pressure.Queue("u", url=redis_server.url, prefix=prefix)
    q.put(1)
    assert q.url == f"redis://127.0.0.1:{redis_server.port}/0"
    other_db: pressure.Queue[int] = pressure.Queue(
        "u", url=f"redis://127.0.0.1:{redis_server.port}/3", prefix=prefix)
    assert other_db.empty() and q.qsize() == 1
    assert ConnectionConfig.from_url("unix:///tmp/redis.sock?db=2").url == "unix:///tmp/redis.sock?db=2"
    assert ConnectionConfig.from_url("rediss://user:secret@h:6380/1").url == "rediss://user@h:6380/1"
    with pytest.raises(ValueError, match="invalid Redis URL"):
        pressure.Queue("u", url="http://nope")


def test_unix_socket(prefix: str) -> None:
    import os

    server = RedisServer(extra_args=("--unixsocket", "redis.sock", "--unixsocketperm", "700"))
    with server:
        path = os.path.join(server.dir, "redis.sock")
        q: pressure.Queue[str] = pressure.Queue("sock", url=f"unix://{path}", prefix=prefix)
        q.put("via socket")
        assert q.get() == "via socket"


def test_ready_connection_is_used_and_never_closed(url: str, prefix: str) -> None:
    conn = redis.Redis.from_url(url)
    with pressure.Queue("c", connection=conn, prefix=prefix) as q:
        q.put(1)
    assert conn.ping() and conn.llen(f"{prefix}:c") == 1  # still usable after the handle closed


def test_environment_variables(redis_server: RedisServer, prefix: str, monkeypatch: pytest.MonkeyPatch,
                               r: redis.Redis) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("REDIS_SERVER", "127.0.0.1")
    monkeypatch.setenv("REDIS_PORT", str(redis_server.port))
    monkeypatch.setenv("REDIS_DB", "5")
    monkeypatch.setenv("PRESSURE_PREFIX", prefix)
    q: pressure.Queue[int] = pressure.Queue("env")
    q.put(1)
    assert q.prefix == prefix and q.url.endswith(f":{redis_server.port}/5")
    assert redis.Redis(port=redis_server.port, db=5).llen(f"{prefix}:env") == 1
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{redis_server.port}/6")
    assert pressure.Queue("env").url.endswith("/6")  # REDIS_URL wins
    monkeypatch.delenv("REDIS_URL")
    monkeypatch.setenv("REDIS_PORT", "not-a-port")
    with pytest.raises(ValueError, match="REDIS_PORT"):
        pressure.Queue("env")


def test_spec_defaults_without_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("REDIS_URL", "REDIS_SERVER", "REDIS_PORT", "REDIS_DB", "PRESSURE_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    config = ConnectionConfig.from_environment()
    assert config.url == "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize("op", ["create", "put", "get", "qsize"])
def test_unreachable_server_is_a_typed_error_within_seconds(url: str, prefix: str, op: str) -> None:
    dead = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    start = time.monotonic()
    with pytest.raises(pressure.BackendError) as info:
        if op == "create":
            pressure.Queue("x", url=dead)
        else:
            q: pressure.Queue[Any] = pressure.Queue("x", url=url, prefix=prefix)
            q._backend.config = pressure.connection.ConnectionConfig.from_url(dead)  # type: ignore[attr-defined]
            q._backend.disconnect()
            {"put": lambda: q.put(1), "get": q.get, "qsize": q.qsize}[op]()
    assert time.monotonic() - start < 5
    err = info.value
    assert not isinstance(err, (pressure.Full, pressure.Empty))
    assert isinstance(err.__cause__, redis.ConnectionError)
    assert not isinstance(err, pressure.OutcomeUnknown)  # nothing was sent


def test_paused_server_raises_instead_of_hanging(prefix: str) -> None:
    with RedisServer() as server:
        q: pressure.Queue[int] = pressure.Queue("paused", url=server.url, prefix=prefix)
        q.put(1)
        server.pause()
        try:
            start = time.monotonic()
            with pytest.raises(pressure.BackendError):
                q.get()
            assert time.monotonic() - start < 15
        finally:
            server.resume()


def test_no_password_is_ever_shown() -> None:
    config = ConnectionConfig.from_url("redis://user:s3cret@127.0.0.1:6399/0")
    assert "s3cret" not in repr(config) and "s3cret" not in config.url
    for url in ("redis://:s3cret@127.0.0.1:notaport/0", "redis://user:s3cret@127.0.0.1:notaport/0"):
        with pytest.raises(ValueError, match="invalid Redis URL") as info:
            ConnectionConfig.from_url(url)
        assert "s3cret" not in str(info.value), str(info.value)


def test_a_new_connection_costs_one_round_trip() -> None:
    """A connection pressure makes says HELLO and nothing else: redis-py's CLIENT SETINFO
    (twice) and CLIENT MAINT_NOTIFICATIONS are three more round trips on every connection
    (errors, too, on servers that have neither), and a worker makes a few before its first
    reply."""
    with RedisServer() as server:
        observer = redis.Redis.from_url(server.url)
        observer.config_resetstat()
        client = ConnectionConfig.resolve(server.url).new_client()
        assert client.ping()
        client.close()
        commands = {name.removeprefix("cmdstat_"): stats["calls"]
                    for name, stats in observer.info("commandstats").items()}
        assert observer.info("errorstats") == {}  # unknown subcommands are counted only here
        assert commands == {"config|resetstat": 1, "hello": 1, "ping": 1}
        observer.close()

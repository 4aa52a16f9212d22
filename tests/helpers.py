"""Checks shared by the tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, cast

import pytest
import redis

import pressure


def assert_invariants(r: redis.Redis, q: pressure.Queue[Any]) -> None:
    """With no client acting: one token per role; :not_full agrees with length and bound."""
    k = q.keys
    assert r.llen(k.producer_free) == 1, "producer token missing or duplicated"
    assert r.llen(k.consumer_free) == 1, "consumer token missing or duplicated"
    bound = int(cast(bytes, r.get(k.bound)))
    length = r.llen(k.base) + r.zcard(k.delayed)  # delayed items count against the bound
    if r.exists(k.closed):
        assert r.llen(k.not_full) <= 1
        assert r.llen(k.closed) >= 1
    else:
        expected = 1 if bound == 0 or length < bound else 0
        assert r.llen(k.not_full) == expected, (
            f":not_full has {r.llen(k.not_full)} with length {length} and bound {bound}"
        )


def snapshot(r: redis.Redis, q: pressure.Queue[Any]) -> dict[bytes, Any]:
    """Every key of the queue with its type and value (not the sweep's rate-limit marker)."""
    out: dict[bytes, Any] = {}
    for key in q.keys.all_keys():
        if key == q.keys.sweep:
            continue
        kind = r.type(key)
        if kind == b"list":
            out[key.encode()] = r.lrange(key, 0, -1)
        elif kind == b"string":
            out[key.encode()] = r.get(key)
        elif kind == b"stream":
            out[key.encode()] = r.xrange(key)
    return out


def blocks(call: Callable[[], Any], trigger: Callable[[], Any], delay: float = 0.3,
           limit: float = 10.0) -> Any:
    """Prove ``call`` blocks until ``trigger`` runs in another thread (CPython's
    do_blocking_test): the call must not return before the trigger fired."""
    fired = threading.Event()

    def fire() -> None:
        time.sleep(delay)
        fired.set()
        trigger()

    t = threading.Thread(target=fire)
    t.start()
    try:
        result = call()
    finally:
        t.join(limit)
    assert fired.is_set(), "the call returned before the trigger: it did not block"
    return result


def blocks_raising(call: Callable[[], Any], trigger: Callable[[], Any], exc: type[BaseException],
                   delay: float = 0.3) -> BaseException:
    caught: list[BaseException] = []

    def wrapped() -> None:
        try:
            call()
        except exc as e:
            caught.append(e)

    blocks(wrapped, trigger, delay)
    assert caught, f"{exc.__name__} was not raised"
    return caught[0]


def register_waiter(q: pressure.Queue[Any], consumer: str, record: str, lease_ms: int) -> Any:
    """Register ``consumer`` as the waiter exactly as a blocking get does (get.lua 'block'),
    with a crafted consumer record such as 'otherhost|1|1.0|10000|d', and return the status.
    Stands in for a consumer on another host, or one that vanishes before its BLMOVE."""
    return q._backend.script(q._get_command, (consumer, "block", "0", record, lease_ms, consumer))


def consumer_keys(r: redis.Redis, q: pressure.Queue[Any], client_id: str, kind: str) -> list[bytes]:
    """The inbox or in-flight lists ('inbox' / 'inflight') of every handle of ``client_id``:
    each handle names its own as '<client id>#<token>'."""
    prefix = q.keys.inbox_prefix if kind == "inbox" else q.keys.inflight_prefix
    return sorted(r.scan_iter(match=f"{prefix}{client_id}#*"))


def is_waiter(r: redis.Redis, q: pressure.Queue[Any], client_id: str) -> bool:
    """Whether a handle of ``client_id`` is the registered waiter."""
    return cast(bytes, r.get(q.keys.waiter) or b"").startswith(f"{client_id}#".encode())


def fake_redis() -> Any:
    """A ``fakeredis.FakeRedis`` on a server of its own whose Lua has ``redis.sha1hex``, as
    Redis's has (fakeredis 2.x leaves it out; the reliable mode's scripts use it): for fast
    semantics tests only. Skips the test where fakeredis is not installed."""
    import hashlib

    fakeredis = pytest.importorskip("fakeredis")
    server = fakeredis.FakeServer()
    conn = fakeredis.FakeRedis(server=server)
    conn.eval("return 1", 0)  # builds the server's Lua runtime
    runtime = getattr(server, "_lua_runtime", None)
    if runtime is not None:
        lua_redis = runtime.globals().redis
        if lua_redis.sha1hex is None:
            lua_redis.sha1hex = lambda text: hashlib.sha1(text).hexdigest().encode()
    return conn

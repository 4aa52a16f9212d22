"""The proxy the lost-reply tests use (tests/reply_proxy.py) loses the marked command's reply
and no other: a reply still owed to an earlier command is passed on first. (A proxy that
lost the first bytes to come back after the marked command was sent could close the
connection before the server had read that command: the test meant "it ran, its reply was
lost" and got "it never ran".)"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import redis

from pressure.testing import RedisServer

from .reply_proxy import ReplyDropper


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[ReplyDropper]:
    p = ReplyDropper(redis_server.port)
    yield p
    p.close()


def _command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _read_all(s: socket.socket) -> bytes:
    got = b""
    while data := s.recv(65536):
        got += data
    return got


def test_the_replies_before_the_marked_commands_are_passed_on(
        proxy: ReplyDropper, r: redis.Redis, prefix: str) -> None:
    key = f"{prefix}:proxied".encode()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(_command(b"BLPOP", key + b":none", b"0.3"))  # its reply comes in 0.3 s
        proxy.arm(b"marked-value")
        s.sendall(_command(b"SET", key, b"marked-value"))  # runs after it; its reply is lost
        assert _read_all(s) == b"*-1\r\n"
    assert proxy.dropped.is_set()
    assert r.get(key) == b"marked-value"


def test_inside_multi_the_reply_lost_is_execs(proxy: ReplyDropper, r: redis.Redis, prefix: str) -> None:
    key = f"{prefix}:proxied".encode()
    proxy.arm(b"marked-value")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(_command(b"MULTI") + _command(b"SET", key, b"marked-value"))
        s.sendall(_command(b"INCR", key + b":n"))
        s.sendall(_command(b"EXEC"))
        assert _read_all(s) == b"+OK\r\n+QUEUED\r\n+QUEUED\r\n"
    assert proxy.dropped.is_set()
    assert r.get(key) == b"marked-value" and r.get(key + b":n") == b"1"

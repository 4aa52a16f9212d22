"""The floor lines of ``--server-cost``: what a queue kept in Redis by Lua scripts cannot cost
less than, measured beside pressure's paths.

``floor_put.lua`` and ``floor_get.lua`` do what the protocol's non-blocking Put and Get
require, and what delivering without losing an item takes (what is taken stays in Redis until
the client has it, then the client drops it, as pressure's default mode does), in one script
of one key each, and nothing more (their headers list what they leave out). They run here as
pressure's own paths run: a producer and a consumer thread, one script call per put, per get
and per batch, the drop sent ahead of the next get and a waiting BLMOVE behind it in the same
write (as many reads of the server per message as pressure's paths and raw redis-py make). Their cost against raw
redis-py is the lowest ratio any client keeping the protocol's keys and counters, and its
items safe, reaches with Lua scripts on this server; pressure's distance from it is what its
own guarantees (consumer records, waiter leases, delayed items, ttl...) and code cost.
"""

from __future__ import annotations

import importlib.resources
import uuid
from collections.abc import Callable
from typing import Any

import redis

import pressure

from .._packing import pack_command
from ._harness import GET_TIMEOUT, Get, Put, Transport, in_two_threads

__all__ = ["ScriptFloorTransport", "floor_batch", "floor_single"]


def _source(name: str) -> str:
    return (importlib.resources.files("pressure.bench") / name).read_text("utf-8")


def _run(url: str, n: int, size: int | None, payload: bytes) -> None:
    """Move ``n`` messages through a fresh queue with the floor scripts: single items
    (``size`` None) or batches of ``size``."""
    q: pressure.Queue[bytes] = pressure.Queue(f"cost-{uuid.uuid4().hex}", url=url, serializer="bytes")
    base = q.keys.base
    client = redis.Redis.from_url(url)
    put, get = client.script_load(_source("floor_put.lua")), client.script_load(_source("floor_get.lua"))
    producer_id, consumer_id = f"floor-{uuid.uuid4().hex[:8]}", f"floor-{uuid.uuid4().hex[:8]}#1"
    total = n if size is None else n // size * size
    try:
        def produce() -> None:
            p = redis.Redis.from_url(url)
            chunk = [payload] * (size or 1)
            try:
                for _ in range(total // len(chunk)):
                    status = p.evalsha(put, 1, base, producer_id, *chunk)
                    if status < 0:  # (an unbounded queue with one producer: never)
                        raise RuntimeError(f"floor_put.lua returned {status}")
            finally:
                p.close()

        def consume() -> None:
            c = redis.Redis.from_url(url)
            conn: Any = c.connection_pool.get_connection()  # (redis-py's Connection is untyped)
            drop = pack_command("DEL", f"{base}:pressure:inflight:{consumer_id}", f"{base}:pressure:held:{consumer_id}")
            ask = pack_command("EVALSHA", get, 1, base, consumer_id, "" if size is None else size)
            # behind each get, in the same write, a BLMOVE that waits while the queue is empty
            # and takes nothing (the list's last item back to its place): the next get finds an
            # item, as pressure's blocking get, whose script, BLMOVE and script go out together
            wait = pack_command("BLMOVE", base, base, "RIGHT", "RIGHT", 1)
            got, dropping = 0, False
            try:
                while got < total:
                    conn.send_packed_command([(drop if dropping else b"") + ask + wait])
                    if dropping:
                        conn.read_response()
                    reply = conn.read_response()
                    conn.read_response()
                    dropping = isinstance(reply, (bytes, list))
                    if dropping:
                        got += 1 if isinstance(reply, bytes) else len(reply)  # dropped with the next get
                if dropping:
                    conn.send_packed_command([drop])
                    conn.read_response()
            finally:
                c.connection_pool.release(conn)
                c.close()

        in_two_threads(produce, consume)  # as pressure's paths run
    finally:
        client.close()
        q.delete()


def floor_single(payload: bytes) -> Callable[[str, int], None]:
    """Single puts and gets of ``payload`` through the floor scripts (``--server-cost``)."""
    def run(url: str, n: int) -> None:
        _run(url, n, None, payload)
    return run


def floor_batch(size: int, payload: bytes) -> Callable[[str, int], None]:
    """put_many / get_many of ``size`` items of ``payload`` through the floor scripts."""
    def run(url: str, n: int) -> None:
        _run(url, n, size, payload)
    return run


class _FloorSide:
    """One process's side of ``ScriptFloorTransport``: a connection of its own, each call a
    packed command written and its reply read, as pressure's hot path does."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.conn: Any = self.client.connection_pool.get_connection()  # (redis-py's is untyped)

    def call(self, packed: bytes, replies: int = 1) -> Any:
        self.conn.send_packed_command([packed])
        reply = None
        for _ in range(replies):
            reply = self.conn.read_response()
        return reply


class ScriptFloorTransport(Transport):
    """The payload section's script floor: the protocol's Put and Get, and keeping what is
    taken until the client has it, with ``floor_put.lua`` and ``floor_get.lua`` (one script
    call per put and per get, the payload an argument and a reply, as pressure's scripts' way
    moves items under ``NATIVE_BYTES``): the least a queue kept by Lua scripts costs, each
    message through a script of its own. A get drops what the last one took in the same
    write (``DEL`` of its in-flight entry) and, when the queue was empty, waits for an item
    (``BLMOVE <list> <list>``, which moves nothing) before asking again."""

    key = "script-floor"
    label = "script floor (floor_put.lua / floor_get.lua)"

    def __init__(self, url: str) -> None:
        self.url = url
        self.queue: pressure.Queue[bytes] | None = None
        self.shas = ("", "")

    def setup(self, ctx: Any) -> None:
        self.queue = pressure.Queue(f"floor-{uuid.uuid4().hex}", url=self.url, serializer="bytes")
        client = redis.Redis.from_url(self.url)
        try:
            self.shas = (client.script_load(_source("floor_put.lua")), client.script_load(_source("floor_get.lua")))
        finally:
            client.close()

    def _base(self) -> str:
        if self.queue is None:
            raise RuntimeError("transport not set up")
        return self.queue.keys.base

    def open_put(self) -> Put:
        side, base = _FloorSide(self.url), self._base()
        head = pack_command("EVALSHA", self.shas[0], 1, base, f"floor-{uuid.uuid4().hex[:8]}")[2:]

        def put(payload: bytes) -> object:  # (the five arguments above, and the payload)
            packed = b"*6" + head + b"$%d\r\n%b\r\n" % (len(payload), payload)
            status = side.call(packed)
            if status < 0:  # (an unbounded queue with one producer: never)
                raise RuntimeError(f"floor_put.lua returned {status}")
            return status

        return put

    def open_get(self) -> Get:
        side, base = _FloorSide(self.url), self._base()
        me = f"floor-{uuid.uuid4().hex[:8]}#1"
        drop = pack_command("DEL", f"{base}:pressure:inflight:{me}")
        ask = pack_command("EVALSHA", self.shas[1], 1, base, me, "")
        wait = pack_command("BLMOVE", base, base, "RIGHT", "RIGHT", int(GET_TIMEOUT))
        state = {"dropping": False}

        def get() -> bytes:
            while True:
                reply = side.call(drop + ask, 2) if state["dropping"] else side.call(ask)
                state["dropping"] = isinstance(reply, bytes)
                if isinstance(reply, bytes):
                    return reply.split(b":", 3)[3]  # '<seq>:1:<ms>:<item>'
                if reply != -5:
                    raise RuntimeError(f"floor_get.lua returned {reply!r}")
                if side.call(wait) is None:
                    raise TimeoutError(f"no item in {GET_TIMEOUT} s")

        return get

    def cleanup(self) -> None:
        if self.queue is not None:
            self.queue.delete()
            self.queue.disconnect()

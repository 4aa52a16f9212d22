"""Bad input gets a clear, typed error and leaves the queue exactly as it was.

Each test takes a ``snapshot`` of every key of the queue before the bad call and compares
it after, and checks the token invariants.
"""

from __future__ import annotations

import math
import pickle
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import pressure
from pressure.testing import RedisServer

from .helpers import assert_invariants, blocks, snapshot
from .reply_proxy import ReplyDropper

TIMEOUT_MESSAGE = r"^'timeout' must be a non-negative number$"


def _unchanged(r: redis.Redis, q: pressure.Queue[Any], before: dict[bytes, Any]) -> None:
    assert snapshot(r, q) == before
    assert_invariants(r, q)


def _queue_keys(r: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(r.scan_iter(match=f"{prefix}:*"))


# -- items that cannot be serialized ------------------------------------------------------

def _generator() -> Iterator[int]:
    yield 1


@pytest.fixture
def open_socket() -> Iterator[socket.socket]:
    with socket.socket() as s:
        yield s


UNSERIALIZABLE = [
    pytest.param("pickle", lambda sock: (lambda: None), id="pickle-lambda"),
    pytest.param("pickle", lambda sock: sock, id="pickle-socket"),
    pytest.param("pickle", lambda sock: _generator(), id="pickle-generator"),
    pytest.param("pickle", lambda sock: threading.Lock(), id="pickle-lock"),
    pytest.param("json", lambda sock: {1, 2}, id="json-set"),
    pytest.param("json", lambda sock: b"bytes", id="json-bytes"),
    pytest.param("json", lambda sock: {(1, 2): "tuple key"}, id="json-tuple-key"),
    pytest.param("json", lambda sock: object(), id="json-object"),
    pytest.param("bytes", lambda sock: "text", id="bytes-str"),
    pytest.param("bytes", lambda sock: 123, id="bytes-int"),
    pytest.param("bytes", lambda sock: [b"a"], id="bytes-list"),
    pytest.param("bytes", lambda sock: None, id="bytes-none"),
]


@pytest.mark.parametrize(("serializer", "make_item"), UNSERIALIZABLE)
def test_unserializable_item_is_a_serialization_error_and_changes_nothing(
        any_queue: Any, open_socket: socket.socket, serializer: str,
        make_item: Callable[[socket.socket], Any]) -> None:
    q = any_queue("ser", 2, serializer=serializer)
    kept = b"kept" if serializer == "bytes" else "kept"
    q.put(kept)
    item = make_item(open_socket)
    before = snapshot(any_queue.redis, q)
    for put in (q.put, q.put_nowait, lambda x: q.put(x, timeout=0.1), lambda x: q.put(x, block=False)):
        with pytest.raises(pressure.SerializationError, match=r"^cannot serialize ") as info:
            put(item)
        assert isinstance(info.value, ValueError) and info.value.__cause__ is not None
        assert not isinstance(info.value, pressure.DeserializationError)
        _unchanged(any_queue.redis, q, before)
    q.put(kept)  # serialization happens first: on a full queue it is still a SerializationError
    assert q.full()
    with pytest.raises(pressure.SerializationError):
        q.put_nowait(item)
    assert [q.get_nowait(), q.get_nowait()] == [kept, kept]


class _Raising:
    def dumps(self, obj: Any) -> bytes:
        raise RuntimeError("dumps exploded")

    def loads(self, data: bytes) -> Any:
        return data


class _Returning:
    def __init__(self, value: Any) -> None:
        self.value = value

    def dumps(self, obj: Any) -> Any:
        return self.value

    def loads(self, data: bytes) -> Any:
        return data


@pytest.mark.parametrize(
    ("serializer", "message"),
    [
        (_Raising(), r"^cannot serialize str item: dumps exploded$"),
        (_Returning("text"), r"^serializer returned str, not bytes$"),
        (_Returning(None), r"^serializer returned NoneType, not bytes$"),
        (_Returning(42), r"^serializer returned int, not bytes$"),
    ],
    ids=["raises", "returns-str", "returns-none", "returns-int"],
)
def test_custom_serializer_failures(any_queue: Any, serializer: Any, message: str) -> None:
    q = any_queue("custom", serializer=serializer)
    before = snapshot(any_queue.redis, q)
    with pytest.raises(pressure.SerializationError, match=message):
        q.put("item")
    _unchanged(any_queue.redis, q, before)
    assert q.empty()


def test_custom_serializer_may_return_bytes_like(any_queue: Any) -> None:
    q = any_queue("bytes-like", serializer=_Returning(bytearray(b"raw")))
    q.put("anything")
    assert any_queue.redis.lrange(q.keys.base, 0, -1) == [b"raw"]
    assert q.get() == b"raw"


def test_serializer_spec_errors(any_queue: Any) -> None:
    with pytest.raises(ValueError, match=r"^unknown serializer 'yaml'"):
        any_queue("spec", serializer="yaml")
    for bad in (None, object(), 42):
        with pytest.raises(TypeError, match=r"^serializer must be 'pickle', 'json', 'orjson', 'msgpack', 'bytes' or an object"):
            any_queue("spec", serializer=bad)


# -- items larger than Redis accepts --------------------------------------------------------

@pytest.fixture
def small_bulk_server() -> Iterator[RedisServer]:
    """A private server whose proto-max-bulk-len is 1 MB (the smallest it allows)."""
    with RedisServer(extra_args=("--proto-max-bulk-len", "1mb")) as server:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("proto-max-bulk-len") == {"proto-max-bulk-len": "1048576"}
        client.close()
        yield server


def _dump_all(r: redis.Redis, prefix: str) -> dict[bytes, Any]:
    """Every key under the prefix, as DUMP gives it (the sweep marker and consumer records too)."""
    return {key: r.dump(key) for key in sorted(r.scan_iter(match=f"{prefix}:*"))}


def _config_gets(r: redis.Redis) -> int:
    stats = r.info("commandstats")
    # Redis 7+ and Valkey count CONFIG GET apart; Redis 6.2 counts every CONFIG subcommand as one
    return int(stats.get("cmdstat_config|get", stats.get("cmdstat_config", {})).get("calls", 0))


@pytest.mark.parametrize("size", [2_000_000, 8_000_000], ids=["2MB", "8MB"])
@pytest.mark.parametrize("serializer", ["bytes", "pickle"])
def test_item_larger_than_redis_accepts(small_bulk_server: RedisServer, prefix: str, serializer: str,
                                        size: int) -> None:
    r = redis.Redis.from_url(small_bulk_server.url)
    calls = _config_gets(r)
    q: pressure.Queue[Any] = pressure.Queue("big", 3, url=small_bulk_server.url, prefix=prefix,
                                            serializer=serializer)
    try:
        q.put(b"first")
        before = _dump_all(r, prefix)
        huge = b"x" * size
        puts = (q.put, q.put_nowait, lambda x: q.put(x, timeout=1), lambda x: q.put_many([b"a", x, b"b"]))
        for put in puts:
            with pytest.raises(pressure.ItemTooLarge,
                               match=r" bytes serialized, more than the 1048576 the server accepts "
                                     r"\(its proto-max-bulk-len\): nothing was put$") as info:
                put(huge)
            # checked before sending: a ValueError (bad input), not a failure of the server
            assert isinstance(info.value, ValueError) and not isinstance(info.value, pressure.BackendError)
            assert info.value.size >= size and info.value.limit == 1048576
            assert _dump_all(r, prefix) == before
        assert _config_gets(r) == calls + 1  # the limit is read once per handle
        q.put(b"second")  # the handle keeps working for normal items
        assert q.get_nowait() == b"first"
        assert q.get(timeout=5) == b"second"
        q.put(b"y" * 1_000_000)  # just under the limit is fine
        assert len(q.get(timeout=5)) == 1_000_000
        assert_invariants(r, q)
    finally:
        q.disconnect()
        r.close()


def test_put_many_larger_in_all_than_redis_accepts_goes_in_parts(small_bulk_server: RedisServer,
                                                                 prefix: str) -> None:
    """Each item fits, the batch does not: put_many sends it in several round trips."""
    r = redis.Redis.from_url(small_bulk_server.url)
    q: pressure.Queue[bytes] = pressure.Queue("big-batch", url=small_bulk_server.url, prefix=prefix,
                                              serializer="bytes")
    items = [bytes([65 + i]) * 400_000 for i in range(6)]  # 2.4 MB in all
    q.put_many(items)
    assert q.get_many(10) == items
    q.put_many([b"small"] * 3)
    assert q.get_many(10) == [b"small"] * 3
    assert_invariants(r, q)
    q.disconnect()
    r.close()


def test_small_items_never_read_the_limit(small_bulk_server: RedisServer, prefix: str) -> None:
    r = redis.Redis.from_url(small_bulk_server.url)
    calls = _config_gets(r)
    q: pressure.Queue[bytes] = pressure.Queue("small", url=small_bulk_server.url, prefix=prefix,
                                              serializer="bytes")
    q.put(b"x" * 1000)
    q.put_many([b"y" * 1000] * 100)
    assert _config_gets(r) == calls  # no CONFIG GET on the way of ordinary items
    q.disconnect()
    r.close()


@pytest.mark.parametrize("through", ["direct", "proxy"])
def test_item_size_without_config_permission_assumes_the_default(small_bulk_server: RedisServer,
                                                                 prefix: str, through: str) -> None:
    """A user that may not run CONFIG: the limit is taken to be Redis's default (512 MiB); an
    item over the real limit is then refused by the server, still as a known outcome. Through a
    proxy that takes in the whole write before the server reads it, the server answers the
    transaction's first replies, then 'Protocol error' and closes the connection: the replies
    still owed after it are never read (redis-py raised AttributeError on the closed one)."""
    r = redis.Redis.from_url(small_bulk_server.url)
    r.acl_setuser("no-config", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
                  commands=["+@all", "-config"])
    proxy = ReplyDropper(small_bulk_server.port) if through == "proxy" else None
    port = small_bulk_server.port if proxy is None else proxy.port
    q: pressure.Queue[bytes] = pressure.Queue(
        "no-config", url=f"redis://no-config:pw@127.0.0.1:{port}/0", prefix=prefix, serializer="bytes")
    q.put(b"first")
    before = _dump_all(r, prefix)
    assert q._backend.bulk_limit() == 512 * 1024 * 1024
    with pytest.raises(pressure.BackendError) as info:
        q.put(b"x" * 2_000_000)
    assert not isinstance(info.value, pressure.OutcomeUnknown)
    if proxy is not None:  # (directly, the server may close the connection while it is sent)
        assert "larger than it accepts" in str(info.value)
    assert _dump_all(r, prefix) == before
    assert q.get_nowait() == b"first"
    q.disconnect()
    r.close()
    if proxy is not None:
        proxy.close()


# -- a payload another client wrote that does not load ----------------------------------------

GARBAGE = b"\x80\x05not a pickle \x00\xff"


def _spec_push(r: redis.Redis, q: pressure.Queue[Any], payload: bytes) -> None:
    """Push a payload as a plain spec producer would: the item and the producer stats."""
    k = q.keys
    r.set(k.producer, "some-other-client")
    r.lpush(k.base, payload)
    r.incr(k.produced_messages)
    r.incrby(k.produced_bytes, len(payload))


@pytest.mark.parametrize("how", ["get", "get_nowait", "get_timeout", "reliable_get", "reliable_receive"])
def test_undeserializable_payload_goes_to_the_dead_letters(make_queue: Any, r: redis.Redis, how: str) -> None:
    q = make_queue("garbage", reliable=how.startswith("reliable"))
    _spec_push(r, q, GARBAGE)
    q.put("next")
    call = {"get": q.get, "get_nowait": q.get_nowait, "get_timeout": lambda: q.get(timeout=5),
            "reliable_get": q.get_nowait, "reliable_receive": lambda: q.receive(block=False)}[how]
    with pytest.raises(pressure.DeserializationError) as info:
        call()
    err = info.value
    assert err.payload == GARBAGE
    assert isinstance(err, pressure.SerializationError) and isinstance(err, ValueError)
    assert str(err).startswith(f"cannot deserialize a {len(GARBAGE)}-byte payload")
    # not lost: in the dead-letter list, and nowhere else
    [dead] = q.dead_letters()
    assert (dead.payload, dead.deliveries) == (GARBAGE, 1)
    assert q.in_flight() == []
    assert q.peek(5) == ["next"] and q.qsize() == 1
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages, s.size) == (2, 1, 1)
    assert_invariants(r, q)
    got = call()
    assert (got.item if how == "reliable_receive" else got) == "next"  # the next item is fine
    assert q.kick() == 1  # back to the head of the queue: it fails the same way, and is kept again
    with pytest.raises(pressure.DeserializationError):
        q.get_nowait()
    assert [d.payload for d in q.dead_letters()] == [GARBAGE]
    assert_invariants(r, q)


# -- keys of the wrong Redis type ---------------------------------------------------------------

def _ops(q: pressure.Queue[Any], url: str) -> dict[str, Callable[[], Any]]:
    """Operations that read the corrupted key, by name."""

    def reliable_receive() -> Any:
        other: pressure.Queue[Any] = pressure.Queue(q.name, url=url, prefix=q.prefix, reliable=True)
        try:
            return other.receive(block=False)
        finally:
            other.disconnect()

    return {
        "put": lambda: q.put("new"),
        "put_nowait": lambda: q.put_nowait("new"),
        "put_timeout": lambda: q.put("new", timeout=0.1),
        "get_nowait": q.get_nowait,
        "get_timeout": lambda: q.get(timeout=0.1),
        "reliable_receive": reliable_receive,
        "qsize": q.qsize,
        "empty": q.empty,
        "full": q.full,
        "maxsize": lambda: q.maxsize,
        "closed": lambda: q.closed,
        "statistics": q.statistics,
        "peek": q.peek,
        "close": q.close,
        "shutdown": q.shutdown,
        "attach": lambda: pressure.Queue(q.name, url=url, prefix=q.prefix).disconnect(),
        "repair": q.repair,
        "set_maxsize": lambda: setattr(q, "maxsize", 5),
        "delete": q.delete,
    }


def _corrupted(make_queue: Any, r: redis.Redis,
               key_of: Callable[[pressure.QueueKeys], str]) -> pressure.Queue[Any]:
    """A queue holding one item, whose key ``key_of`` someone overwrote with a string."""
    q: pressure.Queue[Any] = make_queue("wrongtype", 3)
    q.put("kept")
    key = key_of(q.keys)
    r.delete(key)
    r.set(key, "not a list")
    return q


WRONG_TYPE_CASES = [
    *(("list", op) for op in ("put", "put_nowait", "put_timeout", "get_nowait", "get_timeout",
                              "reliable_receive", "qsize", "empty", "full", "maxsize", "closed",
                              "statistics", "peek", "set_maxsize")),
    *(("producer_free", op) for op in ("put", "put_nowait", "put_timeout", "close", "shutdown",
                                       "delete")),
    *(("consumer_free", op) for op in ("get_nowait", "get_timeout", "reliable_receive", "delete")),
    *(("not_full", op) for op in ("put", "put_nowait", "put_timeout", "get_nowait", "get_timeout",
                                  "set_maxsize", "delete")),
]
KEY_OF: dict[str, Callable[[pressure.QueueKeys], str]] = {
    "list": lambda k: k.base,
    "producer_free": lambda k: k.producer_free,
    "consumer_free": lambda k: k.consumer_free,
    "not_full": lambda k: k.not_full,
}


@pytest.mark.parametrize(("key", "op"), WRONG_TYPE_CASES, ids=[f"{k}-{o}" for k, o in WRONG_TYPE_CASES])
def test_wrong_type_key_is_a_protocol_error_and_changes_nothing(
        make_queue: Any, r: redis.Redis, url: str, key: str, op: str) -> None:
    """Redis does not roll back a script's writes when a later command in it fails, so every
    script must read (and so type-check) its keys before its first write."""
    q = _corrupted(make_queue, r, KEY_OF[key])
    before = snapshot(r, q)
    with pytest.raises(pressure.ProtocolError, match="WRONGTYPE"):
        _ops(q, url)[op]()
    assert snapshot(r, q) == before


def test_shutdown_immediate_on_a_wrong_type_list_keeps_the_tokens(make_queue: Any, r: redis.Redis) -> None:
    """shutdown(immediate=True) is close() then a drain: the close happens, the drain is refused,
    and the consumer token is not lost on the way (drain.lua used to RPOP it first)."""
    q = _corrupted(make_queue, r, KEY_OF["list"])
    with pytest.raises(pressure.ProtocolError, match="WRONGTYPE"):
        q.shutdown(immediate=True)
    assert r.llen(q.keys.consumer_free) == 1 and r.llen(q.keys.producer_free) == 1
    assert r.get(q.keys.base) == b"not a list" and not r.exists(q.keys.discarded)


def test_close_with_a_wrong_type_not_full_changes_nothing(make_queue: Any, r: redis.Redis, url: str) -> None:
    q = _corrupted(make_queue, r, KEY_OF["not_full"])
    before = snapshot(r, q)
    with pytest.raises(pressure.ProtocolError, match="WRONGTYPE"):
        q.close()
    assert snapshot(r, q) == before


BAD_BOUNDS = ["abc", "-3", "2.5", "", "1e3", "0x10", "3.0", " 3", "+3", "1" * 16]
BOUND_OPS = ["put", "put_nowait", "put_timeout", "get_nowait", "get_timeout", "reliable_receive",
             "qsize", "empty", "full", "maxsize", "closed", "statistics", "attach", "repair"]


@pytest.mark.parametrize(("raw", "op"), [pytest.param(raw, op, id=f"{raw or 'empty'}-{op}")
                                         for raw in BAD_BOUNDS for op in BOUND_OPS])
def test_bad_bound_is_a_protocol_error_naming_it_and_changes_nothing(
        make_queue: Any, r: redis.Redis, url: str, raw: str, op: str) -> None:
    """:bound is ASCII digits (at most 15), for the scripts and the client alike: '1e3', '0x10'
    or '3.0' used to pass Lua's tonumber in put() while qsize() refused them."""
    q = make_queue("badbound", 3)
    q.put("kept")
    r.set(q.keys.bound, raw)
    before = snapshot(r, q)
    with pytest.raises(pressure.ProtocolError) as info:
        _ops(q, url)[op]()
    text = str(info.value)
    assert q.keys.bound in text and raw in text, text  # names the key and what it holds
    assert snapshot(r, q) == before


def test_setting_maxsize_repairs_a_bad_bound(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("fixbound", 3)
    q.put("kept")
    r.set(q.keys.bound, "abc")
    with pytest.raises(pressure.ProtocolError):
        q.put("x")
    q.maxsize = 3
    q.put("new")
    assert [q.get(), q.get()] == ["kept", "new"]
    assert_invariants(r, q)


# A counter that is not an integer ('someone SET :stats:produced_messages abc')

def _bad_counter(make_queue: Any, r: redis.Redis) -> pressure.Queue[Any]:
    q: pressure.Queue[Any] = make_queue("badcounter", 3)
    q.put("kept")
    r.set(q.keys.produced_messages, "abc")
    return q


@pytest.mark.parametrize("op", [
    pytest.param(lambda q: q.put("x"), id="put"),
    pytest.param(lambda q: q.task_done(), id="task_done"),
    pytest.param(lambda q: q.unfinished_tasks, id="unfinished_tasks"),
    pytest.param(lambda q: q.statistics(), id="statistics"),
])
def test_non_integer_counter_is_a_protocol_error_and_changes_nothing(
        make_queue: Any, r: redis.Redis, op: Callable[[pressure.Queue[Any]], Any]) -> None:
    q = _bad_counter(make_queue, r)
    before = snapshot(r, q)
    with pytest.raises(pressure.ProtocolError, match="produced_messages"):
        op(q)
    assert snapshot(r, q) == before


def test_non_integer_counter_fails_with_a_typed_error(make_queue: Any, r: redis.Redis) -> None:
    """What holds today for the same corruption: a PressureError (no bare redis or Lua error
    escapes from the hot paths), and the queue is unchanged."""
    q = _bad_counter(make_queue, r)
    before = snapshot(r, q)
    for op in (lambda: q.put("x"), q.task_done, lambda: q.unfinished_tasks):
        with pytest.raises(pressure.PressureError):
            op()
        assert snapshot(r, q) == before
    assert q.get_nowait() == "kept"  # the consumer side does not read that counter


def test_shutdown_immediate_with_a_non_integer_counter_discards_nothing(make_queue: Any,
                                                                        r: redis.Redis) -> None:
    q = _bad_counter(make_queue, r)
    with pytest.raises(pressure.ProtocolError):
        q.shutdown(immediate=True)
    assert r.llen(q.keys.base) == 1 and not r.exists(q.keys.discarded)


# -- queue names -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["with space", "a:b:c", "{tag}", "}{", "ünïcødé ✓", "tab\tnew\nline",
                                  "nul\x00byte", "x" * 10_000, ":", "*?[glob]"])
def test_unusual_names_work_and_name_the_keys_exactly(make_queue: Any, r: redis.Redis, prefix: str,
                                                       name: str) -> None:
    q = make_queue(name, 2)
    assert q.name == name and q.keys.base == f"{prefix}:{name}"
    q.put(name)
    assert r.llen(f"{prefix}:{name}") == 1 and r.get(f"{prefix}:{name}:bound") == b"2"
    assert make_queue(name).get_nowait() == name
    assert_invariants(r, q)


@pytest.mark.parametrize(("name", "error", "message"), [
    ("", ValueError, r"^queue name must not be empty$"),
    (b"bytes", TypeError, r"^queue name must be a str, not bytes$"),
    (["q"], TypeError, r"^queue name must be a str, not list$"),
    (True, TypeError, r"^queue name must be a str, not bool$"),
])
def test_bad_names_are_refused_before_touching_redis(r: redis.Redis, url: str, prefix: str, name: Any,
                                                     error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        pressure.Queue(name, url=url, prefix=prefix)
    assert _queue_keys(r, prefix) == []


def test_an_int_name_is_a_maxsize_only_when_no_maxsize_follows(r: redis.Redis, url: str, prefix: str) -> None:
    """``queue.Queue(10)`` stays valid after ``import pressure as queue``; ``Queue(42, 5)`` is no such call."""
    with pytest.raises(TypeError, match=r"^queue name must be a str, not int$"):
        pressure.Queue(42, 5, url=url, prefix=prefix)
    assert _queue_keys(r, prefix) == []
    q: pressure.Queue[Any] = pressure.Queue(10, url=url, prefix=prefix)
    assert q.maxsize == 10 and q.name.startswith("{anon-")
    q.delete()
    q.disconnect()


def test_bad_prefix_and_client_id(r: redis.Redis, url: str, prefix: str) -> None:
    for bad in ("", 42):
        with pytest.raises(ValueError, match=r"^prefix must be a non-empty string$"):
            pressure.Queue("q", url=url, prefix=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^client_id must be a non-empty string$"):
            pressure.Queue("q", url=url, prefix=prefix, client_id=bad)  # type: ignore[arg-type]
    assert _queue_keys(r, prefix) == []


def _handle_makers() -> list[Any]:
    import pressure.multiprocessing as pmp
    from pressure.executor.worker import WorkerPool
    from pressure.spark.log import QueueLog

    return [
        pytest.param(lambda prefix, **kw: pressure.Queue("q", 3, prefix=prefix, **kw), id="Queue"),
        pytest.param(lambda prefix, **kw: pressure.LifoQueue("q", prefix=prefix, **kw), id="LifoQueue"),
        pytest.param(lambda prefix, **kw: pressure.SimpleQueue("q", prefix=prefix, **kw), id="SimpleQueue"),
        pytest.param(lambda prefix, **kw: pmp.Queue(name="q", prefix=prefix, **kw), id="mp.Queue"),
        pytest.param(lambda prefix, **kw: pmp.JoinableQueue(name="q", prefix=prefix, **kw),
                     id="mp.JoinableQueue"),
        pytest.param(lambda prefix, **kw: pmp.SimpleQueue(name="q", prefix=prefix, **kw), id="mp.SimpleQueue"),
        pytest.param(lambda prefix, **kw: pressure.Executor("q", prefix=prefix, max_workers=1, **kw),
                     id="Executor"),
        pytest.param(lambda prefix, **kw: QueueLog("q", "g", prefix=prefix, **kw), id="QueueLog"),
        pytest.param(lambda prefix, url=None: WorkerPool("q", prefix=prefix, url=url), id="WorkerPool"),
    ]


@pytest.mark.parametrize("make", _handle_makers())
def test_url_or_connection_of_the_wrong_type_is_a_type_error_naming_it(
        request: pytest.FixtureRequest, r: redis.Redis, url: str, prefix: str, make: Callable[..., Any]) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"url": 5}, r"^url must be a str, not int$"),
        ({"url": url.encode()}, r"^url must be a str, not bytes$"),
        ({"connection": "x"}, r"^connection must be a redis.Redis or redis.cluster.RedisCluster client, not str$"),
        ({"connection": redis.ConnectionPool.from_url(url)},
         r"^connection must be a redis.Redis or redis.cluster.RedisCluster client, not ConnectionPool$"),
    ]
    for kwargs, message in cases:
        if "connection" in kwargs and "WorkerPool" in request.node.name:
            continue  # it takes a url only
        with pytest.raises(TypeError, match=message):
            make(prefix, **kwargs)
    assert _queue_keys(r, prefix) == []


# -- sizes -----------------------------------------------------------------------------

@pytest.mark.parametrize("maxsize", [-1, -100, 0, None])
def test_zero_negative_or_no_maxsize_is_unbounded(any_queue: Any, maxsize: int | None) -> None:
    q = any_queue("unbounded", maxsize)
    assert q.maxsize == 0 and any_queue.redis.get(q.keys.bound) == b"0"
    for i in range(50):
        q.put_nowait(i)
    assert not q.full() and q.qsize() == 50


def test_integral_floats_are_integers(any_queue: Any) -> None:
    assert any_queue("float", 3.0).maxsize == 3
    q = any_queue("float")
    q.maxsize = 2.0
    assert q.maxsize == 2 and any_queue.redis.get(q.keys.bound) == b"2"


BAD_MAXSIZES = [
    (2.5, ValueError, r"^maxsize must be an integer, not 2\.5$"),
    (math.nan, ValueError, r"^maxsize must be an integer, not nan$"),
    (math.inf, ValueError, r"^maxsize must be an integer, not inf$"),
    (-math.inf, ValueError, r"^maxsize must be an integer, not -inf$"),
    ("3", TypeError, r"^maxsize must be an integer, not str$"),
    (True, TypeError, r"^maxsize must be an integer, not bool$"),
    (b"3", TypeError, r"^maxsize must be an integer, not bytes$"),
]


@pytest.mark.parametrize(("maxsize", "error", "message"), BAD_MAXSIZES)
def test_bad_maxsize_is_refused_and_changes_nothing(any_queue: Any, prefix: str, maxsize: Any,
                                                   error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        any_queue("bad", maxsize)
    assert _queue_keys(any_queue.redis, prefix) == []  # refused before creating anything
    q = any_queue("bad", 3)
    q.put(1)
    before = snapshot(any_queue.redis, q)
    with pytest.raises(error, match=message):
        q.maxsize = maxsize
    _unchanged(any_queue.redis, q, before)


def test_maxsize_beyond_what_the_scripts_read_exactly_is_refused(make_queue: Any, r: redis.Redis,
                                                                  prefix: str) -> None:
    """The scripts read :bound as a Lua number: 15 digits at most (10**400 used to become inf
    there, so every put raised ProtocolError)."""
    for huge in (10**15, 10**400):
        with pytest.raises(ValueError, match=r"^maxsize must be at most 999999999999999, not "):
            make_queue("huge", huge)
    assert _queue_keys(r, prefix) == []
    q = make_queue("huge", 10**15 - 1)
    q.put(1)
    assert q.maxsize == 10**15 - 1 and not q.full() and q.get() == 1
    with pytest.raises(ValueError, match=r"^maxsize must be at most 999999999999999, not "):
        q.maxsize = 10**15
    assert q.maxsize == 10**15 - 1


def test_peek_zero_is_empty(make_queue: Any) -> None:
    q = make_queue("peek0")
    for i in range(3):
        q.put(i)
    assert q.peek(0) == [] and q.peek(2) == [0, 1]


@pytest.mark.parametrize(("call", "error", "message"), [
    pytest.param(lambda q: q.peek(-1), ValueError, r"^n must be non-negative, not -1$", id="peek-negative"),
    pytest.param(lambda q: q.peek(2.5), TypeError, r"^n must be an integer, not float$", id="peek-float"),
    pytest.param(lambda q: q.peek("2"), TypeError, r"^n must be an integer, not str$", id="peek-str"),
    pytest.param(lambda q: q.peek(True), TypeError, r"^n must be an integer, not bool$", id="peek-bool"),
    pytest.param(lambda q: q.kick(-1), ValueError, r"^n must be non-negative, not -1$", id="kick-negative"),
    pytest.param(lambda q: q.kick(2.5), TypeError, r"^n must be an integer, not float$", id="kick-float"),
    pytest.param(lambda q: q.kick("x"), TypeError, r"^n must be an integer, not str$", id="kick-str"),
])
def test_bad_counts_for_peek_and_kick(make_queue: Any, r: redis.Redis, call: Callable[[Any], Any],
                                      error: type[Exception], message: str) -> None:
    """peek(-1) used to return all but the next item, peek(2.5) and kick('x') came back from
    Redis/Lua as BackendError, kick(-1) meant all."""
    q = make_queue("counts", reliable=True, max_deliveries=1)
    for i in range(3):
        q.put(i)
    for _ in range(2):
        q.receive(block=False).release()  # two dead letters
    before = snapshot(r, q)
    with pytest.raises(error, match=message):
        call(q)
    _unchanged(r, q, before)


# -- timeouts ---------------------------------------------------------------------------

@pytest.mark.parametrize("timeout", [-1, -0.001, -math.inf])
def test_negative_timeouts_mirror_queue_queue(any_queue: Any, timeout: float) -> None:
    bounded = any_queue("neg", 3)
    bounded.put("kept")
    before = snapshot(any_queue.redis, bounded)
    with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
        bounded.put("x", timeout=timeout)  # a blocking put on a bounded queue
    with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
        bounded.get(timeout=timeout)  # any blocking get, even with an item present
    _unchanged(any_queue.redis, bounded, before)
    assert bounded.put("y", block=False, timeout=timeout) is None  # block=False ignores it
    assert bounded.get(block=False, timeout=timeout) == "kept"
    unbounded = any_queue("neg-unbounded")
    unbounded.put("x", timeout=timeout)  # queue.Queue checks only bounded puts
    assert unbounded.qsize() == 1


def test_nan_timeout_is_a_value_error(any_queue: Any) -> None:
    for q in (any_queue("nan", 3), any_queue("nan-unbounded")):
        q.put("kept")
        before = snapshot(any_queue.redis, q)
        with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
            q.put("x", timeout=math.nan)
        with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
            q.get(timeout=math.nan)
        _unchanged(any_queue.redis, q, before)


@pytest.mark.parametrize("timeout", [-1, -0.001, -math.inf])
@pytest.mark.parametrize("reliable", [False, True], ids=["default", "reliable"])
def test_negative_timeout_get_changes_no_key(make_queue: Any, r: redis.Redis, prefix: str, reliable: bool,
                                             timeout: float) -> None:
    """Refused before anything is written (one read-only round trip, for queue.Queue's order:
    ShutDown first): no consumer record, no wake-up entry in an inbox or in-flight list, no
    sweep marker, nothing acknowledged; every key byte-identical."""
    q = make_queue("neg-get", 3, reliable=reliable)
    for kept in ([], ["kept"]):  # empty (a get would wait) and not
        for item in kept:
            q.put(item)
        before = _dump_all(r, prefix)
        for call in (lambda: q.get(timeout=timeout), lambda: q.receive(timeout=timeout),
                     lambda: q.get_many(2, timeout=timeout)):
            with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
                call()
            assert _dump_all(r, prefix) == before
    assert q.get(block=False, timeout=timeout) == "kept"  # block=False ignores the timeout


@pytest.mark.parametrize("timeout", ["1", b"1", [1]])
def test_non_numeric_timeout_is_a_type_error(any_queue: Any, timeout: Any) -> None:
    q = any_queue("typed", 3)
    q.put("kept")
    before = snapshot(any_queue.redis, q)
    message = rf"^'timeout' must be a number or None, not {type(timeout).__name__}$"
    with pytest.raises(TypeError, match=message):
        q.put("x", timeout=timeout)
    with pytest.raises(TypeError, match=message):
        q.get(timeout=timeout)
    _unchanged(any_queue.redis, q, before)


def test_infinite_timeout_waits_forever(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("inf", 2)
    q.put("present", timeout=math.inf)
    assert q.get(timeout=math.inf) == "present"  # with an item present: at once
    other = make_queue("inf")
    assert blocks(lambda: q.get(timeout=math.inf), lambda: other.put("later")) == "later"
    q.put(1)
    q.put(2)
    blocks(lambda: q.put(3, timeout=math.inf), other.get)  # full: waits for room
    assert [q.get(), q.get()] == [2, 3]
    assert_invariants(r, q)


# -- options ----------------------------------------------------------------------------

BAD_SECONDS = [
    (0, ValueError), (-1, ValueError), (math.nan, ValueError), (math.inf, ValueError),
    ("1", TypeError), (True, TypeError), (None, TypeError),
]


@pytest.mark.parametrize("option", ["visibility_timeout", "lease"])
@pytest.mark.parametrize(("value", "error"), BAD_SECONDS)
def test_bad_seconds_options(r: redis.Redis, url: str, prefix: str, option: str, value: Any,
                             error: type[Exception]) -> None:
    if error is ValueError:
        message = rf"^{option} must be a positive, finite number of seconds.*, not {value!r}$"
    else:
        message = rf"^{option} must be a number of seconds, not {type(value).__name__}$"
    with pytest.raises(error, match=message):
        pressure.Queue("opts", url=url, prefix=prefix, reliable=True, **{option: value})
    assert _queue_keys(r, prefix) == []


def test_lease_under_a_second_is_refused(r: redis.Redis, url: str, prefix: str) -> None:
    message = r"^lease must be a positive, finite number of seconds of at least 1, not 0\.5$"
    with pytest.raises(ValueError, match=message):
        pressure.Queue("opts", url=url, prefix=prefix, lease=0.5)
    assert _queue_keys(r, prefix) == []


def test_tiny_visibility_timeout_is_refused_or_honoured(make_queue: Any) -> None:
    """0.0001 s used to be stored as int(0.1) = 0 ms, which the sweep reads as 'never expires'."""
    try:
        slow = make_queue("tiny", reliable=True, visibility_timeout=0.0001, client_id="slow")
    except ValueError:
        return  # refused up front: fine
    slow.put("job")
    assert slow.get_nowait() == "job"  # never acknowledged
    time.sleep(1.2)  # the sweep runs at most once a second
    other = make_queue("tiny", reliable=True, client_id="other")
    assert other.get(timeout=3) == "job"


@pytest.mark.parametrize(("value", "error", "message"), [
    (0, ValueError, r"^max_deliveries must be at least 1, not 0$"),
    (-1, ValueError, r"^max_deliveries must be at least 1, not -1$"),
    (2.5, TypeError, r"^max_deliveries must be an integer or None, not float$"),
    ("3", TypeError, r"^max_deliveries must be an integer or None, not str$"),
    (True, TypeError, r"^max_deliveries must be an integer or None, not bool$"),
])
def test_bad_max_deliveries(r: redis.Redis, url: str, prefix: str, value: Any, error: type[Exception],
                            message: str) -> None:
    with pytest.raises(error, match=message):
        pressure.Queue("opts", url=url, prefix=prefix, reliable=True, max_deliveries=value)
    assert _queue_keys(r, prefix) == []


def test_good_option_edges_are_accepted(make_queue: Any) -> None:
    q = make_queue("edges", reliable=True, visibility_timeout=0.5, lease=1, max_deliveries=None)
    q.put("x")
    d = q.receive(block=False)
    assert d.release() and q.receive(block=False).deliveries == 2  # None: never dead-lettered


def test_deserialization_error_pickles_with_its_payload(make_queue: Any, r: redis.Redis) -> None:
    """DeserializationError pickles with its payload (it crosses processes)."""
    q = make_queue("err-pickle")
    _spec_push(r, q, GARBAGE)
    with pytest.raises(pressure.DeserializationError) as info:
        q.get_nowait()
    clone = pickle.loads(pickle.dumps(info.value))
    assert type(clone) is pressure.DeserializationError and clone.payload == GARBAGE


STRING_KEY_CASES = [*(("put", k) for k in ("bound", "produced_messages", "produced_bytes", "producer")),
                    *(("get_nowait", k) for k in ("bound", "consumer")),
                    *(("task_done", k) for k in ("produced_messages", "tasks_done"))]


@pytest.mark.parametrize(("op", "key"), STRING_KEY_CASES, ids=[f"{o}-{k}" for o, k in STRING_KEY_CASES])
def test_string_key_of_another_type_is_a_protocol_error_and_changes_nothing(
        make_queue: Any, r: redis.Redis, op: str, key: str) -> None:
    """put.lua, get.lua and ack.lua read their string keys with one MGET, which answers a key
    of another type as if it were missing: such a value is read again with GET, so a wrong type
    still fails before the first write, as it did when each key had a GET of its own."""
    q: pressure.Queue[Any] = make_queue("wrongstring", 3)
    q.put("kept")
    q.put("more")
    if op == "task_done":
        q.get()
    name = getattr(q.keys, key)
    r.delete(name)
    r.rpush(name, "not a string")
    before = snapshot(r, q)
    with pytest.raises(pressure.ProtocolError, match="WRONGTYPE"):
        {"put": lambda: q.put("new"), "get_nowait": q.get_nowait, "task_done": q.task_done}[op]()
    assert snapshot(r, q) == before

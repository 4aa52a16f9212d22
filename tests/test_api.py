"""queue.Queue semantics that never block: on a real server and on fakeredis."""

from __future__ import annotations

import math
import pickle
import queue as stdlib_queue
from typing import Any

import pytest

import pressure

from .helpers import assert_invariants, snapshot

TIMEOUT_MESSAGE = r"^'timeout' must be a non-negative number$"


def test_fifo_order_and_sizes(any_queue: Any) -> None:
    q = any_queue("fifo", 3)
    assert q.empty() and not q.full() and q.qsize() == 0
    for item in ("a", {"b": 1}, [3]):
        q.put(item)
    assert q.qsize() == 3 and q.full() and not q.empty()
    assert [q.get(), q.get_nowait(), q.get()] == ["a", {"b": 1}, [3]]
    assert q.empty()


def test_nowait_raises_full_and_empty_as_stdlib_subclasses(any_queue: Any) -> None:
    q = any_queue("bounded", 1)
    with pytest.raises(stdlib_queue.Empty):
        q.get_nowait()
    q.put_nowait(1)
    with pytest.raises(stdlib_queue.Full):
        q.put_nowait(2)
    with pytest.raises(pressure.Full):
        q.put(2, block=False, timeout=-5)  # block=False ignores the timeout
    with pytest.raises(pressure.Empty):
        any_queue("other").get(block=False, timeout=-1)
    assert q.get(block=False) == 1


def test_unbounded_never_full(any_queue: Any) -> None:
    q = any_queue("unbounded")
    for i in range(500):
        q.put_nowait(i)
    assert q.maxsize == 0 and not q.full() and q.qsize() == 500


@pytest.mark.parametrize("maxsize", [0, -1, -100])
def test_maxsize_zero_or_negative_is_unbounded(any_queue: Any, maxsize: int) -> None:
    q = any_queue("neg", maxsize)
    assert q.maxsize == 0
    for i in range(20):
        q.put_nowait(i)


def test_negative_timeout_mirrors_queue_queue(any_queue: Any) -> None:
    bounded = any_queue("b", 5)
    with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
        bounded.put(1, timeout=-1)
    assert bounded.qsize() == 0
    any_queue("u").put(1, timeout=-1)  # queue.Queue checks only bounded queues
    bounded.put(1)
    with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
        bounded.get(timeout=-0.5)  # even with an item present
    assert bounded.qsize() == 1
    with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
        bounded.get(timeout=math.nan)
    with pytest.raises(TypeError):
        bounded.get(timeout="1")  # type: ignore[arg-type]
    closed = any_queue("c")
    closed.close()
    with pytest.raises(pressure.ShutDown):  # ShutDown is checked first, as in queue.Queue
        closed.get(timeout=-1)


def test_stdlib_reference_agrees_on_negative_timeouts() -> None:
    ref: stdlib_queue.Queue[int] = stdlib_queue.Queue(5)
    with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
        ref.put(1, timeout=-1)
    stdlib_queue.Queue().put(1, timeout=-1)


def test_maxsize_reads_and_writes_the_stored_bound(any_queue: Any) -> None:
    q = any_queue("m", 2)
    other = any_queue("m")
    assert other.maxsize == 2
    for i in range(3):
        q.maxsize = 0
        q.put(i)
    other.maxsize = 2  # shrinking below the length: put_nowait is Full (test_shrinking_queue)
    assert q.maxsize == 2 and q.full()
    with pytest.raises(pressure.Full):
        q.put_nowait(9)
    q.get(), q.get()
    q.put_nowait(9)
    with pytest.raises(TypeError):
        q.maxsize = "3"
    with pytest.raises(ValueError):
        q.maxsize = 2.5
    with pytest.raises(ValueError):
        q.maxsize = math.inf


def test_attach_with_contradicting_maxsize_is_a_value_error(any_queue: Any) -> None:
    any_queue("x", 3)
    assert any_queue("x").maxsize == 3
    assert any_queue("x", 3).maxsize == 3
    with pytest.raises(ValueError, match=r"already exists with maxsize=3, not 4"):
        any_queue("x", 4)
    with pytest.raises(pressure.QueueExistsError):
        any_queue("x", 0)


def test_anonymous_queues_are_unique(any_queue: Any) -> None:
    a, b = any_queue(None), any_queue(None)
    assert a.name != b.name and a.name.startswith("{anon-")
    a.put(1)
    assert b.empty()
    a.delete()  # as its creator's exit would (the private server is gone by then)
    b.delete()


@pytest.mark.parametrize("name", ["with space", "a:b:c", "{tag}", "ünïcødé ✓", "x" * 300])
def test_any_key_characters_are_valid_names(any_queue: Any, name: str) -> None:
    q = any_queue(name, 2)
    q.put(name)
    assert q.get() == name


def test_bad_names_and_arguments(any_queue: Any, url: str) -> None:
    with pytest.raises(ValueError):
        any_queue("")
    with pytest.raises(TypeError):
        any_queue(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        pressure.Queue("q", url=url, connection=any_queue.redis)
    with pytest.raises(ValueError, match="unknown serializer"):
        any_queue("q", serializer="yaml")


@pytest.mark.parametrize(
    ("serializer", "item"),
    [("pickle", {"set": {1, 2}, "t": (1, 2)}), ("json", {"a": [1, "ü", None]}), ("bytes", b"\x00\xff raw"),
     ("msgpack", {"a": [1, "ü", None, b"\x00\xff"], 7: 2.5}), ("orjson", {"a": [1, "ü", None, 2.5]})],
)
def test_serializers_round_trip(any_queue: Any, serializer: str, item: Any) -> None:
    q = any_queue("s", serializer=serializer)
    q.put(item)
    assert q.get() == item


_JSON_ODD = [b'"x"', b"1", b"-0", b"1e400", b"NaN", b"-Infinity", b"123456789012345678901234567890",
             b'{"a":1,"a":2}', b'"\\ud800"', '"\ud800"'.encode("utf-8", "surrogatepass"),
             b' "x"', b'"x" ', b'"x"\n', b'"x"x', b'"x" "y"', b"", b"  ", b"[1,", b"\xff", b'"\xff"',
             b'\xef\xbb\xbf"x"', '"x"'.encode("utf-16"), '"x"'.encode("utf-16-le"), '"ab"'.encode("utf-16-le"),
             '"x"'.encode("utf-32-le"), b"1\x00", b"[" * 100_000 + b"]" * 100_000, b'"\x01"',
             b'{"k":[1,2.5,true,false,null,"\xc3\xbc"]}', b"tru", b"nul", b"0x10", b"01"]


@pytest.mark.parametrize("data", _JSON_ODD, ids=range(len(_JSON_ODD)))
def test_json_serializer_loads_as_json_loads(data: bytes) -> None:
    """The 'json' serializer's fast loads gives what json.loads gives, or raises what it raises,
    for whatever bytes: other encodings, byte-order marks, whitespace, trailing data, NaN,
    surrogates, big numbers, bad UTF-8, nesting beyond the recursion limit."""
    import json

    def outcome(loads: Any) -> Any:
        try:
            value = loads(data)
        except BaseException as exc:  # noqa: BLE001 - the kind of error is what is compared
            return type(exc), str(exc)
        return "ok", repr(value), type(value)

    assert outcome(pressure.serializers.JsonSerializer().loads) == outcome(json.loads)


def test_bytes_serializer_stores_bytes_untouched(any_queue: Any) -> None:
    q = any_queue("raw", serializer="bytes")
    q.put(bytearray(b"abc"))
    assert any_queue.redis.lrange(q.keys.base, 0, -1) == [b"abc"]
    with pytest.raises(pressure.SerializationError):
        q.put("text")


class Upper:
    def dumps(self, obj: str) -> bytes:
        return obj.upper().encode()

    def loads(self, data: bytes) -> str:
        return data.decode()


def test_custom_serializer_object(any_queue: Any) -> None:
    q = any_queue("custom", serializer=Upper())
    q.put("hello")
    assert q.get() == "HELLO"


def test_unpicklable_item_leaves_queue_untouched(any_queue: Any) -> None:
    q = any_queue("u", 2)
    q.put("kept")
    before = snapshot(any_queue.redis, q)
    with pytest.raises(pressure.SerializationError) as info:
        q.put(lambda: None)
    assert isinstance(info.value, ValueError) and info.value.__cause__ is not None
    assert snapshot(any_queue.redis, q) == before
    assert_invariants(any_queue.redis, q)


def test_undeserializable_payload_raises_with_raw_bytes(any_queue: Any) -> None:
    q = any_queue("bad", serializer="json")
    any_queue("bad", serializer="bytes").put(b"\xffnot json")
    with pytest.raises(pressure.DeserializationError) as info:
        q.get_nowait()
    assert info.value.payload == b"\xffnot json"
    assert_invariants(any_queue.redis, q)


def test_close_semantics(any_queue: Any) -> None:
    q = any_queue("c", 5)
    q.put(1)
    q.put(2)
    assert not q.closed
    q.close()
    q.close()  # closing a closed queue does nothing
    assert q.closed and q.is_shutdown
    with pytest.raises(pressure.ShutDown):
        q.put(3)
    with pytest.raises(pressure.ShutDown):
        q.put_nowait(3)
    assert [q.get(), q.get_nowait()] == [1, 2]  # consumers drain what is left
    with pytest.raises(pressure.ShutDown):
        q.get()
    with pytest.raises(pressure.ShutDown):  # not Empty: the stdlib checks shutdown first
        q.get_nowait()
    assert any_queue.redis.llen(q.keys.closed) == 2
    assert_invariants(any_queue.redis, q)


def test_shutdown_immediate_discards_and_releases_join(any_queue: Any) -> None:
    q = any_queue("s")
    for i in range(4):
        q.put(i)
    q.get()
    q.shutdown(immediate=True)
    assert q.qsize() == 0 and q.unfinished_tasks == 1  # the item got but not done
    q.task_done()
    q.join()
    with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
        q.task_done()
    stats = q.statistics()
    assert (stats.produced_messages, stats.consumed_messages, stats.discarded_messages) == (4, 1, 3)
    q.shutdown()  # repeated calls in any order are allowed
    q.shutdown(immediate=True)
    assert_invariants(any_queue.redis, q)


def test_iteration_ends_when_closed_and_drained(any_queue: Any) -> None:
    q = any_queue("it")
    for i in range(5):
        q.put(i)
    q.close()
    assert list(q) == [0, 1, 2, 3, 4]


def test_task_done_and_join_count_every_put(any_queue: Any) -> None:
    q = any_queue("t")
    q.join()  # nothing unfinished
    for i in range(3):
        q.put(i)
    assert q.unfinished_tasks == 3
    for _ in range(3):
        q.get()
        q.task_done()
    q.join()
    with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
        q.task_done()


def test_statistics(any_queue: Any) -> None:
    q = any_queue("st", 10, serializer="bytes")
    q.put(b"12345")
    q.put(b"123")
    q.get()
    s = q.statistics()
    assert (s.size, s.maxsize, s.closed) == (1, 10, False)
    assert (s.produced_messages, s.produced_bytes, s.consumed_messages, s.consumed_bytes) == (2, 8, 1, 5)
    assert s.unfinished_tasks == 2 and s.producer == q.client_id and s.consumer == q.client_id


def test_delete_removes_every_key(any_queue: Any) -> None:
    q = any_queue("d", 3)
    q.put(1)
    q.put(2)
    q.get()
    q.task_done()
    q.close()
    q.delete()
    assert not q.exists
    assert any_queue.redis.keys(f"{q.prefix}:*") == []
    for op in (q.qsize, q.get_nowait, lambda: q.put(1), q.close, q.delete, q.task_done):
        with pytest.raises(pressure.QueueDoesNotExist):
            op()
    q2 = any_queue("d", 7)  # can be created again
    assert q2.maxsize == 7


def test_handle_pickles_without_its_connection(url: str, prefix: str) -> None:
    q: pressure.Queue[int] = pressure.Queue("p", 4, url=url, prefix=prefix, serializer="json")
    q.put(1)
    clone = pickle.loads(pickle.dumps(q))
    assert (clone.name, clone.prefix, clone.url) == (q.name, q.prefix, q.url)
    assert clone.get() == 1 and clone.maxsize == 4


def test_exceptions_hierarchy_and_pickling() -> None:
    assert issubclass(pressure.Full, stdlib_queue.Full)
    assert issubclass(pressure.Empty, stdlib_queue.Empty)
    if hasattr(stdlib_queue, "ShutDown"):
        assert issubclass(pressure.ShutDown, stdlib_queue.ShutDown)
    for cls in (pressure.Full, pressure.Empty, pressure.ShutDown, pressure.BackendError,
                pressure.QueueDoesNotExist, pressure.SerializationError, pressure.OutcomeUnknown,
                pressure.AuthenticationError, pressure.PermissionDenied, pressure.ItemTooLarge):
        assert issubclass(cls, pressure.PressureError)
        err = pickle.loads(pickle.dumps(cls("msg")))
        assert type(err) is cls and str(err) == "msg"
    err = pickle.loads(pickle.dumps(pressure.DeserializationError("bad", b"raw")))
    assert err.payload == b"raw" and str(err) == "bad"
    too_large = pickle.loads(pickle.dumps(pressure.ItemTooLarge("big", 10, 5)))
    assert (too_large.size, too_large.limit, str(too_large)) == (10, 5, "big")
    assert issubclass(pressure.ItemTooLarge, ValueError)
    assert not issubclass(pressure.ItemTooLarge, (pressure.SerializationError, pressure.BackendError))
    for refused in (pressure.AuthenticationError, pressure.PermissionDenied):  # nothing ran: known
        assert issubclass(refused, pressure.BackendError) and not issubclass(refused, pressure.OutcomeUnknown)
    assert not issubclass(pressure.ShutDown, (stdlib_queue.Empty, stdlib_queue.Full))


def test_generic_alias() -> None:
    assert pressure.Queue[int] is not None


def test_public_names_exported_once() -> None:
    assert len(pressure.__all__) == len(set(pressure.__all__))
    for name in pressure.__all__:
        assert hasattr(pressure, name)


def test_orjson_and_json_read_each_others_items(any_queue: Any) -> None:
    """orjson stores plain JSON: a json client and an orjson client share a queue; keys
    that are not strings become strings, as with json."""
    writer = any_queue("j", serializer="orjson")
    reader = any_queue("j", serializer="json")
    writer.put({1: "ü", "l": [1.5, None, True]})
    assert reader.get() == {"1": "ü", "l": [1.5, None, True]}
    reader.put({"back": "again"})
    assert writer.get() == {"back": "again"}
    with pytest.raises(pressure.SerializationError):
        writer.put({1, 2})  # a set is not JSON
    assert writer.qsize() == 0


def test_orjson_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from pressure import serializers

    monkeypatch.setitem(__import__("sys").modules, "orjson", None)  # import orjson fails
    monkeypatch.delitem(serializers._BY_NAME, "orjson", raising=False)
    with pytest.raises(ImportError, match=r"pressure-queue\[orjson\]"):
        serializers.resolve("orjson")
    assert "orjson" not in serializers._BY_NAME

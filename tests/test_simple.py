"""pressure.SimpleQueue: queue.SimpleQueue's API and behaviour, side by side with the stdlib,
over a protocol queue with bound 0."""

from __future__ import annotations

import inspect
import multiprocessing
import pickle
import queue as stdlib_queue
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import pressure

from .helpers import blocks

TIMEOUT_MESSAGE = r"^'timeout' must be a non-negative number$"
EXTENSIONS = {"name", "keys", "delete", "disconnect"}

Factory = Callable[[], Any]


def _delete_anonymous(made: list[pressure.SimpleQueue[Any]]) -> None:
    """Delete the anonymous queues, as their creator's exit would (the private server is
    gone by then), and disconnect every handle."""
    for q in made:
        if q.name.startswith("{anon-"):
            try:
                q.delete()
            except pressure.QueueDoesNotExist:
                pass
        q.disconnect()


@pytest.fixture(params=["stdlib", "pressure"])
def make_simple(request: pytest.FixtureRequest, url: str, prefix: str) -> Iterator[Factory]:
    """A factory for queue.SimpleQueue or pressure.SimpleQueue: each test runs against both."""
    made: list[pressure.SimpleQueue[Any]] = []

    def make() -> Any:
        if request.param == "stdlib":
            return stdlib_queue.SimpleQueue()
        q: pressure.SimpleQueue[Any] = pressure.SimpleQueue(url=url, prefix=prefix)
        made.append(q)
        return q

    yield make
    _delete_anonymous(made)


@pytest.fixture
def make_named(url: str, prefix: str) -> Iterator[Callable[..., pressure.SimpleQueue[Any]]]:
    """Named pressure.SimpleQueue handles on the private server, disconnected afterwards."""
    made: list[pressure.SimpleQueue[Any]] = []

    def make(name: str | None = "sq", **kw: Any) -> pressure.SimpleQueue[Any]:
        q: pressure.SimpleQueue[Any] = pressure.SimpleQueue(name, url=url, prefix=prefix, **kw)
        made.append(q)
        return q

    yield make
    _delete_anonymous(made)


# -- side by side with queue.SimpleQueue ------------------------------------------------

def test_fifo_order_sizes_and_emptiness(make_simple: Factory) -> None:
    q = make_simple()
    assert q.empty() and q.qsize() == 0
    for item in ("a", {"b": 1}, [3], None):
        q.put(item)
    assert q.qsize() == 4 and not q.empty()
    assert [q.get(), q.get_nowait(), q.get(False), q.get(timeout=5)] == ["a", {"b": 1}, [3], None]
    assert q.empty() and q.qsize() == 0


def test_put_ignores_block_and_timeout_and_validates_nothing(make_simple: Factory) -> None:
    q = make_simple()
    q.put(1, block=False, timeout=-1)
    q.put(2, True, "not a number")
    q.put(3, block=None, timeout=float("nan"))
    q.put(item=4)
    q.put_nowait(item=5)
    for _ in range(1000):  # unbounded: never Full
        q.put_nowait(0)
    assert [q.get() for _ in range(5)] == [1, 2, 3, 4, 5] and q.qsize() == 1000


def test_negative_timeout_is_a_value_error_even_with_items(make_simple: Factory) -> None:
    q = make_simple()
    with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
        q.get(timeout=-1)
    q.put("kept")
    with pytest.raises(ValueError, match=TIMEOUT_MESSAGE):
        q.get(True, -0.5)
    assert q.qsize() == 1  # the failed call took nothing
    assert q.get(block=False, timeout=-1) == "kept"  # block=False ignores the timeout


def test_empty_queue_raises_empty(make_simple: Factory) -> None:
    q = make_simple()
    for call in (q.get_nowait, lambda: q.get(False), lambda: q.get(timeout=0.05), lambda: q.get(timeout=0)):
        with pytest.raises(stdlib_queue.Empty):
            call()


def test_bad_timeout_type_is_a_type_error(make_simple: Factory) -> None:
    q = make_simple()
    q.put(1)
    with pytest.raises(TypeError):
        q.get(timeout="1")
    assert q.qsize() == 1


def test_a_blocked_get_is_released_by_a_put(make_simple: Factory) -> None:
    q = make_simple()
    assert blocks(lambda: q.get(timeout=30), lambda: q.put("late")) == "late"


def test_queue_queue_only_methods_do_not_exist(make_simple: Factory) -> None:
    q = make_simple()
    for attr in ("full", "task_done", "join", "shutdown", "maxsize", "unfinished_tasks", "is_shutdown",
                 "close"):
        with pytest.raises(AttributeError):
            getattr(q, attr)


def test_argument_counts(make_simple: Factory) -> None:
    q = make_simple()
    q.put(1, True, None)
    assert q.get(True, None) == 1
    with pytest.raises(TypeError):
        q.put(1, True, None, "extra")
    with pytest.raises(TypeError):
        q.get(True, None, "extra")
    with pytest.raises(TypeError):
        q.put()


def test_generic_alias(make_simple: Factory) -> None:
    cls = type(make_simple())
    alias = cls[int]
    assert alias.__origin__ is cls and alias.__args__ == (int,)


# -- the API as a whole -------------------------------------------------------------------

def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def _parameters(fn: Any) -> list[tuple[str, Any]]:
    """Names and defaults after self (the C methods' self is positional-only, ours is not)."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    return [(p.name, p.default) for p in params]


def test_public_api_is_the_stdlib_one_plus_the_extensions() -> None:
    assert _public(pressure.SimpleQueue) == _public(stdlib_queue.SimpleQueue) | EXTENSIONS
    for method in _public(stdlib_queue.SimpleQueue):
        ours = getattr(pressure.SimpleQueue, method)
        assert _parameters(ours) == _parameters(getattr(stdlib_queue.SimpleQueue, method)), method
        assert ours.__doc__, method


def test_constructor_arguments_are_keyword_only_after_name(url: str, prefix: str) -> None:
    params = inspect.signature(pressure.SimpleQueue).parameters
    assert [p.name for p in params.values() if p.kind is p.POSITIONAL_OR_KEYWORD] == ["name"]
    with pytest.raises(TypeError):
        pressure.SimpleQueue("q", url)  # type: ignore[call-arg]


# -- pressure extensions -------------------------------------------------------------------

def test_same_key_layout_as_queue_with_bound_zero(make_named: Any, make_queue: Any, r: redis.Redis) -> None:
    q = make_named("shared")
    other = make_queue("shared")
    assert q.keys == other.keys and q.keys.base.endswith(":shared")
    assert r.get(q.keys.bound) == b"0" and other.maxsize == 0
    q.put("from simple")
    other.put("from queue")
    assert r.llen(q.keys.base) == 2
    assert other.get_nowait() == "from simple" and q.get_nowait() == "from queue"


def test_bytes_serializer_writes_the_protocol_list(make_named: Any, r: redis.Redis) -> None:
    q = make_named("raw", serializer="bytes")
    q.put(b"abc")
    assert r.lrange(q.keys.base, 0, -1) == [b"abc"]
    r.lpush(q.keys.base, b"from elsewhere")
    assert q.get_nowait() == b"abc" and q.get_nowait() == b"from elsewhere"


def test_attaching_to_a_bounded_queue_is_refused(make_queue: Any, make_named: Any) -> None:
    make_queue("bounded", 3)
    with pytest.raises(pressure.QueueExistsError, match="already exists with maxsize=3, not 0"):
        make_named("bounded")
    make_queue("unbounded")
    make_named("unbounded").put(1)


def test_named_handles_share_a_queue_and_anonymous_ones_are_unique(make_named: Any) -> None:
    a, b = make_named("n"), make_named("n")
    a.put(1)
    assert b.get_nowait() == 1 and a.name == b.name == "n"
    x, y = make_named(None), make_named(None)
    assert x.name != y.name and x.name.startswith("{anon-")
    x.put(1)
    assert y.empty()


def test_closed_by_another_client_raises_shut_down_once_drained(make_named: Any, make_queue: Any) -> None:
    q = make_named("c")
    q.put("last")
    make_queue("c").close()
    assert q.get() == "last"
    with pytest.raises(pressure.ShutDown):
        q.get(timeout=5)
    with pytest.raises(pressure.ShutDown):
        q.put(1)


def test_delete_removes_every_key(make_named: Any, r: redis.Redis, prefix: str) -> None:
    q = make_named("d")
    q.put(1)
    assert r.keys(f"{prefix}:*")
    q.delete()
    assert r.keys(f"{prefix}:*") == []
    with pytest.raises(pressure.QueueDoesNotExist):
        q.get_nowait()


def _client_ids(r: redis.Redis) -> set[str]:
    return {c["id"] for c in r.client_list()}


def _all_gone(r: redis.Redis, ids: set[str]) -> bool:
    """Wait until none of these connections is left on the server."""
    deadline = time.monotonic() + 10
    while ids & _client_ids(r) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not ids & _client_ids(r)


def test_context_manager_and_disconnect_close_the_sockets(url: str, prefix: str, r: redis.Redis) -> None:
    before = _client_ids(r)
    with pressure.SimpleQueue[int]("cm", url=url, prefix=prefix) as q:
        assert isinstance(q, pressure.SimpleQueue)
        q.put(1)
        ours = _client_ids(r) - before
        assert ours
    assert _all_gone(r, ours)
    assert q.get() == 1  # the handle reconnects when used again
    ours = _client_ids(r) - before
    assert ours
    q.disconnect()
    assert _all_gone(r, ours)


def test_repr_names_the_queue(make_named: Any, prefix: str) -> None:
    text = repr(make_named("shown"))
    assert text.startswith("<pressure.SimpleQueue ") and "'shown'" in text and repr(prefix) in text


def test_pickles_as_configuration(make_named: Any) -> None:
    q = make_named("p")
    q.put("x")
    copy = pickle.loads(pickle.dumps(q))
    try:
        assert type(copy) is pressure.SimpleQueue and copy.name == "p"
        assert copy.get_nowait() == "x"
    finally:
        copy.disconnect()


def _put_from_child(q: pressure.SimpleQueue[Any]) -> None:
    q.put("from the child")
    q.disconnect()


def test_handle_passes_to_a_spawned_process(make_named: Any) -> None:
    q = make_named(None)
    p = multiprocessing.get_context("spawn").Process(target=_put_from_child, args=(q,))
    p.start()
    try:
        assert q.get(timeout=30) == "from the child"
    finally:
        p.join(30)
    assert p.exitcode == 0


def test_exported_from_the_package() -> None:
    assert "SimpleQueue" in pressure.__all__ and pressure.SimpleQueue.__module__ == "pressure.simple"

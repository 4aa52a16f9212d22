"""Behavioural scenarios for the differential suite: one contract, every implementation.

Each scenario is a plain function ``scenario(impl) -> None`` that raises
``AssertionError`` when the implementation behind ``impl`` departs from the
stdlib contract (CPython's ``Lib/queue.py`` and ``Lib/multiprocessing/queues.py``,
their documentation and their tests). The same functions run against the
standard library and against ``pressure`` (compat/test_differential.py), and
under another interpreter through compat/stdlib_runner.py, so this module
imports nothing but the standard library.

A scenario registers itself in ``SCENARIOS`` with *tags*: the features an
implementation must offer for the scenario to apply to it (``"Queue"``,
``"shutdown"``, ``"fork"``...; see ``Impl.features``). Where ``pressure``
deliberately differs from the stdlib, the scenario carries ``difference=``, the
name of the entry in the docs' "Differences from the stdlib" (docs/pages/queues.md), and
asserts each side's own documented behaviour, chosen by a flag on ``Impl``; it is never
skipped.

Blocking is proved as CPython's ``do_blocking_test`` proves it: the call runs
while a trigger thread waits ``DELAY`` seconds and then acts, and the call must
not return before the trigger fired.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import pickle
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Impl",
    "Scenario",
    "SCENARIOS",
    "DIFFERENCES",
    "scenario",
    "stdlib_impl",
    "unavailable",
    "run",
]

#: How long a trigger thread waits before it acts (CPython's tests use 0.1).
DELAY = 0.2
#: The timeout of the timed-wait scenarios.
TIMEOUT = 0.3
#: How far past its timeout a timed wait may end (generous: the machine is shared).
SLACK = 2.0
#: The longest any helper thread, child process or "should be instant" call may take.
LIMIT = 10.0

TIMEOUT_MESSAGE = "'timeout' must be a non-negative number"
TASK_DONE_MESSAGE = "task_done() called too many times"
PICKLE_MESSAGE = "Queue objects should only be shared between processes through inheritance"

# The entries of the docs' "Differences from the stdlib" (docs/pages/queues.md) that scenarios name.
CLOSE_IS_GLOBAL = "close() is global"
TIMED_WAITS_LATE = "timed waits can end one server tick late"
NEGATIVE_TIMEOUTS = (
    "negative timeouts: pressure.Queue follows queue.Queue, "
    "pressure.multiprocessing follows multiprocessing"
)
SERIALIZED_IN_PUT = "items are serialized in put"
HANDLES_PICKLE = "queue handles pickle"
MAXSIZE_STORED = "maxsize <= 0 is stored as 0"
PRIORITY_INCOMPARABLE = "priority items Python cannot compare are ordered, not refused"
DIFFERENCES = (
    CLOSE_IS_GLOBAL,
    TIMED_WAITS_LATE,
    NEGATIVE_TIMEOUTS,
    SERIALIZED_IN_PUT,
    HANDLES_PICKLE,
    MAXSIZE_STORED,
    PRIORITY_INCOMPARABLE,
)

Factory = Callable[..., Any]


def missing(*args: Any, **kwargs: Any) -> Any:
    """The factory of a feature an implementation lacks (scenarios needing it do not run)."""
    raise AssertionError("this implementation lacks the feature this factory stands for")


# -- implementations ------------------------------------------------------------------


@dataclass
class Impl:
    """One implementation under test: factories, exceptions and documented differences.

    Factories: ``Queue(maxsize)``, ``LifoQueue(maxsize)``, ``PriorityQueue(maxsize)``,
    ``SimpleQueue()``; for processes ``ProcessQueue(maxsize, method=None)``,
    ``JoinableQueue(maxsize, method=None)`` and ``ProcessSimpleQueue(method=None)``
    (``method`` is the start method the queue will be used with). A factory
    left as ``missing`` is a missing feature; ``reasons`` may say why.
    """

    name: str
    Full: type[BaseException]
    Empty: type[BaseException]
    #: None where the implementation has no shutdown (queue before Python 3.13).
    ShutDown: type[BaseException] | None
    Queue: Factory = missing
    LifoQueue: Factory = missing
    PriorityQueue: Factory = missing
    SimpleQueue: Factory = missing
    ProcessQueue: Factory = missing
    JoinableQueue: Factory = missing
    ProcessSimpleQueue: Factory = missing
    #: Another handle on the same queue (None where handles cannot be shared).
    attach: Callable[[Any], Any] | None = None
    #: Take ownership of a handle a scenario made itself (by unpickling): release it at the end.
    adopt: Callable[[Any], Any] = lambda handle: handle
    #: Queue(...).close() is shutdown() for every client (pressure.Queue; queue.Queue has no
    #: close). Process queues' close() releases one handle in one process on both sides.
    close_is_global: bool = False
    #: put() serializes the item: an unpicklable item raises this there; get() returns copies.
    serialization_error: type[BaseException] | None = None
    #: Process-queue handles pickle (pressure) instead of raising RuntimeError.
    pickles_process_queues: bool = False
    #: PriorityQueue orders items Python cannot compare (pressure) instead of raising TypeError.
    orders_incomparable_priorities: bool = False
    #: maxsize <= 0 reads back as 0 (pressure) instead of as given.
    stores_nonpositive_maxsize_as_zero: bool = False
    #: How late a timed wait may end beyond the stdlib's own lateness (one server tick).
    late_by: float = 0.0
    #: Why a feature is missing, by feature name.
    reasons: dict[str, str] = field(default_factory=dict)
    #: Run by close(), last first.
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    @property
    def features(self) -> frozenset[str]:
        """Every tag this implementation satisfies."""
        names = {
            kind for kind in ("Queue", "LifoQueue", "PriorityQueue", "SimpleQueue", "ProcessQueue",
                              "JoinableQueue", "ProcessSimpleQueue")
            if getattr(self, kind) is not missing
        }
        if self.ShutDown is not None:
            names.add("shutdown")
        names.update(multiprocessing.get_all_start_methods())
        return frozenset(names)

    def close(self) -> None:
        """Release everything the factories made; raise the first error after trying all."""
        errors: list[BaseException] = []
        while self.cleanups:
            try:
                self.cleanups.pop()()
            except Exception as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)
        if errors:
            raise errors[0]


def _close_process_queue(q: Any) -> None:
    q.close()
    if hasattr(q, "join_thread"):
        q.join_thread()


def stdlib_impl() -> Impl:
    """The reference: ``queue`` and ``multiprocessing`` of the running interpreter."""
    shutdown = getattr(queue, "ShutDown", None)
    impl = Impl(name="stdlib", Full=queue.Full, Empty=queue.Empty, ShutDown=shutdown,
                Queue=queue.Queue, LifoQueue=queue.LifoQueue, PriorityQueue=queue.PriorityQueue,
                SimpleQueue=queue.SimpleQueue)
    if shutdown is None:
        impl.reasons["shutdown"] = "queue.ShutDown and Queue.shutdown() need Python 3.13+"

    def process_factory(kind: str) -> Factory:
        def make(*args: Any, method: str | None = None) -> Any:
            q = getattr(multiprocessing.get_context(method), kind)(*args)
            impl.cleanups.append(lambda: _close_process_queue(q))
            return q
        return make

    impl.ProcessQueue = process_factory("Queue")
    impl.JoinableQueue = process_factory("JoinableQueue")
    impl.ProcessSimpleQueue = process_factory("SimpleQueue")
    return impl


# -- the registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One registered scenario."""

    name: str
    func: Callable[[Impl], None]
    #: The features an implementation needs for this scenario (see Impl.features).
    tags: frozenset[str]
    #: The docs' "Differences from the stdlib" entry (queues.md) this scenario pins, if any.
    difference: str | None = None
    #: A label for the heavier (process) scenarios; they still run by default.
    slow: bool = False

    @property
    def doc(self) -> str:
        """The first line of the scenario's docstring ("" if it has none)."""
        lines = (self.func.__doc__ or "").strip().splitlines()
        return lines[0] if lines else ""


SCENARIOS: dict[str, Scenario] = {}


def register(name: str, func: Callable[[Impl], None], tags: Iterable[str],
             difference: str | None = None, slow: bool = False) -> None:
    """Add a scenario under a unique name."""
    if name in SCENARIOS:
        raise ValueError(f"scenario {name!r} is registered twice")
    if difference is not None and difference not in DIFFERENCES:
        raise ValueError(f"unknown difference {difference!r}")
    SCENARIOS[name] = Scenario(name, func, frozenset(tags), difference, slow)


def scenario(*tags: str, difference: str | None = None,
             slow: bool = False) -> Callable[[Callable[[Impl], None]], Callable[[Impl], None]]:
    """Register the decorated function as a scenario named after it."""
    def decorate(func: Callable[[Impl], None]) -> Callable[[Impl], None]:
        register(func.__name__, func, tags, difference, slow)
        return func
    return decorate


def unavailable(impl: Impl, item: Scenario) -> str | None:
    """Why ``item`` cannot run on ``impl`` (a missing feature), or None if it can."""
    lacking = sorted(item.tags - impl.features)
    if not lacking:
        return None
    return "; ".join(impl.reasons.get(tag, f"{impl.name} has no {tag}") for tag in lacking)


def run(item: Scenario, impl: Impl) -> None:
    """Run one scenario, then release what it made. A failing scenario's own error is the one
    raised: an error while releasing after it is dropped, never put in its place."""
    try:
        item.func(impl)
    except BaseException:
        with contextlib.suppress(Exception):
            impl.close()
        raise
    impl.close()


# -- helpers -------------------------------------------------------------------------------


def _raises(expected: type[BaseException] | tuple[type[BaseException], ...],
            call: Callable[[], Any]) -> BaseException:
    """Run ``call`` and return the exception it raised, which must be ``expected``."""
    try:
        result = call()
    except expected as exc:
        return exc
    except BaseException as exc:
        raise AssertionError(f"expected {_names(expected)}, got {exc!r}") from exc
    raise AssertionError(f"expected {_names(expected)}, but the call returned {result!r}")


def _names(types: type[BaseException] | tuple[type[BaseException], ...]) -> str:
    group = types if isinstance(types, tuple) else (types,)
    return " or ".join(t.__name__ for t in group)


def _raises_at_once(expected: type[BaseException], call: Callable[[], Any]) -> BaseException:
    """``call`` raises ``expected`` without waiting (well within SLACK)."""
    start = time.monotonic()
    exc = _raises(expected, call)
    elapsed = time.monotonic() - start
    assert elapsed < SLACK, f"{expected.__name__} came after {elapsed:.2f} s, not at once"
    return exc


def _raises_after(impl: Impl, expected: type[BaseException], call: Callable[[], Any],
                  timeout: float) -> BaseException:
    """``call`` raises ``expected`` after roughly ``timeout`` seconds, never early."""
    start = time.monotonic()
    exc = _raises(expected, call)
    elapsed = time.monotonic() - start
    assert elapsed >= 0.9 * timeout, f"{expected.__name__} after {elapsed:.3f} s, before the {timeout} s timeout"
    limit = timeout + SLACK + impl.late_by
    assert elapsed < limit, f"{expected.__name__} after {elapsed:.2f} s for a {timeout} s timeout"
    return exc


class _Call:
    """A call running in a daemon helper thread; records whether ``fired`` was set when it ended."""

    def __init__(self, call: Callable[[], Any], fired: threading.Event | None = None) -> None:
        self.outcome: dict[str, Any] = {}
        self._call = call
        self._fired = fired
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.outcome["value"] = self._call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self.outcome["error"] = exc
        self.outcome["after_trigger"] = self._fired is None or self._fired.is_set()

    def result(self) -> Any:
        """Wait up to LIMIT seconds; return what the call returned or raise what it raised."""
        self._thread.join(LIMIT)
        assert not self._thread.is_alive(), f"the call had not returned after {LIMIT} s"
        assert self.outcome["after_trigger"], (
            f"the call ended before the trigger, so it did not block: {self.outcome!r}")
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["value"]


def _blocks(call: Callable[[], Any], trigger: Callable[[], Any], delay: float = DELAY) -> Any:
    """Prove ``call`` blocks until ``trigger`` has acted (CPython's do_blocking_test).

    The call runs in a helper thread; this thread waits ``delay``, marks the
    trigger as fired and runs it. The call must not return (or raise) before
    that, and must end within LIMIT seconds after it. Returns what the call
    returned, or raises what it raised.
    """
    fired = threading.Event()
    running = _Call(call, fired)
    time.sleep(delay)
    fired.set()
    trigger()
    return running.result()


def _blocks_raising(expected: type[BaseException], call: Callable[[], Any],
                    trigger: Callable[[], Any]) -> BaseException:
    """Prove ``call`` blocks until ``trigger`` acts and then raises ``expected``."""
    exc: BaseException = _blocks(lambda: _raises(expected, call), trigger)
    return exc


def _bounded(call: Callable[[], Any]) -> Any:
    """Run a call that must end promptly; fail (instead of hanging) if it takes LIMIT seconds."""
    return _Call(call).result()


def _shutdown(impl: Impl) -> type[BaseException]:
    """The ShutDown class of an implementation that has one (scenarios tagged "shutdown")."""
    assert impl.ShutDown is not None, f"{impl.name} has no ShutDown"
    return impl.ShutDown


def _process(method: str | None, target: Callable[..., Any], *args: Any) -> Any:
    """A (not yet started) child process of the given start method."""
    context: Any = multiprocessing.get_context(method)
    return context.Process(target=target, args=args)


def _drain(q: Any, count: int) -> list[Any]:
    """Get ``count`` items (each within LIMIT seconds)."""
    return [q.get(timeout=LIMIT) for _ in range(count)]


def _start_thread(target: Callable[..., Any], *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def _join_all(workers: Iterable[threading.Thread | Any]) -> None:
    """Join threads or processes; each must end within LIMIT seconds (processes with code 0)."""
    for worker in workers:
        worker.join(LIMIT)
        assert not worker.is_alive(), f"{worker!r} still running after {LIMIT} s"
        exitcode = getattr(worker, "exitcode", 0)
        assert exitcode == 0, f"{worker!r} exited with code {exitcode}"


def _check_exactly_once_in_order(batches: list[list[tuple[int, int]]], producers: int,
                                 count: int) -> None:
    """Items ``(producer, i)`` arrived exactly once, and each batch (one consumer's gets) holds
    each producer's items in the order they were put."""
    seen = collections.Counter(item for batch in batches for item in batch)
    expected = collections.Counter((p, i) for p in range(producers) for i in range(count))
    missing = sorted((expected - seen).elements())
    extra = sorted((seen - expected).elements())
    assert not missing and not extra, f"missing {missing[:10]} extra/duplicated {extra[:10]}"
    for batch in batches:
        for p in range(producers):
            sequence = [i for who, i in batch if who == p]
            assert sequence == sorted(sequence), f"producer {p}'s items out of order: {sequence}"


def _produce(q: Any, producer: int, count: int) -> None:
    """Put ``(producer, 0..count-1)`` in order (a thread or child-process body)."""
    for i in range(count):
        q.put((producer, i))


def _consume_until_none(q: Any, results: Any) -> None:
    """Get until a None sentinel, then put the list of items got to ``results``."""
    got = []
    while (item := q.get(timeout=LIMIT)) is not None:
        got.append(item)
    results.put(got)


def _work_off(q: Any, count: int) -> None:
    """Get ``count`` items, marking each done; exit with code 3 unless they were 0..count-1 in
    order (a child-process body)."""
    got = []
    for _ in range(count):
        got.append(q.get(timeout=LIMIT))
        q.task_done()
    if got != list(range(count)):
        raise SystemExit(3)


# -- ordering ------------------------------------------------------------------------------


@scenario("Queue")
def fifo_order_is_preserved(impl: Impl) -> None:
    """Items of any picklable kind come out of a Queue in the order they went in."""
    q = impl.Queue(0)
    items = [3, "a", (1, 2), None, 2.5, b"x", [1], {"k": 1}, -7]
    for item in items:
        q.put(item)
    assert _drain(q, len(items)) == items


@scenario("LifoQueue")
def lifo_order_is_last_in_first_out(impl: Impl) -> None:
    """A LifoQueue returns the newest item first, across interleaved puts and gets."""
    q = impl.LifoQueue(0)
    for item in (1, 2, 3):
        q.put(item)
    assert q.get() == 3
    q.put(4)
    assert _drain(q, 3) == [4, 2, 1]


@scenario("PriorityQueue")
def priority_order_is_lowest_first(impl: Impl) -> None:
    """A PriorityQueue returns the smallest item first, whatever the put order."""
    q = impl.PriorityQueue(0)
    items = list(range(-5, 25))
    random.Random(4).shuffle(items)
    for item in items:
        q.put(item)
    assert _drain(q, len(items)) == sorted(items)


@scenario("PriorityQueue")
def priority_tuples_order_by_priority_then_payload(impl: Impl) -> None:
    """``(priority, payload)`` tuples order by priority, ties by payload, as tuples compare."""
    q = impl.PriorityQueue(0)
    items = [(2, "x"), (1, "y"), (3, "a"), (1, "b"), (2, "a"), (0, "z"), (1, "ba")]
    for item in items:
        q.put(item)
    assert _drain(q, len(items)) == sorted(items)


@scenario("PriorityQueue")
def priority_equal_items_are_all_delivered(impl: Impl) -> None:
    """Equal items (ties) are each delivered, none lost or merged."""
    q = impl.PriorityQueue(0)
    for item in [(1, "x"), (0, "y"), (1, "x")]:
        q.put(item)
    assert _drain(q, 3) == [(0, "y"), (1, "x"), (1, "x")]
    r = impl.PriorityQueue(0)
    for number in (7, 5, 7, 5):
        r.put(number)
    assert _drain(r, 4) == [5, 5, 7, 7]


@scenario("PriorityQueue")
def priority_mixed_int_float_priorities(impl: Impl) -> None:
    """Ints and floats order by value, also as tuple priorities (1 == 1.0, so the payload
    decides); an int and a float that are equal both come out."""
    q = impl.PriorityQueue(0)
    items = [3, 1.5, 2, -0.5, 0, 2.25, 10**6, -7, 0.1]
    for item in items:
        q.put(item)
    assert _drain(q, len(items)) == sorted(items)
    for item in (1, 1.0, 0.5):
        q.put(item)
    assert q.get() == 0.5
    rest = _drain(q, 2)
    assert rest == [1, 1] and sorted(type(x).__name__ for x in rest) == ["float", "int"], rest
    pairs = [(1.0, "b"), (1, "a"), (0.5, "z"), (2, ""), (1.5, "a")]
    for pair in pairs:
        q.put(pair)
    assert _drain(q, len(pairs)) == [(0.5, "z"), (1, "a"), (1.0, "b"), (1.5, "a"), (2, "")]


@scenario("PriorityQueue")
def priority_large_ints_compare_exactly(impl: Impl) -> None:
    """Priorities beyond 2**53 compare exactly, as Python compares them (not as doubles)."""
    q = impl.PriorityQueue(0)
    items = [2**53 + 1, float(2**53), 2**64 + 1, 2**64, -(2**63), -(2**63) - 1]
    for item in items:
        q.put(item)
    got = _drain(q, len(items))
    expected = sorted(items)
    assert got == expected and [type(x) for x in got] == [type(x) for x in expected], got


@scenario("PriorityQueue")
def priority_strings_and_bytes_order_by_code_point(impl: Impl) -> None:
    """str priorities order by code point, bytes by byte value ("" and b"" first)."""
    strings = impl.PriorityQueue(0)
    texts = ["b", "a", "ab", "", "é", "Z", "z", "a\x00"]
    for text in texts:
        strings.put(text)
    assert _drain(strings, len(texts)) == sorted(texts)
    raw = impl.PriorityQueue(0)
    blobs = [b"b", b"a", b"ab", b"", b"\xff", b"\x00", b"a\x00"]
    for blob in blobs:
        raw.put(blob)
    assert _drain(raw, len(blobs)) == sorted(blobs)


@dataclass(order=True)
class PrioritizedItem:
    """The queue documentation's pattern: order by priority, never by the payload."""

    priority: int
    item: Any = field(compare=False)


@scenario("PriorityQueue")
def priority_dataclass_items_order_by_compared_fields(impl: Impl) -> None:
    """Items of an order=True dataclass (the docs' PrioritizedItem) order by their compared
    field; the payload, even an unorderable one, comes back intact."""
    q = impl.PriorityQueue(0)
    items = [PrioritizedItem(3, "c"), PrioritizedItem(1, {"a": 1}), PrioritizedItem(2, ["b"]),
             PrioritizedItem(1, {"z": 0})]
    for item in items:
        q.put(item)
    got = _drain(q, len(items))
    assert [x.priority for x in got] == [1, 1, 2, 3], got
    assert sorted(map(repr, got)) == sorted(map(repr, items)), got


@scenario("PriorityQueue", difference=PRIORITY_INCOMPARABLE)
def priority_items_python_cannot_compare(impl: Impl) -> None:
    """The stdlib's heap raises TypeError when a put must compare what Python cannot order (an
    int with a str, dict payloads on a priority tie); pressure orders them instead: numbers
    before str, and ties on an unorderable payload first in, first out."""
    mixed = impl.PriorityQueue(0)
    mixed.put(1)
    tied = impl.PriorityQueue(0)
    tied.put((1, {"k": 1}))
    if not impl.orders_incomparable_priorities:
        _raises(TypeError, lambda: mixed.put("a"))
        _raises(TypeError, lambda: tied.put((1, {"k": 2})))
        return
    mixed.put("a")
    mixed.put(0)
    assert _drain(mixed, 3) == [0, 1, "a"]
    tied.put((1, {"k": 2}))
    tied.put((0, {"k": 3}))
    assert _drain(tied, 3) == [(0, {"k": 3}), (1, {"k": 1}), (1, {"k": 2})]


# -- per-kind contracts (Queue, LifoQueue, PriorityQueue, and the process queue) -----------------

_KINDS = {
    # kind: (scenario-name prefix, order of 111, 333, 222 after three puts)
    "Queue": ("fifo", [111, 333, 222]),
    "LifoQueue": ("lifo", [222, 333, 111]),
    "PriorityQueue": ("priority", [111, 222, 333]),
}


def _basic_contract(kind: str, order: list[int]) -> Callable[[Impl], None]:
    def check(impl: Impl) -> None:
        q = getattr(impl, kind)(3)
        assert q.empty() and not q.full() and q.qsize() == 0
        for item in (111, 333, 222):
            q.put(item)
        assert q.qsize() == 3 and q.full() and not q.empty()
        for put in (lambda: q.put_nowait(444), lambda: q.put(444, block=False)):
            exc = _raises_at_once(impl.Full, put)
            assert isinstance(exc, queue.Full), f"{exc!r} is not a queue.Full"
        assert [q.get_nowait() for _ in range(3)] == order
        assert q.empty() and not q.full() and q.qsize() == 0
        exc = _raises_at_once(impl.Empty, q.get_nowait)
        assert isinstance(exc, queue.Empty), f"{exc!r} is not a queue.Empty"
    check.__doc__ = (f"{kind}(3): sizes, full()/empty(), Full and Empty (stdlib subclasses) "
                     f"from the non-blocking calls, and {kind} order.")
    return check


def _put_and_get_block(kind: str) -> Callable[[Impl], None]:
    def check(impl: Impl) -> None:
        q = getattr(impl, kind)(1)
        q.put(1)
        taken: list[Any] = []
        _blocks(lambda: q.put(2), lambda: taken.append(q.get(timeout=LIMIT)))
        assert taken == [1] and q.get(timeout=LIMIT) == 2
        assert _blocks(q.get, lambda: q.put(3)) == 3
    check.__doc__ = (f"{kind}: put() on a full queue blocks until a get makes room, and get() "
                     f"on an empty one blocks until a put (no timeout: waits as long as it takes).")
    return check


def _shutdown_drains(kind: str, order: list[int]) -> Callable[[Impl], None]:
    def check(impl: Impl) -> None:
        q = getattr(impl, kind)(0)
        for item in (111, 333, 222):
            q.put(item)
        q.shutdown()
        _raises_at_once(_shutdown(impl), lambda: q.put(1))
        assert [q.get(), q.get_nowait(), q.get(timeout=LIMIT)] == order
        _raises_at_once(_shutdown(impl), q.get_nowait)
        _bounded(lambda: _raises(_shutdown(impl), q.get))
    check.__doc__ = (f"{kind} after shutdown(): puts raise ShutDown, the items left come out in "
                     f"{kind} order, then get and get_nowait raise ShutDown at once.")
    return check


for _kind, (_prefix, _order) in _KINDS.items():
    register(f"{_prefix}_basic_contract", _basic_contract(_kind, _order), [_kind])
    register(f"{_prefix}_put_and_get_block_until_triggered", _put_and_get_block(_kind), [_kind])
    if _kind != "Queue":
        register(f"{_prefix}_shutdown_drains_in_order_then_raises", _shutdown_drains(_kind, _order),
                 [_kind, "shutdown"])
register("process_put_and_get_block_until_triggered", _put_and_get_block("ProcessQueue"),
         ["ProcessQueue"])


# -- non-blocking calls and timeouts ----------------------------------------------------------


@scenario("Queue")
def put_nowait_on_full_raises_full(impl: Impl) -> None:
    """put_nowait on a full queue raises Full (a queue.Full) at once and leaves it unchanged."""
    q = impl.Queue(2)
    q.put_nowait("a")
    q.put_nowait("b")
    exc = _raises_at_once(impl.Full, lambda: q.put_nowait("c"))
    assert isinstance(exc, queue.Full)
    assert q.qsize() == 2 and q.unfinished_tasks == 2
    assert _drain(q, 2) == ["a", "b"]


@scenario("Queue")
def nonblocking_calls_ignore_the_timeout(impl: Impl) -> None:
    """put(block=False, timeout=5) and get(block=False, timeout=5) fail at once, not after 5 s."""
    q = impl.Queue(1)
    q.put(1)
    _raises_at_once(impl.Full, lambda: q.put(2, block=False, timeout=5))
    assert q.get(block=False, timeout=5) == 1
    _raises_at_once(impl.Empty, lambda: q.get(block=False, timeout=5))


@scenario("Queue")
def zero_and_tiny_timeouts_fail_at_once(impl: Impl) -> None:
    """timeout=0 does not wait, and timeout=0.001 waits about a millisecond (it never becomes
    "block forever"): Full on a full queue, Empty on an empty one."""
    q = impl.Queue(1)
    q.put(1)
    for timeout in (0, 0.001):
        _bounded(lambda: _raises_at_once(impl.Full, lambda: q.put(2, timeout=timeout)))
    assert q.get(timeout=0) == 1
    for timeout in (0, 0.001):
        _bounded(lambda: _raises_at_once(impl.Empty, lambda: q.get(timeout=timeout)))


@scenario("Queue")
def put_timeout_raises_full_after_the_timeout(impl: Impl) -> None:
    """put(timeout=t) on a full queue raises Full after about t seconds, never before."""
    q = impl.Queue(1)
    q.put(1)
    _raises_after(impl, impl.Full, lambda: q.put(2, timeout=TIMEOUT), TIMEOUT)
    assert q.qsize() == 1 and q.get_nowait() == 1


@scenario("Queue")
def get_timeout_raises_empty_after_the_timeout(impl: Impl) -> None:
    """get(timeout=t) on an empty queue raises Empty after about t seconds, never before."""
    q = impl.Queue(0)
    _raises_after(impl, impl.Empty, lambda: q.get(timeout=TIMEOUT), TIMEOUT)


@scenario("Queue")
def put_with_timeout_returns_once_room_appears(impl: Impl) -> None:
    """A put(timeout=10) blocked on a full queue returns as soon as a get makes room."""
    q = impl.Queue(1)
    q.put(1)
    _blocks(lambda: q.put(2, timeout=LIMIT), q.get)
    assert q.get_nowait() == 2


@scenario("Queue")
def get_with_timeout_returns_once_an_item_arrives(impl: Impl) -> None:
    """A get(timeout=10) blocked on an empty queue returns the item as soon as it is put."""
    q = impl.Queue(0)
    assert _blocks(lambda: q.get(timeout=LIMIT), lambda: q.put("late")) == "late"


@scenario("Queue", difference=TIMED_WAITS_LATE)
def timed_wait_ends_near_its_timeout(impl: Impl) -> None:
    """A timed get ends within 0.5 s of its timeout (the best of three tries), plus one server
    tick for pressure: a wait is not rounded up to a whole polling slice."""
    q = impl.Queue(0)
    lateness = []
    for _ in range(3):
        start = time.monotonic()
        _raises(impl.Empty, lambda: q.get(timeout=0.2))
        lateness.append(time.monotonic() - start - 0.2)
    assert min(lateness) >= -0.02, f"ended early: {lateness}"
    assert min(lateness) < 0.5 + impl.late_by, f"late by {lateness} (allowed {0.5 + impl.late_by})"


# -- negative timeouts -------------------------------------------------------------------------


@scenario("Queue", difference=NEGATIVE_TIMEOUTS)
def negative_timeout_on_bounded_put_raises_valueerror(impl: Impl) -> None:
    """A blocking put with timeout < 0 on a bounded queue raises ValueError with queue.Queue's
    message, full or not, and puts nothing."""
    q = impl.Queue(2)
    exc = _raises(ValueError, lambda: q.put(1, timeout=-1))
    assert str(exc) == TIMEOUT_MESSAGE, str(exc)
    assert q.qsize() == 0
    q.put(1)
    q.put(2)
    exc = _raises(ValueError, lambda: q.put(3, timeout=-0.5))
    assert str(exc) == TIMEOUT_MESSAGE, str(exc)


@scenario("Queue", difference=NEGATIVE_TIMEOUTS)
def negative_timeout_on_get_raises_valueerror_even_with_items(impl: Impl) -> None:
    """get(timeout=-1) raises ValueError even when an item is waiting, and takes nothing."""
    q = impl.Queue(0)
    exc = _raises(ValueError, lambda: q.get(timeout=-1))
    assert str(exc) == TIMEOUT_MESSAGE, str(exc)
    q.put("kept")
    exc = _raises(ValueError, lambda: q.get(timeout=-1))
    assert str(exc) == TIMEOUT_MESSAGE, str(exc)
    assert q.get_nowait() == "kept"


@scenario("Queue", difference=NEGATIVE_TIMEOUTS)
def negative_timeout_is_ignored_unbounded_or_nonblocking(impl: Impl) -> None:
    """queue.Queue's quirk: timeout < 0 is accepted by an unbounded put and by block=False."""
    unbounded = impl.Queue(0)
    unbounded.put(1, timeout=-1)
    bounded = impl.Queue(5)
    bounded.put(2, block=False, timeout=-1)
    assert unbounded.get(block=False, timeout=-1) == 1
    assert bounded.get(block=False, timeout=-1) == 2


@scenario("ProcessQueue", difference=NEGATIVE_TIMEOUTS)
def process_negative_timeout_acts_as_expired(impl: Impl) -> None:
    """multiprocessing: timeout < 0 is no error; it acts as an expired timeout (Full, Empty,
    or success when the call can proceed at once)."""
    q = impl.ProcessQueue(1)
    q.put(1, timeout=-1)
    _raises_at_once(impl.Full, lambda: q.put(2, timeout=-1))
    assert q.get(timeout=LIMIT) == 1
    _raises_at_once(impl.Empty, lambda: q.get(timeout=-1))


# -- sizes and maxsize -------------------------------------------------------------------------


@scenario("Queue")
def sizes_follow_the_contents(impl: Impl) -> None:
    """qsize(), empty() and full() track puts and gets on a bounded queue (full() is
    0 < maxsize <= qsize())."""
    q = impl.Queue(2)
    states = [(q.qsize(), q.empty(), q.full())]
    q.put(1)
    states.append((q.qsize(), q.empty(), q.full()))
    q.put(2)
    states.append((q.qsize(), q.empty(), q.full()))
    q.get()
    states.append((q.qsize(), q.empty(), q.full()))
    assert states == [(0, True, False), (1, False, False), (2, False, True), (1, False, False)]


@scenario("Queue", difference=MAXSIZE_STORED)
def zero_or_negative_maxsize_is_unbounded(impl: Impl) -> None:
    """Queue(0) and Queue(-1) never fill; maxsize reads back as given (pressure: as 0)."""
    for maxsize in (0, -1):
        q = impl.Queue(maxsize)
        for i in range(30):
            q.put_nowait(i)
        assert not q.full() and q.qsize() == 30
        expected = 0 if impl.stores_nonpositive_maxsize_as_zero else maxsize
        assert q.maxsize == expected, f"Queue({maxsize}).maxsize == {q.maxsize}"


@scenario("Queue")
def shrinking_maxsize_makes_the_queue_full(impl: Impl) -> None:
    """CPython's test_shrinking_queue: q.maxsize = 2 on a queue holding 3 makes put_nowait
    raise Full until the queue is below the new bound."""
    q = impl.Queue(3)
    for item in (1, 2, 3):
        q.put(item)
    _raises_at_once(impl.Full, lambda: q.put_nowait(4))
    assert q.qsize() == 3
    q.maxsize = 2
    assert q.maxsize == 2 and q.full()
    _raises_at_once(impl.Full, lambda: q.put_nowait(4))
    q.get()
    _raises_at_once(impl.Full, lambda: q.put_nowait(4))
    q.get()
    q.put_nowait(4)
    assert q.full() and _drain(q, 2) == [3, 4]


@scenario("Queue")
def growing_maxsize_makes_room(impl: Impl) -> None:
    """Raising maxsize on a full queue lets put_nowait succeed; maxsize = 0 unbounds it."""
    q = impl.Queue(1)
    q.put(1)
    _raises_at_once(impl.Full, lambda: q.put_nowait(2))
    q.maxsize = 2
    q.put_nowait(2)
    assert q.full() and q.maxsize == 2
    q.maxsize = 0
    for i in range(3, 10):
        q.put_nowait(i)
    assert not q.full() and q.qsize() == 9


# -- task_done and join ------------------------------------------------------------------------


def _task_done_too_many(kind: str) -> Callable[[Impl], None]:
    def check(impl: Impl) -> None:
        q = getattr(impl, kind)(0)
        exc = _raises(ValueError, q.task_done)
        assert str(exc) == TASK_DONE_MESSAGE, str(exc)
        q.put(1)
        q.get(timeout=LIMIT)
        q.task_done()
        exc = _raises(ValueError, q.task_done)
        assert str(exc) == TASK_DONE_MESSAGE, str(exc)
        _bounded(q.join)
    check.__doc__ = (f"{kind}: task_done() beyond the items put raises "
                     f"ValueError('{TASK_DONE_MESSAGE}'), and the count stays at zero.")
    return check


register("task_done_too_many_times_raises_valueerror", _task_done_too_many("Queue"), ["Queue"])
register("joinable_task_done_too_many_times_raises_valueerror",
         _task_done_too_many("JoinableQueue"), ["JoinableQueue"])


@scenario("Queue")
def unfinished_tasks_counts_puts_not_yet_done(impl: Impl) -> None:
    """unfinished_tasks rises with each put and falls with each task_done, not with get;
    join() returns at once when it is zero."""
    q = impl.Queue(0)
    _bounded(q.join)
    counts = [q.unfinished_tasks]
    q.put("a")
    q.put("b")
    counts.append(q.unfinished_tasks)
    q.get()
    counts.append(q.unfinished_tasks)
    q.task_done()
    counts.append(q.unfinished_tasks)
    q.get()
    q.task_done()
    counts.append(q.unfinished_tasks)
    assert counts == [0, 2, 2, 1, 0]
    _bounded(q.join)


@scenario("Queue")
def join_blocks_until_every_task_is_done(impl: Impl) -> None:
    """join() blocks while any item is not marked done, even after every item was got."""
    q = impl.Queue(0)
    q.put(1)
    q.put(2)
    q.get()
    q.get()
    q.task_done()

    def last_done() -> None:
        q.task_done()

    _blocks(q.join, last_done)
    assert q.unfinished_tasks == 0


@scenario("Queue")
def join_with_worker_threads(impl: Impl) -> None:
    """CPython's queue_join_test: worker threads sum 100 items; join() returns after all are
    done, twice in a row on the same queue."""
    q = impl.Queue(0)
    total = [0]
    lock = threading.Lock()

    def worker() -> None:
        while (item := q.get()) is not None:
            with lock:
                total[0] += item
            q.task_done()
        q.task_done()

    workers = [_start_thread(worker) for _ in range(2)]
    for round_ in range(2):
        for i in range(50):
            q.put(i)
        _bounded(q.join)
        assert total[0] == sum(range(50)) * (round_ + 1), total
    for _ in workers:
        q.put(None)
    _bounded(q.join)
    _join_all(workers)


# -- many threads --------------------------------------------------------------------------------


@scenario("Queue")
def many_producers_one_consumer_keep_each_producers_order(impl: Impl) -> None:
    """Four producer threads on a small bound: every item arrives once, and each producer's
    items arrive in the order it put them."""
    q = impl.Queue(8)
    producers = [_start_thread(_produce, q, p, 60) for p in range(4)]
    got = _drain(q, 4 * 60)
    _join_all(producers)
    _check_exactly_once_in_order([got], 4, 60)
    assert q.empty()


@scenario("Queue")
def many_producers_many_consumers_deliver_each_item_once(impl: Impl) -> None:
    """Three producers, three consumers: every item is got exactly once, and each consumer
    sees each producer's items in order."""
    q = impl.Queue(8)
    results: queue.Queue[list[tuple[int, int]]] = queue.Queue()
    consumers = [_start_thread(_consume_until_none, q, results) for _ in range(3)]
    producers = [_start_thread(_produce, q, p, 60) for p in range(3)]
    _join_all(producers)
    for _ in consumers:
        q.put(None)
    _join_all(consumers)
    batches = [results.get_nowait() for _ in consumers]
    _check_exactly_once_in_order(batches, 3, 60)


# -- shutdown (3.13 API) ---------------------------------------------------------------------------


@scenario("Queue", "shutdown")
def shutdown_makes_every_put_raise_shutdown(impl: Impl) -> None:
    """After shutdown(), is_shutdown is True and put, put_nowait and timed puts raise ShutDown
    at once (even with room), adding nothing."""
    q = impl.Queue(2)
    assert q.is_shutdown is False
    q.shutdown()
    assert q.is_shutdown is True
    for put in (lambda: q.put(1), lambda: q.put_nowait(1), lambda: q.put(1, timeout=LIMIT),
                lambda: q.put(1, block=False)):
        _raises_at_once(_shutdown(impl), put)
    assert q.qsize() == 0 and q.unfinished_tasks == 0


@scenario("Queue", "shutdown")
def shutdown_get_drains_remaining_items_first(impl: Impl) -> None:
    """After shutdown(), gets return what is left in order; once empty, get() raises ShutDown
    at once instead of blocking, and get_nowait() raises ShutDown, not Empty (checked first)."""
    q = impl.Queue(0)
    for item in (1, 2, 3):
        q.put(item)
    q.shutdown()
    assert [q.get(), q.get_nowait(), q.get(timeout=LIMIT)] == [1, 2, 3]
    _bounded(lambda: _raises(_shutdown(impl), q.get))
    _raises_at_once(_shutdown(impl), lambda: q.get(timeout=LIMIT))
    exc = _raises_at_once(_shutdown(impl), q.get_nowait)
    assert not isinstance(exc, queue.Empty), f"{exc!r} is an Empty"


@scenario("Queue", "shutdown")
def shutdown_exception_is_neither_empty_nor_full(impl: Impl) -> None:
    """ShutDown derives from Exception and from neither Empty nor Full (queue.ShutDown itself on
    Python 3.13+)."""
    shutdown = _shutdown(impl)
    assert issubclass(shutdown, Exception)
    for other in (queue.Empty, queue.Full, impl.Empty, impl.Full):
        assert not issubclass(shutdown, other), f"{shutdown!r} derives from {other!r}"
    if hasattr(queue, "ShutDown"):
        assert issubclass(shutdown, queue.ShutDown)


@scenario("Queue", "shutdown")
def shutdown_wakes_blocked_getters(impl: Impl) -> None:
    """A get() blocked on an empty queue wakes and raises ShutDown when the queue is shut down,
    with or without immediate=True, and with or without a timeout."""
    for immediate, timeout in ((False, None), (True, LIMIT)):
        q = impl.Queue(0)
        _blocks_raising(_shutdown(impl), lambda: q.get(timeout=timeout),
                        lambda: q.shutdown(immediate=immediate))


@scenario("Queue", "shutdown")
def shutdown_wakes_blocked_putters(impl: Impl) -> None:
    """A put() blocked on a full queue wakes and raises ShutDown; shutdown() keeps the items,
    shutdown(immediate=True) discards them."""
    for immediate, left in ((False, 1), (True, 0)):
        q = impl.Queue(1)
        q.put(1)
        _blocks_raising(_shutdown(impl), lambda: q.put(2), lambda: q.shutdown(immediate=immediate))
        assert q.qsize() == left, (immediate, q.qsize())


@scenario("Queue", "shutdown")
def shutdown_immediate_discards_items_and_releases_join(impl: Impl) -> None:
    """shutdown(immediate=True) drains the queue, lowers unfinished_tasks by what it drained and
    wakes join(); a further task_done() raises ValueError."""
    q = impl.Queue(0)
    for item in (1, 2, 3):
        q.put(item)
    _blocks(q.join, lambda: q.shutdown(immediate=True))
    assert q.qsize() == 0 and q.unfinished_tasks == 0
    _raises_at_once(_shutdown(impl), q.get_nowait)
    exc = _raises(ValueError, q.task_done)
    assert str(exc) == TASK_DONE_MESSAGE, str(exc)


@scenario("Queue", "shutdown")
def join_after_immediate_shutdown_waits_for_items_already_got(impl: Impl) -> None:
    """Items got before shutdown(immediate=True) still hold join() until task_done()."""
    q = impl.Queue(0)
    for item in (1, 2, 3):
        q.put(item)
    assert q.get() == 1
    q.shutdown(immediate=True)
    assert q.unfinished_tasks == 1 and q.qsize() == 0
    _blocks(q.join, q.task_done)
    exc = _raises(ValueError, q.task_done)
    assert str(exc) == TASK_DONE_MESSAGE, str(exc)


@scenario("Queue", "shutdown")
def join_after_shutdown_waits_for_the_drain(impl: Impl) -> None:
    """After shutdown() (not immediate), join() returns only once the items left were got and
    marked done; it never raises ShutDown."""
    q = impl.Queue(0)
    q.put(1)
    q.put(2)
    q.shutdown()
    assert q.unfinished_tasks == 2

    def work_off() -> None:
        for _ in range(2):
            q.get()
            q.task_done()

    _blocks(q.join, work_off)
    assert q.unfinished_tasks == 0


@scenario("Queue", "shutdown")
def shutdown_can_be_repeated_in_any_order(impl: Impl) -> None:
    """shutdown() and shutdown(immediate=True) may be called again, in either order; the queue
    stays shut down and immediate=True still drains it."""
    first = impl.Queue(0)
    first.put(1)
    first.shutdown()
    first.shutdown()
    assert first.qsize() == 1
    first.shutdown(immediate=True)
    first.shutdown()
    assert first.is_shutdown is True and first.qsize() == 0 and first.unfinished_tasks == 0
    second = impl.Queue(0)
    second.put(1)
    second.shutdown(immediate=True)
    second.shutdown()
    second.shutdown(immediate=True)
    assert second.is_shutdown is True and second.qsize() == 0


@scenario("Queue", difference=CLOSE_IS_GLOBAL)
def close_shuts_the_queue_down_for_every_handle(impl: Impl) -> None:
    """queue.Queue has no close(); pressure's close() is shutdown() for every handle of the queue:
    another handle's put raises ShutDown, its gets drain what is left, then raise ShutDown."""
    q = impl.Queue(0)
    if not impl.close_is_global:
        assert not hasattr(q, "close"), "queue.Queue has no close()"
        return
    assert impl.attach is not None and impl.ShutDown is not None
    other = impl.attach(q)
    q.put(1)
    q.close()
    q.close()  # closing a closed queue does nothing
    assert other.is_shutdown is True
    _raises_at_once(_shutdown(impl), lambda: other.put(2))
    assert other.get_nowait() == 1
    _raises_at_once(_shutdown(impl), other.get_nowait)


# -- serialization -------------------------------------------------------------------------------


@scenario("Queue", difference=SERIALIZED_IN_PUT)
def unpicklable_items_and_copies(impl: Impl) -> None:
    """queue.Queue passes the very object through, picklable or not; pressure pickles in put:
    an unpicklable item raises there (the queue untouched) and get returns an equal copy."""
    q = impl.Queue(0)
    lock = threading.Lock()
    if impl.serialization_error is None:
        q.put(lock)
        assert q.get_nowait() is lock
    else:
        _raises(impl.serialization_error, lambda: q.put(lock))
        assert q.qsize() == 0 and q.unfinished_tasks == 0
    item = {"list": [1, 2]}
    q.put(item)
    got = q.get_nowait()
    assert got == item and (got is item) == (impl.serialization_error is None)


@scenario("ProcessQueue", difference=SERIALIZED_IN_PUT)
def process_unpicklable_item_does_not_break_the_queue(impl: Impl) -> None:
    """bpo-33078: multiprocessing reports an unpicklable item from its feeder thread and later
    puts still work; pressure raises in put. Either way the next item arrives."""
    q = impl.ProcessQueue(0)
    if impl.serialization_error is None:
        q.put(threading.Lock())
    else:
        _raises(impl.serialization_error, lambda: q.put(threading.Lock()))
    q.put("after")
    assert q.get(timeout=LIMIT) == "after"
    _raises(impl.Empty, lambda: q.get(timeout=0.2))


# -- SimpleQueue ---------------------------------------------------------------------------------


@scenario("SimpleQueue")
def simple_queue_is_an_unbounded_fifo(impl: Impl) -> None:
    """SimpleQueue: FIFO, qsize()/empty(), Empty from get_nowait, and none of the bounded API."""
    q = impl.SimpleQueue()
    assert q.empty() and q.qsize() == 0
    for i in range(40):
        q.put(i)
    q.put_nowait(40)
    assert q.qsize() == 41 and not q.empty()
    assert [q.get_nowait() for _ in range(20)] == list(range(20))
    assert _drain(q, 21) == list(range(20, 41))
    _raises_at_once(impl.Empty, q.get_nowait)
    for name in ("full", "task_done", "join", "maxsize"):
        assert not hasattr(q, name), f"SimpleQueue has no {name}"


@scenario("SimpleQueue")
def simple_queue_put_ignores_block_and_timeout(impl: Impl) -> None:
    """SimpleQueue.put accepts and ignores block and timeout, even a negative timeout."""
    q = impl.SimpleQueue()
    q.put(1, block=False, timeout=-1)
    q.put(2, True, -5)
    q.put(3, timeout=0)
    assert _drain(q, 3) == [1, 2, 3]


@scenario("SimpleQueue")
def simple_queue_get_timeouts(impl: Impl) -> None:
    """SimpleQueue.get: timeout < 0 raises ValueError (message as queue.Queue's), a timeout
    raises Empty after about that long, and a blocked get returns a later put."""
    q = impl.SimpleQueue()
    exc = _raises(ValueError, lambda: q.get(timeout=-1))
    assert str(exc) == TIMEOUT_MESSAGE, str(exc)
    _raises_after(impl, impl.Empty, lambda: q.get(timeout=TIMEOUT), TIMEOUT)
    assert _blocks(q.get, lambda: q.put("x")) == "x"


# -- process queues, in one process --------------------------------------------------------------


@scenario("ProcessQueue")
def process_nonblocking_calls_raise_full_and_empty(impl: Impl) -> None:
    """multiprocessing.Queue(1): put_nowait raises Full at once when full; get_nowait raises
    Empty at once when empty; block=False ignores the timeout."""
    q = impl.ProcessQueue(1)
    q.put_nowait(1)
    exc = _raises_at_once(impl.Full, lambda: q.put_nowait(2))
    assert isinstance(exc, queue.Full)
    _raises_at_once(impl.Full, lambda: q.put(2, block=False, timeout=5))
    assert q.get(timeout=LIMIT) == 1
    exc = _raises_at_once(impl.Empty, q.get_nowait)
    assert isinstance(exc, queue.Empty)
    _raises_at_once(impl.Empty, lambda: q.get(block=False, timeout=5))


@scenario("ProcessQueue")
def process_timeouts_raise_after_the_timeout(impl: Impl) -> None:
    """multiprocessing.Queue: timed put on a full queue raises Full, timed get on an empty one
    raises Empty, each after about the timeout."""
    q = impl.ProcessQueue(1)
    q.put(1)
    _raises_after(impl, impl.Full, lambda: q.put(2, timeout=TIMEOUT), TIMEOUT)
    assert q.get(timeout=LIMIT) == 1
    _raises_after(impl, impl.Empty, lambda: q.get(timeout=TIMEOUT), TIMEOUT)


@scenario("ProcessQueue")
def process_queue_close_releases_this_handle(impl: Impl) -> None:
    """multiprocessing.Queue.close() (pressure.multiprocessing too): put, get and get_nowait on
    the closed handle raise ValueError('Queue <repr> is closed'); closing twice is fine."""
    q = impl.ProcessQueue(0)
    q.put("left")
    assert q.get(timeout=LIMIT) == "left"
    q.close()
    q.close()
    for call in (lambda: q.put(1), q.get, q.get_nowait):
        exc = _raises(ValueError, call)
        assert str(exc) == f"Queue {q!r} is closed", str(exc)


def _put_then_get_back(q: Any, go: Any) -> None:
    """Child body: once ``go`` is set, put an item and get it back through this handle."""
    if not go.wait(LIMIT):
        raise SystemExit(2)
    q.put("from the child")
    if q.get(timeout=LIMIT) != "from the child":
        raise SystemExit(3)


@scenario("ProcessQueue", "fork", slow=True)
def process_close_leaves_other_processes_working(impl: Impl) -> None:
    """close() in the parent leaves a forked child's handle on the same queue working: the
    child still puts and gets after the parent closed its own."""
    q = impl.ProcessQueue(0, method="fork")
    go = multiprocessing.get_context("fork").Event()
    child = _process("fork", _put_then_get_back, q, go)
    child.start()
    q.close()
    go.set()
    _join_all([child])
    _raises(ValueError, lambda: q.put(1))


@scenario("ProcessQueue", difference=HANDLES_PICKLE)
def process_queue_pickling(impl: Impl) -> None:
    """pickle.dumps(multiprocessing.Queue) raises RuntimeError (inheritance only); a pressure
    handle pickles, and the copy reaches the same queue."""
    q = impl.ProcessQueue(0)
    if not impl.pickles_process_queues:
        exc = _raises(RuntimeError, lambda: pickle.dumps(q))
        assert str(exc) == PICKLE_MESSAGE, str(exc)
        return
    copy = impl.adopt(pickle.loads(pickle.dumps(q)))
    copy.put("via the copy")
    assert q.get(timeout=LIMIT) == "via the copy"


# -- process queues across processes -------------------------------------------------------------


def _producers_in_processes(impl: Impl, method: str) -> None:
    q = impl.ProcessQueue(8, method=method)
    producers = [_process(method, _produce, q, p, 40) for p in range(2)]
    for process in producers:
        process.start()
    got = _drain(q, 2 * 40)
    _join_all(producers)
    _check_exactly_once_in_order([got], 2, 40)
    _raises(impl.Empty, lambda: q.get(timeout=0.2))


@scenario("ProcessQueue", "fork", slow=True)
def fork_producers_deliver_each_item_once_in_order(impl: Impl) -> None:
    """Two forked producer processes on a bound of 8: each item arrives once, each producer's
    items in order, nothing extra."""
    _producers_in_processes(impl, "fork")


@scenario("ProcessQueue", "spawn", slow=True)
def spawn_producers_deliver_each_item_once_in_order(impl: Impl) -> None:
    """Two spawned producer processes (the queue reaches them pickled): each item arrives once,
    each producer's items in order, nothing extra."""
    _producers_in_processes(impl, "spawn")


@scenario("ProcessQueue", "fork", slow=True)
def fork_consumers_get_each_item_once(impl: Impl) -> None:
    """Two forked consumer processes share 60 items: together they get each exactly once,
    each seeing them in put order."""
    q = impl.ProcessQueue(10, method="fork")
    results = impl.ProcessQueue(0, method="fork")
    consumers = [_process("fork", _consume_until_none, q, results) for _ in range(2)]
    for process in consumers:
        process.start()
    _produce(q, 0, 60)
    for _ in consumers:
        q.put(None)
    batches = _drain(results, 2)
    _join_all(consumers)
    _check_exactly_once_in_order(batches, 1, 60)


@scenario("JoinableQueue", "spawn", slow=True)
def joinable_join_waits_for_a_spawned_childs_task_done(impl: Impl) -> None:
    """JoinableQueue.join() in the parent blocks until a spawned child process has got every
    item, in put order, and called task_done() for each."""
    q = impl.JoinableQueue(0, method="spawn")
    for i in range(20):
        q.put(i)
    child = _process("spawn", _work_off, q, 20)
    _blocks(q.join, child.start)
    _join_all([child])
    _bounded(q.join)
    _raises(impl.Empty, lambda: q.get(timeout=0.2))


@scenario("ProcessSimpleQueue", "fork", slow=True)
def process_simple_queue_carries_items_from_a_child(impl: Impl) -> None:
    """multiprocessing.SimpleQueue: a forked child's puts arrive in order; empty() tracks it."""
    q = impl.ProcessSimpleQueue(method="fork")
    assert q.empty()
    child = _process("fork", _produce, q, 0, 20)
    child.start()
    got = _bounded(lambda: [q.get() for _ in range(20)])
    _join_all([child])
    assert got == [(0, i) for i in range(20)]
    assert q.empty()

"""``pressure.multiprocessing``: the ``multiprocessing`` module, with queues in Redis.

Change the import and the rest of the program stays as it was::

    import pressure.multiprocessing as multiprocessing

    q = multiprocessing.Queue()                        # a pressure queue
    p = multiprocessing.Process(target=work, args=(q,))  # the stdlib's Process
    p.start(); q.put("job"); p.join()

``Queue``, ``JoinableQueue`` and ``SimpleQueue`` follow multiprocessing's
semantics; ``Pool`` is ``pressure.pool.Pool`` (a multiprocessing.Pool whose tasks
run in pressure workers on any host); ``get_context()`` returns a context whose
queues and Pool are these; every other public name (``Process``, ``Manager``, ``cpu_count``,
``current_process``, ...) is the stdlib module's own. ``multiprocessing.queues``
style submodules are not provided.

Unlike the stdlib queues, these handles pickle anywhere (not only while
spawning a process), reach processes on other hosts, and can be given a
``name`` to attach to an existing pressure queue.

Anonymous queues (``name=None``, the default, as ``multiprocessing.Queue()``
is) are deleted when the process that created them exits, after
multiprocessing has joined its child processes, as every anonymous
``pressure.Queue`` is (see its docstring). A named queue is never deleted
automatically: a queue whose items must outlive the creating process needs a name.
"""

from __future__ import annotations

import multiprocessing as _mp
import operator
import os
from multiprocessing.context import BaseContext
from typing import Any, Generic, TypeVar

import redis
import redis.cluster

from . import serializers
from .pool import Pool as _PressurePool
from .queue import Queue as _PressureQueue
from .signing import Authkey

_OWN = ["Queue", "JoinableQueue", "SimpleQueue", "Pool", "Context", "DefaultContext", "ForkContext", "ForkServerContext",
        "SpawnContext", "get_context"]
__all__ = _OWN + sorted(set(_mp.__all__) - set(_OWN))

T = TypeVar("T")


def _bound(maxsize: int | None) -> int | None:
    """Read maxsize as multiprocessing does (<= 0, its default, means unbounded): as naming
    no bound, as None does (a queue that exists is attached to as it is; one created is
    unbounded until a handle that names a bound attaches)."""
    if maxsize is None or maxsize <= 0:
        return None
    return operator.index(maxsize)


class _Handle(Generic[T]):
    """What the three queues share: the wrapped pressure queue (which deletes an
    anonymous queue when its creator exits), the per-process closed flag, and pickling."""

    def __init__(
        self,
        maxsize: int | None,
        name: str | None,
        url: str | None,
        connection: redis.Redis | redis.cluster.RedisCluster | None,
        prefix: str | None,
        serializer: str | serializers.Serializer,
        client_id: str | None,
        authkey: Authkey | None = None,
        insecure_pickle: bool = False,
    ) -> None:
        self._queue: _PressureQueue[T] = _PressureQueue(
            name=name, maxsize=_bound(maxsize), url=url, connection=connection, prefix=prefix,
            serializer=serializer, client_id=client_id, authkey=authkey, insecure_pickle=insecure_pickle,
        )
        self._closed_in: int | None = None
        self._put_in: int | None = None

    def _closed(self) -> bool:
        """Whether close() was called on this handle in this process (a copy in another
        process, forked or unpickled, starts open)."""
        return self._closed_in == os.getpid()

    def _check_open(self) -> None:
        if self._closed():
            raise ValueError(f"Queue {self!r} is closed")

    # -- pressure extensions ------------------------------------------------------------

    @property
    def name(self) -> str:
        """The queue's protocol name (anonymous queues get a unique one)."""
        return self._queue.name

    def delete(self) -> None:
        """Delete the queue and every key it has, for every process; unread items are lost.

        Processes blocked on it wake and raise ``pressure.QueueDoesNotExist``.
        """
        self._queue.delete()

    def disconnect(self) -> None:
        """Close this handle's connections to Redis (the queue is untouched). The handle
        reconnects if used again."""
        self._queue.disconnect()

    def __repr__(self) -> str:
        q = self._queue
        cls = type(self)
        return f"<{cls.__module__}.{cls.__qualname__} name={q.name!r} prefix={q.prefix!r} url={q.url!r}>"

    # -- pickling: configuration only; the copy is open and deletes nothing at exit -----

    def __getstate__(self) -> dict[str, Any]:
        return {"queue": self._queue}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._queue = state["queue"]
        self._closed_in = None
        self._put_in = None


class Queue(_Handle[T]):
    """A multiprocessing.Queue in Redis: a FIFO queue shared by processes on any host.

    ``maxsize <= 0`` (the default) means unbounded. ``close()`` acts on this
    handle in this process only: other handles and processes keep working.
    Every put reaches Redis before it returns (there is no feeder thread), so
    ``join_thread()`` has nothing to wait for. A negative timeout is an
    expired one, as in multiprocessing (``queue.Queue`` raises ValueError).

    Keyword-only extensions: ``name`` attaches to (or creates) a named
    pressure queue; a ``maxsize`` <= 0 (or None) then names no bound and accepts
    whatever bound it has (one it creates is unbounded until a handle naming a
    bound attaches, which sets it);
    ``url``, ``connection``, ``prefix``, ``serializer`` and ``client_id`` are
    those of ``pressure.Queue``.
    """

    def __init__(
        self,
        maxsize: int | None = 0,
        *,
        name: str | None = None,
        url: str | None = None,
        connection: redis.Redis | redis.cluster.RedisCluster | None = None,
        prefix: str | None = None,
        serializer: str | serializers.Serializer = "pickle",
        client_id: str | None = None,
        authkey: Authkey | None = None,
        insecure_pickle: bool = False,
    ) -> None:
        super().__init__(maxsize, name, url, connection, prefix, serializer, client_id, authkey, insecure_pickle)

    def put(self, obj: T, block: bool = True, timeout: float | None = None) -> None:
        """Put obj into the queue.

        If 'block' is true and 'timeout' is None (the default), block until a
        free slot is available. With a 'timeout', block at most that many
        seconds (a negative one does not wait) and raise ``queue.Full`` if no
        slot became free. With 'block' false, raise ``queue.Full`` at once if
        the queue is full ('timeout' is ignored). Raises ValueError if this
        handle was closed in this process.
        """
        self._check_open()
        if block and timeout is not None and timeout < 0:
            block = False  # multiprocessing: a negative timeout has already expired
        self._queue.put(obj, block, timeout)
        self._put_in = os.getpid()

    def put_nowait(self, obj: T) -> None:
        """Equivalent to ``put(obj, False)``."""
        self.put(obj, False)

    def get(self, block: bool = True, timeout: float | None = None) -> T:
        """Remove and return an item from the queue.

        If 'block' is true and 'timeout' is None (the default), block until an
        item is available. With a 'timeout', block at most that many seconds
        (a negative one does not wait) and raise ``queue.Empty`` if none came.
        With 'block' false, return an item if one is immediately available,
        else raise ``queue.Empty`` ('timeout' is ignored). Raises ValueError if
        this handle was closed in this process.
        """
        self._check_open()
        if block and timeout is not None and timeout < 0:
            block = False
        return self._queue.get(block, timeout)

    def get_nowait(self) -> T:
        """Equivalent to ``get(False)``."""
        return self.get(False)

    def qsize(self) -> int:
        """Return the approximate size of the queue (not reliable!)."""
        return self._queue.qsize()

    def empty(self) -> bool:
        """Return True if the queue is empty, False otherwise (not reliable!).

        Raises ``OSError("handle is closed")`` once this handle is closed in this process
        after a put here, as multiprocessing does (its feeder thread, started by the first
        put, closes the pipe at close()); an unused closed handle still answers.
        """
        if self._put_in == os.getpid() and self._closed():
            raise OSError("handle is closed")
        return self._queue.empty()

    def full(self) -> bool:
        """Return True if the queue is full, False otherwise (not reliable!)."""
        return self._queue.full()

    def close(self) -> None:
        """Indicate that this process will put and get no more through this handle.

        Afterwards put() and get() on this handle raise ValueError, and
        empty() raises OSError if this process put through it, as in
        multiprocessing; qsize() and full() still answer. Other handles and
        other processes are unaffected, and the queue keeps its items.
        Closing twice is fine. The handle's consumer leaves the queue (it
        deregisters; nothing it got is given back); the sockets stay open until
        ``disconnect()`` (another thread may still be using them).
        """
        self._closed_in = os.getpid()
        self._queue._leave()

    def join_thread(self) -> None:
        """Join the background thread: only valid after close().

        Puts are written to Redis before they return, so nothing is ever
        buffered and this returns at once. Raises AssertionError, as
        multiprocessing does, if the handle is not closed.
        """
        if not self._closed():
            raise AssertionError(f"Queue {self!r} not closed")

    def cancel_join_thread(self) -> None:
        """Accepted for compatibility; does nothing.

        multiprocessing uses it to let a process exit without flushing the
        items its feeder thread still buffers. Here every put is in Redis when
        it returns, so there is never anything to flush or to lose.
        """


class JoinableQueue(Queue[T]):
    """A multiprocessing.JoinableQueue in Redis: a Queue with task_done() and join().

    The count of unfinished tasks is kept in Redis, shared by every process
    and host that uses the queue.
    """

    def task_done(self) -> None:
        """Indicate that a formerly enqueued task is complete.

        For each get() used to fetch a task, a subsequent call to task_done()
        tells the queue that the processing on the task is complete; a join()
        waiting on the queue resumes when every item has been processed.
        Raises ValueError if called more times than there were items placed
        in the queue.
        """
        self._queue.task_done()

    def join(self) -> None:
        """Block until every item put in the queue, by any process, has been got and
        marked done with task_done()."""
        self._queue.join()


class SimpleQueue(_Handle[T]):
    """A multiprocessing.SimpleQueue in Redis: put(), get(), empty() and close().

    Unbounded. After ``close()`` on this handle, in this process, put(),
    get() and empty() raise ``OSError("handle is closed")``, as
    multiprocessing does; other handles and processes are unaffected.
    Keyword-only extensions as for ``Queue``.
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        url: str | None = None,
        connection: redis.Redis | redis.cluster.RedisCluster | None = None,
        prefix: str | None = None,
        serializer: str | serializers.Serializer = "pickle",
        client_id: str | None = None,
        authkey: Authkey | None = None,
        insecure_pickle: bool = False,
    ) -> None:
        super().__init__(0, name, url, connection, prefix, serializer, client_id, authkey, insecure_pickle)

    def _check_handle(self) -> None:
        if self._closed():
            raise OSError("handle is closed")

    def put(self, obj: T) -> None:
        """Put obj into the queue (never blocks: the queue is unbounded)."""
        self._check_handle()
        self._queue.put(obj)

    def get(self) -> T:
        """Remove and return an item from the queue, blocking until one is available."""
        self._check_handle()
        return self._queue.get()

    def empty(self) -> bool:
        """Return True if the queue is empty, False otherwise (not reliable!)."""
        self._check_handle()
        return self._queue.empty()

    def close(self) -> None:
        """Close this handle in this process; idempotent. Other handles and processes
        are unaffected, and the queue keeps its items; the handle's consumer leaves it."""
        self._closed_in = os.getpid()
        self._queue._leave()


Pool = _PressurePool


class Context:
    """A stdlib multiprocessing context whose Queue, JoinableQueue and SimpleQueue are
    pressure queues and whose Pool is ``pressure.pool.Pool`` (its local workers start with
    this context's start method); every other attribute (Process, Event, ...) is the context's.

    As in the stdlib, there is one per start method: ``ForkContext``, ``SpawnContext``,
    ``ForkServerContext`` (and ``DefaultContext``, which the module's functions act on), each
    made once, so ``get_context("spawn") is get_context("spawn")`` and a context's
    ``get_context()`` is itself.

    Do not pass it as ``mp_context`` to ``concurrent.futures.ProcessPoolExecutor``,
    which reads the internals of the stdlib queues: pass ``context.stdlib`` there.
    """

    Queue = Queue
    JoinableQueue = JoinableQueue
    SimpleQueue = SimpleQueue

    def __init__(self, context: BaseContext) -> None:
        object.__setattr__(self, "_context", context)

    def Pool(self, processes: int | None = None, initializer: Any = None, initargs: Any = (),  # noqa: N802
             maxtasksperchild: int | None = None, **kwargs: Any) -> _PressurePool:
        """Returns a process pool object (``pressure.pool.Pool``) whose local workers start
        with this context; keyword-only arguments are the pool's."""
        return _PressurePool(processes, initializer, initargs, maxtasksperchild, context=self, **kwargs)

    @property
    def stdlib(self) -> BaseContext:
        """The wrapped stdlib context."""
        context: BaseContext = object.__getattribute__(self, "_context")
        return context

    def get_context(self, method: str | None = None) -> Context:
        """The context for ``method`` (this one if None), with pressure queues."""
        return _wrap(self.stdlib.get_context(method))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stdlib, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.stdlib, name, value)  # e.g. ``context.reducer = ...``

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.stdlib)) | {"Queue", "JoinableQueue", "SimpleQueue", "Pool", "stdlib"})

    def __repr__(self) -> str:
        return f"<pressure.multiprocessing.{type(self).__qualname__} of {self.stdlib!r}>"


class ForkContext(Context):
    """The "fork" start method's context, with pressure queues."""


class SpawnContext(Context):
    """The "spawn" start method's context, with pressure queues."""


class ForkServerContext(Context):
    """The "forkserver" start method's context, with pressure queues."""


class DefaultContext(Context):
    """The default context, with pressure queues: ``get_context()`` is the context of the
    start method set (``set_start_method``) or else the platform's default."""


#: The pressure context of each stdlib context, made once (the stdlib's are made once too).
_CONTEXTS: dict[BaseContext, Context] = {}
_CLASSES: dict[str, type[Context]] = {
    cls.__name__: cls for cls in (ForkContext, SpawnContext, ForkServerContext, DefaultContext)
}


def _wrap(context: BaseContext) -> Context:
    """The one pressure context of the stdlib ``context``."""
    wrapped = _CONTEXTS.get(context)
    if wrapped is None:
        wrapped = _CONTEXTS.setdefault(context, _CLASSES.get(type(context).__name__, Context)(context))
    return wrapped


_default_context = _wrap(_mp.context._default_context)


def get_context(method: str | None = None) -> Context:
    """Return the multiprocessing context for ``method`` ("fork", "spawn", "forkserver",
    or None for the default's: the one ``set_start_method`` set, or else the platform's
    default), with pressure queues; always the same object for the same context."""
    return _default_context.get_context(method)


def __getattr__(name: str) -> Any:
    """Every other public name is the stdlib multiprocessing module's."""
    if not name.startswith("_"):  # never __path__ & co: no stdlib submodule under our name
        try:
            return getattr(_mp, name)
        except AttributeError:
            pass
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

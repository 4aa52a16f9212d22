"""Lifecycle: a queue handle's create-or-attach, close, shutdown and delete, and the handle's own.

``Lifecycle`` is the half of a queue handle that begins and ends things: the queue's
(protocol Create on construction, or attach only; ``close``, ``shutdown``, ``delete``, and
the delete at exit of an anonymous queue) and the handle's (pickling as configuration,
``disconnect``, the context manager): ``pressure.Queue`` inherits it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from . import _log, serializers
from ._consumer import _Consumer
from ._roles import CONSUMER, PRODUCER, _Roles
from ._scripts import (
    CLOSE,
    CREATE,
    DELETE,
    DRAIN,
    SET_BOUND,
    CloseStatus,
    CreateStatus,
    DeleteStatus,
    DrainStatus,
    QueueScript,
    SetBoundStatus,
)
from ._validate import Options
from .connection import Backend, PackedScript
from .errors import PressureError, QueueDoesNotExist, QueueExistsError
from .keys import QueueKeys
from .signing import recorded_name, resolve_authkey

if TYPE_CHECKING:
    import multiprocessing.util

    from .queue import Queue

__all__ = ["Lifecycle"]

T = TypeVar("T")

#: How long create-or-attach waits for a Delete in progress to finish.
_CREATE_WAIT = 5.0
#: multiprocessing runs exit finalizers of priority < 0 after joining its child processes
#: (and its own queues' feeder threads, at -5): anonymous queues are deleted after those.
_EXIT_PRIORITY = -10


def _spawning() -> bool:
    """Whether this process is pickling the arguments of a child process it is starting."""
    from multiprocessing.context import get_spawning_popen

    return get_spawning_popen() is not None


def _delete_at_exit(cls: type[Queue[Any]], state: dict[str, Any]) -> None:
    """Delete an anonymous queue as its creator exits, through a new handle built from
    the original's configuration; a failure is logged, never raised."""
    queue = cls.__new__(cls)
    queue.__setstate__(state)
    try:
        queue.delete()
    except QueueDoesNotExist:
        pass  # deleted already
    except PressureError as exc:
        _log.event(_log.QUEUE, logging.WARNING, "anonymous_delete_failed", "could not delete anonymous queue "
                   "%r at exit: %s", queue.name, exc, queue=queue.name, key=queue.keys.base, error=str(exc))
    finally:
        queue.disconnect()


def created_bound(reply: Any, name: str, kind: str, maxsize: int | None,
                  parse_bound: Callable[[bytes | str], int]) -> int | None:
    """Check create.lua's reply: the queue's bound; None if a Delete is running or was
    interrupted (create again, a little later); QueueExistsError if the queue is of another
    kind or bound. (The sync handles' and pressure.aio's.)"""
    status, stored = reply
    if status == CreateStatus.OTHER_KIND:
        other = stored.decode() if isinstance(stored, bytes) else str(stored)
        raise QueueExistsError(f"queue {name!r} already exists as a {other} queue, not a {kind} queue")
    if status == CreateStatus.DELETING:
        return None
    bound = parse_bound(stored)
    if status == CreateStatus.EXISTED and maxsize is not None and bound != maxsize:
        raise QueueExistsError(f"queue {name!r} already exists with maxsize={bound}, not {maxsize}")
    return bound


def not_there(name: str, prefix: str) -> QueueDoesNotExist:
    """``create=False`` on a queue that does not exist."""
    return QueueDoesNotExist(f"queue {name!r} does not exist (create=False attaches only; "
                             f"check the name, the prefix {prefix!r} and the server)")


def attached_bound(name: str, stored: int, maxsize: int) -> None:
    """``create=False`` with ``maxsize`` on a queue whose bound was named already: it must agree."""
    if stored != maxsize:
        raise QueueExistsError(f"queue {name!r} already exists with maxsize={stored}, not {maxsize}")


class Lifecycle(Generic[T]):
    """Create-or-attach, close, shutdown and delete; pickling and disconnecting the handle: a
    base class of Queue."""

    # what it uses of the queue handle (set by Queue._setup)
    _KIND: str
    _name: str
    _prefix: str
    _keys: QueueKeys
    _variant: str
    _backend: Backend
    _options: Options
    _consumer: _Consumer[T]
    _roles: _Roles
    _serializer_spec: str | serializers.Serializer
    _serializer: serializers.Serializer
    _client_id: str | None
    _authkey: tuple[bytes, ...]

    #: Deletes an anonymous queue when its creating process exits (None otherwise).
    _exit_delete: multiprocessing.util.Finalize[None] | None

    @property
    def client_id(self) -> str:
        raise NotImplementedError

    def _setup(self, name: str, prefix: str, serializer: str | serializers.Serializer,
               client_id: str | None, backend: Backend, options: Options,
               authkey: tuple[bytes, ...] = ()) -> None:
        raise NotImplementedError

    def _missing(self, forget: bool = True) -> QueueDoesNotExist:
        raise NotImplementedError

    def _call(self, script: QueueScript, *args: Any, mutating: bool = True) -> Any:
        raise NotImplementedError

    if TYPE_CHECKING:
        # what it uses of Queue's other base classes: declared for the type checker only (a
        # stub here would hide the real one from a class listing Lifecycle before that base)
        def _parse_bound(self, raw: bytes | str) -> int: ...  # Inspection

        @property
        def exists(self) -> bool: ...  # Inspection

        @property
        def maxsize(self) -> int: ...  # Inspection

        def _settle_owed(self, flush: bool = False) -> None: ...  # Reliability

    # -- pickling: the handle travels as configuration, never as a socket -----------

    def __getstate__(self) -> dict[str, Any]:
        return {
            "name": self._name,
            "prefix": self._prefix,
            "serializer": self._serializer_spec,
            "client_id": self._client_id,
            "config": self._backend.config,
            "options": self._options,
            # the keys travel only to a child process being started, as multiprocessing's
            # authkey does; anywhere else the other side reads its own (PRESSURE_AUTHKEY)
            "signed": bool(self._authkey),
            "authkey": self._authkey if _spawning() else (),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        keys = tuple(state.get("authkey", ())) or ()
        if state.get("signed") and not keys:
            keys = resolve_authkey(None)
            if not keys:
                raise ValueError(f"queue {state['name']!r} signs its items, and its handle carries no key "
                                 f"(keys are never pickled): set PRESSURE_AUTHKEY in this process")
        self._setup(state["name"], state["prefix"], state["serializer"], state["client_id"],
                    Backend(state["config"]), state["options"], keys)

    # -- create-or-attach -----------------------------------------------------------

    def _create(self, maxsize: int | None) -> int:
        """Create the queue, or attach to it (with ``maxsize`` if one is given): its bound.
        ``maxsize`` None names no bound: a queue created so is unbounded until a handle that
        names one attaches, which sets it (create.lua); a bound named already stays."""
        deadline = time.monotonic() + _CREATE_WAIT
        while True:
            _, tail = self._create_call(maxsize)
            bound = self._created(self._call(CREATE, *tail), maxsize)
            if bound is not None:
                return bound
            if time.monotonic() > deadline:
                raise PressureError(
                    f"queue {self._name!r} is being deleted, or an interrupted delete left "
                    f"its keys behind: cannot create it now"
                )
            time.sleep(0.02)

    def _create_call(self, maxsize: int | None) -> tuple[PackedScript, list[bytes | str | int]]:
        """create.lua for this queue as a call for ``Backend.pipeline`` (so a create can share
        a round trip with other commands); ``_created`` checks its reply."""
        k = self._keys
        return (CREATE.command(k, variant=self._variant),
                [0 if maxsize is None else maxsize, self._KIND, k.inbox_prefix, k.inflight_prefix,
                 k.held_prefix, k.logs, "" if maxsize is None else "1", recorded_name(self._serializer)])

    def _created(self, reply: Any, maxsize: int | None) -> int | None:
        """Check create.lua's reply: ``created_bound``."""
        return created_bound(reply, self._name, self._KIND, maxsize, self._parse_bound)

    def _attach(self, maxsize: int | None) -> None:
        """``create=False``: the queue must exist already (of this kind, and with ``maxsize``
        if one is given: it sets the bound of a queue created without one, as ``_create``
        does). One read-only round trip without ``maxsize``, nothing written."""
        if not self.exists:
            raise not_there(self._name, self._prefix)
        if maxsize is None:
            return
        status = self._call(SET_BOUND, maxsize, "unset")
        if status == SetBoundStatus.NO_QUEUE:
            raise self._missing()
        if status == SetBoundStatus.NAMED:
            attached_bound(self._name, self.maxsize, maxsize)

    # -- close, shutdown, delete ----------------------------------------------------

    def close(self) -> None:
        """Close the queue for every client (protocol Close): ``shutdown(immediate=False)``.

        Further puts raise ShutDown; consumers drain what is left (and what other
        consumers give back or leave at their death), then get raises ShutDown,
        and blocked consumers and producers wake. Closing a
        closed queue does nothing. Unlike multiprocessing.Queue.close(), this
        acts on the shared queue, not on this handle: see ``disconnect()``.
        """
        while True:
            result = self._call(CLOSE, self.client_id, self._keys.inbox_prefix)
            if result == CloseStatus.NO_QUEUE:
                raise self._missing()
            if result != CloseStatus.BUSY:
                return
            self._roles.wait_for_role(PRODUCER, self._backend.slice)

    def shutdown(self, immediate: bool = False) -> None:
        """Shut-down the queue, making queue gets and puts raise ShutDown.

        By default, gets will only raise once the queue is empty. Set
        'immediate' to True to make gets raise immediately instead, discarding
        what is queued (unfinished tasks drop by the number discarded).
        All blocked callers of put() and get() will be unblocked.
        """
        self.close()
        if not immediate:
            return
        while True:
            result = self._call(DRAIN, self.client_id)
            if result == DrainStatus.NO_QUEUE:
                raise self._missing()
            if result != DrainStatus.BUSY:
                return
            self._roles.wait_for_role(CONSUMER, self._backend.slice)

    def delete(self) -> None:
        """Delete the queue and every key it has (protocol Delete); unread items are lost.

        Blocked clients wake (producers and consumers raise QueueDoesNotExist);
        the keys go in one step once neither role is held.
        """
        k = self._keys
        prefixes = (k.inbox_prefix, k.inflight_prefix, k.held_prefix, k.logs)
        result = self._call(DELETE, "begin", *prefixes)
        if self._exit_delete is not None:
            self._exit_delete.cancel()
            self._exit_delete = None
        while True:
            if result == DeleteStatus.DELETED:
                return
            if result == DeleteStatus.NO_QUEUE:
                raise self._missing()
            if result == DeleteStatus.RECREATED:
                raise PressureError(f"queue {self._name!r} was created again while being deleted")
            self._roles.wait_for_role(PRODUCER if result == DeleteStatus.WAIT_PRODUCER else CONSUMER,
                                      self._backend.slice)
            result = self._call(DELETE, "finish", *prefixes)

    # -- the handle's resources -------------------------------------------------------

    def disconnect(self) -> None:
        """Close this handle's connections (the queue itself is untouched; never closes a
        ``connection`` passed in). Its consumers leave the queue first: what they hold and
        did not acknowledge goes back at once. The handle reconnects if used again."""
        consumer = self._consumer
        if consumer.owed or consumer.counts_owed or (self._backend._thread.unread and (
                self._options.reliable or consumer.counting)):
            try:  # task_done()s posted: their replies, and what must be sent again
                self._settle_owed(flush=True)
            except QueueDoesNotExist:
                pass  # the queue is gone, and nothing of it is in flight
            except PressureError as exc:  # in flight still: redelivered, never lost
                _log.event(_log.QUEUE, logging.WARNING, "acks_unconfirmed", "queue %r: acknowledgements not "
                           "confirmed (their items are redelivered): %s", self._name, exc, queue=self._name,
                           key=self._keys.base, error=str(exc))
        self._leave()
        if self._options.reliable:  # what it held went back: none of it is its to settle now
            consumer.unacked.clear()
            consumer.holding.clear()
        self._backend.disconnect()

    def _leave(self) -> None:
        """This handle's consumers in this process leave the queue: they deregister, giving
        back what they hold as at a death, without being taken for dead (see Departure). A
        later get registers again. Never raises."""
        self._consumer.departure.leave()

    def __enter__(self) -> Queue[T]:
        return cast("Queue[T]", self)  # a base class of Queue only

    def __exit__(self, *exc_info: object) -> None:
        self.disconnect()

"""The queue's lifecycle for ``AsyncQueue``: create-or-attach (``open``, ``create=False``),
``close``, ``shutdown`` and ``delete``, with the sync handle's scripts and checks
(pressure/_lifecycle.py). ``_Lifecycle`` is a base class of ``AsyncQueue``."""

from __future__ import annotations

import asyncio
import multiprocessing.util
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from .._lifecycle import attached_bound, created_bound, not_there
from .._records import _BUSY, _NO_QUEUE
from .._roles import CONSUMER, PRODUCER, _Roles
from .._scripts import CLOSE, CREATE, DELETE, DRAIN, INFO, SET_BOUND, DeleteStatus, SetBoundStatus
from ..errors import PressureError
from ..keys import QueueKeys
from ..signing import recorded_name
from ._link import _Link

if TYPE_CHECKING:
    from ..errors import QueueDoesNotExist
    from ._queue import AsyncQueue

T = TypeVar("T")

#: How long to wait to create a queue that is being deleted.
_CREATE_WAIT = 5.0


class _Lifecycle(Generic[T]):
    """Create-or-attach, close, shutdown, delete: a base class of ``AsyncQueue``."""

    # the handle's state (set by AsyncQueue.__init__)
    _KIND: str
    _link: _Link
    _roles: _Roles
    _name: str
    _prefix: str
    _keys: QueueKeys
    _variant: str
    _client_id: str
    _bound: int | None
    _opened: bool
    _create_missing: bool
    _exit_delete: multiprocessing.util.Finalize[None] | None
    _serializer: Any
    # and the handle's methods it calls
    _call: Callable[..., Coroutine[Any, Any, Any]]
    _missing: Callable[..., Awaitable[QueueDoesNotExist]]
    _parse_bound: Callable[[bytes | str], int]

    async def open(self) -> AsyncQueue[T]:
        """Create the queue if it does not exist, else attach to it (QueueExistsError if
        ``maxsize`` was given and differs, or the queue is of another kind). Idempotent."""
        if self._opened:
            return cast("AsyncQueue[T]", self)
        if not self._create_missing:
            await self._attach()
            self._opened = True
            return cast("AsyncQueue[T]", self)
        k = self._keys
        deadline = time.monotonic() + _CREATE_WAIT
        while True:
            # (a bound not named: see Lifecycle._create)
            reply = await self._link.run(
                "create" + self._variant, CREATE.keys(k), CREATE.check(
                    (0 if self._bound is None else self._bound, self._KIND, k.inbox_prefix,
                     k.inflight_prefix, k.held_prefix, k.logs, "" if self._bound is None else "1",
                     recorded_name(self._serializer))))
            if created_bound(reply, self._name, self._KIND, self._bound, self._parse_bound) is not None:
                break
            if time.monotonic() > deadline:
                raise PressureError(f"queue {self._name!r} is being deleted, or an interrupted delete "
                                    f"left its keys behind: cannot create it now")
            await asyncio.sleep(0.02)
        self._opened = True
        return cast("AsyncQueue[T]", self)

    async def _attach(self) -> None:
        """``create=False``: the queue must exist (QueueDoesNotExist), as ``pressure.Queue``'s
        (``Lifecycle._attach``): with ``maxsize``, it sets the bound of a queue created
        without one, and must agree with one named already."""
        k, variant = self._keys, self._variant

        async def info() -> Any:  # (not self._call: the handle is not open yet)
            return await self._link.run("info" + variant, INFO.keys(k), INFO.check((1,)), mutating=False)

        if not (await info())[0]:
            raise not_there(self._name, self._prefix)
        if self._bound is None:
            return
        status = await self._link.run("set_bound" + variant, SET_BOUND.keys(k), SET_BOUND.check((self._bound, "unset")))
        if status == SetBoundStatus.NO_QUEUE:
            raise await self._missing()
        if status == SetBoundStatus.NAMED:
            attached_bound(self._name, self._parse_bound((await info())[2]), self._bound)


    async def close(self) -> None:
        """Close the queue for every client (protocol Close), as ``pressure.Queue.close``:
        puts raise ShutDown, gets drain what is left, then raise ShutDown."""
        k = self._keys
        while True:
            result = await self._call(CLOSE, self._client_id, k.inbox_prefix)
            if result == _NO_QUEUE:
                raise await self._missing()
            if result != _BUSY:
                return
            await asyncio.to_thread(self._roles.wait_for_role, PRODUCER, self._link.slice)

    async def shutdown(self, immediate: bool = False) -> None:
        """``close()``; with ``immediate``, also discard what is queued (gets raise ShutDown
        at once), as ``pressure.Queue.shutdown``."""
        await self.close()
        if not immediate:
            return
        while True:
            result = await self._call(DRAIN, self._client_id)
            if result == _NO_QUEUE:
                raise await self._missing()
            if result != _BUSY:
                return
            await asyncio.to_thread(self._roles.wait_for_role, CONSUMER, self._link.slice)

    async def delete(self) -> None:
        """Delete the queue and every key it has (protocol Delete), as ``pressure.Queue.delete``:
        unread items are lost; blocked clients wake (QueueDoesNotExist); the keys go in one
        step once neither role is held."""
        k = self._keys
        prefixes = (k.inbox_prefix, k.inflight_prefix, k.held_prefix, k.logs)
        result = await self._call(DELETE, "begin", *prefixes)
        if self._exit_delete is not None:
            self._exit_delete.cancel()
            self._exit_delete = None
        while True:
            if result == DeleteStatus.DELETED:
                return
            if result == DeleteStatus.NO_QUEUE:
                raise await self._missing()
            if result == DeleteStatus.RECREATED:
                raise PressureError(f"queue {self._name!r} was created again while being deleted")
            await asyncio.to_thread(self._roles.wait_for_role, PRODUCER if result == DeleteStatus.WAIT_PRODUCER
                                    else CONSUMER, self._link.slice)
            result = await self._call(DELETE, "finish", *prefixes)


"""The exceptions of pressure.aio: pressure's own, also catchable as asyncio.Queue's."""

from __future__ import annotations

import asyncio

from .. import errors


class Empty(errors.Empty, asyncio.QueueEmpty):
    """Raised by ``get_nowait`` (and a timed-out ``get``) when the queue is empty: a
    ``pressure.Empty`` (so also a ``queue.Empty``) and an ``asyncio.QueueEmpty``."""


class Full(errors.Full, asyncio.QueueFull):
    """Raised by ``put_nowait`` (and a timed-out ``put``) when the queue is at its bound: a
    ``pressure.Full`` (so also a ``queue.Full``) and an ``asyncio.QueueFull``."""

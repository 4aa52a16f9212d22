"""One binding per Lua script (pressure/lua/*.lua): its KEYS in the order its header names
them, built from a queue's ``QueueKeys``; its ARGV names; and a ``Status`` IntEnum of the
return codes the header documents. A call goes through the binding, which checks its
arguments against the header's count and runs the script with ``Backend.run`` (EVALSHA,
loaded on NOSCRIPT: the text and SHA1 are pressure/_packing.py's), so a script's signature
is written once on the Python side; tests/test_scripts.py checks each binding against its
script's header.

These are the scripts outside the hot path (create-or-attach, inspection, close,
shutdown, delete). The hot paths (put, get, ack, and the executor's claim/settle/submit)
send pre-encoded commands instead (``PackedScript``).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from .keys import QueueKeys

if TYPE_CHECKING:
    from .connection import Backend

__all__ = ["QueueScript", "CREATE", "FORGET", "INFO", "SET_BOUND", "JOIN_CHECK", "CLOSE", "DRAIN",
           "DELETE", "QUEUE_SCRIPTS"]


class QueueScript:
    """A script of a queue: ``name`` (lua/<name>.lua), ``keys`` (the queue's keys it takes, in
    order), ``argv`` (its arguments' names), ``status`` (its return codes, or None where it
    returns a value), ``more_keys`` (whether the header ends in ``KEYS[n..]``)."""

    __slots__ = ("name", "keys", "argv", "status", "more_keys")

    def __init__(self, name: str, keys: Callable[[QueueKeys], tuple[str, ...]], argv: tuple[str, ...],
                 status: type[IntEnum] | None = None, *, more_keys: bool = False) -> None:
        self.name = name
        self.keys = keys
        self.argv = argv
        self.status = status
        self.more_keys = more_keys

    def __repr__(self) -> str:
        return f"<script {self.name}: KEYS {len(self.keys(_EXAMPLE))}, ARGV {', '.join(self.argv)}>"

    def run(self, backend: Backend, keys: QueueKeys, variant: str, *args: Any, mutating: bool = True) -> Any:
        """Run the script for the queue ``keys`` (``variant``: '' for FIFO, '@lifo' or
        '@priority'), one round trip; ``args`` in the order of ``argv``."""
        if len(args) != len(self.argv):
            raise TypeError(f"script {self.name} takes {len(self.argv)} arguments "
                            f"({', '.join(self.argv)}), not {len(args)}")
        return backend.run(self.name + variant, self.keys(keys), args, mutating=mutating)


def _others(keys: QueueKeys, *named: str) -> tuple[str, ...]:
    """pressure's fixed keys of a queue other than ``named``: the ``KEYS[n..]`` of a script."""
    return tuple(key for key in keys.extension_keys() if key not in named)


class CreateStatus(IntEnum):
    """create.lua's first result (the second is the bound, or the kind for OTHER_KIND)."""

    CREATED = 1
    EXISTED = 0
    #: :bound is missing but other keys remain: a Delete is running or was interrupted
    DELETING = -1
    OTHER_KIND = -2


CREATE = QueueScript(
    "create",
    lambda k: (k.bound, k.producer_free, k.consumer_free, k.not_full, k.closed, k.kind, k.consumers,
               *_others(k, k.kind, k.consumers)),
    ("bound", "kind", "inbox_prefix", "inflight_prefix", "held_prefix", "logs"), CreateStatus, more_keys=True)


class ForgetStatus(IntEnum):
    """forget.lua's result: how many keys it deleted, or NOT_GONE."""

    NOT_GONE = -1


FORGET = QueueScript(
    "forget",
    lambda k: (k.bound, k.producer_free, k.consumer_free, k.waiter, k.consumers,
               *_others(k, k.waiter, k.consumers)),
    ("inbox_prefix", "inflight_prefix", "held_prefix", "logs"), ForgetStatus, more_keys=True)

#: {exists (0/1), length, bound ('' if missing), closed (0/1)}
INFO = QueueScript("info", lambda k: (k.base, k.bound, k.closed), ())


class SetBoundStatus(IntEnum):
    """set_bound.lua's result."""

    SET = 1
    NO_QUEUE = -4


SET_BOUND = QueueScript("set_bound", lambda k: (k.base, k.bound, k.not_full), ("bound",), SetBoundStatus)


class JoinCheckStatus(IntEnum):
    """join_check.lua's first result: the unfinished count, or NO_QUEUE."""

    NO_QUEUE = -4


#: also ack.lua's fixed keys
TASK_KEYS: Callable[[QueueKeys], tuple[str, ...]] = lambda k: (
    k.bound, k.produced_messages, k.tasks_done, k.all_tasks_done)
JOIN_CHECK = QueueScript("join_check", TASK_KEYS, (), JoinCheckStatus)


class CloseStatus(IntEnum):
    """close.lua's result."""

    CLOSED = 1
    ALREADY_CLOSED = 0
    BUSY = -2
    NO_QUEUE = -4


CLOSE = QueueScript(
    "close",
    lambda k: (k.bound, k.producer_free, k.producer, k.closed, k.not_full, k.consumer_free, k.waiter,
               k.lease),
    ("client_id", "inbox_prefix"), CloseStatus)


class DrainStatus(IntEnum):
    """drain.lua's result: the number of items discarded, or one of these."""

    BUSY = -2
    NO_QUEUE = -4


DRAIN = QueueScript(
    "drain",
    lambda k: (k.base, k.bound, k.consumer_free, k.consumer, k.not_full, k.produced_messages,
               k.tasks_done, k.discarded, k.all_tasks_done),
    ("client_id",), DrainStatus)


class DeleteStatus(IntEnum):
    """delete.lua's result."""

    DELETED = 1
    NO_QUEUE = -4
    RECREATED = -8
    WAIT_PRODUCER = -10
    WAIT_CONSUMER = -11


def _delete_keys(k: QueueKeys) -> tuple[str, ...]:
    first = (k.bound, k.not_full, k.closed, k.producer_free, k.consumer_free, k.waiter, k.lease,
             k.consumers)
    return (*first, *(key for key in k.all_keys() if key not in first))


DELETE = QueueScript("delete", _delete_keys,
                     ("step", "inbox_prefix", "inflight_prefix", "held_prefix", "logs"), DeleteStatus,
                     more_keys=True)

#: Every binding above, for the check against the scripts' headers.
QUEUE_SCRIPTS = (CREATE, FORGET, INFO, SET_BOUND, JOIN_CHECK, CLOSE, DRAIN, DELETE)

_EXAMPLE = QueueKeys.build("p", "q")

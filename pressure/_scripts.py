"""One binding per Lua script (pressure/lua/*.lua): its KEYS in the order its header names
them (the fixed ones built from a queue's ``QueueKeys``, an executor's ``ExecutorKeys`` or the
keys the caller names, then the names of those that vary per call); its ARGV names; and a
``Status`` IntEnum of the return codes the header documents. A script's signature is written
once on the Python side; tests/test_scripts.py checks each binding against its script's header.

Two ways to call one. ``run`` / ``call`` check the arguments against the header's count and run
the script with ``Backend.run`` (EVALSHA, loaded on NOSCRIPT: the text and SHA1 are
pressure/_packing.py's): the scripts outside the hot path. ``command`` builds, once per handle,
a ``PackedScript`` whose constant part (the SHA1, the fixed keys) is encoded once: each call of
the hot paths (put, get, ack, the executor's submit, claim and settle) sends only what varies.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from ._packing import PackedScript
from .keys import QueueKeys

if TYPE_CHECKING:
    from .connection import Backend

__all__ = ["Script", "QueueScript", "CREATE", "FORGET", "INFO", "SET_BOUND", "JOIN_CHECK", "CLOSE",
           "DRAIN", "DELETE", "PUT", "GET", "GET_FLAG", "ACK", "REQUEUE", "KICK", "STATS", "FIND_ITEM", "REPAIR", "RESTORE",
           "TOUCH", "WAKE", "SUBMIT", "CLAIM", "COUNT_START", "SETTLE", "CANCEL", "LOG_APPEND", "LOG_COMMIT", "LOG_READ",
           "QUEUE_SCRIPTS", "OTHER_SCRIPTS"]


class Script:
    """A script: ``name`` (lua/<name>.lua); ``keys`` (builds its fixed KEYS, in order, from
    what the caller has: a ``QueueKeys``, an ``ExecutorKeys``, key names); ``call_keys`` (the
    names of the KEYS that follow them and vary per call); ``argv`` (its arguments' names);
    ``more_argv`` (the name of the header's ``ARGV[n..]`` tail, if it has one); ``status``
    (its return codes, or None where it returns a value); ``more_keys`` (whether the header
    ends in ``KEYS[n..]``)."""

    __slots__ = ("name", "keys", "argv", "status", "more_keys", "call_keys", "more_argv")

    def __init__(self, name: str, keys: Callable[..., tuple[str, ...]], argv: tuple[str, ...],
                 status: type[IntEnum] | None = None, *, more_keys: bool = False,
                 call_keys: tuple[str, ...] = (), more_argv: str | None = None) -> None:
        self.name = name
        self.keys = keys
        self.argv = argv
        self.status = status
        self.more_keys = more_keys
        self.call_keys = call_keys
        self.more_argv = more_argv

    def __repr__(self) -> str:
        keys = ", ".join(self.call_keys)
        argv = ", ".join((*self.argv, *((self.more_argv + "...",) if self.more_argv else ())))
        return f"<script {self.name}: KEYS{' + ' + keys if keys else ''}, ARGV {argv}>"

    def command(self, *sources: Any, variant: str = "", more: int = 0) -> PackedScript:
        """The script as a ``PackedScript`` (built once per handle): fixed KEYS from ``sources``,
        each call's ``call_keys`` and ``argv`` then, and ``more`` arguments of the ARGV tail
        (a number fixed per command; a variable tail: one command per length)."""
        if more and self.more_argv is None:
            raise TypeError(f"script {self.name} takes no more arguments than {', '.join(self.argv)}")
        return PackedScript(self.name + variant, self.keys(*sources), len(self.call_keys),
                            len(self.argv) + more)

    def call(self, backend: Backend, keys: tuple[str, ...], args: tuple[Any, ...], *,
             variant: str = "", mutating: bool = True) -> Any:
        """Run the script with all its KEYS (``keys``: fixed then per call) and ``args`` (in the
        order of ``argv``, then the tail), one round trip."""
        args = self.check(args)
        return backend.run(self.name + variant, keys, args, mutating=mutating)

    def check(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """``args``, if they are as many as the script takes; else TypeError."""
        if len(args) != len(self.argv) and (self.more_argv is None or len(args) < len(self.argv)):
            raise TypeError(f"script {self.name} takes {len(self.argv)} arguments "
                            f"({', '.join(self.argv)}{', ' + self.more_argv + '...' if self.more_argv else ''}), "
                            f"not {len(args)}")
        return args


class QueueScript(Script):
    """A script of a queue: its fixed KEYS are built from the queue's ``QueueKeys``."""

    __slots__ = ()

    def run(self, backend: Backend, keys: QueueKeys, variant: str, *args: Any, mutating: bool = True) -> Any:
        """Run the script for the queue ``keys`` (``variant``: '' for FIFO, '@lifo' or
        '@priority'), one round trip; ``args`` in the order of ``argv``."""
        if self.call_keys:
            raise TypeError(f"script {self.name} takes keys per call: use call()")
        return self.call(backend, self.keys(keys), args, variant=variant, mutating=mutating)


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
               k.bound_unset, k.base, k.delayed, k.serializer,
               *_others(k, k.kind, k.consumers, k.bound_unset, k.delayed, k.serializer)),
    ("bound", "kind", "inbox_prefix", "inflight_prefix", "held_prefix", "logs", "named", "serializer"),
    CreateStatus,
    more_keys=True)


class ForgetStatus(IntEnum):
    """forget.lua's result: how many keys it deleted, or NOT_GONE."""

    NOT_GONE = -1


FORGET = QueueScript(
    "forget",
    lambda k: (k.bound, k.producer_free, k.consumer_free, k.waiter, k.consumers,
               *_others(k, k.waiter, k.consumers)),
    ("inbox_prefix", "inflight_prefix", "held_prefix", "logs"), ForgetStatus, more_keys=True)

#: {exists (0/1), ready, bound ('' if missing), closed (0/1), held (queued and delayed items)}
INFO = QueueScript("info", lambda k: (k.base, k.bound, k.closed, k.delayed, k.meta, k.utube), ("most",))


class SetBoundStatus(IntEnum):
    """set_bound.lua's result."""

    SET = 1
    #: ('unset') the bound is named already: left as it is
    NAMED = 0
    NO_QUEUE = -4


SET_BOUND = QueueScript("set_bound", lambda k: (k.base, k.bound, k.not_full, k.bound_unset, k.delayed),
                        ("bound", "only_unset"), SetBoundStatus)


class JoinCheckStatus(IntEnum):
    """join_check.lua's first result: the unfinished count, or NO_QUEUE."""

    NO_QUEUE = -4


#: ack.lua's fixed keys, and join_check.lua's
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
               k.tasks_done, k.discarded, k.all_tasks_done, k.delayed, k.utube, k.redeliveries, k.meta),
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


# -- the hot paths: put, get, ack ------------------------------------------------------------

class PutStatus(IntEnum):
    """put.lua's result: the queue's length after the put (>= 0), or one of these."""

    FULL = -1
    #: the producer role is held by another client and the queue is not full
    BUSY = -2
    CLOSED = -3
    NO_QUEUE = -4
    #: a negative timeout on a bounded queue (queue.Queue raises ValueError)
    NEGATIVE = -7
    #: (a native put: ARGV[3] 'm') the bound leaves room for some of the batch, not all, or the
    #: ACL refuses RENAME: none moved (sent again as arguments)
    NOT_ALL = -10


PUT = QueueScript(
    "put",
    lambda k: (k.base,),
    ("client_id", "payload", "negative", "waited", "inbox_prefix", "order_key", "delay_ms", "meta"), PutStatus,
    more_argv="items")


class GetStatus(IntEnum):
    """get.lua's codes (an entry, entries or items where it delivers; see its header per mode)."""

    #: 'block': an entry is in the inbox; 'cancel': an item entry waits in the inbox
    DELIVERED = 1
    #: 'block': an entry is in the inbox, and more items are queued
    DELIVERED_MORE = 2
    #: the consumer role is held by another client while items wait
    BUSY = -2
    #: closed and drained
    CLOSED = -3
    NO_QUEUE = -4
    EMPTY = -5
    #: 'block': registered as the waiter
    WAITING = -6
    #: 'block': a negative timeout
    NEGATIVE = -7
    #: closed and empty, but another consumer holds items that may come back
    UNDRAINED = -8
    #: 'log': entries delivered to this consumer before wait in its inbox
    ENTRIES_WAITING = -9


GET = QueueScript(
    "get",
    lambda k: (k.base,),
    ("consumer_id", "mode", "flag", "record", "lease_ms", "client_id"), GetStatus,
    more_argv="received or count")
#: Where get.lua's ``flag`` (ARGV[3]) is in a call's arguments: a blocking get changes it between
#: its calls ('w': wait on a closed queue whose items others hold).
GET_FLAG = GET.argv.index("flag")


class AckStatus(IntEnum):
    """ack.lua's second result: the unfinished count (or 0 without task_done), or one of these."""

    #: task_done() called too many times
    TOO_MANY = -1
    NO_QUEUE = -4


ACK = QueueScript("ack", lambda k: (*TASK_KEYS(k), k.meta),
                  ("delivery", "task_done"), AckStatus,
                  call_keys=("inflight",), more_argv="bytes")

# -- reliability: requeue, kick, repair, touch, restore -----------------------------------------


class RequeueStatus(IntEnum):
    """requeue.lua's first result: how many items it requeued, or NOTHING ('recover' of a
    changed record, 'sweep' within the interval)."""

    NOTHING = -1


REQUEUE = QueueScript(
    "requeue",
    lambda k: (k.base, k.consumed_messages, k.consumed_bytes, k.consumer_free, k.waiter, k.lease,
               k.consumers, k.redeliveries, k.dead, k.sweep, k.bound, k.not_full, k.delivery_seq, k.delayed,
               k.meta, k.counts, k.utube, k.produced_messages, k.tasks_done, k.all_tasks_done),
    ("mode", "inbox_prefix", "inflight_prefix", "max_deliveries", "consumer_id", "which", "every_ms",
     "held_prefix", "delay_ms", "reason"), RequeueStatus, more_argv="returned deliveries")

#: how many dead letters moved
KICK = QueueScript("kick", lambda k: (k.dead, k.base, k.consumed_messages, k.consumed_bytes, k.bound,
                                      k.not_full, k.counts, k.redeliveries, k.tasks_done, k.delayed),
                   ("count",))

class FindStatus(IntEnum):
    """find_item.lua's result when it is not the item's record."""

    NOT_FOUND = -1


FIND_ITEM = QueueScript(
    "find_item",
    lambda k: (k.base, k.delayed, k.dead, k.consumers, k.meta, k.counts, k.bound, k.not_full,
               k.produced_messages, k.tasks_done, k.all_tasks_done, k.utube, k.redeliveries),
    ("mode", "task_id", "inbox_prefix", "inflight_prefix", "delivery"), FindStatus)

#: {ready, delayed, taken, buried, consumers, unfinished, redelivered, counter name, value, ...}
#: (lua/stats.lua)
STATS = QueueScript("stats", lambda k: (k.base, k.delayed, k.dead, k.consumers, k.counts, k.meta, k.utube,
                                        k.produced_messages, k.tasks_done, k.redeliveries),
                    ("inbox_prefix", "inflight_prefix", "held_prefix"))


class RepairStatus(IntEnum):
    """repair.lua's result when it is ``{NO_QUEUE}`` (else the keys it reset)."""

    NO_QUEUE = -4


REPAIR = QueueScript("repair", lambda k: (k.base, k.bound, k.producer_free, k.consumer_free, k.not_full,
                                          k.closed, k.waiter, k.lease, k.delayed), (), RepairStatus)

#: 1 touched, 0 gone (with '*': how many)
TOUCH = Script("touch", lambda: (), ("delivery",), call_keys=("inflight",))


class WakeStatus(IntEnum):
    """wake.lua's result."""

    WOKEN = 1
    NO_WAITER = 0


#: keys: a queue's :pressure:waiter and :pressure:lease (its consumer waiting now)
WAKE = Script("wake", lambda k: (k.waiter, k.lease), ("inbox_prefix",), WakeStatus)


class RestoreStatus(IntEnum):
    """restore.lua's result."""

    RESTORED = 1
    NOT_RESTORED = 0


#: keys: a role's token list and holder key (:producer_free, :producer or the consumer's)
RESTORE = Script("restore", lambda free, holder: (free, holder), ("holder",), RestoreStatus)

# -- the executor: submit, claim, settle, cancel (KEYS from ExecutorKeys) --------------------

#: how many tasks were marked
SUBMIT = Script("submit", lambda k: (k.claims,), (), more_argv="task_ids")


class ClaimStatus(IntEnum):
    """claim.lua's result for each task: its start number (>= 1: run it), or one of these."""

    CANCELLED = 0
    #: started max attempts times already: WorkerLost
    GIVE_UP = -1
    #: another delivery of it is held by a worker, or it has finished
    DROP = -2
    #: this delivery went back to the queue: not this worker's
    NOT_OURS = -3


#: The claims hash's field, after a task's id, that counts the starts of a task claimed to start
#: next ('pre'): its worker increments it as it starts the task (count_start.lua).
STARTED = ":started"
#: keys: the executor's, and the worker's in-flight list of the task queue
CLAIM = Script("claim", lambda k, inflight: (k.claims, inflight, k.retried, k.lost),
               ("consumer_id", "inflight_prefix"), ClaimStatus,
               more_argv="delivery, task id and max attempts of each task")
#: keys: the executor's; the task's count of starts, 0 if it has finished (not counted)
COUNT_START = Script("count_start", lambda k: (k.claims,), ("task_id",))
#: keys: the executor's, the worker's in-flight list of the task queue and the task queue's
#: (``QueueKeys``) task counters; how many deliveries were acknowledged
SETTLE = Script("settle", lambda k, inflight, tasks: (k.claims, inflight, tasks.produced_messages,
                                                      tasks.tasks_done, tasks.all_tasks_done), ("consumer_id",),
                more_argv="delivery and task id pairs")


class CancelStatus(IntEnum):
    """cancel.lua's result."""

    CANCELLED = 1
    #: a worker has started it, holds it to start next, or gave up on it
    STARTED = 0
    #: finished, or not submitted yet
    NOT_MARKED = -1


CANCEL = Script("cancel", lambda k: (k.claims,), ("task_id", "inflight_prefix"), CancelStatus)

# -- the log of pressure.spark (pressure/spark/log.py) --------------------------------------

#: keys: the consumer's in-flight list, the log, its tail, the queue's :producer, :pressure:logs
#: and :pressure:meta; the log's tail after the append
LOG_APPEND = Script("log_append", lambda inflight, log, tail, producer, logs, meta: (
    inflight, log, tail, producer, logs, meta), ("group",), more_argv="deliveries")
#: keys: the log and its committed number; the committed number after the call
LOG_COMMIT = Script("log_commit", lambda log, committed: (log, committed), ("upto",))
#: keys: the log and its committed number; the committed number, then the chunks holding a range
LOG_READ = Script("log_read", lambda log, committed: (log, committed), ("first", "last", "count"))

#: Every binding above, for the check against the scripts' headers: those whose fixed KEYS
#: come from a ``QueueKeys``, and the others.
QUEUE_SCRIPTS = (CREATE, FORGET, INFO, SET_BOUND, JOIN_CHECK, CLOSE, DRAIN, DELETE, PUT, GET, ACK,
                 REQUEUE, KICK, REPAIR, STATS, FIND_ITEM)
OTHER_SCRIPTS = (TOUCH, WAKE, RESTORE, SUBMIT, CLAIM, COUNT_START, SETTLE, CANCEL, LOG_APPEND, LOG_COMMIT, LOG_READ)

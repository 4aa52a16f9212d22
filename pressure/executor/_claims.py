"""A worker's claims on the tasks it received (``claim.lua``): whether each may run, and
the count of its starts, which ``max_attempts`` limits.

Tasks a worker received together (prefetched) are claimed together, in one round trip, as
the first of them starts: from then on the worker holds the others to start next (a
``cancel()`` returns False, as for a task in ProcessPoolExecutor's call queue), but each
is counted only as it starts, with count_start.lua sent without waiting for its reply. So
a task the worker only held is never counted, and a no-op task costs no round trip of its
own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from .. import _log
from .._scripts import CLAIM, COUNT_START
from .._wire import LOST
from ..connection import Backend, PackedScript, pack_command
from ..keys import ExecutorKeys
from ..reliable import Delivery

if TYPE_CHECKING:
    from .worker import Task

__all__ = ["Claims"]

logger = _log.WORKER


class Claims:
    """The claims of one worker (consumer ``consumer`` of the task queue, whose in-flight
    list is ``inflight``), on ``backend``'s connection for this thread (the one its gets use:
    a posted count goes out before the next command on it). ``about``: the worker's
    identifier, the executor's name and prefix, for the log."""

    def __init__(self, backend: Backend, keys: ExecutorKeys, inflight: str, inflight_prefix: str,
                 consumer: str, about: tuple[str, str, str]) -> None:
        self.backend = backend
        self.keys = keys
        self.inflight = inflight
        self.inflight_prefix = inflight_prefix
        self.consumer = consumer
        self.about = about
        #: claim.lua for a batch of n tasks, by n
        self.commands: dict[int, PackedScript] = {}
        self.count_start = COUNT_START.command(keys)

    def claim(self, batch: Sequence[Delivery[Task]]) -> list[int]:
        """claim.lua's decision about each task of ``batch`` (one round trip): the first starts
        now (counted), the others are this worker's to start next (``start``)."""
        # count_start.lua is loaded in the same round trip, for the starts of the others
        [decisions] = self.backend.pipeline([(self._command(len(batch)), self._args(batch))],
                                            load=[COUNT_START.name])
        if isinstance(decisions, redis.RedisError):
            self.backend.raise_error(decisions, "script claim", True)
        return [int(decision) for decision in decisions]

    def start(self, delivery: Delivery[Task], number: int) -> int:
        """Count the start of a task claimed with an earlier one, and return the decision to
        act on: ``number``, its start number. The count is count_start.lua (and, for a retry,
        the INCR of the executor's retried counter), sent without waiting for the reply (read
        with the next command's), before the task runs: the worker never waits for it, and a
        task that kills its worker is counted (on TCP the kernel holds the commands until the
        batch's replies go; a killed process's socket sends them before it closes, as no reply
        waits unread on it then). The count goes in only while the task has a mark, so one that
        reaches the server after the task was settled (on another connection: the heartbeat
        thread's) leaves nothing behind. If the send fails, or the script may not be loaded
        (a new connection, a restarted server), claim.lua decides anew, and its answer is the
        decision."""
        task_id = delivery.item.id
        if not self.backend.is_loaded(COUNT_START.name):
            return self.claim([delivery])[0]
        sending = True

        def check(reply: Any) -> None:
            if not (sending and reply is LOST):  # not sent: claim.lua counts it below
                self._started(task_id, reply)

        sent = self.backend.post(self.count_start.pack((task_id,)), check)
        sending = False
        if not sent:
            return self.claim([delivery])[0]
        if number > 1:
            self.backend.post(pack_command("INCR", self.keys.retried))
        return number

    def _started(self, task_id: str, reply: Any) -> None:
        """The check of a posted count's reply (no I/O: it runs in the middle of another
        command). 0: the task has finished (settled): nothing to count. Anything but 0 or 1
        means the start may not be counted (the connection was lost: it may or may not have
        run; the script was missing), or was counted twice."""
        if reply in (0, 1) and not isinstance(reply, bool):
            return
        if isinstance(reply, redis.exceptions.NoScriptError):
            self.backend.forget_loaded(COUNT_START.name)  # the next start is claimed instead
        what = "its reply was lost with the connection" if reply is LOST else f"count_start answered {reply!r}"
        worker, name, prefix = self.about
        _log.event(logger, logging.WARNING, "start_unconfirmed", "worker %s: the start of task %s may not be "
                   "counted toward its max_attempts as it should (%s)", worker, task_id, what,
                   executor=name, prefix=prefix, worker=worker, task=task_id, error=what)

    def _command(self, count: int) -> PackedScript:
        command = self.commands.get(count)
        if command is None:
            command = self.commands[count] = CLAIM.command(self.keys, self.inflight, more=3 * count)
        return command

    def _args(self, batch: Sequence[Delivery[Task]]) -> list[bytes | str | int]:
        args: list[bytes | str | int] = [self.consumer, self.inflight_prefix]
        for d in batch:
            args += (d.id, d.item.id, d.item.max_attempts)
        return args

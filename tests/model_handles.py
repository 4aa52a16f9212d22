"""Handles for tests/test_model.py besides ``pressure.Queue``: a ``pressure.aio.AsyncQueue``
driven from synchronous code (on an event loop of its own, on the machine's worker thread),
and a reliable consumer in a subprocess, SIGKILLed or left to exit."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from pressure.aio import AsyncQueue

R = TypeVar("R")
REPO_ROOT = Path(__file__).resolve().parent.parent


class SyncOfAsync:
    """The calls of an AsyncQueue the machine uses, each run to completion on ``loop``."""

    def __init__(self, q: AsyncQueue[Any], loop: asyncio.AbstractEventLoop) -> None:
        self.aq = q
        self.loop = loop

    def _do(self, coro: Awaitable[R]) -> R:
        return self.loop.run_until_complete(coro)  # type: ignore[arg-type]

    def put(self, item: Any, block: bool = True, timeout: float | None = None, **lifecycle: Any) -> None:
        self._do(self.aq.put(item, block, timeout, **lifecycle))

    def put_many(self, items: list[Any], block: bool = True, timeout: float | None = None,
                 **lifecycle: Any) -> None:
        self._do(self.aq.put_many(items, block, timeout, **lifecycle))

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        return self._do(self.aq.get(block, timeout))

    def get_many(self, n: int, block: bool = True, timeout: float | None = None) -> list[Any]:
        return self._do(self.aq.get_many(n, block, timeout))

    def receive(self, block: bool = True, timeout: float | None = None) -> AsyncDeliveryOf:
        return AsyncDeliveryOf(self._do(self.aq.receive(block, timeout)), self)

    def task_done(self) -> None:
        self._do(self.aq.task_done())

    def qsize(self) -> int:
        return self._do(self.aq.qsize())

    def empty(self) -> bool:
        return self._do(self.aq.empty())

    def full(self) -> bool:
        return self._do(self.aq.full())

    def join(self) -> None:
        self._do(self.aq.join())

    def shutdown(self, immediate: bool = False) -> None:
        self._do(self.aq.shutdown(immediate))

    def disconnect(self) -> None:
        self._do(self.aq.disconnect())

    # inspection and repair (properties on pressure.Queue, coroutine methods on AsyncQueue)

    @property
    def unfinished_tasks(self) -> int:
        return self._do(self.aq.unfinished_tasks())

    def statistics(self) -> Any:
        return self._do(self.aq.statistics())

    def in_flight(self) -> list[Any]:
        return self._do(self.aq.in_flight())

    def dead_letters(self) -> list[Any]:
        return self._do(self.aq.dead_letters())

    def kick(self, n: int | None = None) -> int:
        return self._do(self.aq.kick(n))

    def purge_dead(self) -> int:
        return self._do(self.aq.purge_dead())

    def peek_item(self, task_id: str) -> Any:
        return self._do(self.aq.peek_item(task_id))

    def delete_item(self, task_id: str) -> Any:
        return self._do(self.aq.delete_item(task_id))

    def repair(self) -> Any:
        return self._do(self.aq.repair())


class AsyncDeliveryOf:
    """An AsyncDelivery settled from synchronous code."""

    def __init__(self, d: Any, owner: SyncOfAsync) -> None:
        self.d = d
        self.owner = owner
        self.item, self.deliveries, self.consumer, self.task_id = d.item, d.deliveries, d.consumer, d.task_id

    def ack(self) -> bool:
        return bool(self.owner._do(self.d.ack()))

    def release(self, delay: float | None = None) -> bool:
        return bool(self.owner._do(self.d.release(delay=delay)))

    def bury(self) -> bool:
        return bool(self.owner._do(self.d.bury()))

    def delete(self) -> bool:
        return bool(self.owner._do(self.d.delete()))


#: The subprocess consumer: receives up to N items (non-blocking), acknowledges the first A,
#: prints what it holds, and then waits to be killed ('kill') or disconnects and exits ('exit').
CONSUMER = r"""
import pickle, sys, time
import pressure
url, prefix, cid, n, acks, max_deliveries, end = sys.argv[1:8]
q = pressure.Queue("q", url=url, prefix=prefix, client_id=cid, reliable=True,
                   max_deliveries=int(max_deliveries), create=False)
got = []
for _ in range(int(n)):
    try:
        got.append(q.receive(block=False))
    except (pressure.Empty, pressure.ShutDown):
        break
for d in got[:int(acks)]:
    assert d.ack() is True
print(pickle.dumps([(d.item, d.deliveries) for d in got]).hex(), flush=True)
if end == "kill":
    time.sleep(600)
q.disconnect()
"""


def run_consumer(url: str, prefix: str, cid: str, n: int, acks: int, max_deliveries: int,
                 end: str) -> list[tuple[Any, int]]:
    """Run the subprocess consumer to its end (SIGKILLed once it has printed, for 'kill');
    returns what it received, with the delivery counts."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CONSUMER, url, prefix, cid, str(n), str(acks),
                             str(max_deliveries), end], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if end == "kill":
            os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert line.strip(), f"the consumer printed nothing: {err}"
    got: list[tuple[Any, int]] = pickle.loads(bytes.fromhex(line.strip()))
    return got

"""``--server-cost-instructions``, third table: the instructions a client executes per put and
per get of 100-byte items, pressure's beside raw redis-py's (``lpush``/``brpop``) and the
script floor's, each as the payload section's lines run them (their ``Transport``).

Each side runs in a Python process of its own under callgrind, against the section's server:
it sets up and warms up (one put and one get), then makes ``n`` puts and ``n`` gets (which find
the items those put), each run counted alone (``callgrind_control`` zeroes the counters before
it and dumps them after, as for the server). What the kernel does
for a call is not in the count, alike for every line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from ._callgrind import CallgrindCounter, callgrind_tools
from ._harness import Transport, fmt, render_table

__all__ = ["ClientCost", "client_costs", "format_client_costs"]

PAYLOAD = b"x" * 100

#: The lines counted: (key, label), ``_transport`` makes each.
LINES = (("pressure", "pressure.Queue (default mode)"),
         ("raw", "redis-py lpush / brpop (raw)"),
         ("floor", "script floor (floor_put.lua / floor_get.lua)"))

#: The child: ``python -c CHILD <url> <line> <n>``.
CHILD = "import sys; from pressure.bench.client_cost import _child; _child(*sys.argv[1:])"


@dataclass(frozen=True)
class ClientCost:
    """A line's client instructions per put and per get."""

    label: str
    put: float
    get: float


def _transport(key: str, url: str) -> Transport:
    from ._floor import ScriptFloorTransport
    from .queues import PressureTransport, RawRedisTransport

    if key == "pressure":
        return PressureTransport(url, 0)
    if key == "raw":
        return RawRedisTransport(url)
    return ScriptFloorTransport(url)


def _child(url: str, key: str, count: str) -> None:
    """The counted client (run under callgrind): sets up and warms up, says 'ready'; then, each
    time it is told, runs its puts, then its gets (which find the items those put), saying
    'done' after each; cleans up when told."""
    n = int(count)
    transport = _transport(key, url)
    transport.setup(None)  # type: ignore[arg-type]  # (no process is spawned here)
    try:
        put, get = transport.open_put(), transport.open_get()
        put(PAYLOAD)
        get()
        print("ready", flush=True)
        sys.stdin.readline()
        for _ in range(n):
            put(PAYLOAD)
        print("done", flush=True)
        sys.stdin.readline()
        for _ in range(n):
            get()
        print("done", flush=True)
        sys.stdin.readline()
    finally:
        transport.cleanup()


def _count(url: str, key: str, label: str, n: int) -> ClientCost:
    """One line's instructions per put and per get (see the module's text)."""
    valgrind, control = callgrind_tools()
    with tempfile.TemporaryDirectory(prefix="pressure-client-cost-") as directory, subprocess.Popen(
            [valgrind, "--tool=callgrind", "--compress-strings=no",
             f"--callgrind-out-file={os.path.join(directory, 'callgrind.out')}",
             sys.executable, "-c", CHILD, url, key, str(n)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as child:
        out = os.path.join(directory, "callgrind.out")
        try:
            counter = CallgrindCounter(control, child.pid, out)
            _expect(child, "ready")
            put, get = (_counted(child, counter) / n for _ in range(2))
            _tell(child)
            child.wait(timeout=120)
            return ClientCost(label, put, get)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


def _counted(child: subprocess.Popen[str], counter: CallgrindCounter) -> int:
    """The instructions of the child's next run of calls."""
    counter.zero()
    _tell(child)
    _expect(child, "done")
    return counter.count()


def _tell(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()


def _expect(child: subprocess.Popen[str], word: str) -> None:
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if line != word:
        raise RuntimeError(f"client-cost child said {line!r}, not {word!r} (exit status {child.poll()})")


def client_costs(url: str, n: int) -> list[ClientCost]:
    """Each line's client instructions per put and per get, ``n`` calls of each."""
    return [_count(url, key, label, n) for key, label in LINES]


def format_client_costs(costs: list[ClientCost], n: int) -> list[str]:
    """The table, under its title."""
    rows: list[tuple[str, ...]] = [("line", "put instr/call", "get instr/call", "put+get instr/msg")]
    for cost in costs:
        rows.append((cost.label, fmt(cost.put, 0), fmt(cost.get, 0), fmt(cost.put + cost.get, 0)))
    title = (f"Client instructions per call ({n:,} puts, then {n:,} gets, 100-byte payloads; each line's client "
             f"a Python process under callgrind, each run of calls counted alone; the gets find the items the "
             f"puts left)")
    return [title, *render_table(rows)]

"""``--server-cost-instructions``, second table: where the instructions of a put's and a get's
script call go, on the same private server under callgrind.

Each hot script call is split three ways, each part counted on its own:

* the call itself: an EVALSHA of a script that returns at once, with as many KEYS and ARGV
  (parsing the command, finding the script, handing its arguments to Lua, the reply);
* its library's definitions: the lua/lib.lua and item functions (and values) it uses
  (``_packing.script_library``), which Lua makes into closures again on every call of an EVAL
  script, measured as a script of those definitions alone (less the call itself);
* the rest: the commands it runs and its own code, what the call as pressure's hot path sends
  it costs beyond the two above (a get's includes the DEL posted in front of it, which drops
  the entry the get before received: default mode).

The put line is 100-byte puts to an unbounded queue; the get line takes them back in a
backlog ('nowait' calls, one round trip each).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import redis

import pressure

from .._packing import script_library
from .._scripts import GET, PUT, Script
from ._callgrind import CallgrindRedis
from ._harness import fmt, render_table

__all__ = ["ScriptCost", "script_costs", "format_script_costs"]

PAYLOAD = b"x" * 100


@dataclass(frozen=True)
class ScriptCost:
    """One hot script call's instructions on the server, in parts (see the module's text)."""

    label: str
    total: float
    call: float
    library: float
    definitions: int

    @property
    def rest(self) -> float:
        return self.total - self.call - self.library


def _per_call(server: CallgrindRedis, r: redis.Redis, text: str, script: Script, key: str, n: int) -> float:
    """Instructions per EVALSHA of ``text`` with as many KEYS and ARGV as ``script`` takes."""
    sha = r.script_load(text)
    args = ["x"] * len(script.argv)
    pipe = r.pipeline(transaction=False)
    for _ in range(n):
        pipe.evalsha(sha, 1, key, *args)
    server.zero()
    pipe.execute()
    return server.count() / n


def script_costs(server: CallgrindRedis, n: int) -> list[ScriptCost]:
    """A put's and a get's script call on ``server``, ``n`` calls of each."""
    r = redis.Redis.from_url(server.url)
    q: pressure.Queue[bytes] = pressure.Queue(f"anatomy-{uuid.uuid4().hex}", url=server.url, serializer="bytes")
    try:
        q.put(PAYLOAD)  # (the handle's first call creates the queue and loads the script)
        q.get()
        server.zero()
        for _ in range(n):
            q.put(PAYLOAD)
        put_total = server.count() / n
        q.get()  # (the first get of a backlog waits once: the rest are 'nowait' calls)
        server.zero()
        for _ in range(n - 1):
            q.get()
        get_total = server.count() / (n - 1)
        key = q._keys.base
        costs = []
        for label, script, total in (("put (put.lua)", PUT, put_total),
                                     ("get (get.lua 'nowait', and the DEL posted in front)", GET, get_total)):
            library = script_library(script.name)
            call = _per_call(server, r, "return 1", script, key, n)
            with_library = _per_call(server, r, "\n".join((*library, "return 1")), script, key, n)
            costs.append(ScriptCost(label, total, call, with_library - call, len(library)))
        return costs
    finally:
        q.delete()
        r.close()


def _share(part: float, total: float) -> str:
    return f"{fmt(part, 0)} ({part / total:.0%})" if total else fmt(part, 0)


def format_script_costs(costs: list[ScriptCost], n: int) -> list[str]:
    """The table, under its title."""
    rows: list[tuple[str, ...]] = [("call", "instr/call", "the call itself", "its library's definitions",
                                    "the rest: its commands and its own code")]
    for cost in costs:
        rows.append((cost.label, fmt(cost.total, 0), _share(cost.call, cost.total),
                     f"{_share(cost.library, cost.total)}, {cost.definitions} definitions",
                     _share(cost.rest, cost.total)))
    title = (f"Where a script call's instructions go ({n:,} calls of each, 100-byte payloads; the call itself: "
             f"an EVALSHA of a script that returns at once; the library: its definitions, made again on "
             f"every call)")
    return [title, *render_table(rows)]

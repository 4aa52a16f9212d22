"""The payload section of ``python -m pressure bench`` (in the default run, or alone with
``--payload``): what a payload costs through pressure against raw redis-py as it grows.

For each size S of ``--payload-sizes`` (100 B, 10 KB and 1 MB by default) one producer
process and one consumer process (``spawn``) move N items of S bytes, where N is ``--count``
(20,000) at most, ``CELL_BYTES`` (64 MiB) / S where that is fewer, and never fewer than
``MIN_MESSAGES`` (256): 20,000 at 100 B, 6,710 at 10 KB, 256 at 1 MB. The lines, each a
fresh pair of processes:

1. raw redis-py: ``LPUSH`` of one item per command, ``BRPOP`` - the baseline
   (``queues.RawRedisTransport``);
2. the floor: raw ``LPUSH``, and a get that keeps each item in Redis until the consumer has
   it, with plain commands: ``DEL <held>`` (the item in hand) and ``BLMOVE <list> <held> RIGHT
   RIGHT`` in one round trip (``queues.RawKeptTransport``): the least work of a get that
   loses nothing to a consumer killed inside it, so pressure's default mode is compared with
   it too;
   the script floor: the protocol's Put and Get and that keeping, by the least Lua scripts
   (``floor_put.lua``, ``floor_get.lua``; ``_floor.ScriptFloorTransport``): what any queue
   whose every put and get is a script costs here, the bar goals (a) and (c) are set beside;
3. ``pressure.Queue(serializer="bytes")``, unbounded: ``put`` / ``get``
   (``queues.PressureTransport``);
4. the same with ``maxsize=--maxsize`` (100);
5. ``reliable=True``: ``get`` and its ``task_done()`` (``queues.ReliableTransport``);
6. batches of B (``BATCHES``: 100 and 500; a B above N is skipped): raw ``LPUSH key v1..vB``
   / ``RPOP key B`` against ``put_many`` / ``get_many`` (``batch.RawBatch``,
   ``batch.PressureBatch``);
7. ``multiprocessing.Queue``: the one-host line (msgs/s only).

Each line gives msgs/s (N / the consumer's time from the start barrier to its last get),
MB/s, and the Redis server's CPU time per message: the main thread's ``INFO cpu`` (the
whole process's where the server has no per-thread figures), read by the consumer just
before the start barrier and after its last get, / N; and each process's own CPU time per
message (where a message's CPU goes: on two shared cores their sum bounds the speed). Rounds
take turns (``--repeat``, 3 by default here): each round runs every size and every line; the
report gives each line's median and its min-max over the rounds, and the ratios to raw (and
to the floors) and the goals are of the medians. Nothing is flushed: every list and queue has
a name of its own and is deleted after its line.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.context import SpawnContext

from ._harness import (START_METHOD, WARMUP, BenchConfig, Phase, PhaseResult, Transport, fmt, print_lines,
                       progress, ratio, render_table, size_text, spawn_context, timed_phase)
from ._floor import ScriptFloorTransport
from .batch import CELL_BYTES, BatchTransport, Cell, CellRun, PressureBatch, RawBatch, run_warm_cells
from .queues import (MultiprocessingTransport, PressureTransport, RawKeptTransport, RawRedisTransport,
                     ReliableTransport)

__all__ = [
    "BATCHES",
    "MIN_MESSAGES",
    "PayloadReport",
    "Runs",
    "format_payload_goals",
    "format_payload_spread",
    "format_payload_table",
    "messages",
    "print_payload_report",
    "run_payloads",
]

#: The fewest messages a line moves at any size (1 MB payloads: 256 MB a line).
MIN_MESSAGES = 256
#: The batch sizes of the batch lines.
BATCHES = (100, 500)
#: The single-item pressure lines, in table order (the keys of ``Runs``).
MODES = ("default", "bounded", "reliable")
#: The floor line's key: raw, keeping each item in Redis until received.
FLOOR = "floor"
#: The script floor line's key: the protocol's Put and Get by the least Lua scripts.
SCRIPT_FLOOR = "script-floor"
#: The goals: speed at big payloads, the extra CPU's growth, speed at the smallest payload,
#: batches; "big" is this size and more.
BIG = 10_000
GOAL_BIG_SPEED, GOAL_EXTRA_CPU, GOAL_SMALL_SPEED, GOAL_BATCH_SPEED = 0.9, 1.2, 0.8, 0.9


def messages(size: int, count: int) -> int:
    """How many messages each line moves at ``size`` bytes: ``count`` at most, fewer where
    they would pass CELL_BYTES, but at least MIN_MESSAGES (or ``count`` if that is less)."""
    return min(count, max(MIN_MESSAGES, CELL_BYTES // size))


def _raw_batch(b: int) -> str:
    return f"raw x{b}"


def _batch(b: int) -> str:
    return f"batch x{b}"


# -- results ------------------------------------------------------------------------


@dataclass
class Runs:
    """One line at one payload size: each round's figures, or the errors of those that failed."""

    rates: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: the producer's and the consumer's own CPU per message, µs (single-item lines)
    producer_us: list[float] = field(default_factory=list)
    consumer_us: list[float] = field(default_factory=list)

    def add(self, rate: float | None, cpu_us: float | None, error: str | None,
            clients: tuple[float | None, float | None] = (None, None)) -> None:
        if error or rate is None:
            self.errors.append(error or "no result")
            return
        self.rates.append(rate)
        if cpu_us is not None:
            self.cpu_us.append(cpu_us)
        if clients[0] is not None and clients[1] is not None:
            self.producer_us.append(clients[0])
            self.consumer_us.append(clients[1])

    @property
    def clients(self) -> tuple[float, float] | None:
        """The median producer and consumer CPU µs per message; None if not measured."""
        if not self.producer_us or self.errors:
            return None
        return statistics.median(self.producer_us), statistics.median(self.consumer_us)

    @property
    def rate(self) -> float | None:
        """The median msgs/s; None if a round failed."""
        return statistics.median(self.rates) if self.rates and not self.errors else None

    @property
    def cpu(self) -> float | None:
        """The median server CPU µs per message; None if a round failed or it was not read."""
        return statistics.median(self.cpu_us) if self.cpu_us and not self.errors else None


@dataclass
class PayloadReport:
    """Everything the section measured: ``runs[(line, size)]``."""

    sizes: tuple[int, ...]
    count: int
    maxsize: int
    repeat: int
    #: True if the server is not the run's own (--url, REDIS_URL): others' commands count.
    shared: bool = False
    runs: dict[tuple[str, int], Runs] = field(default_factory=dict)

    def line(self, key: str, size: int) -> Runs:
        return self.runs.setdefault((key, size), Runs())

    def batches(self, size: int) -> tuple[int, ...]:
        """The batch sizes run at ``size``: those of BATCHES no bigger than its N."""
        return tuple(b for b in BATCHES if b <= messages(size, self.count))


# -- the section ----------------------------------------------------------------------


def _single_lines(url: str, maxsize: int) -> list[tuple[str, Callable[[], Transport]]]:
    """The single-item lines, baseline first: (key, a factory of a fresh transport)."""
    return [("raw", functools.partial(RawRedisTransport, url)),
            (FLOOR, functools.partial(RawKeptTransport, url)),
            (SCRIPT_FLOOR, functools.partial(ScriptFloorTransport, url)),
            ("default", functools.partial(PressureTransport, url, 0)),
            ("bounded", functools.partial(PressureTransport, url, maxsize)),
            ("reliable", functools.partial(ReliableTransport, url)),
            ("mp", MultiprocessingTransport)]


def _batch_lines(url: str) -> list[tuple[Callable[[int], str], BatchTransport]]:
    """The batch lines, baseline first: (their key for a batch size, a fresh transport)."""
    return [(_raw_batch, RawBatch(url)), (_batch, PressureBatch(url))]


def _phase(size: int, count: int, url: str) -> Phase:
    """N messages of ``size`` bytes, the server watched; a warm-up of a tenth of them (at least
    10, at most the harness's), so 1 MB payloads do not move another 200 MB first."""
    n = messages(size, count)
    return Phase(size_text(size), n, size, warmup=min(WARMUP, max(10, n // 10)), server_url=url)


def _size_round(ctx: SpawnContext, url: str, size: int, report: PayloadReport) -> None:
    """Every line once at ``size``."""
    phase = _phase(size, report.count, url)
    for key, factory in _single_lines(url, report.maxsize):
        watched = phase if key != "mp" else dataclasses.replace(phase, server_url=None)
        result: PhaseResult = timed_phase(ctx, factory, _label(key, report.maxsize), watched)
        report.line(key, size).add(result.msgs_per_s, result.server_cpu_us, result.error,
                                   (result.producer_cpu_us, result.consumer_cpu_us))
    cells = [Cell(size, b, phase.count) for b in report.batches(size)]
    if not cells:
        return
    for key_of, transport in _batch_lines(url):
        began = time.monotonic()
        outcome = run_warm_cells(ctx, transport, cells, 1, server_url=url)
        for cell, value in zip(cells, outcome, strict=True):
            runs = report.line(key_of(cell.batch), size)
            if isinstance(value, CellRun):
                runs.add(value.msgs_per_s, value.server_cpu_us, None)
            else:
                runs.add(None, None, value)
                progress(f"{transport.label} {phase.name} x{cell.batch} failed: {value.rstrip()}")
        rates = ", ".join(f"x{c.batch} {fmt(v.msgs_per_s)}" if isinstance(v, CellRun) else f"x{c.batch} error"
                          for c, v in zip(cells, outcome, strict=True))
        progress(f"  {transport.label:<28} {phase.name:<10} {rates} msgs/s  ({time.monotonic() - began:.1f} s)")


def run_payloads(url: str, config: BenchConfig, shared: bool = False) -> PayloadReport:
    """``config.payload_repeat`` rounds, each of every payload size and every line; ``shared``:
    the server is not the run's own, so its CPU figures count other clients' commands."""
    ctx = spawn_context()
    report = PayloadReport(config.payload_sizes, config.count, config.maxsize, config.payload_repeat, shared)
    for n in range(report.repeat):
        progress(f" payload round {n + 1} of {report.repeat}")
        for size in report.sizes:
            _size_round(ctx, url, size, report)
    return report


# -- the report -----------------------------------------------------------------------

_LABELS = {"raw": "raw LPUSH/BRPOP", FLOOR: RawKeptTransport.label, SCRIPT_FLOOR: ScriptFloorTransport.label,
           "default": "pressure default",
           "bounded": "pressure bounded", "reliable": "pressure reliable", "mp": "multiprocessing.Queue"}


def _label(key: str, maxsize: int) -> str:
    if key == "bounded":
        return f"pressure maxsize={maxsize}"
    if key.startswith("raw x"):
        b = key.removeprefix("raw x")
        return f"raw LPUSH x{b} / RPOP {b}"
    if key.startswith("batch x"):
        b = key.removeprefix("batch x")
        return f"put_many/get_many {b}"
    return _LABELS[key]


def _baseline(key: str) -> str | None:
    """The line a line is compared with: raw (the floor's too), or raw batches of the same size;
    None for the baselines themselves and for multiprocessing.Queue."""
    if key in MODES or key in (FLOOR, SCRIPT_FLOOR):
        return "raw"
    if key.startswith("batch x"):
        return "raw x" + key.removeprefix("batch x")
    return None


def _vs(report: PayloadReport, key: str, size: int,
        base: str | None = None) -> tuple[float | None, float | None]:
    """A line's speed and CPU per message as ratios to ``base``'s, by default its baseline's
    (medians)."""
    base = base or _baseline(key)
    if base is None:
        return None, None
    ours, theirs = report.line(key, size), report.line(base, size)
    return ratio(ours.rate, theirs.rate), ratio(ours.cpu, theirs.cpu)


def _extra(report: PayloadReport, key: str, size: int, base: str | None = None) -> float | None:
    """A line's server CPU per message above ``base``'s, by default its baseline's, in µs
    (medians)."""
    base = base or _baseline(key)
    ours, theirs = report.line(key, size).cpu, report.line(base, size).cpu if base else None
    return None if ours is None or theirs is None else ours - theirs


def _pair(speed: float | None, cpu: float | None) -> str:
    return f"{fmt(speed, 2, 'x')} / {fmt(cpu, 2, 'x')}"


def _cpu_digits(value: float | None) -> int:
    return 1 if value is None or abs(value) >= 10 else 2


def format_payload_table(report: PayloadReport) -> list[str]:
    """One row per payload size: raw's figures, every other line against its baseline, and
    pressure default against the floor."""
    header = ("payload", "msgs", "raw msgs/s (MB/s)", "raw CPU µs/msg", "floor: speed / CPU",
              "script floor: speed / CPU",
              *(f"{m}: speed / CPU" for m in MODES), "default vs floor: speed / CPU",
              *(f"batch {b}: speed / CPU" for b in BATCHES), "mp.Queue msgs/s")
    rows = [header]
    for size in report.sizes:
        raw = report.line("raw", size)
        mb = None if raw.rate is None else raw.rate * size / 1e6
        raw_text = "error" if raw.errors else f"{fmt(raw.rate)} ({fmt(mb, 1)})"
        batches = [_pair(*_vs(report, _batch(b), size)) if b in report.batches(size) else "-" for b in BATCHES]
        mp = report.line("mp", size)
        rows.append((size_text(size), f"{messages(size, report.count):,}", raw_text,
                     fmt(raw.cpu, _cpu_digits(raw.cpu)), _pair(*_vs(report, FLOOR, size)),
                     _pair(*_vs(report, SCRIPT_FLOOR, size)),
                     *(_pair(*_vs(report, m, size)) for m in MODES), _pair(*_vs(report, "default", size, FLOOR)),
                     *batches,
                     "error" if mp.errors else fmt(mp.rate)))
    return render_table(rows)


def _spread(values: Sequence[float], digits: int) -> str:
    if not values:
        return "-"
    return (f"{fmt(statistics.median(values), digits)} "
            f"({fmt(min(values), digits)}-{fmt(max(values), digits)})")


def format_payload_spread(report: PayloadReport) -> list[str]:
    """Every line at every size: median (min-max) over the rounds, and against its baseline."""
    rows = [("payload", "line", "msgs/s (min-max)", "MB/s", "CPU µs/msg (min-max)", "speed vs base",
             "CPU vs base", "extra CPU µs/msg")]
    for size in report.sizes:
        keys = ["raw", FLOOR, SCRIPT_FLOOR, *MODES, *(k for b in report.batches(size) for k in (_raw_batch(b), _batch(b))), "mp"]
        for key in keys:
            runs = report.line(key, size)
            speed, cpu = _vs(report, key, size)
            extra = _extra(report, key, size)
            digits = _cpu_digits(runs.cpu)
            mb = None if runs.rate is None else runs.rate * size / 1e6
            rows.append((size_text(size), _label(key, report.maxsize),
                         "error" if runs.errors else _spread(runs.rates, 0), fmt(mb, 1),
                         "-" if runs.errors else _spread(runs.cpu_us, digits),
                         fmt(speed, 2, "x"), fmt(cpu, 2, "x"), fmt(extra, _cpu_digits(extra))))
    return render_table(rows)


def format_payload_cpu(report: PayloadReport) -> list[str]:
    """Where each single-item line's CPU goes per message: the producer process's own, the
    consumer's, the Redis main thread's, and their sum against raw's (on 2 shared cores the
    three processes' sum bounds the speed)."""
    rows = [("payload", "line", "producer µs/msg", "consumer µs/msg", "Redis µs/msg", "total µs/msg",
             "total vs raw")]
    for size in report.sizes:
        raw = report.line("raw", size)
        raw_total = None if raw.clients is None or raw.cpu is None else sum(raw.clients) + raw.cpu
        for key in ("raw", FLOOR, SCRIPT_FLOOR, *MODES, "mp"):
            runs = report.line(key, size)
            clients = runs.clients
            if clients is None:
                continue
            server = runs.cpu if key != "mp" else 0.0
            total = None if server is None else sum(clients) + server
            rows.append((size_text(size), _label(key, report.maxsize), fmt(clients[0], 1), fmt(clients[1], 1),
                         "-" if key == "mp" else fmt(server, 1), fmt(total, 1),
                         fmt(ratio(total, raw_total), 2, "x")))
    return render_table(rows)


def _goal(text: str, value: float | None, goal: float, numbers: str, at_most: bool = False) -> str:
    """A goal's line: the ratio, met or not met, and the figures it comes from."""
    if value is None:
        return f"  {text:<52} {'n/a':>8}  not met (no result{'; ' + numbers if numbers else ''})"
    met = value <= goal if at_most else value >= goal
    return f"  {text:<52} {value:>7.2f}x  {'met' if met else 'not met'} ({numbers})"


def _rates(report: PayloadReport, key: str, size: int) -> str:
    base = _baseline(key) or "raw"
    return f"{fmt(report.line(key, size).rate)} vs {fmt(report.line(base, size).rate)} msgs/s"


def _growth(report: PayloadReport, mode: str, size: int, smallest: int, base: str) -> str:
    """Goal (b)'s line for ``mode`` at ``size``: its server CPU per message above ``base``'s
    (raw, or the floor: "(b, floor)") within GOAL_EXTRA_CPU of that at ``smallest``."""
    extra, small = _extra(report, mode, size, base), _extra(report, mode, smallest, base)
    numbers = f"{fmt(extra, _cpu_digits(extra))} vs {fmt(small, _cpu_digits(small))} µs/msg over {base}"
    grows = None if extra is None or small is None or small <= 0 else extra / small
    tag = "(b)" if base == "raw" else f"(b, {base})"
    return _goal(f"{tag} {size_text(size)} {mode} extra CPU <= {GOAL_EXTRA_CPU}x {size_text(smallest)}'s",
                 grows, GOAL_EXTRA_CPU, numbers, at_most=True)


def format_payload_goals(report: PayloadReport) -> list[str]:
    """The section's goals, from the medians, each met or not met with its figures:
    (a) at every payload of BIG and more, default and reliable at least 0.9x raw's speed;
    (b) there, each mode's extra server CPU per message over raw within 1.2x of its extra
    at the smallest payload, and beside it "(b, floor)", the same over the floor line (how
    much of the extra is the guarantee of keeping an item until received); (c) at the
    smallest payload, default and bounded at least 0.8x raw; (d) every batch line at least
    0.9x raw batches of its size. Beside (a) and (c), "(a, script floor)" and "(c, script
    floor)": whether the script floor line meets the same bar (where it does not, no queue
    whose every put and get is a Lua script meets it on this machine)."""
    smallest = min(report.sizes)
    big = [s for s in report.sizes if s >= BIG and s != smallest]
    lines = ["goals (payload sizes, from the medians):"]
    for size in big:
        for mode in ("default", "reliable"):
            lines.append(_goal(f"(a) {size_text(size)} {mode} speed >= {GOAL_BIG_SPEED}x raw",
                               _vs(report, mode, size)[0], GOAL_BIG_SPEED, _rates(report, mode, size)))
        lines.append(_goal(f"(a, script floor) {size_text(size)} speed >= {GOAL_BIG_SPEED}x raw",
                           _vs(report, SCRIPT_FLOOR, size)[0], GOAL_BIG_SPEED, _rates(report, SCRIPT_FLOOR, size)))
    for size in big:
        for mode in MODES:
            lines += [_growth(report, mode, size, smallest, "raw"), _growth(report, mode, size, smallest, FLOOR)]
    for mode in ("default", "bounded"):
        lines.append(_goal(f"(c) {size_text(smallest)} {mode} speed >= {GOAL_SMALL_SPEED}x raw",
                           _vs(report, mode, smallest)[0], GOAL_SMALL_SPEED, _rates(report, mode, smallest)))
    lines.append(_goal(f"(c, script floor) {size_text(smallest)} speed >= {GOAL_SMALL_SPEED}x raw",
                       _vs(report, SCRIPT_FLOOR, smallest)[0], GOAL_SMALL_SPEED,
                       _rates(report, SCRIPT_FLOOR, smallest)))
    for size in report.sizes:
        for b in report.batches(size):
            key = _batch(b)
            lines.append(_goal(f"(d) {size_text(size)} put_many/get_many {b} >= {GOAL_BATCH_SPEED}x raw",
                               _vs(report, key, size)[0], GOAL_BATCH_SPEED, _rates(report, key, size)))
    return lines


def print_payload_report(report: PayloadReport, config: BenchConfig) -> None:
    """The payload section: settings, the table, the spread over rounds, notes, goals."""
    print()
    print(f"payload sizes: 1 producer process -> 1 consumer process per line ('{START_METHOD}'), "
          f"payloads {', '.join(size_text(s) for s in report.sizes)}; {report.repeat} round(s), taking turns")
    print(f"  N messages per line: {report.count:,} at most, {CELL_BYTES >> 20} MiB at most unless that is "
          f"fewer than {MIN_MESSAGES}; batches of {', '.join(map(str, BATCHES))} where N holds one")
    print("  speed / CPU: msgs/s and the Redis main thread's CPU per message (INFO cpu) as ratios to raw "
          "LPUSH/BRPOP, the batch columns to raw LPUSH xB / RPOP B; medians over the rounds")
    print("  floor: raw LPUSH, and a get that keeps each item in Redis until received, with plain commands "
          "(DEL <held> and")
    print("    BLMOVE <list> <held> in one round trip); 'default vs floor': pressure default's speed / CPU "
          "as ratios to the floor's")
    print("  script floor: the protocol's Put and Get, keeping what is taken until the client has it, by the "
          "least Lua scripts")
    print("    (pressure/bench/floor_put.lua, floor_get.lua: one call per put and per get, the payload through "
          "Lua)")
    if report.shared:
        print("  the server is not the run's own: its CPU figures count other clients' commands too")
    print_lines(format_payload_table(report))
    print_lines(format_payload_spread(report), f"every line: median (min-max) over {report.repeat} round(s)")
    print_lines(format_payload_cpu(report), "where each message's CPU goes (medians; each process's own CPU "
                "over the timed part, Redis's main thread from INFO cpu):")
    errors = sorted({f"  - {_label(key, report.maxsize)} {size_text(size)}: {e.strip().splitlines()[-1]}"
                     for (key, size), runs in report.runs.items() for e in runs.errors})
    skipped = [f"{size_text(s)} x{b}" for s in report.sizes for b in BATCHES if b not in report.batches(s)]
    if skipped:
        errors.append(f"  - skipped (a batch bigger than the line's N): {', '.join(skipped)}")
    if errors:
        print_lines(errors, "notes:")
    print_lines(format_payload_goals(report))

"""The chaos soak (issue 12): clients SIGKILLed and started again, Redis restarted from its
AOF (appendfsync always; SIGKILL and graceful), every connection CLIENT KILLed, the server
paused, all at once on one private redis-server, then close, drain and verify.

1. reliable mode: every item whose put returned is acknowledged at least once; nothing is
   left in Redis; no process hangs; the role tokens are at their invariants;
2. default mode: the same, except what the docs (reliability.md, Guarantees) let it lose
   (DEFAULT_MODE_MAY_LOSE);
3. the Executor: every future done (the right result, or WorkerLost only after max_attempts
   real starts), no task started more than max_attempts times, shutdown returns.

The chaos is seeded (printed; replay with PRESSURE_CHAOS_SEED=<seed>) and bounded (a fixed
number of ticks; PRESSURE_CHAOS_TICKS=<n> for a longer soak); the only time limits are hang
bounds. Each scenario's figures are printed
and shown in the terminal summary ("chaos soak figures").

    .venv/bin/python -m pytest tests/test_chaos.py -q
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
from pressure.keys import ExecutorKeys
from pressure.testing import RedisServer

from . import chaos_executor as cx
from .chaos_helpers import (
    PHASES,
    Chaos,
    ChaosPlan,
    Fleet,
    QueueSpec,
    chaos_seed,
    describe_hung,
    keys_under,
    leftovers,
    token_problems,
    verdict_queue,
    worst_stall,
)
from .faults_helpers import fork_child, kill_and_reap

pytestmark = pytest.mark.slow

#: What the default mode may lose to a SIGKILLed consumer, as the docs' Guarantees
#: (reliability.md) state it ("a consumer that dies after receiving an item loses it ... never ...
#: by a consumer that dies before receiving them"):
#:   "processing": only the item get() had returned to the consumer, which was still
#:                 processing it when killed (nothing it held while inside get());
#:   "held":       also whatever sat in its in-flight list or inbox when it was killed, even
#:                 inside get() (at most one item per kill): the narrower promise.
#: Keep it to the docs' wording.
DEFAULT_MODE_MAY_LOSE = "processing"

def _ticks(default: int) -> int:
    """Chaos ticks: ``PRESSURE_CHAOS_TICKS`` makes a longer (or shorter) soak."""
    return int(os.environ.get("PRESSURE_CHAOS_TICKS") or default)


#: Producer and consumer processes on the queue.
PRODUCERS, CONSUMERS = 3, 3
#: The queue scenarios' chaos: ~180 ticks of 0.05-0.35 s (about a minute with the restarts).
QUEUE_PLAN = ChaosPlan(ticks=_ticks(180))
#: The Executor's: fewer, slower ticks (worker kills need replacements to start).
EXECUTOR_PLAN = ChaosPlan(ticks=_ticks(150), gap=(0.1, 0.4), restart_every=18)
#: After close, every client process must exit within this (seconds).
EXIT_BOUND = 60.0
REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def prefix() -> str:
    return f"chaos{uuid.uuid4().hex[:10]}"


def _close(q: pressure.Queue[Any], limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while True:
        try:
            q.close()
            return
        except pressure.BackendError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _report(chaos_figures: list[str], line: str) -> None:
    print(line)
    chaos_figures.append(line)


def _queue_scenario(reliable: bool, prefix: str, tmp_path: Path, chaos_figures: list[str],
                    pad: int = 0) -> None:
    mode = ("reliable" if reliable else "default") + (f", {pad}-byte payloads" if pad else "")
    seed = chaos_seed()
    print(f"\nchaos {mode}: seed {seed} (replay: PRESSURE_CHAOS_SEED={seed})")
    with RedisServer(appendonly=True) as srv:
        spec = QueueSpec(srv.url, prefix, "chaos", reliable, pad=pad)
        admin: pressure.Queue[Any] = pressure.Queue(spec.name, spec.maxsize, url=srv.url, prefix=prefix,
                                                    reliable=reliable)
        fleet = Fleet(spec, tmp_path, PRODUCERS, CONSUMERS, seed)
        problems: list[str] = []
        try:
            fleet.start_all()
            chaos = Chaos(srv, seed, QUEUE_PLAN, fleet.kill_random, fleet.check_running)
            chaos.run()
            fleet.check_running()
            finale = fleet.kill_a_holder()
            _close(admin)
            closed_at = time.monotonic()
            hung = fleet.wait_all(EXIT_BOUND)
            exit_seconds = time.monotonic() - closed_at
            for life in hung:
                problems.append(f"{life.name} did not exit within {EXIT_BOUND:.0f} s of close (a hang):\n"
                                + describe_hung(life.pid, f"{life.base}.stack"))
                kill_and_reap(life.pid)
                life.status = -1
            problems += fleet.unexpected
            r = redis.Redis.from_url(srv.url)
            left = leftovers(admin, r)
            figures, found = verdict_queue(fleet.lives, left, reliable, DEFAULT_MODE_MAY_LOSE, closed_at,
                                         chaos.breaks)
            problems += found
            admin.delete()
            remaining = keys_under(r, prefix)
            if remaining:
                problems.append(f"keys left after delete: {remaining[:10]}")
            r.close()
        finally:
            for life in fleet.current.values():
                if life.status is None:
                    kill_and_reap(life.pid)
            fleet.close()
            admin.disconnect()
    times = figures.pop("receive_times")
    stall, at = worst_stall(times, chaos.started, max(times, default=chaos.ended))
    k = fleet.kills
    in_phase = ", ".join(f"{k['consumer ' + name]} {name}" for name in PHASES.values())
    lost = (f"lost {figures['lost']}" if reliable else
            f"lost {figures['lost']} ({figures['lost_allowed']} as documented, {figures['lost_bad']} not)")
    dup = (f"{figures['duplicated']}" if reliable else f"{figures['duplicated']} ({figures['duplicated_allowed']} "
           f"as documented, {figures['duplicated_bad']} not)")
    extra = (f"acknowledged {figures['acked']}, ack False {figures['ack_false']}, redelivered "
             f"{figures['redelivered']}, ambiguous acks {figures['ambiguous_acks']}" if reliable
             else f"left in flight of dead consumers {figures['left_in_flight']}")
    _report(chaos_figures,
            f"chaos {mode} (seed {seed}): {chaos.ended - chaos.started:.0f} s of chaos; client SIGKILLs "
            f"{k['producer'] + k['consumer']} (producers {k['producer']}, consumers {k['consumer']}: {in_phase}); "
            f"{chaos.summary()}; then {finale.name if finale else 'no consumer'} SIGKILLed holding "
            f"{finale.held_at_kill if finale else '-'} just before the close; items put {figures['put']} "
            f"(+{figures['maybe']} maybe), received {figures['received']} ({figures['receipts']} receipts), "
            f"{lost}, duplicated {dup}, "
            f"{extra}, dead letters {figures['dead']}; OutcomeUnknown {figures['outcome_unknown']} "
            f"(LOADING {figures['loading_unknown']}), BackendError {figures['backend_errors']}; worst stall "
            f"{stall:.1f} s (at +{at:.0f} s); clients exited {exit_seconds:.1f} s after close; "
            f"problems {len(problems)}")
    if figures["put"] < QUEUE_PLAN.ticks or min(k["consumer"], k["producer"]) < QUEUE_PLAN.ticks // 8:
        problems.append(f"the chaos hardly ran: {figures['put']} puts returned, kills {dict(k)}")
    assert not problems, f"chaos {mode} (seed {seed}):\n  - " + "\n  - ".join(problems)


@pytest.mark.timeout(300)
def test_chaos_reliable_mode(prefix: str, tmp_path: Path, chaos_figures: list[str]) -> None:
    _queue_scenario(True, prefix, tmp_path, chaos_figures)


@pytest.mark.timeout(300)
def test_chaos_default_mode(prefix: str, tmp_path: Path, chaos_figures: list[str]) -> None:
    _queue_scenario(False, prefix, tmp_path, chaos_figures)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("reliable", [False, True], ids=["default", "reliable"])
def test_chaos_large_payloads(reliable: bool, prefix: str, tmp_path: Path, chaos_figures: list[str]) -> None:
    """The same with payloads of 5,000 bytes: puts, and default-mode gets, move them natively
    (MULTI/EXEC around the script: pressure.connection.NATIVE_BYTES)."""
    _queue_scenario(reliable, prefix, tmp_path, chaos_figures, pad=5000)


def _start_worker_group(spec: cx.ExecutorSpec, stderr: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with open(stderr, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "pressure", "worker", spec.name, "--url", spec.url, "--prefix",
             spec.prefix, "--processes", "2", "--visibility-timeout", str(spec.visibility_timeout),
             "--create"],  # it starts before its executor
            start_new_session=True, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=err)


@pytest.mark.timeout(360)
def test_chaos_executor(prefix: str, tmp_path: Path, chaos_figures: list[str]) -> None:
    seed = chaos_seed()
    print(f"\nchaos executor: seed {seed} (replay: PRESSURE_CHAOS_SEED={seed})")
    (tmp_path / "starts").mkdir()
    problems: list[str] = []
    kills: list[int] = []
    with RedisServer(appendonly=True) as srv:
        spec = cx.ExecutorSpec(srv.url, prefix)
        group = _start_worker_group(spec, tmp_path / "worker-group.log")
        child = fork_child(cx.executor_main, spec, str(tmp_path), seed)
        try:
            deadline = time.monotonic() + 60
            while not (tmp_path / "ready").exists():
                assert time.monotonic() < deadline, "the executor process did not get ready"
                assert os.waitpid(child, os.WNOHANG) == (0, 0), \
                    f"the executor process exited: {(tmp_path / 'executor.log').read_text()[-2000:]}"
                time.sleep(0.05)

            def kill_worker(rng: Any) -> None:
                workers = cx.workers_of(child) + cx.workers_of(group.pid)
                if workers:
                    victim = rng.choice(sorted(workers))
                    try:
                        os.kill(victim, signal.SIGKILL)
                        kills.append(victim)
                    except ProcessLookupError:
                        pass

            chaos = Chaos(srv, seed, EXECUTOR_PLAN, kill_worker)
            chaos.run()
            (tmp_path / "chaos-over").touch()
            bound = spec.future_bound + spec.shutdown_bound + 30
            deadline = time.monotonic() + bound
            status = None
            while status is None and time.monotonic() < deadline:
                done, status = os.waitpid(child, os.WNOHANG)
                status = status if done else None
                time.sleep(0.1)
            if status is None:
                problems.append(f"the executor process did not finish within {bound:.0f} s of the chaos "
                                f"(a hang):\n" + describe_hung(child, str(tmp_path / "executor.stack")))
            elif status != 0:
                problems.append(f"the executor process failed ({status}): "
                                f"{(tmp_path / 'executor.log').read_text()[-2000:]}")
            report_path = tmp_path / "outcomes.json"
            report = json.loads(report_path.read_text()) if report_path.exists() else None
            if report and (report.get("pending_after") or report.get("shutdown_seconds") is None):
                problems.append("stacks of the executor process at the hang:\n"
                                + (tmp_path / "executor.stack").read_text()[-4000:])
            # whatever cancelled tasks are still queued, the worker group drops them; then it stops
            tasks_q: pressure.Queue[Any] = pressure.Queue(f"{spec.name}:tasks", url=srv.url, prefix=prefix)
            wait_until = time.monotonic() + 20
            while (tasks_q.qsize() or tasks_q.in_flight()) and time.monotonic() < wait_until:
                time.sleep(0.2)
            left = (tasks_q.qsize(), len(tasks_q.in_flight()))
            if any(left):
                problems.append(f"task queue not empty after every future completed: {left[0]} queued, "
                                f"{left[1]} in flight")
            group.terminate()
            try:
                group.wait(30)
            except subprocess.TimeoutExpired:
                problems.append("python -m pressure worker did not stop within 30 s of SIGTERM:\n"
                                + "\n".join(describe_hung(p, None) for p in cx.workers_of(group.pid)))
            with redis.Redis.from_url(srv.url) as r:
                k = tasks_q.keys
                tokens = {"producer_free": r.llen(k.producer_free), "consumer_free": r.llen(k.consumer_free),
                          "not_full": r.llen(k.not_full), "closed": r.llen(k.closed)}
                # nothing the executor wrote outlives its work: every task's claim mark is gone
                claims = {f.decode(): v.decode()
                          for f, v in r.hgetall(ExecutorKeys.build(prefix, spec.name).claims).items()}
                # what a missing token's holder looks like, for the report
                holder = (f"waiter {r.get(k.waiter)!r} (lease {r.get(k.lease)!r}, {r.pttl(k.lease)} ms left), "
                          f"consumers {r.hgetall(k.consumers)!r}")
            found_tokens = token_problems(tokens, "task queue", closed=False)
            problems += [f"{p}; {holder}" for p in found_tokens]
            if claims:
                problems.append(f"{len(claims)} claim marks left after shutdown(wait=True) and the task "
                                f"queue drained: {sorted(claims.items())[:10]}")
            tasks_q.disconnect()
        finally:
            cx.kill_group(child)
            kill_and_reap(child)
            cx.kill_group(group.pid)
            group.wait(10)
    assert report is not None, "\n".join(problems) or "no outcomes written"
    starts, start_times = cx.read_starts(tmp_path)
    figures, found = cx.verdict_executor(spec, report, starts)
    problems += found
    ends = [e["done_at"] for e in report["outcomes"].values() if e.get("done_at")]
    stall, at = worst_stall(start_times, chaos.started, max(ends, default=chaos.ended))
    shutdown = figures["shutdown_seconds"]
    _report(chaos_figures,
            f"chaos executor (seed {seed}): {chaos.ended - chaos.started:.0f} s of chaos; worker SIGKILLs "
            f"{len(kills)}; {chaos.summary()}; tasks {figures['tasks']} ({spec.killers} kill their worker), "
            f"outcomes {figures['outcomes']}, retried {figures['retried']}, most starts of one task "
            f"{figures['max_starts']} (max_attempts {spec.max_attempts}), cancel() True {figures['cancel_true']} "
            f"/ False {figures['cancel_false']}; worst stall {stall:.1f} s (at +{at:.0f} s); shutdown "
            f"{'hung' if shutdown is None else f'{shutdown:.1f} s'}; problems {len(problems)}")
    if len(kills) < EXECUTOR_PLAN.ticks // 8:
        problems.append(f"the chaos hardly ran: {len(kills)} worker kills")
    assert not problems, f"chaos executor (seed {seed}):\n  - " + "\n  - ".join(problems)

"""pressure demo: a producer, a bounded queue, and a pool of worker processes.

What it shows:

* **Backpressure.** The producer puts ``--jobs`` small jobs into a pressure
  queue bounded at ``--maxsize`` items. It can produce far faster than the
  workers consume, so the queue fills up and ``put()`` blocks until a worker
  makes room: the progress lines show the queue pinned at its bound and how
  often (and how long) the producer had to wait.
* **Processes, not threads.** ``--workers`` ``multiprocessing.Process``
  workers get the queue handles as plain arguments (a handle pickles as its
  configuration and reconnects in the child), with any start method
  (``--start-method fork``, ``spawn`` or ``forkserver``).
* **The ``queue.Queue`` API.** Workers loop ``for job in jobs:``, which ends
  when the producer has called ``close()`` and the queue is drained; they put
  their results into a second, unbounded queue and call ``task_done()``.
* **Exactly once.** At the end every job must have been processed exactly
  once; the demo checks that and prints both queues' ``statistics()``.

Where Redis is: ``--url`` if given, else the environment (``REDIS_URL``, else
``REDIS_SERVER``/``REDIS_PORT``/``REDIS_DB``). If none is given, or nothing
answers there, the demo starts a private ``redis-server`` on a free port for the
run (and stops it at the end): it never uses a server nobody named, not even
one on 127.0.0.1:6379. It never touches other data either: its two queues have
random names and are deleted when it finishes.

Run it::

    python examples/demo.py
    python examples/demo.py --jobs 500 --workers 8 --maxsize 5 --start-method spawn
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import TypedDict

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

try:
    import pressure
except ImportError:  # running from a source checkout without installing it
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import pressure

from pressure.connection import ConnectionConfig
from pressure.testing import RedisServer, ServerUnavailable

#: How long the demo waits for a PING before deciding nothing answers.
PING_TIMEOUT = 1.0
#: Seconds between two progress lines.
TICK = 0.5
#: A blocked put() is retried in slices this long, so the producer can report
#: progress and notice if every worker died.
PUT_SLICE = 0.25
#: Simulated work per job, in milliseconds.
WORK_MS = (10, 40)


class Job(TypedDict):
    id: int
    n: int
    ms: int


class Result(TypedDict):
    id: int
    n: int
    square: int
    worker: int


# -- the worker process ----------------------------------------------------------------


def worker(index: int, jobs: pressure.Queue[Job], results: pressure.Queue[Result]) -> None:
    """Consume jobs until the queue is closed and drained.

    Runs in a child process; ``jobs`` and ``results`` arrived pickled (or
    inherited by fork) and connect to Redis on first use.
    """
    # Ctrl-C goes to the whole process group: let the parent decide how to stop us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for job in jobs:  # ends with ShutDown once closed and drained
            time.sleep(job["ms"] / 1000)  # "work"
            results.put({"id": job["id"], "n": job["n"], "square": job["n"] * job["n"],
                         "worker": index})
            jobs.task_done()
    except pressure.ShutDown:
        # the parent shut the queues down hard (or deleted them) to stop us early
        pass
    except pressure.BackendError as exc:
        # Redis went away (e.g. a private server stopped by Ctrl-C): say so in one line
        print(f"worker {index}: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    finally:
        jobs.disconnect()
        results.disconnect()


# -- connection ------------------------------------------------------------------------


def describe_source(url: str | None) -> str:
    if url:
        return "--url"
    if os.environ.get("REDIS_URL"):
        return "REDIS_URL"
    if any(os.environ.get(v) for v in ("REDIS_SERVER", "REDIS_PORT", "REDIS_DB")):
        return "REDIS_SERVER/REDIS_PORT/REDIS_DB"
    return "default"


def answers_ping(config: ConnectionConfig) -> bool:
    """Whether a Redis server answers PING at ``config`` within PING_TIMEOUT.

    An authentication failure (or any other error reply) means something
    *does* answer there, so it is raised rather than reported as "nothing".
    """
    kwargs = dict(config.kwargs)
    kwargs["socket_connect_timeout"] = PING_TIMEOUT
    kwargs["socket_timeout"] = PING_TIMEOUT
    pool = redis.ConnectionPool(connection_class=config.connection_class,
                                retry=Retry(NoBackoff(), 0), **kwargs)
    client = redis.Redis(connection_pool=pool)
    try:
        return bool(client.ping())
    except redis.AuthenticationError:
        raise
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    finally:
        pool.disconnect()


# -- progress --------------------------------------------------------------------------


def bar(size: int, maxsize: int, width: int = 20) -> str:
    """``[######    ]``: the queue's fill level, one character per slot up to ``width``."""
    width = max(1, min(maxsize, width))
    filled = min(width, round(width * size / maxsize)) if maxsize else 0
    return "[" + "#" * filled + "." * (width - filled) + "]"


@dataclass
class Progress:
    """What the producer knows, and a progress line every TICK seconds."""

    jobs: pressure.Queue[Job]
    results: pressure.Queue[Result]
    total: int
    maxsize: int
    started: float = field(default_factory=time.monotonic)
    produced: int = 0
    waits: int = 0
    waited: float = 0.0
    last_tick: float = 0.0

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_tick < TICK:
            return
        self.last_tick = now
        js = self.jobs.statistics()
        done = self.results.statistics().produced_messages
        width = len(str(self.total))
        print(
            f"  {now - self.started:5.1f}s  produced {self.produced:{width}}/{self.total}"
            f"  taken {js.consumed_messages:{width}}  done {done:{width}}"
            f"  queue {bar(js.size, js.maxsize)} {js.size:{len(str(self.maxsize))}}/{js.maxsize}"
            f"  producer waited {self.waits}x, {self.waited:.2f}s",
            flush=True,
        )


# -- the demo --------------------------------------------------------------------------


def produce(progress: Progress, workers: list[BaseProcess], rng: random.Random) -> None:
    """Put every job; count the puts that found the queue full and had to wait."""
    jobs = progress.jobs
    for i in range(progress.total):
        job: Job = {"id": i, "n": rng.randrange(1, 10_000), "ms": rng.randint(*WORK_MS)}
        try:
            jobs.put_nowait(job)  # succeeds at once unless the queue is at its bound
        except pressure.Full:
            # backpressure: wait for a worker to make room (in slices, to keep reporting)
            progress.waits += 1
            t0 = time.monotonic()
            while True:
                try:
                    jobs.put(job, timeout=PUT_SLICE)
                    break
                except pressure.Full:
                    if not any(p.is_alive() for p in workers):
                        raise RuntimeError("every worker has exited; nobody will make room") from None
                    progress.tick()
            progress.waited += time.monotonic() - t0
        progress.produced += 1
        progress.tick()


def wait_for_workers(progress: Progress, workers: list[BaseProcess]) -> None:
    while alive := [p for p in workers if p.is_alive()]:
        alive[0].join(timeout=0.1)
        progress.tick()


def check(results: list[Result], total: int, workers: int) -> bool:
    """Every job id exactly once, with the right answer."""
    counts = collections.Counter(r["id"] for r in results)
    missing = sorted(set(range(total)) - counts.keys())
    duplicated = sorted(i for i, c in counts.items() if c > 1)
    unexpected = sorted(i for i in counts if not 0 <= i < total)
    wrong = sorted(r["id"] for r in results if r["square"] != r["n"] * r["n"])
    per_worker = collections.Counter(r["worker"] for r in results)
    print("jobs per worker: " + ", ".join(f"w{w}={per_worker[w]}" for w in range(workers)))
    if not (missing or duplicated or unexpected or wrong) and len(results) == total:
        print(f"OK: all {total} jobs were processed exactly once ({len(results)} results)")
        return True

    def some(ids: list[int]) -> str:
        return ", ".join(map(str, ids[:10])) + (" ..." if len(ids) > 10 else "")

    print(f"MISMATCH: {len(results)} results for {total} jobs")
    for label, ids in (("missing", missing), ("processed more than once", duplicated),
                       ("unknown ids", unexpected), ("wrong results", wrong)):
        if ids:
            print(f"  {label}: {len(ids)} ({some(ids)})")
    return False


def print_statistics(stats: dict[str, pressure.QueueStatistics]) -> None:
    """One column per queue, one row per ``QueueStatistics`` field."""
    fields: list[tuple[str, Callable[[pressure.QueueStatistics], object]]] = [
        ("name", lambda s: s.name),
        ("size", lambda s: s.size),
        ("maxsize", lambda s: s.maxsize or "0 (unbounded)"),
        ("closed", lambda s: s.closed),
        ("produced messages", lambda s: s.produced_messages),
        ("produced bytes", lambda s: s.produced_bytes),
        ("consumed messages", lambda s: s.consumed_messages),
        ("consumed bytes", lambda s: s.consumed_bytes),
        ("unfinished tasks", lambda s: s.unfinished_tasks),
        ("last producer", lambda s: s.producer),
        ("last consumer", lambda s: s.consumer),
    ]
    table = [("", list(stats))]
    table += [(label, [str(get(s)) for s in stats.values()]) for label, get in fields]
    w0 = max(len(label) for label, _ in table)
    widths = [max(len(cells[i]) for _, cells in table) for i in range(len(stats))]
    for n, (label, cells) in enumerate(table):
        print(f"  {label:<{w0}}  " + "  ".join(f"{c:<{w}}" for c, w in zip(cells, widths)).rstrip())
        if n == 0:
            print(f"  {'-' * w0}  " + "  ".join("-" * w for w in widths))


def stop_workers(workers: list[BaseProcess], jobs: pressure.Queue[Job]) -> None:
    """Used only when the demo ends early: wake the workers and make them exit."""
    if not any(p.is_alive() for p in workers):
        return
    try:
        jobs.shutdown(immediate=True)  # blocked get()s raise ShutDown, the queue is emptied
    except pressure.PressureError as exc:
        print(f"(could not shut the jobs queue down: {exc})", file=sys.stderr)
    for p in workers:
        p.join(timeout=5)
    for p in workers:
        if p.is_alive():
            p.terminate()
            p.join()


def run(args: argparse.Namespace, url: str | None) -> int:
    ctx = multiprocessing.get_context(args.start_method)
    tag = f"demo-{uuid.uuid4().hex[:12]}"
    jobs: pressure.Queue[Job] = pressure.Queue(f"{tag}-jobs", maxsize=args.maxsize, url=url)
    results: pressure.Queue[Result] | None = None
    workers: list[BaseProcess] = []
    try:
        results = pressure.Queue(f"{tag}-results", maxsize=0, url=url)
        print(f"queues: {jobs.name} (maxsize {args.maxsize}) and {results.name} (unbounded); "
              f"both are deleted at the end")
        print(f"{args.jobs} jobs -> {args.workers} worker processes "
              f"(start method {ctx.get_start_method()}), {WORK_MS[0]}-{WORK_MS[1]} ms of work each")
        print("progress: produced = put by the producer, taken = got by the workers, done = results "
              "back,\n          queue = items waiting in the bounded queue")
        print()

        started = time.monotonic()
        workers = [ctx.Process(target=worker, args=(i, jobs, results), name=f"demo-worker-{i}")
                   for i in range(args.workers)]
        for p in workers:
            p.start()

        progress = Progress(jobs, results, args.jobs, args.maxsize, started=started,
                            last_tick=started)
        produce(progress, workers, random.Random(args.seed))
        jobs.close()  # no more jobs: workers leave their loop once the queue is drained
        progress.tick(force=True)
        print("  producer done, queue closed; waiting for the workers to drain it", flush=True)
        wait_for_workers(progress, workers)
        progress.tick(force=True)
        elapsed = time.monotonic() - started
        failed = [p for p in workers if p.exitcode != 0]
        for p in failed:
            print(f"worker {p.name} exited with code {p.exitcode}")

        results.close()  # everything is in: iterating now drains it and stops
        collected: list[Result] = []
        for result in results:
            collected.append(result)
            results.task_done()
        print()
        ok = check(collected, args.jobs, args.workers) and not failed
        print()
        print("statistics():")
        print_statistics({"jobs queue": jobs.statistics(), "results queue": results.statistics()})
        print(f"  (ids are host:pid:thread; the producer is pid {os.getpid()}, the workers are pids "
              f"{', '.join(str(p.pid) for p in workers)};\n"
              f"   close() takes the producer role, so the closer is the last producer of a queue)")
        print()
        rate = args.jobs / elapsed if elapsed > 0 else float("inf")
        print(f"elapsed: {elapsed:.2f} s ({rate:.0f} jobs/s); the producer waited on a full queue "
              f"{progress.waits} times of {args.jobs} puts, {progress.waited:.2f} s in all")
        return 0 if ok else 1
    finally:
        stop_workers(workers, jobs)
        for q in (jobs, results):
            if q is None:
                continue
            try:
                q.delete()
            except pressure.QueueDoesNotExist:
                pass
            except pressure.PressureError as exc:
                print(f"warning: could not delete queue {q.name!r}: {exc}", file=sys.stderr)
            q.disconnect()


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Producer -> bounded pressure queue -> worker processes, with backpressure.")
    parser.add_argument("--jobs", type=positive, default=200, help="jobs to produce (default 200)")
    parser.add_argument("--workers", type=positive, default=4,
                        help="worker processes (default 4)")
    parser.add_argument("--maxsize", type=positive, default=10,
                        help="bound of the jobs queue (default 10)")
    parser.add_argument("--url", help="Redis URL (default: REDIS_URL, else REDIS_SERVER/"
                                      "REDIS_PORT/REDIS_DB, else a private redis-server for the run)")
    parser.add_argument("--start-method", choices=multiprocessing.get_all_start_methods(),
                        default=None,
                        help=f"multiprocessing start method (default: the platform's, "
                             f"{multiprocessing.get_context().get_start_method()})")
    parser.add_argument("--seed", type=int, default=None, help="random seed for the jobs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    source = describe_source(args.url)
    try:
        config = (ConnectionConfig.from_url(args.url) if args.url
                  else ConnectionConfig.from_environment())
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    try:  # a server nobody named (the default address) is never used
        alive = source != "default" and answers_ping(config)
    except redis.RedisError as exc:
        print(f"error: Redis at {config.url} ({source}) answered but refused: {exc}",
              file=sys.stderr)
        return 2

    server: RedisServer | None = None
    url: str | None = args.url  # None: the queues read the environment themselves
    if alive:
        print(f"redis: {config.url} ({source})")
    else:
        if source == "default":
            print("redis: none named (no --url, REDIS_URL or REDIS_SERVER)")
        else:
            print(f"redis: nothing answers at {config.url} ({source}) within {PING_TIMEOUT:g} s")
        try:
            server = RedisServer()
            server.start()
        except (ServerUnavailable, OSError) as exc:  # OSError: a binary that cannot run
            if server is not None:
                server.cleanup()
            print(f"error: cannot start a private Redis either: {exc}", file=sys.stderr)
            return 2
        url = server.url
        print(f"redis: STARTED A PRIVATE redis-server at {server.url} ({server.binary}); "
              f"it is stopped when the demo ends")

    try:
        return run(args, url)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except (pressure.PressureError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.cleanup()
            print(f"redis: private redis-server at {server.url} stopped")


if __name__ == "__main__":
    sys.exit(main())

"""The command line of ``pressure bench`` (``python -m pressure bench``, ``python -m
pressure.bench``): its options (``bench_command``, a click command, whose docstring is the
--help text), ``config_from_args`` and ``main``, which runs the chosen sections and prints
their reports.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import click
import redis

from ..cli._params import ParamType, Positive
from ..sharded import MAX_SHARDS
from ..testing import ServerUnavailable
from ._harness import (PRIVATE, START_ROUNDS, STAMP, BenchConfig, print_machine, progress, redis_url, safe_url,
                       usable_cpus)
from .queues import print_report, run_all

__all__ = ["bench_command", "config_from_args", "main", "parse_args", "run"]

#: The options that each run one section alone: at most one of them.
_SECTIONS = ("executor", "no_executor", "batch", "payload", "spark", "server_cost", "sharded", "pool")

class _Sizes(ParamType):
    """A comma-separated list of integers from ``least`` to ``most``."""

    name = "N,N,..."

    def __init__(self, least: int = 1, most: int | None = None) -> None:
        self.least, self.most = least, most

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        try:
            values = tuple(int(part) for part in str(value).split(","))
        except ValueError:
            self.fail(f"must be comma-separated integers, not {value}", param, ctx)
        if min(values) < self.least:
            self.fail(f"each must be at least {self.least}, not {value}", param, ctx)
        if self.most is not None and max(values) > self.most:
            self.fail(f"each must be at most {self.most}, not {value}", param, ctx)
        return values


def _count(default: int | None, help_text: str, *names: str, show_default: bool = True) -> Callable[[Any], Any]:
    """An option of a positive integer."""
    return click.option(*names, type=click.IntRange(min=1), default=default, metavar="N",
                        show_default=show_default and default is not None, help=help_text)


@click.command("bench", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", default=None, metavar="URL",
              help="The Redis server (default: pressure's --url, else REDIS_URL if that server answers, else a "
                   "private redis-server started for the run).")
@_count(20_000, "Messages in the throughput phase, and per line of the payload section at 100 bytes "
        "(fewer for bigger payloads).", "--count")
@click.option("--size", type=click.IntRange(min=STAMP.size), default=100, show_default=True, metavar="BYTES",
              help=f"Payload size in bytes, at least {STAMP.size}.")
@_count(100, "The bound of the bounded pressure.Queue (queue and payload sections).", "--maxsize")
@_count(2_000, "Messages in the latency phase.", "--latency-count")
@click.option("--rate", type=Positive(), default=2_000.0, show_default=True,
              help="Messages per second in the latency phase.")
@_count(None, "Rounds, taking turns: each section's best one counts, the payload section reports their "
        "median and range (default: 1; 3 for the payload section).", "--repeat")
@click.option("--executor", is_flag=True, help="Run only the executor section.")
@click.option("--no-executor", is_flag=True, help="Run only the queue section.")
@click.option("--batch", is_flag=True,
              help="Run only the batch section (put_many and get_many; about a minute per --repeat round).")
@click.option("--payload", is_flag=True,
              help="Run only the payload section (also in the default run): what a payload of each "
                   "--payload-sizes costs through pressure.Queue (default, bounded, reliable, put_many/get_many) "
                   "against raw redis-py LPUSH/BRPOP, a raw floor keeping each item until received and a "
                   "script floor (the protocol by the least Lua scripts), in msgs/s, MB/s, and CPU per "
                   "message: Redis's, the producer's and the consumer's.")
@click.option("--spark", is_flag=True,
              help="Run only the Spark section: the pressure data source against raw redis-py from Spark "
                   "tasks (needs pyspark and Java).")
@click.option("--server-cost", is_flag=True,
              help="Run only the server-cost section: the Redis CPU time and commands each message costs, "
                   "against raw redis-py.")
@click.option("--sharded", is_flag=True,
              help="Run only the sharded-queue section: a ShardedQueue's throughput for several shard counts "
                   "on a local 3-master Redis Cluster it starts, against 1 shard and raw redis-py on one node.")
@click.option("--pool", is_flag=True,
              help="Run only the pool section: pressure.multiprocessing.Pool against multiprocessing.Pool, "
                   "and loky and dask where installed (pip install 'pressure-queue[bench]').")
@_count(5_000, "No-op tasks per --pool map with chunksize 1 and per imap_unordered.", "--pool-tasks")
@_count(100_000, "No-op tasks per --pool map with the default chunksize.", "--pool-map-tasks")
@_count(20_000, "Items per --sharded measurement of single puts and gets (10 times more for batches).",
        "--sharded-count")
@click.option("--sharded-shards", type=_Sizes(most=MAX_SHARDS), default="1,2,3,6", show_default=True,
              help="The shard counts of --sharded, comma-separated.")
@_count(3, "Producer processes, and as many consumers, per --sharded measurement.", "--sharded-procs")
@click.option("--sharded-batch", type=_Sizes(), default="1,100", show_default=True,
              help="The batch sizes of --sharded, comma-separated: 1 is put and get, more is put_many and "
                   "get_many.")
@_count(None, "Messages per path in --server-cost (default: 20000; 2000 with --server-cost-instructions).",
        "--server-cost-count")
@click.option("--server-cost-instructions", is_flag=True,
              help="With --server-cost: count the instructions a private Redis server, run under valgrind, "
                   "executes per message instead of timing it (repeatable within a few percent on a busy "
                   "machine; needs valgrind), then where a put's and a get's script call spend theirs, and "
                   "the instructions the clients (pressure's, raw redis-py's, the script floor's) execute per "
                   "put and per get.")
@click.option("--rtt", type=float, default=0.0, metavar="MS",
              help="Reach Redis through a proxy that adds this round-trip time in ms, as across hosts (queue "
                   "and batch sections).")
@click.option("--no-batch", is_flag=True, help="Skip the batch section (it is skipped by default).")
@click.option("--batch-sizes", type=_Sizes(), default="1,10,100,500", show_default=True,
              help="The batch sizes of the batch section, comma-separated.")
@click.option("--payload-sizes", type=_Sizes(least=STAMP.size), default="100,10000,1000000", show_default=True,
              help=f"The payload sizes of the batch and payload sections in bytes, comma-separated, each at least "
                   f"{STAMP.size}; bigger payloads move fewer messages.")
@_count(20_000, "Messages per batch-section measurement at 100 bytes.", "--batch-messages")
@_count(200_000, "100-byte items queued for the batch section's memory figure.", "--memory-items")
@_count(200_000, "Rows each Spark path moves.", "--spark-rows")
@_count(2, "Partitions of the Spark DataFrames.", "--spark-partitions")
@click.option("--spark-batch", type=click.IntRange(1, 1000), default=500, show_default=True, metavar="N",
              help="Items per round trip in the Spark section, at most 1000.")
@_count(50_000, "Rows per micro-batch of the Spark stream reader.", "--spark-stream-batch")
@_count(2, "Timed rounds of every Spark path, after a warm-up run; the best one counts.", "--spark-rounds")
@_count(usable_cpus(), f"Worker processes of each executor and pool (default: the CPUs usable here, {usable_cpus()}).",
        "--workers", show_default=False)
@_count(START_ROUNDS, "Start-and-stop rounds of each executor (and pool), taking turns: the cold start "
        "and idle shutdown figures are their medians.", "--start-rounds")
@_count(2_000, "No-op tasks per executor round.", "--executor-tasks")
@_count(40, "CPU-bound tasks per executor and pool round.", "--cpu-tasks")
@_count(256, "MiB hashed by each CPU-bound task.", "--cpu-mb")
@click.pass_context
def bench_command(ctx: click.Context, /, **options: Any) -> None:
    """Measure pressure's throughput and latency against its baselines.

    By default, on this machine and one Redis server: the queues (pressure.Queue,
    bounded, reliable and asyncio) against raw redis-py LPUSH/BRPOP, multiprocessing.Queue
    and the protocol's command sequence sent literally; pressure.Executor against
    concurrent.futures.ProcessPoolExecutor (cold start, shutdown, no-op tasks per second,
    CPU-bound tasks); and payload sizes (each of --payload-sizes through pressure.Queue and
    its batches against raw redis-py: msgs/s, MB/s, Redis CPU per message). Each of
    --no-executor, --executor, --payload, --batch, --server-cost, --sharded, --spark and
    --pool runs one section alone.

    Nothing is flushed: every queue and executor it makes has a name of its own, and its
    keys are deleted afterwards. It exits 0 whether or not the goals are met (it is a
    report), 1 if Redis cannot be reached, 2 on a bad option, 130 on Ctrl-C.
    """
    args = _checked(options)
    if args.url is None and ctx.parent is not None:
        args.url = ctx.parent.params.get("url")  # pressure's own --url, before the command
    ctx.exit(main(args))


def _checked(options: dict[str, Any]) -> SimpleNamespace:
    """The parsed options as attributes, once checked together (UsageError)."""
    chosen = [name for name in _SECTIONS if options[name]]
    if len(chosen) > 1:
        flags = " and ".join("--" + name.replace("_", "-") for name in chosen)
        raise click.UsageError(f"{flags} exclude each other: each runs one section alone")
    return SimpleNamespace(**options)


def parse_args(argv: Sequence[str]) -> SimpleNamespace:
    """The options of ``argv`` as attributes, parsed and checked but not run (for
    ``config_from_args``); a bad one is said on stderr and exits 2, as the command does."""
    try:
        with bench_command.make_context("bench", list(argv)) as ctx:
            return _checked(ctx.params)
    except click.ClickException as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None


def config_from_args(args: Any) -> BenchConfig:
    """The BenchConfig of the parsed options (``bench_command``'s, as attributes)."""
    if args.server_cost_instructions:
        args.server_cost = True  # the flag is a way of running that section
    alone = any(getattr(args, name) for name in _SECTIONS)
    return BenchConfig(url=args.url, count=args.count, size=args.size, maxsize=args.maxsize,
                       latency_count=args.latency_count, rate=args.rate, repeat=args.repeat or 1,
                       queues=not (args.executor or args.batch or args.spark or args.server_cost or args.pool
                                   or args.payload),
                       executors=not (args.no_executor or args.batch or args.spark or args.server_cost
                                      or args.pool or args.payload),
                       payloads=args.payload or not alone, payload_repeat=args.repeat or 3,
                       batches=args.batch and not args.no_batch,
                       workers=args.workers, executor_tasks=args.executor_tasks,
                       start_rounds=args.start_rounds,
                       cpu_tasks=args.cpu_tasks, cpu_mb=args.cpu_mb,
                       batch_sizes=args.batch_sizes, payload_sizes=args.payload_sizes,
                       batch_messages=args.batch_messages, memory_items=args.memory_items,
                       spark=args.spark, spark_rows=args.spark_rows,
                       spark_partitions=args.spark_partitions, spark_batch=args.spark_batch,
                       spark_stream_batch=args.spark_stream_batch, spark_rounds=args.spark_rounds,
                       server_cost=args.server_cost,
                       server_cost_count=args.server_cost_count or (
                           2_000 if args.server_cost_instructions else 20_000),
                       server_cost_instructions=args.server_cost_instructions,
                       rtt=args.rtt / 1000,
                       pools=args.pool, pool_tasks=args.pool_tasks, pool_map_tasks=args.pool_map_tasks)


def main(args: Any) -> int:
    """Run the benchmark from parsed options (``bench_command``'s, as attributes); the exit
    status: 0 even if goals are missed, 1 if Redis cannot be reached, 130 on Ctrl-C."""
    if args.sharded:
        return _sharded(args)
    config = config_from_args(args)
    try:
        with redis_url(config.url) as (url, how), contextlib.ExitStack() as stack:
            reports: list[Callable[[], None]] = []
            direct = url
            if config.rtt > 0:
                from ._delay import DelayProxy

                url = stack.enter_context(DelayProxy(url, config.rtt)).url
                progress(f"queues and batches reach Redis through a proxy adding {config.rtt * 1000:g} ms "
                         f"per round trip")
            if config.queues:
                progress(f"benchmarking 8 transports on {safe_url(url)} ...")
                results = run_all(url, config)
                reports.append(functools.partial(print_report, results, config))
            if config.executors:
                from . import executor as bench_executor

                progress(f"benchmarking 2 executors with {config.workers} workers each ...")
                executor_results = bench_executor.run_executors(direct, config)
                reports.append(functools.partial(bench_executor.print_executor_report,
                                                 executor_results, config))
            if config.payloads:
                from . import payload as bench_payload

                progress(f"benchmarking payload sizes on {safe_url(url)} ...")
                payload_report = bench_payload.run_payloads(url, config, shared=how != PRIVATE)
                reports.append(functools.partial(bench_payload.print_payload_report, payload_report, config))
            if config.batches:
                from . import batch as bench_batch

                progress(f"benchmarking batches on {safe_url(url)} ...")
                batch_report = bench_batch.run_batches(url, config)
                reports.append(functools.partial(bench_batch.print_batch_report, batch_report, config))
            if config.spark:
                from . import spark as bench_spark

                progress(f"benchmarking the Spark data source on {safe_url(url)} ...")
                spark_results = bench_spark.run_spark(direct, config)
                reports.append(functools.partial(bench_spark.print_spark_report, spark_results, config))
            if config.server_cost:
                from . import server_cost

                progress(f"measuring Redis CPU per message on {safe_url(url)} ...")
                cost_results = server_cost.run_server_cost(direct, config)
                reports.append(functools.partial(server_cost.print_server_cost_report, cost_results, config))
            if config.pools:
                from . import pool as bench_pool

                progress(f"benchmarking pools with {config.workers} workers each ...")
                pool_report = bench_pool.run_pools(direct, config)
                reports.append(functools.partial(bench_pool.print_pool_report, pool_report, config))
            print_machine(direct, how)
            for report in reports:
                report()
    except (ConnectionError, ServerUnavailable, redis.RedisError, OSError) as exc:
        print(f"pressure bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pressure bench: interrupted", file=sys.stderr)
        return 130
    return 0


def _sharded(args: Any) -> int:
    """The --sharded section: it starts its own cluster (--url does not apply)."""
    from . import sharded

    try:
        cells = sharded.run_sharded(args.sharded_count, args.size, args.sharded_procs,
                                    args.sharded_shards, args.sharded_batch, args.repeat or 1)
    except (ConnectionError, ServerUnavailable, redis.RedisError, OSError) as exc:
        print(f"pressure bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pressure bench: interrupted", file=sys.stderr)
        return 130
    sharded.print_sharded_report(cells, args.sharded_procs, usable_cpus())
    return 0


def run(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (the options after ``bench``; default ``sys.argv[1:]``) and run; the
    exit status (2 for a bad option)."""
    try:
        bench_command.main(args=sys.argv[1:] if argv is None else argv, prog_name="python -m pressure.bench")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0

"""The command line of ``python -m pressure bench``: the options (``add_arguments``,
``config_from_args``) and ``main``, which runs the chosen sections and prints their reports.
The --help text is the package's docstring.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import sys
from collections.abc import Callable

import redis

from ..sharded import MAX_SHARDS
from ..testing import ServerUnavailable
from ._harness import START_ROUNDS, STAMP, BenchConfig, print_machine, progress, redis_url, safe_url, usable_cpus
from .queues import print_report, run_all

__all__ = ["add_arguments", "build_parser", "config_from_args", "main", "run"]


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def _payload_size(text: str) -> int:
    value = int(text)
    if value < STAMP.size:
        raise argparse.ArgumentTypeError(f"must be at least {STAMP.size} (the timestamp), not {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def _size_list(text: str) -> tuple[int, ...]:
    """A comma-separated list of positive integers (each at least 8 when used as payloads)."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, not {text}") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"must be positive integers, not {text}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``bench`` options (shared by ``python -m pressure bench`` and ``run``)."""
    parser.add_argument("--url", help="Redis server URL (default: $REDIS_URL if it answers, "
                        "else a private redis-server started for the run)")
    parser.add_argument("--count", type=_positive_int, default=20_000,
                        help="messages in the throughput phase (default: %(default)s)")
    parser.add_argument("--size", type=_payload_size, default=100,
                        help="payload size in bytes, at least 8 (default: %(default)s)")
    parser.add_argument("--maxsize", type=_positive_int, default=100,
                        help="bound of the bounded pressure.Queue (default: %(default)s)")
    parser.add_argument("--latency-count", type=_positive_int, default=2_000,
                        help="messages in the latency phase (default: %(default)s)")
    parser.add_argument("--rate", type=_positive_float, default=2_000.0,
                        help="messages per second in the latency phase (default: %(default)s)")
    parser.add_argument("--repeat", type=_positive_int, default=1,
                        help="throughput rounds per transport and executor rounds, interleaved; "
                        "the best counts (default: %(default)s)")
    sections = parser.add_mutually_exclusive_group()
    sections.add_argument("--executor", action="store_true",
                          help="run only the executor section (default: both sections)")
    sections.add_argument("--no-executor", action="store_true",
                          help="run only the queue section (default: both sections)")
    sections.add_argument("--batch", action="store_true",
                          help="run only the batch section (put_many/get_many); it is opt-in, "
                          "not in the default run, because it takes about a minute per --repeat round")
    sections.add_argument("--spark", action="store_true",
                          help="run only the Spark section (the pressure data source against raw "
                          "redis-py from Spark tasks); opt-in, it needs pyspark and Java")
    sections.add_argument("--server-cost", action="store_true",
                          help="run only the server-cost section: Redis CPU and commands per message "
                               "against raw redis-py (INFO cpu, commandstats)")
    sections.add_argument("--sharded", action="store_true",
                          help="run only the sharded-queue section: a ShardedQueue's throughput on a "
                               "local 3-master Redis Cluster the section starts, for several shard "
                               "counts, against 1 shard and raw LPUSH/BRPOP on one node")
    parser.add_argument("--sharded-count", type=_positive_int, default=20_000,
                        help="items per --sharded cell of single puts/gets (x10 for batches; "
                             "default: %(default)s)")
    parser.add_argument("--sharded-shards", type=_size_list, default=(1, 2, 3, 6),
                        help="comma-separated shard counts of --sharded (default: 1,2,3,6)")
    parser.add_argument("--sharded-procs", type=_positive_int, default=3,
                        help="producer processes, and as many consumers, per --sharded cell "
                             "(default: %(default)s)")
    parser.add_argument("--sharded-batch", type=_size_list, default=(1, 100),
                        help="comma-separated batch sizes of --sharded: 1 is put/get, more is "
                             "put_many/get_many (default: 1,100)")
    parser.add_argument("--server-cost-count", type=_positive_int, default=None,
                        help="messages per path in --server-cost (default: 20000; 2000 with "
                             "--server-cost-instructions)")
    parser.add_argument("--server-cost-instructions", action="store_true",
                        help="with --server-cost: count the instructions a private server started "
                             "under valgrind's callgrind executes per message, instead of timing "
                             "it (repeatable within a few percent on a busy machine; needs valgrind)")
    parser.add_argument("--rtt", type=float, default=0.0, metavar="MS",
                        help="reach Redis through a proxy that adds this round-trip time in ms, as "
                             "across hosts (queue and batch sections; multiprocessing.Queue is local)")
    parser.add_argument("--no-batch", action="store_true",
                        help="skip the batch section (the default; kept for scripts)")
    parser.add_argument("--batch-sizes", type=_size_list, default=(1, 10, 100, 500),
                        help="comma-separated batch sizes of the batch section (default: 1,10,100,500)")
    parser.add_argument("--payload-sizes", type=_size_list, default=(100, 10_000, 1_000_000),
                        help="comma-separated payload sizes in bytes of the batch section, each at "
                        "least 8 (default: 100,10000,1000000); bigger payloads move fewer messages")
    parser.add_argument("--batch-messages", type=_positive_int, default=20_000,
                        help="messages per batch-section cell at 100 B (default: %(default)s)")
    parser.add_argument("--memory-items", type=_positive_int, default=200_000,
                        help="100-B items queued for the batch section's memory line "
                        "(default: %(default)s)")
    parser.add_argument("--spark-rows", type=_positive_int, default=200_000,
                        help="rows each Spark path moves (default: %(default)s)")
    parser.add_argument("--spark-partitions", type=_positive_int, default=2,
                        help="partitions of the Spark DataFrames (default: %(default)s)")
    parser.add_argument("--spark-batch", type=_positive_int, default=500,
                        help="items per round trip in the Spark section, at most 1000 "
                        "(default: %(default)s)")
    parser.add_argument("--spark-stream-batch", type=_positive_int, default=50_000,
                        help="rows per micro-batch of the Spark stream reader (default: %(default)s)")
    parser.add_argument("--spark-rounds", type=_positive_int, default=2,
                        help="timed rounds of every Spark path, after a warm-up run; the best "
                        "counts (default: %(default)s)")
    parser.add_argument("--workers", type=_positive_int, default=usable_cpus(),
                        help="worker processes of each executor (default: the CPUs usable, "
                        "here %(default)s)")
    parser.add_argument("--start-rounds", type=_positive_int, default=START_ROUNDS,
                        help="start-and-stop rounds of each executor, taking turns: cold start and "
                        "idle shutdown are their medians (default: %(default)s)")
    parser.add_argument("--executor-tasks", type=_positive_int, default=2_000,
                        help="no-op tasks per executor round (default: %(default)s)")
    parser.add_argument("--cpu-tasks", type=_positive_int, default=40,
                        help="CPU-bound tasks per executor round (default: %(default)s)")
    parser.add_argument("--cpu-mb", type=_positive_int, default=256,
                        help="MiB hashed by each CPU-bound task (default: %(default)s)")


def build_parser(prog: str = "python -m pressure bench") -> argparse.ArgumentParser:
    """A stand-alone parser for the bench options."""
    doc = sys.modules[__name__.rpartition(".")[0]].__doc__  # the package's: the --help text
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0] if doc else None)
    add_arguments(parser)
    return parser


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    if args.server_cost_instructions:
        args.server_cost = True  # the flag is a way of running that section
    return BenchConfig(url=args.url, count=args.count, size=args.size, maxsize=args.maxsize,
                       latency_count=args.latency_count, rate=args.rate, repeat=args.repeat,
                       queues=not (args.executor or args.batch or args.spark or args.server_cost),
                       executors=not (args.no_executor or args.batch or args.spark or args.server_cost),
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
                       rtt=args.rtt / 1000)


def main(args: argparse.Namespace) -> int:
    """Run the benchmark from parsed options; 0 even if goals are missed."""
    if args.sharded:
        return _sharded(args)
    config = config_from_args(args)
    if min(config.payload_sizes) < STAMP.size:
        print(f"pressure bench: --payload-sizes must be at least {STAMP.size}", file=sys.stderr)
        return 2
    if config.spark_batch > 1000:
        print("pressure bench: --spark-batch must be at most 1000", file=sys.stderr)
        return 2
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


def _sharded(args: argparse.Namespace) -> int:
    """The --sharded section: it starts its own cluster (--url does not apply)."""
    from . import sharded

    if max(args.sharded_shards) > MAX_SHARDS:
        print(f"pressure bench: --sharded-shards must be at most {MAX_SHARDS}", file=sys.stderr)
        return 2
    try:
        cells = sharded.run_sharded(args.sharded_count, args.size, args.sharded_procs,
                                    args.sharded_shards, args.sharded_batch, args.repeat)
    except (ConnectionError, ServerUnavailable, redis.RedisError, OSError) as exc:
        print(f"pressure bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pressure bench: interrupted", file=sys.stderr)
        return 130
    sharded.print_sharded_report(cells, args.sharded_procs, usable_cpus())
    return 0


def run(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (the options after ``bench``; default ``sys.argv[1:]``) and run."""
    return main(build_parser().parse_args(argv))

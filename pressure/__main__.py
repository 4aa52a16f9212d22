"""``python -m pressure`` and the ``pressure`` console script: the command line.

The commands that inspect and operate queues and executors (``ls``, ``stat``, ``watch``...)
are click commands in ``pressure.cli``; ``main`` adds to them these argparse subcommands,
handed their arguments unparsed:

* ``bench`` - throughput and latency of pressure.Queue against raw redis-py,
  multiprocessing.Queue and the protocol's literal command sequence
  (see ``pressure.bench``);
* ``worker NAME`` - worker processes for the ``pressure.Executor`` named NAME,
  on this host, until SIGINT or SIGTERM (see ``pressure.executor.worker``).

Each subcommand is a ``Subcommand``: its one-line help, a function that registers its
options and one that runs it from the parsed namespace; adding one is one more entry in
``SUBCOMMANDS``. Only the subcommand named on the command line is loaded (``python -m
pressure worker`` never imports the benchmark).
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]


class Subcommand(NamedTuple):
    #: One line for ``python -m pressure --help``.
    help: str
    #: Loads what it needs, registers its options on its parser and returns its description.
    add_arguments: Callable[[argparse.ArgumentParser], str | None]
    #: Runs it from the parsed namespace; returns the exit status.
    main: Callable[[argparse.Namespace], int]


# -- python -m pressure bench ----------------------------------------------------------------

def _bench_arguments(parser: argparse.ArgumentParser) -> str | None:
    from . import bench

    bench.add_arguments(parser)
    return bench.__doc__


def _bench_main(args: argparse.Namespace) -> int:
    from . import bench

    return bench.main(args)


# -- python -m pressure worker ---------------------------------------------------------------

def _positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (else a usage error, exit status 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _positive_seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds (else a usage error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of seconds, not {text}")
    return value


def _worker_arguments(parser: argparse.ArgumentParser) -> str | None:
    from .executor import worker

    parser.add_argument("name", help="the executor's name, as in pressure.Executor(name)")
    parser.add_argument("--url", default=None,
                        help="Redis URL (default: REDIS_URL, else REDIS_SERVER, REDIS_PORT, REDIS_DB)")
    parser.add_argument("--prefix", default=None, help="key prefix (default: PRESSURE_PREFIX or __pressure__)")
    parser.add_argument("--processes", type=_positive_int, default=None,
                        help="worker processes (default: one per CPU)")
    parser.add_argument("--visibility-timeout", type=_positive_seconds, default=30.0,
                        help="seconds before the task of a worker gone silent is redelivered (default 30)")
    parser.add_argument("--prefetch", type=_positive_int, default=worker.PREFETCH,
                        help=f"queued short tasks a worker takes and claims at once (default {worker.PREFETCH}; "
                             "1 = one at a time: then cancel() cancels any task not started)")
    parser.add_argument("--max-tasks-per-child", type=_positive_int, default=None, metavar="N",
                        help="tasks a worker process runs before another replaces it (default: no limit; "
                             "the processes then start with 'spawn')")
    parser.add_argument("--authkey-file", default=None, metavar="PATH",
                        help="a file holding the key the executor signs its tasks with, one key per line, "
                             "the first signing (default: PRESSURE_AUTHKEY)")
    parser.add_argument("--insecure-pickle", action="store_true",
                        help="run unsigned tasks from a Redis server not on this host (whoever can write "
                             "its keys runs code here; default: refused, as PRESSURE_INSECURE_PICKLE=1 allows)")
    return worker.__doc__


def _worker_main(args: argparse.Namespace) -> int:
    from .errors import UnsignedPickle
    from .executor.worker import run_workers
    from .outage import LOG_FORMAT

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    authkey = None
    if args.authkey_file is not None:
        try:
            with open(args.authkey_file, "rb") as f:
                authkey = [line.strip() for line in f.read().splitlines() if line.strip()]
        except OSError as exc:
            print(f"pressure worker: cannot read --authkey-file: {exc}", file=sys.stderr)
            return 2
        if not authkey:
            print(f"pressure worker: --authkey-file {args.authkey_file} holds no key", file=sys.stderr)
            return 2
    try:
        run_workers(args.name, url=args.url, prefix=args.prefix, processes=args.processes,
                    visibility_timeout=args.visibility_timeout, prefetch=args.prefetch, authkey=authkey,
                    max_tasks_per_child=args.max_tasks_per_child, insecure_pickle=args.insecure_pickle)
    except UnsignedPickle as exc:  # refused before anything was sent or started: one line
        print(f"pressure worker: {exc}", file=sys.stderr)
        return 2
    return 0


#: name -> its Subcommand
SUBCOMMANDS: dict[str, Subcommand] = {
    "bench": Subcommand("measure throughput and latency against raw redis-py and other queues",
                        _bench_arguments, _bench_main),
    "worker": Subcommand("run worker processes for a pressure.Executor", _worker_arguments, _worker_main),
}


#: The options of ``pressure`` itself that each subcommand takes too (passed on to it).
_FORWARD = {"bench": ("--url",), "worker": ("--url", "--prefix")}


def build_parser(command: str | None = None, prog: str = "python -m pressure") -> argparse.ArgumentParser:
    """The parser of the argparse subcommands, with one subparser per subcommand; only that
    of ``command`` (if given) has its options, so only its modules are imported."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="pressure: distributed, bounded, blocking FIFO queues on Redis.",
    )
    subparsers = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    for name, sub in SUBCOMMANDS.items():
        subparser = subparsers.add_parser(name, help=sub.help,
                                          formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == command:
            subparser.description = sub.add_arguments(subparser)
            subparser.set_defaults(handler=sub.main)
    return parser


def _run_subcommand(argv: list[str], prog: str) -> int:
    """Parse ``argv`` (a subcommand and its arguments) and run that subcommand."""
    args = build_parser(argv[0], prog).parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    from .cli import add_passthrough, cli

    for name, sub in SUBCOMMANDS.items():
        if name not in cli.commands:
            add_passthrough(name, sub.help, _run_subcommand, _FORWARD.get(name, ()))
    try:
        cli.main(args=sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

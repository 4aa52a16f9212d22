"""``python -m pressure``: the command line.

Subcommands:

* ``bench`` - throughput and latency of pressure.Queue against raw redis-py,
  multiprocessing.Queue and the protocol's literal command sequence
  (see ``pressure.bench``);
* ``worker NAME`` - worker processes for the ``pressure.Executor`` named NAME,
  on this host, until SIGINT or SIGTERM (see ``pressure.executor.worker``).

Each subcommand registers its options with ``add_arguments(parser)`` and runs
from the parsed namespace with ``main(args) -> int``; adding one is one more
entry in ``SUBCOMMANDS``. Without a subcommand the help is printed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from types import ModuleType

__all__ = ["SUBCOMMANDS", "build_parser", "main"]


def _bench() -> ModuleType:
    from . import bench

    return bench


def _worker() -> ModuleType:
    from .executor import worker

    return worker


#: name -> (one-line help, loader of the module providing add_arguments and main)
SUBCOMMANDS: dict[str, tuple[str, Callable[[], ModuleType]]] = {
    "bench": ("measure throughput and latency against raw redis-py and other queues", _bench),
    "worker": ("run worker processes for a pressure.Executor", _worker),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m pressure`` parser, with one subparser per subcommand."""
    parser = argparse.ArgumentParser(
        prog="python -m pressure",
        description="pressure: distributed, bounded, blocking FIFO queues on Redis.",
    )
    subparsers = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    for name, (help_text, load) in SUBCOMMANDS.items():
        module = load()
        sub = subparsers.add_parser(name, help=help_text, description=module.__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run the chosen subcommand."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())

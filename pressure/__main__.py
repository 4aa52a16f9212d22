"""``python -m pressure`` and the ``pressure`` console script: the command line.

Every command is a click command of the group in ``pressure.cli``: those that inspect and
operate queues and executors (``ls``, ``stat``, ``watch``...), and ``worker`` (worker
processes for a ``pressure.Executor``, ``pressure.cli._worker``) and ``bench`` (the
benchmark, ``pressure.bench``), loaded only when named: ``python -m pressure worker``
never imports the benchmark.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    from .cli import cli

    try:
        cli.main(args=sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``pressure worker NAME``: worker processes for a ``pressure.Executor``, on this host.

Loaded only when the command is named (see ``LAZY`` in ``pressure.cli``). It runs
``pressure.executor.worker.run_workers`` and turns what stops it into one line on stderr
and an exit status: 0 stopped by a signal, 1 an error (the executor does not exist, or no
retry mends it: a wrong password, an ACL that refuses...), 2 a usage error.
"""

from __future__ import annotations

import logging
from typing import Any

import click

from ..connection import ConnectionConfig, without_password
from ..errors import (AuthenticationError, PermissionDenied, PressureError, ProtocolError, QueueDoesNotExist,
                      UnsignedPickle)
from ..executor._handles import PREFETCH
from ..executor.worker import run_workers
from ..keys import resolve_prefix
from ..outage import LOG_FORMAT
from ._params import Positive

__all__ = ["worker_command"]

#: What to do, by the error no retry mends that stopped the workers.
_WHAT_TO_DO: tuple[tuple[type[PressureError], str], ...] = (
    (AuthenticationError, "give the right password (and user) in --url or REDIS_URL"),
    (PermissionDenied, "let this Redis user run pressure's commands on the prefix's keys (the ACL rule "
                       "in pressure's security docs)"),
    (ProtocolError, "a key of this executor holds something pressure did not write: check the name and "
                    "--prefix"),
)

def _say(message: str, status: int) -> None:
    """One line on stderr (never a password), and exit with ``status``."""
    line = " ".join(without_password(message).split())
    click.echo(f"pressure worker: {line}", err=True)
    raise SystemExit(status)


def _read_authkey(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as f:
            keys = [line.strip() for line in f.read().splitlines() if line.strip()]
    except OSError as exc:
        raise click.BadParameter(f"cannot read it: {exc.strerror or exc}", param_hint="--authkey-file") from None
    if not keys:
        raise click.BadParameter(f"{path} holds no key", param_hint="--authkey-file")
    return keys


@click.command("worker", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("name")
@click.option("--url", default=None, metavar="URL",
              help="The Redis server (default: pressure's --url, else REDIS_URL, else REDIS_SERVER, "
                   "REDIS_PORT and REDIS_DB, else redis://127.0.0.1:6379/0).")
@click.option("--prefix", default=None,
              help="The key prefix (default: pressure's --prefix, else PRESSURE_PREFIX, else __pressure__).")
@click.option("--processes", type=click.IntRange(min=1), default=None, metavar="N",
              help="How many worker processes (default: one per CPU).")
@click.option("--visibility-timeout", type=Positive("SECONDS", "number of seconds"), default=30.0, show_default=True,
              help="Seconds after which the task of a worker gone silent (its host down or cut off) "
                   "runs again on another.")
@click.option("--prefetch", type=click.IntRange(min=1), default=PREFETCH, show_default=True, metavar="N",
              help="How many queued short tasks a worker takes at once, saving round trips. 1: one at "
                   "a time; then cancel() cancels any task not started yet.")
@click.option("--max-tasks-per-child", type=click.IntRange(min=1), default=None, metavar="N",
              help="Tasks a worker process runs before a new process replaces it (default: no limit; "
                   "with a limit, processes start with 'spawn').")
@click.option("--authkey-file", default=None, metavar="PATH",
              help="A file holding the key the executor signs its tasks with, one key per line, the "
                   "first signing (default: PRESSURE_AUTHKEY).")
@click.option("--insecure-pickle", is_flag=True,
              help="Run unsigned tasks from a Redis server not on this host: whoever can write its keys "
                   "runs code here (default: refused; PRESSURE_INSECURE_PICKLE=1 allows it too).")
@click.option("--create", is_flag=True,
              help="If the executor does not exist yet, create its (empty) task queue and wait for "
                   "tasks: the pressure.Executor started later uses it (default: exit with an error).")
@click.pass_context
def worker_command(ctx: click.Context, name: str, url: str | None, prefix: str | None, processes: int | None,
                   visibility_timeout: float, prefetch: int, max_tasks_per_child: int | None,
                   authkey_file: str | None, insecure_pickle: bool, create: bool) -> None:
    """Run worker processes for the pressure.Executor named NAME, on this host.

    They take the executor's tasks from Redis and run them, one at a time each, until
    Ctrl-C or SIGTERM: then each finishes its task, and the command exits 0. A process
    that dies is replaced, and its task runs again. While Redis cannot be reached, the
    workers wait for it (saying so, less and less often).

    The command exits 1, with one line saying why, if the executor does not exist (the
    first pressure.Executor(NAME, ...) on this server and prefix makes it; with --create
    the workers make it, and wait for its tasks), or on an error no waiting mends: a
    wrong password, a command or key the server's ACL refuses, a TLS certificate not
    trusted. It exits 2 on a bad option, and when the tasks would be unsigned pickles
    from another host (see --authkey-file and --insecure-pickle).
    """
    # pressure's own --url and --prefix (before the command), unless given after it
    group = ctx.parent.params if ctx.parent is not None else {}
    url = url if url is not None else group.get("url")
    prefix = prefix if prefix is not None else group.get("prefix")
    authkey = _read_authkey(authkey_file) if authkey_file is not None else None
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    try:
        run_workers(name, url=url, prefix=prefix, processes=processes, visibility_timeout=visibility_timeout,
                    prefetch=prefetch, authkey=authkey, max_tasks_per_child=max_tasks_per_child,
                    insecure_pickle=insecure_pickle, create=create)
    except UnsignedPickle as exc:  # refused before anything was sent or started
        _say(str(exc), 2)
    except QueueDoesNotExist:
        where = ConnectionConfig.resolve(url).url
        _say(f"executor {name!r} does not exist on {where} under prefix {resolve_prefix(prefix)!r}: start it "
             f"(pressure.Executor({name!r}, ...)) or pass --create", 1)
    except (PressureError, ValueError) as exc:  # no retry mends it: the workers stopped
        todo = next((text for cls, text in _WHAT_TO_DO if isinstance(exc, cls)), "")
        _say(f"{str(exc).rstrip('.')}; {todo}" if todo else str(exc), 1)

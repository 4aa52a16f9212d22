"""The ``pressure`` command (also ``python -m pressure``): inspect and operate queues and
executors from a shell.

Built on click (a core dependency, so the command works wherever pressure is installed,
worker hosts included). Tables are plain aligned text and the live view (``watch``)
redraws in place with two ANSI sequences: nothing here needs more. ``worker`` and
``bench`` are loaded only when named (``LAZY``: ``pressure worker`` never imports the
benchmark). Errors print one line (never a password) and exit non-zero: 1 for an error,
2 for a usage error, 3 when ``get``/``put`` timed out (queue empty / full), 4 when the
queue is shut down.
"""

from __future__ import annotations

import importlib
import json
import logging
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, TypeVar

import click
import redis

from .. import __version__
from .._internal import attach, internal
from ..cluster import key_slot
from ..connection import Backend, ConnectionConfig, without_password
from ..errors import Empty, Full, PressureError, QueueDoesNotExist, ShutDown
from ..executor.admin import delete_executor
from ..keys import KINDS, QueueKeys, resolve_prefix
from ..ordered import queue_class
from ..queue import Queue
from ..serializers import Serializer
from ._inventory import QueueRef, QueueRow, executor_rows, find_executors, find_queue, find_queues, queue_rows
from ._items import (UNPICKLE_WARNING, UNPICKLE_WARNING_SIGNED, Reader, Writer, authkeys, make_item, refusal,
                     written_name)
from ._views import executors_table, ls_table, queue_json, rate, table, watch_table

__all__ = ["cli", "Env", "Failure", "LAZY"]

F = TypeVar("F", bound=Callable[..., Any])

#: exit statuses beyond click's (1 error, 2 usage)
EXIT_TIMEOUT, EXIT_SHUT_DOWN = 3, 4


class Failure(click.ClickException):
    """An error: one line on stderr (passwords masked), and a non-zero exit status."""

    def __init__(self, message: str) -> None:
        super().__init__(without_password(message))


class _TimedOut(Failure):
    exit_code = EXIT_TIMEOUT


class _Closed(Failure):
    exit_code = EXIT_SHUT_DOWN


#: The commands loaded only when named, each from its module: name -> (module, the command's
#: name there, its one line in ``pressure --help``).
LAZY: dict[str, tuple[str, str, str]] = {
    "bench": ("pressure.bench._cli", "bench_command",
              "Measure throughput and latency against raw redis-py and other queues."),
    "worker": ("pressure.cli._worker", "worker_command", "Run worker processes for a pressure.Executor."),
}


class _Group(click.Group):
    """Turns pressure's errors (and a bad URL or name) into a Failure; loads the ``LAZY``
    commands when they are named."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY and cmd_name not in self.commands:
            module, attribute, _ = LAZY[cmd_name]
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their lines, the lazy ones' without loading them."""
        shown = [(name, click.Command(name, short_help=LAZY[name][2]) if name in LAZY else self.commands[name])
                 for name in self.list_commands(ctx)]
        shown = [(name, command) for name, command in shown if not command.hidden]
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        with formatter.section("Commands"):
            formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in shown])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (Empty, Full) as exc:
            raise _TimedOut(str(exc) or type(exc).__name__) from None
        except QueueDoesNotExist as exc:
            raise Failure(str(exc)) from None
        except ShutDown as exc:
            raise _Closed(str(exc)) from None
        except (PressureError, ValueError, LookupError, redis.RedisError) as exc:
            raise Failure(str(exc) or type(exc).__name__) from None


class Env:
    """The server and prefix the command works on (``--url``, ``--prefix``)."""

    def __init__(self, url: str | None, prefix: str | None) -> None:
        self.url_option = url
        self.prefix_option = prefix
        self.prefix = resolve_prefix(prefix)
        self._config: ConnectionConfig | None = None
        self._backend: Backend | None = None

    @property
    def config(self) -> ConnectionConfig:
        if self._config is None:
            self._config = ConnectionConfig.resolve(self.url_option)
        return self._config

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = Backend(self.config)
        return self._backend

    @property
    def where(self) -> str:
        return f"prefix {self.prefix!r} on {self.config.url}"

    def find(self, name: str, kind: str | None) -> QueueRef:
        ref = find_queue(self.backend, self.prefix, name, kind)
        if ref is None:
            what = f"{kind} queue" if kind else "queue"
            raise Failure(f"{what} {name!r} does not exist (under {self.where})")
        return ref

    def queue(self, ref: QueueRef, *, serializer: str | Serializer = "bytes", reliable: bool = False) -> Queue[Any]:
        """A handle on the existing queue ``ref`` (never creates it)."""
        return attach(queue_class(ref.kind), ref.name, self.config, prefix=self.prefix,
                      serializer=serializer, create=False, backend=self._slot(ref), reliable=reliable)

    def _slot(self, ref: QueueRef) -> Backend:
        # on a Redis Cluster: the backend's sibling that serves the queue's slot
        return self.backend.for_slot(key_slot(ref.keys(self.prefix).base))

    def recorded(self, ref: QueueRef) -> str | None:
        """The serializer queue ``ref`` records it was created with (None: unknown)."""
        key = ref.keys(self.prefix).serializer
        backend = self._slot(ref)
        value = backend.call("GET", backend.client().get, key)
        return None if value is None else value.decode(errors="replace")

    def reader(self, ref: QueueRef, serializer: str, unpickle: bool, authkey_file: str | None) -> Reader:
        """How the items of ``ref`` are shown (``--serializer``, ``--unpickle``, an authkey); with
        --unpickle, a one-line warning on stderr first."""
        if unpickle and serializer == "bytes":
            raise click.UsageError("--unpickle shows what items hold, --serializer bytes their stored "
                                   "bytes: choose one")
        keys = authkeys(authkey_file, needed=unpickle)
        if unpickle:
            click.echo(UNPICKLE_WARNING_SIGNED if keys else UNPICKLE_WARNING, err=True)
        return Reader(context=ref.keys(self.prefix).base, serializer=serializer, unpickle=unpickle, keys=keys,
                      recorded=self.recorded(ref))

    def close(self) -> None:
        if self._backend is not None:
            self._backend.disconnect()


pass_env = click.make_pass_decorator(Env)


def _kind_option(f: F) -> F:
    return click.option("--kind", type=click.Choice(KINDS), default=None,
                        help="The kind of queue, if queues of several kinds have this name.")(f)


def _serializer_option(help_text: str, choices: tuple[str, ...] = ("json", "bytes")) -> Callable[[F], F]:
    def decorate(f: F) -> F:
        return click.option("--serializer", type=click.Choice(choices), default="json", show_default=True,
                            help=help_text)(f)

    return decorate


def _authkey_option(what: str) -> Callable[[F], F]:
    return click.option("--authkey-file", default=None, metavar="PATH",
                        help=f"A file of authkeys, one a line (the first signs): {what} with them "
                             f"(default: PRESSURE_AUTHKEY's).")


def _reading_options(bytes_help: str) -> Callable[[F], F]:
    """--serializer, --unpickle and --authkey-file, for the commands that show items."""
    def decorate(f: F) -> F:
        f = _authkey_option("signed items are verified")(f)
        f = click.option("--unpickle", is_flag=True,
                         help="Show pickled items (the repr of what they hold). Unpickling runs the code an "
                              "item names: with an authkey, only items whose signature verifies are "
                              "unpickled.")(f)
        return _serializer_option(f"How items are shown: json (a pickled item is shown only with "
                                  f"--unpickle), or bytes: {bytes_help}.")(f)

    return decorate


def _json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")(f)


# -- the group --------------------------------------------------------------------------

@click.group(cls=_Group, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", default=None, metavar="URL",
              help="The Redis server (default: REDIS_URL, else REDIS_SERVER, REDIS_PORT and REDIS_DB, "
                   "else redis://127.0.0.1:6379/0).")
@click.option("--prefix", default=None,
              help="The key prefix (default: PRESSURE_PREFIX, else __pressure__).")
@click.version_option(__version__, "--version", prog_name="pressure", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, url: str | None, prefix: str | None) -> None:
    """pressure: distributed, bounded, blocking queues on Redis.

    Inspect and operate the queues and executors under a key prefix, and run the
    benchmark or executor workers.
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)
    ctx.obj = ctx.with_resource(_closing(Env(url, prefix)))


@contextmanager
def _closing(env: Env) -> Iterator[Env]:
    try:
        yield env
    finally:
        env.close()


# -- queues -------------------------------------------------------------------------------

@cli.command("ls")
@_json_option
@pass_env
def ls_command(env: Env, as_json: bool) -> None:
    """List the queues under the prefix.

    With each queue: its kind (fifo, lifo, priority), length (the items a get would find
    now), its delayed items (not due yet), bound, whether it is closed, its consumers, the
    items in flight (delivered, not acknowledged) and its dead letters. A queue whose keys
    cannot be read (a key of the wrong type) shows ? for its figures and, after them, ! and
    the server's error; with --json, its "error".
    """
    rows = queue_rows(env.backend, env.prefix, find_queues(env.backend, env.prefix))
    if as_json:
        click.echo(json.dumps([queue_json(r) for r in rows], indent=2))
        return
    if not rows:
        click.echo(f"no queues under {env.where}")
        return
    click.echo(ls_table(rows))


@cli.command("stat")
@click.argument("name")
@_kind_option
@click.option("--interval", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Seconds between the two readings the rates come from (0: no rates).")
@_json_option
@pass_env
def stat_command(env: Env, name: str, kind: str | None, interval: float, as_json: bool) -> None:
    """Show a queue's statistics, and its put and get rates."""
    ref = env.find(name, kind)
    queue = env.queue(ref)
    first, start = queue.statistics(), time.monotonic()
    if interval > 0:
        time.sleep(interval)
    stats, seconds = queue.statistics(), time.monotonic() - start
    figures: dict[str, Any] = {**asdict(stats), "tasks": stats.tasks, "kind": ref.kind,
                               "in_flight": stats.taken, "serializer": env.recorded(ref)}
    if interval > 0:
        figures["put_per_s"] = rate(stats.produced_messages, first.produced_messages, seconds)
        figures["get_per_s"] = rate(stats.consumed_messages, first.consumed_messages, seconds)
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    fill = f" ({100 * stats.size / stats.maxsize:.0f}% full)" if stats.maxsize else ""
    lines = [
        ("queue", f"{ref.name} ({ref.kind}) under {env.where}"),
        ("size", f"{stats.size} of {stats.maxsize or 'unbounded'}{fill}"),
        ("delayed", f"{stats.delayed} (not due yet)"),
        ("closed", "yes" if stats.closed else "no"),
        ("serializer", figures["serializer"] or "- (not recorded)"),
        ("produced", f"{stats.produced_messages} items, {stats.produced_bytes} bytes"),
        ("consumed", f"{stats.consumed_messages} items, {stats.consumed_bytes} bytes"),
    ]
    if interval > 0:
        lines.append(("rates", f"{figures['put_per_s']:.1f} put/s, {figures['get_per_s']:.1f} get/s "
                               f"(over {seconds:.1f} s)"))
    lines += [
        ("unfinished", f"{stats.unfinished_tasks} tasks (put, processing not ended)"),
        ("discarded", str(stats.discarded_messages)),
        ("consumers", str(figures["consumers"])),
        ("in flight", str(figures["in_flight"])),
        ("dead letters", str(stats.dead_letters)),
        ("producer", stats.producer or "-"),
        ("consumer", stats.consumer or "-"),
        ("tasks", ", ".join(f"{k} {v}" for k, v in stats.tasks.items())),
        ("calls", ", ".join(f"{k} {v}" for k, v in stats.calls.items())),
    ]
    width = max(len(k) for k, _ in lines)
    click.echo("\n".join(f"{k.ljust(width)}  {v}" for k, v in lines))


@cli.command("watch")
@click.argument("names", nargs=-1)
@click.option("--interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="Seconds between refreshes.")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="Stop after this many refreshes (default: until Ctrl-C).")
@pass_env
def watch_command(env: Env, names: tuple[str, ...], interval: float, count: int | None) -> None:
    """Watch queues live (all under the prefix, or those named).

    The view is redrawn in place every interval (on a terminal; elsewhere each view is
    printed after the last), with each queue's put and get rates ("-" until two readings
    give one) and a bar of its fill against its bound. A queue named that does not exist is
    an error, as for stat; one deleted meanwhile shows "! deleted", and one whose keys cannot
    be read "! " and the error. Ctrl-C ends it.
    """
    clear = sys.stdout.isatty()
    if names:
        found = {ref.name for ref in find_queues(env.backend, env.prefix, names)}
        missing = [name for name in dict.fromkeys(names) if name not in found]
        if missing:
            for name in missing:
                QueueKeys.build(env.prefix, name)  # ValueError for a name no queue can have
            raise Failure(f"{'queue' if len(missing) == 1 else 'queues'} {', '.join(map(repr, missing))} "
                          f"{'does' if len(missing) == 1 else 'do'} not exist (under {env.where})")
    before: dict[tuple[str, str], QueueRow] = {}
    shown = 0
    try:
        while True:
            rows = queue_rows(env.backend, env.prefix, find_queues(env.backend, env.prefix, names or None))
            now = {(row.name, row.kind) for row in rows}
            # a queue named is shown until the end: deleted, if it is gone
            deleted = [key for key in before if key not in now] if names else []
            lines = watch_table(rows, before, deleted) if rows or deleted else "no queues"
            before = {**({key: before[key] for key in deleted}), **{(row.name, row.kind): row for row in rows}}
            title = f"pressure  {env.where}  {time.strftime('%H:%M:%S')}"
            frame = f"{title}\n\n{lines}\n"
            click.echo(("\x1b[H\x1b[2J" if clear else "") + frame, nl=not clear)
            sys.stdout.flush()
            shown += 1
            if count is not None and shown >= count:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        click.echo("")


@cli.command("peek")
@click.argument("name")
@click.option("-n", "count", type=click.IntRange(min=0), default=1, show_default=True,
              help="How many items, next-out first.")
@_kind_option
@_reading_options("the stored bytes as text (UTF-8 as it is, other bytes escaped: \\x80), one item a line")
@pass_env
def peek_command(env: Env, name: str, count: int, kind: str | None, serializer: str, unpickle: bool,
                 authkey_file: str | None) -> None:
    """Show the next items of a queue, without taking them."""
    ref = env.find(name, kind)
    reader = env.reader(ref, serializer, unpickle, authkey_file)
    for payload in env.queue(ref).peek(count):
        click.echo(reader.show(payload).text)


@cli.command("dead")
@click.argument("name")
@click.option("--kick", metavar="N|all", default=None,
              help="Move N dead letters (or all), oldest first, back to the head of the queue.")
@click.option("--purge", is_flag=True, help="Delete the dead letters (asks first, unless --yes).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@_kind_option
@_reading_options("the stored bytes as text (UTF-8 as it is, other bytes escaped: \\x80)")
@_json_option
@pass_env
def dead_command(env: Env, name: str, kick: str | None, purge: bool, yes: bool, kind: str | None,
                 serializer: str, unpickle: bool, authkey_file: str | None, as_json: bool) -> None:
    """List a queue's dead letters, or move them back (--kick), or delete them (--purge).

    Dead letters are items delivered too many times (reliable mode) or that could not be
    deserialized ("deliveries"), buried ("buried") or past their ttl ("expired"): the
    REASON. The TASK ID is the item's (Queue.peek_item, Queue.delete_item).
    """
    if kick is not None and purge:
        raise click.UsageError("--kick and --purge exclude each other")
    ref = env.find(name, kind)
    queue = env.queue(ref)
    if kick is not None:
        if kick != "all" and not (kick.isdigit() and int(kick) > 0):
            raise click.BadParameter(f"{kick!r} is not a positive integer or 'all'", param_hint="--kick")
        moved = queue.kick(None if kick == "all" else int(kick))
        click.echo(f"{moved} dead letter(s) of queue {name!r} moved back to the queue")
        return
    if purge:
        if not yes:
            click.confirm(f"Delete the {len(queue.dead_letters())} dead letter(s) of queue {name!r} "
                          f"(under {env.where})?", abort=True)
        click.echo(f"{queue.purge_dead()} dead letter(s) of queue {name!r} deleted")
        return
    reader = env.reader(ref, serializer, unpickle, authkey_file)
    letters = queue.dead_letters()
    if as_json:
        click.echo(json.dumps([{"id": d.id, "reason": d.reason, "task_id": d.task_id, "deliveries": d.deliveries,
                                "age": d.age, "payload": reader.show(d.payload).text} for d in letters], indent=2))
        return
    if not letters:
        click.echo(f"queue {name!r} has no dead letters")
        return
    click.echo(table(["ID", "REASON", "TASK ID", "DELIVERIES", "AGE", "ITEM"],
                     [[d.id, d.reason, d.task_id, str(d.deliveries), f"{d.age:.0f}s", reader.show(d.payload).text]
                      for d in letters], left=3, note=True))


@cli.command("close")
@click.argument("name")
@_kind_option
@pass_env
def close_command(env: Env, name: str, kind: str | None) -> None:
    """Close a queue for every client (puts fail; gets drain what is left)."""
    env.queue(env.find(name, kind)).close()
    click.echo(f"queue {name!r} closed")


@cli.command("delete")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@_kind_option
@pass_env
def delete_command(env: Env, name: str, yes: bool, kind: str | None) -> None:
    """Delete a queue and all its keys (its items are lost; asks first, unless --yes)."""
    ref = env.find(name, kind)
    queue = env.queue(ref)
    if not yes:
        click.confirm(f"Delete {ref.kind} queue {name!r} and its {queue.qsize()} item(s) "
                      f"(under {env.where})?", abort=True)
    queue.delete()
    click.echo(f"queue {name!r} deleted")


class _Said(logging.Filter):
    """Keeps the library's records of ``events`` (logged on pressure.queue) from stderr, for
    the command to say what they say in its own message."""

    def __init__(self, *events: str) -> None:
        super().__init__()
        self.events = events
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "event", None) in self.events:
            self.records.append(record)
            return False
        return True


@cli.command("repair")
@click.argument("name")
@_kind_option
@pass_env
def repair_command(env: Env, name: str, kind: str | None) -> None:
    """Reset a queue's role tokens to the protocol's invariants, and give back what
    consumers found dead on this host held. Run it when no client should hold a role.
    Prints one line: what it did."""
    queue = env.queue(env.find(name, kind))
    said = _Said("repaired", "consumer_recovered")
    logger = logging.getLogger("pressure.queue")
    logger.addFilter(said)
    try:
        report = queue.repair()
    finally:
        logger.removeFilter(said)
    if not report.reset and not report.recovered:
        click.echo(f"queue {name!r} needed no repair")
        return
    counts = {getattr(r, "consumer", None): r for r in said.records
              if getattr(r, "event", None) == "consumer_recovered"}
    done = [f"reset {key} (it held {before})" for key, before in sorted(report.reset.items())]
    for consumer in report.recovered:
        record = counts.get(consumer)
        if record is None:
            done.append(f"took back what dead consumer {consumer} held")
            continue
        taken, dead = getattr(record, "count", 0), getattr(record, "dead", 0)
        done.append(f"took back the {taken} item(s) dead consumer {consumer} held"
                    + (f" ({dead} dead-lettered: delivered too often)" if dead else ""))
    click.echo(f"queue {name!r} repaired: {'; '.join(done)}")


@cli.command("put")
@click.argument("name")
@click.argument("item")
@click.option("--timeout", type=float, default=None,
              help="Seconds to wait for room in a full queue (default: as long as it takes; 0: not at all).")
@click.option("--create", is_flag=True, help="Create the queue if it does not exist.")
@click.option("--maxsize", type=click.IntRange(min=0), default=None,
              help="With --create: the bound of a queue created (default 0, unbounded).")
@_kind_option
@_serializer_option("How ITEM is stored: json, bytes (as given), or pickle (its JSON value, pickled, "
                    "for Python consumers of the default serializer).", ("json", "bytes", "pickle"))
@_authkey_option("the item is signed")
@pass_env
def put_command(env: Env, name: str, item: str, timeout: float | None, create: bool, maxsize: int | None,
                kind: str | None, serializer: str, authkey_file: str | None) -> None:
    """Put ITEM into a queue (ITEM '-': read it from stdin).

    With --serializer json (the default) ITEM is a JSON document, stored as JSON; with
    bytes it is stored as given; with pickle its JSON value is stored pickled. With an
    authkey (PRESSURE_AUTHKEY, --authkey-file) the item is signed. A queue records the
    serializer it was created with: put refuses (and puts nothing) where that is not what
    it would write.
    """
    text: str | bytes = sys.stdin.buffer.read() if item == "-" else item
    data = text.encode() if isinstance(text, str) else text
    try:
        value = make_item(data, serializer)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="ITEM") from None
    keys = authkeys(authkey_file, needed=serializer == "pickle")
    writes = written_name(serializer, keys)
    ref = find_queue(env.backend, env.prefix, name, kind)
    if ref is None and not create:
        raise Failure(f"queue {name!r} does not exist (under {env.where}): pass --create to create it")
    if ref is not None:
        refused = refusal(name, env.recorded(ref), writes)
        if refused:
            raise Failure(refused)
    else:
        ref = QueueRef(name, kind or "fifo")
    # (a queue it creates records what it writes)
    queue = env.queue(ref, serializer=Writer(serializer, keys, ref.keys(env.prefix).base))
    if create:
        internal(queue).create(maxsize)
    try:
        if timeout is not None and timeout <= 0:
            queue.put(value, block=False)
        else:
            queue.put(value, timeout=timeout)
    except Full:
        raise _TimedOut(f"queue {name!r} stayed full") from None


@cli.command("get")
@click.argument("name")
@click.option("--timeout", type=float, default=None,
              help="Seconds to wait for an item (default: as long as it takes; 0: not at all).")
@_kind_option
@_reading_options("its bytes exactly, as stored")
@pass_env
def get_command(env: Env, name: str, timeout: float | None, kind: str | None, serializer: str, unpickle: bool,
                authkey_file: str | None) -> None:
    """Take one item from a queue and print it.

    As JSON on one line (--serializer json, the default), or its bytes exactly (bytes).
    The item is acknowledged only once printed: an item that cannot be shown (not JSON, a
    pickle without --unpickle, a signature that does not verify) goes back to the queue,
    and the command fails. Exits 3 if the queue stayed empty, 4 if it is closed and drained.
    """
    ref = env.find(name, kind)
    reader = env.reader(ref, serializer, unpickle, authkey_file)
    queue = env.queue(ref, reliable=True)
    link = internal(queue)
    try:
        try:
            if timeout is not None and timeout <= 0:
                delivery = queue.receive(block=False)
            else:
                delivery = queue.receive(timeout=timeout)
        except Empty:
            raise _TimedOut(f"queue {name!r} stayed empty") from None
        payload: bytes = delivery.item
        if serializer == "bytes":
            sys.stdout.buffer.write(payload)
            sys.stdout.buffer.flush()
        else:
            shown = reader.show(payload)
            if shown.problem is not None:
                raise Failure(f"the item of queue {name!r} was put back: {shown.problem}; "
                              f"--serializer bytes prints its bytes")
            click.echo(shown.text)
        delivery.ack()
    finally:
        # leave as a consumer: give back what is not acknowledged (an item not shown, on any
        # failure or Ctrl-C) and drop this process's consumer record
        try:
            link.settle_all(link.consumer_id(), ack=False)
        except PressureError:
            pass


# -- executors ------------------------------------------------------------------------------

@cli.command("executors")
@_json_option
@pass_env
def executors_command(env: Env, as_json: bool) -> None:
    """List the executors under the prefix.

    With each: its workers alive (heard from in the last few seconds, on any host) and
    its tasks queued, running, done, failed, retried and lost. One whose keys cannot be
    read shows ? for its figures and, after them, ! and the error.
    """
    rows = executor_rows(env.backend, env.prefix, find_executors(env.backend, env.prefix))
    if as_json:
        click.echo(json.dumps([asdict(r) for r in rows], indent=2))
        return
    if not rows:
        click.echo(f"no executors under {env.where}")
        return
    click.echo(executors_table(rows))


@cli.command("executor-delete")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Delete even while workers of the executor are alive.")
@pass_env
def executor_delete_command(env: Env, name: str, yes: bool, force: bool) -> None:
    """Delete an executor's keys: its task queue, result queues and bookkeeping (asks
    first, unless --yes). Refused while its workers are alive, unless --force."""
    if name not in find_executors(env.backend, env.prefix):
        raise Failure(f"executor {name!r} does not exist (under {env.where})")
    row = executor_rows(env.backend, env.prefix, [name])[0]
    if row.error is not None and not force:
        raise Failure(f"executor {name!r} cannot be read ({row.error}): whether its workers are alive is "
                      f"unknown; pass --force to delete it anyway")
    if row.workers and not force:
        raise Failure(f"executor {name!r} has {len(row.workers)} worker(s) alive: stop them first, "
                      f"or pass --force")
    if not yes:
        click.confirm(f"Delete executor {name!r} ({row.queued} queued task(s), {len(row.workers)} "
                      f"worker(s) alive) under {env.where}?", abort=True)
    # on a Redis Cluster, delete_executor finds the executor's slot from the cluster's URL
    where = {"url": env.url_option} if env.config.cluster is not None else {"connection": env.backend.client()}
    deleted = delete_executor(name, prefix=env.prefix, force=force, **where)
    click.echo(f"executor {name!r} deleted ({deleted} queue(s) and key(s))")


# -- metrics ------------------------------------------------------------------------------

@cli.command("serve-metrics")
@click.option("--port", type=click.IntRange(0, 65535), default=9464, show_default=True,
              help="The port to serve on (0: any free one, printed).")
@click.option("--addr", default="127.0.0.1", show_default=True,
              help="The address to listen on (0.0.0.0: every interface).")
@click.option("--once", is_flag=True, help="Print the metrics once, in Prometheus' text format, and exit.")
@pass_env
def serve_metrics_command(env: Env, port: int, addr: str, once: bool) -> None:
    """Serve Prometheus metrics of the queues and executors under the prefix.

    Read from Redis at each scrape, on http://ADDR:PORT/metrics, until Ctrl-C or SIGTERM.
    Needs the metrics extra: pip install 'pressure-queue[metrics]'.
    """
    try:
        from prometheus_client import CollectorRegistry, generate_latest, start_http_server

        from .metrics import Collector
    except ModuleNotFoundError as exc:
        raise Failure(f"serve-metrics needs {exc.name}: pip install 'pressure-queue[metrics]'") from None
    registry = CollectorRegistry(auto_describe=False)
    where = {"url": env.url_option} if env.config.cluster is not None else {"connection": env.backend.client()}
    registry.register(Collector(prefix=env.prefix, **where))
    if once:
        click.echo(generate_latest(registry).decode(), nl=False)
        return
    try:
        server, thread = start_http_server(port, addr, registry=registry)
    except OSError as exc:  # the port is taken, the address is not this host's...
        raise Failure(f"serve-metrics cannot listen on {addr}:{port}: {exc.strerror or exc}") from None
    bound_port = server.server_address[1]
    click.echo(f"serving metrics of {env.where} on http://{addr}:{bound_port}/metrics")
    sys.stdout.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        thread.join(timeout=5)


# -- keys ---------------------------------------------------------------------------------

@cli.command("keygen")
def keygen_command() -> None:
    """Print a new random authkey (32 bytes, as 64 hex digits).

    Set it on every host that shares the queues, as PRESSURE_AUTHKEY, and pickled
    items, tasks and results are signed and checked before anything unpickles them:
    export PRESSURE_AUTHKEY=$(pressure keygen). Nothing is sent to any server.
    """
    click.echo(secrets.token_hex(32))

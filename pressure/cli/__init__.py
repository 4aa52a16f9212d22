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

from .. import __version__, serializers
from .._internal import attach, internal
from ..cluster import key_slot
from ..connection import Backend, ConnectionConfig, without_password
from ..errors import Empty, Full, PressureError, QueueDoesNotExist, ShutDown
from ..executor.admin import delete_executor
from ..keys import KINDS, resolve_prefix
from ..ordered import queue_class
from ..queue import Queue
from ._inventory import (ExecutorRow, QueueRef, QueueRow, executor_rows, find_executors, find_queue,
                         find_queues, queue_rows)

__all__ = ["cli", "Env", "Failure", "LAZY"]

F = TypeVar("F", bound=Callable[..., Any])

#: exit statuses beyond click's (1 error, 2 usage)
EXIT_TIMEOUT, EXIT_SHUT_DOWN = 3, 4
_BAR = 20


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

    def queue(self, ref: QueueRef, *, serializer: str = "bytes", reliable: bool = False) -> Queue[Any]:
        """A handle on the existing queue ``ref`` (never creates it)."""
        # on a Redis Cluster: the backend's sibling that serves the queue's slot
        backend = self.backend.for_slot(key_slot(ref.keys(self.prefix).base))
        return attach(queue_class(ref.kind), ref.name, self.config, prefix=self.prefix,
                      serializer=serializer, create=False, backend=backend, reliable=reliable)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.disconnect()


pass_env = click.make_pass_decorator(Env)


def _kind_option(f: F) -> F:
    return click.option("--kind", type=click.Choice(KINDS), default=None,
                        help="The kind of queue, if queues of several kinds have this name.")(f)


def _serializer_option(f: F) -> F:
    return click.option("--serializer", type=click.Choice(["json", "bytes"]), default="json",
                        show_default=True,
                        help="How items are shown or read: json, or the stored bytes as they are.")(f)


def _json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")(f)


# -- formatting ---------------------------------------------------------------------------

def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Aligned columns: the first ``left`` left-aligned, the others right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def _bar(size: int, bound: int) -> str:
    if bound <= 0:
        return "unbounded".center(_BAR + 2)
    filled = min(_BAR, round(_BAR * size / bound))
    return "[" + "#" * filled + "-" * (_BAR - filled) + "]"


def _rate(count: int, before: int, seconds: float) -> float:
    return max(count - before, 0) / seconds if seconds > 0 else 0.0


def _show(payload: bytes, serializer: str) -> str:
    """One stored item as a line: its JSON, or its bytes (escaped where not UTF-8)."""
    if serializer == "json":
        try:
            return json.dumps(json.loads(payload), ensure_ascii=False)
        except ValueError:
            return f"<not JSON, {len(payload)} bytes: {payload[:60]!r}{'...' if len(payload) > 60 else ''}>"
    return payload.decode("utf-8", "backslashreplace")


def _queue_line(row: QueueRow) -> list[str]:
    return [row.name, row.kind, str(row.size), str(row.bound) if row.bound else "-",
            "yes" if row.closed else "no", str(row.consumers), str(row.in_flight), str(row.dead_letters)]


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

    With each queue: its kind (fifo, lifo, priority), length, bound, whether it is
    closed, its consumers, the items in flight (delivered, not acknowledged) and its dead
    letters.
    """
    rows = queue_rows(env.backend, env.prefix, find_queues(env.backend, env.prefix))
    if as_json:
        click.echo(json.dumps([{k: v for k, v in asdict(r).items() if k != "at"} for r in rows], indent=2))
        return
    if not rows:
        click.echo(f"no queues under {env.where}")
        return
    click.echo(_table(["NAME", "KIND", "SIZE", "BOUND", "CLOSED", "CONSUMERS", "IN FLIGHT", "DEAD"],
                      [_queue_line(r) for r in rows], left=2))


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
                               "in_flight": stats.taken}
    if interval > 0:
        figures["put_per_s"] = _rate(stats.produced_messages, first.produced_messages, seconds)
        figures["get_per_s"] = _rate(stats.consumed_messages, first.consumed_messages, seconds)
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    fill = f" ({100 * stats.size / stats.maxsize:.0f}% full)" if stats.maxsize else ""
    lines = [
        ("queue", f"{ref.name} ({ref.kind}) under {env.where}"),
        ("size", f"{stats.size} of {stats.maxsize or 'unbounded'}{fill}"),
        ("closed", "yes" if stats.closed else "no"),
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
    printed after the last), with each queue's put and get rates and a bar of its
    fill against its bound. Ctrl-C ends it.
    """
    clear = sys.stdout.isatty()
    before: dict[tuple[str, str], QueueRow] = {}
    shown = 0
    try:
        while True:
            refs = find_queues(env.backend, env.prefix, names or None)
            rows = queue_rows(env.backend, env.prefix, refs)
            lines = []
            for row in rows:
                prev = before.get((row.name, row.kind))
                seconds = row.at - prev.at if prev else 0.0
                put = _rate(row.produced, prev.produced, seconds) if prev else 0.0
                get = _rate(row.consumed, prev.consumed, seconds) if prev else 0.0
                lines.append([row.name, row.kind, str(row.size), str(row.bound) if row.bound else "-",
                              _bar(row.size, row.bound), f"{put:.1f}", f"{get:.1f}", str(row.in_flight),
                              str(row.dead_letters), "closed" if row.closed else ""])
            before = {(row.name, row.kind): row for row in rows}
            title = f"pressure  {env.where}  {time.strftime('%H:%M:%S')}"
            body = (_table(["NAME", "KIND", "SIZE", "BOUND", "FILL", "PUT/S", "GET/S", "IN FLIGHT", "DEAD",
                            ""], lines, left=2) if lines else "no queues")
            frame = f"{title}\n\n{body}\n"
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
@_serializer_option
@pass_env
def peek_command(env: Env, name: str, count: int, kind: str | None, serializer: str) -> None:
    """Show the next items of a queue, without taking them."""
    for payload in env.queue(env.find(name, kind)).peek(count):
        click.echo(_show(payload, serializer))


@cli.command("dead")
@click.argument("name")
@click.option("--kick", metavar="N|all", default=None,
              help="Move N dead letters (or all), oldest first, back to the head of the queue.")
@click.option("--purge", is_flag=True, help="Delete the dead letters (asks first, unless --yes).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@_kind_option
@_serializer_option
@_json_option
@pass_env
def dead_command(env: Env, name: str, kick: str | None, purge: bool, yes: bool, kind: str | None,
                 serializer: str, as_json: bool) -> None:
    """List a queue's dead letters, or move them back (--kick), or delete them (--purge).

    Dead letters are items delivered too many times (reliable mode) or that could not be
    deserialized.
    """
    if kick is not None and purge:
        raise click.UsageError("--kick and --purge exclude each other")
    queue = env.queue(env.find(name, kind))
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
    letters = queue.dead_letters()
    if as_json:
        click.echo(json.dumps([{"id": d.id, "deliveries": d.deliveries, "age": d.age,
                                "payload": _show(d.payload, serializer)} for d in letters], indent=2))
        return
    if not letters:
        click.echo(f"queue {name!r} has no dead letters")
        return
    click.echo(_table(["ID", "DELIVERIES", "AGE", "ITEM"],
                      [[d.id, str(d.deliveries), f"{d.age:.0f}s", _show(d.payload, serializer)]
                       for d in letters]).rstrip())


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


@cli.command("repair")
@click.argument("name")
@_kind_option
@pass_env
def repair_command(env: Env, name: str, kind: str | None) -> None:
    """Reset a queue's role tokens to the protocol's invariants, and give back what
    consumers found dead on this host held. Run it when no client should hold a role."""
    report = env.queue(env.find(name, kind)).repair()
    if not report.reset and not report.recovered:
        click.echo(f"queue {name!r} needed no repair")
        return
    for key, before in sorted(report.reset.items()):
        click.echo(f"reset {key} (it held {before})")
    for consumer in report.recovered:
        click.echo(f"recovered the deliveries of dead consumer {consumer}")


@cli.command("put")
@click.argument("name")
@click.argument("item")
@click.option("--timeout", type=float, default=None,
              help="Seconds to wait for room in a full queue (default: as long as it takes; 0: not at all).")
@click.option("--create", is_flag=True, help="Create the queue if it does not exist.")
@click.option("--maxsize", type=click.IntRange(min=0), default=None,
              help="With --create: the bound of a queue created (default 0, unbounded).")
@_kind_option
@_serializer_option
@pass_env
def put_command(env: Env, name: str, item: str, timeout: float | None, create: bool, maxsize: int | None,
                kind: str | None, serializer: str) -> None:
    """Put ITEM into a queue (ITEM '-': read it from stdin).

    With --serializer json (the default) ITEM is a JSON document, stored as JSON; with
    bytes it is stored as given.
    """
    text: str | bytes = sys.stdin.buffer.read() if item == "-" else item
    data = text.encode() if isinstance(text, str) else text
    value: Any = data
    if serializer == "json":
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="ITEM") from None
    ref = find_queue(env.backend, env.prefix, name, kind)
    if ref is None and not create:
        raise Failure(f"queue {name!r} does not exist (under {env.where}): pass --create to create it")
    if ref is None:
        ref = QueueRef(name, kind or "fifo")
    queue = env.queue(ref, serializer=serializer)
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
@_serializer_option
@pass_env
def get_command(env: Env, name: str, timeout: float | None, kind: str | None, serializer: str) -> None:
    """Take one item from a queue and print it.

    As JSON on one line (--serializer json, the default), or its bytes exactly (bytes).
    The item is acknowledged only once printed: an item that is not JSON goes back to
    the queue, and the command fails. Exits 3 if the queue stayed empty, 4 if it is
    closed and drained.
    """
    queue = env.queue(env.find(name, kind), reliable=True)
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
        if serializer == "json":
            try:
                value = serializers.loads(serializers.resolve("json"), payload)
            except PressureError:
                raise Failure(f"the item of queue {name!r} is not JSON ({len(payload)} bytes): it was put "
                              f"back; read it with --serializer bytes") from None
            click.echo(json.dumps(value, ensure_ascii=False))
        else:
            sys.stdout.buffer.write(payload)
            sys.stdout.buffer.flush()
        delivery.ack()
    finally:
        # leave as a consumer: give back what is not acknowledged (an item not shown, on any
        # failure or Ctrl-C) and drop this process's consumer record
        try:
            link.settle_all(link.consumer_id(), ack=False)
        except PressureError:
            pass


# -- executors ------------------------------------------------------------------------------

def _executor_line(row: ExecutorRow) -> list[str]:
    return [row.name, str(len(row.workers)), str(row.queued), str(row.running), str(row.done),
            str(row.failed), str(row.retried), str(row.lost)]


@cli.command("executors")
@_json_option
@pass_env
def executors_command(env: Env, as_json: bool) -> None:
    """List the executors under the prefix.

    With each: its workers alive (heard from in the last few seconds, on any host) and
    its tasks queued, running, done, failed, retried and lost.
    """
    rows = executor_rows(env.backend, env.prefix, find_executors(env.backend, env.prefix))
    if as_json:
        click.echo(json.dumps([asdict(r) for r in rows], indent=2))
        return
    if not rows:
        click.echo(f"no executors under {env.where}")
        return
    click.echo(_table(["NAME", "WORKERS", "QUEUED", "RUNNING", "DONE", "FAILED", "RETRIED", "LOST"],
                      [_executor_line(r) for r in rows]))


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

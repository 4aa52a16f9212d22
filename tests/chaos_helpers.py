"""Helpers for tests/test_chaos.py, the chaos soak: forked producer and consumer processes
on one queue, a seeded chaos loop (SIGKILLed clients, Redis restarts, CLIENT KILLs, a paused
server), and the accounting that turns what every process recorded into figures and a list
of broken promises.

Every client process records what happened to each item in a file of its own, outside Redis
(Redis is restarted under it): one line per event, written with a single ``os.write``, so a
SIGKILL never leaves half a line. A consumer also publishes its phase (waiting in get,
processing an item, acknowledging) in a shared byte the parent reads after stopping it with
SIGSTOP, just before the SIGKILL: that is how "killed while processing" (which the default
mode may lose) is told from "killed inside get()" (which it may not).

Nothing here asserts by itself: ``verdict_*`` return the problems found, with evidence, and
the test fails on them after printing the figures.
"""

from __future__ import annotations

import ctypes
import faulthandler
import mmap
import os
import pickle
import random
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import redis

import pressure
from pressure.keys import QueueKeys
from pressure.testing import RedisServer

from .faults_helpers import exited_by_itself, fork_child, kill_and_reap, parse_entry

#: Set to replay a run: the seed of the chaos loop and of every client's choices.
SEED_ENV = "PRESSURE_CHAOS_SEED"

# consumer phases, in the shared byte
IDLE, IN_GET, PROCESSING, ACKING = 0, 1, 2, 3
PHASES = {IDLE: "idle", IN_GET: "inside get()", PROCESSING: "processing", ACKING: "acknowledging"}


def chaos_seed() -> int:
    value = os.environ.get(SEED_ENV)
    return int(value) if value else random.randrange(1 << 31)


# -- in the client processes ---------------------------------------------------------------


class Recorder:
    """Appends ``KIND field... <monotonic time>`` lines to a file, one write each."""

    def __init__(self, path: str | Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, kind: str, *fields: Any) -> None:
        line = " ".join([kind, *(str(f).replace(" ", "_").replace("\n", "|") for f in fields),
                         f"{time.monotonic():.6f}"])
        os.write(self.fd, line.encode() + b"\n")


class PaddedSerializer:
    """pickle, each payload padded to ``pad`` bytes at least (pickle.loads stops at its STOP
    opcode): payloads that large move natively (pressure.connection.NATIVE_BYTES)."""

    def __init__(self, pad: int = 0) -> None:
        self.pad = pad

    def dumps(self, obj: Any) -> bytes:
        data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
        return data + b"\0" * (self.pad - len(data)) if self.pad > len(data) else data

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)


class RecordingSerializer(PaddedSerializer):
    """pickle, recording every item it loads (``L item``): the reply carrying it reached this
    process (evidence only; "received" means get() returned it)."""

    def __init__(self, record: Recorder) -> None:
        super().__init__()
        self.record = record

    def loads(self, data: bytes) -> Any:
        item = pickle.loads(data)
        self.record("L", item)
        return item


def cause(exc: BaseException) -> str:
    """The redis-py error under a pressure error, flagged when Redis answered LOADING
    (the command did not run: issue 12 defect 4)."""
    inner = exc.__cause__
    name = type(inner).__name__ if inner is not None else "-"
    loading = "LOADING" in str(exc) or name == "BusyLoadingError"
    return f"LOADING/{name}" if loading else name


_stack_file: TextIO | None = None


def child_setup(base: str) -> Recorder:
    """In a client process: die with the test process (prctl PDEATHSIG), dump every thread's
    stack to ``<base>.stack`` on SIGUSR1 (the hang diagnostics), and record to ``<base>.log``."""
    global _stack_file
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    _stack_file = open(f"{base}.stack", "w")  # noqa: SIM115 - lives as long as the process
    faulthandler.register(signal.SIGUSR1, file=_stack_file, all_threads=True)
    record = Recorder(f"{base}.log")
    record("START", os.getpid())
    return record


def _guarded(record: Recorder, body: Callable[[], None]) -> None:
    try:
        body()
    except BaseException as exc:
        record("X", repr(exc), traceback.format_exc()[-1500:])
        raise
    record("EXIT")


@dataclass(frozen=True)
class QueueSpec:
    """The queue under test, as every process opens it."""

    url: str
    prefix: str
    name: str
    reliable: bool
    maxsize: int = 50
    visibility_timeout: float = 2.0
    lease: float = 2.0
    #: the producers' payloads are padded to this many bytes (PaddedSerializer)
    pad: int = 0

    def handle(self, **kw: Any) -> pressure.Queue[Any]:
        """A handle, as a client process opens it: a process started while Redis is down (the
        chaos restarts it) keeps trying, as a service would, rather than die at its first line."""
        while True:
            try:
                return pressure.Queue(self.name, url=self.url, prefix=self.prefix, reliable=self.reliable,
                                      visibility_timeout=self.visibility_timeout, lease=self.lease, **kw)
            except pressure.BackendError:
                time.sleep(0.05)

    @property
    def keys(self) -> QueueKeys:
        return QueueKeys.build(self.prefix, self.name)


def producer_main(spec: QueueSpec, base: str, slot: str, seed: int) -> None:
    """Put unique ids until the queue is shut down. ``A id`` before a put, ``P id`` once it
    returned; ``U id`` (OutcomeUnknown: maybe put; the same id is tried again) and ``B id``
    (BackendError: not put) for failures; ``S id`` when ShutDown ends the process."""
    record = child_setup(base)

    def body() -> None:
        rng = random.Random(seed)
        q = spec.handle(serializer=PaddedSerializer(spec.pad))
        n = 0
        gap, pace_until = 0.0, 0.0
        while True:
            if time.monotonic() > pace_until:  # fast and slow stretches: the queue fills and empties
                gap = rng.choice([0.002, 0.04, 0.04])
                pace_until = time.monotonic() + rng.uniform(0.3, 1.5)
            item = f"{slot}-{n}"
            n += 1
            record("A", item)
            while True:
                try:
                    q.put(item, timeout=None if rng.random() < 0.5 else rng.uniform(0.05, 1.0))
                except pressure.Full:
                    continue
                except pressure.ShutDown:
                    record("S", item)
                    return
                except pressure.OutcomeUnknown as exc:
                    record("U", item, cause(exc))
                    time.sleep(0.05)
                    continue
                except pressure.BackendError as exc:
                    record("B", item, cause(exc))
                    time.sleep(0.05)
                    continue
                break
            record("P", item)
            time.sleep(rng.uniform(0.0, gap))

    _guarded(record, body)


def consumer_main(spec: QueueSpec, base: str, client_id: str, seed: int, state: mmap.mmap) -> None:
    """Receive until ShutDown, recording ``R id deliveries`` as get() returns an item (before
    processing it), then ``D id`` once processed (and, in reliable mode, acknowledged:
    ``K id`` ack True, ``F id`` ack False, ``K? id`` False after an OutcomeUnknown, i.e.
    maybe acknowledged by the lost attempt). The phase goes to ``state[0]``."""
    record = child_setup(base)

    def body() -> None:
        rng = random.Random(seed)
        q = spec.handle(client_id=client_id, serializer=RecordingSerializer(record))
        while True:
            state[0] = IN_GET
            try:
                d = q.receive(timeout=rng.uniform(0.1, 1.0))
            except pressure.Empty:
                continue
            except pressure.ShutDown:
                state[0] = IDLE
                record("Z")
                return
            except pressure.BackendError as exc:
                record("GU" if isinstance(exc, pressure.OutcomeUnknown) else "GB", cause(exc))
                time.sleep(0.05)
                continue
            state[0] = PROCESSING  # first: a kill from here on is a kill while processing
            record("R", d.item, d.deliveries)
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0.0, 0.006))
            if spec.reliable:
                state[0] = ACKING
                unknown = False
                while True:
                    try:
                        ok = d.ack()
                    except pressure.BackendError as exc:
                        unknown = unknown or isinstance(exc, pressure.OutcomeUnknown)
                        record("KU" if isinstance(exc, pressure.OutcomeUnknown) else "KB", d.item, cause(exc))
                        time.sleep(0.05)
                        continue
                    break
                record("K" if ok else ("K?" if unknown else "F"), d.item)
            record("D", d.item)

    _guarded(record, body)


# -- in the test process: the chaos ------------------------------------------------------


@dataclass
class ChaosPlan:
    """How much chaos: a fixed number of ticks, each after a seeded random gap."""

    ticks: int = 180
    gap: tuple[float, float] = (0.05, 0.35)
    #: a Redis restart every this many ticks (alternately-ish hard and graceful, seeded)
    restart_every: int = 22
    #: how long Redis stays down on a restart (s)
    down: tuple[float, float] = (0.0, 1.0)
    #: chances per tick (else a client process is SIGKILLed)
    connection_kill: float = 0.07
    pause: float = 0.03
    pause_for: tuple[float, float] = (0.2, 1.5)


class Chaos:
    """Faults on one private Redis (restarts from its AOF, CLIENT KILL, SIGSTOP) and, on most
    ticks, ``kill_client(rng)``; ``between()`` runs after each tick (to notice crashed clients)."""

    def __init__(self, server: RedisServer, seed: int, plan: ChaosPlan,
                 kill_client: Callable[[random.Random], None],
                 between: Callable[[], None] = lambda: None) -> None:
        self.server, self.seed, self.plan = server, seed, plan
        self.kill_client, self.between = kill_client, between
        self.counts: Counter[str] = Counter()
        self.started = self.ended = 0.0
        #: (start, end) monotonic times of every fault that breaks connections (restarts and
        #: CLIENT KILLs, not pauses): a reply or a posted command may be lost inside one
        self.breaks: list[tuple[float, float]] = []

    def run(self) -> None:
        rng = random.Random(self.seed)
        p = self.plan
        self.started = time.monotonic()
        try:
            for tick in range(p.ticks):
                time.sleep(rng.uniform(*p.gap))
                roll = rng.random()
                if tick % p.restart_every == p.restart_every // 2:
                    self.restart(graceful=roll < 0.4, down=rng.uniform(*p.down))
                elif roll < p.connection_kill:
                    self.kill_connections()
                elif roll < p.connection_kill + p.pause:
                    self.pause(rng.uniform(*p.pause_for))
                else:
                    self.kill_client(rng)
                self.between()
        finally:
            self.server.resume()  # never leave it stopped, whatever failed
            self.ended = time.monotonic()

    def restart(self, graceful: bool, down: float) -> None:
        """SIGKILL (or SIGTERM: graceful), stay down ``down`` s, start again on the same port and
        directory: the AOF (appendfsync always) is replayed."""
        start = time.monotonic()
        if graceful:
            self.server.stop()
            self.counts["graceful restarts"] += 1
        else:
            self.server.kill()
            self.counts["hard restarts"] += 1
        time.sleep(down)
        self.server.start()
        self.breaks.append((start, time.monotonic()))

    def kill_connections(self) -> None:
        """CLIENT KILL TYPE normal: every client connection but this one."""
        start = time.monotonic()
        with redis.Redis.from_url(self.server.url, socket_timeout=3) as r:
            try:
                self.counts["connections killed"] += int(r.client_kill_filter(_type="normal", skipme=True))
            except redis.RedisError:
                return
            finally:  # it may have killed some even if its reply never came
                self.breaks.append((start, time.monotonic()))
        self.counts["CLIENT KILLs"] += 1

    def pause(self, seconds: float) -> None:
        self.server.pause()
        try:
            time.sleep(seconds)
        finally:
            self.server.resume()
        self.counts["pauses"] += 1

    def summary(self) -> str:
        c = self.counts
        return (f"redis restarts {c['hard restarts'] + c['graceful restarts']} "
                f"({c['hard restarts']} SIGKILL, {c['graceful restarts']} graceful), "
                f"CLIENT KILLs {c['CLIENT KILLs']} ({c['connections killed']} connections), "
                f"pauses {c['pauses']}")


# -- the client processes, from the test process -------------------------------------------


@dataclass
class Life:
    """One incarnation of a client slot: its process, its records, how it ended."""

    slot: str
    inc: int
    pid: int
    base: str
    state: mmap.mmap | None = None
    killed: bool = False
    killed_at: float = 0.0
    #: consumers: the phase when it was stopped for the kill, and what its in-flight list
    #: and inbox held then (read from Redis between SIGSTOP and SIGKILL, and after)
    phase_at_kill: int | None = None
    held_at_kill: list[Any] = field(default_factory=list)
    #: what its lists held just after the kill (10 ms on): an item gone by then left with the
    #: DEL the process had posted (the socket's close sends it), never by a requeue
    held_after_kill: list[Any] = field(default_factory=list)
    status: int | None = None  # exit status, once reaped (not for kills)
    records: list[tuple[str, list[str], float]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.slot}.{self.inc}"

    @property
    def consumer(self) -> bool:
        return self.slot.startswith("C")

    def read(self) -> None:
        self.records = []
        try:
            text = Path(f"{self.base}.log").read_text(errors="replace")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            parts = line.split(" ")
            if len(parts) >= 2:
                self.records.append((parts[0], parts[1:-1], float(parts[-1])))

    def items(self, kind: str) -> list[str]:
        return [fields[0] for k, fields, _ in self.records if k == kind and fields]

    def tail(self, n: int = 6) -> str:
        return "; ".join(" ".join([k, *f]) for k, f, _ in self.records[-n:])


def held_by(r: redis.Redis, keys: QueueKeys, client_id: str) -> list[Any]:
    """The items in the in-flight lists, inboxes and held lists of every handle of
    ``client_id`` (a held list: a header, then stored items, as get_many's batch and a native
    get leave it)."""
    out = []
    for prefix in (keys.inflight_prefix, keys.inbox_prefix):
        for key in r.scan_iter(match=f"{prefix}{client_id}#*", count=1000):
            for entry in r.lrange(key, 0, -1):
                parsed = parse_entry(entry if isinstance(entry, bytes) else entry.encode())
                if parsed is not None:
                    out.append(parsed[2])
    for key in r.scan_iter(match=f"{keys.held_prefix}{client_id}#*", count=1000):
        out += [pickle.loads(item) for item in r.lrange(key, 1, -1)]
    return out


class Fleet:
    """Producer slots P0.. and consumer slots C0..: forked, SIGKILLed, forked again."""

    def __init__(self, spec: QueueSpec, logdir: Path, producers: int, consumers: int, seed: int) -> None:
        self.spec, self.logdir = spec, logdir
        self.slots = [f"P{i}" for i in range(producers)] + [f"C{i}" for i in range(consumers)]
        self.rng = random.Random(seed ^ 0x5EED)
        self.current: dict[str, Life] = {}
        self.lives: list[Life] = []
        self.kills: Counter[str] = Counter()
        self.r = redis.Redis.from_url(spec.url, socket_timeout=3, socket_connect_timeout=3)
        self.unexpected: list[str] = []

    def start_all(self) -> None:
        for slot in self.slots:
            self.start(slot)

    def start(self, slot: str) -> None:
        inc = sum(1 for life in self.lives if life.slot == slot) + 1
        base = str(self.logdir / f"{slot}.{inc}")
        seed = self.rng.randrange(1 << 31)
        if slot.startswith("P"):
            pid = fork_child(producer_main, self.spec, base, f"{slot}.{inc}", seed)
            life = Life(slot, inc, pid, base)
        else:
            state = mmap.mmap(-1, 8)  # anonymous and shared with the child
            pid = fork_child(consumer_main, self.spec, base, f"{slot}.{inc}", seed, state)
            life = Life(slot, inc, pid, base, state)
        self.current[slot] = life
        self.lives.append(life)

    def kill_random(self, rng: random.Random) -> None:
        self.kill(rng.choice(self.slots))

    def kill(self, slot: str) -> None:
        """SIGSTOP, note a consumer's phase and what it holds, SIGKILL, reap, start another."""
        life = self.current.pop(slot)
        if life.status is not None:  # it exited by itself (check_running reported it): replace it
            self.start(slot)
            return
        os.kill(life.pid, signal.SIGSTOP)
        if life.state is not None:
            life.phase_at_kill = life.state[0]
            life.held_at_kill = self._held(life)
        kill_and_reap(life.pid)
        life.killed, life.killed_at = True, time.monotonic()
        if life.state is not None:
            time.sleep(0.01)  # a hand-off the server was serving as it died lands first
            life.held_after_kill = self._held(life)
            life.held_at_kill += [i for i in life.held_after_kill if i not in life.held_at_kill]
            self.kills[f"consumer {PHASES.get(life.phase_at_kill or 0, '?')}"] += 1
        self.kills["producer" if slot.startswith("P") else "consumer"] += 1
        self.start(slot)

    def kill_a_holder(self, tries: int = 300) -> Life | None:
        """SIGKILL a consumer caught processing or acknowledging a delivery it holds (the last
        act of the chaos, just before the close: what it held must still come out)."""
        consumers = [slot for slot in self.slots if slot.startswith("C")]
        for _ in range(tries):
            slot = self.rng.choice(consumers)
            life = self.current[slot]
            if life.state is not None and life.state[0] in (PROCESSING, ACKING):
                self.kill(slot)
                if life.held_at_kill:
                    self.kills["finale"] += 1
                    return life
            time.sleep(0.005)
        return None

    def _held(self, life: Life) -> list[Any]:
        try:
            return held_by(self.r, self.spec.keys, life.name)
        except redis.RedisError:
            return []

    def check_running(self) -> None:
        """A client that exits while the queue is open is a failure: note it, with its last records."""
        for life in self.current.values():
            if life.status is None and (status := exited_by_itself(life.pid)) is not None:
                life.status = status
                life.read()
                self.unexpected.append(f"{life.name} (pid {life.pid}) exited by itself with status "
                                       f"{status} while the queue was open: {life.tail()}")

    def wait_all(self, bound: float) -> list[Life]:
        """Wait up to ``bound`` s for every running client to exit; the ones that did not."""
        deadline = time.monotonic() + bound
        waiting = [life for life in self.current.values() if life.status is None]
        while waiting and time.monotonic() < deadline:
            for life in list(waiting):
                status = exited_by_itself(life.pid)
                if status is not None:
                    life.status = status
                    waiting.remove(life)
            time.sleep(0.05)
        return waiting

    def close(self) -> None:
        self.r.close()


def describe_hung(pid: int, stack_path: str | None) -> str:
    """py-spy-free diagnostics of a process that did not exit: its /proc state and kernel wait
    channel, and the Python stacks of all its threads (faulthandler, on SIGUSR1; only for our
    own client processes, ``stack_path`` given: SIGUSR1 would end any other process)."""
    def proc(name: str) -> str:
        try:
            return Path(f"/proc/{pid}/{name}").read_text(errors="replace").strip()
        except OSError as exc:
            return f"? ({exc.__class__.__name__})"

    stat = proc("stat")
    state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else stat
    if stack_path is None:
        return f"pid {pid} state {state} wchan {proc('wchan')}"
    try:
        os.kill(pid, signal.SIGUSR1)
        time.sleep(0.5)
        stacks = Path(stack_path).read_text(errors="replace")[-3000:]
    except OSError as exc:
        stacks = f"(no stack dump: {exc!r})"
    return f"pid {pid} state {state} wchan {proc('wchan')}\n{stacks}"


# -- what Redis holds at the end -------------------------------------------------------------


@dataclass
class Leftovers:
    queued: list[Any]
    in_flight: list[tuple[str, Any]]  # (consumer, item)
    dead: list[Any]
    tokens: dict[str, int]
    waiter: bytes | None
    stats: pressure.queue.QueueStatistics


def leftovers(q: pressure.Queue[Any], r: redis.Redis) -> Leftovers:
    k = q.keys
    stats = q.statistics()
    queued = q.peek(stats.size) if stats.size else []
    in_flight = [(f.consumer, pickle.loads(f.payload)) for f in q.in_flight()]
    dead = [pickle.loads(d.payload) for d in q.dead_letters()]
    tokens = {"producer_free": r.llen(k.producer_free), "consumer_free": r.llen(k.consumer_free),
              "not_full": r.llen(k.not_full), "closed": r.llen(k.closed)}
    waiter = r.get(k.waiter)
    return Leftovers(queued, in_flight, dead, tokens, waiter if isinstance(waiter, bytes) else None, stats)


def token_problems(tokens: dict[str, int], what: str, closed: bool = True) -> list[str]:
    """The protocol's role-token invariants, with nobody holding a role."""
    problems = []
    for key in ("producer_free", "consumer_free"):
        if tokens[key] != 1:
            problems.append(f"{what}: :{key} holds {tokens[key]} elements with nobody in the role (must be 1)")
    if tokens["not_full"] not in (0, 1):
        problems.append(f"{what}: :not_full holds {tokens['not_full']} elements (must be 0 or 1)")
    if closed and tokens["closed"] != 2:
        problems.append(f"{what}: :closed holds {tokens['closed']} elements after close (must be 2)")
    return problems


def keys_under(r: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(r.scan_iter(match=f"{prefix}:*", count=1000))


def worst_stall(times: Iterable[float], start: float, end: float) -> tuple[float, float]:
    """The longest gap between consecutive events in [start, end] (its length and where it
    began, in seconds after ``start``)."""
    points = sorted([start, *(t for t in times if start <= t <= end), end])
    gaps = [(b - a, a - start) for a, b in zip(points, points[1:])]
    return max(gaps) if gaps else (0.0, 0.0)


# -- the accounting ----------------------------------------------------------------------------

#: The values of DEFAULT_MODE_MAY_LOSE (tests/test_chaos.py): what a SIGKILLed default-mode
#: consumer may take with it.
MAY_LOSE = ("processing", "held")


def allowed_default_losses(lives: list[Life], may_lose: str) -> dict[Any, str]:
    """item -> why the default mode may lose it. 'processing': get() had returned it to a consumer
    that was SIGKILLed before it finished processing it. 'held': also whatever sat in a killed
    consumer's in-flight list or inbox, even inside get() (up to one item per kill)."""
    if may_lose not in MAY_LOSE:
        raise ValueError(f"DEFAULT_MODE_MAY_LOSE must be one of {MAY_LOSE}, not {may_lose!r}")
    allowed: dict[Any, str] = {}
    for life in lives:
        if not (life.consumer and life.killed):
            continue
        finished = set(life.items("D"))
        processing = [i for i in life.items("R") if i not in finished]
        for item in processing:
            allowed[item] = f"being processed by {life.name} when it was SIGKILLed"
        if life.phase_at_kill == PROCESSING and not processing:
            for item in life.held_at_kill:  # killed between get() returning and its R record
                allowed[item] = f"received by {life.name}, SIGKILLed before it could record it"
        if life.phase_at_kill == IN_GET:
            # get() had the item in hand and had posted its DEL (still in the kernel when the
            # process was stopped, sent as it died): returning, as the docs (reliability.md) say it may lose
            loaded = set(life.items("L"))
            for item in life.held_at_kill:
                if item in loaded and item not in life.held_after_kill:
                    allowed[item] = (f"in hand in {life.name}'s get(), its drop posted (gone from Redis "
                                     f"as the process died), SIGKILLed before get() returned")
        if may_lose == "held":
            for item in life.held_at_kill:
                allowed.setdefault(item, f"held by {life.name} when it was SIGKILLed "
                                         f"{PHASES.get(life.phase_at_kill or 0, '?')}")
    return allowed


#: how far around a get's return (and a kill) a connection break may lose the get's posted DEL:
#: on TCP the DEL waits for the connection's next command for up to 200 ms
BREAK_SLACK = 0.5


def allowed_default_duplicates(lives: list[Life], breaks: list[tuple[float, float]],
                               lease: float = QueueSpec.lease) -> dict[Any, str]:
    """item -> why the default mode may deliver it once more (docs: reliability.md, Guarantees: "An item comes
    out twice only if that DEL never reaches Redis (the connection breaks, or Redis restarts,
    right after the get's reply) and the consumer dies or makes no further get ... within its
    lease"): an item a consumer received when a restart or a CLIENT KILL happened between
    that receipt and the consumer's kill (its last item), or its next receipt more than
    ``lease`` later (Redis was down longer than the lease: the item's entry aged past it in the
    consumer's in-flight list, and a sweep requeued it before the next get dropped it)."""
    allowed: dict[Any, str] = {}
    for life in lives:
        if not life.consumer:
            continue
        receipts = [(f[0], t) for k, f, t in life.records if k == "R" and f]
        for n, (item, received_at) in enumerate(receipts):
            if n + 1 < len(receipts):
                until, why = receipts[n + 1][1], "no further get within its lease"
                if until - received_at <= lease:
                    continue
            elif life.killed:
                until, why = life.killed_at, "SIGKILLed"
            else:
                continue
            hit = [(s, e) for s, e in breaks if s <= until + BREAK_SLACK and e >= received_at - BREAK_SLACK]
            if hit:
                allowed[item] = (f"received by {life.name}, {until - received_at:.2f} s before it was {why}, "
                                 f"with a connection break {hit[0][0] - received_at:+.2f} s from the receipt")
    return allowed


def _where(item: Any, lives: list[Life], left: Leftovers, closed_at: float) -> str:
    """Evidence for one item: who loaded/received/processed it, who held it at a kill, where it is now."""
    seen = []
    for life in lives:
        if not life.consumer:
            continue
        marks = "".join(m for m, kind in (("L", "L"), ("R", "R"), ("D", "D"), ("K", "K"))
                        if item in life.items(kind))
        held = item in life.held_at_kill
        if marks or held:
            how = (f"killed {PHASES.get(life.phase_at_kill or 0, '?')} {closed_at - life.killed_at:.1f} s "
                   f"before close" if life.killed else "exited")
            seen.append(f"{life.name}[{marks or '-'}{', held at kill' if held else ''}; {how}]")
    now = []
    if item in left.queued:
        now.append("still queued")
    now += [f"in flight of {c}" for c, i in left.in_flight if i == item]
    if item in left.dead:
        now.append("dead-lettered")
    return f"{item}: {' '.join(seen) or 'never reached a consumer'}; now {', '.join(now) or 'not in Redis'}"


def verdict_queue(lives: list[Life], left: Leftovers, reliable: bool, may_lose: str,
                  closed_at: float, breaks: list[tuple[float, float]]) -> tuple[dict[str, Any], list[str]]:
    """Figures and problems of one queue scenario, from every process's records and what
    Redis held at the end (read before delete)."""
    problems: list[str] = []
    attempted: set[str] = set()
    put_ok: set[str] = set()
    unknown: Counter[str] = Counter()
    received: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    done: Counter[str] = Counter()
    acked: Counter[str] = Counter()
    maybe_acked: Counter[str] = Counter()
    ack_false: Counter[str] = Counter()
    loaded: set[str] = set()
    errors: Counter[str] = Counter()
    loading: list[str] = []
    receive_times: list[float] = []
    for life in lives:
        life.read()
        kinds = {k for k, _, _ in life.records}
        if "X" in kinds:
            problems.append(f"{life.name} (pid {life.pid}) crashed: "
                            f"{' '.join(next(f for k, f, _ in life.records if k == 'X'))}")
        elif not life.killed and "EXIT" not in kinds and life.status != -1:  # -1: hung, reported
            problems.append(f"{life.name} (pid {life.pid}) ended without finishing (status "
                            f"{life.status}): {life.tail()}")
        for kind, f, t in life.records:
            if kind in ("U", "B", "GU", "GB", "KU", "KB"):
                errors["OutcomeUnknown" if kind.endswith("U") else "BackendError"] += 1
                if kind.endswith("U") and f[-1].startswith("LOADING"):  # a typed BackendError is fine
                    loading.append(f"{life.name} {kind} {' '.join(f)}")
            if kind == "A":
                attempted.add(f[0])
            elif kind == "P":
                put_ok.add(f[0])
            elif kind == "U":
                unknown[f[0]] += 1
            elif kind == "L":
                loaded.add(f[0])
            elif kind == "R":
                received[f[0]] += 1
                pairs[(f[0], f[1])] += 1
                receive_times.append(t)
            elif kind == "D":
                done[f[0]] += 1
            elif kind == "K":
                acked[f[0]] += 1
            elif kind == "K?":
                maybe_acked[f[0]] += 1
            elif kind == "F":
                ack_false[f[0]] += 1
    in_flight_items = [i for _, i in left.in_flight]
    phantom = (set(received) | loaded | set(left.queued) | set(in_flight_items) | set(left.dead)) - attempted
    if phantom:
        problems.append(f"{len(phantom)} items came out that no producer put: {sorted(phantom)[:10]}")
    if loading:
        problems.append(f"{len(loading)} OutcomeUnknown raised for commands Redis refused with LOADING "
                        f"(they did not run: issue 12 defect 4): {loading[:5]}")
    stats = left.stats
    if stats.size == 0 and stats.consumed_messages != stats.produced_messages:
        problems.append(f"stats: consumed_messages {stats.consumed_messages} != produced_messages "
                        f"{stats.produced_messages} with the queue empty")
    most = sum(1 + unknown[i] for i in attempted)
    if not len(put_ok) <= stats.produced_messages <= most:
        problems.append(f"stats: produced_messages {stats.produced_messages} outside [{len(put_ok)} puts "
                        f"returned, {most} puts that may have run]")
    if left.queued:
        problems.append(f"{len(left.queued)} items still queued after every consumer got ShutDown: "
                        f"{left.queued[:10]}")
    if left.waiter is not None:
        problems.append(f"a waiter is still registered after every consumer exited: {left.waiter!r}")
    figures: dict[str, Any] = {
        "attempted": len(attempted), "put": len(put_ok), "maybe": len(attempted - put_ok),
        "received": len(received), "receipts": sum(received.values()),
        "duplicated": sum(n - 1 for n in received.values() if n > 1),
        "outcome_unknown": errors["OutcomeUnknown"], "backend_errors": errors["BackendError"],
        "loading_unknown": len(loading), "dead": len(left.dead), "receive_times": receive_times,
    }
    if reliable:
        # killed while acknowledging, with the item nowhere in Redis: the ack ran, its record did not
        in_redis = set(left.queued) | set(in_flight_items) | set(left.dead)
        killed_acking = {i for life in lives if life.consumer and life.killed and life.phase_at_kill == ACKING
                         for i in life.items("R")[-1:]} - in_redis
        accounted = set(acked) | set(maybe_acked) | set(left.dead) | killed_acking
        lost = sorted(put_ok - accounted)
        figures.update(lost=len(lost), acked=len(set(acked)), ack_false=sum(ack_false.values()),
                       ambiguous_acks=sum(maybe_acked.values()) + len(killed_acking - set(acked)),
                       redelivered=sum(1 for (_, n) in pairs.elements() if n != "1"))
        if lost:
            problems.append(f"{len(lost)} items whose put returned were never acknowledged (reliable mode "
                            f"loses nothing):\n    "
                            + "\n    ".join(_where(i, lives, left, closed_at) for i in lost[:12]))
        over = {i: n for i, n in acked.items() if n > 1 + unknown[i]}
        if over:
            problems.append(f"items acknowledged (ack True) more often than they were put: "
                            f"{dict(list(over.items())[:10])}")
        same = {p: n for p, n in pairs.items() if n > 1 + unknown[p[0]]}
        if same:
            problems.append(f"items received twice under the same delivery count: {dict(list(same.items())[:10])}")
        if left.in_flight:
            problems.append(f"{len(left.in_flight)} deliveries left in flight after every consumer got ShutDown "
                            f"(stranded by close? issue 12 defect 2):\n    " + "\n    ".join(
                                _where(i, lives, left, closed_at) for i in sorted(set(in_flight_items))[:12]))
    else:
        allowed = allowed_default_losses(lives, may_lose)
        lost = sorted(put_ok - set(done))
        bad = [i for i in lost if i not in allowed]
        figures.update(lost=len(lost), lost_allowed=len(lost) - len(bad), lost_bad=len(bad),
                       allowed=len(allowed), left_in_flight=len(left.in_flight))
        if bad:
            problems.append(
                f"{len(bad)} items whose put returned were never processed, and not lost the way the "
                f"default mode may lose them (DEFAULT_MODE_MAY_LOSE={may_lose!r}):\n    "
                + "\n    ".join(_where(i, lives, left, closed_at) for i in bad[:12]))
        twice = {i: n for i, n in received.items() if n > 1 + unknown[i]}
        may_repeat = allowed_default_duplicates(lives, breaks)
        bad_twice = {i: n for i, n in twice.items() if n > 1 + unknown[i] + (i in may_repeat)}
        figures.update(duplicated_allowed=len(twice) - len(bad_twice), duplicated_bad=len(bad_twice))
        if bad_twice:
            problems.append(
                f"default mode delivered {len(bad_twice)} items more often than they were put, and not "
                f"in the documented case (a posted DEL lost to a connection break, then the consumer "
                f"killed):\n    " + "\n    ".join(f"{i} x{n}: {_where(i, lives, left, closed_at)}"
                                                 for i, n in list(bad_twice.items())[:12]))
    problems += token_problems(left.tokens, "queue")
    return figures, problems

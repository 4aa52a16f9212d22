"""Fault injection against real private redis-servers: SIGKILLed producer and consumer
processes, redis-server restarts (AOF, appendfsync always), CLIENT KILLs, a paused
server, and the time a dead consumer's role and items take to come back.

Every scenario ends with the protocol invariants (one token per role, :not_full in
agreement with length and bound) and an item-by-item account of what was put and what
came out; a module summary goes to the terminal whatever pytest's capture mode.

    .venv/bin/python -m pytest tests/test_faults.py
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import pressure
from pressure.testing import RedisServer

from .faults_helpers import (
    StormKeys,
    Streams,
    drain,
    exited_by_itself,
    fork_child,
    kill_and_reap,
    median,
    parse_entry,
    storm_consumer,
    storm_producer,
)
from .helpers import assert_invariants, consumer_keys, is_waiter, register_waiter

pytestmark = pytest.mark.slow

#: SIGKILLs per storm (one storm per mode): a few hundred over the module.
STORM_KILLS = 150
STORM_MAXSIZE = 5
#: kills of a consumer while it waits holding the role that a storm must include (it seeks them out)
MIN_WAITER_KILLS = 3
#: Client socket timeout of the clients pressure builds (pressure.connection.SOCKET_TIMEOUT).
SOCKET_TIMEOUT = 5.0
#: How long the server stays paused (SIGSTOP): past two client socket timeouts.
PAUSE = 2 * SOCKET_TIMEOUT + 2.5


# -- the module summary ----------------------------------------------------------------


class Summary:
    def __init__(self) -> None:
        self.scenarios: list[str] = []
        self.figures: Counter[str] = Counter()
        self.recovery: dict[str, list[float]] = {}
        self.notes: list[str] = []

    def render(self, elapsed: float) -> str:
        f = self.figures
        lines = [
            "",
            "=" * 30 + " pressure fault-injection summary " + "=" * 30,
            f"scenarios run:      {len(self.scenarios)}  ({', '.join(self.scenarios)})",
            f"process SIGKILLs:   {f['kills']}  (producers {f['producer_kills']}, consumers {f['consumer_kills']}, "
            f"of which waiting on an empty queue {f['waiter_kills']})",
            f"redis restarts:     {f['restarts']}   pauses: {f['pauses']}   CLIENT KILLs: {f['client_kills']}",
            f"items checked:      {f['items']}",
            f"lost (reliable):    {f['lost_reliable']}",
            f"lost (default mode, returned by get() to a consumer SIGKILLed before it recorded them, "
            f"documented): {f['lost_default']}; taken by a killed consumer and requeued: "
            f"{f['requeued_default']}",
            f"acked, not recorded (kill between ack and record): {f['ambiguous']}",
            f"duplicated:         {f['duplicated']} (puts retried after OutcomeUnknown); "
            f"redeliveries: {f['redelivered']}; dead-lettered: {f['dead']}",
            f"OutcomeUnknown:     {f['outcome_unknown']}   other BackendError: {f['backend_errors']}",
        ]
        for what, values in self.recovery.items():
            lines.append(f"recovery {what:<28} n={len(values):<3} p50 {median(values):.2f} s   "
                         f"max {max(values):.2f} s")
        lines += self.notes
        lines.append(f"module run time:    {elapsed:.1f} s")
        lines.append("=" * 94)
        return "\n".join(lines)


@pytest.fixture(scope="module")
def summary(request: pytest.FixtureRequest) -> Iterator[Summary]:
    s = Summary()
    start = time.monotonic()
    yield s
    text = s.render(time.monotonic() - start)
    print(text)  # in the captured output (-rA, junit)
    # and on the terminal whatever the capture mode: -s or not, the same lines
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is None:  # -p no:capture: stderr is the terminal already
        sys.stderr.write(text + "\n")
    else:
        with capman.global_and_fixture_disabled():
            sys.stderr.write(text + "\n")
            sys.stderr.flush()


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as srv:
        yield srv


@pytest.fixture
def prefix() -> str:
    return f"f{uuid.uuid4().hex[:10]}"


@pytest.fixture
def children() -> Iterator[dict[int, str]]:
    """pid -> role of forked workers; whatever is still running at teardown is killed."""
    alive: dict[int, str] = {}
    yield alive
    for pid in list(alive):
        kill_and_reap(pid)


def _no_threads() -> None:
    """Fork only while none of this module's threads runs (one could hold a lock the child needs)."""
    ours = [t for t in threading.enumerate() if t.name.startswith("fault-")]
    assert not ours, f"forking needs a parent without worker threads, found {ours}"


# -- 1. SIGKILL storms -----------------------------------------------------------------


class Storm:
    """3 producer and 3 consumer processes on a bounded queue; one of them is SIGKILLed
    every few tens of ms and started again as a new incarnation."""

    def __init__(self, url: str, prefix: str, reliable: bool, children: dict[int, str]) -> None:
        self.url, self.prefix, self.reliable, self.children = url, prefix, reliable, children
        self.name = "storm"
        self.keys = StormKeys(f"{prefix}-results")
        self.r = redis.Redis.from_url(url)
        self.q: pressure.Queue[str] = pressure.Queue(
            self.name, STORM_MAXSIZE, url=url, prefix=prefix, reliable=reliable, visibility_timeout=30.0)
        self.slots: dict[str, tuple[int, str]] = {}  # slot -> (pid, consumer id)
        self.incarnation: Counter[str] = Counter()
        self.kills: Counter[str] = Counter()
        self.taken: dict[str, list[str]] = {}  # item -> consumers whose in-flight list held it at death
        self.parent = os.getpid()

    def start(self, slot: str) -> None:
        _no_threads()
        self.incarnation[slot] += 1
        inc = self.incarnation[slot]
        index = int(slot[1:])
        if slot[0] == "P":
            pid = fork_child(storm_producer, self.url, self.prefix, self.name, self.keys, index, inc,
                             self.parent)
            cid = ""
        else:
            cid = f"{slot}.{inc}"
            pid = fork_child(storm_consumer, self.url, self.prefix, self.name, self.keys, index, cid,
                             self.reliable, self.parent)
        self.slots[slot] = (pid, cid)
        self.children[pid] = slot

    def kill(self, slot: str) -> None:
        pid, cid = self.slots.pop(slot)
        if cid:
            # stopped, the consumer cannot take anything more itself; what its in-flight list
            # holds was never returned by its get (read again after the kill: a BLMOVE the
            # server was still serving for it may have added one), and must come back
            os.kill(pid, signal.SIGSTOP)
            self._note_taken(cid)
            if is_waiter(self.r, self.q, cid):
                self.kills["waiting consumer"] += 1  # killed holding the consumer role
        kill_and_reap(pid)
        del self.children[pid]
        if cid:
            self._note_taken(cid)
        self.kills["producer" if slot[0] == "P" else "consumer"] += 1

    def _note_taken(self, cid: str) -> None:
        entries = [e for key in consumer_keys(self.r, self.q, cid, "inflight")
                   for e in self.r.lrange(key, 0, -1)]
        for entry in entries:
            parsed = parse_entry(entry)
            if parsed is not None:
                self.taken.setdefault(parsed[2], []).append(cid)

    def check_children(self) -> None:
        for slot, (pid, _) in self.slots.items():
            status = exited_by_itself(pid)
            if status is not None:
                del self.children[pid]
                errors = [e.decode() for e in self.r.lrange(self.keys.errors, 0, -1)]
                pytest.fail(f"worker {slot} (pid {pid}) exited by itself ({status}):\n" + "\n".join(errors))

    def run(self, kills: int, seed: int) -> None:
        rng = random.Random(seed)
        slots = [f"P{i}" for i in range(3)] + [f"C{i}" for i in range(3)]
        for slot in slots:
            self.start(slot)
        phase_end = 0.0
        while self.kills["producer"] + self.kills["consumer"] < kills:
            if time.monotonic() > phase_end:  # alternate full and empty stretches
                self.r.set(self.keys.pace, rng.choice(["slow", "fast"]))
                phase_end = time.monotonic() + rng.uniform(0.3, 1.0)
            time.sleep(rng.uniform(0.005, 0.06))
            self.check_children()
            slot = rng.choice(slots)
            if slot[0] == "C" and self.kills["waiting consumer"] < MIN_WAITER_KILLS:
                # the recovery case the storm must cover: a consumer killed while it waits holding
                # the consumer role; left to chance it came up only once in one CI run in six
                waiter = next((s for s in slots if s[0] == "C" and is_waiter(self.r, self.q, self.slots[s][1])),
                              None)
                slot = waiter or slot
            self.kill(slot)
            self.start(slot)
        time.sleep(0.3)
        self.check_children()
        for slot in slots:  # the end of the storm: producers first, so nothing more is put
            self.kill(slot)
        errors = [e.decode() for e in self.r.lrange(self.keys.errors, 0, -1)]
        assert not errors, "\n".join(errors)

    def members(self, key: str) -> set[str]:
        return {m.decode() for m in self.r.smembers(key)}

    def counts(self, key: str) -> Counter[str]:
        return Counter({k.decode(): int(v) for k, v in self.r.hgetall(key).items()})


def _storm(url: str, prefix: str, reliable: bool, children: dict[int, str], summary: Summary,
           seed: int) -> None:
    storm = Storm(url, prefix, reliable, children)
    storm.run(STORM_KILLS, seed)
    q = storm.q
    drained: Counter[str] = Counter()
    drain_deliveries: list[str] = []

    def record(item: str, deliveries: int) -> None:
        drained[item] += 1
        drain_deliveries.append(f"{item} {deliveries}")

    clean: pressure.Queue[str] = pressure.Queue(storm.name, url=url, prefix=prefix, reliable=reliable,
                                                visibility_timeout=30.0, client_id="drain")
    drain(clean, record, reliable=reliable, own="drain")

    r = storm.r
    assert_invariants(r, q)
    k = q.keys
    assert r.llen(k.producer_free) == 1 and r.llen(k.consumer_free) == 1
    stats = q.statistics()
    assert stats.size == 0
    assert stats.consumed_messages == stats.produced_messages, stats
    assert [f for f in q.in_flight() if f.consumer != "drain"] == []

    attempted = storm.members(storm.keys.attempted)
    put_done = storm.members(storm.keys.put_done)
    got = storm.counts(storm.keys.got)
    assert len(put_done) >= 200, f"the storm completed only {len(put_done)} puts"
    assert sum(got.values()) >= 100, "the consumers hardly ran"
    phantom = (set(got) | set(drained)) - attempted
    assert not phantom, f"items no producer put: {sorted(phantom)[:20]}"
    assert put_done <= attempted
    kills = storm.kills
    print(f"storm kills: {dict(kills)}")
    # the storm must have hit consumers holding the role while they waited (the recovery case)
    assert kills["waiting consumer"] >= MIN_WAITER_KILLS, f"too few kills of a waiting consumer: {dict(kills)}"
    summary.figures["kills"] += kills["producer"] + kills["consumer"]
    summary.figures["waiter_kills"] += kills["waiting consumer"]
    summary.figures["producer_kills"] += kills["producer"]
    summary.figures["consumer_kills"] += kills["consumer"]
    summary.figures["items"] += stats.produced_messages

    if reliable:
        acked = storm.counts(storm.keys.acked)
        ack_false = storm.counts(storm.keys.ack_false)
        markers = {v.decode() for v in r.hgetall(storm.keys.acking).values()}  # every worker was killed
        dead = Counter(parse_entry(e)[2] for e in r.lrange(k.dead, 0, -1))  # type: ignore[arg-type,index]
        twice = {i: n for i, n in acked.items() if n > 1}
        assert not twice, f"acknowledged (ack returned True) more than once: {twice}"
        assert not ack_false, f"a live consumer's delivery was taken back before its ack: {ack_false}"
        assert not set(acked) & set(drained), "an acknowledged item was delivered again"
        assert not set(dead) & (set(acked) | set(drained)), "a dead letter was also acknowledged"
        out = set(acked) | set(drained) | set(dead)
        # a kill between a successful ack and its record leaves the consumer's marker behind
        ambiguous = markers - out
        missing = put_done - out
        summary.figures["lost_reliable"] += len(missing - ambiguous)
        assert missing <= ambiguous, (
            f"items whose put returned, neither acknowledged, nor queued, in flight or dead-lettered, "
            f"nor named by a killed consumer's ack marker: {sorted(missing - ambiguous)[:20]}")
        assert len(ambiguous) <= kills["consumer"]
        # everything that entered the queue (produced_messages, one per executed put: no
        # retries here) came out exactly once, counting the ambiguous acks
        assert stats.produced_messages == len(out) + len(ambiguous), (
            f"produced {stats.produced_messages}, accounted {len(out)} + {len(ambiguous)} ambiguous: "
            f"{stats.produced_messages - len(out) - len(ambiguous)} items went missing unrecorded")
        # each receive of an item is a distinct delivery number: no silent double delivery
        by_item: dict[str, list[int]] = {}
        for line in [e.decode() for e in r.lrange(storm.keys.deliveries, 0, -1)] + drain_deliveries:
            item, n = line.rsplit(" ", 1)
            by_item.setdefault(item, []).append(int(n))
        same = {i: ns for i, ns in by_item.items() if len(ns) != len(set(ns))}
        assert not same, f"an item was received twice under the same delivery count: {same}"
        summary.figures["ambiguous"] += len(ambiguous)
        summary.figures["redelivered"] += sum(n - 1 for n in (got + drained).values() if n > 1)
        summary.figures["dead"] += sum(dead.values())
    else:
        twice = {i: n for i, n in (got + drained).items() if n > 1}
        assert not twice, f"default mode delivered an item more than once: {twice}"
        out = set(got) | set(drained)
        # what a killed consumer's lists held was never returned by its get: it came back
        # (the drain received it), unless the get returned it in the instant between the
        # lists being read here and its DEL reaching Redis, which no test can tell apart
        # from a kill after the return: so lost items are counted, not named
        summary.figures["requeued_default"] += len(set(storm.taken) & set(drained))
        # at most once, losing only what a get() returned: a consumer killed between its
        # get() returning and recording the item loses that one item, and nothing else is lost
        lost = stats.produced_messages - len(out)
        summary.figures["lost_default"] += lost
        assert 0 <= lost <= kills["consumer"], (
            f"{lost} items produced and never received for {kills['consumer']} consumer kills")
        missing = put_done - out
        assert len(missing) <= lost, (
            f"items whose put returned and were never received: {sorted(missing)[:20]}, "
            f"more than the {lost} produced items not received")
    clean.disconnect()
    q.disconnect()
    r.close()


@pytest.mark.timeout(150)
@pytest.mark.parametrize("reliable", [True, False], ids=["reliable", "default"])
def test_sigkill_storm(server: RedisServer, prefix: str, children: dict[int, str], summary: Summary,
                       reliable: bool) -> None:
    seed = random.randrange(1 << 30)
    print(f"storm seed {seed}")
    _storm(server.url, prefix, reliable, children, summary, seed)
    summary.scenarios.append(f"sigkill-storm-{'reliable' if reliable else 'default'}")


# -- 2. redis-server restarts (AOF, appendfsync always) ------------------------------


def _close_scenario(summary: Summary, name: str, figures: dict[str, int],
                    q: pressure.Queue[Any], r: redis.Redis) -> None:
    """The end of a stream scenario: the invariants, its figures in the summary, cleanup."""
    assert_invariants(r, q)
    summary.scenarios.append(name)
    q.disconnect()
    r.close()
    print(f"figures: {figures}")
    summary.figures["items"] += figures["items"]
    summary.figures["duplicated"] += figures["duplicated"]
    summary.figures["redelivered"] += figures["redelivered"]
    summary.figures["outcome_unknown"] += figures["outcome_unknown"]
    summary.figures["backend_errors"] += figures["backend_errors"]
    summary.figures["dead"] += figures["dead"]


@pytest.mark.timeout(120)
def test_redis_restarts_lose_nothing_in_reliable_mode(prefix: str, summary: Summary) -> None:
    with RedisServer(appendonly=True) as srv:
        streams = Streams(srv.url, prefix, work=0.005)  # items always in flight at a restart
        q = streams.start()
        time.sleep(1.0)
        restarts = 0
        held: list[int] = []
        for _ in range(3):
            before = streams.progress()
            with redis.Redis.from_url(srv.url) as look:  # what Redis holds as it dies
                pipe = look.pipeline(transaction=True)
                pipe.llen(q.keys.base)
                for i in range(streams.consumers):
                    for key in consumer_keys(look, q, f"{prefix}-C{i}", "inflight"):
                        pipe.llen(key)
                held.append(sum(pipe.execute()))
            srv.restart()  # SIGKILL and start again on the same port: the AOF is replayed
            restarts += 1
            time.sleep(2.0)
            after = streams.progress()
            stalled = [w for w in after | before if after[w] <= before[w]]
            assert not stalled, f"no progress after a restart by {stalled}: they did not reconnect"
        streams.finish()
        r = redis.Redis.from_url(srv.url)
        try:
            figures = streams.check(r, q)
        finally:
            summary.figures["lost_reliable"] += streams.lost
        assert streams.errors["OutcomeUnknown"] + streams.errors["BackendError"] > 0, \
            "the restarts never reached a client"
        assert sum(held) > 0, "the queue was empty at every restart: nothing was at stake"
        print(f"items in the queue or in flight at each restart: {held}")
        summary.figures["restarts"] += restarts
        _close_scenario(summary, "redis-restart", figures, q, r)


# -- 3. CLIENT KILL -------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_client_kills_lose_nothing_in_reliable_mode(server: RedisServer, prefix: str,
                                                     summary: Summary) -> None:
    streams = Streams(server.url, prefix)
    q = streams.start()
    stop = threading.Event()
    killed: list[int] = []
    failures: list[str] = []

    def killer() -> None:
        r = redis.Redis.from_url(server.url)
        own = r.client_id()
        n = 0
        try:
            while not stop.is_set():
                victims = [c for c in r.client_list() if int(c["id"]) != own]
                if victims:
                    try:
                        n += r.client_kill_filter(_id=random.choice(victims)["id"])
                    except redis.ResponseError:
                        pass  # gone meanwhile
                time.sleep(random.uniform(0.002, 0.008))
        except BaseException as exc:  # noqa: BLE001
            failures.append(repr(exc))
        finally:
            killed.append(n)
            r.close()

    t = threading.Thread(target=killer, name="fault-killer", daemon=True)
    t.start()
    time.sleep(1.0)
    before = streams.progress()
    time.sleep(3.0)
    stop.set()
    t.join(10)
    assert not failures, failures
    during = streams.progress()
    starved = [w for w in during if during[w] <= before[w]]
    assert not starved, f"no progress under CLIENT KILLs by {starved}"
    time.sleep(0.5)
    streams.finish()
    r = redis.Redis.from_url(server.url)
    try:
        figures = streams.check(r, q)
    finally:
        summary.figures["lost_reliable"] += streams.lost
    assert killed[0] >= 100, f"only {killed[0]} CLIENT KILLs"
    assert streams.errors["OutcomeUnknown"] + streams.errors["BackendError"] > 0
    summary.figures["client_kills"] += killed[0]
    _close_scenario(summary, "client-kill", figures, q, r)


# -- 4. a paused server ----------------------------------------------------------------


@pytest.mark.timeout(120)
def test_paused_server_raises_within_seconds_then_recovers(server: RedisServer, prefix: str,
                                                            summary: Summary) -> None:
    streams = Streams(server.url, prefix)
    q = streams.start()
    time.sleep(1.0)
    paused_at = time.monotonic()
    server.pause()  # SIGSTOP: connections stay open and nothing answers
    try:
        # longer than two socket timeouts: a client must give up on its own, not at the resume
        time.sleep(PAUSE)
    finally:
        server.resume()
    resumed_at = time.monotonic()
    time.sleep(2.0)
    streams.finish()
    workers = {f"P{i}" for i in range(streams.producers)} | {f"C{i}" for i in range(streams.consumers)}
    with streams.lock:
        ops = list(streams.ops)
    for w in sorted(workers):
        mine = [op for op in ops if op.worker == w]
        failed = [op for op in mine if op.outcome in ("BackendError", "OutcomeUnknown")
                  and op.end >= paused_at]
        assert failed, f"{w} raised no BackendError while the server was paused"
        first = min(op.end for op in failed) - paused_at
        # a call blocked when the pause began ends at its socket timeout; a get then tries to
        # give the consumer role back, which waits one more socket timeout: seconds, no hang
        limit = SOCKET_TIMEOUT + 1.5 if w.startswith("P") else 2 * SOCKET_TIMEOUT + 1.5
        assert first < limit, f"{w} first raised {first:.1f}s into the pause (limit {limit}s)"
        assert first < resumed_at - paused_at, f"{w} raised only when the server came back"
        during = [op for op in failed if op.start < resumed_at]
        longest = max(op.end - op.start for op in during)
        assert longest < 2 * SOCKET_TIMEOUT + 1.5, f"{w}: a call hung {longest:.1f}s"
        assert any(op.outcome == "ok" and op.start >= resumed_at for op in mine), \
            f"{w} never succeeded after the server resumed"
    r = redis.Redis.from_url(server.url)
    try:
        figures = streams.check(r, q)
    finally:
        summary.figures["lost_reliable"] += streams.lost
    assert_invariants(r, q)
    raised = sorted(min(op.end for op in ops if op.worker == w and op.end >= paused_at
                        and op.outcome in ("BackendError", "OutcomeUnknown")) - paused_at
                    for w in workers)
    summary.notes.append(f"pause: first BackendError per worker after {', '.join(f'{s:.1f}' for s in raised)} s "
                         f"(socket timeout {SOCKET_TIMEOUT:.0f} s, paused {resumed_at - paused_at:.1f} s)")
    summary.figures["pauses"] += 1
    _close_scenario(summary, "pause", figures, q, r)


# -- 5. recovery time of a dead waiting consumer ---------------------------------------


def _blocked_consumer(url: str, prefix: str, name: str, client_id: str) -> None:
    q: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix, client_id=client_id)
    q.get()  # waits forever (it is SIGKILLed)


def _get_in_thread(q: pressure.Queue[str], timeout: float) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(q.get(timeout=timeout))
        except BaseException as exc:  # noqa: BLE001 - examined by the caller
            result.append(exc)
        result.append(time.monotonic())

    t = threading.Thread(target=run, name="fault-get", daemon=True)
    t.start()
    return t, result


def _wait_for(predicate: Any, limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


@pytest.mark.timeout(120)
def test_recovery_of_a_sigkilled_waiting_consumer_on_this_host(
        server: RedisServer, prefix: str, children: dict[int, str], summary: Summary) -> None:
    """A consumer blocked on an empty queue holds the consumer role; SIGKILLed, it must
    not keep the queue: another consumer's get receives an item put after the kill
    within about one wait slice (1 s) plus the sweep interval (1 s)."""
    url, name = server.url, "recover"
    r = redis.Redis.from_url(url)
    q: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix)
    k = q.keys
    times: list[float] = []
    for rep in range(10):
        _no_threads()
        waiter = f"waiter-{rep}"
        pid = fork_child(_blocked_consumer, url, prefix, name, waiter)
        children[pid] = waiter
        _wait_for(lambda: is_waiter(r, q, waiter), 10, "the consumer to wait")
        assert r.llen(k.consumer_free) == 0  # it holds the consumer role
        other: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix)
        t, result = _get_in_thread(other, 15)
        time.sleep(random.uniform(0.1, 1.1))  # anywhere in the other consumer's wait slice
        killed_at = time.monotonic()
        kill_and_reap(pid)
        del children[pid]
        q.put(f"after kill {rep}")
        t.join(20)
        assert result and result[0] == f"after kill {rep}", f"repetition {rep}: {result}"
        times.append(result[1] - killed_at)
        assert not [c for c in r.hkeys(k.consumers) if c.startswith(f"{waiter}#".encode())], \
            "the dead consumer's record is still there"
        assert consumer_keys(r, q, waiter, "inbox") == consumer_keys(r, q, waiter, "inflight") == []
        assert_invariants(r, q)
        other.disconnect()
    summary.recovery["same host (SIGKILL)"] = times
    summary.figures["kills"] += len(times)
    summary.figures["waiter_kills"] += len(times)
    summary.figures["consumer_kills"] += len(times)
    summary.figures["items"] += len(times)
    assert median(times) < 2.0, f"recovery p50 {median(times):.2f}s: {times}"
    assert max(times) < 3.0, f"recovery max {max(times):.2f}s: {times}"
    summary.scenarios.append("recovery-same-host")
    q.disconnect()
    r.close()


#: lease of the simulated consumer on another host (ms); its record carries the same value,
#: as a real default-mode client's does (``Queue(lease=1.5)``: record ms = lease).
GHOST_LEASE_MS = 1500


def _register_ghost(q: pressure.Queue[str], ghost: str) -> None:
    """Register ``ghost`` as the waiter the way a blocking get does (get.lua 'block'),
    with a record naming another host, then never come back: a consumer on a host that died."""
    status = register_waiter(q, ghost, f"otherhost|1|1.0|{GHOST_LEASE_MS}|d", GHOST_LEASE_MS)
    assert status == -6, f"the ghost did not register as the waiter: {status}"


@pytest.mark.timeout(120)
def test_recovery_of_a_waiting_consumer_on_another_host(server: RedisServer, prefix: str,
                                                        summary: Summary) -> None:
    """A consumer on another host cannot be checked by pid: what it held comes back when
    its lease has passed, by a sweep. Two cases: an item put while its lease still runs (it
    is only woken: the item waits in the list, its wake-up in the ghost's inbox), and its
    consumer role alone, with a polling consumer."""
    url, name = server.url, "ghosts"
    r = redis.Redis.from_url(url)
    q: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix)
    k = q.keys
    lease = GHOST_LEASE_MS / 1000
    handed: list[float] = []
    for rep in range(3):
        ghost = f"ghost-a{rep}"
        other: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix)
        _register_ghost(q, ghost)
        died_at = time.monotonic()
        t, result = _get_in_thread(other, 15)
        q.put(f"handed {rep}")  # the lease still runs: the dead consumer is woken, nothing more
        assert r.lrange(k.inbox(ghost), 0, -1) == [b"s:"] and r.llen(k.base) == 1
        t.join(20)
        assert result and result[0] == f"handed {rep}", f"repetition {rep}: {result}"
        handed.append(result[1] - died_at)
        assert r.llen(k.inbox(ghost)) == 0
        assert_invariants(r, q)
        other.disconnect()
    polled: list[float] = []
    for rep in range(3):
        ghost = f"ghost-b{rep}"
        other = pressure.Queue(name, url=url, prefix=prefix)
        _register_ghost(q, ghost)
        died_at = time.monotonic()
        time.sleep(lease + 0.05)
        q.put(f"role {rep}")  # no lease, no wake-up: to the list; the role is still the ghost's
        assert r.get(k.waiter) == ghost.encode() and r.llen(k.base) == 1
        got = None
        deadline = time.monotonic() + 10
        while got is None:  # a consumer polling with short gets (each starts with a sweep)
            assert time.monotonic() < deadline, "the ghost's role never came back"
            try:
                got = other.get(timeout=0.2)
            except pressure.Empty:
                pass
        polled.append(time.monotonic() - died_at)
        assert got == f"role {rep}"
        assert r.get(k.waiter) != ghost.encode()
        assert_invariants(r, q)
        other.disconnect()
    summary.recovery["other host (put meanwhile, lease 1.5 s)"] = handed
    summary.recovery["other host (role, polling get)"] = polled
    summary.figures["items"] += len(handed) + len(polled)
    for times in (handed, polled):
        assert max(times) < lease + 1.5, f"recovery took {max(times):.2f}s, lease {lease}s: {times}"
    summary.scenarios.append("recovery-other-host")
    q.disconnect()
    r.close()


@pytest.mark.timeout(60)
def test_blocked_get_recovers_a_role_held_past_its_lease(server: RedisServer, prefix: str) -> None:
    url, name = server.url, "ghost-role"
    r = redis.Redis.from_url(url)
    q: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix)
    other: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix)
    try:
        _register_ghost(q, "ghost")
        died_at = time.monotonic()
        t, result = _get_in_thread(other, 6)  # one long get, started while the lease runs
        time.sleep(GHOST_LEASE_MS / 1000 + 0.1)
        q.put("x")  # to the list: the lease is gone, the role still held by the ghost
        t.join(20)
        assert result and result[0] == "x", f"got {result[0]!r} after {result[1] - died_at:.1f}s"
        assert result[1] - died_at < GHOST_LEASE_MS / 1000 + 1.5
    finally:
        q.repair()  # leave the server as it was found (the ghost's role back)
        other.disconnect()
        q.disconnect()
        r.close()


def _receive_then_wait(url: str, prefix: str, name: str, lease: float) -> None:
    q: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix, reliable=True, lease=lease,
                                            client_id="frozen")
    held = q.receive()  # received, never acknowledged (visibility timeout 30 s)
    redis.Redis.from_url(url).set(f"{prefix}-held", held.item)
    q.get()  # then waits on the empty queue, holding the consumer role, renewing its lease


@pytest.mark.timeout(60)
def test_a_frozen_waiters_unacknowledged_delivery_waits_for_its_visibility_timeout(
        server: RedisServer, prefix: str, children: dict[int, str]) -> None:
    url, name, lease = server.url, "frozen", 2.0
    r = redis.Redis.from_url(url)
    q: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix, reliable=True,
                                            client_id="observer")
    other: pressure.Queue[str] = pressure.Queue(name, url=url, prefix=prefix, reliable=True,
                                                client_id="other")
    try:
        q.put("held")
        _no_threads()
        pid = fork_child(_receive_then_wait, url, prefix, name, lease)
        children[pid] = "frozen"
        _wait_for(lambda: r.get(f"{prefix}-held") == b"held" and (r.get(q.keys.waiter) or b"").startswith(b"frozen#"),
                  10, "the consumer to receive, then wait")
        os.kill(pid, signal.SIGSTOP)  # frozen (GC pause, debugger, VM stall): alive, not dead
        time.sleep(lease + 0.5)
        assert exited_by_itself(pid) is None
        try:
            again = other.receive(timeout=2.0)
        except pressure.Empty:
            again = None
        assert again is None, (
            f"{again.item!r} delivered again (delivery {again.deliveries}) while the consumer "
            f"holding it is alive and its visibility timeout (30 s) has not passed")
    finally:
        other.disconnect()
        q.disconnect()
        r.close()

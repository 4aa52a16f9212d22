"""The docs' ACL rule (docs/pages/security.md, "ACL: the least a Redis user needs") is
enough: a user with only that rule runs every kind of call pressure makes
(tests/acl_workload.py), the rule names every command a script can call, and without one of
its commands calls fail with PermissionDenied."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import pressure
from pressure.testing import RedisServer

from . import acl_workload

PASSWORD = "acl-test-password"


#: The page that documents the rule: its ACL section.
SECURITY_PAGE = Path(__file__).parent.parent / "docs" / "pages" / "security.md"


def _acl_section() -> str:
    text = SECURITY_PAGE.read_text()
    return text.split("\n## ACL: the least a Redis user needs\n", 1)[1].split("\n## ", 1)[0]


def _documented_rule() -> tuple[str, list[str]]:
    """The ``ACL SETUSER`` line of the docs' ACL section, and its commands."""
    found = re.search(r"^ACL SETUSER pressure on >\S+ (.+)$", _acl_section(), re.MULTILINE)
    assert found, "docs/pages/security.md's ACL section has no 'ACL SETUSER pressure on >...' line"
    rule = found.group(1).split()
    return found.group(0), [r[1:] for r in rule if r.startswith("+")]


def _user(r: redis.Redis, prefix: str, without: str | None = None) -> str:
    _, commands = _documented_rule()
    r.acl_setuser("app", enabled=True, reset=True, passwords=[f"+{PASSWORD}"], keys=[f"{prefix}:*"],
                  reset_channels=True, commands=["-@all"] + [f"+{c}" for c in commands if c != without])
    return "app"


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    # a log long enough for every refusal of a test (Redis keeps 128 entries by default)
    with RedisServer(extra_args=("--acllog-max-len", "100000")) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _handles_leave_in_their_own_test() -> Iterator[None]:
    """Handles a test dropped leave (their consumers' departure, run when the collector takes
    them) before the next test gives 'app' its own rule, not in the middle of that test."""
    yield
    gc.collect()


def _refusals(admin: redis.Redis, prefix: str) -> list[dict[str, object]]:
    """The ACL LOG's entries of this test (``prefix``'s), less redis-py's own connection
    handshake: CLIENT SETINFO (Redis 7.2+, Valkey), which redis-py sends on each new connection
    and whose refusal it ignores; the docs say to allow it there (Redis 7.0 has no such
    subcommand, and refuses a rule that names it). A key outside ``prefix`` refused to 'app' is
    an earlier test's: its handles' last commands (a consumer's departure when the handle is
    collected) can come after the next test has given 'app' the keys of its own prefix."""
    return [e for e in admin.acl_log() if e["object"] != "client|setinfo"
            and (e["reason"] != "key" or str(e["object"]).startswith(f"{prefix}:"))]


def test_the_documented_rule_runs_everything(server: RedisServer, prefix: str) -> None:
    """Every kind of call, and not one refusal in the server's ACL LOG (a refused command
    whose failure pressure absorbs, as a posted one's, shows only there)."""
    admin = redis.Redis.from_url(server.url)
    admin.acl_log_reset()
    user = _user(admin, prefix)
    acl_workload.run(f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0", prefix)
    assert _refusals(admin, prefix) == []
    admin.close()


@pytest.mark.parametrize("command", ["evalsha", "blmove", "brpop", "script|load", "lpush", "xadd",
                                     "xread", "zadd", "time", "ping", "lset", "lpushx"])
def test_each_command_of_the_rule_is_needed(server: RedisServer, prefix: str, command: str) -> None:
    """Without it, a call fails with PermissionDenied, or (a command whose refusal pressure
    absorbs, as the PING behind posted commands) the server's ACL LOG shows it refused."""
    admin = redis.Redis.from_url(server.url)
    admin.acl_log_reset()
    # as on a new or restarted server: a script is loaded in the round trip of its first call,
    # so a call whose script another client loaded runs without SCRIPT LOAD
    admin.script_flush()
    user = _user(admin, prefix, without=command)
    try:
        acl_workload.run(f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0", prefix)
    except pressure.PermissionDenied:
        pass
    refused = {e["object"] for e in _refusals(admin, prefix) if e["reason"] == "command"}
    assert refused == {command}, refused
    admin.close()


def test_without_rename_a_batch_that_takes_the_whole_queue_is_copied(server: RedisServer,
                                                                     prefix: str) -> None:
    """A user set up by the rule before it named RENAME: get_many that empties the queue takes
    the copying way (items_take_all's RENAME is refused, changing nothing), same results."""
    admin = redis.Redis.from_url(server.url)
    admin.acl_log_reset()
    user = _user(admin, prefix, without="rename")
    q: pressure.Queue[int] = pressure.Queue("whole", url=f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0",
                                            prefix=prefix)
    try:
        q.put_many(range(5))
        assert q.get_many(10) == list(range(5))  # the whole queue
        q.put_many(range(5, 8))
        assert q.get_many(2) == [5, 6] and q.get_many(10) == [7]
        s = q.statistics()
        assert (s.produced_messages, s.consumed_messages, s.size) == (8, 8, 0)
        assert s.consumed_bytes == s.produced_bytes
        assert {e["object"] for e in _refusals(admin, prefix) if e["username"] == "app"} == {"rename"}
    finally:
        q.delete()
        q.disconnect()
        admin.close()


@pytest.mark.parametrize("without", ["rename", "lpushx", "multi"])
def test_without_a_command_of_the_native_moves_large_items_take_the_scripts_way(
        server: RedisServer, prefix: str, without: str) -> None:
    """A user whose rule predates the commands that move payloads natively (or has no MULTI):
    puts and gets of 4 KiB or more take the scripts' way, same results, and the one refusal is
    the probe's (Backend.transactions), or a script's RENAME (which it absorbs)."""
    admin = redis.Redis.from_url(server.url)
    admin.acl_log_reset()
    user = _user(admin, prefix, without=without)
    q: pressure.Queue[bytes] = pressure.Queue("large", url=f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0",
                                              prefix=prefix, serializer="bytes")
    try:
        items = [bytes([65 + i]) * 10_000 for i in range(6)]
        q.put(items[0])
        q.put_many(items[1:])
        assert [q.get(timeout=5) for _ in range(3)] + q.get_many(10) == items
        q.disconnect()  # its posted drop arrives (statistics() needs MULTI: read the keys)
        k = q.keys
        assert [int(admin.get(key) or 0) for key in (k.produced_messages, k.consumed_messages)] == [6, 6]
        assert admin.get(k.consumed_bytes) == admin.get(k.produced_bytes) and admin.llen(k.base) == 0
        assert {e["object"] for e in _refusals(admin, prefix) if e["username"] == "app"} == {without}
    finally:
        q.delete()
        q.disconnect()
        admin.close()


def test_the_rule_names_every_command_a_script_can_call() -> None:
    """Rare paths (a requeue of a dead consumer, a corrupt key's error) are in the scripts too."""
    _, commands = _documented_rule()
    lua = Path(pressure.__file__).parent / "lua"
    called = {m.lower() for f in lua.glob("*.lua")
              for m in re.findall(r"redis\.p?call\(\s*['\"]([A-Za-z]+)['\"]", f.read_text())}
    assert called and called <= set(commands), sorted(called - set(commands))


def test_the_rule_names_every_plain_command_pressure_sends() -> None:
    """Commands sent outside scripts (a worker's posted count of a task's start, a SCRIPT LOAD,
    the result thread's posted counts...) are checked by the ACL too. WAIT is sent only for
    ``durability=``, whose extra right the docs name."""
    rule, commands = _documented_rule()
    allowed = {c.split("|")[0] for c in commands} | {"evalsha"}
    package = Path(pressure.__file__).parent
    sent: set[str] = set()
    for f in package.rglob("*.py"):
        if f.relative_to(package).parts[0] in ("cli", "bench", "testing"):
            continue  # not what the rule is for: an operator's and a developer's tools
        text = f.read_text()
        for pattern in (r"pack_command\(\s*\"([A-Za-z]+)\"",  # sent as it is, or posted
                        r"\.call\(\s*\"([A-Z]+)\"",  # a redis-py call, e.g. ("XREAD", client.xread, ...)
                        r"\.command\(\s*\"[^\"]*\",\s*\"([A-Za-z]+)\""):  # pressure.aio's
            sent |= {m.lower() for m in re.findall(pattern, text)}
    assert {"incr", "script", "ping", "xread", "brpop"} <= sent  # the scan finds them
    assert sent - allowed == {"wait"}, sorted(sent - allowed)
    assert "`durability=` also needs `+wait`" in _acl_section()


def test_keys_outside_the_prefix_are_refused(server: RedisServer, prefix: str) -> None:
    admin = redis.Redis.from_url(server.url)
    user = _user(admin, prefix)
    with pytest.raises(pressure.PermissionDenied):
        pressure.Queue("x", url=f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0", prefix=prefix + "-other")
    admin.close()


# -- pressure worker under a user the ACL refuses -----------------------------------------------


def _worker(url: str, prefix: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pressure worker ex ...`` to its end (it must end on its own)."""
    root = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, "-m", "pressure", "worker", "ex", "--url", url, "--prefix", prefix,
                           *args], capture_output=True, text=True, timeout=60, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})


def test_a_worker_refused_its_keys_exits_1_in_one_line(server: RedisServer, prefix: str) -> None:
    """A user whose keys are another prefix's: the workers would retry forever; the command
    says why in one line (no password) and exits 1, before any worker process starts."""
    admin = redis.Redis.from_url(server.url)
    user = _user(admin, prefix + "-other")
    try:
        for create in ([], ["--create"]):
            out = _worker(f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0", prefix, "--processes", "1",
                          *create)
            assert out.returncode == 1, out.stderr
            lines = out.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("pressure worker: "), out.stderr
            assert "ACL" in lines[0] and PASSWORD not in out.stderr
    finally:
        admin.close()


def test_a_worker_process_refused_a_command_stops_the_whole_command(server: RedisServer, prefix: str) -> None:
    """A command only the worker processes send (BLMOVE: the wait for a task) refused: the
    process that meets it stops and is not replaced; the others stop, and the command exits 1
    saying why on its last line."""
    admin = redis.Redis.from_url(server.url)
    user = _user(admin, prefix, without="blmove")
    with pressure.Executor("ex", url=server.url, prefix=prefix, local_workers=False):
        pass  # the executor exists (its task queue outlives it)
    try:
        out = _worker(f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0", prefix, "--processes", "2")
        assert out.returncode == 1, out.stderr
        last = out.stderr.strip().splitlines()[-1]
        assert last.startswith("pressure worker: ") and "ACL" in last and "blmove" in last.lower(), out.stderr
        assert PASSWORD not in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert "starting another" not in out.stderr, out.stderr  # not replaced
    finally:
        admin.close()

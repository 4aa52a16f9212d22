"""Every ``pressure`` command's output on one fixed fixture, compared with a stored transcript
(tests/snapshots/cli.txt), so that any change of what a person sees shows up as a diff.

The fixture: a queue of each kind with known items (JSON, pickled, signed), delayed items, dead
letters, a closed queue, a queue with a malformed key, and an executor with queued tasks. What
varies from run to run is masked: the prefix, the server's port, clock times, ages and the
executor's and the clients' ids.

After an intended change of the output, write the transcript again and review its diff::

    PRESSURE_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_cli_snapshot.py
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure

from . import executor_tasks as tasks

REPO_ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "cli.txt"
KEY = "k" * 32

#: (arguments, extra environment) of each command, in the order they run: the ones that change
#: the queues come last
COMMANDS: list[tuple[list[str], dict[str, str]]] = [
    (["dead", "jobs"], {}),
    (["dead", "jobs", "--json"], {}),
    (["ls"], {}),
    (["ls", "--json"], {}),
    (["stat", "jobs", "--interval", "0"], {}),
    (["stat", "jobs", "--interval", "0", "--json"], {}),
    (["stat", "nope", "--interval", "0"], {}),
    (["watch", "--count", "1"], {}),
    (["watch", "jobs", "prio", "--count", "1"], {}),
    (["watch", "jobs", "nope", "--count", "1"], {}),
    (["peek", "jobs", "-n", "3"], {}),
    (["peek", "jobs", "-n", "3", "--serializer", "bytes"], {}),
    (["peek", "stack", "-n", "2"], {}),
    (["peek", "stack", "-n", "2", "--unpickle"], {}),
    (["peek", "prio", "-n", "2"], {}),
    (["peek", "signed"], {}),
    (["peek", "signed", "--unpickle"], {"PRESSURE_AUTHKEY": KEY}),
    (["executors"], {}),
    (["executors", "--json"], {}),
    (["serve-metrics", "--once"], {}),
    (["repair", "jobs"], {}),
    (["put", "stack", '"c"'], {}),
    (["put", "stack", '"c"', "--serializer", "pickle"], {}),
    (["put", "jobs", '{"id": 3}'], {}),
    (["get", "jobs"], {}),
    (["get", "stack"], {}),
    (["get", "stack", "--unpickle"], {}),
    (["dead", "jobs", "--kick", "1"], {}),
    (["dead", "jobs", "--purge", "--yes"], {}),
    (["close", "jobs"], {}),
    (["get", "done", "--timeout", "0"], {}),
    (["delete", "done", "--yes"], {}),
    (["--help"], {}),
]


@pytest.fixture
def fixture(url: str, prefix: str, r: redis.Redis) -> Iterator[None]:
    made: list[Any] = []

    def queue(cls: Any, name: str, maxsize: int | None = None, **kw: Any) -> Any:
        q = cls(name, maxsize, url=url, prefix=prefix, **kw)
        made.append(q)
        return q

    jobs = queue(pressure.Queue, "jobs", 10, serializer="json", reliable=True, max_deliveries=1)
    jobs.put_many([{"id": 1}, "dead one", "dead two", {"id": 2}, {"text": "caf\u00e9"}])
    jobs.put({"id": "later"}, delay=3600)
    jobs.get(timeout=1)
    jobs.task_done()  # {"id": 1}: done
    jobs.receive().release()  # delivered the most times: a dead letter
    jobs.receive().bury()
    stack = queue(pressure.LifoQueue, "stack")  # pickle, the default
    stack.put_many(["a", {"b": (1, 2)}])
    prio = queue(pressure.PriorityQueue, "prio", 5, serializer="json")
    prio.put_many([(3, "c"), (1, "a"), (2, "b")])
    queue(pressure.Queue, "signed", authkey=KEY).put({"s": 1})
    queue(pressure.Queue, "done", serializer="json").close()
    r.set(f"{prefix}:weird", "x")  # a malformed queue: its base is not a list
    r.set(f"{prefix}:weird:bound", "0")
    executor = pressure.Executor("crunch", url=url, prefix=prefix, local_workers=False)
    futures = [executor.submit(tasks.square, i) for i in range(3)]
    try:
        yield
    finally:
        for future in futures:
            future.cancel()
        executor.shutdown(wait=False, cancel_futures=True)
        for q in made:
            q.disconnect()


def _mask(text: str, url: str, prefix: str) -> str:
    port = url.rsplit(":", 1)[1].split("/")[0]
    text = text.replace(prefix, "PREFIX").replace(f"127.0.0.1:{port}", "127.0.0.1:PORT")
    text = re.sub(r"\b\d\d:\d\d:\d\d\b", "HH:MM:SS", text)
    text = re.sub(r"crunch:results:[0-9a-f]{12}", "crunch:results:" + "X" * 12, text)  # (as long: aligned)
    text = re.sub(r"\b[A-Za-z0-9_.-]+:\d+:\d+\b", "HOST:PID:TID", text)  # a client's id
    text = re.sub(r'"age": [0-9.e-]+', '"age": AGE', text)
    text = re.sub(r"(?m) +\d+s  (?=\S)", "  AGEs  ", text)  # the AGE column of dead
    return text


def _transcript(url: str, prefix: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "100"}
    for var in ("REDIS_URL", "REDIS_SERVER", "REDIS_PORT", "REDIS_DB", "PRESSURE_PREFIX", "PRESSURE_AUTHKEY"):
        env.pop(var, None)
    parts = []
    for args, extra in COMMANDS:
        out = subprocess.run([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, *args],
                             capture_output=True, text=True, timeout=60, env={**env, **extra}, cwd=REPO_ROOT,
                             input="")
        shown = " ".join(f"{k}=..." for k in extra) + (" " if extra else "")
        parts.append(f"$ {shown}pressure {' '.join(args)}\n{out.stdout}"
                     + (f"[stderr]\n{out.stderr}" if out.stderr else "")
                     + f"[exit {out.returncode}]\n")
    return _mask("\n".join(parts), url, prefix)


@pytest.mark.slow
def test_every_command_shows_what_the_snapshot_shows(fixture: None, url: str, prefix: str) -> None:
    pytest.importorskip("prometheus_client")  # serve-metrics is part of the transcript
    got = _transcript(url, prefix)
    if os.environ.get("PRESSURE_UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(got)
        pytest.skip(f"wrote {SNAPSHOT}")
    expected = SNAPSHOT.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), got.splitlines(True), "expected", "got"))
    assert got == expected, (f"the command's output changed (if on purpose: PRESSURE_UPDATE_SNAPSHOTS=1 "
                             f"writes {SNAPSHOT.name} again):\n{diff}")

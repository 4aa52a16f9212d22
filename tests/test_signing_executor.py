"""authkey= on the Executor and its workers (issue 15 item 1): a forged task, result or stored
initializer never reaches pickle.loads, and a worker without the key refuses to join."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
from pressure.keys import ExecutorKeys, QueueKeys

from . import executor_tasks as tasks
from .test_signing import KEY, _Boom

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_a_signed_executor_never_runs_a_forged_task_or_loads_a_forged_result(
        url: str, prefix: str, r: redis.Redis, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with pressure.Executor("signed-ex", url=url, prefix=prefix, max_workers=1, authkey=KEY) as ex:
        assert ex.submit(tasks.square, 3).result(timeout=60) == 9
        tasks_key = QueueKeys.build(prefix, ExecutorKeys.build(prefix, "signed-ex").tasks).base
        r.lpush(tasks_key, pickle.dumps(_Boom(marker)))  # what an attacker can do
        found: Any = r.keys(f"{prefix}:signed-ex:results:*:bound")
        results = [bytes(k).removesuffix(b":bound") for k in found]
        assert len(results) == 1, r.keys(f"{prefix}:*")
        r.lpush(results[0], pickle.dumps(_Boom(marker)))
        assert [f.result(timeout=60) for f in [ex.submit(tasks.square, i) for i in range(5)]] == [0, 1, 4, 9, 16]
    assert not marker.exists()


@pytest.mark.slow
def test_a_worker_without_the_key_refuses_to_join_and_one_with_it_runs_the_tasks(
        url: str, prefix: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PRESSURE_AUTHKEY", None)
    keyfile = tmp_path / "authkey"
    keyfile.write_bytes(KEY + b"\n")
    with pressure.Executor("joined", url=url, prefix=prefix, local_workers=False, authkey=KEY,
                           initializer=tasks.square, initargs=(1,)) as ex:
        future = ex.submit(tasks.square, 7)
        cmd = [sys.executable, "-m", "pressure", "worker", "joined", "--url", url, "--prefix", prefix,
               "--processes", "1"]
        keyless = subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            text = b""
            assert keyless.stderr is not None
            os.set_blocking(keyless.stderr.fileno(), False)
            while b"does not hold" not in text and time.monotonic() < deadline:
                text += keyless.stderr.read() or b""
                time.sleep(0.2)
            assert b"signs its tasks with a key this worker does not hold" in text, text.decode()
            assert not future.done()  # the task is still there, not dead-lettered
        finally:
            keyless.kill()
            keyless.wait()
            if keyless.stderr is not None:
                keyless.stderr.close()
        worker = subprocess.Popen([*cmd, "--authkey-file", str(keyfile)], env=env, cwd=REPO_ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            assert future.result(timeout=60) == 49
        finally:
            worker.terminate()
            worker.wait(30)

"""``pressure watch`` as a person uses it: in a real terminal (a tmux pane, on a tmux server of
its own), read from the screen (``capture-pane``), stopped with Ctrl-C (``send-keys``).

Skipped where tmux is not installed (``apt-get install -y tmux``)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import pressure

REPO_ROOT = Path(__file__).resolve().parent.parent
SOON = 30.0

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (apt-get install -y tmux)")


class Pane:
    """A command run by a shell in a 100x30 tmux pane, on a tmux server of its own. When the
    command ends the shell prints ``[exit <status>]`` below what it printed, as a prompt would
    follow it, and stays (so the screen can still be read)."""

    def __init__(self, command: list[str]) -> None:
        self.socket = f"pressure-test-{uuid.uuid4().hex[:8]}"
        env = f"PYTHONPATH={shlex.quote(str(REPO_ROOT))} TERM=xterm"
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "100", "-y", "30",
                  f"cd {shlex.quote(str(REPO_ROOT))} && env {env} {shlex.join(command)}; "
                  f"echo \"[exit $?]\"; sleep 600")

    def tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=SOON)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def screen(self) -> list[str]:
        return self.tmux("capture-pane", "-p", "-t", "t").splitlines()

    def wait_for(self, check: Callable[[list[str]], bool], what: str) -> list[str]:
        deadline = time.monotonic() + SOON
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            assert time.monotonic() < deadline, f"no {what} on the screen:\n" + "\n".join(screen)
            time.sleep(0.1)

    def exit_status(self) -> tuple[str, list[str]]:
        """Once the command has ended: its exit status, and the screen then."""
        screen = self.wait_for(lambda s: any(line.startswith("[exit ") for line in s), "end of the command")
        (status,) = [line[len("[exit "):-1] for line in screen if line.startswith("[exit ")]
        return status, screen

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=SOON)


@pytest.fixture
def pane() -> Iterator[Callable[..., Pane]]:
    panes: list[Pane] = []

    def start(command: list[str]) -> Pane:
        panes.append(Pane(command))
        return panes[-1]

    yield start
    for p in panes:
        p.close()


def _row(screen: list[str], name: str) -> list[str]:
    rows = [line.split() for line in screen if line.split()[:1] == [name]]
    return rows[0] if rows else []


def test_watch_redraws_in_place_in_a_terminal_and_ends_on_ctrl_c(
        pane: Callable[..., Pane], url: str, prefix: str) -> None:
    jobs: pressure.Queue[Any] = pressure.Queue("jobs", 10, url=url, prefix=prefix)
    jobs.put_many([1, 2])
    jobs.put(3, delay=600)
    try:
        p = pane([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, "watch", "jobs",
                  "--interval", "0.3"])
        first = p.wait_for(lambda s: bool(_row(s, "jobs")), "frame")
        assert first[0].startswith(f"pressure  prefix '{prefix}' on ")  # at the top: the screen was cleared
        header = next(line for line in first if line.startswith("NAME"))
        assert header.split() == ["NAME", "KIND", "SIZE", "DELAYED", "BOUND", "FILL", "PUT/S", "GET/S", "IN",
                                  "FLIGHT", "DEAD"]
        row = _row(first, "jobs")
        assert row[:6] == ["jobs", "fifo", "2", "1", "10", "[####----------------]"]
        # later frames: rates, and what changes meanwhile
        jobs.put_many([4, 5, 6])
        screen = p.wait_for(lambda s: _row(s, "jobs")[2:3] == ["5"], "new size")
        row = _row(screen, "jobs")
        assert row[6] != "-" and float(row[6]) >= 0 and float(row[7]) == 0.0
        assert sum(line.startswith("NAME") for line in screen) == 1  # redrawn in place, not scrolled
        assert screen[0].startswith("pressure  ")
        p.tmux("send-keys", "-t", "t", "C-c")
        status, screen = p.exit_status()
        assert status == "0", screen
        assert not any("Traceback" in line or "KeyboardInterrupt" in line for line in screen)
    finally:
        jobs.delete()
        jobs.disconnect()


def test_watch_of_a_queue_that_does_not_exist_says_so_in_the_terminal(
        pane: Callable[..., Pane], url: str, prefix: str) -> None:
    p = pane([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, "watch", "nope"])
    status, screen = p.exit_status()
    assert status == "1"
    lines = [line for line in screen if line.strip()]
    assert lines[0].startswith("Error: queue 'nope' does not exist") and lines[1] == "[exit 1]", lines

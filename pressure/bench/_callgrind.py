"""A private redis-server run under valgrind's callgrind, for ``--server-cost-instructions``:
what the server executes, counted in instructions rather than timed.

``INFO cpu`` on a shared machine moves with everything else the machine does (the raw
baseline alone has read 22-32 µs per message between runs of the same code). Instruction
counts repeat within about 1-3% (the rest is the server's timers, which fire by wall time),
so a change of a few percent in what a script costs shows. The kernel's share of a request
(the same for pressure and raw: it is why the CPU ratio is far lower than this one) is not
in them. The server runs some 50 times slower under valgrind: use a few thousand messages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Self

from ..testing import RedisServer, ServerUnavailable

__all__ = ["CallgrindCounter", "CallgrindRedis", "callgrind_tools"]


def callgrind_tools() -> tuple[str, str]:
    """The paths of ``valgrind`` and ``callgrind_control`` (ServerUnavailable without them)."""
    valgrind, control = shutil.which("valgrind"), shutil.which("callgrind_control")
    if not valgrind or not control:
        raise ServerUnavailable("--server-cost-instructions needs valgrind (apt-get install valgrind)")
    return valgrind, control


class CallgrindCounter:
    """The counters of a process run under callgrind, writing to ``out``: ``zero()`` then
    ``count()`` gives the instructions it executed in between (all its threads)."""

    def __init__(self, control: str, pid: int, out: str) -> None:
        self._control, self.pid, self._out = control, pid, out
        self._dumps = 0

    def _ask(self, *args: str) -> None:
        subprocess.run([self._control, *args, str(self.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)

    def zero(self) -> None:
        """Start counting from here."""
        self._ask("-z")

    def count(self) -> int:
        """The instructions executed since ``zero()`` (a dump of the counters, read and removed)."""
        self._ask("-d")
        self._dumps += 1
        dump = Path(f"{self._out}.{self._dumps}")
        try:
            for line in dump.read_text("utf-8").splitlines():
                if line.startswith("summary:"):
                    return int(line.split()[1])
        finally:
            dump.unlink(missing_ok=True)
        raise ServerUnavailable(f"callgrind wrote no summary to {dump}")


class CallgrindRedis(RedisServer):
    """A private redis-server under ``valgrind --tool=callgrind``: ``zero()`` then ``count()``
    gives the instructions it executed in between (all threads; commands run on one)."""

    def __init__(self) -> None:
        self._valgrind, self._control = callgrind_tools()
        super().__init__()
        self._counter: CallgrindCounter | None = None

    def _command(self) -> list[str]:
        return [self._valgrind, "--tool=callgrind", "--compress-strings=no",
                f"--callgrind-out-file={self._out}", *super()._command()]

    @property
    def _out(self) -> str:
        return os.path.join(self.dir, "callgrind.out")

    def start(self, timeout: float = 120.0, *, wait_loaded: bool = True) -> Self:
        super().start(timeout, wait_loaded=wait_loaded)
        return self

    def __enter__(self) -> Self:
        return self.start()

    def _counting(self) -> CallgrindCounter:
        assert self.process is not None
        if self._counter is None or self._counter.pid != self.process.pid:  # (its dumps are numbered per process)
            self._counter = CallgrindCounter(self._control, self.process.pid, self._out)
        return self._counter

    def zero(self) -> None:
        """Start counting from here."""
        self._counting().zero()

    def count(self) -> int:
        """The instructions executed since ``zero()`` (a dump of the counters, read and removed)."""
        return self._counting().count()

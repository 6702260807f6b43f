"""TCP servers on the host's loopback for the loopback relay tests: one that answers a
digest of what it read, one that holds every connection open."""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading


class Digest:
    """A TCP server on ``host``: reads a request until the client half-closes, then
    answers with the request's length and sha256 (needs the half-close to answer).

    Attributes:
        port: its port. accepted: connections accepted so far.
    """

    def __init__(self, host: str) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.guard: socket.socket | None = None
        for _ in range(50):
            self.sock = socket.create_server((host, 0), family=family)
            self.port: int = self.sock.getsockname()[1]
            if family == socket.AF_INET or self._guard_ipv4():
                break
            self.sock.close()
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _guard_ipv4(self) -> bool:
        # The relay tries the host's 127.0.0.1:PORT before [::1]:PORT (as documented):
        # another process listening on 127.0.0.1 at the same number (CI saw one) would
        # answer instead. Bound, not listening, this port refuses there.
        guard = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            guard.bind(("127.0.0.1", self.port))
        except OSError:
            guard.close()
            return False
        self.guard = guard
        return True

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                data = b""
                while chunk := conn.recv(1 << 16):
                    data += chunk
                conn.sendall(f"{len(data)} {hashlib.sha256(data).hexdigest()}".encode())

    def close(self) -> None:
        """Stop listening."""
        self.sock.close()
        if self.guard is not None:
            self.guard.close()


class Hold:
    """A TCP server on 127.0.0.1 that sends ``hi`` on each connection and keeps its side
    open until the peer closes (a service that never ends a connection itself).

    Attributes:
        port: its port. accepted: connections accepted so far.
    """

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._serve, name="test-hold-accept", daemon=True).start()

    def open_count(self) -> int:
        """Connections accepted whose peer has not closed yet."""
        with self._lock:
            return len(self._open)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                self._open.add(conn)
            threading.Thread(target=self._hold, args=(conn,), name="test-hold", daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(b"hi")
            while conn.recv(1 << 16):
                pass
        with self._lock:
            self._open.discard(conn)
        conn.close()

    def close(self) -> None:
        """Stop listening and close what is still open."""
        self.sock.close()
        with self._lock:
            for conn in self._open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

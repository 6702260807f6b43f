"""Minimal threaded HTTP/1.1 server on loopback, the plumbing of agentkit.testing.

Hand-rolled on ``socketserver`` rather than ``http.server`` because it is on the hot
path of every engine test and benchmark: request heads are parsed with a few
``readline`` calls (no email parser), replies go out in one ``sendall``, sockets
get TCP_NODELAY (without it each reply stalls ~40 ms on Linux), and connections
are kept alive so clients reuse them. Streamed replies use chunked transfer
encoding, so a deliberate mid-stream disconnect looks to the client like a real
"incomplete chunked read".
"""

from __future__ import annotations

import contextlib
import http
import selectors
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable
from typing import Any

MAX_LINE = 65_536
MAX_BODY = 256 * 1024 * 1024


class Disconnect:
    """Marker in a stream's pieces: drop the connection here without finishing the body."""


class Pause:
    """Marker in a stream's pieces: wait ``seconds`` before sending the next piece."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class Exchange:
    """One HTTP request and the means to answer it (used by the app callable)."""

    __slots__ = ("method", "path", "headers", "body", "_sock", "_stopping", "answered")

    def __init__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        sock: socket.socket,
        stopping: threading.Event,
    ) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self._sock = sock
        self._stopping = stopping
        self.answered = False

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the server stops first; True when it is stopping."""
        return seconds > 0 and self._stopping.wait(seconds)

    def send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        """Send a complete reply with Content-Length."""
        head = _head(status, headers, {"content-length": str(len(body))})
        self._sock.sendall(head + body)
        self.answered = True

    def send_stream(self, status: int, headers: dict[str, str], pieces: Iterable[Any]) -> bool:
        """Send a chunked reply from ``pieces`` (bytes, Pause or Disconnect).

        Consecutive bytes go out as one HTTP chunk in one write (fewer reads for the
        client; SSE framing does not depend on chunk boundaries). Returns False when
        the connection was dropped on purpose (the caller must not reuse it).
        """
        self.answered = True
        head = _head(status, headers, {"transfer-encoding": "chunked"})
        pending: list[bytes] = []

        def flush(end: bytes = b"") -> None:
            nonlocal head
            data = b"".join(pending)
            pending.clear()
            framed = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
            self._sock.sendall(head + framed + end)
            head = b""

        for piece in pieces:
            if isinstance(piece, (bytes, bytearray)):
                pending.append(bytes(piece))
                continue
            flush()
            if isinstance(piece, Disconnect):
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)
                return False
            if isinstance(piece, Pause) and self.wait(piece.seconds):
                return False
        flush(b"0\r\n\r\n")
        return True


def _head(status: int, headers: dict[str, str], framing: dict[str, str]) -> bytes:
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {status} {reason}"]
    for key, value in headers.items():
        if key.lower() not in ("content-length", "transfer-encoding", "connection"):
            lines.append(f"{key}: {value}")
    for key, value in framing.items():
        lines.append(f"{key}: {value}")
    lines.append("connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


App = Callable[[Exchange], bool]


class _Handler(socketserver.StreamRequestHandler):
    server: LoopbackServer

    def handle(self) -> None:
        server = self.server
        with server.lock:
            server.connections.add(self.connection)
        try:
            while not server.stopping.is_set():
                exchange = self._read_request()
                if exchange is None:
                    return
                keep = server.app(exchange)
                if not keep or exchange.headers.get("connection", "").lower() == "close":
                    return
        except (OSError, ValueError):
            return  # client went away or sent garbage: drop the connection
        finally:
            with server.lock:
                server.connections.discard(self.connection)

    def _read_request(self) -> Exchange | None:
        line = self.rfile.readline(MAX_LINE)
        while line in (b"\r\n", b"\n"):
            line = self.rfile.readline(MAX_LINE)
        if not line:
            return None
        method, target, _version = line.decode("latin-1").split(None, 2)
        headers: dict[str, str] = {}
        while True:
            raw = self.rfile.readline(MAX_LINE)
            if raw in (b"\r\n", b"\n", b""):
                break
            key, _, value = raw.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        if headers.get("expect", "").lower() == "100-continue":
            self.connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = self._read_chunked()
        else:
            length = int(headers.get("content-length") or 0)
            if length > MAX_BODY:
                raise ValueError("request body too large")
            body = self.rfile.read(length) if length else b""
        path = target.split("?", 1)[0]
        return Exchange(method, path, headers, body, self.connection, self.server.stopping)

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self.rfile.readline(MAX_LINE).split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(MAX_LINE) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline(MAX_LINE)


class LoopbackServer(socketserver.ThreadingTCPServer):
    """A threaded TCP server on 127.0.0.1 that hands each request to ``app``."""

    daemon_threads = True  # a stuck handler must never keep the interpreter alive
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, app: App, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.connections: set[socket.socket] = set()
        self.threads: set[threading.Thread] = set()
        self.stopping = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        super().__init__((host, port), _Handler)

    def serve(self) -> None:
        """Accept connections until :meth:`wake` is called (each served by a thread)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self.stopping.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r:
                        return
                    self.handle_request()  # the socket is ready: accepts without waiting

    def wake(self) -> None:
        """Make :meth:`serve` return now (no polling delay)."""
        self.stopping.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._wake_r.close()
        self._wake_w.close()

    def process_request(self, request: Any, client_address: Any) -> None:
        # Registered before it starts and kept until stop joins it: a thread that had
        # not run yet, or was still finishing, could otherwise outlive close_connections.
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self.lock:
            self.threads = {t for t in self.threads if t.is_alive()}
            self.threads.add(thread)
        thread.start()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # connection-level noise (resets) is expected in robustness tests

    def close_connections(self, timeout: float = 5.0) -> None:
        """Wake every handler blocked on a keep-alive read and wait for its thread to end."""
        self.stopping.set()
        with self.lock:
            conns = list(self.connections)
            threads = list(self.threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

"""The host side of ``command_network = loopback`` (the design: :mod:`agentkit.process.sandbox`).

One relay per loopback command (:func:`start_relay`): a Unix socket (``relay.sock``) in
a private folder of its own (:func:`agentkit.process.loopback.folders.command_folder`:
mode 0700, only this user reaches it), which also holds ``bridge.py``, a copy of
:mod:`agentkit.process.loopback.bridge` (the sandbox sees this folder only, so the bridge
runs from there whatever the install).

What it enforces, whatever the command writes to the socket:

* Each connection starts with a header line, the canonical decimal of a port in the
  relay's list (exactly the ports given to the command's bridge: those listening on the
  host's loopback when the command started): ``80\\n``, never ``080\\n``, ``+80\\n`` or a
  port off the list. Anything else, or no full line within 10 s: the connection is
  closed. The relay then connects to ``127.0.0.1:PORT`` (else ``[::1]:PORT``), the only
  two addresses it ever connects to, and relays bytes both ways, half-closes included,
  until both directions have ended.
* At most :data:`MAX_CONNECTIONS` connections at once (beyond that a new connection is
  closed at once), of which at most :data:`MAX_PENDING` still wait for their header
  (while they do, new connections wait in the kernel's listen queue, itself bounded).
  So a command costs the agent at most 2 × 64 descriptors and one thread.
* :meth:`Relay.close` (run_command calls it when the command ends; the relay also closes
  itself when the process it watches, the command's bubblewrap, exits: that is when a
  namespace kept for background services ends) closes every connection, both sides,
  the socket and the folder: nothing of the command's outlives it.

One thread per relay serves everything with a selector (no thread per connection).

Public API: :func:`start_relay`, :class:`Relay`, :func:`header_port`, :data:`SOCKET_NAME`,
:data:`BRIDGE_NAME`, :data:`MAX_CONNECTIONS`, :data:`MAX_PENDING`.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import selectors
import shutil
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from agentkit.process.loopback import bridge as _loopback_bridge
from agentkit.process.loopback.folders import command_folder

__all__ = [
    "BRIDGE_NAME",
    "MAX_CONNECTIONS",
    "MAX_PENDING",
    "SOCKET_NAME",
    "Relay",
    "header_port",
    "start_relay",
]

SOCKET_NAME = "relay.sock"
BRIDGE_NAME = "bridge.py"
MAX_CONNECTIONS = 64
MAX_PENDING = 16
_HEADER_SECONDS = 10.0
_CONNECT_SECONDS = 5.0
_HEADER_MAX = 6  # "65535\n"
_CHUNK = 1 << 16
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class _Link:
    """One command connection: its header, then the host connection and two buffers."""

    def __init__(self, client: socket.socket, deadline: float) -> None:
        self.client = client
        self.target: socket.socket | None = None
        self.deadline = deadline  # of the header, then of the connect; inf once spliced
        self.header = b""
        self.port = 0
        self.hosts = ["127.0.0.1", "::1"]
        self.up = bytearray()  # client -> target, not yet sent
        self.down = bytearray()  # target -> client, not yet sent
        self.up_eof = self.down_eof = False  # the source sent EOF
        self.up_shut = self.down_shut = False  # the EOF was passed on

    @property
    def stage(self) -> str:
        if self.target is None:
            return "header"
        return "connect" if self.deadline != math.inf else "splice"


class Relay:
    """A running relay for one command (see the module docstring); made by
    :func:`start_relay`.

    Attributes:
        folder: the private folder holding :data:`SOCKET_NAME` and :data:`BRIDGE_NAME`
            (bind-mounted into the sandbox); removed by :meth:`close`.
        ports: the ports a header may name.
    """

    def __init__(self, folder: Path, ports: frozenset[int], server: socket.socket) -> None:
        self.folder = folder
        self.ports = ports
        self._server = server
        self._wake_r, self._wake_w = socket.socketpair()
        self._pidfd: int | None = None  # opened by watch(), registered by the loop
        self._pidfd_lock = threading.Lock()
        self._closing = threading.Event()
        self._links: set[_Link] = set()
        self._sel = selectors.DefaultSelector()
        self._sel.register(server, _READ, None)
        self._sel.register(self._wake_r, _READ, None)
        self._thread = threading.Thread(target=self._loop, name="agentkit-loopback-relay", daemon=True)  # fmt: skip
        self._thread.start()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran or the relay closed itself."""
        return not self._thread.is_alive()

    def connections(self) -> int:
        """How many command connections are open now (a snapshot)."""
        return len(self._links)

    def watch(self, pid: int) -> None:
        """Close the relay when process ``pid`` (a child of this process, not yet reaped)
        exits. Where pidfds are missing (Linux before 5.3) only :meth:`close` ends it."""
        try:
            fd = os.pidfd_open(pid)  # now, in the caller's thread: the pid cannot be reused yet
        except ProcessLookupError:  # already gone
            self.close()
            return
        except (OSError, AttributeError):
            return
        with self._pidfd_lock:
            if self._pidfd is not None or self._closing.is_set():
                os.close(fd)
                return
            self._pidfd = fd
        self._wake()

    def close(self) -> None:
        """Close every connection (both sides), the socket, and remove the folder; wait
        for the relay's thread to end. Idempotent; safe from any thread."""
        self._closing.set()
        self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the loop (the relay's thread only) --------------------------------------------

    def _loop(self) -> None:
        watched = False
        try:
            while not self._closing.is_set():
                now = time.monotonic()
                soonest = min((link.deadline for link in self._links), default=math.inf)
                events = self._sel.select(None if soonest == math.inf else max(0.0, soonest - now))
                for key, mask in events:
                    if key.fileobj is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(64)
                        if self._pidfd is not None and not watched:
                            self._sel.register(self._pidfd, _READ, "pidfd")
                            watched = True
                    elif key.fileobj is self._server:
                        self._accept()
                    elif isinstance(key.data, _Link):
                        self._step(key.data, key.fileobj is key.data.client, mask)
                    elif key.data == "pidfd":
                        return
                self._expire(time.monotonic())
                self._pace()
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        for link in list(self._links):
            self._drop(link)
        self._sel.close()
        for sock in (self._server, self._wake_r, self._wake_w):
            sock.close()
        with self._pidfd_lock:
            self._closing.set()
            if self._pidfd is not None:
                os.close(self._pidfd)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _pending(self) -> int:
        return sum(1 for link in self._links if link.stage == "header")

    def _accept(self) -> None:
        while self._pending() < MAX_PENDING:
            try:
                conn, _ = self._server.accept()
            except OSError:  # nothing more waiting (or a connection aborted meanwhile)
                return
            if len(self._links) >= MAX_CONNECTIONS:
                conn.close()  # a clear end rather than a wait that may never end
                continue
            conn.setblocking(False)
            link = _Link(conn, time.monotonic() + _HEADER_SECONDS)
            self._links.add(link)
            self._sel.register(conn, _READ, link)

    def _pace(self) -> None:
        """Accept only while fewer than MAX_PENDING wait for their header: the others
        wait in the kernel's queue (bounded by the listen backlog), costing us nothing."""
        listening = self._server in self._sel.get_map()
        if self._pending() < MAX_PENDING and not listening:
            self._sel.register(self._server, _READ, None)
        elif self._pending() >= MAX_PENDING and listening:
            self._sel.unregister(self._server)

    def _expire(self, now: float) -> None:
        for link in [link for link in self._links if link.deadline <= now]:
            if link.stage == "connect":
                self._connect(link)  # the next address, or the end
            else:
                self._drop(link)

    def _drop(self, link: _Link) -> None:
        self._links.discard(link)
        for sock in (link.client, link.target):
            if sock is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(sock)
            sock.close()

    def _step(self, link: _Link, client_side: bool, mask: int) -> None:
        try:
            if link.stage == "header":
                self._read_header(link)
            elif link.stage == "connect":
                self._connected(link)
            else:
                self._splice(link, client_side, mask)
        except OSError:
            self._drop(link)

    def _read_header(self, link: _Link) -> None:
        data = link.client.recv(_CHUNK)
        line, newline, rest = (link.header + data).partition(b"\n")
        if not data or (not newline and len(line) >= _HEADER_MAX):
            self._drop(link)
            return
        if not newline:
            link.header = line
            return
        port = header_port(line, self.ports)
        if port is None:
            self._drop(link)
            return
        link.port = port
        link.up += rest
        self._sel.unregister(link.client)
        self._connect(link)

    def _connect(self, link: _Link) -> None:
        """Start a connection to the next loopback address; drop the link when none is left."""
        if link.target is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(link.target)
            link.target.close()
            link.target = None
        while link.hosts:
            host = link.hosts.pop(0)
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            try:
                target = socket.socket(family, socket.SOCK_STREAM)
            except OSError:
                continue
            target.setblocking(False)
            code = target.connect_ex((host, link.port))
            if code in (0, errno.EINPROGRESS):
                link.target = target
                link.deadline = time.monotonic() + _CONNECT_SECONDS
                self._sel.register(target, _WRITE, link)
                return
            target.close()
        self._drop(link)  # nothing listens there now: the command sees the connection end

    def _connected(self, link: _Link) -> None:
        assert link.target is not None
        if link.target.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            self._connect(link)
            return
        link.deadline = math.inf
        self._sel.unregister(link.target)
        self._interest(link)

    def _splice(self, link: _Link, client_side: bool, mask: int) -> None:
        assert link.target is not None
        # Each side reads into its own inbox and writes the other side's.
        sock = link.client if client_side else link.target
        inbox, outbox = (link.up, link.down) if client_side else (link.down, link.up)
        with contextlib.suppress(BlockingIOError, InterruptedError):
            if mask & _READ:
                data = sock.recv(_CHUNK)
                inbox += data
                if not data and client_side:
                    link.up_eof = True
                elif not data:
                    link.down_eof = True
            if mask & _WRITE and outbox:
                del outbox[: sock.send(outbox)]
        if link.up_eof and not link.up and not link.up_shut:
            link.target.shutdown(socket.SHUT_WR)  # pass the EOF on: the answer may still come
            link.up_shut = True
        if link.down_eof and not link.down and not link.down_shut:
            link.client.shutdown(socket.SHUT_WR)
            link.down_shut = True
        if link.up_shut and link.down_shut:
            self._drop(link)
        else:
            self._interest(link)

    def _interest(self, link: _Link) -> None:
        """Register each side for what it can do now: read while its buffer is empty
        (at most one chunk in flight per direction), write while the other's is not."""
        assert link.target is not None
        for sock, inbox, eof, outbox in ((link.client, link.up, link.up_eof, link.down),
                                         (link.target, link.down, link.down_eof, link.up)):  # fmt: skip
            events = (_READ if not eof and not inbox else 0) | (_WRITE if outbox else 0)
            try:
                registered = self._sel.get_key(sock).events
            except KeyError:
                registered = 0
            if events == registered:
                continue
            if not events:
                self._sel.unregister(sock)
            elif not registered:
                self._sel.register(sock, events, link)
            else:
                self._sel.modify(sock, events, link)


def header_port(line: bytes, ports: frozenset[int]) -> int | None:
    """Return the port a header line (without its newline) names when it is the
    canonical decimal of one of ``ports`` (no sign, space, or leading zero), else None."""
    if not line.isdigit() or len(line) >= _HEADER_MAX:  # bytes.isdigit: ASCII digits only
        return None
    port = int(line)
    return port if port in ports and str(port).encode() == line else None


def start_relay(ports: Iterable[int]) -> Relay:
    """Start a relay for one command that may reach the host's loopback ``ports`` (the
    ports given to its bridge). Returns the :class:`Relay`; the caller must
    :meth:`~Relay.close` it when the command ends. Raises OSError when the folder or
    socket cannot be made."""
    folder = command_folder()
    try:
        shutil.copyfile(_loopback_bridge.__file__, folder / BRIDGE_NAME)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.bind(str(folder / SOCKET_NAME))
            server.listen(MAX_CONNECTIONS)
            server.setblocking(False)
        except OSError:
            server.close()
            raise
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Relay(folder, frozenset(p for p in ports if 0 < p < 65536), server)

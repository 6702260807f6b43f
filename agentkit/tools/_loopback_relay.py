"""The host side of ``command_network = loopback`` (the design: :mod:`agentkit.tools._sandbox`).

One relay per agent process, started on first need: a Unix socket server
(``relay.sock``) in a private folder (``mkdtemp``: mode 0700, so only this user reaches
it), served by a daemon thread, closed and removed at exit (a multiprocessing worker's
too). Each connection starts with
a header line, a TCP port in decimal (1-65535; anything else, or nothing within 10 s:
the connection is closed); the relay connects to ``127.0.0.1:PORT`` (else ``[::1]:PORT``)
and relays bytes both ways, half-closes included, until both sides are done. It only
ever connects to those two loopback addresses.

The folder also holds ``bridge.py``, a copy of :mod:`agentkit.tools._loopback_bridge`:
the sandbox sees this folder only, so the bridge runs from there whatever the install.

Public API: :func:`relay_folder`, :data:`SOCKET_NAME`, :data:`BRIDGE_NAME`.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing.util
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

from agentkit.tools import _loopback_bridge
from agentkit.tools._loopback_bridge import splice

__all__ = ["BRIDGE_NAME", "SOCKET_NAME", "relay_folder"]

SOCKET_NAME = "relay.sock"
BRIDGE_NAME = "bridge.py"
_HEADER_SECONDS = 10.0
_CONNECT_SECONDS = 5.0

_lock = threading.Lock()
_running: tuple[int, Path, socket.socket] | None = None  # (pid, folder, server)


def relay_folder() -> Path:
    """Return the relay's private folder (holding :data:`SOCKET_NAME` and
    :data:`BRIDGE_NAME`), starting the relay on the first call in this process (a forked
    child starts its own). Raises OSError when the folder or socket cannot be made."""
    global _running
    with _lock:
        if _running is not None and _running[0] == os.getpid():
            return _running[1]
        folder = Path(tempfile.mkdtemp(prefix="agentkit-loopback-"))
        try:
            shutil.copyfile(_loopback_bridge.__file__, folder / BRIDGE_NAME)
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(str(folder / SOCKET_NAME))
            server.listen(64)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        threading.Thread(
            target=_accept, args=(server,), name="agentkit-loopback-relay", daemon=True
        ).start()
        atexit.register(_close, server, folder)
        # A multiprocessing worker (a sub-agent) ends with os._exit: no atexit there.
        multiprocessing.util.Finalize(None, _close, args=(server, folder), exitpriority=0)
        _running = (os.getpid(), folder, server)
        return folder


def _close(server: socket.socket, folder: Path) -> None:
    with contextlib.suppress(OSError):
        server.close()
    shutil.rmtree(folder, ignore_errors=True)


def _accept(server: socket.socket) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:  # closed at exit
            return
        threading.Thread(target=_handle, args=(conn,), daemon=True).start()


def _read_port(conn: socket.socket) -> int | None:
    """The header's port, or None when it is not a line holding 1-65535."""
    conn.settimeout(_HEADER_SECONDS)
    line = b""
    while not line.endswith(b"\n"):
        byte = conn.recv(1)
        if not byte or len(line) > 6:
            return None
        line += byte
    digits = line[:-1]
    if not digits.isdigit() or not 0 < int(digits) < 65536:
        return None
    conn.settimeout(None)
    return int(digits)


def _handle(conn: socket.socket) -> None:
    try:
        port = _read_port(conn)
    except OSError:
        port = None
    if port is None:
        conn.close()
        return
    for host in ("127.0.0.1", "::1"):  # loopback only, whatever the peer asks
        try:
            target = socket.create_connection((host, port), timeout=_CONNECT_SECONDS)
        except OSError:
            continue
        target.settimeout(None)
        splice(conn, target)
        return
    conn.close()  # nothing listens there now: the command sees the connection end

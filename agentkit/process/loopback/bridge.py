"""The sandbox side of ``command_network = loopback`` (the design: :mod:`agentkit.process.sandbox`).

Run as pid 1 of a command's sandbox, inside its private network namespace::

    python -I -S bridge.py RELAY_SOCKET PORT... -- PROGRAM ARG...

It binds ``127.0.0.1:PORT`` (and ``[::1]:PORT`` where the namespace has IPv6) for each
PORT, forks a child that serves them, and the parent then execs PROGRAM (the namespace
init), so the command starts only once every port is bound: no race. A port it cannot
bind is skipped. Each connection accepted is passed, after a header line ``PORT\\n``,
to the Unix socket RELAY_SOCKET, whose server in the agent
(:mod:`agentkit.process.loopback.relay`, one per command, knowing exactly these PORTs)
connects it to the host's ``127.0.0.1:PORT``. The relay enforces the limits (ports,
connection cap, the end with the command); this bridge is inside the sandbox, so the
command could replace it anyway.
The child dies with the namespace (when the init exits, the kernel kills the rest).

Standard library only: it runs from a copy in the relay's folder (the one folder of the
agent's the sandbox sees), with the agent's Python and no site-packages. The path to the
exec is on every command's start, so it uses the C modules ``_socket`` and ``_signal``
(``socket`` and ``signal`` import ``enum``: 8 ms of a 15 ms start); the server child
imports the rest.

Public API: :func:`splice`, :func:`main`.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]
import _socket
import os
import sys

__all__ = ["splice", "main"]


def _copy(src: _socket.socket, dst: _socket.socket) -> None:
    """Copy ``src`` to ``dst`` until EOF, then half-close ``dst`` (a request/response
    protocol sees the end of the request and still sends its answer). On an error, end
    both sockets so the other direction cannot wait forever."""
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
        dst.shutdown(_socket.SHUT_WR)
    except OSError:
        for sock in (src, dst):
            try:
                sock.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass


def splice(a: _socket.socket, b: _socket.socket) -> None:
    """Relay bytes between connected stream sockets ``a`` and ``b`` both ways until both
    directions have ended (EOF is passed on as a half-close), then close both.
    Blocks the calling thread; one extra thread carries ``b`` to ``a``."""
    import threading

    back = threading.Thread(target=_copy, args=(b, a), name="agentkit-splice", daemon=True)
    back.start()
    _copy(a, b)
    back.join()
    a.close()
    b.close()


def _listen(ports: list[int]) -> list[tuple[_socket.socket, int]]:
    bound: list[tuple[_socket.socket, int]] = []
    for port in ports:
        for family, host in ((_socket.AF_INET, "127.0.0.1"), (_socket.AF_INET6, "::1")):
            try:
                sock = _socket.socket(family, _socket.SOCK_STREAM)
            except OSError:
                continue
            try:
                sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
                if family == _socket.AF_INET6:
                    sock.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
                sock.bind((host, port))
                sock.listen(128)
            except OSError:  # no IPv6 here, or the port is not bindable: skipped
                sock.close()
                continue
            bound.append((sock, port))
    return bound


def _forward(conn: _socket.socket, relay: str, port: int) -> None:
    import socket

    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(relay)
        up.sendall(b"%d\n" % port)
    except OSError:
        conn.close()
        up.close()
        return
    splice(conn, up)


def _serve(listeners: list[tuple[_socket.socket, int]], relay: str) -> None:
    import selectors
    import socket
    import threading

    selector = selectors.DefaultSelector()
    for raw, port in listeners:
        selector.register(socket.socket(fileno=raw.detach()), selectors.EVENT_READ, port)
    while True:
        for key, _ in selector.select():
            try:
                conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
            except OSError:
                continue
            threading.Thread(target=_forward, args=(conn, relay, key.data), daemon=True).start()


def _start(relay: str, ports: list[int]) -> None:
    listeners = _listen(ports)
    if not listeners:
        return
    if os.fork() == 0:  # the server: let go of the command's stdin (the control socket) and output
        try:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            _serve(listeners, relay)
        finally:
            os._exit(0)
    for sock, _ in listeners:
        sock.close()


def main(argv: list[str]) -> None:
    """Bind, fork the server, exec the program (see the module docstring). ``argv`` is
    ``[RELAY_SOCKET, PORT..., "--", PROGRAM, ARG...]``. A failure to bridge is said on
    stderr and the program runs anyway; it exits 2 without a program."""
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.exit("usage: bridge.py RELAY_SOCKET PORT... -- PROGRAM ARG...")
    cut = argv.index("--")
    program = argv[cut + 1 :]
    try:
        ports = [int(p) for p in argv[1:cut] if p.isdigit() and 0 < int(p) < 65536]
        _start(argv[0], ports)
    except Exception as exc:  # the command must still run: it just lacks the host's ports
        print(f"agentkit: loopback bridge failed ({exc})", file=sys.stderr, flush=True)
    # Python ignores these; an exec would pass that on (`yes | head` would never end).
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(sig, _signal.SIG_DFL)
    os.execv(program[0], program)


if __name__ == "__main__":
    main(sys.argv[1:])

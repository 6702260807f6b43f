"""The loopback relay and its folders (agentkit/process/loopback/relay.py,
_loopback_folders.py) with real Unix and TCP sockets on 127.0.0.1 and real processes:
only the canonical header of a listed port is relayed, connections are capped, close
ends every connection on both sides, and folders of a killed owner are swept."""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from loopback_servers import Digest, Hold

from agentkit.process.loopback import folders as _loopback_folders
from agentkit.process.loopback import relay as _loopback_relay


def _closed(sock: socket.socket) -> bool:
    """True when the peer ends ``sock`` (what came before the end is skipped)."""
    try:
        while sock.recv(1 << 16):
            pass
        return True
    except ConnectionResetError:  # closed with the rest of a long header unread
        return True


def _client(relay: _loopback_relay.Relay) -> socket.socket:
    """A connection to the relay's socket (retried while its accept queue is full)."""
    deadline = time.monotonic() + 20
    while True:
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(20)
        try:
            sock.connect(str(relay.folder / _loopback_relay.SOCKET_NAME))
            return sock
        except BlockingIOError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def _threads() -> int:
    """Threads of this process, the test servers' own left out."""
    return sum(1 for t in threading.enumerate() if not t.name.startswith("test-hold"))


def test_relay_relays_only_the_canonical_header_of_a_listed_port() -> None:
    server, other = Digest("127.0.0.1"), Digest("127.0.0.1")  # other: listening, not listed
    relay = _loopback_relay.start_relay([server.port])
    port = server.port
    bad = [b"0\n", b"65536\n", b"abc\n", b"-1\n", b"99999999\n", b"\n", b"80", b"%d\n" % other.port,
           b"0%d\n" % port, b"+%d\n" % port, b" %d\n" % port, b"%d \n" % port, b"%d\r\n" % port,
           b"%d.0\n" % port, "\uff11\n".encode()]  # fmt: skip
    try:
        for header in bad:
            with _client(relay) as sock:
                sock.sendall(header)
                if not header.endswith(b"\n"):
                    sock.shutdown(socket.SHUT_WR)
                assert _closed(sock), header  # nothing connected, nothing relayed
        assert other.accepted == 0 and server.accepted == 0
        with _client(relay) as sock:
            sock.sendall(b"%d\nhello" % port)
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(200).decode() == f"5 {hashlib.sha256(b'hello').hexdigest()}"
    finally:
        relay.close()
        server.close()
        other.close()


def test_relay_caps_connections_and_close_ends_both_sides() -> None:
    hold = Hold()  # answers "hi" and keeps every connection open: splices never end alone
    relay = _loopback_relay.start_relay([hold.port])
    threads = _threads()
    clients: list[socket.socket] = []
    try:
        for _ in range(300):
            sock = _client(relay)
            with contextlib.suppress(OSError):  # closed at once beyond the cap
                sock.sendall(b"%d\n" % hold.port)
            clients.append(sock)
        for _ in range(300):  # idle: no header; beyond the kernel's queue, refused at once
            sock = socket.socket(socket.AF_UNIX)
            sock.setblocking(False)
            # Taken or refused: a relay that keeps up may take all 300 (CI saw it), so
            # what must hold is the cap below, not how many the kernel queued.
            with contextlib.suppress(BlockingIOError):
                sock.connect(str(relay.folder / _loopback_relay.SOCKET_NAME))
            clients.append(sock)
        time.sleep(1)
        assert relay.connections() <= 64  # MAX_CONNECTIONS, as documented
        assert hold.open_count() <= 64
        assert _threads() <= threads  # no thread per connection (another test's may end meanwhile)
        relay.close()
        assert relay.closed and not relay.folder.exists()
        assert relay.connections() == 0
        for sock in clients:
            sock.setblocking(True)
            sock.settimeout(20)
        assert all(_closed(sock) for sock in clients[:300])
        deadline = time.monotonic() + 20
        while hold.open_count() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hold.open_count() == 0  # the host sides were closed too
        assert hold.accepted > 0  # some were relayed before the close
    finally:
        relay.close()
        for sock in clients:
            sock.close()
        hold.close()


def test_relay_ends_when_the_watched_process_exits() -> None:
    hold = Hold()
    relay = _loopback_relay.start_relay([hold.port])
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)  # fmt: skip
    try:
        relay.watch(child.pid)
        with _client(relay) as sock:
            sock.sendall(b"%d\n" % hold.port)
            assert sock.recv(2) == b"hi"
            assert child.stdin is not None
            child.stdin.close()  # the child ends; not reaped yet
            assert _closed(sock)
        relay.close()  # returns at once: already closed
        assert not relay.folder.exists()
    finally:
        relay.close()
        child.kill()
        child.wait()
        hold.close()


OWNER = (
    "import sys, time\n"
    "from agentkit.process.loopback import relay as _loopback_relay\n"
    "relay = _loopback_relay.start_relay([])\n"
    "print(relay.folder, flush=True)\n"
    "time.sleep(600)\n"
)


def _owner() -> tuple[subprocess.Popen[bytes], Path]:
    """A process that started a relay and waits: returns it and its relay's folder."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, env=env)
    assert owner.stdout is not None
    return owner, Path(owner.stdout.readline().decode().strip())


def test_folders_of_a_killed_owner_are_swept_and_live_ones_kept() -> None:
    owner, folder = _owner()
    parent = folder.parent
    later: subprocess.Popen[bytes] | None = None
    mine = _loopback_relay.start_relay([])  # this process's parent folder: alive
    try:
        assert parent.name.startswith(f"{_loopback_folders.PREFIX}{owner.pid}-")
        assert parent not in _loopback_folders.sweep()  # its owner still runs
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert folder.exists()  # a SIGKILL leaves it
        later, _ = _owner()  # the next process's first relay sweeps it
        assert not parent.exists()
        reused = parent.with_name(f"{_loopback_folders.PREFIX}{os.getpid()}-12345")
        reused.mkdir(mode=0o700)  # our pid, another start time: a reused pid's leftover
        assert reused in _loopback_folders.sweep()
        assert not reused.exists()
        assert mine.folder.exists()  # ours is kept
    finally:
        mine.close()
        for proc in (owner, later):
            if proc is not None:
                proc.kill()
                proc.wait()


def test_a_legacy_folder_is_swept_when_its_socket_is_dead(tmp_path: Path) -> None:
    live, dead = tmp_path / "agentkit-loopback-live1", tmp_path / "agentkit-loopback-dead1"
    for folder in (live, dead):
        folder.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(live / "relay.sock"))
    server.listen(1)
    with socket.socket(socket.AF_UNIX) as gone:
        gone.bind(str(dead / "relay.sock"))  # bound, never listening: refused like a dead one
    try:
        assert _loopback_folders.sweep(tmp_path) == [dead]
        assert live.exists() and not dead.exists()
    finally:
        server.close()


def _start_relay(folders: Any) -> None:
    folders.put(str(_loopback_relay.start_relay([]).folder.parent))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_worker_process_removes_its_relay_folders(method: str) -> None:
    context = multiprocessing.get_context(method)
    folders = context.Queue()
    worker = context.Process(target=_start_relay, args=(folders,))
    worker.start()
    folder = Path(folders.get(timeout=60))
    worker.join(60)
    assert worker.exitcode == 0
    assert not folder.exists()

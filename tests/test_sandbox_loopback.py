"""command_network = loopback (agentkit/tools/_sandbox.py, _loopback_relay.py,
_loopback_bridge.py) with real bubblewrap, processes and sockets on 127.0.0.1 / ::1:
a command reaches the host's loopback services (half-close included) and nothing else,
the bridge is never a leftover and ends with the command, the relay refuses bad headers."""

from __future__ import annotations

import hashlib
import multiprocessing
import socket
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from agentkit import Settings
from agentkit.tools import _loopback_ports, _loopback_relay, _sandbox
from agentkit.tools._command_launch import end_background_services
from agentkit.tools.base import ToolContext, ToolRegistry, ToolResult
from agentkit.tools.shell import SHELL_TOOLS

REGISTRY = ToolRegistry(SHELL_TOOLS)
needs_bwrap = pytest.mark.skipif(
    _sandbox.bwrap_works("bwrap") is None, reason="bubblewrap cannot run here"
)


def make_ctx(workspace: Path, **overrides: Any) -> ToolContext:
    settings = Settings(model="m", api_key="k", language="en", **overrides)
    return ToolContext(workspace=workspace, settings=settings, process_mark=uuid.uuid4().hex)


def run(ctx: ToolContext, command: str) -> ToolResult:
    return REGISTRY.execute("run_command", {"command": command, "timeout_seconds": 60}, ctx)


class _Digest:
    """A TCP server on the host's ``host``: reads a request until the client half-closes,
    then answers with the request's length and sha256 (needs the half-close to answer)."""

    def __init__(self, host: str) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.create_server((host, 0), family=family)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(1 << 16):
                    data += chunk
                conn.sendall(f"{len(data)} {hashlib.sha256(data).hexdigest()}".encode())

    def close(self) -> None:
        self.sock.close()


CLIENT = (
    "import socket, sys\n"
    "s = socket.create_connection((sys.argv[1], int(sys.argv[2])), 10)\n"
    "s.settimeout(20)\n"
    "s.sendall(bytes(range(256)) * 4000)\n"
    "s.shutdown(socket.SHUT_WR)\n"
    "print('answer', s.recv(200).decode())\n"
)
PAYLOAD = bytes(range(256)) * 4000


def _has_ipv6_loopback() -> bool:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
        return True
    except OSError:
        return False


@needs_bwrap
@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_loopback_reaches_a_host_service_with_half_close(workspace: Path, host: str) -> None:
    if host == "::1" and not _has_ipv6_loopback():
        pytest.skip("no IPv6 loopback here")
    server = _Digest(host)
    (workspace / "client.py").write_text(CLIENT)
    try:
        result = run(
            make_ctx(workspace, command_network="loopback"),
            f"{sys.executable} client.py 127.0.0.1 {server.port}",
        )
    finally:
        server.close()
    expected = f"answer {len(PAYLOAD)} {hashlib.sha256(PAYLOAD).hexdigest()}"
    assert expected in result.output, result.output
    assert "sandbox:" not in result.output


@needs_bwrap
def test_loopback_reaches_nothing_else(workspace: Path) -> None:
    unused = socket.create_server(("127.0.0.1", 0))
    free_port = unused.getsockname()[1]
    unused.close()  # nothing listens there when the command starts
    probe = (
        "import socket, sys\n"
        "for host, port in (('10.255.255.1', 80), ('192.0.2.1', 443), ('127.0.0.1', int(sys.argv[1]))):\n"
        "    try:\n"
        "        socket.create_connection((host, port), 3)\n"
        "        print('reached', host)\n"
        "    except OSError as exc:\n"
        "        print(host, exc)\n"
    )  # fmt: skip
    (workspace / "probe.py").write_text(probe)
    result = run(
        make_ctx(workspace, command_network="loopback"), f"{sys.executable} probe.py {free_port}"
    )
    assert "reached" not in result.output, result.output
    assert "10.255.255.1 [Errno 101] Network is unreachable" in result.output
    assert "192.0.2.1 [Errno 101] Network is unreachable" in result.output
    assert "127.0.0.1 [Errno 111] Connection refused" in result.output
    assert "sandbox: commands reach only the host's loopback" in result.output


def _bridges(port: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if _sandbox.is_bridge(cmdline) and str(port) in cmdline:
            found.append(proc)
    return found


@needs_bwrap
@pytest.mark.parametrize("services", [False, True])
def test_bridge_is_no_leftover_and_ends_with_the_command(workspace: Path, services: bool) -> None:
    server = _Digest("127.0.0.1")  # its port is in this test's bridge argv only
    try:
        ctx = make_ctx(workspace, command_network="loopback", command_background_services=services)
        result = run(ctx, "ps -eo args")
        listed = [line for line in result.output.splitlines() if "bridge.py" in line]
        assert listed and str(server.port) in listed[0], result.output  # it ran, inside
        assert result.meta["killed_pids"] == [], result.output
        assert "leftover" not in result.output and "left running" not in result.output
        if services:
            end_background_services()
        _, alive = psutil.wait_procs(_bridges(server.port), timeout=10)
        assert not alive, alive  # ended with the namespace
    finally:
        server.close()


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(10) == b""
    except ConnectionResetError:  # closed with the rest of a long header unread
        return True


def test_relay_refuses_bad_headers_and_relays_a_good_one() -> None:
    server = _Digest("127.0.0.1")
    path = str(_loopback_relay.relay_folder() / _loopback_relay.SOCKET_NAME)
    try:
        for header in (b"0\n", b"65536\n", b"abc\n", b"-1\n", b"99999999\n", b"\n", b"80"):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(20)
                sock.connect(path)
                sock.sendall(header)
                if not header.endswith(b"\n"):
                    sock.shutdown(socket.SHUT_WR)
                assert _closed(sock), header  # nothing connected, nothing relayed
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(20)
            sock.connect(path)
            sock.sendall(b"%d\nhello" % server.port)
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(200).decode() == f"5 {hashlib.sha256(b'hello').hexdigest()}"
    finally:
        server.close()


@pytest.mark.parametrize("source", ["netlink", "proc"])
def test_listening_ports_lists_loopback_listeners_only_while_they_listen(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if source == "proc":  # the fallback where sock_diag is unavailable
        monkeypatch.setattr(_loopback_ports, "_netlink_listeners", lambda: None)
    elif _loopback_ports._netlink_listeners() is None:
        pytest.skip("no sock_diag netlink here")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))  # an established row too
    try:
        assert port in _loopback_ports.listening_ports()
        assert client.getsockname()[1] not in _loopback_ports.listening_ports()
    finally:
        client.close()
        server.close()
    assert port not in _loopback_ports.listening_ports()


def _start_relay(folders: Any) -> None:
    folders.put(str(_loopback_relay.relay_folder()))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_worker_process_removes_its_relay_folder(method: str) -> None:
    context = multiprocessing.get_context(method)
    folders = context.Queue()
    worker = context.Process(target=_start_relay, args=(folders,))
    worker.start()
    folder = Path(folders.get(timeout=60))
    worker.join(60)
    assert worker.exitcode == 0
    assert not folder.exists()

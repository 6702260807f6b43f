"""command_network = loopback (agentkit/process/sandbox.py, _loopback_relay.py,
_loopback_bridge.py) with real bubblewrap, processes and sockets on 127.0.0.1 / ::1:
a command reaches the host's loopback services (half-close included) and nothing else,
not even a service started after it began; the bridge is never a leftover and ends with
the command; a flood of relay connections is capped and ends with the command."""

from __future__ import annotations

import hashlib
import socket
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from loopback_servers import Digest, Hold
from test_sandbox_processes import REGISTRY, make_ctx, needs_bwrap, run

from agentkit.process import sandbox as _sandbox
from agentkit.process.loopback import ports as _loopback_ports
from agentkit.process.spawn import end_background_services
from agentkit.tools.base import ToolResult

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
    server = Digest(host)
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
    server = Digest("127.0.0.1")  # its port is in this test's bridge argv only
    try:
        ctx = make_ctx(workspace, command_network="loopback", command_background_services=services)
        # Whole lines: ps cuts them at COLUMNS (80 under xdist).
        result = run(ctx, "ps -ww -eo args")
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
    # Gone once closed; a fork elsewhere in this process (a spawner thread) can hold the
    # socket for the moment before its exec, so allow a little time (seen in CI once).
    deadline = time.monotonic() + 5
    while port in _loopback_ports.listening_ports() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert port not in _loopback_ports.listening_ports()


FLOOD = (
    "import socket, sys, time\n"
    "port, keep = int(sys.argv[1]), sys.argv[2]\n"
    "socks, answered = [], 0\n"
    "for _ in range(200):\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    s.settimeout(1)\n"  # past the relay's backlog, a connect waits: do not hang on it
    "    try:\n"
    "        s.connect('/run/agentkit-loopback/relay.sock')\n"
    "        s.sendall(b'%d\\n' % port)\n"
    "    except OSError:\n"
    "        continue\n"
    "    socks.append(s)\n"
    "for s in socks:\n"
    "    s.settimeout(5)\n"
    "    try:\n"
    "        answered += s.recv(2) == b'hi'\n"
    "    except OSError:\n"
    "        pass\n"
    "print('answered', answered, flush=True)\n"
    "if keep == 'sleep':\n"
    "    time.sleep(100)\n"
    "if keep == 'background':\n"
    "    import os\n"
    "    if os.fork() == 0:\n"
    "        os.setsid()\n"
    "        time.sleep(100)\n"
)


def _wait_closed(hold: Hold) -> int:
    """The host service's connections still open after up to 10 s."""
    deadline = time.monotonic() + 10
    while hold.open_count() and time.monotonic() < deadline:
        time.sleep(0.05)
    return hold.open_count()


def _relay_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "agentkit-loopback-relay"]


@needs_bwrap
@pytest.mark.parametrize("ending", ["exit", "sleep", "background"])
def test_a_flood_of_relay_connections_is_capped_and_ends_with_the_command(
    workspace: Path, ending: str
) -> None:
    hold = Hold()  # keeps its side open: only the relay can end these connections
    (workspace / "flood.py").write_text(FLOOD)
    ctx = make_ctx(
        workspace, command_network="loopback", command_background_services=ending == "background"
    )
    try:
        result = REGISTRY.execute(
            "run_command",
            {"command": f"{sys.executable} flood.py {hold.port} {ending}", "timeout_seconds": 15},
            ctx,
        )
        answered = int(result.output.split("answered ")[1].split()[0])
        assert 0 < answered <= 64, result.output  # MAX_CONNECTIONS, as documented
        assert hold.accepted <= 64
        if ending == "background":  # the namespace lives on, and so do its connections
            assert hold.open_count() > 0
            end_background_services()
        else:
            assert not _relay_threads()  # closed before run_command returned
        assert _wait_closed(hold) == 0
        deadline = time.monotonic() + 10
        while _relay_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _relay_threads()
    finally:
        end_background_services()
        hold.close()


LATE = (
    "import pathlib, socket, sys, time\n"
    "pathlib.Path('ready').write_text('1')\n"
    "while not pathlib.Path('late').exists():\n"
    "    time.sleep(0.05)\n"
    "late, listed = int(pathlib.Path('late').read_text()), int(sys.argv[1])\n"
    "for name, header in (('late', b'%d' % late), ('zero', b'0%d' % listed),\n"
    "                     ('listed', b'%d' % listed)):\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    s.settimeout(10)\n"
    "    s.connect('/run/agentkit-loopback/relay.sock')\n"
    "    s.sendall(header + b'\\nhello')\n"
    "    s.shutdown(socket.SHUT_WR)\n"
    "    print(name, repr(s.recv(200)))\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', late), 5)\n"
    "    print('bridged late')\n"
    "except OSError as exc:\n"
    "    print('late direct', exc)\n"
)


@needs_bwrap
def test_a_service_started_after_the_command_is_not_reachable(workspace: Path) -> None:
    listed = Digest("127.0.0.1")
    (workspace / "late.py").write_text(LATE)
    results: list[ToolResult] = []
    ctx = make_ctx(workspace, command_network="loopback")
    worker = threading.Thread(
        target=lambda: results.append(run(ctx, f"{sys.executable} late.py {listed.port}"))
    )
    worker.start()
    late: Digest | None = None
    try:
        deadline = time.monotonic() + 30
        while not (workspace / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        late = Digest("127.0.0.1")  # listening now, after the command started
        (workspace / "late").write_text(str(late.port))
        worker.join(60)
        output = results[0].output
        assert "late b''" in output and "zero b''" in output, output
        assert f"listed b'5 {hashlib.sha256(b'hello').hexdigest()}'" in output, output
        assert "late direct [Errno 111] Connection refused" in output, output
        assert late.accepted == 0
    finally:
        worker.join(60)
        listed.close()
        if late is not None:
            late.close()

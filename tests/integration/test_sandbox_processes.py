"""The command sandbox (agentkit/process/sandbox.py) with real bubblewrap, processes,
files and sockets: escapes that must fail, development commands that must work, modes,
the fallback, and a sub-agent confined to its deliverables and claims."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, who

from agentkit import Agent, Settings
from agentkit.process import sandbox as _sandbox
from agentkit.testing import FakeOpenAIServer
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry
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


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside the workspace, in a place the sandbox shows read-only (/var)."""
    base = Path("/var/tmp") if not os.access("/var/lib", os.W_OK) else Path("/var/lib")
    folder = base / f"agentkit-sandbox-test-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    (folder / "planted.txt").write_text("original\n")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@needs_bwrap
def test_write_outside_the_workspace_fails_with_a_note(workspace: Path, outside: Path) -> None:
    ctx = make_ctx(workspace)
    result = run(ctx, f"echo pwned > {outside}/planted.txt; echo ok > inside.txt; cat inside.txt")
    assert (outside / "planted.txt").read_text() == "original\n"
    assert (workspace / "inside.txt").read_text() == "ok\n"
    assert "Read-only file system" in result.output or "No such file" in result.output
    if "Read-only file system" in result.output:
        assert "sandbox: a write was refused: commands may write the workspace" in result.output
    assert "pwned" not in (outside / "planted.txt").read_text()


@needs_bwrap
def test_agentkit_state_folder_is_read_only(workspace: Path) -> None:
    (workspace / ".agentkit").mkdir()
    (workspace / ".agentkit" / "state.json").write_text("{}")
    result = run(make_ctx(workspace), "echo bad > .agentkit/state.json")
    assert (workspace / ".agentkit" / "state.json").read_text() == "{}", result.output


@needs_bwrap
def test_home_secrets_are_hidden(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("aws_secret=SECRET-AWS\n")
    monkeypatch.setenv("HOME", str(home))
    planted: Path | None = None
    if os.access("/root", os.W_OK):  # root's real home too, created and removed here
        planted = Path("/root") / f".agentkit-test-{uuid.uuid4().hex[:8]}"
        planted.write_text("ROOT-SECRET\n")
    try:
        command = f"cat {home}/.ssh/id_ed25519 ~/.aws/credentials"
        if planted is not None:
            command += f"; cat {planted}"
        ctx = make_ctx(workspace)
        output = run(ctx, command).output
        listing = run(ctx, "ls -a ~ /home /root").output.split()
    finally:
        if planted is not None:
            planted.unlink()
    for secret in ("PRIVATE-KEY-MATERIAL", "SECRET-AWS", "ROOT-SECRET"):
        assert secret not in output, output
    assert "No such file or directory" in output
    assert ".ssh" not in listing and ".aws" not in listing, listing
    assert not [name for name in listing if name.startswith(".agentkit-test")], listing


@needs_bwrap
def test_the_agent_process_is_out_of_reach(workspace: Path) -> None:
    me = os.getpid()
    output = run(make_ctx(workspace), f"cat /proc/{me}/environ; kill -9 {me}; ls /proc").output
    assert "PATH=" not in output
    assert "No such file or directory" in output and "No such process" in output
    pids = [int(p) for p in output.split() if p.isdigit()]
    assert pids and max(pids) < 50, output  # only the command's own namespace is listed


@needs_bwrap
def test_detached_daemons_do_not_outlive_the_command(workspace: Path) -> None:
    n = str(930_000_000 + uuid.uuid4().int % 9_999_999)
    command = f"setsid sleep {n} & nohup sleep {n} >/dev/null 2>&1 & (sleep {n} &) ; echo up"
    result = run(make_ctx(workspace), command)
    assert result.output.startswith("up\n"), result.output
    assert not [p for p in _sleeps(n)]


def _sleeps(n: str) -> list[int]:
    import psutil

    return [
        p.pid
        for p in psutil.process_iter(["cmdline", "status"])
        if (p.info["cmdline"] or [])[-1:] == [n] and p.info["status"] != psutil.STATUS_ZOMBIE
    ]


class _Server:
    """A one-byte TCP server on 127.0.0.1 in this process."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.sendall(b"Z")
            conn.close()

    def close(self) -> None:
        self.sock.close()


CLIENT = "{py} -c \"import socket; print('got', socket.create_connection(('127.0.0.1', {port}), 5).recv(1))\""


@needs_bwrap
@pytest.mark.parametrize("network", ["none", "loopback", "all"])
def test_network_to_a_host_loopback_server(workspace: Path, network: str) -> None:
    server = _Server()
    try:
        result = run(
            make_ctx(workspace, command_network=network),
            CLIENT.format(py=sys.executable, port=server.port),
        )
    finally:
        server.close()
    if network == "none":
        assert "got b'Z'" not in result.output
        assert "Connection refused" in result.output
        assert "sandbox: commands have no network (command_network = none)" in result.output
    else:
        assert "got b'Z'" in result.output and "sandbox:" not in result.output


@needs_bwrap
def test_development_commands_work(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    (workspace / "hello.c").write_text('#include <stdio.h>\nint main(void){puts("hi from C");}\n')
    (workspace / "test_tiny.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    steps = [
        (f"{sys.executable} -m pytest -q test_tiny.py", "1 passed"),
        (
            "git init -q . && git add -A && git -c user.name=t -c user.email=t@t commit -qm one"
            " && git log --oneline | wc -l",
            "1",
        ),  # fmt: skip
        ("printf 'b\\na\\n' | sort | tr a-z A-Z | head -1", "A"),
        ("mkdir -p build && echo data > build/out.txt && cat build/out.txt", "data"),
        (f"{sys.executable} -c 'import tempfile; print(tempfile.mkstemp()[1][:5])'", "/tmp/"),
    ]
    if shutil.which("cc"):
        steps.append(("cc -o build/hello hello.c && ./build/hello", "hi from C"))
    for command, expected in steps:
        result = run(ctx, command)
        assert result.meta["exit_code"] == 0 and expected in result.output, (command, result.output)
        assert "sandbox:" not in result.output


@needs_bwrap
def test_own_loopback_works_without_network(workspace: Path) -> None:
    script = (
        "import socket, threading\n"
        "s = socket.create_server(('127.0.0.1', 0))\n"
        "threading.Thread(target=lambda: s.accept()[0].sendall(b'L'), daemon=True).start()\n"
        "print('own', socket.create_connection(s.getsockname(), 5).recv(1))\n"
    )
    (workspace / "loop.py").write_text(script)
    assert "own b'L'" in run(make_ctx(workspace), f"{sys.executable} loop.py").output


@needs_bwrap
def test_read_only_mode_and_extra_paths(workspace: Path, outside: Path, tmp_path: Path) -> None:
    ro = make_ctx(workspace, command_sandbox_mode="read-only")
    result = run(ro, "echo x > new.txt; echo scratch > /tmp/s && cat /tmp/s")
    assert not (workspace / "new.txt").exists()
    assert (
        "scratch" in result.output
        and "sandbox: writes are refused (read-only mode" in result.output
    )
    shown = tmp_path / "docs"  # under the hidden /tmp: shown because it is a read-only root
    shown.mkdir()
    (shown / "api.md").write_text("API NOTES\n")
    cache = outside / "cache"
    cache.mkdir()
    ctx = make_ctx(workspace, read_only_roots=[str(shown)], command_writable_paths=[str(cache)])
    output = run(ctx, f"cat {shown}/api.md; echo c > {cache}/hit; echo n > {shown}/api.md").output
    assert "API NOTES" in output and (shown / "api.md").read_text() == "API NOTES\n"
    assert (cache / "hit").read_text() == "c\n"
    assert (outside / "planted.txt").read_text() == "original\n"


@needs_bwrap
def test_full_mode_runs_unconfined(workspace: Path, outside: Path) -> None:
    run(make_ctx(workspace, command_sandbox_mode="full"), f"echo changed > {outside}/planted.txt")
    expected = "changed\n" if os.access(outside, os.W_OK) else "original\n"
    assert (outside / "planted.txt").read_text() == expected


@pytest.mark.parametrize("how", ["path setting", "PATH without bwrap", "namespaces off"])
def test_fallback_without_bubblewrap(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any, how: str
) -> None:
    overrides: dict[str, Any] = {}
    if how == "path setting":
        overrides["command_bwrap_path"] = str(tmp_path / "nowhere" / "bwrap")
    elif how == "PATH without bwrap":
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        for tool in ("sh", "bash", "setpriv", "unshare", "echo"):
            if shutil.which(tool):
                os.symlink(shutil.which(tool), bin_dir / tool)  # type: ignore[arg-type]
        monkeypatch.setenv("PATH", str(bin_dir))
    else:  # a bwrap that fails the way it does when user namespaces are disabled
        fake = tmp_path / "bwrap"
        fake.write_text(
            "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
        )
        fake.chmod(0o755)
        overrides["command_bwrap_path"] = str(fake)
    monkeypatch.setattr(_sandbox, "_warned", threading.Event())
    with caplog.at_level(logging.WARNING, logger="agentkit.process.sandbox"):
        first = run(make_ctx(workspace, **overrides), "echo unconfined")
        second = run(make_ctx(workspace, **overrides), "echo again")
    assert first.ok and first.output.startswith("unconfined\n[exit 0")
    assert second.output.startswith("again\n")
    warnings = [r for r in caplog.records if "command sandbox is off" in r.getMessage()]
    assert len(warnings) == 1  # said once, not per command
    for strict in ({"command_sandbox": "bwrap"}, {"command_sandbox_mode": "read-only"}):
        refused = run(make_ctx(workspace, **overrides, **strict), "echo no > ran.txt")
        assert refused.error_code == "sandbox_unavailable", refused.output
        assert not (workspace / "ran.txt").exists()


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("mode", [None, "read-only"])
def test_sub_agent_writes_only_its_deliverables_and_claims(
    workspace: Path, mode: str | None
) -> None:
    command = (
        "echo more >> mine.txt; echo x > sub_agent_results/agent_1/report.txt; "
        "echo y > other.txt; cat mine.txt"
    )
    router = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="Writer", task="t")), "done"],
        subs={
            1: [
                calls(call("write_file", path="mine.txt", content="claimed\n")),
                calls(call("run_command", command=command)),
                finish(),
            ]
        },
    )
    settings = Settings(
        model="m",
        api_key="k",
        base_url="http://127.0.0.1:9/v1",
        language="en",
        max_retries=0,
        subagent_timeout_min=1,
        subagent_command_sandbox_mode=mode,
    )
    with FakeOpenAIServer(router) as server:
        settings = settings.model_copy(update={"base_url": server.base_url})
        with Agent(workspace=workspace, settings=settings) as agent:
            assert agent.run("go").status == "done"
        sub = [r for r in server.requests if who(r) == 1]
    output = [m["content"] for m in sub[2]["messages"] if m["role"] == "tool"][-1]
    assert not (workspace / "other.txt").exists(), output
    assert "sandbox: " in output
    report = workspace / "sub_agent_results/agent_1/report.txt"
    if mode is None:
        assert (workspace / "mine.txt").read_text() == "claimed\nmore\n"
        assert report.read_text() == "x\n"
        assert "only your deliverables folder sub_agent_results/agent_1" in output
    else:
        assert (workspace / "mine.txt").read_text() == "claimed\n"
        assert not report.exists()
        assert "read-only mode" in output


@needs_bwrap
def test_a_write_scope_binds_only_the_context_that_carries_it(workspace: Path) -> None:
    """The scope travels in ToolContext.write_scope: two agents with one process mark
    (as before, when a dict keyed by the mark held it) do not share it."""
    mark = uuid.uuid4().hex
    (workspace / "mine").mkdir()
    scope = _sandbox.WriteScope((workspace / "mine",), lambda: (), "only mine/")
    settings = Settings(model="m", api_key="k", language="en")
    scoped = ToolContext(workspace, settings, process_mark=mark, write_scope=scope)
    whole = ToolContext(workspace, settings, process_mark=mark)
    refused = run(scoped, "echo a > mine/a.txt; echo b > b.txt")
    assert (workspace / "mine/a.txt").read_text() == "a\n"
    assert not (workspace / "b.txt").exists(), refused.output
    assert "only mine/" in refused.output
    assert run(whole, "echo c > c.txt").ok
    assert (workspace / "c.txt").read_text() == "c\n"


ESCAPE = r"""
import glob, json, multiprocessing, os, socket, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(sys.argv[1], "integration"))
from subagent_helpers import Router, call, calls, finish
from test_sandbox_processes import make_ctx, run
from agentkit import Agent, Settings
from agentkit.testing import FakeOpenAIServer

workspace, where = Path(sys.argv[2]), sys.argv[3]
host_tmp = tempfile.gettempdir()
probe = (
    "import glob, socket\n"
    f"found = glob.glob('{host_tmp}/**/listener-*', recursive=True)\n"
    "for path in found:\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    try:\n"
    "        s.connect(path); print('REACHED', path)\n"
    "    except OSError as exc:\n"
    "        print('refused', exc)\n"
    "print('found', len(found))\n"
)
(workspace / "probe.py").write_text(probe)
extra = {"read_only_roots": [host_tmp]} if where == "read_only_root" else {}
if where == "subagent":  # a worker's command: the worker did not start the forkserver
    router = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="probe", task="t")), "done"],
        subs={1: [calls(call("run_command", command="python3 probe.py")), finish("x" * 60)]},
    )
    with FakeOpenAIServer(router) as server:
        settings = Settings(model="m", api_key="k", base_url=server.base_url,
                            command_sandbox="bwrap", language="en")
        with Agent(workspace, settings) as agent:
            agent.run("go")
        tools = [m["content"] for r in server.requests for m in r["messages"] if m["role"] == "tool"]
        output = next((t for t in tools if "found" in str(t)), repr(tools))
else:
    from multiprocessing import forkserver
    multiprocessing.get_context("forkserver")
    forkserver.ensure_running()  # its socket: <TMPDIR>/pymp-*/listener-*
    output = run(make_ctx(workspace, command_sandbox="bwrap", **extra), "python3 probe.py").output
print("HOST", len(glob.glob(f"{host_tmp}/*mp-*/listener-*")))  # pymp-, or agentkit's akmp-
print(output)
"""


@needs_bwrap
@pytest.mark.parametrize("where", ["outside", "in_workspace", "read_only_root", "subagent"])
# serial: the forkserver's socket lies under the workspace, and xdist's popen-gwN folder
# takes its path past a Unix socket's 107 bytes.
@pytest.mark.serial
def test_no_command_reaches_the_forkserver_socket_wherever_tmpdir_is(
    workspace: Path, where: str
) -> None:
    # The forkserver runs any pickle a connecting process sends: a command that reached
    # its socket would run code outside the sandbox. TMPDIR goes where the sandbox would
    # otherwise show it: a folder outside /tmp (shown read-only), the workspace, a
    # read_only_roots entry; and a sub-agent's command, whose worker did not start it.
    base = (
        Path("/var/lib") if os.access("/var/lib", os.W_OK) else Path(__file__).resolve().parents[1]
    )
    if where in ("in_workspace", "subagent"):
        base = workspace
    # Short: a Unix socket's path holds at most 107 bytes.
    tmpdir = base / ("t" if base == workspace else f"agentkit-tmpdir-{uuid.uuid4().hex[:8]}")
    tmpdir.mkdir()
    try:
        env = {**os.environ, "TMPDIR": str(tmpdir)}
        env.pop("AGENTKIT_SOCKET_DIRS", None)
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                ESCAPE,
                str(Path(__file__).resolve().parents[1]),
                str(workspace),
                where,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    assert "HOST 1" in done.stdout, done  # the socket exists on the host...
    assert "found 0" in done.stdout and "REACHED" not in done.stdout, done.stdout


@needs_bwrap
def test_read_only_root_slash_keeps_commands_working(workspace: Path) -> None:
    result = run(make_ctx(workspace, read_only_roots=["/"]), "echo ok > out.txt; cat out.txt")
    assert result.ok and (workspace / "out.txt").read_text() == "ok\n", result.output


@needs_bwrap
def test_a_path_entry_bubblewrap_cannot_reach_does_not_break_commands(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (a fresh user's trial): a PATH entry under a folder the user may not
    enter, or below a file, made bubblewrap refuse every command ("Can't find source
    path"). Below a file here: root may enter every folder."""
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv("PATH", f"{afile / 'bin'}:{os.environ['PATH']}")
    result = run(make_ctx(workspace), "echo confined")
    assert result.ok and "confined" in result.output, result.output

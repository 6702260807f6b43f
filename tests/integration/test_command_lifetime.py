"""No process of a command outlives the command, nor its owner, whatever signal ends it.

Real processes throughout: run_command in this process, in a separate owner process
killed by SIGKILL, and under the CLI (main agent and a sub-agent) ended by SIGHUP or by
SIGKILL to its whole process group. Processes are found by a unique argv string.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest
from cli_helpers import cli_env
from shell_helpers import running_with
from subagent_helpers import Router, call, calls, finish, wait_until

from agentkit.settings import Settings
from agentkit.testing import FakeOpenAIServer
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.shell import SHELL_TOOLS

REPO = Path(__file__).resolve().parents[2]
REGISTRY = ToolRegistry(SHELL_TOOLS)

# Every test twice: in the command sandbox and without it (conftest.command_sandbox).
pytestmark = pytest.mark.usefixtures("command_sandbox")


def marker() -> str:
    """A unique ``sleep`` argument: ``sleep 9xxxxxxx`` identifies our processes."""
    return str(900_000_000 + uuid.uuid4().int % 99_999_999)


def make_ctx(workspace: Path, **overrides: Any) -> ToolContext:
    settings = Settings(**{"model": "m", "api_key": "k", "command_kill_grace": 0.5, **overrides})
    return ToolContext(workspace=workspace, settings=settings, process_mark=uuid.uuid4().hex)


def reap(text: str) -> None:
    for proc in running_with(text):
        with contextlib.suppress(psutil.Error):
            proc.kill()


@pytest.mark.parametrize(
    "launch",
    [
        "setsid sleep {n} >/dev/null &",
        "nohup sleep {n} >/dev/null 2>&1 &",
        "(sleep {n} >/dev/null &) &",  # double fork: re-parented at once
        "env -i setsid sleep {n} >/dev/null &",  # sheds the environment mark
        "env -i /bin/sh -c 'setsid sleep {n} & exit 0' >/dev/null &",
    ],
)
def test_background_leftovers_are_gone_when_the_command_returns(
    workspace: Path, launch: str
) -> None:
    ctx = make_ctx(workspace)
    n = marker()
    try:
        # Output to /dev/null: a leftover holding the pipe costs a 1 s drain per call.
        for _ in range(30):  # the old sweep lost this race a few percent of the time
            result = REGISTRY.execute("run_command", {"command": launch.format(n=n)}, ctx)
            assert result.ok, result.output
            assert running_with(f"sleep {n}") == [], result.output
    finally:
        reap(f"sleep {n}")


OWNER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentkit.settings import Settings
    from agentkit.tools.base import ToolContext
    from agentkit.tools.registry import ToolRegistry
    from agentkit.tools.shell import SHELL_TOOLS

    command, background = sys.argv[1], sys.argv[2] == "1"
    settings = Settings(model="m", api_key="k", command_background_services=background)
    ctx = ToolContext(workspace=Path.cwd(), settings=settings, process_mark="owner-test")
    result = ToolRegistry(SHELL_TOOLS).execute("run_command", {"command": command}, ctx)
    print(result.output, flush=True)
    print("returned", flush=True)
    import time
    time.sleep(600)
    """
)


def start_owner(workspace: Path, command: str, background: bool) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", OWNER, command, "1" if background else "0"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, killed whole below
    )


def test_sigkill_of_the_owner_group_ends_its_running_command(workspace: Path) -> None:
    n = marker()
    owner = start_owner(workspace, f"(setsid sleep {n}1 &); sleep {n}2", background=False)
    try:
        assert wait_until(lambda: len(running_with(f"sleep {n}")) == 2, 30)
        os.killpg(owner.pid, signal.SIGKILL)
        owner.wait(10)
        assert wait_until(lambda: running_with(f"sleep {n}") == [], 10)
    finally:
        reap(f"sleep {n}")


def test_background_services_outlive_the_command_but_not_the_owner(workspace: Path) -> None:
    n = marker()
    owner = start_owner(workspace, f"setsid sleep {n} >/dev/null 2>&1 & echo up", True)
    try:
        assert owner.stdout is not None
        lines = [owner.stdout.readline() for _ in range(3)]
        assert lines[-1] == "returned\n", lines
        assert "1 background process left running" in lines[1], lines
        assert wait_until(lambda: len(running_with(f"sleep {n}")) == 1, 10)
        time.sleep(0.5)
        assert len(running_with(f"sleep {n}")) == 1  # the command ended; its service did not
        os.kill(owner.pid, signal.SIGKILL)  # the owner alone, not its group
        owner.wait(10)
        assert wait_until(lambda: running_with(f"sleep {n}") == [], 10)
    finally:
        reap(f"sleep {n}")


def test_background_services_setting_in_process(workspace: Path) -> None:
    ctx = make_ctx(workspace, command_background_services=True)
    n = marker()
    try:
        result = REGISTRY.execute("run_command", {"command": f"setsid sleep {n} &"}, ctx)
        assert "1 background process left running (command_background_services)" in result.output
        # setsid may not have exec'd sleep yet when the command returns: poll.
        assert wait_until(lambda: len(running_with(f"sleep {n}")) == 1, 10)
        time.sleep(0.5)
        assert len(running_with(f"sleep {n}")) == 1  # still there after the command
    finally:
        from agentkit.process.spawn import end_background_services

        end_background_services()
        assert wait_until(lambda: running_with(f"sleep {n}") == [], 10)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGHUP", "SIGKILL"])
def test_cli_ended_by_signal_leaves_no_command_behind(workspace: Path, how: str) -> None:
    n = marker()
    long_command = f"(setsid sleep {n}1 &); sleep {n}2"
    router = Router(
        main=[
            calls(
                call("create_sub_agent", agent_id=1, summary="Busy one", task="wait"),
                call("run_command", command=f"(setsid sleep {n}3 &); sleep {n}4"),
            ),
            "done",
        ],
        subs={1: [calls(call("run_command", command=long_command)), finish()]},
    )
    with FakeOpenAIServer(router) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentkit", "run", "hi", "-w", str(workspace)],
            env=cli_env(
                server.base_url, AGENTKIT_COMMAND_SANDBOX=os.environ["AGENTKIT_COMMAND_SANDBOX"]
            ),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            ready = wait_until(lambda: len(running_with(f"sleep {n}")) == 4, 60)
            assert ready, [p.info["cmdline"] for p in running_with(f"sleep {n}")]
            os.killpg(proc.pid, getattr(signal, how))
            out, err = proc.communicate(timeout=60)
            assert wait_until(lambda: running_with(f"sleep {n}") == [], 15)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            reap(f"sleep {n}")
    if how == "SIGHUP":
        assert proc.returncode == 129, err
        assert "Traceback" not in err
        (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
        (row,) = json.loads(saved.read_text())["subagents"]
        assert row["status"] == "terminated", row
    else:
        assert proc.returncode == -signal.SIGKILL


END_ALL_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    import psutil
    from agentkit.process import spawn as launch
    def alive():
        return [p for p in psutil.process_iter(["cmdline", "status"])
                if "sleep 976543" in " ".join(p.info["cmdline"] or [])
                and p.pid != os.getpid()  # this script's own command line has the text
                and p.info["status"] != psutil.STATUS_ZOMBIE]

    env = dict(os.environ)
    # Held: a Launched dropped closes its control socket, which ends the command.
    held = launch.spawn("/bin/sh", "sleep 976543", ".", env)
    deadline = time.monotonic() + 10
    while not alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    print("running" if alive() else "never started", flush=True)
    launch.end_all()
    deadline = time.monotonic() + 5  # while this process lives on
    while alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    print("gone" if not alive() else "still running", flush=True)
    try:
        launch.spawn("/bin/sh", "sleep 976544", ".", env)
        print("started-after-end", flush=True)
    except OSError as exc:
        print("refused:", exc, flush=True)
    """
)


def test_end_all_kills_launched_commands_and_refuses_new_ones() -> None:
    """An ending agent process (a worker told to stop) kills what it launched, a launch
    in flight included, and launches nothing more."""
    proc = subprocess.run(
        [sys.executable, "-c", END_ALL_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "running", lines  # the command ran until end_all
    assert lines[1] == "gone", lines  # killed by end_all, not by this process's exit
    assert lines[2].startswith("refused: this agent is ending"), lines
    assert wait_until(lambda: not running_with("sleep 97654"), 10)


@pytest.mark.parametrize(
    ("written", "expected"),
    [(b"0\n", 0), (b"7\n", 7), (b"255\n", 255), (b"99999999999999999999\n", 255),
     (b"abc0\n", 255), (b"-1\n", 255), (b"x" * 20, 255), (b"12", None)],
)  # fmt: skip
def test_an_exit_status_not_written_by_the_init_alone_reads_as_a_failure(
    written: bytes, expected: int | None
) -> None:
    # A command can reach the init's status socket (pidfd_getfd) and write there: the
    # report must stay a status 0-255, and garbage must not leave the caller waiting.
    import socket as socketlib
    import subprocess as sp

    from agentkit.process.spawn import Launched

    ours, theirs = socketlib.socketpair()
    proc = sp.Popen(["true"])
    proc.wait()
    try:
        theirs.sendall(written)
        time.sleep(0.05)
        assert Launched(proc, ours, namespaced=True).status() == expected
    finally:
        ours.close()
        theirs.close()


def test_background_services_end_when_their_conversation_closes(workspace: Path) -> None:
    from agentkit.chat import Session

    n, m = marker(), marker()
    script = [calls(call("run_command", command=f"setsid sleep {n} &")), "started"]
    with FakeOpenAIServer(script) as server:
        settings = Settings(
            model="m", base_url=server.base_url, api_key="k", command_background_services=True
        )
        other = make_ctx(workspace, command_background_services=True)
        REGISTRY.execute("run_command", {"command": f"setsid sleep {m} &"}, other)
        try:
            with Session(workspace, settings) as session:
                assert session.send("go").final_text == "started"
                assert wait_until(lambda: len(running_with(f"sleep {n}")) == 1, 10)
            # Closed: its service is gone; another owner's is not.
            assert wait_until(lambda: running_with(f"sleep {n}") == [], 10)
            assert len(running_with(f"sleep {m}")) == 1
        finally:
            from agentkit.process.spawn import end_background_services

            end_background_services()
            assert wait_until(lambda: running_with(f"sleep {m}") == [], 10)


@pytest.mark.parametrize("closed", ["before_launch", "while_running"])
def test_the_namespace_ends_with_the_owners_socket_even_without_a_death_signal(
    workspace: Path, command_sandbox: str, closed: str
) -> None:
    # An owner killed before its launch set any parent-death signal (between fork and
    # setpriv's prctl, or inside bwrap's or unshare's start) leaves only the control
    # socket to tie the command to it. The launch argv here has no such signal at all,
    # so only the socket can end it: at EOF every process in the namespace must die.
    import socket as socketlib

    from agentkit.process import sandbox as _sandbox
    from agentkit.process import spawn as _command_launch

    if _command_launch.launch_mode() != "pidns" and command_sandbox != "bwrap":
        pytest.skip("no pid namespaces here")
    n = marker()
    command = f"setsid sleep {n} >/dev/null & sleep {n}"
    sandbox = None
    if command_sandbox == "bwrap":
        sandbox = _sandbox.bwrap_argv(
            "bwrap", workspace=workspace, cwd=workspace, mode="workspace-write", network="none"
        )
    argv = _command_launch.launch_argv("/bin/sh", command, sandbox)
    # Strip every parent-death tie: setpriv's, unshare's --kill-child, bwrap's own.
    while argv[0] == "setpriv":
        argv = argv[argv.index("--") + 1 :]
    argv = [a for a in argv if a not in ("--kill-child", "--die-with-parent")]
    ours, theirs = socketlib.socketpair()
    if closed == "before_launch":
        ours.close()
    proc = subprocess.Popen(argv, stdin=theirs, stdout=subprocess.DEVNULL, cwd=workspace)
    theirs.close()
    try:
        if closed == "while_running":
            assert wait_until(lambda: len(running_with(f"sleep {n}")) == 2, 10)
            ours.close()
        proc.wait(timeout=10)
        assert wait_until(lambda: not running_with(f"sleep {n}"), 10), running_with(f"sleep {n}")
    finally:
        proc.kill()
        reap(f"sleep {n}")


def test_a_cancelled_command_that_ends_at_sigterm_is_not_held_for_the_grace(
    workspace: Path,
) -> None:
    # The grace is a most, not a wait: `sleep` dies at SIGTERM, so a 30 s grace must
    # not hold the call (a trial saw every cancel take the full grace: the namespace's
    # init ignores SIGTERM and was waited for).
    import threading

    n = marker()
    ctx = make_ctx(workspace, command_kill_grace=30)
    threading.Timer(0.5, ctx.cancel.set).start()
    started = time.monotonic()
    result = REGISTRY.execute("run_command", {"command": f"sleep {n}"}, ctx)
    assert result.error_code == "killed", result.output
    assert time.monotonic() - started < 20, result.output
    assert not running_with(f"sleep {n}")


def test_a_process_flood_ends_at_the_timeout_with_nothing_left(workspace: Path) -> None:
    # Thousands of processes (a fork bomb, bounded here to spare the machine): the
    # timeout still ends the command promptly and every process goes (a trial saw a
    # 60 s timeout take 243 s while each process was signalled and waited for).
    n = marker()
    command = f"for i in $(seq 1500); do sleep {n} & done; sleep {n}"
    ctx = make_ctx(workspace, command_kill_grace=30)
    started = time.monotonic()
    result = REGISTRY.execute("run_command", {"command": command, "timeout_seconds": 3}, ctx)
    elapsed = time.monotonic() - started
    try:
        assert result.error_code == "timeout" or "timeout" in result.output, result.output[-300:]
        assert elapsed < 30, (elapsed, result.output[-300:])  # not the 30 s grace, nor worse
        assert wait_until(lambda: not running_with(f"sleep {n}"), 20)
    finally:
        reap(f"sleep {n}")


@pytest.mark.parametrize("how", ["ignores_sigterm", "kills_its_group"])
def test_a_timed_out_command_ends_even_when_the_init_watcher_is_gone(
    workspace: Path, how: str
) -> None:
    # The timeout's SIGTERM reaches the init's whole process group, the init's
    # watcher included; a command that ignores SIGTERM then outlived the release
    # (found by a review). `kill -9 0` removes the watcher too.
    n = marker()
    command = {
        "ignores_sigterm": f"trap '' TERM; sleep {n}",
        # A subshell SIGKILLs the whole group (the watcher too) but the TERM-proof one.
        "kills_its_group": f"(trap '' TERM; setsid sleep {n}) & (sleep 0.3; kill -9 0) & wait",
    }[how]
    ctx = make_ctx(workspace)
    result = REGISTRY.execute("run_command", {"command": command, "timeout_seconds": 2}, ctx)
    try:
        assert wait_until(lambda: not running_with(f"sleep {n}"), 15), result.output
    finally:
        reap(f"sleep {n}")


OWNED = """
import sys, threading
from agentkit.process.spawn import start_owned

started = []
# Called from a thread that ends at once: the program must outlive that thread (it is
# forked by the spawner thread) and die only with this process.
caller = threading.Thread(target=lambda: started.append(start_owned(["sleep", sys.argv[1]])))
caller.start()
caller.join()
print("started", flush=True)
sys.stdin.read()
"""


def test_a_program_started_owned_dies_with_its_owner_even_by_sigkill() -> None:
    """start_owned (MCP servers and the local model server use owned_argv too): alive
    after the thread that asked for it ended, gone when its owner is SIGKILLed."""
    n = marker()
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNED, n],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "started\n"
        assert wait_until(lambda: len(running_with(f"sleep {n}")) == 1, 10)
        time.sleep(0.3)
        assert len(running_with(f"sleep {n}")) == 1  # the asking thread's end killed nothing
        owner.kill()
        owner.wait(10)
        assert wait_until(lambda: running_with(f"sleep {n}") == [], 10)
    finally:
        owner.kill()
        reap(f"sleep {n}")

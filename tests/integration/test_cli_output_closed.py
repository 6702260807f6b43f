"""Output that cannot be written: ``agentkit`` as a real process whose standard output
is a pipe nobody reads any more, or ``/dev/full``.

A reader that has gone (``| head``) ends the command as the pipe's signal would:
quietly, with 141 (128 + SIGPIPE). Any other write error (``/dev/full``) is one line
on stderr and status 1. Either way a ``run``, a ``chat`` or ``acp`` is cancelled on
the way, its sub-agents and commands ended and the conversation saved. Never a
traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from cli_helpers import REPO, cli_env, start_agentkit
from subagent_helpers import call, calls

from agentkit.testing import FakeOpenAIServer

GONE = 128 + signal.SIGPIPE
INITIALIZE = (
    b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}\n'
)
needs_dev_full = pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
EXIT_BOUND = 60.0
"""Seconds the process may take to end (a hang detector: the model's command sleeps
for 120 s, so a run that was not cancelled never ends in time)."""


def closed_pipe() -> int:
    """The write end of a pipe whose read end is already closed (a reader that left)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return write_end


def ended(proc: subprocess.Popen[str]) -> str:
    """Wait for the process (killed past the bound, which fails the test); its stderr."""
    try:
        _, err = proc.communicate(timeout=EXIT_BOUND)
    except subprocess.TimeoutExpired:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.communicate()
        raise
    assert "Traceback" not in err and "internal error" not in err, err
    return err


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_the_top_level_output_to_a_reader_that_left_ends_quietly_with_141(flag: str) -> None:
    pipe = closed_pipe()
    try:
        proc = start_agentkit(flag, stdout=pipe, env=cli_env())
    finally:
        os.close(pipe)
    assert ended(proc) == ""
    assert proc.returncode == GONE


@needs_dev_full
@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_the_top_level_output_to_a_full_disk_is_one_line_and_status_1(flag: str) -> None:
    with open("/dev/full", "w") as full:
        proc = start_agentkit(flag, stdout=full.fileno(), env=cli_env())
    err = ended(proc)
    assert proc.returncode == 1
    assert err == f"agentkit: cannot write the output: {os.strerror(28)}\n"


def script(request: dict[str, Any]) -> Any:
    """The main agent starts a long command, then is done."""
    if any(m["role"] == "tool" for m in request["messages"]):
        return "done"
    return calls(call("run_command", command="sleep 120", timeout_seconds=300))


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(script) as server:
        yield server


def saved_state(workspace: Path) -> str:
    (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    state: str = json.loads(saved.read_text())["state"]
    return state


@contextmanager
def broken_output(kind: str) -> Iterator[tuple[int, int, str]]:
    """Standard output that cannot be written: ``(fd, status, stderr line)``. "gone":
    a pipe whose reader left (141, quietly); "full": ``/dev/full`` (1, one line)."""
    if kind == "gone":
        pipe = closed_pipe()
        try:
            yield pipe, GONE, ""
        finally:
            os.close(pipe)
    else:
        with open("/dev/full", "wb") as full:
            yield full.fileno(), 1, f"agentkit: cannot write the output: {os.strerror(28)}\n"


KINDS = pytest.mark.parametrize("kind", ["gone", pytest.param("full", marks=needs_dev_full)])


@KINDS
def test_a_run_whose_output_fails_is_cancelled_saved_and_says_so(
    model: FakeOpenAIServer, workspace: Path, kind: str
) -> None:
    """Before: the failed progress line was ignored and the run went on, its command
    sleeping 120 s for no one; then "internal error" (full) or 1 (gone)."""
    with broken_output(kind) as (out, status, line):
        proc = start_agentkit(
            "run", "go", "-w", str(workspace), stdout=out, env=cli_env(model.base_url)
        )
    err = ended(proc)
    assert proc.returncode == status, err
    assert err.startswith(line) and "interrupted: sub-agents stopped, conversation saved" in err
    assert saved_state(workspace) == "idle"

    with broken_output(kind) as (out, status, line):  # and `agentkit show` of what it saved
        proc = start_agentkit("show", "-w", str(workspace), stdout=out, env=cli_env())
    assert ended(proc) == line
    assert proc.returncode == status


def test_a_run_whose_reader_leaves_during_a_quiet_command_ends_then(
    model: FakeOpenAIServer, workspace: Path
) -> None:
    """The reader takes the first line (the command's tool call) and leaves while the
    command runs and nothing is written: the run sees it at once, not 120 s later at
    its next line."""
    read_end, write_end = os.pipe()
    try:
        proc = start_agentkit(
            "run", "go", "-w", str(workspace), stdout=write_end, env=cli_env(model.base_url)
        )
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        assert b"run_command" in reader.readline()
    err = ended(proc)
    assert proc.returncode == GONE, err
    assert "interrupted: sub-agents stopped, conversation saved" in err


@KINDS
def test_a_jsonl_chat_whose_output_fails_ends_and_says_so(
    model: FakeOpenAIServer, workspace: Path, kind: str
) -> None:
    """Before: it ended with 0, as if its input had ended."""
    read_in, write_in = os.pipe()
    try:
        with broken_output(kind) as (out, status, line):
            proc = start_agentkit(
                "chat", "--jsonl", "-w", str(workspace), stdout=out, stdin=read_in,
                env=cli_env(model.base_url),
            )  # fmt: skip
    finally:
        os.close(read_in)
    try:
        os.write(write_in, b"go\n")  # its events are the first output; input stays open
        err = ended(proc)
    finally:
        os.close(write_in)
    assert proc.returncode == status, err
    assert err.startswith(line)
    assert saved_state(workspace) == "idle"


@KINDS
def test_acp_whose_editor_stopped_reading_ends_and_says_so(workspace: Path, kind: str) -> None:
    """The editor's input stays open but nobody reads the answers: before, the agent
    served on (prompts, commands) until its input ended, then exited 0."""
    read_in, write_in = os.pipe()
    try:
        with broken_output(kind) as (out, status, line):
            proc = start_agentkit(
                "acp", "--demo", "-w", str(workspace), stdout=out, stdin=read_in, env=cli_env()
            )
    finally:
        os.close(read_in)
    try:
        os.write(write_in, INITIALIZE)
        err = ended(proc)
    finally:
        os.close(write_in)
    assert proc.returncode == status, err
    assert err.endswith(line)


@needs_dev_full
def test_a_diagnostic_that_cannot_be_written_does_not_stop_the_command(workspace: Path) -> None:
    """``2>/dev/full``: the demo's banner on stderr cannot be written. Before, the run
    ended with 1 before it began; now the lines are dropped and the run does its work."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "agentkit", "run", "--demo", "summarize", "-w", str(workspace)],
            env=cli_env(None, AGENTKIT_DEMO_LATENCY="0"),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=full,
            text=True,
            timeout=EXIT_BOUND,
        )
    assert done.returncode == 0
    assert "scripted demo: no real model is answering" in done.stdout
    assert saved_state(workspace) == "idle"


def test_acp_whose_editor_stops_reading_while_nothing_is_written_ends(workspace: Path) -> None:
    """The editor reads the answer to ``initialize``, then closes its end of the agent's
    output and keeps its input open: before, the agent served on until that input
    ended, since it only learns of a closed pipe by writing."""
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    try:
        proc = start_agentkit(
            "acp", "--demo", "-w", str(workspace), stdout=write_out, stdin=read_in, env=cli_env()
        )
    finally:
        os.close(read_in)
        os.close(write_out)
    try:
        os.write(write_in, INITIALIZE)
        with os.fdopen(read_out, "rb") as answers:
            assert json.loads(answers.readline())["id"] == 1
        err = ended(proc)  # the reader is closed; nothing more is asked
    finally:
        os.close(write_in)
    assert proc.returncode == GONE, err


def test_serve_keeps_an_ignored_sigint_and_outlives_its_stdout_reader(
    model: FakeOpenAIServer, workspace: Path
) -> None:
    """``agentkit serve | head -1 &`` from a script: SIGINT was ignored when it started
    (before, uvicorn's handler took it and the server stopped, with 0), and the reader
    of its status lines leaves after the first (before, the lines said later raised:
    a traceback, and "Application shutdown failed"). SIGTERM still ends it, with 143."""
    import httpx

    from agentkit.webchat.serve import free_port

    port = free_port()
    read_out, write_out = os.pipe()
    env = cli_env(model.base_url, AGENTKIT_SUBAGENT_START_METHOD="spawn")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentkit", "serve", "-w", str(workspace), "--port", str(port)],
            env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=write_out,
            stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )  # fmt: skip
    finally:
        os.close(write_out)
    url = f"http://127.0.0.1:{port}/api/conversations"
    try:
        with os.fdopen(read_out, "rb") as reader:
            assert b"agentkit serve: open" in reader.readline()
        assert httpx.post(url, json={}, timeout=30).status_code == 201
        proc.send_signal(signal.SIGINT)
        for _ in range(3):  # still serving, well after the signal arrived
            assert httpx.get(url, timeout=30).status_code == 200
            assert proc.poll() is None
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        err = ended(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "shutdown failed" not in err
    assert saved_state(workspace) == "idle"


def test_a_run_whose_terminal_closes_during_a_quiet_command_ends_with_129(
    model: FakeOpenAIServer, workspace: Path
) -> None:
    """The terminal's window closes while the command sleeps (a pty whose other end is
    closed; not the process's controlling terminal, so no SIGHUP comes): before, the
    run went on to its end, then said "cannot write the output: Input/output error"
    and ended with 1. A hang-up seen at a write or between writes is SIGHUP's 129."""
    import pty

    main_end, terminal_end = pty.openpty()
    try:
        proc = start_agentkit(
            "run", "go", "-w", str(workspace), stdout=terminal_end, new_session=True,
            env=cli_env(model.base_url, TERM="xterm", COLUMNS="100", LINES="30"),
        )  # fmt: skip
    finally:
        os.close(terminal_end)
    try:
        shown = b""
        while b"run_command" not in shown:  # the command's tool call is on screen
            chunk = os.read(main_end, 65536)
            assert chunk, shown
            shown += chunk
    finally:
        os.close(main_end)  # the window closes
    err = ended(proc)
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert "interrupted: sub-agents stopped, conversation saved" in err
    assert saved_state(workspace) == "idle"

"""Output that cannot be written: ``agentkit`` as a real process whose standard output
is a pipe nobody reads any more, or ``/dev/full``.

A reader that has gone (``| head``) ends the command as the pipe's signal would:
quietly, with 141 (128 + SIGPIPE); a ``run`` or a ``chat`` is cancelled on the way,
its sub-agents and commands ended and the conversation saved. Any other write error
is one line on stderr and status 1. Never a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from cli_helpers import REPO, cli_env
from subagent_helpers import call, calls

from agentkit.testing import FakeOpenAIServer

GONE = 128 + signal.SIGPIPE
EXIT_BOUND = 60.0
"""Seconds the process may take to end (a hang detector: the model's command sleeps
for 120 s, so a run that was not cancelled never ends in time)."""


def closed_pipe() -> int:
    """The write end of a pipe whose read end is already closed (a reader that left)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return write_end


def agentkit(
    *args: str, stdout: int, env: dict[str, str], stdin: int = subprocess.DEVNULL
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentkit", *args],
        env=env,
        cwd=REPO,
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


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
        proc = agentkit(flag, stdout=pipe, env=cli_env())
    finally:
        os.close(pipe)
    assert ended(proc) == ""
    assert proc.returncode == GONE


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_the_top_level_output_to_a_full_disk_is_one_line_and_status_1(flag: str) -> None:
    with open("/dev/full", "w") as full:
        proc = agentkit(flag, stdout=full.fileno(), env=cli_env())
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


def test_a_run_whose_reader_left_is_cancelled_saved_and_ends_with_141(
    model: FakeOpenAIServer, workspace: Path
) -> None:
    """Before: the failed progress line was ignored and the run went on, its command
    sleeping 120 s for no one."""
    pipe = closed_pipe()
    try:
        proc = agentkit("run", "go", "-w", str(workspace), stdout=pipe, env=cli_env(model.base_url))
    finally:
        os.close(pipe)
    err = ended(proc)
    assert proc.returncode == GONE, err
    assert "interrupted: sub-agents stopped, conversation saved" in err
    assert saved_state(workspace) == "idle"

    pipe = closed_pipe()  # and `agentkit show | head` of what it saved
    try:
        proc = agentkit("show", "-w", str(workspace), stdout=pipe, env=cli_env())
    finally:
        os.close(pipe)
    assert ended(proc) == ""
    assert proc.returncode == GONE


def test_a_jsonl_chat_whose_reader_left_ends_with_141(
    model: FakeOpenAIServer, workspace: Path
) -> None:
    """Before: it ended with 0, as if its input had ended."""
    read_in, write_in = os.pipe()
    pipe = closed_pipe()
    try:
        proc = agentkit(
            "chat",
            "--jsonl",
            "-w",
            str(workspace),
            stdout=pipe,
            stdin=read_in,
            env=cli_env(model.base_url),
        )
    finally:
        os.close(pipe)
        os.close(read_in)
    try:
        os.write(write_in, b"go\n")  # its events are the first output; input stays open
        err = ended(proc)
    finally:
        os.close(write_in)
    assert proc.returncode == GONE, err
    assert saved_state(workspace) == "idle"

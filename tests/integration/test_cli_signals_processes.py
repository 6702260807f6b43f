"""Signals to ``agentkit run`` as a real process: once, twice, three times quickly.

Three moments (issue 20 items 1 and 12): the main agent in a slow model call; a
blocking sub-agent whose worker is stopped (SIGSTOP, so it reads nothing from its
pipe) in a slow model call; a ``run_command`` child running. Whatever the count,
the process must exit with 128 + the first signal, within a bound, and leave the
conversation file and every sub-agent record final (never ``running``).

A trial saw the old handler, which did the cancelling itself, deadlock when a
second signal re-entered it during a pipe send (1 run in 40 hung until SIGKILL),
and three quick signals exit at once with the records left ``running``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from cli_helpers import cli_env, start_agentkit
from shell_helpers import has_child_named
from subagent_helpers import call, calls, running, wait_until, who

from agentkit.testing import FakeOpenAIServer, Reply

pytestmark = pytest.mark.slow

EXIT_BOUND = 30.0
"""Seconds the process may take to exit after the signals (a hang detector: the
command's own bound after a second signal is 5 s)."""


class Script:
    """The model: the task word picks the moment the signals come in."""

    def __init__(self) -> None:
        self.waiting: set[str] = set()  # moments whose slow call has arrived

    def __call__(self, request: dict[str, Any]) -> Any:
        messages = request["messages"]
        agent = who(request)
        if agent is not None:  # the blocking sub-agent: a slow model call
            self.waiting.add("stopped-worker")
            return Reply(content="too late", latency=120)
        task = next(m["content"] for m in messages if m["role"] == "user")
        answered = sum(1 for m in messages if m["role"] == "assistant")
        if "slow-model" in task:
            self.waiting.add("slow-model")
            return Reply(content="too late", latency=120)
        if answered:
            return "done"
        if "command" in task:
            return calls(call("run_command", command="sleep 120", timeout_seconds=300))
        return calls(call("create_sub_agent", agent_id=1, summary="Stuck one", task="wait"))


@pytest.fixture(scope="module")
def model() -> Any:
    script = Script()
    with FakeOpenAIServer(script) as server:
        yield server, script


def _talking_to(root: int, port: int) -> list[psutil.Process]:
    """Processes below ``root`` with a connection to the model's ``port``."""
    found = []
    for proc in psutil.Process(root).children(recursive=True):
        try:
            if any(c.raddr and c.raddr.port == port for c in proc.net_connections("tcp")):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _ready(moment: str, proc: subprocess.Popen[str], script: Script, port: int) -> list[Any]:
    """Wait until ``moment`` is reached; stop the worker for "stopped-worker".
    Returns the processes to resume and check afterwards."""
    if moment == "command":
        assert wait_until(lambda: has_child_named(proc.pid, "sleep"), 30), (
            "the command never started"
        )
        return psutil.Process(proc.pid).children(recursive=True)
    assert wait_until(lambda: moment in script.waiting, 30), f"{moment}: the model was not asked"
    if moment != "stopped-worker":
        return []
    assert wait_until(lambda: bool(_talking_to(proc.pid, port)), 30)
    workers = _talking_to(proc.pid, port)
    for worker in workers:
        worker.suspend()  # SIGSTOP: it reads nothing from its pipe any more
    return workers


def _final_files(workspace: Path) -> tuple[str, list[str], list[str]]:
    (saved,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    conversation = json.loads(saved.read_text())
    rows = [row["status"] for row in conversation.get("subagents", [])]
    records = [
        json.loads(path.read_text())["status"]
        for path in (workspace / "sub_agent_results").glob("agent_*/.subagent/conversations.json")
    ]
    return conversation["state"], rows, records


@pytest.mark.parametrize(
    ("moment", "signum", "count"),
    [
        ("slow-model", signal.SIGTERM, 1),
        ("slow-model", signal.SIGTERM, 2),
        ("slow-model", signal.SIGINT, 3),
        ("stopped-worker", signal.SIGTERM, 1),
        ("stopped-worker", signal.SIGTERM, 2),
        ("stopped-worker", signal.SIGTERM, 3),
        ("command", signal.SIGTERM, 1),
        ("command", signal.SIGHUP, 2),
        ("command", signal.SIGTERM, 3),
    ],
)
def test_signals_end_the_run_with_final_files(
    model: Any, workspace: Path, moment: str, signum: int, count: int
) -> None:
    server, script = model
    script.waiting.discard(moment)
    proc = start_agentkit(
        "run", f"go {moment}", "-w", str(workspace), env=cli_env(server.base_url), new_session=True
    )
    family: list[Any] = []
    try:
        family = _ready(moment, proc, script, server.port)
        for sent in range(count):
            if sent:
                time.sleep(0.01 * sent)  # quick: while the first is being acted on
            proc.send_signal(signum)
        _, err = proc.communicate(timeout=EXIT_BOUND)
    finally:
        for leftover in family:
            try:
                leftover.resume()
            except psutil.Error:
                pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and "internal error" not in err, err
    state, rows, records = _final_files(workspace)
    assert state == "idle"
    if moment == "stopped-worker":
        assert rows == ["terminated"] and records == ["terminated"], (rows, records)
    # Gone or a zombie: one whose parent is gone is reaped by PID 1, which may take
    # seconds (psutil.wait_procs waited for that).
    wait_until(lambda: not running(family), 10)
    assert not running(family)


def test_a_second_signal_bounds_a_cleanup_that_never_ends(tmp_path: Path) -> None:
    script = tmp_path / "stuck.py"
    script.write_text(
        "import time\n"
        "from agentkit.cli.signals import Signals\n"
        "with Signals(leave_seconds=0.5) as signals:\n"
        "    print('ready', flush=True)\n"
        "    signals.leaving.wait()\n"
        "    print('cleaning up', flush=True)\n"
        "    while True:\n"
        "        time.sleep(0.05)  # a cleanup stuck for ever\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline() == "cleaning up\n"
        proc.send_signal(signal.SIGINT)  # leave now
        _, err = proc.communicate(timeout=EXIT_BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143  # 128 + the first signal
    assert "leaving now" in err


# ---------------------------------------------------------------- agentkit serve
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_serve_leaves_cleanly_on_sigterm_and_sighup(
    model: Any, workspace: Path, signum: int
) -> None:
    import httpx

    from agentkit.webchat.serve import free_port

    server, script = model
    script.waiting.discard("slow-model")
    port = free_port()
    # No sub-agent here: workers would start by spawn, so serve does not start and
    # preload the worker process server beside it (a second of CPU).
    env = cli_env(server.base_url, AGENTKIT_SUBAGENT_START_METHOD="spawn")
    proc = start_agentkit("serve", "-w", str(workspace), "--port", str(port), env=env)
    try:
        url = f"http://127.0.0.1:{port}/api/conversations"

        def created() -> Any:
            try:
                return httpx.post(url, json={}, timeout=5)
            except httpx.TransportError:
                return None

        assert wait_until(lambda: created() is not None, 60)
        conversation = httpx.get(url, timeout=5).json()["conversations"][0]["id"]
        sent = httpx.post(f"{url}/{conversation}/messages", json={"text": "go slow-model"})
        assert sent.status_code == 202
        assert wait_until(lambda: "slow-model" in script.waiting, 30)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=EXIT_BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err
    states = {
        json.loads(path.read_text())["state"]
        for path in (workspace / ".agentkit" / "conversations").glob("*.json")
    }
    assert states == {"idle"}

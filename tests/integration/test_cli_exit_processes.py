"""The ``agentkit`` process ends at once after its command (agentkit.cli.entry), yet
does what a normal exit does that matters: atexit handlers run, buffered output is
written, the status is the command's, and a non-daemon thread is waited for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_helpers import REPO, cli_env

ENDING = """
import atexit, sys, threading, time
from agentkit.cli.entry import exit_now

atexit.register(lambda: print("handler ran"))  # not flushed either
sys.stdout.write("buffered;")  # not flushed yet
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread done;"))).start()
exit_now(3)
"""


def ending(mode: str) -> subprocess.CompletedProcess[str]:
    # Buffered output (cli_env makes it unbuffered): what is unflushed at the end shows.
    env = {k: v for k, v in cli_env().items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-c", ENDING, mode],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_handlers_run_the_output_is_written_and_the_status_kept() -> None:
    done = ending("plain")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered;handler ran\n"


def test_a_running_thread_is_waited_for_as_at_a_normal_exit() -> None:
    done = ending("thread")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered;thread done;\nhandler ran\n"


def test_the_command_and_python_m_agentkit_end_with_the_commands_status(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("agentkit")  # the console script, when installed
    commands = [[sys.executable, "-m", "agentkit"], *([[str(script)]] if script.exists() else [])]
    for command in commands:
        done = subprocess.run(
            [*command, "transcript", "7", "-w", str(tmp_path)],
            env=cli_env(),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.startswith("agentkit: no conversation yet"), done.stderr


def test_a_run_with_stdout_or_stderr_closed_runs_and_keeps_its_output_apart(
    tmp_path: Path,
) -> None:
    """Regression: ``agentkit run x >&-`` failed with an internal error (None has no
    isatty) and left an empty conversation; with ``2>&-`` the error line went into the
    JSON file that stdout was writing."""
    from agentkit.testing import FakeOpenAIServer

    with FakeOpenAIServer(["First answer.", "Second answer."]) as server:
        env = cli_env(server.base_url)
        closed_out = subprocess.run(
            ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "agentkit"]
            + ["run", "one", "-w", str(tmp_path)],
            env=env,
            cwd=REPO,
            capture_output=False,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
        json_file = tmp_path / "out.json"
        closed_err = subprocess.run(
            ["sh", "-c", 'exec "$@" 2>&- >"$OUT"', "sh", sys.executable, "-m", "agentkit"]
            + ["run", "--json", "two", "-w", str(tmp_path)],
            env={**env, "OUT": str(json_file)},
            cwd=REPO,
            text=True,
            timeout=120,
        )
    assert closed_out.returncode == 0, closed_out.stderr
    assert "internal error" not in closed_out.stderr
    assert closed_err.returncode == 0
    result = json.loads(json_file.read_text())  # the JSON object alone
    assert result["final_text"] == "Second answer."
    saved = list((tmp_path / ".agentkit" / "conversations").glob("*.json"))
    texts = [json.loads(p.read_text()) for p in saved]
    answers = [m.get("content") for t in texts for m in t.get("messages", [])]
    assert "First answer." in answers and "Second answer." in answers

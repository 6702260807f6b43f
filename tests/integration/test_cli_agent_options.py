"""Shared agent options that are new on a command (issue 35), through the real command
line against FakeOpenAIServer: ``chat --yes`` allows what the approval rules would
ask about, as ``run --yes`` does; ``--log-level`` reaches agentkit's logs. Bad settings
are said before any banner, demo copy or model server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import REPO, agentkit, cli_env

from agentkit.testing import FakeOpenAIServer, Reply

RULES = json.dumps({"write_file": "ask"})


def chat(workspace: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentkit", "chat", "--jsonl", "-w", str(workspace), *flags],
        env=env,
        cwd=REPO,
        input="write it\n",
        capture_output=True,
        text=True,
        timeout=120,
    )


def script() -> list[Reply]:
    call = {"name": "write_file", "arguments": {"path": "t.txt", "content": "x\n"}}
    return [Reply(tool_calls=[call]), Reply(content="done")]


def test_chat_yes_allows_what_the_rules_ask_about(workspace: Path) -> None:
    with FakeOpenAIServer(script()) as server:
        env = cli_env(server.base_url, AGENTKIT_APPROVALS=RULES, AGENTKIT_TOKENIZER="estimate")
        proc = chat(workspace, env, "--yes")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    answers = [e for e in events if e["type"] == "ApprovalAnswered"]
    # Settled by approvals_default = allow (at once, or by the end of input's answerer).
    assert [a["decision"] for a in answers] == ["allow"]
    assert (workspace / "t.txt").read_text() == "x\n"


def test_chat_without_yes_asks_and_no_one_answers(workspace: Path) -> None:
    with FakeOpenAIServer(script()) as server:
        env = cli_env(server.base_url, AGENTKIT_APPROVALS=RULES, AGENTKIT_TOKENIZER="estimate")
        proc = chat(workspace, env, "--log-level", "debug")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    answers = [e for e in events if e["type"] == "ApprovalAnswered"]
    # Asked; the input ended with no answer: denied, "no one to ask".
    assert [(a["decision"], a["note"]) for a in answers] == [("deny", "no one to ask")]
    assert not (workspace / "t.txt").exists()
    assert "token counting: estimate" in proc.stderr  # a debug line: --log-level reached it


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "hello", "--demo"],
        ["chat", "--demo", "--jsonl"],
        ["serve", "--demo", "--port", "0"],
        ["acp", "--demo"],
        ["demo"],
    ],
)
def test_bad_settings_are_said_before_any_banner_or_demo_copy(
    argv: list[str], tmp_path: Path
) -> None:
    # A trial's AGENTKIT_TEMPERATURE=nan agentkit run hello --demo printed the demo's
    # banner and made its copy before saying the settings were bad.
    env = cli_env(AGENTKIT_TEMPERATURE="nan", TMPDIR=str(tmp_path))
    proc = agentkit(*argv, env=env)
    assert proc.returncode == 2, proc.stderr
    said = (proc.stdout + proc.stderr).strip()
    assert said == "agentkit: invalid settings: temperature: Input should be a finite number"
    assert list(tmp_path.glob("agentkit-demo-*")) == []

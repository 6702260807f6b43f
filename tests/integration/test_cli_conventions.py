"""The command line's conventions (issue 26): ``agentkit help``, "did you mean", help for
every command and positional, ``agentkit conversations``, and errors that name the
settings of the interface in use (CLI flags on the command line, ``Settings(...)`` in
Python). Real subprocesses, as a person types them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import agentkit, cli_env

from agentkit import Agent, Settings
from agentkit.errors import ConfigurationError


def test_help_command_prints_the_main_help_and_each_command_s() -> None:
    env = cli_env()
    main = agentkit("help", env=env)
    assert main.returncode == 0 and "COMMAND" in main.stdout and "conversations" in main.stdout
    chat = agentkit("help", "chat", env=env)
    assert chat.returncode == 0 and chat.stdout.startswith("usage: agentkit chat")
    assert "--demo" in chat.stdout and "--max-turns" in chat.stdout and "--no-stream" in chat.stdout


@pytest.mark.parametrize(
    ("typed", "suggested"), [("caht", "chat"), ("serv", "serve"), ("conversation", "conversations")]
)
def test_a_mistyped_command_gets_did_you_mean(typed: str, suggested: str) -> None:
    proc = agentkit(typed, env=cli_env())
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        f"agentkit: unknown command {typed!r}; did you mean {suggested!r}? "
        "(`agentkit help` lists the commands)"
    )
    assert agentkit("help", typed, env=cli_env()).returncode == 2


def test_every_command_and_positional_has_a_description() -> None:
    env = cli_env()
    listing = " ".join(agentkit("--help", env=env).stdout.split())
    assert "demo the whole machinery offline, on a scripted model" in listing
    assert "profiles list the agent profiles and check their files" in listing
    assert "conversations list a workspace's conversations" in listing
    commands = ("run", "chat", "serve", "show", "conversations", "transcript", "demo", "profiles")
    for command in (*commands, "help"):
        page = agentkit(command, "--help", env=env).stdout
        body = page.split("\n\n")[1]  # the description paragraph after usage
        assert not body.startswith(("options:", "positional")), (command, page)
    assert "the conversation (default: the latest" in agentkit("show", "--help", env=env).stdout
    assert "a conversation id, a sub-agent id" in agentkit("transcript", "--help", env=env).stdout


def test_conversations_lists_a_workspace_s_conversations(workspace: Path) -> None:
    folder = workspace / ".agentkit" / "conversations"
    folder.mkdir(parents=True)
    for cid, title, state, updated in (
        ("conv_old", "Count the lines", "idle", "2026-01-01T10:00:00Z"),
        ("conv_new", None, "waiting_for_subagents", "2026-01-02T10:00:00Z"),
    ):
        doc = {
            "conversation_id": cid, "title": title, "state": state, "updated_at": updated,
            "messages": [{"role": "user", "content": f"first words of {cid}"}],
            "subagents": [{"agent_id": 1, "status": "running"}], "stats": {"turns": 3},
        }  # fmt: skip
        (folder / f"{cid}.json").write_text(json.dumps(doc))
    proc = agentkit("conversations", "-w", str(workspace), env=cli_env())
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("conv_new") and lines[2].startswith("conv_old")  # newest first
    # Its file says waiting_for_subagents, but no process holds it: what it is now is
    # shown, in words (issue 20 item 4: views read live state, never a stale one), as
    # --json says it (a trial saw it listed as idle, as if it had ended well).
    assert " ended (process gone) " in lines[1] and "first words of conv_new" in lines[1]
    assert "Count the lines" in lines[2] and "waiting_for_subagents" not in proc.stdout
    assert "agentkit chat --continue ID" in lines[-1]
    data = json.loads(
        agentkit("conversations", "--json", "-w", str(workspace), env=cli_env()).stdout
    )
    assert [c["id"] for c in data["conversations"]] == ["conv_new", "conv_old"]
    empty = workspace / "empty"
    empty.mkdir()
    none = agentkit("conversations", "-w", str(empty), env=cli_env())
    assert none.returncode == 0 and "no conversations" in none.stdout


def test_python_missing_key_names_settings_and_the_cli_names_its_flags(workspace: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Agent(workspace=workspace, settings=Settings(model="m", api_key=None, base_url=None))
    assert "Settings(api_key=...)" in str(caught.value) and "OPENAI_API_KEY" in str(caught.value)
    assert "--api-key" not in str(caught.value)
    with pytest.raises(ConfigurationError) as caught:
        Agent(workspace=workspace, settings=Settings(model=None, api_key="k"))
    assert "Settings(model=...)" in str(caught.value) and "--model" not in str(caught.value)
    env = cli_env()
    env["AGENTKIT_MODEL"] = "m"
    proc = agentkit("run", "do it", "-w", str(workspace), env=env)
    assert proc.returncode == 2 and "--api-key" in proc.stderr and "Settings(" not in proc.stderr

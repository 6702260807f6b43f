"""``agentkit chat``'s /diff, /merge and /discard on isolated sub-agents (issue 34;
docs/guide/chat.md): a real chat process in JSON-lines mode, its main agent and
sub-agents played by FakeOpenAIServer, real workers on copies of a real git
repository; and the terminal in tmux for the colours and the discard's question."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import REPO, cli_env
from isolation_front_helpers import APP, git, make_repo, two_isolated_and_a_shared, version
from subagent_helpers import who
from test_chat_terminal import Tmux

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow


def run_chat(workspace: Path, server: FakeOpenAIServer, lines: list[str], *args: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "agentkit", "chat", "--jsonl", "-w", str(workspace), *args],
        env=cli_env(server.base_url), cwd=REPO, input="\n".join(lines) + "\n",
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Command results and errors, in order."""
    return [e for e in events if e["type"] in ("CommandResult", "Error")]


def test_diff_merge_conflict_and_discard_from_the_chat(workspace: Path) -> None:
    make_repo(workspace)
    head = git(workspace, "rev-parse", "HEAD")
    router = two_isolated_and_a_shared("done", "noted")
    lines = [
        "two versions",
        "/help",
        "/diff 1",
        "/merge 1 --dry-run",
        "/merge 1",
        "/merge 2",
        "/discard 2",
        "/discard 2 --yes",
        "/merge 2",
        "/merge 3",
        "/merge 9",
        "/merge x",
        "what now?",
    ]
    with FakeOpenAIServer(router) as server:
        events = run_chat(workspace, server, lines, "--subagent-isolation", "available")
        main = [r for r in server.requests if who(r) is None]
    (helped, diff, dry, merged, conflict, asked, dropped, again, shared, unknown, bad) = results(
        events
    )
    assert "/merge N" in helped["text"] and "/discard N" in helped["text"]
    # /diff: the summary line, then the unified diff of the one changed line.
    assert diff["ok"] and diff["text"].splitlines()[0] == (
        "sub-agent #1: 1 file changed, +1 -1 (not merged)"
    )
    assert "-    return 1\n+    return 2" in diff["text"]
    assert [f["path"] for f in diff["files"]] == ["app.py"] and diff["cut"] == 0
    # A dry run writes nothing; the merge writes app.py and moves no HEAD.
    assert dry["ok"] and dry["report"]["dry_run"] and dry["text"].startswith("dry run:")
    assert merged["ok"] and merged["report"]["files"] == ["app.py"]
    assert (workspace / "app.py").read_text() == version(1)
    assert git(workspace, "rev-parse", "HEAD") == head
    # The second touched the same line: one readable line for the file, nothing written.
    assert not conflict["ok"] and conflict["report"]["status"] == "conflicts"
    assert conflict["text"].splitlines() == [
        "sub-agent #2's changes conflict with the workspace in 1 file; nothing was written:",
        "  app.py: the workspace and the sub-agent changed the same lines",
    ]
    assert (workspace / "app.py").read_text() == version(1)
    # /discard asks first and drops nothing until confirmed.
    assert asked["confirm"] == "/discard 2 --yes" and "cannot be undone" in asked["text"]
    assert "discarded" not in asked  # else the confirmed one below was refused
    assert dropped["ok"] and dropped["discarded"] is True
    assert "agent-2" not in git(workspace, "branch", "--list", "agentkit/*")
    assert not again["ok"] and again["text"] == "sub-agent #2's changes were discarded already"
    assert not shared["ok"] and "worked in the workspace itself (shared)" in shared["text"]
    assert not unknown["ok"] and unknown["text"] == "no sub-agent #9 in this conversation"
    assert bad["type"] == "Error" and bad["message"].startswith("usage: /merge N [--dry-run]")
    # The main agent is told what the person did, at its next round.
    told = json.dumps(main[-1]["messages"], ensure_ascii=False)
    assert "the user merged the changes of sub-agent 1" in told
    assert "the user discarded the changes of sub-agent 2" in told


def test_the_commands_are_not_offered_with_isolation_off(workspace: Path) -> None:
    with FakeOpenAIServer("hi") as server:
        events = run_chat(workspace, server, ["/help", "/diff 1"])
    helped, refused = results(events)
    assert "/diff" not in helped["text"] and "/merge" not in helped["text"]
    assert refused["type"] == "Error" and "--subagent-isolation" in refused["message"]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_terminal_colours_the_diff_and_asks_before_discarding(
    workspace: Path, tmp_path: Path
) -> None:
    make_repo(workspace)
    with FakeOpenAIServer(two_isolated_and_a_shared()) as server:
        tmux = Tmux(tmp_path)
        env = cli_env(server.base_url, TERM="xterm-256color")
        command = f"{sys.executable} -m agentkit chat -w {workspace} --subagent-isolation always"
        tmux.start(command, env)
        try:
            tmux.wait_for("/help lists the commands")
            tmux.keys("two versions", "Enter")
            tmux.wait_for("done")
            tmux.keys("/diff 1", "Enter")
            tmux.wait_for("+    return 2")
            colours = subprocess.run(
                [*tmux.cmd, "capture-pane", "-e", "-p", "-S", "-200"],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            assert "\x1b[32m+    return 2" in colours and "\x1b[31m-    return 1" in colours
            tmux.keys("/discard 1", "Enter")
            tmux.wait_for("Drop it? [y/N]")
            tmux.keys("n", "Enter")
            tmux.wait_for("kept: nothing was dropped")
            assert "agent-1" in git(workspace, "branch", "--list", "agentkit/*")
            tmux.keys("/discard 1", "Enter")
            tmux.wait_for("kept: nothing was dropped")  # the first answer's line
            tmux.keys("y", "Enter")
            tmux.wait_for("discarded sub-agent #1's copy and branch")
            assert "agent-1" not in git(workspace, "branch", "--list", "agentkit/*")
            assert (workspace / "app.py").read_text() == APP
            tmux.keys("/quit", "Enter")
            assert tmux.exit_code() == 0
        finally:
            tmux.kill()

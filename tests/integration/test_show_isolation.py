"""``agentkit show`` on a conversation with isolated sub-agents (issue 34): each copy's
branch, its changes and whether it waits for a merge or a discard, read from the
records after the agent closed; a shared sub-agent shows no copy. Real workers on a
real git repository, the model played by FakeOpenAIServer."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_helpers import git
from subagent_helpers import Router, call, calls, finish, scripted_settings

from agentkit import Agent
from agentkit.cli.show import conversation_overview, render_overview
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow


def test_show_lists_the_copies_that_wait_for_a_merge_and_those_merged(workspace: Path) -> None:
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "a.txt").write_text("one\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "first")
    router = Router(
        main=["noted"],
        subs={
            1: [calls(call("write_file", path="b.txt", content="b\nb\n")), finish("Wrote b.txt.")],
            2: [calls(call("write_file", path="c.txt", content="c\n")), finish("Wrote c.txt.")],
            3: [calls(call("read_file", path="a.txt")), finish("Read a.txt, changed nothing.")],
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = scripted_settings(server, "en", subagent_isolation="available")
        with Agent(workspace=workspace, settings=settings) as agent:
            first = agent.spawn("write b", summary="write b", isolation="isolated")
            second = agent.spawn("write c", summary="write c", isolation="isolated")
            third = agent.spawn("read a", summary="read a", isolation="shared")
            for handle in (first, second, third):
                assert handle.result(timeout=60).status == "completed"
            assert second.merge().status == "merged"
            conversation_id = agent.conversation.id

    data = conversation_overview(workspace, conversation_id)
    rows = {row["agent_id"]: row for row in data["subagents"]}
    assert rows[1]["copy"] == {
        "branch": f"agentkit/{conversation_id}/agent-1",
        "changes": {"files": 1, "insertions": 2, "deletions": 0},
        "state": "unmerged",
    }
    assert rows[2]["copy"]["state"] == "merged"
    assert "copy" not in rows[3]  # shared: nothing to decide
    text = render_overview(data)
    assert "not merged yet: #1 " in text
    assert f"copy: agentkit/{conversation_id}/agent-1, 1 files +2 -0, not merged" in text
    assert f"copy: agentkit/{conversation_id}/agent-2, 1 files +1 -0, merged" in text

"""A deliverables folder another conversation's sub-agent used before: its files are
set aside, not overwritten (agentkit.subagent.reuse); within one conversation a
folder named again keeps its files. Real workers and FakeOpenAIServer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, scripted_settings

from agentkit.chat import Session
from agentkit.cli.show import conversation_overview, render_overview
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

FOLDER = "sub_agent_results/agent_1"


def writer(text: str) -> list[Any]:
    """Sub-agent 1's script: write findings.md with ``text``, then finish."""
    write = call("write_file", path=f"{FOLDER}/findings.md", content=text)
    return [calls(write), finish(f"wrote {text}")]


def create(agent_id: int, **extra: Any) -> dict[str, Any]:
    return calls(call("create_sub_agent", agent_id=agent_id, summary="s", task="t", **extra))


def test_a_second_conversation_sets_the_first_ones_files_aside(workspace: Path) -> None:
    """Regression (a new user's trial): sub-agent 1 of a second conversation replaced
    the first conversation's findings.md in sub_agent_results/agent_1."""
    folder = workspace / FOLDER
    subs: dict[int, list[Any]] = {1: writer("first")}
    with FakeOpenAIServer(Router(main=[create(1), "ok"], subs=subs)) as server:
        with Session(workspace, scripted_settings(server)) as first:
            first.send("go")
            earlier = json.loads((folder / ".subagent/conversations.json").read_text())
        subs[1] = writer("second")
        with Session(workspace, scripted_settings(server)) as second:
            second.send("go")
    assert (folder / "findings.md").read_text() == "second"
    kept = folder / ".subagent/earlier" / earlier["sub_conversation_id"]
    assert (kept / "findings.md").read_text() == "first"  # nothing lost
    archived = folder / f".subagent/conversations.{earlier['sub_conversation_id']}.json"
    assert json.loads(archived.read_text())["result_summary"] == "wrote first"
    # `agentkit show` of each conversation lists that conversation's own files.
    shown = {
        cid: conversation_overview(workspace, cid)["subagents"][0] for cid in (first.id, second.id)
    }
    moved = f"{FOLDER}/.subagent/earlier/{earlier['sub_conversation_id']}"
    assert shown[first.id]["deliverables_moved_to"] == moved
    assert shown[first.id]["deliverables_files"] == ["findings.md"]
    assert "deliverables_moved_to" not in shown[second.id]
    text = render_overview(conversation_overview(workspace, first.id))
    assert f"deliverables: {moved} (moved from {FOLDER}" in text


def test_a_folder_named_again_in_one_conversation_keeps_its_files(workspace: Path) -> None:
    folder = workspace / FOLDER
    again = create(2, deliverables_dir=FOLDER)  # build on agent 1's files, as asked
    subs = {
        1: writer("first"),
        2: [calls(call("read_file", path=f"{FOLDER}/findings.md")), finish()],
    }
    router = Router(main=[create(1), again, "ok"], subs=subs)
    with FakeOpenAIServer(router) as server, Session(workspace, scripted_settings(server)) as chat:
        chat.send("go")
        rows = {r["agent_id"]: r["status"] for r in chat.subagents()}
    assert rows == {1: "completed", 2: "completed"}
    assert (folder / "findings.md").read_text() == "first"
    assert not (folder / ".subagent/earlier").exists()

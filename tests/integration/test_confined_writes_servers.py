"""agentkit's own writes never leave the workspace through a link a command planted.

A sandboxed command may write only inside the workspace, but it can replace a folder
there by a symbolic link to anywhere. agentkit's own writes (sub-agent records, the
deliverables folder, file tools, command logs, conversations) must then refuse, not
follow the link: real processes, real files, the trial's own reproduction.
"""

from __future__ import annotations

import json
from pathlib import Path

from confined_helpers import (
    outside_fixture,  # noqa: F401  (the outside fixture)
    tree,
)
from subagent_helpers import Gate, Router, call, calls, finish, scripted_settings

from agentkit import Agent
from agentkit.testing import FakeOpenAIServer


def test_a_running_sub_agents_folder_swapped_for_a_link_gets_no_write_outside(
    workspace: Path, outside: Path
) -> None:
    # The trial: the main agent's command moves a running sub-agent's folder away
    # and leaves a link to a folder outside the workspace in its place.
    before = tree(outside)
    gate = Gate()
    # Once the worker has written its first record: a worker starting after the `mv`
    # would make the folder again, and `ln -s` would then put the link inside it.
    record = "sub_agent_results/agent_5/.subagent/conversations.json"
    swap = (
        f"while [ ! -e {record} ]; do sleep 0.05; done; "
        f"mv sub_agent_results/agent_5 moved_agent_5 && ln -s {outside} sub_agent_results/agent_5"
    )
    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=5, summary="s", task="t", run_in_background=True)),
            calls(call("run_command", command=swap)),
            gate.release("swapped"),
        ],
        subs={
            5: [
                gate.hold(calls(call("write_file", path="sub_agent_results/agent_5/a.md", content="x"))),
                finish("Wrote a.md in the deliverables folder as asked."),
            ]
        },
    )  # fmt: skip
    with (
        FakeOpenAIServer(router) as server,
        Agent(workspace, scripted_settings(server, language="en")) as agent,
    ):
        agent.run("go")
        status = agent.manager.agents[5].status
    assert (workspace / "sub_agent_results/agent_5").is_symlink()
    assert tree(outside) == before  # nothing written there: no .subagent, no a.md
    assert status in ("failed", "completed"), status
    # The record is not lost: it is where the folder went, or in the fallback folder.
    kept = list((workspace / ".agentkit" / "subagent-records").glob("*.json"))
    moved = workspace / "moved_agent_5" / ".subagent" / "conversations.json"
    assert kept or moved.is_file()
    record = json.loads((kept[0] if kept else moved).read_text())
    assert record["agent_id"] == 5


def test_a_deliverables_dir_through_a_link_inside_the_workspace_is_refused(
    workspace: Path,
) -> None:
    (workspace / "real").mkdir()
    (workspace / "alias").symlink_to(workspace / "real")
    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="s", task="t", deliverables_dir="alias/out")),
            "done",
        ],
        subs={1: [finish()]},
    )  # fmt: skip
    with FakeOpenAIServer(router) as server:
        with Agent(workspace, scripted_settings(server, language="en")) as agent:
            agent.run("go")
        tool = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    result = json.loads(tool["content"])
    assert result["success"] is False and "symbolic link" in result["error"], result


def test_deliverables_dir_is_stored_normalised(workspace: Path) -> None:
    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="s", task="t", deliverables_dir="x/./y/../out/")),
            "done",
        ],
        subs={1: [finish()]},
    )  # fmt: skip
    with (
        FakeOpenAIServer(router) as server,
        Agent(workspace, scripted_settings(server, language="en")) as agent,
    ):
        agent.run("go")
        assert agent.manager.agents[1].spec.deliverables_dir == "x/out"

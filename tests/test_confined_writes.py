"""agentkit's own writes never leave the workspace through a link a command planted.

A sandboxed command may write only inside the workspace, but it can replace a folder
there by a symbolic link to anywhere. agentkit's own writes (sub-agent records, the
deliverables folder, file tools, command logs, conversations) must then refuse, not
follow the link: real processes, real files, the trial's own reproduction.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from subagent_helpers import Gate, Router, call, calls, finish, scripted_settings

from agentkit import Agent
from agentkit.confined import list_files, open_folder, write_text_atomic
from agentkit.testing import FakeOpenAIServer
from agentkit.tools.files._fileio import atomic_write


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("not the model's\n")
    return folder


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


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


@pytest.mark.parametrize("where", ["top", "middle", "last"])
def test_confined_write_refuses_a_link_at_any_level(
    workspace: Path, outside: Path, where: str
) -> None:
    levels = {"top": "a", "middle": "a/b", "last": "a/b/c"}
    real = workspace / "real"
    (real / "b" / "c").mkdir(parents=True)
    link = workspace / levels[where]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    target = workspace / "a" / "b" / "c" / "file.json"
    with pytest.raises(OSError, match="symbolic link"):
        write_text_atomic(workspace, target, "{}")
    with pytest.raises(OSError, match="symbolic link"):
        atomic_write(target, b"x", None, workspace)
    assert tree(outside) == ["secret.txt"]


def test_confined_write_replaces_a_link_at_the_file_itself(workspace: Path, outside: Path) -> None:
    (workspace / "f.json").symlink_to(outside / "secret.txt")
    write_text_atomic(workspace, workspace / "f.json", "{}")
    assert not (workspace / "f.json").is_symlink()
    assert (outside / "secret.txt").read_text() == "not the model's\n"


def test_confined_paths_refuse_dot_dot_and_paths_outside(workspace: Path, outside: Path) -> None:
    with pytest.raises(OSError):
        open_folder(workspace, workspace / ".." / "outside")
    with pytest.raises(OSError):
        open_folder(workspace, outside)


def test_listing_does_not_follow_links(workspace: Path, outside: Path) -> None:
    folder = workspace / "d"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("a")
    (folder / "out").symlink_to(outside)
    (folder / ".subagent").mkdir()
    assert list_files(workspace, folder, skip=".subagent") == ["out", "sub/a.txt"]
    os.rename(folder, workspace / "d2")
    (workspace / "d").symlink_to(outside)
    with pytest.raises(OSError):
        list_files(workspace, folder)

"""Isolated sub-agents end to end (issue 34; docs/isolation.md): a main agent over
FakeOpenAIServer starts real workers, each on its own copy of a real git repository
(or of a plain folder), and brings their work back with merge_sub_agent or drops it
with discard_sub_agent_changes. Checked: two sub-agents editing one line of one file
(the first merges, the second reports the conflict and changes nothing); the caller's
uncommitted work seen by the child; a command's output and a deletion merged; a dry
run; a discard; the refusals; the user's HEAD, branch, index and uncommitted work
intact; ``always`` on a plain folder; and a main process killed with SIGKILL after its
child finished, whose reopened conversation still merges the child's work."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from git_helpers import git, make_repo
from subagent_helpers import (
    Gate,
    Router,
    call,
    calls,
    finish,
    scripted_settings,
    start_main,
    wait_until,
    who,
)

from agentkit import Agent
from agentkit.spawn import SubAgentRefused
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

APP = "def main():\n    return 1\n\nprint(main())\n"


def user_state(repo: Path) -> dict[str, str]:
    """HEAD, branch, staged diff and the user's commits: what a merge must never move."""
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "staged": git(repo, "diff", "--cached"),
        "log": git(repo, "log", "--oneline", "main"),
    }


def tool_jsons(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON tool results of the last tool batch in ``request``."""
    found: list[dict[str, Any]] = []
    for message in reversed(request["messages"]):
        if message["role"] != "tool":
            break
        found.insert(0, json.loads(message["content"]))
    return found


def main_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if who(r) is None]


def sub_tool_texts(server: FakeOpenAIServer, agent_id: int) -> list[str]:
    return [
        m["content"]
        for r in server.requests
        if who(r) == agent_id
        for m in r["messages"]
        if m["role"] == "tool"
    ]


def create(agent_id: int, task: str, **more: Any) -> dict[str, Any]:
    return call(
        "create_sub_agent",
        agent_id=agent_id,
        summary=f"isolated work {agent_id}",
        task=task,
        **more,
    )


def test_two_isolated_sub_agents_on_one_line_the_first_merges_the_second_conflicts(
    workspace: Path,
) -> None:
    make_repo(workspace, {"app.py": APP})
    before = user_state(workspace)
    seen: dict[str, str] = {}

    def merge_first(request: dict[str, Any]) -> Any:
        seen["after_children"] = (workspace / "app.py").read_text()
        return calls(call("merge_sub_agent", agent_id=1))

    router = Router(
        main=[
            calls(
                create(1, "return 2", isolation="isolated"),
                create(2, "return 3", isolation="isolated"),
            ),
            merge_first,
            calls(call("merge_sub_agent", agent_id=2)),
            "done",
        ],
        subs={
            i: [
                calls(call("write_file", path="app.py", content=APP.replace("1", str(i + 1)))),
                finish(f"Changed main to return {i + 1} in app.py as asked."),
            ]
            for i in (1, 2)
        },
    )
    with FakeOpenAIServer(router) as server:
        with Agent(workspace=workspace, settings=isolation_settings(server, "available")) as agent:
            result = agent.run("two versions")
        main = main_requests(server)
    assert result.status == "done", result
    # Neither child touched the workspace: their work waited in their copies.
    assert seen["after_children"] == APP
    created = tool_jsons(main[1])
    for data in created:
        assert data["success"] is True and data["status"] == "completed"
        assert data["changes"] == {"files": 1, "insertions": 1, "deletions": 1}
        assert data["merged"] is False
    first = tool_jsons(main[2])[0]
    assert list(first)[:2] == ["success", "agent_id"]
    assert first["success"] is True and first["status"] == "merged"
    assert first["files"] == ["app.py"] and first["dry_run"] is False
    second = tool_jsons(main[3])[0]
    assert second["success"] is False and second["status"] == "conflicts"
    assert second["files"] == [] and second["base_moved"] is True
    conflict = second["conflicts"][0]
    assert conflict["path"] == "app.py" and conflict["reason"] == "both_modified"
    assert "return 2" in conflict["workspace_change"]
    assert "return 3" in conflict["sub_agent_change"]
    # The first one's line is there, the second changed nothing, no conflict markers.
    assert (workspace / "app.py").read_text() == APP.replace("1", "2")
    assert user_state(workspace) == before  # nothing committed, staged or moved
    records = [
        json.loads(
            (workspace / f"sub_agent_results/agent_{i}/.subagent/conversations.json").read_text()
        )
        for i in (1, 2)
    ]
    assert [r["merged"] for r in records] == [True, False]
    assert all(r["isolation"]["kind"] == "worktree" for r in records)


def test_the_child_sees_uncommitted_work_and_its_command_output_and_deletion_merge(
    workspace: Path,
) -> None:
    make_repo(workspace, {"app.py": APP, "old.txt": "old\n"})
    (workspace / "app.py").write_text(APP + "# the user's unsaved idea\n")  # uncommitted
    (workspace / "notes.txt").write_text("a draft the user never committed\n")  # untracked
    (workspace / "staged.txt").write_text("staged\n")
    git(workspace, "add", "staged.txt")  # the user's index holds something
    before = user_state(workspace)
    seen: dict[str, bool] = {}

    def merge(request: dict[str, Any]) -> Any:
        seen["untouched"] = (workspace / "old.txt").exists() and not (
            workspace / "out.txt"
        ).exists()
        return calls(call("merge_sub_agent", agent_id=1))

    router = Router(
        main=[calls(create(1, "build", isolation="isolated")), merge, "done"],
        subs={
            1: [
                calls(call("read_file", path="notes.txt"), call("read_file", path="app.py")),
                calls(call("run_command", command="echo built > out.txt && rm old.txt")),
                finish("Built out.txt and removed old.txt, as the task asked."),
            ]
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = isolation_settings(server, "available")
        with Agent(workspace=workspace, settings=settings) as agent:
            assert agent.run("build it").status == "done"
        main = main_requests(server)
        read = "\n".join(sub_tool_texts(server, 1))
    assert "a draft the user never committed" in read and "the user's unsaved idea" in read
    assert seen["untouched"]  # before the merge the workspace had none of it
    created = tool_jsons(main[1])[0]
    assert created["changes"] == {"files": 2, "insertions": 1, "deletions": 1}
    merged = tool_jsons(main[2])[0]
    assert merged["success"] is True and merged["status"] == "merged"
    assert sorted(merged["files"]) == ["old.txt", "out.txt"]
    assert (workspace / "out.txt").read_text() == "built\n"
    assert not (workspace / "old.txt").exists()
    # The user's own work is intact: uncommitted edit, untracked draft, index, HEAD, branch.
    assert (workspace / "app.py").read_text() == APP + "# the user's unsaved idea\n"
    assert (workspace / "notes.txt").read_text() == "a draft the user never committed\n"
    assert user_state(workspace) == before


def test_dry_run_discard_and_the_refusals_of_a_code_started_isolated_sub_agent(
    workspace: Path,
) -> None:
    from agentkit.subagent.isolation_tools import discard_sub_agent_changes, merge_sub_agent

    make_repo(workspace, {"app.py": APP})
    before = user_state(workspace)
    gate = Gate()
    router = Router(
        main=["noted"],  # the rounds its ends start
        subs={
            1: [
                gate.hold(calls(call("write_file", path="app.py", content=APP + "# one\n"))),
                finish("Added the comment line to app.py as the task asked."),
            ],
            2: [
                calls(call("write_file", path="shared.txt", content="shared\n")),
                finish("Wrote shared.txt straight into the workspace as asked."),
            ],
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = isolation_settings(server, "available")
        with Agent(workspace=workspace, settings=settings) as agent:
            manager = agent.manager
            first = agent.spawn("add a line", summary="add a line", isolation="isolated")
            for refused in (merge_sub_agent(manager, 1), discard_sub_agent_changes(manager, 1)):
                assert refused["success"] is False and refused["reason"] == "running", refused
                assert "still running" in refused["error"]
            gate.event.set()
            assert first.result(timeout=60).status == "completed"
            shared = agent.spawn("write shared.txt", summary="shared", isolation="shared")
            assert shared.result(timeout=60).status == "completed"
            assert (workspace / "shared.txt").read_text() == "shared\n"  # shared: at once
            assert merge_sub_agent(manager, 2)["reason"] == "shared"
            assert merge_sub_agent(manager, 9)["reason"] == "unknown"
            assert manager.changes(1).summary() == {"files": 1, "insertions": 1, "deletions": 0}
            assert "+# one" in manager.diff(1)
            dry = merge_sub_agent(manager, 1, dry_run=True)
            assert dry["success"] is True and dry["status"] == "merged" and dry["dry_run"] is True
            assert dry["files"] == ["app.py"]
            assert (workspace / "app.py").read_text() == APP  # nothing written
            assert [u["agent_id"] for u in manager.unmerged()] == [1]
            state = manager.agents[1].isolation
            assert state is not None and state.copy is not None
            worktree = Path(state.copy["worktree"])
            gone = discard_sub_agent_changes(manager, 1)
            assert gone["success"] is True and gone["status"] == "discarded"
            assert not worktree.exists()
            assert git(workspace, "branch", "--list", "agentkit/*") == ""
            for again in (merge_sub_agent(manager, 1), discard_sub_agent_changes(manager, 1)):
                assert again["success"] is False and again["reason"] == "discarded"
            assert manager.unmerged() == []
    assert (workspace / "app.py").read_text() == APP
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    assert record["discarded"] is True and record["merged"] is False
    assert user_state(workspace) == before


def test_always_isolates_every_sub_agent_of_a_plain_folder(workspace: Path) -> None:
    (workspace / "data.txt").write_text("one\n")
    seen: dict[str, Any] = {}

    def merge(request: dict[str, Any]) -> Any:
        seen["data"] = (workspace / "data.txt").read_text()
        seen["report"] = (workspace / "sub_agent_results/agent_1/report.md").read_text()
        return calls(call("merge_sub_agent", agent_id=1))

    router = Router(
        main=[calls(create(1, "edit data")), merge, "done"],
        subs={
            1: [
                calls(
                    call("write_file", path="data.txt", content="one\ntwo\n"),
                    call("write_file", path="sub_agent_results/agent_1/report.md", content="ok\n"),
                ),
                finish("Added the second line to data.txt and wrote the report."),
            ]
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = isolation_settings(server, "always")
        with Agent(workspace=workspace, settings=settings) as agent:
            assert agent.run("edit").status == "done"
            with pytest.raises(SubAgentRefused, match="always"):
                agent.spawn("no", isolation="shared")
        main = main_requests(server)
    create_tool = next(t for t in main[0]["tools"] if t["function"]["name"] == "create_sub_agent")
    assert "isolation" not in create_tool["function"]["parameters"]["properties"]
    assert seen == {"data": "one\n", "report": "ok\n"}  # the deliverables are shared at once
    created = tool_jsons(main[1])[0]
    assert created["changes"] == {"files": 1, "insertions": 1, "deletions": 0}
    merged = tool_jsons(main[2])[0]
    assert merged["success"] is True and merged["files"] == ["data.txt"]
    assert (workspace / "data.txt").read_text() == "one\ntwo\n"
    assert not (workspace / ".git").exists()  # a plain folder stays one


def test_continue_sub_agent_goes_on_in_its_copy_and_after_a_merge_in_a_fresh_one(
    workspace: Path,
) -> None:
    make_repo(workspace, {"log.txt": "start\n"})

    def sub(request: dict[str, Any]) -> Any:
        """Each run appends one line with a command in its copy, then finishes."""
        last = request["messages"][-1]
        if last["role"] == "tool":
            return finish("Appended this run's line to log.txt as asked.")
        runs = sum(
            1
            for m in request["messages"]
            for c in m.get("tool_calls") or ()
            if c["function"]["name"] == "run_command"
        )
        return calls(call("run_command", command=f"echo 'run {runs + 1}' >> log.txt"))

    router = Router(
        main=[
            calls(create(1, "add a line", isolation="isolated")),
            calls(call("continue_sub_agent", agent_id=1, task="add another line")),
            calls(call("merge_sub_agent", agent_id=1)),
            calls(call("continue_sub_agent", agent_id=1, task="add another line")),
            calls(call("merge_sub_agent", agent_id=1)),
            "done",
        ],
        subs={1: [sub]},
    )
    with FakeOpenAIServer(router) as server:
        settings = scripted_settings(
            server, "en", subagent_isolation="available", subagent_control=True
        )
        with Agent(workspace=workspace, settings=settings) as agent:
            assert agent.run("log it").status == "done"
        main = main_requests(server)
    second = tool_jsons(main[2])[0]
    assert second["status"] == "completed", second
    assert second["changes"] == {"files": 1, "insertions": 2, "deletions": 0}  # one copy, both runs
    assert tool_jsons(main[3])[0]["status"] == "merged"
    third = tool_jsons(main[4])[0]
    assert third["changes"] == {"files": 1, "insertions": 1, "deletions": 0}  # a fresh copy
    assert third["merged"] is False
    assert tool_jsons(main[5])[0]["status"] == "merged"
    assert (workspace / "log.txt").read_text() == "start\nrun 1\nrun 2\nrun 3\n"


MAIN_SCRIPT = """
import sys
from pathlib import Path
from agentkit import Agent, Settings

settings = Settings(
    model="fake-model", base_url=sys.argv[2], api_key="k", language="en", max_retries=0,
    retry_base_delay=0.01, retry_total_seconds=0, subagent_isolation="available",
)
with Agent(workspace=Path(sys.argv[1]), settings=settings) as agent:
    print(agent.conversation.id, flush=True)
    agent.run("change app.py in a copy")
"""


def test_a_main_process_killed_after_its_child_finished_reopens_and_merges(
    workspace: Path, tmp_path: Path
) -> None:
    make_repo(workspace, {"app.py": APP})
    before = user_state(workspace)
    child_done, release = threading.Event(), threading.Event()
    reopened = threading.Event()

    def main_agent(request: dict[str, Any]) -> Any:
        results = tool_jsons(request)
        if reopened.is_set():  # the reopened conversation: merge, then say so
            merged = any(r.get("status") == "merged" for r in results)
            return "merged" if merged else calls(call("merge_sub_agent", agent_id=1))
        if not results:
            return calls(create(1, "return 2", isolation="isolated"))
        child_done.set()  # the blocking create returned: the child ended, its copy saved
        release.wait(60)  # the process is killed meanwhile
        return "too late"

    def router(request: dict[str, Any]) -> Any:
        if who(request) is None:
            return main_agent(request)
        if any(m["role"] == "tool" for m in request["messages"]):
            return finish("Changed main to return 2 in app.py as asked.")
        return calls(call("write_file", path="app.py", content=APP.replace("1", "2")))

    with FakeOpenAIServer(router) as server:
        process = start_main(MAIN_SCRIPT, tmp_path, workspace, server.base_url)
        try:
            assert process.stdout is not None
            conversation_id = process.stdout.readline().strip()
            assert child_done.wait(90), "the child never finished"
            os.kill(process.pid, signal.SIGKILL)
            process.wait(30)
        finally:
            release.set()
            if process.poll() is None:
                process.kill()
                process.wait(30)
        assert (workspace / "app.py").read_text() == APP  # nothing merged yet
        reopened.set()
        settings = isolation_settings(server, "available")
        with Agent(
            workspace=workspace, settings=settings, conversation_id=conversation_id
        ) as agent:
            waiting = agent.manager.unmerged()
            assert [(u["agent_id"], u["changes"]) for u in waiting] == [
                (1, {"files": 1, "insertions": 1, "deletions": 1})
            ]
            assert agent.run("merge what agent 1 did").final_text == "merged"
            assert agent.manager.unmerged() == []
    assert (workspace / "app.py").read_text() == APP.replace("1", "2")
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    assert record["merged"] is True
    assert user_state(workspace) == before


def isolation_settings(server: FakeOpenAIServer, mode: str) -> Any:
    """Settings for a main agent and sub-agents played by ``server``, English texts,
    ``subagent_isolation`` ``mode``."""
    return scripted_settings(server, "en", subagent_isolation=mode)


def test_two_isolated_sub_agents_ending_together_are_announced_with_their_counted_changes(
    workspace: Path,
) -> None:
    """Two background isolated sub-agents whose finish_task calls are released
    together: the one notification that announces them carries each one's counted
    changes (1 file, +1 -1), never "could not be counted": an agent is announced only
    once its copy is saved and counted (trial of issue 34: 3 of 3 runs said unknown)."""
    from agentkit.chat import Session

    make_repo(workspace, {"app.py": APP})
    gate = Gate()
    router = Router(
        main=[
            calls(
                create(1, "return 2", isolation="isolated", run_in_background=True),
                create(2, "return 3", isolation="isolated", run_in_background=True),
            ),
            "Both started.",
            "Noted.",
        ],
        subs={
            i: [
                calls(call("write_file", path="app.py", content=APP.replace("1", str(i + 1)))),
                gate.hold(finish(f"Changed main to return {i + 1} in app.py as asked.")),
            ]
            for i in (1, 2)
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = isolation_settings(server, "available")
        with Session(workspace, settings) as session:
            assert session.send("two versions").status == "done"

            def both_held() -> bool:  # each asked for its finish_task reply
                asked = {who(r) for r in server.requests if len(r["messages"]) > 3}
                return {1, 2} <= asked

            assert wait_until(both_held, 60)
            gate.event.set()
            assert session.wait_idle(60)
            notices = [
                m["content"]
                for r in main_requests(server)
                for m in r["messages"]
                if m["role"] in ("user", "system") and "own copy" in str(m["content"])
            ]
    assert notices, "no notification"
    text = "\n".join(dict.fromkeys(notices))
    assert "could not be counted" not in text, text
    for i in (1, 2):
        assert f"Sub-agent {i} (" in text
        assert f"merge_sub_agent(agent_id={i})" in text
    assert text.count("1 files, +1 -1 lines") == 2, text
